"""The Spark data source: thin adapters over the read layer and the writer engine."""
try:
    import pyspark  # noqa: F401
except ImportError as exc:  # the core installs without Spark; this layer needs it
    raise ImportError(
        "segmentlog's Spark data source needs PySpark: pip install \"segmentlog[spark]\" "
        "(or run where a Spark installation provides pyspark)") from exc
