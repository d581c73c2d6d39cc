"""Lock files and their owners: who a lock or staging area belongs to, whether that
process still runs, and lock files put in place whole.

A lock's content is written to a temp file first and hard-linked into place (atomic, and
fails if the lock exists), so a full disk or a kill never leaves an empty lock behind. Lock
files and staging directories record their owner (host, pid, the pid's start time, boot
and PID namespace), so that the next write on the same machine can tell from /proc that a
killed driver's leftovers are dead. locks.py builds the topic locks and the cleaning of
dead writes on this; the checkpoint files' lock is here, beneath the publish that
checkpointing.py is part of.
"""
import errno
import json
import os
import socket
import time
import uuid
from contextlib import contextmanager
from typing import Iterator, Optional, Tuple

from .errors import ConcurrentWriteError, raise_out_of_space
from .logdir import LOCK_PREFIX

OWNER_FILE = "owner.json"  # inside a staging directory


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


def set_aside_stale_lock(path: str, holder: dict) -> bool:
    """Remove the stale lock at `path` that was read as `holder`; False if someone was
    faster (a fresh lock slipped in, and stays)."""
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
    return True


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
        if _is_stale(path, holder) and set_aside_stale_lock(path, holder):
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
