"""A streaming sink: micro-batches appended to a log dir exactly once, without Spark.

Each micro-batch is one append write (job.py). Its tasks stage before the job that
commits them exists, so they stage under a name the batch id decides:

    .segmentlog-staging-stream-<query>-<batch>-<run>/   the batch's staging directory
    .segmentlog-sink-<query>.json                        the query's record (below)
    .segmentlog-lock-.sink-<query>                       held while a batch commits

The record is a plain dot-prefixed file (readers skip dot-names; a Kafka broker ignores
files in a log dir root but refuses unknown directories). It holds the highest batch id
committed, what that batch added, and the intent of a commit under way:

    {"version": 1, "query_id": ..., "committed_batch": 7,
     "last_commit": {"batch": 7, "partitions": {"orders": {"0": [120, 180]}}},
     "pending": {"batch": 8, "partitions": {"orders": {"0": [180, 240], "1": [null, 0]}}}}

where each partition maps to its log end offset before and after the batch (null: the
partition directory did not exist). A commit, under the sink lock:

1. settles a pending intent left by a commit that stopped: every partition at its
   "after" offset means it was published (it becomes committed), every one at
   "before" means it was not (the intent is dropped); anything else is an error;
2. discards a batch whose id is not above the committed one (a replay);
3. plans the append, records the intent, publishes, records the batch as committed,
   each record replaced atomically (temporary file, fsync, rename). Publishing includes
   the log dir's checkpoints (checkpointing.py): a streaming reader of the log dir, which
   stops at the high watermark, sees the batch once they are updated;
4. removes the batch's staging directories, and those of earlier batches of the query
   (attempts that never reported, from any run). Staging directories record the driver
   as their owner, so those of a dead driver go with any later write's clean-up.

The guarantee covers a process that stops anywhere (kill -9); like the batch writer, the
segment files are not fsynced, so a power loss may lose published data.
"""
import json
import os
import re
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from ..errors import InvalidOptionError

from .errors import (
    ABANDONED, ConcurrentWriteError, SinkStateError, WriteError, raise_out_of_space,
)
from .fsops import remove_staging
from .objectstore import refuse_stream_into_store
from .input import InputLayout
from .job import CommitSummary, WriteJob
from .lockfiles import OWNER_FILE, owner_info
from .locks import acquire_lock, clean_dead_writes, release_lock
from .logdir import STAGING_PREFIX, inspect_tail, list_topics, partition_dir
from .options import WriteOptions
from .publish import recover
from .task import TaskResult, TaskSpec, TaskWriter

SINK_PREFIX = ".segmentlog-sink-"
SINK_LOCK_NAME = ".sink-"  # after LOCK_PREFIX; no topic starts with '.'
RECORD_VERSION = 1
_QUERY_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$")
_BATCH_RUN = re.compile(r"^(\d+)-([0-9a-f]{8})$")  # what follows the query id in a staging name


def read_query_id(checkpoint_location: str) -> str:
    """The streaming query id Spark keeps in `<checkpointLocation>/metadata` ({"id": ...});
    a restarted query keeps it, a new checkpoint gets a new one."""
    if not checkpoint_location:
        raise InvalidOptionError(
            "the segmentlog streaming sink needs option 'checkpointLocation': it keeps the "
            "micro-batches it committed under the query id stored there (setting only "
            "spark.sql.streaming.checkpointLocation does not reach the sink)",
            "checkpointLocation",
        )
    location = str(checkpoint_location)
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme == "file":
        path = urllib.parse.unquote(parsed.path)
    elif parsed.scheme == "":
        path = location
    else:
        raise InvalidOptionError(
            f"option 'checkpointLocation' is {location!r}: the segmentlog streaming sink reads "
            f"the query id from the checkpoint's metadata file and can read only local paths "
            f"(or file: URIs)", "checkpointLocation",
        )
    metadata = os.path.join(os.path.abspath(os.path.expanduser(path)), "metadata")
    try:
        with open(metadata, "rb") as handle:
            text = handle.read().decode("utf-8")
    except OSError as exc:
        raise SinkStateError(
            f"cannot read the query id from {metadata} (option 'checkpointLocation' is "
            f"{location!r}): {exc.strerror or exc}"
        ) from None
    try:
        query_id = json.loads(text.strip().splitlines()[0])["id"]
    except (ValueError, IndexError, KeyError, TypeError):
        raise SinkStateError(f"{metadata} does not hold a streaming query id ({text[:80]!r})") \
            from None
    return check_query_id(query_id)


def check_query_id(query_id) -> str:
    if not isinstance(query_id, str) or not _QUERY_ID.match(query_id):
        raise InvalidOptionError(
            f"query id {query_id!r} cannot name the sink's record: use letters, digits, "
            f"'.', '_' and '-' (at most 128)"
        )
    return query_id


def sink_record_path(logdir: str, query_id: str) -> str:
    return os.path.join(logdir, SINK_PREFIX + query_id + ".json")


# ------------------------------------------------------------------------ record

@dataclass
class SinkRecord:
    """What the log dir remembers of one query's micro-batches."""

    query_id: str
    committed_batch: int = -1
    last_commit: Optional[dict] = None
    pending: Optional[dict] = None

    @classmethod
    def load(cls, path: str, query_id: str) -> "SinkRecord":
        try:
            with open(path, "rb") as handle:
                data = json.loads(handle.read().decode("utf-8"))
        except FileNotFoundError:
            return cls(query_id)
        except (OSError, ValueError) as exc:
            raise SinkStateError(f"the streaming sink's record {path} is unreadable: {exc}") \
                from None
        if not isinstance(data, dict) or data.get("version") != RECORD_VERSION or \
                data.get("query_id") != query_id or \
                not isinstance(data.get("committed_batch"), int):
            raise SinkStateError(
                f"the streaming sink's record {path} is not a version-{RECORD_VERSION} record "
                f"of query {query_id}"
            )
        return cls(query_id, data["committed_batch"], data.get("last_commit"),
                   data.get("pending"))

    def store(self, path: str, extra: Optional[dict] = None) -> None:
        """Replace the record atomically and durably."""
        data = {"version": RECORD_VERSION, "query_id": self.query_id,
                "committed_batch": self.committed_batch, "last_commit": self.last_commit,
                "pending": self.pending, "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        data.update(extra or {})
        temporary = f"{path}.tmp-{uuid.uuid4().hex[:12]}"
        try:
            with open(temporary, "wb") as handle:
                handle.write(json.dumps(data, separators=(",", ":")).encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            try:
                os.unlink(temporary)
            except FileNotFoundError:
                pass
            raise
        directory = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def partition_offsets(summary: CommitSummary, existed) -> Dict[str, Dict[str, list]]:
    """{topic: {partition: [end before, end after]}}; before is None for a new partition."""
    offsets: Dict[str, Dict[str, list]] = {}
    for p in summary.partitions:
        before = p.start_offset if existed(p.topic, p.partition) else None
        offsets.setdefault(p.topic, {})[str(p.partition)] = [before, p.end_offset]
    return offsets


# ------------------------------------------------------------------------- sink

@dataclass
class StagedTask:
    """A task's staged output of one micro-batch, reported to the batch's commit."""

    batch_id: int
    result: TaskResult


@dataclass
class BatchOutcome:
    batch_id: int
    status: str  # "committed", "empty" (nothing to write) or "replay" (already committed)
    summary: Optional[CommitSummary] = None


class StreamSink:
    """One streaming query's appends into one log dir; picklable, holds nothing open.

    The query id (`read_query_id`) names the sink's record. Tasks call `stage`; the
    driver calls `commit` or `abort` once per micro-batch, from any process, each time
    with a new StreamSink if it likes.
    """

    def __init__(self, logdir: str, query_id: str, *, topic: Optional[str] = None,
                 options: Optional[WriteOptions] = None, layout: Optional[InputLayout] = None,
                 under_jvm: bool = False, checkpoint_location: Optional[str] = None):
        refuse_stream_into_store(logdir)
        self.query_id = check_query_id(query_id)
        self.options = options or WriteOptions()
        self.layout = layout
        self.under_jvm = under_jvm
        self.checkpoint_location = checkpoint_location
        # The checks of a batch write, before any micro-batch: bad options, a new topic
        # without numPartitions, a tail that cannot be continued.
        probe = WriteJob(logdir, mode="append", topic=topic, options=self.options,
                         layout=layout, under_jvm=under_jvm)
        self.logdir = probe.logdir
        self.topic = probe.topic
        self.framing = probe.spec.framing  # the ids the tasks frame with (framed.py)
        self.owner = owner_info(under_jvm)  # the driver's: it outlives every task
        self.run = uuid.uuid4().hex[:8]
        self.record_path = sink_record_path(self.logdir, self.query_id)

    # ------------------------------------------------------------------ tasks
    def batch_job_id(self, batch_id: int) -> str:
        return f"stream-{self.query_id}-{int(batch_id)}-{self.run}"

    def task_writer(self, batch_id: int, task_index: int = 0, attempt: int = 0) -> TaskWriter:
        """A TaskWriter staging into the batch's directory (created here, owned by the
        driver), planning against the partitions the log dir has now."""
        job_id = self.batch_job_id(batch_id)
        staging = os.path.join(self.logdir, STAGING_PREFIX + job_id)
        os.makedirs(staging, exist_ok=True)
        owner = os.path.join(staging, OWNER_FILE)
        if not os.path.exists(owner):
            temporary = f"{owner}.tmp-{uuid.uuid4().hex[:8]}"
            try:
                with open(temporary, "w") as handle:
                    json.dump(dict(self.owner, job=job_id), handle)
                os.replace(temporary, owner)
            except OSError as exc:
                try:
                    os.unlink(temporary)
                except FileNotFoundError:
                    pass
                raise_out_of_space(exc, owner)
                raise
        spec = TaskSpec(job_id, self.logdir, staging, "append", self.options, self.topic,
                        list_topics(self.logdir), int(time.time() * 1000), self.layout,
                        self.framing)
        return TaskWriter(spec, task_index, attempt)

    def stage(self, batch_id: int, data: Iterable, task_index: int = 0,
              attempt: int = 0) -> StagedTask:
        """Encode one task's Arrow batches (or tables) of a micro-batch into staging."""
        task = self.task_writer(batch_id, task_index, attempt)
        try:
            for item in data:
                task.write(item)
            return StagedTask(int(batch_id), task.finish())
        except BaseException:
            task.discard()
            raise

    # ----------------------------------------------------------------- commit
    def committed_batch(self) -> int:
        """The highest batch id committed so far (-1: none)."""
        return SinkRecord.load(self.record_path, self.query_id).committed_batch

    def commit(self, batch_id: int, staged: Iterable[Optional[StagedTask]], *,
               before_publish: Optional[Callable[[CommitSummary], None]] = None,
               after_publish: Optional[Callable[[CommitSummary], None]] = None) -> BatchOutcome:
        """Append the micro-batch once. `before_publish` runs once its intent is recorded,
        `after_publish` once it is visible and before it is recorded as committed."""
        batch_id = int(batch_id)
        tasks = [s for s in staged if s is not None]
        for task in tasks:
            if task.batch_id != batch_id:
                raise WriteError(
                    f"micro-batch {batch_id} of query {self.query_id} got the output of a task "
                    f"of micro-batch {task.batch_id}"
                )
        job_ids = sorted({task.result.job_id for task in tasks})
        if len(job_ids) > 1:
            raise WriteError(f"micro-batch {batch_id} was staged by several runs: {job_ids}")
        job_id = job_ids[0] if job_ids else self.batch_job_id(batch_id)
        os.makedirs(self.logdir, exist_ok=True)
        self._lock(job_id)
        try:
            clean_dead_writes(self.logdir)  # any query's, whose driver is gone
            record = SinkRecord.load(self.record_path, self.query_id)
            if record.pending is not None:
                self._settle(record, job_id)
            if batch_id <= record.committed_batch:
                return BatchOutcome(batch_id, "replay")
            if sum(task.result.records for task in tasks) == 0:
                record.committed_batch = batch_id
                record.last_commit = {"batch": batch_id, "partitions": {}}
                self._store(record)
                return BatchOutcome(batch_id, "empty")
            return self._publish(record, batch_id, job_id, [t.result for t in tasks],
                                 before_publish, after_publish)
        finally:
            self._sweep(lambda batch: batch <= batch_id)
            release_lock(self.logdir, SINK_LOCK_NAME + self.query_id, job_id)

    def _publish(self, record, batch_id, job_id, results, before_publish, after_publish):
        job = WriteJob(self.logdir, mode="append", topic=self.topic, options=self.options,
                       layout=self.layout, under_jvm=self.under_jvm, job_id=job_id,
                       framing=self.framing)

        def existed(topic, partition):
            return partition in job.existing_partitions.get(topic, [])

        def record_intent(summary):
            record.pending = {"batch": batch_id, "job": job_id,
                              "partitions": partition_offsets(summary, existed)}
            self._store(record)
            if before_publish is not None:
                before_publish(summary)

        def record_commit(summary):
            if after_publish is not None:
                after_publish(summary)
            record.committed_batch = batch_id
            record.last_commit = {"batch": batch_id, "partitions": record.pending["partitions"]}
            record.pending = None
            self._store(record, outcome=(
                f"micro-batch {batch_id} of query {self.query_id} was published, but the "
                f"sink's record still has it pending: the next commit finds it published and "
                f"records it, without writing it again"))

        try:
            job.start()
            summary = job.commit(results, before_publish=record_intent,
                                 after_publish=record_commit)
        finally:
            job.abort()  # staging and locks; a no-op after a commit
        return BatchOutcome(batch_id, "committed", summary)

    def _settle(self, record: SinkRecord, job_id: str) -> None:
        """Decide from the log whether the pending batch was published, and record it."""
        pending = record.pending
        partitions = pending.get("partitions") or {}
        locked = []
        try:
            for topic in sorted(partitions):
                acquire_lock(self.logdir, topic, job_id, "append", self.under_jvm)
                locked.append(topic)
            at_before, at_after, neither = [], [], []
            for topic, offsets in sorted(partitions.items()):
                for partition, (before, after) in sorted(offsets.items(), key=lambda i: int(i[0])):
                    now = self._log_end(topic, int(partition))
                    where = (topic, int(partition), before, after, now)
                    if now == after:
                        at_after.append(where)
                    elif now == before:
                        at_before.append(where)
                    else:
                        neither.append(where)
        finally:
            for topic in locked:
                release_lock(self.logdir, topic, job_id)
        batch = pending.get("batch")
        if not neither and not at_before:
            record.committed_batch = max(record.committed_batch, batch)
            record.last_commit = {"batch": batch, "partitions": partitions}
        elif not neither and not at_after:
            pass  # never published: the batch is written again
        else:
            def describe(items):
                return "; ".join(
                    f"{t}-{p}: log end offset {'none (no directory)' if now is None else now}, "
                    f"{'none (no directory)' if b is None else b} before the batch and {a} after"
                    for t, p, b, a, now in items)
            raise SinkStateError(
                f"{self.record_path} says micro-batch {batch} of streaming query "
                f"{self.query_id} was being published when its commit stopped, but the log "
                f"does not show it either all published or not published at all. At their "
                f"'after' offset: {describe(at_after) or 'none'}. At their 'before' offset: "
                f"{describe(at_before) or 'none'}. Neither: {describe(neither) or 'none'}. "
                f"The commit was stopped while publishing, or another writer changed these "
                f"partitions since. Check them; then in that file either remove 'pending' "
                f"(the query writes the batch again) or set 'committed_batch' to {batch} and "
                f"remove 'pending' (the batch stays as it is)"
            )
        record.pending = None
        self._store(record)

    def _log_end(self, topic: str, partition: int) -> Optional[int]:
        directory = partition_dir(self.logdir, topic, partition)
        if not os.path.isdir(directory):
            return None
        return inspect_tail(directory).log_end_offset

    # ------------------------------------------------------------------ abort
    def abort(self, batch_id: int) -> None:
        """Forget a failed micro-batch: remove what its tasks staged, every attempt's
        (Spark may pass no message at all, when every task failed)."""
        batch_id = int(batch_id)
        self._sweep(lambda batch: batch == batch_id)

    # ---------------------------------------------------------------- helpers
    def _lock(self, job_id: str) -> None:
        try:
            acquire_lock(self.logdir, SINK_LOCK_NAME + self.query_id, job_id, "append",
                         self.under_jvm)
        except ConcurrentWriteError as exc:
            raise ConcurrentWriteError(
                f"another commit of streaming query {self.query_id} into {self.logdir} is under "
                f"way (is the query running twice from one checkpoint?): {exc}"
            ) from None

    def _store(self, record: SinkRecord, outcome: str = ABANDONED) -> None:
        extra = {"checkpoint_location": self.checkpoint_location} \
            if self.checkpoint_location else None
        try:
            record.store(self.record_path, extra)
        except OSError as exc:
            raise_out_of_space(exc, self.record_path, outcome=outcome)
            raise

    def _staging_batches(self) -> List[Tuple[int, str]]:
        prefix = f"{STAGING_PREFIX}stream-{self.query_id}-"
        found = []
        for name in os.listdir(self.logdir) if os.path.isdir(self.logdir) else ():
            match = _BATCH_RUN.match(name[len(prefix):]) if name.startswith(prefix) else None
            if match:
                found.append((int(match.group(1)), name))
        return found

    def _sweep(self, which: Callable[[int], bool]) -> None:
        for batch, name in self._staging_batches():
            if which(batch):
                # a commit killed while publishing left its journal: undo it, so the
                # pending intent settles as "not published"
                recover(os.path.join(self.logdir, name), self.logdir, roll_back=True)
                remove_staging(os.path.join(self.logdir, name))
        for name in os.listdir(self.logdir) if os.path.isdir(self.logdir) else ():
            if name.startswith(os.path.basename(self.record_path) + ".tmp-"):
                try:  # a record write that was killed half way
                    os.unlink(os.path.join(self.logdir, name))
                except FileNotFoundError:
                    pass
