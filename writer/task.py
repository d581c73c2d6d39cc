"""The task side of a write: rows in, record batches out, into private staging files.

A task (a Spark task, or the one task of an engine write) partitions its rows as Kafka's
producer would, encodes each partition's rows into record batches and appends them to a
staging file of its own inside the job's staging directory: one per topic-partition
(`file_per_partition`), laid out as a segment's `.log` so that the commit can rename it
into place, or one for all of them (the object-store writer uploads a task's single
file). It reports, per topic-partition, where each batch lies with its record count and
max timestamp. Offsets are only assigned when the job commits; a per-partition file's
batches are stamped beforehand with the offsets and epoch the commit will most likely give
them (from the partition's log end and epoch as the job found them, or from 0 in a new
partition), so that a commit giving exactly those renames the file into place untouched.
"""
import os
import uuid
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa

from ..errors import SegmentLogError
from ..format.arrow import int64_values
from ..format.encode import encode_groups
from ..format.v2_encode import (
    RecordColumns, RecordTooLargeError, check_batch_sizes, patch_batch_headers,
)

from .checkpointing import append_start
from .errors import InvalidInputError, WriteAbortedError, WriteError, raise_out_of_space
from .framed import FramingPlan, encode_framed
from .fsops import preallocate
from .input import (
    InputLayout, NormalizedRows, approximate_sizes, framed_in_utc, normalize, take_rows)
from .logdir import check_num_partitions, partition_count, partition_dir, validate_topic_name
from .options import WriteOptions
from .partitioner import StickyRoundRobin, assign_partitions

# Input bytes gathered before a chunk is partitioned and encoded. Its encoded buffers then
# stay well under glibc's largest mmap threshold (32 MiB), so the heap reuses their memory
# from chunk to chunk instead of mapping and faulting in fresh pages: a million-row write
# took 5,000 page faults with 32 MiB chunks, 160 with 8 MiB, and a tenth less time
# (BENCHMARKS.md). Each chunk closes its partitions' open batches: a few more batches.
CHUNK_BYTES = 8 << 20
# A new topic written without numPartitions gets its partition count from the highest
# 'partition' value; past this, a stray value would create that many directories.
MAX_INFERRED_PARTITIONS = 10_000
# Per-partition staging files held open at once; past this they are closed and reopened
# for appending when written again (a write spread over thousands of partitions).
MAX_OPEN_STAGING_FILES = 64
# A task looks up where an existing partition ends (about 0.6 ms) when its first encoded
# bytes for it reach this much: less is cheaper to re-stamp at commit than to look up.
LOOK_UP_START_BYTES = 256 << 10
# The leader epoch batches are stamped with when the write gives none: a new partition's
# (job.DEFAULT_LEADER_EPOCH), and that of most existing ones.
LIKELY_LEADER_EPOCH = 0


def check_inferred_count(topic: str, highest: int, logdir: str) -> None:
    """Refuse a partition count learnt from the data that is beyond MAX_INFERRED_PARTITIONS."""
    if highest >= MAX_INFERRED_PARTITIONS:
        raise InvalidInputError(
            f"column 'partition' holds {highest} for topic {topic!r}, which does not exist in "
            f"{logdir}: without the 'numPartitions' option a new topic gets its partition "
            f"count from the highest 'partition' value, and at most "
            f"{MAX_INFERRED_PARTITIONS} partitions that way. Set 'numPartitions' to create it "
            f"(every 'partition' value must be below it)"
        )


@dataclass
class TaskSpec:
    """Everything a task needs from the job; picklable."""

    job_id: str
    logdir: str
    staging_dir: str
    mode: str  # "append" or "overwrite"
    options: WriteOptions
    topic: Optional[str]  # the `topic` option: overrides any topic column
    existing_partitions: Dict[str, List[int]]  # the log dir's topics when the job started
    write_time_ms: int
    layout: Optional[InputLayout] = None  # None: taken from the first input's schema
    framing: Optional[FramingPlan] = None  # framed key/value columns (writer/framed.py)
    # (offset, leader epoch) an appended partition's batches start at, as the job found
    # them; a partition not here is looked up by the task that writes to it
    partition_starts: Dict[Tuple[str, int], Tuple[int, int]] = field(default_factory=dict)

    def partition_count(self, topic: str) -> Optional[int]:
        """Partitions `topic` is written with; None for a new topic without numPartitions."""
        existing = self.existing_partitions.get(topic)
        wanted = self.options.num_partitions
        if self.mode == "overwrite" and wanted is not None:
            return wanted  # an overwrite may change the partition count
        if existing:
            count = partition_count(self.logdir, topic, existing)
            if self.mode == "append":
                check_num_partitions(wanted, topic, count)
            return count
        return wanted


@dataclass
class PartitionBatches:
    """One task's batches of one topic-partition, in order, inside its staging file."""

    positions: np.ndarray  # int64 file positions
    sizes: np.ndarray  # int64
    record_counts: np.ndarray  # int64
    max_timestamps: np.ndarray  # int64
    # A file of this partition's batches alone, back to back from position 0, their base
    # offsets counted from `stamped_start` and their leader epoch `stamped_epoch`. None:
    # the batches lie in the task's one file (TaskResult.file), at base offset 0.
    file: Optional[str] = None
    stamped_epoch: Optional[int] = None
    stamped_start: int = 0


@dataclass
class TaskResult:
    """What a task reports to the job's commit."""

    job_id: str
    task_index: int
    attempt: int
    file: Optional[str]  # the task's one staging file (in the staging dir); None if no
    # rows, or when each partition has its own (PartitionBatches.file)
    partitions: Dict[Tuple[str, int], PartitionBatches] = field(default_factory=dict)
    topic_counts: Dict[str, Optional[int]] = field(default_factory=dict)
    max_partition: Dict[str, int] = field(default_factory=dict)  # per topic, explicit rows
    records: int = 0
    bytes: int = 0


def results_to_commit(results, job_id: str, topic: Optional[str], framed: bool,
                      framing) -> Tuple[List[TaskResult], set]:
    """The task results a commit takes (one per task, the first attempt's, in task order)
    and the topics they write (with the write's own topic). A result of another write is
    an error, and so is a framed write whose schemas were never planned."""
    chosen: Dict[int, TaskResult] = {}
    for result in results:
        if result is None:
            continue
        if result.job_id != job_id:
            raise WriteError(f"a task result of write {result.job_id} reached write {job_id}")
        chosen.setdefault(result.task_index, result)  # one attempt per task
    ordered = [chosen[i] for i in sorted(chosen)]
    topics = {name for r in ordered for (name, _) in r.partitions}
    topics |= {name for r in ordered for name in r.topic_counts}
    if topic is not None:
        topics.add(topic)
    if framing is None and framed:
        raise WriteError(f"write {job_id} frames values but its schemas were never planned "
                         f"(plan_framing)")
    return ordered, topics


class _PartitionFile:
    """A per-partition staging file being appended to."""

    def __init__(self, name: str, start: int, epoch: int):
        self.name = name
        self.fd: Optional[int] = None
        self.position = 0
        self.start = start  # the first batch's stamped base offset
        self.next_offset = start  # the next batch's
        self.epoch = epoch


class TaskWriter:
    """Encodes one task's rows into its staging files."""

    def __init__(self, spec: TaskSpec, task_index: int = 0, attempt: int = 0,
                 chunk_bytes: int = CHUNK_BYTES, file_per_partition: bool = True):
        self.spec = spec
        self.file_per_partition = file_per_partition
        self._nonce = uuid.uuid4().hex[:8]
        self._partition_files: Dict[Tuple[str, int], _PartitionFile] = {}
        self._open_files: List[_PartitionFile] = []
        leader_epoch = spec.options.leader_epoch
        self._stamp_epoch = LIKELY_LEADER_EPOCH if leader_epoch is None else leader_epoch
        self.task_index = task_index
        self.attempt = attempt
        self.chunk_bytes = chunk_bytes
        self.layout = spec.layout
        self._schema = None
        self._pending: List = []
        self._pending_bytes = 0
        self._sticky: Dict[str, StickyRoundRobin] = {}
        self._counts: Dict[str, Optional[int]] = {}
        self._max_partition: Dict[str, int] = {}
        self._parts: Dict[Tuple[str, int], List[List[np.ndarray]]] = {}
        self._fd = None
        self._file_name = None
        self._file_pos = 0
        self._records = 0
        self._closed = False

    # ------------------------------------------------------------------ input
    def write(self, data) -> None:
        """Take a pa.RecordBatch or pa.Table of input rows."""
        if self._closed:
            raise WriteAbortedError("this task writer has already finished")
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        elif not isinstance(data, pa.Table):
            raise InvalidInputError(f"expected a pyarrow Table or RecordBatch, got {type(data)}")
        if self.spec.options.framed_sides:
            data = framed_in_utc(data, self.spec.options.framed_sides)
        if self._schema is None or not data.schema.equals(self._schema):
            layout = InputLayout.from_schema(data.schema, self.spec.topic,
                                             self.spec.options.framed_sides)
            if self.layout is None:
                self.layout = layout
            elif layout != self.layout:
                raise InvalidInputError(
                    f"input columns changed within one write: {data.schema.names}"
                )
            self._schema = data.schema
        if data.num_rows == 0:
            return
        size = data.nbytes
        if size > self.chunk_bytes and data.num_rows > 1:
            # Bounded chunks: memory stays flat and Arrow's 32-bit offsets never overflow.
            step = max(1, int(data.num_rows * self.chunk_bytes / size))
            for start in range(0, data.num_rows, step):
                self._add(data.slice(start, step))
            return
        self._add(data)

    def _add(self, data) -> None:
        self._pending.append(data)
        self._pending_bytes += data.nbytes
        if self._pending_bytes >= self.chunk_bytes:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        table = self._pending[0] if len(self._pending) == 1 else pa.concat_tables(self._pending)
        self._pending = []
        self._pending_bytes = 0
        if self.spec.options.framed_sides:
            table = self._framed(table)
        rows = normalize(table, self.layout, self.spec.write_time_ms, self.spec.topic)
        self._records += len(rows)
        self._process(rows)

    def _framed(self, table: pa.Table) -> pa.Table:
        framing = self.spec.framing
        if framing is None:
            raise WriteError("the write's framed columns were not planned before its tasks "
                             "ran (WriteJob.plan_framing)")
        if self.layout.framed_types != framing.column_types:
            raise InvalidInputError(
                f"the framed columns have types {self.layout.framed_types}; the write's "
                f"schemas were planned for {framing.column_types}")
        return encode_framed(table, framing, f"task {self.task_index}", self._records)

    # ------------------------------------------------------------- partitioning
    def _count(self, topic: str) -> Optional[int]:
        if topic not in self._counts:
            validate_topic_name(topic, "column 'topic'" if not self.spec.topic else "option 'topic'")
            self._counts[topic] = self.spec.partition_count(topic)
        return self._counts[topic]

    def _assign(self, topic: str, rows: NormalizedRows) -> np.ndarray:
        count = self._count(topic)
        explicit = rows.partitions
        if explicit is not None and (explicit >= 0).any():
            highest = int(explicit.max())
            if count is not None and highest >= count:
                raise InvalidInputError(
                    f"column 'partition' holds {highest} for topic {topic!r}, which has "
                    f"{count} partitions (0..{count - 1}). To place the rows as Kafka's "
                    f"producer does (by key, keyless rows spread), drop the column first: "
                    f"df.drop('partition')"
                )
            self._max_partition[topic] = max(self._max_partition.get(topic, -1), highest)
        if count is None:
            if explicit is None or (explicit < 0).any():
                raise InvalidInputError(
                    f"topic {topic!r} does not exist in {self.spec.logdir}: set the "
                    f"'numPartitions' option to create it (or give every row a 'partition')"
                )
            check_inferred_count(topic, self._max_partition.get(topic, -1), self.spec.logdir)
            return explicit
        sticky = self._sticky.get(topic)
        if sticky is None:
            sticky = StickyRoundRobin(count, self.spec.options.batch_size, self.task_index)
            self._sticky[topic] = sticky
        needs_size = explicit is None or (explicit < 0).any()
        sizes = approximate_sizes(rows) if needs_size and rows.keys.null_count else None
        return assign_partitions(rows.keys, explicit, count, sticky, sizes)

    def _process(self, rows: NormalizedRows) -> None:
        n = len(rows)
        if rows.topics is None:
            topics = [self.spec.topic]
            topic_ids = None
            partitions = self._assign(self.spec.topic, rows)
        else:
            import pyarrow.compute as pc  # only a topic column: spares the 80 ms import

            encoded = pc.dictionary_encode(rows.topics)
            topics = encoded.dictionary.to_pylist()
            topic_ids = int64_values(encoded.indices, -1)  # no nulls: refused by the input
            partitions = np.empty(n, dtype=np.int64)
            if len(topics) == 1:
                partitions[:] = self._assign(topics[0], rows)
            else:
                for t, topic in enumerate(topics):
                    index = np.nonzero(topic_ids == t)[0]
                    partitions[index] = self._assign(topic, take_rows(rows, index))
        if topic_ids is None and n and int(partitions.max()) < 1 << 16:
            groups, group_count = partitions, int(partitions.max()) + 1
            group_keys = None  # group g is partition g
        else:
            combined = partitions if topic_ids is None else (topic_ids << 32) | partitions
            group_keys, groups = np.unique(combined, return_inverse=True)
            groups = groups.reshape(-1)
            group_count = len(group_keys)
        columns = RecordColumns(rows.keys, rows.values, rows.timestamps, rows.headers)
        # Every partition's rows in one pass over the input, in input order.
        encoded = self._encode(columns, groups, group_count)
        for g, batches in enumerate(encoded):
            if batches is None:
                continue
            key = g if group_keys is None else int(group_keys[g])
            self._stage(*self._topic_partition(topics, topic_ids, key), batches)

    @staticmethod
    def _topic_partition(topics, topic_ids, key: int):
        if topic_ids is None:
            return topics[0], key
        return topics[key >> 32], key & 0xFFFFFFFF

    # ----------------------------------------------------------------- encoding
    def _encode(self, columns: RecordColumns, groups: np.ndarray, group_count: int) -> list:
        """Each group's records (`groups`: one per row) as batches, None for empty ones."""
        options = self.spec.options
        try:
            return encode_groups(
                columns, groups, group_count, codec=options.compression,
                batch_size=options.batch_size, timestamp_type=options.timestamp_type,
                log_append_time=self.spec.write_time_ms,
                compression_level=options.compression_level,
            )
        except ValueError as exc:  # e.g. a null header key
            raise InvalidInputError(f"column 'headers': {exc}") from None

    def _stage(self, topic: str, partition: int, encoded) -> None:
        """Append one partition's encoded batches to its staging file."""
        options = self.spec.options
        try:
            check_batch_sizes(encoded.sizes, encoded.record_counts, encoded.first_rows,
                              options.max_batch_bytes)
        except RecordTooLargeError as exc:
            limit = "max.message.bytes" if options.max_message_bytes <= options.segment_bytes \
                else "segment.bytes"
            raise InvalidInputError(
                f"topic {topic!r} partition {partition}: {exc}. A Kafka broker with "
                f"max.message.bytes={options.max_message_bytes} and "
                f"segment.bytes={options.segment_bytes} rejects it; raise the '{limit}' option "
                f"to write records this large"
            ) from None
        if self.file_per_partition:
            position = self._append_to_partition_file((topic, partition), encoded)
        else:
            position = self._append_bytes(encoded.data)
        lists = self._parts.setdefault((topic, partition), [[], [], [], []])
        lists[0].append(encoded.positions + position)
        lists[1].append(encoded.sizes)
        lists[2].append(encoded.record_counts)
        lists[3].append(encoded.max_timestamps)

    def _append_to_partition_file(self, key: Tuple[str, int], encoded) -> int:
        staged = self._partition_files.get(key)
        if staged is None:
            staged = _PartitionFile(f"task-{self.task_index:05d}-attempt-{self.attempt}-"
                                    f"{self._nonce}-{len(self._partition_files)}.batches",
                                    *self._likely_start(key, len(memoryview(encoded.data))))
            self._partition_files[key] = staged
        data = encoded.data
        if not len(encoded.sizes):
            return staged.position
        if memoryview(data).readonly:
            data = bytearray(data)
        offsets = np.empty(len(encoded.sizes), dtype=np.int64)
        offsets[0] = staged.next_offset
        np.cumsum(encoded.record_counts[:-1], out=offsets[1:])
        offsets[1:] += staged.next_offset
        patch_batch_headers(data, encoded.positions, offsets, staged.epoch)
        staged.next_offset += int(encoded.record_counts.sum())
        path = os.path.join(self.spec.staging_dir, staged.name)
        if staged.fd is None:
            if len(self._open_files) >= MAX_OPEN_STAGING_FILES:
                for other in self._open_files:
                    os.close(other.fd)
                    other.fd = None
                self._open_files = []
            flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT | os.O_EXCL if staged.position == 0
                                                 else 0)
            staged.fd = self._open_staging(path, flags)
            self._open_files.append(staged)
        position = staged.position
        self._write_all(staged.fd, data, path, position)
        staged.position += len(memoryview(data))
        self._file_pos += len(memoryview(data))
        return position

    def _likely_start(self, key: Tuple[str, int], first_bytes: int) -> Tuple[int, int]:
        """(offset, epoch) the commit will most likely give the partition's first batch,
        whose file starts with `first_bytes` of batches."""
        known = self.spec.partition_starts.get(key)
        if known is not None:
            return known
        topic, partition = key
        if self.spec.mode == "append" and first_bytes >= LOOK_UP_START_BYTES and \
                partition in self.spec.existing_partitions.get(topic, ()):
            try:
                _, epoch, start = append_start(partition_dir(self.spec.logdir, topic, partition),
                                               self.spec.options.leader_epoch)
            except (SegmentLogError, OSError):
                # only a guess: the commit finds the partition's state and names its faults
                return 0, self._stamp_epoch
            return start, epoch
        return 0, self._stamp_epoch

    def _open_staging(self, path: str, flags: int) -> int:
        try:
            return os.open(path, flags, 0o644)
        except FileNotFoundError:
            raise WriteAbortedError(
                f"the write's staging directory {self.spec.staging_dir} is gone: the job "
                f"was aborted or has already finished"
            ) from None
        except OSError as exc:  # no inode left
            raise_out_of_space(exc, path)
            raise

    @staticmethod
    def _write_all(fd: int, data, path: str, position: int) -> None:
        """Write `data` at `position`, the file's end (the file's blocks reserved first)."""
        view = memoryview(data)
        written = 0
        try:
            preallocate(fd, position, view.nbytes)
            while written < len(view):
                written += os.write(fd, view[written:])
        except OSError as exc:
            raise_out_of_space(exc, path)
            raise

    def _append_bytes(self, data) -> int:
        if self._fd is None:
            self._file_name = (f"task-{self.task_index:05d}-attempt-{self.attempt}-"
                               f"{self._nonce}.batches")
            self._fd = self._open_staging(os.path.join(self.spec.staging_dir, self._file_name),
                                          os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        path = os.path.join(self.spec.staging_dir, self._file_name)
        position = self._file_pos
        self._write_all(self._fd, data, path, position)
        self._file_pos += len(memoryview(data))
        return position

    # ------------------------------------------------------------------- result
    def finish(self) -> TaskResult:
        """Encode what is left and describe the staging file for the commit."""
        self._flush()
        self._close_file()
        self._closed = True
        result = TaskResult(self.spec.job_id, self.task_index, self.attempt, self._file_name)
        for key, (positions, sizes, counts, max_ts) in self._parts.items():
            staged = self._partition_files.get(key)
            result.partitions[key] = PartitionBatches(
                np.concatenate(positions), np.concatenate(sizes), np.concatenate(counts),
                np.concatenate(max_ts), None if staged is None else staged.name,
                None if staged is None else staged.epoch,
                0 if staged is None else staged.start,
            )
        result.topic_counts = dict(self._counts)
        result.max_partition = dict(self._max_partition)
        result.records = self._records
        result.bytes = self._file_pos
        return result

    def discard(self) -> None:
        """Drop the staging file (after a failure in this task)."""
        self._close_file()
        self._closed = True
        names = [staged.name for staged in self._partition_files.values()]
        for name in names + ([self._file_name] if self._file_name else []):
            try:
                os.unlink(os.path.join(self.spec.staging_dir, name))
            except FileNotFoundError:
                pass

    def _close_file(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        for staged in self._open_files:
            os.close(staged.fd)
            staged.fd = None
        self._open_files = []
