"""What a write finds in the log dir: topics, partition counts, partition tails, locks.

Nothing here changes data: it lists `<topic>-<partition>` directories, checks that a
partition's last segment can be continued (complete last batch with a valid CRC, indexes
trimmed), takes fingerprints to notice concurrent changes, and manages the per-topic
lock files that keep two writes off the same topic.
"""
import errno
import json
import os
import re
import shutil
import socket
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..errors import CorruptLogError, SegmentLogError
from ..format.indexes import OFFSET_ENTRY, TIME_ENTRY, OffsetIndex, TimeIndex
from ..format.log import PartitionLog, SEGMENT_NAME, parse_partition_dir_name, partition_dir_name
from ..format.entries import read_entry_header, verify_checksum

from .errors import ConcurrentWriteError, InvalidInputError, InvalidOptionError, TopicLayoutError

LOCK_PREFIX = ".segmentlog-lock-"
STAGING_PREFIX = ".segmentlog-staging-"
OWNER_FILE = "owner.json"
MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(topic, source: str = "option 'topic'") -> str:
    """Kafka's topic name rules, plus: no leading '.' (readers skip dot-prefixed dirs)."""
    if not isinstance(topic, str) or not topic:
        raise InvalidInputError(f"{source}: a topic name must be a non-empty string, got {topic!r}")
    if topic in (".", ".."):
        raise InvalidInputError(f"{source}: topic name {topic!r} is not allowed by Kafka")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidInputError(
            f"{source}: topic name {topic[:40]!r}... is {len(topic)} characters; Kafka allows "
            f"{MAX_TOPIC_LENGTH}"
        )
    if not _LEGAL_TOPIC.match(topic):
        raise InvalidInputError(
            f"{source}: topic name {topic!r} has characters Kafka does not allow "
            f"(only ASCII letters, digits, '.', '_' and '-')"
        )
    if topic.startswith("."):
        raise InvalidInputError(
            f"{source}: topic name {topic!r} starts with '.'; segmentlog keeps dot-prefixed "
            f"names for staging areas that readers skip"
        )
    return topic


def list_topics(logdir: str) -> Dict[str, List[int]]:
    """Partitions of each topic found as `<topic>-<partition>` directories (sorted)."""
    topics: Dict[str, List[int]] = {}
    if not os.path.isdir(logdir):
        return topics
    for name in os.listdir(logdir):
        if name.startswith("."):
            continue
        parsed = parse_partition_dir_name(name)
        if parsed is None or not os.path.isdir(os.path.join(logdir, name)):
            continue
        topics.setdefault(parsed[0], []).append(parsed[1])
    for partitions in topics.values():
        partitions.sort()
    return topics


def partition_count(logdir: str, topic: str, partitions: List[int]) -> int:
    """The topic's partition count; its directories must be partitions 0..n-1."""
    expected = list(range(len(partitions)))
    if partitions != expected:
        missing = sorted(set(range(max(partitions) + 1)) - set(partitions))
        raise TopicLayoutError(
            f"topic {topic!r} in {logdir} has partition directories {partitions}; "
            f"partition(s) {missing} are missing, so its partition count is unknown"
        )
    return len(partitions)


def partition_dir(logdir: str, topic: str, partition: int) -> str:
    return os.path.join(logdir, partition_dir_name(topic, partition))


# ----------------------------------------------------------------- fingerprints

def partition_fingerprint(path: str) -> Optional[Tuple]:
    """What changes when anything appends to, rolls, replaces or deletes the partition."""
    try:
        dir_stat = os.stat(path)
        logs = sorted(name for name in os.listdir(path)
                      if name.endswith(".log") and SEGMENT_NAME.match(name))
    except FileNotFoundError:
        return None
    last = None
    if logs:
        try:
            st = os.stat(os.path.join(path, logs[-1]))
            last = (st.st_ino, st.st_size)
        except FileNotFoundError:
            last = None
    return (dir_stat.st_ino, tuple(logs), last)


def topic_fingerprint(logdir: str, topic: str, partitions: List[int]) -> Dict[int, Tuple]:
    return {p: partition_fingerprint(partition_dir(logdir, topic, p)) for p in partitions}


# ---------------------------------------------------------------------- tails

@dataclass
class PartitionTail:
    directory: str
    log_end_offset: int
    leader_epoch: int  # of the last batch, -1 when unknown
    last_segment_base: Optional[int]  # None when the directory has no segment
    last_segment_size: int


def inspect_tail(directory: str) -> PartitionTail:
    """Check that the partition can be continued and find its log end offset.

    Refuses a last segment whose indexes are still preallocated (a live broker's active
    segment), one that ends in a torn or partial batch, and one whose last batch fails
    its CRC.
    """
    try:
        log = PartitionLog.open(directory)
    except SegmentLogError as exc:
        raise TopicLayoutError(f"cannot append to {directory}: {exc}") from exc
    if not log.segments:
        return PartitionTail(directory, 0, -1, None, 0)
    segment = log.segments[-1]
    for path, entry_size, parse in ((segment.index_path, OFFSET_ENTRY.size, OffsetIndex.parse),
                                    (segment.time_index_path, TIME_ENTRY.size, TimeIndex.parse)):
        if not os.path.exists(path):
            continue
        with open(path, "rb") as handle:
            data = handle.read()
        try:
            entries = len(parse(data, segment.base_offset, path=path))
        except CorruptLogError as exc:
            raise TopicLayoutError(f"cannot append to {directory}: {exc}") from exc
        if len(data) != entries * entry_size:
            raise TopicLayoutError(
                f"cannot append to {directory}: {os.path.basename(path)} is {len(data)} bytes "
                f"for {entries} entries, i.e. still preallocated. This is the active segment "
                f"of a running (or uncleanly stopped) Kafka broker; stop the broker cleanly "
                f"(or let it recover the log) before appending with segmentlog"
            )
    end_offset, epoch = _scan_tail(directory, segment, log)
    if end_offset is None:  # empty last segment: the log end offset is its base offset
        end_offset = segment.base_offset
        for earlier in reversed(log.segments[:-1]):
            _, epoch = _scan_tail(directory, earlier, log, quiet=True)
            if epoch is not None:
                break
    return PartitionTail(directory, end_offset, -1 if epoch is None else epoch,
                         segment.base_offset, segment.size)


def _scan_tail(directory, segment, log, quiet=False):
    """(log end offset, leader epoch of the last batch) of one segment; (None, None) if empty."""
    if segment.size == 0:
        return None, None
    try:
        segment.offset_index
    except CorruptLogError as exc:
        if quiet:
            return None, None
        raise TopicLayoutError(f"cannot append to {directory}: {exc}") from exc
    try:
        last = segment.last_entry(allow_torn_tail=False)
    except CorruptLogError as exc:
        if quiet:
            return None, None
        raise TopicLayoutError(
            f"cannot append to {directory}: its last segment {os.path.basename(segment.log_path)} "
            f"does not end with a complete batch ({exc.reason}). A broker would truncate it "
            f"during recovery; restore or recover the partition before appending"
        ) from exc
    if last is None:
        return None, None
    with open(segment.log_path, "rb") as handle:
        data = os.pread(handle.fileno(), last.size, last.position)
    try:
        verify_checksum(data, 0, read_entry_header(data, 0, last.position, segment.log_path),
                        segment.log_path)
    except CorruptLogError as exc:
        if quiet:
            return last.last_offset + 1, None
        raise TopicLayoutError(
            f"cannot append to {directory}: the last batch of its log is damaged ({exc})"
        ) from exc
    epoch = last.partition_leader_epoch if last.magic == 2 else -1
    return last.last_offset + 1, epoch


# ---------------------------------------------------------------------- locks

def lock_path(logdir: str, topic: str) -> str:
    return os.path.join(logdir, LOCK_PREFIX + topic)


def _proc_stat(pid: int) -> Optional[Tuple[str, int, int]]:
    """(command name, parent pid, start time in clock ticks) from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    name = data[data.index("(") + 1 : data.rindex(")")]
    fields = data[data.rindex(")") + 2 :].split()
    return name, int(fields[1]), int(fields[19])


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


def _pid_space() -> Optional[str]:
    """This boot of this machine and this PID namespace: where a pid means one process."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            boot = handle.read().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return None


def owner_alive(info: dict) -> Optional[bool]:
    """Whether the process that owns a lock or staging area still runs; None when that
    cannot be known from here (another host, boot or PID namespace, or no /proc)."""
    space = _pid_space()
    if space is None or info.get("pid_space") != space or \
            info.get("host") != socket.gethostname() or not info.get("pid") or \
            info.get("pid_start") is None:
        return None
    stat = _proc_stat(int(info["pid"]))
    return stat is not None and stat[2] == info["pid_start"]


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


def write_owner_file(staging_dir: str, job_id: str, under_jvm: bool = False) -> None:
    with open(os.path.join(staging_dir, OWNER_FILE), "w") as handle:
        json.dump(dict(owner_info(under_jvm), job=job_id), handle)


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


def read_lock(path: str) -> dict:
    try:
        with open(path, "rb") as handle:
            return json.loads(handle.read().decode("utf-8") or "{}")
    except (OSError, ValueError):
        return {}


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


# ------------------------------------------------------------------ directories

def rename_exchange(a: str, b: str) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    func = _renameat2()
    if func is None:
        return False
    import ctypes

    result = func(-100, os.fsencode(a), -100, os.fsencode(b), 2)  # AT_FDCWD, RENAME_EXCHANGE
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), a, None, b)


_RENAMEAT2 = []


def _renameat2():
    if not _RENAMEAT2:
        func = None
        try:
            import ctypes
            import ctypes.util

            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            func = libc.renameat2
            func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                             ctypes.c_uint]
            func.restype = ctypes.c_int
        except (OSError, AttributeError):
            func = None
        _RENAMEAT2.append(func)
    return _RENAMEAT2[0]


def check_num_partitions(option_value: Optional[int], topic: str, existing: int) -> None:
    if option_value is not None and option_value != existing:
        raise InvalidOptionError(
            f"option 'numPartitions' is {option_value} but topic {topic!r} already has "
            f"{existing} partitions; appending cannot change a topic's partition count "
            f"(drop the option, or use mode 'overwrite' to rewrite the topic)"
        )
