"""Batch reads with Spark: read options and lookups by offset and by time.

Writes an hour of sensor readings (two topics) with the writer engine, then reads them
with `spark.read.format("segmentlog")`: topic selection, headers, Kafka-source offset
JSON, `offset_range` / `offset_ranges` / `time_range` lookups, and split options, printing
how many input partitions each read plans.

    python examples/read_with_lookups.py
"""
import datetime as dt
import json
import os
import shutil
import tempfile

import pyarrow as pa

from example_session import ExampleSession

START = dt.datetime(2023, 11, 14, 22, 0, tzinfo=dt.timezone.utc)
START_MS = int(START.timestamp() * 1000)
MINUTES = 60
PER_MINUTE = 600  # one reading every 100 ms
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def write_sample_log(logdir, readings_count):
    from segmentlog_datasource.writer import write_log

    readings = pa.table({
        "key": [f"sensor-{i % 24}" for i in range(readings_count)],
        "value": [json.dumps({"celsius": round(18 + (i % 50) / 10, 1)}) for i in range(readings_count)],
        "timestamp": pa.array([START_MS + i * 100 for i in range(readings_count)],
                              pa.timestamp("ms", tz="UTC")),
        "headers": pa.array([[{"key": "site", "value": b"plant-a" if i % 24 < 12 else b"plant-b"}]
                             for i in range(readings_count)], HEADERS),
    })
    write_log(logdir, readings, topic="readings", num_partitions=3, compression="lz4",
              segment_bytes=128 * 1024)
    alerts = pa.table({"key": ["sensor-3", "sensor-17"], "value": ["too hot", "offline"],
                       "timestamp": pa.array([START_MS + 600_000, START_MS + 2_400_000],
                                             pa.timestamp("ms", tz="UTC"))})
    write_log(logdir, alerts, topic="alerts", num_partitions=1)


def main(spark=None, minutes=MINUTES):
    """Runs on `spark` when given (and leaves it running), else on a local session;
    `minutes` (30 or more) of readings are written."""
    from pyspark.sql import functions as F

    from segmentlog_datasource import offset_range, offset_ranges, time_range

    readings_count = minutes * PER_MINUTE
    logdir = tempfile.mkdtemp(prefix="segmentlog-read-")
    write_sample_log(logdir, readings_count)
    session = ExampleSession(spark, "segmentlog-read-example",
                             {"spark.sql.session.timeZone": "UTC"})
    spark = session.spark
    try:
        def reader():
            # A DataFrameReader keeps its options, so a new one for every read; splits of
            # at most 64 KiB make the splits each lookup plans show as input partitions.
            return spark.read.format("segmentlog").option("maxPartitionBytes", 64 * 1024)

        def report(what, df, expected):
            count = df.count()
            records = f"{count:,} record" + ("s" if count != 1 else "")
            print(f"{what}: {records}, {df.rdd.getNumPartitions()} input partitions")
            assert count == expected, (what, count, expected)
            return df

        everything = report("the whole log dir", reader().load(logdir), readings_count + 2)
        everything.groupBy("topic", "partition").count().orderBy("topic", "partition").show()

        readings = reader().option("subscribe", "readings").option("includeHeaders", "true").load(logdir)
        (readings.select("partition", "offset", "timestamp",
                         F.col("key").cast("string").alias("key"),
                         F.col("value").cast("string").alias("value"),
                         F.col("headers")[0]["value"].cast("string").alias("site"))
         .where("offset < 2").orderBy("partition", "offset").show(truncate=False))

        report("subscribePattern 'al.*'", reader().option("subscribePattern", "al.*").load(logdir), 2)

        # Offsets as Spark's Kafka source takes them: -2 is earliest, -1 latest; ends exclusive.
        report("startingOffsets/endingOffsets JSON",
               reader().option("subscribe", "readings")
               .option("startingOffsets", json.dumps({"readings": {"0": 100, "1": -2, "2": -1}}))
               .option("endingOffsets", json.dumps({"readings": {"0": 200, "1": 50, "2": -1}}))
               .load(logdir), 150)

        point = report("offset_range: offset 4242 of readings-1",
                       reader().options(**offset_range("readings", 1, 4242, 4243)).load(logdir), 1)
        point.select("offset", F.col("key").cast("string").alias("key"), "timestamp").show(truncate=False)

        report("offset_ranges: two partitions",
               reader().options(**offset_ranges({"readings": {0: (0, 1_000), 2: (4_000, 4_500)}}))
               .load(logdir), 1_500)

        # A time lookup selects offsets, as a consumer's offsetsForTimes does; a where on
        # timestamp makes the window exact whatever the order of timestamps.
        window_start = START + dt.timedelta(minutes=minutes // 2)
        window = reader().options(**time_range(window_start, window_start + dt.timedelta(minutes=1),
                                             topics=["readings"])).load(logdir)
        report(f"time_range: the minute from {window_start:%H:%M} UTC", window, 600)
        window.agg(F.min("timestamp").alias("first"), F.max("timestamp").alias("last")).show(truncate=False)

        report("startingTimestamp for every partition (the last 10 minutes)",
               reader().option("subscribe", "readings")
               .option("startingTimestamp", START_MS + (minutes - 10) * 60_000).load(logdir), 6_000)

        report("maxRecordsPerPartition=1000 (splits of about 1,000 offsets)",
               reader().option("subscribe", "readings").option("maxRecordsPerPartition", 1_000)
               .load(logdir), readings_count)
    finally:
        session.close()
        shutil.rmtree(logdir, ignore_errors=True)
    print("removed", os.path.basename(logdir))


if __name__ == "__main__":
    main()
