"""The job side of a write: checks, start (lock, staging), commit (offsets, segments,
indexes, publish) and abort.

Layout inside the log dir while a write runs:

    .segmentlog-lock-<topic>            one per topic being written (locks.py)
    .segmentlog-lock-.checkpoints       while a publish updates the offset checkpoints
    .segmentlog-staging-<job>/          the job's private area; readers skip dot-names
        owner.json                      the process the write belongs to (locks.py)
        task-*.batches                  each task attempt's encoded batches (task.py)
        publish/<topic>-<partition>/    finished segments and indexes, built at commit
        trash/                          what an overwrite replaced, until deleted

Commit orders the tasks' outputs by task index, gives each partition contiguous offsets
from its log end offset, rolls segments and places index entries as a broker does
(segments.py; a task's large staged file starts a segment of its own), renames the
staged files into segments or copies batches after them (assembly.py) and publishes
them with renames (publish.py), journaled first, then updates the checkpoint files a
broker keeps beside them (checkpointing.py). A failure before that is done undoes what
was done so far; abort and every failure remove the staging directory. A process
killed while publishing leaves the journal: abort (Spark's, from another process) rolls
that publish back, and a later write, once the owner is gone, finishes it (locks.py).
"""
import os
import re
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from ..errors import InvalidOptionError
from ..format import compression
from ..format.checkpoints import (
    LEADER_EPOCH_FILE, PARTITION_METADATA_FILE, format_leader_epochs, format_partition_metadata,
)
from ..format.log import SEGMENT_NAME, partition_dir_name
from ..format.paths import local_path
from ..storage.globs import refuse_glob

from .assembly import StagedBatches, write_segment
from .checkpointing import (
    NEW_PARTITION, CheckpointChanges, EpochHistory, append_start, choose_epoch,
    choose_topic_id, read_optional, relative_partition_file, replaced_partition_epoch,
    write_new_partition_files,
)
from .errors import (
    ConcurrentWriteError, InvalidInputError, WriteAbortedError, WriteError, raise_out_of_space,
)
from .fsops import remove_staging
from . import framed
from .framed import SCHEMAS_TOPIC, FramingPlan
from .input import InputLayout
from .lockfiles import write_owner_file
from .locks import acquire_lock, clean_dead_writes, recover_dead_publishes, release_lock
from .logdir import (
    STAGING_PREFIX, check_num_partitions, check_written_logdir, list_topics,
    partition_count, partition_dir, topic_fingerprint, validate_topic_name,
)
from .options import WriteOptions
from .publish import (
    AppendSegments, NewPartitionDir, PublishAction, RemovePartitionDir, ReplacePartitionDir,
    publish, recover, trash_path,
)
from .segments import SegmentPlan, plan_segments
from .task import TaskResult, TaskSpec, TaskWriter, check_inferred_count, results_to_commit

MODES = ("append", "overwrite")
SCHEMAS_TASK_INDEX = 1 << 30  # the commit's own staged `_schemas` records, after the tasks
DEFAULT_LEADER_EPOCH = 0  # a new partition's (objectstore.py; checkpointing.py here)
_JOB_ID = re.compile(r"^[A-Za-z0-9._-]+$")


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
    """One write into one log dir: created on the driver, picklable, committed once.

    Creating it only checks the options and the log dir and records what the write will
    touch; nothing on disk changes until `start()` takes the topic lock and creates the
    staging directory. Tasks then fill the staging directory, and `commit` publishes it
    (or `abort` removes it).
    """

    def __init__(self, logdir: str, *, mode: str = "append", topic: Optional[str] = None,
                 options: Optional[WriteOptions] = None, layout: Optional[InputLayout] = None,
                 write_time_ms: Optional[int] = None, under_jvm: bool = False,
                 job_id: Optional[str] = None, framing: Optional[FramingPlan] = None):
        """`under_jvm`: the job runs in Spark, whose driver JVM owns it (see locks.owner_info).

        `framing`: the plan the tasks framed key/value columns with (a streaming
        micro-batch's); None: planned here from `layout`, or by plan_framing() once the
        column types are known.

        `job_id`: commit what tasks already staged under this id, in a staging directory
        that may exist before the job does (a streaming micro-batch, writer/stream.py).
        """
        if mode not in MODES:
            raise InvalidOptionError(
                f"save mode {mode!r} is not supported; segmentlog writes take 'append' or "
                f"'overwrite'"
            )
        if not logdir:
            raise InvalidOptionError("no log dir given: pass a path (df.write...save(path))")
        # a glob would otherwise become a directory named "broker-*"
        refuse_glob(logdir)
        # an s3:// path would otherwise become a local directory named "s3:"
        self.logdir = os.path.abspath(os.path.expanduser(local_path(logdir)))
        self.mode = mode
        self.topic = validate_topic_name(topic) if topic is not None else None
        self.options = options or WriteOptions()
        self.layout = layout
        self.write_time_ms = int(time.time() * 1000) if write_time_ms is None else write_time_ms
        if job_id is not None and not _JOB_ID.match(job_id):
            raise WriteError(f"job id {job_id!r} is not a plain file name")
        self.adopted = job_id is not None
        self.job_id = job_id or time.strftime("%Y%m%d%H%M%S") + "-" + uuid.uuid4().hex[:12]
        self.staging_dir = os.path.join(self.logdir, STAGING_PREFIX + self.job_id)
        self.held_locks: List[str] = []
        self.under_jvm = under_jvm
        self.created_logdir = False
        self.started = False
        self.finished = False

        check_written_logdir(self.logdir)
        if os.path.exists(self.logdir) and not os.path.isdir(self.logdir):
            raise InvalidOptionError(f"{self.logdir} exists and is not a directory")
        if os.path.isdir(self.logdir) and any(SEGMENT_NAME.match(n) for n in os.listdir(self.logdir)):
            raise InvalidOptionError(
                f"{self.logdir} holds segment files: it is a partition directory, not a log "
                f"dir. Write to the directory that holds the <topic>-<partition> directories "
                f"({os.path.dirname(self.logdir)})"
            )
        if os.path.isdir(self.logdir):
            # a killed writer's half-done publish is settled before anything is looked at
            recover_dead_publishes(self.logdir)
        existing = list_topics(self.logdir)
        self.existing_partitions = existing
        # Fingerprints of what this write may touch, to notice concurrent changes at commit.
        watched = [self.topic] if self.topic is not None else list(existing)
        self.fingerprints = {
            t: topic_fingerprint(self.logdir, t, existing[t]) for t in watched if t in existing
        }
        self.spec = TaskSpec(self.job_id, self.logdir, self.staging_dir, mode, self.options,
                             self.topic, existing, self.write_time_ms, layout)
        self._schemas_spec: Optional[TaskSpec] = None  # set when the commit registers
        if self.topic is not None:
            self._check_topic_at_start(self.topic)
        if framing is not None:
            self.spec.framing = framing
        elif layout is not None:
            self.plan_framing(layout)

    def plan_framing(self, layout: InputLayout) -> Optional[FramingPlan]:
        """The schema ids of the framed columns (options valueFormat / keyFormat) against
        the log dir's `_schemas` now, fixed for the tasks (writer/framed.py); the commit
        confirms them. Planned once: later calls check the column types are the same."""
        if not self.options.framed_sides:
            return None
        planned = self.spec.framing
        if planned is None:
            self.spec.framing = framed.plan_framing(self.options, self.topic, self.logdir,
                                                    layout.framed_types)
        elif layout.framed_types != planned.column_types:
            raise InvalidInputError(
                f"the framed columns have types {layout.framed_types}; this write's schemas "
                f"were planned for {planned.column_types}")
        return self.spec.framing

    def start(self) -> "WriteJob":
        """Create the log dir if needed (else clear dead writes' leftovers), lock the
        `topic` option's topic and create the staging directory. Returns the job."""
        self._check_open()
        if self.started:
            raise WriteError(f"write {self.job_id} has already been started")
        self.started = True
        try:
            if not os.path.isdir(self.logdir):
                os.makedirs(self.logdir)
                self.created_logdir = True
            else:
                clean_dead_writes(self.logdir)
            if self.topic is not None:
                acquire_lock(self.logdir, self.topic, self.job_id, self.mode, self.under_jvm)
                self.held_locks.append(self.topic)
            try:
                if self.adopted:
                    os.makedirs(self.staging_dir, exist_ok=True)
                else:
                    os.mkdir(self.staging_dir)
            except OSError as exc:  # no inode left
                raise_out_of_space(exc, self.staging_dir, "creating")
                raise
            write_owner_file(self.staging_dir, self.job_id, self.under_jvm)
        except BaseException as exc:
            self.abort()
            raise_out_of_space(exc, self.logdir, "creating")  # the log dir
            raise
        return self

    def _check_topic_at_start(self, topic: str) -> None:
        """Errors that need no data: partition counts and the state of existing partitions."""
        count = self.spec.partition_count(topic)  # raises on gaps and numPartitions mismatch
        existing = self.existing_partitions.get(topic)
        if count is None and not (self.layout is not None and self.layout.has_partition):
            raise InvalidOptionError(
                f"topic {topic!r} does not exist in {self.logdir}: set the 'numPartitions' "
                f"option to create it"
            )
        if existing and (self.options.leader_epoch is not None or
                         self.options.topic_id is not None):
            self._topic_id(topic, existing)  # raises on a topicId the topic does not have
        if existing and self.mode == "append":
            # where each partition's appended batches will start: the tasks stamp their
            # batches from there, so that the commit can rename the files into place
            for partition in existing:
                _, epoch, start = self._epoch_history(topic, partition, appending=True)
                self.spec.partition_starts[(topic, partition)] = (start, epoch)
        elif existing and self.options.leader_epoch is not None:
            for partition in existing:
                self._epoch_history(topic, partition, appending=False)

    # --------------------------------------------------------------------- tasks
    def task_writer(self, task_index: int = 0, attempt: int = 0) -> TaskWriter:
        self._check_started()
        return TaskWriter(self.spec, task_index, attempt)

    def _check_open(self):
        if self.finished:
            raise WriteAbortedError(f"write {self.job_id} has already been committed or aborted")

    def _check_started(self):
        self._check_open()
        if not self.started:
            raise WriteError(f"write {self.job_id} has not been started: call start() first")

    # -------------------------------------------------------------------- commit
    def commit(self, results: Iterable[Optional[TaskResult]], *,
               before_publish: Optional[Callable[[CommitSummary], None]] = None,
               after_publish: Optional[Callable[[CommitSummary], None]] = None) -> CommitSummary:
        """Publish the tasks' batches. All or nothing: on error the log dir is unchanged.

        The callbacks run while the topic locks are held: `before_publish` once every
        offset is assigned and nothing is visible yet, `after_publish` once everything is
        (an error it raises leaves the data published). The streaming sink records its
        intent and its commits there.
        """
        self._check_started()
        if not os.path.isdir(self.staging_dir):
            raise WriteAbortedError(
                f"the staging directory {self.staging_dir} of this write is gone; it was "
                f"aborted or already committed"
            )
        framing = self.spec.framing
        ordered, topics = results_to_commit(results, self.job_id, self.topic,
                                            bool(self.options.framed_sides), framing)
        # A framed write reads and may append to `_schemas`: its lock keeps two writes
        # from giving out one id.
        locked_topics = topics | ({SCHEMAS_TOPIC} if framing is not None else set())
        locked_here = []
        try:
            try:
                for topic in sorted(locked_topics):
                    if topic not in self.held_locks:
                        acquire_lock(self.logdir, topic, self.job_id, self.mode, self.under_jvm)
                        locked_here.append(topic)
                self._check_unchanged(sorted(topics))
                if self.options.topic_id is not None and len(topics) > 1:
                    raise InvalidOptionError(
                        f"option 'topicId' gives one topic's id, but this write writes "
                        f"topics {', '.join(sorted(topics))}; write them one at a time",
                        "topicId")
                if framing is not None:
                    ordered = ordered + self._schema_records(framing)
                    if self._schemas_spec is not None:
                        topics.add(SCHEMAS_TOPIC)
                publish_root = os.path.join(self.staging_dir, "publish")
                _make_dirs(publish_root)
                summary = CommitSummary(self.logdir, self.mode)
                actions: List[PublishAction] = []
                # read now, under the topic locks: the entries this write replaces
                checkpoints = CheckpointChanges(self.logdir)
                for topic in sorted(topics):
                    self._prepare_topic(topic, ordered, publish_root, summary, actions,
                                        checkpoints)
                if before_publish is not None:
                    before_publish(summary)
                publish(actions, self.staging_dir, self.logdir, self.job_id, checkpoints)
            except OSError as exc:  # one the steps above have not named (before_publish's)
                raise_out_of_space(exc, self.staging_dir, "writing into")
                raise
            if after_publish is not None:
                after_publish(summary)
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
    def _schema_records(self, framing: FramingPlan) -> List[TaskResult]:
        """Under the `_schemas` lock: the plan confirmed against `_schemas` now, and the
        staged SCHEMA records it registers (appended to `_schemas`, partition 0, in any
        save mode, uncompressed as the registry's producer writes them)."""
        confirmed = framed.confirm_framing(framing, self.options, self.topic, self.logdir)
        table = framed.schema_records_table(confirmed)
        if table is None:
            return []
        existing = list_topics(self.logdir).get(SCHEMAS_TOPIC, [])
        if existing != self.existing_partitions.get(SCHEMAS_TOPIC, []):
            self.existing_partitions[SCHEMAS_TOPIC] = existing  # created since the start
        self._schemas_spec = schemas_task_spec(self.spec, existing, self.logdir)
        return [staged(TaskWriter(self._schemas_spec, SCHEMAS_TASK_INDEX, 0), table)]

    def _spec_for(self, topic: str) -> TaskSpec:
        if topic == SCHEMAS_TOPIC and self._schemas_spec is not None:
            return self._schemas_spec
        return self.spec

    def _topic_count(self, topic: str, ordered: List[TaskResult]) -> int:
        return settled_partition_count(self._spec_for(topic), topic, ordered, self.logdir)

    def _topic_id(self, topic: str, existing: List[int]) -> str:
        """The topic's id: the topicId option's, the one it has, or a new one. An overwrite
        replaces the partitions, so a damaged partition.metadata does not stop it."""
        spec = self._spec_for(topic)
        return choose_topic_id(spec.options.topic_id, self.logdir, topic, existing,
                               strict=spec.mode == "append")

    def _epoch_history(self, topic: str, partition: int, appending: bool
                       ) -> Tuple[EpochHistory, int, int]:
        """(the partition's epochs, the write's epoch, the offset it starts at) for a
        partition of the topic as it exists, or a new one."""
        target = partition_dir(self.logdir, topic, partition)
        leader_epoch = self._spec_for(topic).options.leader_epoch
        if appending:
            return append_start(target, leader_epoch)
        if partition in self.existing_partitions.get(topic, []):
            start = 0  # an overwrite: epochs go on growing, from the replaced partition's
            history = EpochHistory([], None, replaced_partition_epoch(target))
        else:
            start, history = 0, NEW_PARTITION
        return history, choose_epoch(leader_epoch, history.current, target), start

    def _prepare_topic(self, topic, ordered, publish_root, summary, actions,
                       checkpoints: CheckpointChanges) -> None:
        count = self._topic_count(topic, ordered)
        existing = self.existing_partitions.get(topic, [])
        spec = self._spec_for(topic)
        appending = spec.mode == "append" and bool(existing)
        if appending:
            check_num_partitions(count, topic, partition_count(self.logdir, topic, existing))
        options = spec.options
        topic_id = self._topic_id(topic, existing)
        for partition in range(count):
            pieces = [(r.file, r.partitions[(topic, partition)]) for r in ordered
                      if (topic, partition) in r.partitions]
            target = partition_dir(self.logdir, topic, partition)
            staged = os.path.join(publish_root, partition_dir_name(topic, partition))
            if appending and not pieces:
                continue
            history, epoch, start = self._epoch_history(topic, partition, appending)
            batches = StagedBatches.gather(pieces)
            plans = plan_segments(
                start, batches.sizes, batches.record_counts, batches.max_timestamps,
                segment_bytes=options.segment_bytes, segment_ms=options.segment_ms,
                segment_index_bytes=options.segment_index_bytes,
                index_interval_bytes=options.index_interval_bytes,
                roll_before=batches.own_segment_starts(options.task_segment_bytes),
            )
            _make_dirs(staged, exist_ok=False)
            if not plans:  # a partition of a new or rewritten topic that got no rows
                plans = [SegmentPlan(start, 0, 0, 0, start)]
            offsets = batches.base_offsets(start)
            for plan in plans:
                write_segment(staged, plan, self.staging_dir, batches, offsets, epoch)
            if appending:  # the directory stays: its files change once the segments are in
                checkpoints.partition_file(
                    relative_partition_file(topic, partition, LEADER_EPOCH_FILE),
                    history.file_data, format_leader_epochs(history.extended(epoch, start)))
                if read_optional(os.path.join(target, PARTITION_METADATA_FILE)) is None:
                    checkpoints.partition_file(
                        relative_partition_file(topic, partition, PARTITION_METADATA_FILE),
                        None, format_partition_metadata(topic_id))
            else:
                write_new_partition_files(staged, epoch, topic_id)
            checkpoints.published(topic, partition, plans[-1].next_offset,
                                  recreated=not appending)
            summary.partitions.append(PartitionSummary(
                topic, partition, start, plans[-1].next_offset, int(batches.record_counts.sum()),
                [p.base_offset for p in plans],
            ))
            if appending:
                actions.append(AppendSegments(staged, target, [p.base_offset for p in plans]))
            elif existing and partition in existing:
                actions.append(ReplacePartitionDir(
                    staged, target, trash_path(self.staging_dir, topic, partition)))
            else:
                actions.append(NewPartitionDir(staged, target))
        if not appending and existing:
            for partition in existing:
                if partition >= count:  # an overwrite with fewer partitions
                    actions.append(RemovePartitionDir(
                        partition_dir(self.logdir, topic, partition),
                        trash_path(self.staging_dir, topic, partition)))
                    checkpoints.dropped(topic, partition)

    # -------------------------------------------------------------------- abort
    def abort(self) -> None:
        """Forget the write: remove its staging directory and locks. Safe to call twice."""
        self.finished = True
        self._cleanup()

    def _cleanup(self) -> None:
        if os.path.isdir(self.staging_dir):
            # a commit of this job killed while publishing (a Spark worker): the job
            # failed, so its renames are undone; if that fails the journal stays
            recover(self.staging_dir, self.logdir, roll_back=True)
        remove_staging(self.staging_dir)
        for topic in list(self.held_locks):
            release_lock(self.logdir, topic, self.job_id)
        if self.created_logdir:
            try:
                os.rmdir(self.logdir)  # only if nothing was published into it
            except OSError:
                pass



def staged(task, table) -> TaskResult:
    """`table` written through a task writer (local or object store) and finished; the
    task discarded on any error."""
    try:
        task.write(table)
        return task.finish()
    except BaseException:
        task.discard()
        raise


def schemas_task_spec(spec: TaskSpec, existing: List[int], logdir: str) -> TaskSpec:
    """The spec of the task that appends a framed write's SCHEMA records to `_schemas`
    (partition 0, in any save mode, uncompressed as the registry's producer writes them);
    `existing`: the topic's partitions now."""
    if existing and existing != [0]:
        raise WriteError(
            f"the {SCHEMAS_TOPIC} topic in {logdir} has partitions {existing}; Schema "
            f"Registry keeps its schemas in one partition, 0")
    options = replace(spec.options, num_partitions=None if existing else 1,
                      compression=compression.NONE, compression_levels={},
                      value_format="raw", key_format="raw", given_schemas=(), topic_id=None,
                      leader_epoch=None)
    return replace(spec, mode="append", options=options, topic=SCHEMAS_TOPIC, layout=None,
                   framing=None, existing_partitions={**spec.existing_partitions,
                                                      SCHEMAS_TOPIC: list(existing)})


def settled_partition_count(spec: TaskSpec, topic: str, ordered: List[TaskResult],
                            logdir: str) -> int:
    """The partition count a commit writes `topic` with: the existing one, numPartitions,
    or (for a new topic without it) one past the highest partition the tasks wrote."""
    count = spec.partition_count(topic)
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
                f"topic {topic!r} does not exist in {logdir}: set the 'numPartitions' "
                f"option to create it"
            )
        check_inferred_count(topic, highest, logdir)  # before any directory is made
        count = highest + 1
    if highest >= count:
        raise InvalidInputError(
            f"column 'partition' holds {highest} for topic {topic!r}, which has {count} "
            f"partitions"
        )
    return count

def _make_dirs(path: str, exist_ok: bool = True) -> None:
    try:
        os.makedirs(path, exist_ok=exist_ok)
    except OSError as exc:  # no inode left
        raise_out_of_space(exc, path, "creating")
        raise
