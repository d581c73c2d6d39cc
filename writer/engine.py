"""Writing a segment log from Python, without Spark.

    from segmentlog_datasource.writer import SegmentLogWriter

    with SegmentLogWriter("/data/logdir", topic="events", num_partitions=3,
                          compression="lz4") as w:
        w.write_table(arrow_table)          # columns: value, key, partition, timestamp, headers
        w.write_rows([{"key": b"k", "value": b"v"}])
    # leaving the block commits; an exception inside it aborts

Nothing is visible in the log dir until `commit()`; `abort()` (or any error) leaves the
log dir as it was. The log dir may be an `s3://bucket/prefix` (appends only; the store.*
options, e.g. `options={"store.endpoint": "http://127.0.0.1:9000"}`, reach the store;
see objectstore.py).
"""
import datetime
from typing import Any, Dict, Iterable, Mapping, Optional

import pyarrow as pa

from .errors import InvalidInputError, WriteAbortedError
from ..format.arrow import HEADER_TYPE
from .input import InputLayout, check_column_names
from ..storage import STORE_OPTIONS, parse_store_config
from .job import CommitSummary
from .objectstore import STORE_OPTION_NAMES, open_write_job
from .options import WriteOptions, check_option_names

_KWARG_OPTIONS = {
    "num_partitions": "numPartitions",
    "compression": "compression.type",
    "batch_size": "batch.size",
    "segment_bytes": "segment.bytes",
    "segment_ms": "segment.ms",
    "segment_index_bytes": "segment.index.bytes",
    "index_interval_bytes": "index.interval.bytes",
    "timestamp_type": "message.timestamp.type",
    "max_message_bytes": "max.message.bytes",
    "leader_epoch": "leaderEpoch",
    "topic_id": "topicId",
}


class SegmentLogWriter:
    """One write of Arrow tables or rows into a log dir, committed as a whole.

    `topic` applies to every row (like the Spark `topic` option); without it the data
    needs a `topic` column. Options take Python names (`num_partitions`, `compression`,
    `batch_size`, `segment_bytes`, `segment_ms`, `segment_index_bytes`,
    `index_interval_bytes`, `timestamp_type`, `max_message_bytes`, `leader_epoch`,
    `topic_id`) or Kafka names in `options` (`{"compression.type": "zstd",
    "segment.bytes": 1 << 20}`).
    """

    def __init__(self, logdir: str, topic: Optional[str] = None, *, mode: str = "append",
                 options: Optional[Mapping[str, Any]] = None,
                 write_time_ms: Optional[int] = None, **kwargs):
        merged: Dict[str, Any] = dict(options or {})
        for name, value in kwargs.items():
            if name not in _KWARG_OPTIONS:
                raise TypeError(f"SegmentLogWriter got an unexpected keyword argument {name!r}")
            if value is not None:
                merged[_KWARG_OPTIONS[name]] = value
        check_option_names(merged, STORE_OPTIONS)
        store_options = {k: v for k, v in merged.items() if str(k).lower() in STORE_OPTION_NAMES}
        self.options = WriteOptions.from_mapping(
            {k: v for k, v in merged.items() if k not in store_options})
        self.job = open_write_job(
            logdir, mode=mode, topic=topic, options=self.options, write_time_ms=write_time_ms,
            store_config=parse_store_config(store_options) if store_options else None).start()
        self._task = self.job.task_writer(0, 0)
        self.summary: Optional[CommitSummary] = None
        self._done = False

    @property
    def logdir(self) -> str:
        return self.job.logdir

    def write_table(self, data) -> None:
        """Add a pa.Table or pa.RecordBatch of rows (any error aborts the whole write)."""
        self._check()
        try:
            if self.options.framed_sides:  # the schemas are fixed by the first columns
                schema = data.schema if isinstance(data, (pa.Table, pa.RecordBatch)) else None
                if schema is not None:
                    self.job.plan_framing(InputLayout.from_schema(
                        schema, self.job.topic, self.options.framed_sides))
            self._task.write(data)
        except BaseException:
            self.abort()
            raise

    def write_batches(self, batches: Iterable) -> None:
        for batch in batches:
            self.write_table(batch)

    def write_rows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Add rows given as dicts with the column names (`value`, `key`, `topic`,
        `partition`, `timestamp` as datetime or epoch ms, `headers` as (key, value) pairs)."""
        self._check()
        try:
            table = rows_to_table(rows)
        except BaseException:
            self.abort()
            raise
        self.write_table(table)

    def commit(self) -> CommitSummary:
        """Publish everything written so far; returns the offsets each partition got."""
        self._check()
        try:
            result = self._task.finish()
            self.summary = self.job.commit([result])
        except BaseException:
            self.abort()
            raise
        self._done = True
        return self.summary

    def abort(self) -> None:
        """Drop everything written; the log dir stays as it was."""
        if self._done:
            return
        self._done = True
        try:
            self._task.discard()
        finally:
            self.job.abort()

    def _check(self):
        if self._done:
            raise WriteAbortedError("this SegmentLogWriter has already been committed or aborted")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.abort()
        elif not self._done:
            self.commit()
        return False


def write_log(logdir: str, data, topic: Optional[str] = None, **kwargs) -> CommitSummary:
    """Write `data` (a pa.Table, pa.RecordBatch, iterable of those, or list of row dicts)
    in one committed write. Keyword arguments are those of SegmentLogWriter."""
    writer = SegmentLogWriter(logdir, topic, **kwargs)
    try:
        if isinstance(data, (pa.Table, pa.RecordBatch)):
            writer.write_table(data)
        else:
            items = list(data)
            if items and isinstance(items[0], Mapping):
                writer.write_rows(items)
            else:
                writer.write_batches(items)
    except BaseException:
        writer.abort()
        raise
    return writer.commit()


def rows_to_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Row dicts as an Arrow table with the writer's column types."""
    rows = list(rows)
    names = []
    for row in rows:
        for name in row:
            if name not in names:
                names.append(name)
    check_column_names(names, "row field")
    arrays = {}
    for name in names:
        column = [row.get(name) for row in rows]
        if name in ("key", "value"):
            arrays[name] = pa.array([_to_bytes(name, v) for v in column], pa.binary())
        elif name == "topic":
            arrays[name] = pa.array(column, pa.string())
        elif name == "partition":
            arrays[name] = pa.array(column, pa.int32())
        elif name == "timestamp":
            arrays[name] = pa.array([_to_millis(v) for v in column], pa.timestamp("ms", tz="UTC"))
        elif name == "headers":
            arrays[name] = pa.array(
                [None if hs is None else [{"key": k, "value": _to_bytes("headers", v)}
                                          for k, v in _header_pairs(hs)] for hs in column],
                HEADER_TYPE,
            )
    if "value" not in arrays:
        arrays["value"] = pa.nulls(len(rows), pa.binary())
    return pa.table(arrays)


def _header_pairs(headers):
    if isinstance(headers, Mapping):
        return list(headers.items())
    pairs = []
    for item in headers:
        if isinstance(item, Mapping):
            pairs.append((item["key"], item.get("value")))
        else:
            key, value = item
            pairs.append((key, value))
    return pairs


def _to_bytes(name, value):
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidInputError(f"field {name!r} must be bytes or str, got {type(value).__name__}")


def _to_millis(value):
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return int(value.timestamp() * 1000)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise InvalidInputError(
        f"field 'timestamp' must be a datetime or epoch milliseconds, got {type(value).__name__}"
    )
