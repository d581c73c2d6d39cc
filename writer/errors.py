"""Errors of the segment-log writer. Each names the option, column, topic or file at fault.

Bad options raise the InvalidOptionError that reads raise too (segmentlog_datasource.errors).
"""
from ..errors import SegmentLogError


class WriteError(SegmentLogError):
    """Base class of every error the writer raises."""


class InvalidInputError(WriteError, ValueError):
    """The data to write has a column, type or value that cannot become a Kafka record."""


class TopicLayoutError(WriteError):
    """An existing topic's directories do not allow this write (partition count, live segment,
    damaged tail)."""


class ConcurrentWriteError(WriteError):
    """Another write holds the topic, or changed it while this write ran."""


class WriteAbortedError(WriteError):
    """The write was aborted (or already finished) and can no longer be used."""


class SinkStateError(WriteError):
    """A streaming sink's record of its micro-batches does not match the log (writer/stream.py)."""
