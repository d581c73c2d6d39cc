"""Topic locks, and whether the process that owns a lock or staging area still runs.

A write holds `<logdir>/.segmentlog-lock-<topic>` for each topic it writes, so two writes
never touch one topic at once. The lock's content is written to a temp file first and
hard-linked into place (atomic, and fails if the lock exists), so a full disk or a kill
never leaves an empty lock behind. Lock files and staging directories
record their owner (host, pid, the pid's start time, boot and PID namespace), so that the
next write on the same machine can tell from /proc that a killed driver's leftovers are
dead and remove them. A dead write's staging directory is removed only once a publish it
was killed in has been finished (or rolled back) from its journal (publish.py).
"""
import errno
import hashlib
import json
import os
import socket
import time
import uuid
from contextlib import contextmanager
from typing import Iterator, List, Optional, Tuple

from .errors import ConcurrentWriteError, raise_out_of_space
from .fsops import REMOVING_MARK, remove_staging, remove_tree
from .logdir import LOCK_PREFIX, STAGING_PREFIX
from .publish import JOURNAL, recover

OWNER_FILE = "owner.json"  # inside a staging directory


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


def read_lock(path: str) -> dict:
    """A lock file's (or owner file's) content; {} when missing, empty or unreadable."""
    try:
        with open(path, "rb") as handle:
            content = json.loads(handle.read().decode("utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return content if isinstance(content, dict) else {}


# -------------------------------------------------------------------- ownership

def _proc_stat(pid: int) -> Optional[Tuple[str, int, int, str]]:
    """(command name, parent pid, start time in clock ticks, state) from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    name = data[data.index("(") + 1 : data.rindex(")")]
    fields = data[data.rindex(")") + 2 :].split()
    return name, int(fields[1]), int(fields[19]), fields[0]


def _pid_space() -> Optional[str]:
    """This boot of this machine and this PID namespace: where a pid means one process."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            boot = handle.read().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return None


def owner_info(under_jvm: bool = False) -> dict:
    """Who a write belongs to: this process, or under Spark (`under_jvm`) the driver JVM
    among its ancestors (Python workers come and go, the JVM lives as long as the job).

    Under Spark with no JVM found, the owner is left unknown, so that its lock is never
    mistaken for a dead write's.
    """
    owner = os.getpid()
    stat = _proc_stat(owner)
    if under_jvm:
        cursor, found = stat, None
        for _ in range(8):
            if cursor is None or cursor[1] <= 1:
                break
            parent = cursor[1]
            cursor = _proc_stat(parent)
            if cursor is not None and cursor[0] == "java":
                found = (parent, cursor)
                break
        owner, stat = found if found is not None else (owner, None)
    return {"host": socket.gethostname(), "pid": owner,
            "pid_start": stat[2] if stat is not None else None, "pid_space": _pid_space()}


def owner_alive(info: dict) -> Optional[bool]:
    """Whether the process that owns a lock or staging area still runs; None when that
    cannot be known from here (another host, boot or PID namespace, or no /proc)."""
    space = _pid_space()
    if space is None or info.get("pid_space") != space or \
            info.get("host") != socket.gethostname() or not info.get("pid") or \
            info.get("pid_start") is None:
        return None
    stat = _proc_stat(int(info["pid"]))
    # a killed process stays in /proc as a zombie until its parent reaps it
    return stat is not None and stat[2] == info["pid_start"] and stat[3] not in ("Z", "X")


def write_owner_file(staging_dir: str, job_id: str, under_jvm: bool = False) -> None:
    """Put the owner file in place whole (a temp file renamed), so that a staging directory
    has a readable owner or none (see clean_dead_writes)."""
    path = os.path.join(staging_dir, OWNER_FILE)
    content = json.dumps(dict(owner_info(under_jvm), job=job_id)).encode("utf-8")
    temp = f"{path}{_TEMP_MARK}{uuid.uuid4().hex[:8]}"
    try:
        try:
            fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            try:
                _write_all(fd, content)
            finally:
                os.close(fd)
            os.rename(temp, path)
        finally:
            _unlink(temp)
    except OSError as exc:
        raise_out_of_space(exc, path)
        raise


# ------------------------------------------------------------------------ locks

# A lock file without a readable owner is one whose writer failed (disk full, killed)
# before its content was complete. Locks are linked into place whole, so a live writer's
# lock is never seen so; one created by the O_EXCL fallback may be, for microseconds. Past
# this age such a lock is taken over.
TORN_LOCK_SECONDS = 30.0
_TEMP_MARK = "~tmp-"  # '~' is not in topic names, so a temp file never names a lock


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _create_lock(path: str, content: bytes) -> bool:
    """Put a complete lock file at `path`; False if one is there. On any error (a full
    disk: OutOfSpaceError), nothing is left behind."""
    try:
        return _link_lock(path, content)
    except OSError as exc:
        raise_out_of_space(exc, path)
        raise


def _link_lock(path: str, content: bytes) -> bool:
    temp = f"{path}{_TEMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        try:
            _write_all(fd, content)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)  # atomic, and fails if the lock exists
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
        # No hard links on this filesystem: create in place, and undo a failed write.
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            try:
                _write_all(fd, content)
            finally:
                os.close(fd)
        except BaseException:
            _unlink(path)
            raise
        return True
    finally:
        _unlink(temp)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _torn_lock_age(path: str, holder: dict) -> Optional[float]:
    """Seconds since a lock without a readable owner was made; None if it has an owner
    (or is gone)."""
    if holder.get("job") and holder.get("host"):
        return None
    try:
        return max(0.0, time.time() - os.stat(path).st_mtime)
    except FileNotFoundError:
        return None


def _is_stale(path: str, holder: dict) -> bool:
    """A lock nobody will release: its owner is gone, or it is torn and old enough."""
    age = _torn_lock_age(path, holder)
    if age is not None:
        return age >= TORN_LOCK_SECONDS
    return bool(holder) and owner_alive(holder) is False


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


CHECKPOINTS_LOCK = LOCK_PREFIX + ".checkpoints"
CHECKPOINTS_LOCK_WAIT_SECONDS = 60.0


@contextmanager
def checkpoints_lock(logdir: str,
                     wait_seconds: float = CHECKPOINTS_LOCK_WAIT_SECONDS) -> Iterator[str]:
    """Hold the log dir's checkpoint lock, waiting while another publish holds it.

    Its owner is this process (it is held only while this process updates the files): one
    a killed process left is taken over once that process is gone, as a topic lock is.
    """
    path = os.path.join(logdir, CHECKPOINTS_LOCK)
    job = f"checkpoints-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    content = json.dumps(dict(owner_info(), job=job, mode="checkpoints")).encode("utf-8")
    deadline = time.monotonic() + wait_seconds
    pause = 0.001
    while not _create_lock(path, content):
        holder = read_lock(path)
        if _is_stale(path, holder) and _break_stale_lock(logdir, path, holder):
            continue
        if time.monotonic() > deadline:
            described = ", ".join(f"{k} {holder[k]}" for k in ("host", "pid") if k in holder)
            raise ConcurrentWriteError(
                f"the checkpoint files of {logdir} stayed locked for {wait_seconds:.0f} s by "
                f"{path} ({described or 'no owner readable'}); another write is updating "
                f"them, or one on another machine was killed doing so: if no write is "
                f"running, delete {path}"
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    try:
        yield path
    finally:
        if read_lock(path).get("job") == job:
            _unlink(path)


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
    try:
        judged = os.stat(path).st_ino
    except FileNotFoundError:
        return True  # someone else removed it: try to create it again
    aside = f"{path}.stale-{os.getpid()}-{time.monotonic_ns()}"
    try:
        os.rename(path, aside)  # atomic: only one breaker gets the file
    except FileNotFoundError:
        return True
    if os.stat(aside).st_ino != judged or read_lock(aside) != holder:
        # a fresh lock slipped in between: put it back
        try:
            os.link(aside, path)
        except FileExistsError:
            pass
        os.unlink(aside)
        return False
    os.unlink(aside)
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
