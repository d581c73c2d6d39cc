"""Consumer lag as a DataFrame: read.consumer_lag's rows, computed on the driver (a
`__consumer_offsets` replay is small next to the topics it describes)."""
from typing import Optional, Sequence, Union

from pyspark.sql.types import (
    IntegerType, LongType, StringType, StructField, StructType, TimestampType,
)

from ..read.consumer_lag import as_of_millis, consumer_lag

LAG_SCHEMA = StructType([
    StructField("group", StringType(), False),
    StructField("groupType", StringType(), False),
    StructField("topic", StringType(), False),
    StructField("partition", IntegerType(), False),
    StructField("committedOffset", LongType(), False),
    StructField("leaderEpoch", IntegerType(), True),
    StructField("metadata", StringType(), True),
    StructField("commitTimestamp", TimestampType(), True),
    StructField("logStartOffset", LongType(), True),
    StructField("logEndOffset", LongType(), True),
    StructField("highWatermark", LongType(), True),
    StructField("lag", LongType(), True),
])


def _moment(millis: Optional[int]):
    import datetime as dt

    if millis is None or millis < 0:
        return None
    return dt.datetime.fromtimestamp(millis / 1000, tz=dt.timezone.utc)


def consumer_lag_dataframe(spark, paths: Union[str, Sequence[str]],
                           group: Optional[str] = None, at=None,
                           options: Optional[dict] = None):
    """A DataFrame of committed offsets and lag per group, topic and partition (see
    read.consumer_lag.consumer_lag); `at`: epoch milliseconds, ISO 8601 text or a
    datetime (read.consumer_lag.as_of_millis)."""
    paths = [paths] if isinstance(paths, str) else list(paths)
    rows = consumer_lag(paths, options, group, as_of_millis(at, "at"))
    data = [(r.group, r.group_type, r.topic, r.partition, r.committed_offset, r.leader_epoch, r.metadata,
             _moment(r.commit_timestamp), r.log_start_offset, r.log_end_offset,
             r.high_watermark, r.lag) for r in rows]
    return spark.createDataFrame(data, LAG_SCHEMA)
