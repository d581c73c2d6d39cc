"""Kafka's on-disk log format, free of Spark: codec, indexes and the partition-log view."""
from .errors import CorruptLogError, SegmentLogError, UnsupportedFormatError
from .log import PartitionLog, Segment, discover_partitions, segment_file_name
from .scan import FastPathUnavailableWarning, ScanOptions, TransactionFilter, scan_segment

__all__ = [
    "CorruptLogError", "SegmentLogError", "UnsupportedFormatError", "PartitionLog", "Segment",
    "discover_partitions", "segment_file_name", "ScanOptions", "TransactionFilter", "scan_segment",
    "FastPathUnavailableWarning",
]
