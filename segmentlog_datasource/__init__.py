"""segmentlog: Apache Kafka segment logs as a PySpark data source.

`spark.read.format("segmentlog")` works once the package is installed (Spark finds the
top-level `pyspark_segmentlog` module). `register(spark)` registers the source
explicitly and turns on Python data source filter pushdown for the session.
"""
from .source import SegmentLogDataSource

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark, enable_filter_pushdown: bool = True) -> None:
    """Register the `segmentlog` format with `spark` and enable filter pushdown."""
    spark.dataSource.register(SegmentLogDataSource)
    if enable_filter_pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")


__all__ = ["SegmentLogDataSource", "register", "PUSHDOWN_CONF"]
