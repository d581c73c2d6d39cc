"""segmentlog: Apache Kafka segment logs as a PySpark data source.

`spark.read.format("segmentlog")` works once the package is installed (Spark finds the
top-level `pyspark_segmentlog` module). `register(spark)` registers the source
explicitly, and turns filter pushdown on only where Spark gives exact answers with it.

Spark is imported only when the data source is used, so the format core
(`segmentlog_datasource.format`), the lookup option helpers and the writer engine
(`writer`) run without it.
"""
from .lookups import offset_range, offset_ranges, time_range

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark, enable_filter_pushdown=None) -> bool:
    """Register the `segmentlog` format with `spark`; return whether pushdown is on.

    enable_filter_pushdown=None (the default) turns Python data source filter pushdown on
    only when this Spark does not leak a pushed-down read into later queries of the same
    DataFrame (Spark 4.3 does; see the README), and otherwise leaves the setting alone.
    True turns it on regardless, False turns it off.
    """
    from .source import SegmentLogDataSource

    spark.dataSource.register(SegmentLogDataSource)
    if enable_filter_pushdown is False:
        spark.conf.set(PUSHDOWN_CONF, "false")
    else:
        from .pushdown_check import pushed_reads_leak

        leaks = pushed_reads_leak(spark)
        if enable_filter_pushdown and leaks:
            import warnings

            warnings.warn(
                f"filter pushdown is on, and Spark {spark.version} reuses a pushed-down read "
                "in later queries of the same DataFrame, which then return too few rows: "
                "load() a new DataFrame for every filtered query (README, 'Filter pushdown')",
                RuntimeWarning, stacklevel=2)
        if enable_filter_pushdown or not leaks:
            spark.conf.set(PUSHDOWN_CONF, "true")
    return spark.conf.get(PUSHDOWN_CONF, "false").lower() == "true"


def __getattr__(name):
    if name == "SegmentLogDataSource":
        from .source import SegmentLogDataSource

        return SegmentLogDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SegmentLogDataSource", "register", "PUSHDOWN_CONF", "offset_range",
           "offset_ranges", "time_range"]
