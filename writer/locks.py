"""Topic locks, and the cleaning of dead writes' leftovers.

A write holds `<logdir>/.segmentlog-lock-<topic>` for each topic it writes, so two writes
never touch one topic at once. Lock files, their owners and whether an owner still runs
are lockfiles.py's. A dead write's lock is taken over, and its staging directory removed
only once a publish it was killed in has been finished (or rolled back) from its journal
(publish.py).
"""
import hashlib
import json
import os
import time
from typing import List

from .errors import ConcurrentWriteError
from .fsops import REMOVING_MARK, remove_staging, remove_tree
from .lockfiles import (
    OWNER_FILE, TORN_LOCK_SECONDS, _TEMP_MARK, _create_lock, _is_stale, _torn_lock_age,
    _unlink, owner_alive, owner_info, read_lock, set_aside_stale_lock,
)
from .logdir import LOCK_PREFIX, STAGING_PREFIX
from .publish import JOURNAL, recover

# A file name has at most NAME_MAX bytes (255 on Linux and macOS). A lock's name is
# `.segmentlog-lock-<topic>` while that leaves room for what is appended to it (a temp
# file's `~tmp-<pid>-<hex>`, a stale lock set aside's `.stale-<pid>-<ns>`); a longer topic
# (Kafka allows 249 characters) keeps its first characters and a digest of the whole name,
# after a '~', which no topic holds. The lock's content names the topic in full.
NAME_MAX = 255
_LOCK_SUFFIX_ROOM = 48
_LONGEST_LOCK_NAME = NAME_MAX - _LOCK_SUFFIX_ROOM
_DIGEST_CHARS = 32


def lock_name(topic: str) -> str:
    name = LOCK_PREFIX + topic
    if len(name.encode("utf-8")) <= _LONGEST_LOCK_NAME:
        return name
    digest = hashlib.sha256(topic.encode("utf-8")).hexdigest()[:_DIGEST_CHARS]
    kept = _LONGEST_LOCK_NAME - len(LOCK_PREFIX) - 1 - _DIGEST_CHARS
    return f"{LOCK_PREFIX}{topic[:kept]}~{digest}"


def lock_path(logdir: str, topic: str) -> str:
    return os.path.join(logdir, lock_name(topic))


# ------------------------------------------------------------------------ locks

def acquire_lock(logdir: str, topic: str, job_id: str, mode: str,
                 under_jvm: bool = False) -> str:
    """Create the topic's lock file atomically, or raise ConcurrentWriteError.

    A lock left by a write whose process is gone (killed driver) is taken over, and that
    write's staging directory removed; so is a torn lock (no readable owner) older than
    TORN_LOCK_SECONDS.
    """
    path = lock_path(logdir, topic)
    info = dict(owner_info(under_jvm), job=job_id, mode=mode, topic=topic,
                started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), staging=STAGING_PREFIX + job_id)
    content = json.dumps(info).encode("utf-8")
    for attempt in range(3):
        if _create_lock(path, content):
            return path
        holder = read_lock(path)
        if holder.get("job") == job_id:
            return path
        if attempt < 2 and _is_stale(path, holder) and _break_stale_lock(logdir, path, holder):
            continue
        if not os.path.lexists(path) and attempt < 2:
            continue  # released in between
        age = _torn_lock_age(path, holder)
        if age is not None:
            raise ConcurrentWriteError(
                f"topic {topic!r} in {logdir} is locked by {path}, which has no readable "
                f"owner: a write is creating it, or one failed while creating it (a full "
                f"disk). It is taken over once it is {TORN_LOCK_SECONDS:.0f} s old (now "
                f"{age:.0f} s); retry then, or delete it if no write is running"
            ) from None
        described = ", ".join(f"{k} {holder[k]}" for k in ("job", "mode", "host", "pid",
                                                           "started") if k in holder)
        raise ConcurrentWriteError(
            f"topic {topic!r} in {logdir} is being written by another segmentlog write "
            f"(lock file {path}: {described or 'no details readable'}). Two writes to one "
            f"topic cannot run at once; retry when it has finished. If no such write is "
            f"running any more, delete {path} and its staging directory "
            f"{os.path.join(logdir, holder.get('staging', STAGING_PREFIX + '*'))}"
        ) from None
    raise ConcurrentWriteError(f"could not take the lock {path}")  # pragma: no cover


def release_lock(logdir: str, topic: str, job_id: str) -> bool:
    """Delete the topic's lock file if this job holds it."""
    path = lock_path(logdir, topic)
    if read_lock(path).get("job") != job_id:
        return False
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def _break_stale_lock(logdir: str, path: str, holder: dict) -> bool:
    """Remove a dead write's lock (and staging directory); False if someone was faster."""
    if not set_aside_stale_lock(path, holder):
        return False
    staging = holder.get("staging")
    if staging and staging.startswith(STAGING_PREFIX) and os.sep not in staging:
        remove_dead_staging(logdir, os.path.join(logdir, staging))
    return True


def remove_dead_staging(logdir: str, staging: str) -> None:
    """Remove a dead write's staging directory, first finishing (or rolling back, as its
    journal says) a publish it was killed in."""
    recover(staging, logdir)
    remove_staging(staging)


def recover_dead_publishes(logdir: str) -> List[str]:
    """Settle the publishes that dead writes left half done (their journals), leaving
    their locks and staging directories to `clean_dead_writes`."""
    settled = []
    names = sorted(os.listdir(logdir))
    for name in names:
        path = os.path.join(logdir, name)
        if name.startswith(STAGING_PREFIX) and REMOVING_MARK not in name and \
                os.path.exists(os.path.join(path, JOURNAL)):
            info = read_lock(os.path.join(path, OWNER_FILE))
            if not info:
                continue
            alive = owner_alive(info)
            if alive is None:
                # another machine's write: a live one holds its locks while publishing, so
                # one whose locks are gone (deleted as the lock error says) is dead
                holders = {read_lock(os.path.join(logdir, n)).get("job") for n in names
                           if n.startswith(LOCK_PREFIX)}
                alive = info.get("job") in holders
            if alive is False and recover(path, logdir):
                settled.append(name)
    return settled


def _ownerless_age(staging: str) -> float:
    """Seconds since a staging directory without a readable owner file last changed."""
    try:
        return max(0.0, time.time() - os.stat(staging).st_mtime)
    except FileNotFoundError:
        return 0.0


def clean_dead_writes(logdir: str) -> List[str]:
    """Remove the locks and staging directories of writes whose process is gone (killed
    drivers), as far as that can be known from this machine. Returns what was removed."""
    removed = []
    if not os.path.isdir(logdir):
        return removed
    for name in sorted(os.listdir(logdir)):
        path = os.path.join(logdir, name)
        if name.startswith(LOCK_PREFIX) and _TEMP_MARK in name:
            # a lock's content, never linked: its writer was killed in between
            holder = read_lock(path)
            if _is_stale(path, holder):
                _unlink(path)
                removed.append(name)
        elif name.startswith(LOCK_PREFIX) and ".stale-" not in name:
            holder = read_lock(path)
            if _is_stale(path, holder) and _break_stale_lock(logdir, path, holder):
                removed.append(name)
        elif name.startswith(STAGING_PREFIX) and REMOVING_MARK in name:
            remove_tree(path)  # its deletion was begun, by a process since killed
            removed.append(name)
        elif name.startswith(STAGING_PREFIX) and os.path.isdir(path):
            info = read_lock(os.path.join(path, OWNER_FILE))
            if info and owner_alive(info) is False:
                remove_dead_staging(logdir, path)
                removed.append(name)
            elif not info and _ownerless_age(path) >= TORN_LOCK_SECONDS:
                # a live write puts its owner file in right after creating the directory:
                # this one's writer was killed in between
                remove_dead_staging(logdir, path)
                removed.append(name)
    return removed
