"""The Spark a test runs on: its release, and whether the session is a Spark Connect one
(tests/conftest.py's `spark`; .ci/compat runs the `compat` tests on each)."""
from segmentlog_datasource.spark.compat import release


def spark_release(spark):
    """(major, minor) of the Spark behind `spark`."""
    return release(spark.version)


def is_connect(spark) -> bool:
    """Whether `spark` is a Spark Connect session: no SparkContext and no JVM in this
    process, and foreachBatch functions run in the server's Python."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def batch_rows(progress) -> list:
    """The input rows of each micro-batch in a query's recentProgress. Its attribute, not
    its key: a Spark Connect session's progress (pyspark.sql.streaming.listener's
    StreamingQueryProgress from JSON) may have None under the key and the count in its
    sources, which the attribute adds up."""
    return [p.numInputRows for p in progress]
