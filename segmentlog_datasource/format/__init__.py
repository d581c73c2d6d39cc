"""Kafka's on-disk log format, free of Spark: codec, indexes and the partition-log view."""
from ..errors import CorruptLogError, SegmentLogError, UnsupportedFormatError
from .fastpath import FastPathUnavailableWarning
from .log import PartitionLog, Segment, discover_partitions, segment_file_name
from .scan import ScanOptions, SegmentRange, TransactionFilter, scan_segment

__all__ = [
    "CorruptLogError", "SegmentLogError", "UnsupportedFormatError", "PartitionLog", "Segment",
    "discover_partitions", "segment_file_name", "ScanOptions", "SegmentRange", "TransactionFilter", "scan_segment",
    "FastPathUnavailableWarning",
]
