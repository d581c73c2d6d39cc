"""segmentlog's writer engine: Kafka segment logs from Arrow tables or rows, no Spark needed.

`SegmentLogWriter` / `write_log` write from Python; `WriteJob` and `TaskWriter` are the
driver and task halves the Spark adapter (`segmentlog_datasource.spark.write`) runs.
"""
from .engine import SegmentLogWriter, rows_to_table, write_log
from ..errors import InvalidOptionError
from .errors import (
    ConcurrentWriteError, InvalidInputError, OutOfSpaceError, TopicLayoutError, WriteAbortedError,
    WriteError,
)
from .input import InputLayout
from .job import CommitSummary, PartitionSummary, WriteJob
from .options import WriteOptions
from .partitioner import murmur2, partitions_for_keys
from .task import TaskResult, TaskSpec, TaskWriter

__all__ = [
    "SegmentLogWriter", "write_log", "rows_to_table", "WriteJob", "TaskWriter", "TaskSpec",
    "TaskResult", "CommitSummary", "PartitionSummary", "WriteOptions", "InputLayout",
    "murmur2", "partitions_for_keys", "WriteError", "InvalidInputError", "InvalidOptionError",
    "TopicLayoutError", "ConcurrentWriteError", "WriteAbortedError", "OutOfSpaceError",
]
