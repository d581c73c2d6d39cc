"""segmentlog: Apache Kafka segment logs as a PySpark data source.

`spark.read.format("segmentlog")` works once the package is installed (Spark finds the
top-level `pyspark_segmentlog` module). `register(spark)` registers the source
explicitly and turns on Python data source filter pushdown for the session.

Spark is imported only when the data source is used, so the format core
(`segmentlog_datasource.format`) and the writer engine (`writer`) run without it.
"""
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark, enable_filter_pushdown: bool = True) -> None:
    """Register the `segmentlog` format with `spark` and enable filter pushdown."""
    from .source import SegmentLogDataSource

    spark.dataSource.register(SegmentLogDataSource)
    if enable_filter_pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")


def __getattr__(name):
    if name == "SegmentLogDataSource":
        from .source import SegmentLogDataSource

        return SegmentLogDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SegmentLogDataSource", "register", "PUSHDOWN_CONF"]
