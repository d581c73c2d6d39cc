"""The job side of a write: start (checks, lock, staging), commit (offsets, segments,
indexes, publish) and abort.

Layout inside the log dir while a write runs:

    .segmentlog-lock-<topic>            one per topic being written (O_EXCL lock file)
    .segmentlog-staging-<job>/          the job's private area; readers skip dot-names
        task-*.batches                  each task attempt's encoded batches
        publish/<topic>-<partition>/    finished segments and indexes, built at commit
        trash/                          what an overwrite replaced, until deleted

Commit orders the tasks' outputs by task index, gives each partition contiguous offsets
from its log end offset, rolls segments and places index entries as a broker does
(`segments.plan_segments`), copies the batches into final segment files (patching only
baseOffset and partitionLeaderEpoch, which the CRC does not cover), and then publishes
with renames: index files before their `.log` for new segments of existing partitions,
whole partition directories for new topics, and an atomic directory exchange per
partition for overwrites. A failure before the last rename undoes the renames done so
far; abort and every failure remove the staging directory.
"""
import errno
import os
import shutil
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np

from ..format.v2_encode import patch_batch_headers, placement_fields
from ..format.log import INDEX_SUFFIX, LOG_SUFFIX, SEGMENT_NAME, \
    TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, partition_dir_name, segment_file_name

from .errors import ConcurrentWriteError, InvalidInputError, InvalidOptionError, \
    WriteAbortedError, WriteError
from .input import InputLayout
from .logdir import (
    STAGING_PREFIX, acquire_lock, check_num_partitions, inspect_tail, list_topics,
    partition_count, partition_dir, release_lock, clean_dead_writes, rename_exchange,
    topic_fingerprint, validate_topic_name, write_owner_file,
)
from .options import WriteOptions
from .segments import SegmentPlan, plan_segments
from .task import PartitionBatches, TaskResult, TaskSpec

MODES = ("append", "overwrite")
COPY_CHUNK = 16 << 20
DEFAULT_LEADER_EPOCH = 0


@dataclass
class PartitionSummary:
    topic: str
    partition: int
    start_offset: int  # first offset written
    end_offset: int  # log end offset after the write
    records: int
    segments: List[int]  # base offsets of the segments written


@dataclass
class CommitSummary:
    """What a committed write added, per topic-partition."""

    logdir: str
    mode: str
    partitions: List[PartitionSummary] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    def offsets(self) -> Dict[Tuple[str, int], Tuple[int, int]]:
        return {(p.topic, p.partition): (p.start_offset, p.end_offset) for p in self.partitions}


class WriteJob:
    """One write into one log dir: created on the driver, picklable, committed once."""

    def __init__(self, logdir: str, *, mode: str = "append", topic: Optional[str] = None,
                 options: Optional[WriteOptions] = None, layout: Optional[InputLayout] = None,
                 write_time_ms: Optional[int] = None, under_jvm: bool = False):
        """`under_jvm`: the job runs in Spark, whose driver JVM owns it (see logdir.owner_info)."""
        if mode not in MODES:
            raise InvalidOptionError(
                f"save mode {mode!r} is not supported; segmentlog writes take 'append' or "
                f"'overwrite'"
            )
        if not logdir:
            raise InvalidOptionError("no log dir given: pass a path (df.write...save(path))")
        self.logdir = os.path.abspath(os.path.expanduser(str(logdir)))
        self.mode = mode
        self.topic = validate_topic_name(topic) if topic is not None else None
        self.options = options or WriteOptions()
        self.layout = layout
        self.write_time_ms = int(time.time() * 1000) if write_time_ms is None else write_time_ms
        self.job_id = time.strftime("%Y%m%d%H%M%S") + "-" + uuid.uuid4().hex[:12]
        self.staging_dir = os.path.join(self.logdir, STAGING_PREFIX + self.job_id)
        self.held_locks: List[str] = []
        self.under_jvm = under_jvm
        self.created_logdir = False
        self.finished = False

        if os.path.exists(self.logdir) and not os.path.isdir(self.logdir):
            raise InvalidOptionError(f"{self.logdir} exists and is not a directory")
        if os.path.isdir(self.logdir) and any(SEGMENT_NAME.match(n) for n in os.listdir(self.logdir)):
            raise InvalidOptionError(
                f"{self.logdir} holds segment files: it is a partition directory, not a log "
                f"dir. Write to the directory that holds the <topic>-<partition> directories "
                f"({os.path.dirname(self.logdir)})"
            )
        existing = list_topics(self.logdir)
        self.existing_partitions = existing
        # Fingerprints of what this write may touch, to notice concurrent changes at commit.
        watched = [self.topic] if self.topic is not None else list(existing)
        self.fingerprints = {
            t: topic_fingerprint(self.logdir, t, existing[t]) for t in watched if t in existing
        }
        self.spec = TaskSpec(self.job_id, self.logdir, self.staging_dir, mode, self.options,
                             self.topic, existing, self.write_time_ms, layout)
        if self.topic is not None:
            self._check_topic_at_start(self.topic)

        try:
            if not os.path.isdir(self.logdir):
                os.makedirs(self.logdir)
                self.created_logdir = True
            else:
                clean_dead_writes(self.logdir)
            if self.topic is not None:
                acquire_lock(self.logdir, self.topic, self.job_id, mode, under_jvm)
                self.held_locks.append(self.topic)
            os.mkdir(self.staging_dir)
            write_owner_file(self.staging_dir, self.job_id, under_jvm)
        except BaseException:
            self.abort()
            raise

    def _check_topic_at_start(self, topic: str) -> None:
        """Errors that need no data: partition counts and the state of existing partitions."""
        count = self.spec.partition_count(topic)  # raises on gaps and numPartitions mismatch
        existing = self.existing_partitions.get(topic)
        if count is None and not (self.layout is not None and self.layout.has_partition):
            raise InvalidOptionError(
                f"topic {topic!r} does not exist in {self.logdir}: set the 'numPartitions' "
                f"option to create it"
            )
        if existing and self.mode == "append":
            for partition in existing:
                inspect_tail(partition_dir(self.logdir, topic, partition))

    # --------------------------------------------------------------------- tasks
    def task_writer(self, task_index: int = 0, attempt: int = 0):
        from .task import TaskWriter

        self._check_open()
        return TaskWriter(self.spec, task_index, attempt)

    def _check_open(self):
        if self.finished:
            raise WriteAbortedError(f"write {self.job_id} has already been committed or aborted")

    # -------------------------------------------------------------------- commit
    def commit(self, results: Iterable[Optional[TaskResult]]) -> CommitSummary:
        """Publish the tasks' batches. All or nothing: on error the log dir is unchanged."""
        self._check_open()
        if not os.path.isdir(self.staging_dir):
            raise WriteAbortedError(
                f"the staging directory {self.staging_dir} of this write is gone; it was "
                f"aborted or already committed"
            )
        chosen: Dict[int, TaskResult] = {}
        for result in results:
            if result is None:
                continue
            if result.job_id != self.job_id:
                raise WriteError(f"a task result of write {result.job_id} reached write {self.job_id}")
            chosen.setdefault(result.task_index, result)  # one attempt per task
        ordered = [chosen[i] for i in sorted(chosen)]
        topics = {topic for r in ordered for (topic, _) in r.partitions}
        topics |= {topic for r in ordered for topic in r.topic_counts}
        if self.topic is not None:
            topics.add(self.topic)
        locked_here = []
        try:
            for topic in sorted(topics):
                if topic not in self.held_locks:
                    acquire_lock(self.logdir, topic, self.job_id, self.mode, self.under_jvm)
                    locked_here.append(topic)
            self._check_unchanged(sorted(topics))
            publish_root = os.path.join(self.staging_dir, "publish")
            os.makedirs(publish_root, exist_ok=True)
            summary = CommitSummary(self.logdir, self.mode)
            actions: List[_Action] = []
            for topic in sorted(topics):
                self._prepare_topic(topic, ordered, publish_root, summary, actions)
            self._publish(actions)
            self.finished = True
            return summary
        finally:
            for topic in locked_here:
                release_lock(self.logdir, topic, self.job_id)
            if self.finished:
                self._cleanup()

    def _check_unchanged(self, topics: List[str]) -> None:
        now = list_topics(self.logdir)
        for topic in topics:
            before = self.fingerprints.get(topic)
            partitions = now.get(topic, [])
            if topic not in self.existing_partitions:
                if partitions:
                    raise ConcurrentWriteError(
                        f"topic {topic!r} was created in {self.logdir} by someone else while "
                        f"this write ran; nothing was written"
                    )
                continue
            current = topic_fingerprint(self.logdir, topic, partitions)
            if before is not None and current != before:
                raise ConcurrentWriteError(
                    f"topic {topic!r} in {self.logdir} changed while this write ran (another "
                    f"writer appended to, rolled or replaced its partitions); nothing was written"
                )

    # ------------------------------------------------------------- preparation
    def _topic_count(self, topic: str, ordered: List[TaskResult]) -> int:
        count = self.spec.partition_count(topic)
        highest = max((r.max_partition.get(topic, -1) for r in ordered), default=-1)
        for result in ordered:
            used = result.topic_counts.get(topic)
            if used is not None and count is not None and used != count:
                raise ConcurrentWriteError(
                    f"tasks wrote topic {topic!r} for {used} partitions but it has {count}"
                )
        if count is None:
            if highest < 0:
                raise InvalidOptionError(
                    f"topic {topic!r} does not exist in {self.logdir}: set the 'numPartitions' "
                    f"option to create it"
                )
            count = highest + 1
        if highest >= count:
            raise InvalidInputError(
                f"column 'partition' holds {highest} for topic {topic!r}, which has {count} "
                f"partitions"
            )
        return count

    def _prepare_topic(self, topic, ordered, publish_root, summary, actions) -> None:
        count = self._topic_count(topic, ordered)
        existing = self.existing_partitions.get(topic, [])
        appending = self.mode == "append" and bool(existing)
        if appending:
            check_num_partitions(count, topic, partition_count(self.logdir, topic, existing))
        options = self.options
        for partition in range(count):
            pieces = [(r.file, r.partitions[(topic, partition)]) for r in ordered
                      if (topic, partition) in r.partitions]
            target = partition_dir(self.logdir, topic, partition)
            staged = os.path.join(publish_root, partition_dir_name(topic, partition))
            if appending:
                if not pieces:
                    continue
                tail = inspect_tail(target)
                start, epoch = tail.log_end_offset, tail.leader_epoch
                if epoch < 0:
                    epoch = DEFAULT_LEADER_EPOCH
            else:
                start, epoch = 0, DEFAULT_LEADER_EPOCH
            sizes, counts, max_ts, file_ids, file_names, positions = _concat(pieces)
            plans = plan_segments(
                start, sizes, counts, max_ts, segment_bytes=options.segment_bytes,
                segment_ms=options.segment_ms, segment_index_bytes=options.segment_index_bytes,
                index_interval_bytes=options.index_interval_bytes,
            )
            os.makedirs(staged)
            if not plans:  # a partition of a new or rewritten topic that got no rows
                plans = [SegmentPlan(start, 0, 0, 0, start)]
            offsets = np.empty(len(sizes), dtype=np.int64)
            if len(sizes):
                offsets[0] = start
                np.cumsum(counts[:-1], out=offsets[1:])
                offsets[1:] += start
            for plan in plans:
                self._write_segment(staged, plan, file_ids, file_names, positions, sizes,
                                    offsets, epoch)
            summary.partitions.append(PartitionSummary(
                topic, partition, start, plans[-1].next_offset, int(counts.sum()),
                [p.base_offset for p in plans],
            ))
            if appending:
                actions.append(_AppendSegments(staged, target, [p.base_offset for p in plans]))
            elif existing and partition in existing:
                actions.append(_ReplaceDir(staged, target, self._trash(topic, partition)))
            else:
                actions.append(_NewDir(staged, target))
        if not appending and existing:
            for partition in existing:
                if partition >= count:  # an overwrite with fewer partitions
                    actions.append(_RemoveDir(partition_dir(self.logdir, topic, partition),
                                              self._trash(topic, partition)))

    def _trash(self, topic: str, partition: int) -> str:
        trash = os.path.join(self.staging_dir, "trash")
        os.makedirs(trash, exist_ok=True)
        return os.path.join(trash, partition_dir_name(topic, partition))

    def _write_segment(self, directory, plan: SegmentPlan, file_ids, file_names, positions,
                       sizes, offsets, epoch) -> None:
        base = plan.base_offset
        with open(os.path.join(directory, segment_file_name(base, INDEX_SUFFIX)), "wb") as out:
            out.write(plan.offset_index_bytes())
        with open(os.path.join(directory, segment_file_name(base, TIME_INDEX_SUFFIX)), "wb") as out:
            out.write(plan.time_index_bytes())
        handles: Dict[int, int] = {}
        log_path = os.path.join(directory, segment_file_name(base, LOG_SUFFIX))
        first, end = plan.first_batch, plan.end_batch
        try:
            with open(log_path, "wb") as out:
                for run_start, run_end in _runs(file_ids[first:end], positions[first:end],
                                                sizes[first:end]):
                    run_start += first
                    run_end += first
                    file_id = int(file_ids[run_start])
                    fd = handles.get(file_id)
                    if fd is None:
                        fd = os.open(os.path.join(self.staging_dir, file_names[file_id]),
                                     os.O_RDONLY)
                        handles[file_id] = fd
                    run_bytes = int(positions[run_end - 1] + sizes[run_end - 1]
                                    - positions[run_start])
                    source = int(positions[run_start])
                    relative = positions[run_start:run_end] - positions[run_start]
                    run_offsets = offsets[run_start:run_end]
                    written = out.tell()
                    if not _copy_range(fd, out.fileno(), source, written, run_bytes):
                        buffer = _read_at(fd, run_bytes, source)
                        if len(buffer) != run_bytes:
                            raise WriteError(f"staging file {file_names[file_id]} is shorter "
                                             f"than its task reported")
                        patch_batch_headers(buffer, relative, run_offsets, epoch)
                        out.write(buffer)
                        continue
                    out.seek(written + run_bytes)
                    fields = placement_fields(run_offsets, sizes[run_start:run_end], epoch)
                    raw, width = fields.tobytes(), fields.itemsize
                    for i, at in enumerate((relative + written).tolist()):
                        os.pwrite(out.fileno(), raw[width * i : width * (i + 1)], at)
        finally:
            for fd in handles.values():
                os.close(fd)

    # ------------------------------------------------------------------ publish
    def _publish(self, actions: List["_Action"]) -> None:
        done: List[_Action] = []
        try:
            for action in actions:
                action.apply()
                done.append(action)
        except BaseException:
            for action in reversed(done):
                try:
                    action.undo()
                except OSError:
                    pass
            raise

    # -------------------------------------------------------------------- abort
    def abort(self) -> None:
        """Forget the write: remove its staging directory and locks. Safe to call twice."""
        self.finished = True
        self._cleanup()

    def _cleanup(self) -> None:
        _remove_tree(self.staging_dir)
        for topic in list(self.held_locks):
            release_lock(self.logdir, topic, self.job_id)
        if self.created_logdir:
            try:
                os.rmdir(self.logdir)  # only if nothing was published into it
            except OSError:
                pass


def _concat(pieces: List[Tuple[str, PartitionBatches]]):
    """One partition's batches from all tasks, in task order."""
    if not pieces:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty, [], empty
    sizes = np.concatenate([p.sizes for _, p in pieces]).astype(np.int64)
    counts = np.concatenate([p.record_counts for _, p in pieces]).astype(np.int64)
    max_ts = np.concatenate([p.max_timestamps for _, p in pieces]).astype(np.int64)
    positions = np.concatenate([p.positions for _, p in pieces]).astype(np.int64)
    file_names = [name for name, _ in pieces]
    file_ids = np.concatenate([np.full(len(p.sizes), i, dtype=np.int64)
                               for i, (_, p) in enumerate(pieces)])
    return sizes, counts, max_ts, file_ids, file_names, positions


def _runs(file_ids: np.ndarray, positions: np.ndarray, sizes: np.ndarray):
    """(start, end) index ranges of batches lying back to back in one staging file,
    each at most COPY_CHUNK bytes (or one batch)."""
    n = len(sizes)
    if n == 0:
        return []
    breaks = np.ones(n, dtype=bool)
    breaks[1:] = (file_ids[1:] != file_ids[:-1]) | (positions[1:] != positions[:-1] + sizes[:-1])
    runs = []
    starts = np.flatnonzero(breaks).tolist() + [n]
    for start, end in zip(starts[:-1], starts[1:]):
        # Split long runs into chunks of at most COPY_CHUNK bytes.
        ends = positions[start:end] + sizes[start:end] - positions[start]
        while start < end:
            cut = start + max(1, int(np.searchsorted(ends, COPY_CHUNK, side="right")))
            cut = min(cut, end)
            runs.append((start, cut))
            if cut < end:
                ends = ends[cut - start:] - (positions[cut] - positions[start])
            start = cut
    return runs


_COPY_FILE_RANGE = [hasattr(os, "copy_file_range")]


def _read_at(fd: int, count: int, position: int) -> bytearray:
    """`count` bytes from `position` into a writable buffer (fewer at end of file)."""
    buffer = bytearray(count)
    if hasattr(os, "preadv"):
        got = os.preadv(fd, [buffer], position)
        return buffer if got == count else buffer[:got]
    got = 0
    while got < count:
        chunk = os.pread(fd, count - got, position + got)
        if not chunk:
            break
        buffer[got : got + len(chunk)] = chunk
        got += len(chunk)
    return buffer if got == count else buffer[:got]


def _copy_range(source_fd: int, target_fd: int, source_pos: int, target_pos: int,
                count: int) -> bool:
    """Copy bytes between files inside the kernel; False when that is not possible here
    (nothing was copied then)."""
    if not _COPY_FILE_RANGE[0]:
        return False
    done = 0
    try:
        while done < count:
            copied = os.copy_file_range(source_fd, target_fd, count - done,
                                        source_pos + done, target_pos + done)
            if copied == 0:
                raise WriteError("a staging file is shorter than its task reported")
            done += copied
    except OSError as exc:
        if done == 0 and exc.errno in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP,
                                       errno.ENOTSUP, errno.EBADF, errno.EPERM):
            _COPY_FILE_RANGE[0] = False
            return False
        raise
    return True


def _remove_tree(path: str) -> None:
    for _ in range(5):  # a straggling task may add a file while the tree is removed
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------- publish steps

class _Action(ABC):
    """One publishing step, undone in reverse order if a later step fails."""

    @abstractmethod
    def apply(self) -> None:
        ...

    @abstractmethod
    def undo(self) -> None:
        ...


class _NewDir(_Action):
    """A partition directory of a topic the write creates."""

    def __init__(self, staged: str, target: str):
        self.staged, self.target = staged, target

    def apply(self):
        if os.path.exists(self.target):
            raise ConcurrentWriteError(f"{self.target} appeared while this write ran")
        os.rename(self.staged, self.target)

    def undo(self):
        os.rename(self.target, self.staged)


class _ReplaceDir(_Action):
    """Overwrite: swap the new partition directory in, the old one out to the trash."""

    def __init__(self, staged: str, target: str, trash: str):
        self.staged, self.target, self.trash = staged, target, trash
        self.exchanged = False

    def apply(self):
        if rename_exchange(self.staged, self.target):  # readers see old or new, never neither
            self.exchanged = True
            os.rename(self.staged, self.trash)
        else:
            os.rename(self.target, self.trash)
            try:
                os.rename(self.staged, self.target)
            except BaseException:
                os.rename(self.trash, self.target)
                raise

    def undo(self):
        if self.exchanged:
            os.rename(self.trash, self.staged)
            rename_exchange(self.staged, self.target)
        else:
            os.rename(self.target, self.staged)
            os.rename(self.trash, self.target)


class _RemoveDir(_Action):
    def __init__(self, target: str, trash: str):
        self.target, self.trash = target, trash

    def apply(self):
        os.rename(self.target, self.trash)

    def undo(self):
        os.rename(self.trash, self.target)


class _AppendSegments(_Action):
    """New segments of an existing partition: indexes first, then the .log.

    A reader listing the directory only sees a segment once its .log is there, and by
    then its indexes are complete. An empty last segment with the same base offset (one
    that never got data) is moved aside first and restored on undo.
    """

    def __init__(self, staged: str, target: str, bases: List[int]):
        self.staged, self.target, self.bases = staged, target, bases
        self.moved: List[Tuple[str, str]] = []  # (from, to) renames done, in order

    def apply(self):
        suffixes = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX)
        aside = os.path.join(self.staged, ".replaced")
        for base in self.bases:
            old_log = os.path.join(self.target, segment_file_name(base, LOG_SUFFIX))
            if os.path.exists(old_log):
                if os.path.getsize(old_log) != 0:
                    raise ConcurrentWriteError(
                        f"{old_log} appeared with data while this write ran"
                    )
                os.makedirs(aside, exist_ok=True)
                # The empty .log goes first so that a reader never pairs it with new indexes.
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    path = os.path.join(self.target, segment_file_name(base, suffix))
                    if os.path.exists(path):
                        self._move(path, os.path.join(aside, os.path.basename(path)))
            for suffix in suffixes:
                name = segment_file_name(base, suffix)
                self._move(os.path.join(self.staged, name), os.path.join(self.target, name))

    def _move(self, source: str, destination: str):
        os.rename(source, destination)
        self.moved.append((source, destination))

    def undo(self):
        # Exact reverse order: each new .log leaves before its indexes, and a replaced
        # empty segment comes back .log last.
        for source, destination in reversed(self.moved):
            if os.path.exists(destination):
                os.rename(destination, source)
        self.moved = []
