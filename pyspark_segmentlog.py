"""Entry point Spark looks for: top-level `pyspark_*` modules exposing `DefaultSource`."""
from segmentlog_datasource import SegmentLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
