"""Topic locks, and whether the process that owns a lock or staging area still runs.

A write holds `<logdir>/.segmentlog-lock-<topic>` (created with O_EXCL) for each topic it
writes, so two writes never touch one topic at once. Lock files and staging directories
record their owner (host, pid, the pid's start time, boot and PID namespace), so that the
next write on the same machine can tell from /proc that a killed driver's leftovers are
dead and remove them.
"""
import json
import os
import shutil
import socket
import time
from typing import List, Optional, Tuple

from .errors import ConcurrentWriteError
from .logdir import LOCK_PREFIX, STAGING_PREFIX

OWNER_FILE = "owner.json"  # inside a staging directory


def lock_path(logdir: str, topic: str) -> str:
    return os.path.join(logdir, LOCK_PREFIX + topic)


def read_lock(path: str) -> dict:
    """A lock file's (or owner file's) content; {} when missing or unreadable."""
    try:
        with open(path, "rb") as handle:
            return json.loads(handle.read().decode("utf-8") or "{}")
    except (OSError, ValueError):
        return {}


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
    with open(os.path.join(staging_dir, OWNER_FILE), "w") as handle:
        json.dump(dict(owner_info(under_jvm), job=job_id), handle)


# ------------------------------------------------------------------------ locks

def acquire_lock(logdir: str, topic: str, job_id: str, mode: str,
                 under_jvm: bool = False) -> str:
    """Create the topic's lock file atomically, or raise ConcurrentWriteError.

    A lock left by a write whose process is gone (killed driver) is taken over, and that
    write's staging directory removed.
    """
    path = lock_path(logdir, topic)
    info = dict(owner_info(under_jvm), job=job_id, mode=mode, topic=topic,
                started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), staging=STAGING_PREFIX + job_id)
    for attempt in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = read_lock(path)
            if holder.get("job") == job_id:
                return path
            if attempt == 0 and holder and owner_alive(holder) is False and \
                    _break_stale_lock(logdir, path, holder):
                continue
            described = ", ".join(f"{k} {holder[k]}" for k in ("job", "mode", "host", "pid",
                                                               "started") if k in holder)
            raise ConcurrentWriteError(
                f"topic {topic!r} in {logdir} is being written by another segmentlog write "
                f"(lock file {path}: {described or 'no details readable'}). Two writes to one "
                f"topic cannot run at once; retry when it has finished. If no such write is "
                f"running any more, delete {path} and its staging directory "
                f"{os.path.join(logdir, holder.get('staging', STAGING_PREFIX + '*'))}"
            ) from None
        try:
            os.write(fd, json.dumps(info).encode("utf-8"))
        finally:
            os.close(fd)
        return path
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
    aside = f"{path}.stale-{os.getpid()}-{time.monotonic_ns()}"
    try:
        os.rename(path, aside)  # atomic: only one breaker gets the file
    except FileNotFoundError:
        return True  # someone else removed it: try to create it again
    if read_lock(aside) != holder:  # a fresh lock slipped in between: put it back
        try:
            os.link(aside, path)
        except FileExistsError:
            pass
        os.unlink(aside)
        return False
    os.unlink(aside)
    staging = holder.get("staging")
    if staging and staging.startswith(STAGING_PREFIX) and os.sep not in staging:
        shutil.rmtree(os.path.join(logdir, staging), ignore_errors=True)
    return True


def clean_dead_writes(logdir: str) -> List[str]:
    """Remove the locks and staging directories of writes whose process is gone (killed
    drivers), as far as that can be known from this machine. Returns what was removed."""
    removed = []
    if not os.path.isdir(logdir):
        return removed
    for name in sorted(os.listdir(logdir)):
        path = os.path.join(logdir, name)
        if name.startswith(LOCK_PREFIX) and ".stale-" not in name:
            holder = read_lock(path)
            if holder and owner_alive(holder) is False and _break_stale_lock(logdir, path, holder):
                removed.append(name)
        elif name.startswith(STAGING_PREFIX) and os.path.isdir(path):
            info = read_lock(os.path.join(path, OWNER_FILE))
            if info and owner_alive(info) is False:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(name)
    return removed
