"""Share groups' progress as a DataFrame: read.share_groups' rows, computed on the driver
(a `__share_group_state` replay is small next to the topics it describes)."""
from typing import Optional, Sequence, Union

from pyspark.sql.types import (
    ArrayType, IntegerType, LongType, ShortType, StringType, StructField, StructType,
    TimestampType,
)

from ..read.share_groups import share_group_state

STATE_BATCH = StructType([
    StructField("firstOffset", LongType(), False),
    StructField("lastOffset", LongType(), False),
    StructField("deliveryState", StringType(), False),
    StructField("deliveryCount", ShortType(), False),
])

SHARE_GROUP_SCHEMA = StructType([
    StructField("group", StringType(), False),
    StructField("topicId", StringType(), False),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), False),
    StructField("startOffset", LongType(), False),
    StructField("deliveryCompleteCount", IntegerType(), False),
    StructField("inFlightRecords", LongType(), False),
    StructField("maxDeliveryCount", IntegerType(), False),
    StructField("stateBatches", ArrayType(STATE_BATCH, False), False),
    StructField("stateEpoch", IntegerType(), False),
    StructField("leaderEpoch", IntegerType(), False),
    StructField("snapshotEpoch", IntegerType(), False),
    StructField("createTimestamp", TimestampType(), True),
    StructField("writeTimestamp", TimestampType(), True),
    StructField("highWatermark", LongType(), True),
    StructField("lag", LongType(), True),
])


def _moment(millis: int):
    import datetime as dt

    if millis <= 0:  # Kafka's NO_TIMESTAMP
        return None
    return dt.datetime.fromtimestamp(millis / 1000, tz=dt.timezone.utc)


def share_group_dataframe(spark, paths: Union[str, Sequence[str]],
                          group: Optional[str] = None, options: Optional[dict] = None):
    """A DataFrame of each share-partition's progress (see read.share_groups)."""
    paths = [paths] if isinstance(paths, str) else list(paths)
    rows = share_group_state(paths, options, group)
    data = [(r.group, r.topic_id, r.topic, r.partition, r.start_offset,
             r.delivery_complete_count, r.in_flight_records, r.max_delivery_count,
             [(b["firstOffset"], b["lastOffset"], b["deliveryState"], b["deliveryCount"])
              for b in r.state_batches],
             r.state_epoch, r.leader_epoch, r.snapshot_epoch, _moment(r.create_timestamp),
             _moment(r.write_timestamp), r.high_watermark, r.lag) for r in rows]
    return spark.createDataFrame(data, SHARE_GROUP_SCHEMA)
