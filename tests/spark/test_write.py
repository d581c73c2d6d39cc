"""df.write.format("segmentlog") end to end, read back with spark.read.format("segmentlog")
and checked independently with kafka-python."""
import os
import random
import time

import pyarrow as pa
import pytest

from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType, BinaryType, IntegerType, StringType, StructField, StructType,
)

from segmentlog_datasource.writer import SegmentLogWriter

from support.kafka_logs import (
    check_partition_indexes, decode_logdir, kafka_partition, segments_of,
)

T0 = 1_700_000_000_000
# What a write leaves beside the partition directories (#21), and its publish token (#22)
LOG_DIR_FILES = [".segmentlog-publishing", "log-start-offset-checkpoint", "recovery-point-offset-checkpoint",
                 "replication-offset-checkpoint"]
HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()),
    StructField("partition", IntegerType()), StructField("ts_ms", StringType()),
    StructField("headers", HEADERS),
])


def input_rows(n, seed=0, num_partitions=4, big_every=0):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        key = None if i % 4 == 0 else f"user-{rng.randrange(300)}".encode()
        if i % 17 == 0:
            value = None
        elif big_every and i % big_every == 0:
            value = os.urandom(700_000)
        else:
            value = (f"event {i} " * rng.randrange(0, 30)).encode()
        partition = rng.randrange(num_partitions) if i % 9 == 0 else None
        headers = None if i % 3 else [("trace", f"t{i}".encode()), ("\u00e9", None)]
        rows.append((key, value, partition, str(T0 + rng.randint(-60_000, 60_000)), headers))
    return rows


def make_df(spark, rows, slices=4):
    df = spark.createDataFrame(rows, SCHEMA).repartition(slices)
    return df.select("key", "value", "partition",
                     F.timestamp_millis(F.col("ts_ms").cast("long")).alias("timestamp"), "headers")


def read_back(spark, path):
    df = spark.read.format("segmentlog").option("includeHeaders", "true").load(path)
    rows = df.select("key", "value", "topic", "partition", "offset",
                     F.unix_millis("timestamp").alias("ts"), "timestampType", "headers").collect()
    return [(r.key, r.value, r.topic, r.partition, r.offset, r.ts, r.timestampType,
             [(h.key, h.value) for h in (r.headers or [])]) for r in rows]


def check_against_input(rows, got, topic, num_partitions):
    """Every input row is there once, in a partition Kafka's partitioner would pick."""
    assert len(got) == len(rows)
    by_partition = {}
    for key, value, t, partition, offset, ts, ts_type, headers in got:
        assert t == topic and ts_type == 0
        by_partition.setdefault(partition, []).append(offset)
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))  # contiguous from 0
    expected = {}
    for key, value, partition, ts, headers in rows:
        if partition is None and key is not None:
            partition = kafka_partition(key, num_partitions)
        record = (key, value, int(ts), tuple(headers or []))
        expected.setdefault(record, []).append(partition)
    for key, value, _, partition, _, ts, _, headers in got:
        candidates = expected[(key, value, ts, tuple(headers))]
        if None in candidates and partition not in candidates:
            candidates.remove(None)  # a keyless row: any partition
        else:
            candidates.remove(partition)
    assert all(not c for c in expected.values())


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_every_codec(spark, tmp_path, codec):
    path = str(tmp_path / "logdir")
    rows = input_rows(1500, seed=["none", "gzip", "snappy", "lz4", "zstd"].index(codec))
    (make_df(spark, rows).write.format("segmentlog").mode("append")
     .option("topic", "events").option("numPartitions", 4).option("compression.type", codec)
     .option("segment.bytes", 30000).option("batch.size", 4096)
     .option("index.interval.bytes", 2048).save(path))
    check_against_input(rows, read_back(spark, path), "events", 4)
    assert sorted(os.listdir(path)) == sorted([f"events-{p}" for p in range(4)] + LOG_DIR_FILES)
    decoded = decode_logdir(path)  # kafka-python: CRCs, offsets, segment names
    assert sum(len(r) for r in decoded.values()) == len(rows)
    for p in range(4):
        directory = os.path.join(path, f"events-{p}")
        if codec == "none":
            assert len(segments_of(directory)) > 1
        check_partition_indexes(directory, 2048)


def test_many_partitions_large_records_and_string_columns(spark, tmp_path):
    path = str(tmp_path / "logdir")
    rows = input_rows(300, seed=3, num_partitions=24, big_every=50)
    (make_df(spark, rows, slices=3).write.format("segmentlog").mode("append")
     .option("topic", "big").option("numPartitions", "24").option("segment.bytes", 1_500_000)
     .save(path))
    check_against_input(rows, read_back(spark, path), "big", 24)
    assert len(os.listdir(path)) == 24 + len(LOG_DIR_FILES)
    # string key and value columns, and topics from a column
    strings = spark.createDataFrame(
        [(f"k{i}", f"v{i}", f"topic-{i % 2}") for i in range(200)], "key string, value string, topic string")
    strings.write.format("segmentlog").mode("append").option("numPartitions", 3).save(path)
    got = read_back(spark, path)
    for key, value, topic, partition, *_ in got:
        if topic.startswith("topic-"):
            i = int(key.decode()[1:])
            assert value == f"v{i}".encode() and topic == f"topic-{i % 2}"
            assert partition == kafka_partition(key, 3)
    assert sum(1 for r in got if r[2].startswith("topic-")) == 200


def test_each_tasks_batches_start_a_segment_of_their_own(spark, tmp_path):
    """taskSegmentBytes 1: every Spark task's batches of a partition are a segment (the
    staged file renamed into place, its offsets set there), read back whole and in
    Kafka's order by Spark and by kafka-python."""
    path = str(tmp_path / "logdir")
    rows = input_rows(600, seed=7, num_partitions=2)
    (make_df(spark, rows, slices=3).write.format("segmentlog").mode("append")
     .option("topic", "own").option("numPartitions", 2).option("taskSegmentBytes", 1)
     .save(path))
    check_against_input(rows, read_back(spark, path), "own", 2)
    decoded = decode_logdir(path)  # kafka-python: CRCs, offsets, segment names
    assert sum(len(r) for r in decoded.values()) == len(rows)
    for p in range(2):
        directory = os.path.join(path, f"own-{p}")
        assert len(segments_of(directory)) == 3  # one a task
        check_partition_indexes(directory)


def test_append_continues_and_overwrite_replaces(spark, tmp_path):
    path = str(tmp_path / "logdir")
    df = spark.range(1000).select(F.col("id").cast("string").alias("key"),
                                  F.col("id").cast("string").alias("value"))
    writer = df.write.format("segmentlog").option("topic", "t").option("segment.bytes", 8000)
    writer.mode("append").option("numPartitions", 2).save(path)
    before = {p: len(segments_of(os.path.join(path, f"t-{p}"))) for p in range(2)}
    df.write.format("segmentlog").mode("append").option("topic", "t").save(path)
    got = read_back(spark, path)
    assert len(got) == 2000
    for p in range(2):
        offsets = sorted(r[4] for r in got if r[3] == p)
        assert offsets == list(range(len(offsets)))
        assert len(segments_of(os.path.join(path, f"t-{p}"))) > before[p]
        check_partition_indexes(os.path.join(path, f"t-{p}"))
    df.limit(10).write.format("segmentlog").mode("overwrite").option("topic", "t").save(path)
    got = read_back(spark, path)
    assert len(got) == 10 and sorted(os.listdir(path)) == LOG_DIR_FILES + ["t-0", "t-1"]


def _listing(path):
    """Each partition directory's names, and the bytes of each file beside them."""
    found = {}
    for name in os.listdir(path):
        if os.path.isdir(os.path.join(path, name)):
            found[name] = sorted(os.listdir(os.path.join(path, name)))
        else:
            with open(os.path.join(path, name), "rb") as handle:
                found[name] = handle.read()
    return found


def test_failed_job_leaves_no_trace(spark, tmp_path):
    path = str(tmp_path / "logdir")
    spark.range(100).select(F.col("id").cast("string").alias("value")).write \
        .format("segmentlog").mode("append").option("topic", "t").option("numPartitions", 2).save(path)
    listing = _listing(path)

    @F.udf("string")
    def explode_on_one_row(value):
        if value == "4321":
            raise ValueError("task failure on purpose")
        return value

    failing = spark.range(0, 5000, numPartitions=4).select(
        explode_on_one_row(F.col("id").cast("string")).alias("value"))
    with pytest.raises(Exception, match="task failure on purpose"):
        failing.write.format("segmentlog").mode("append").option("topic", "t").save(path)
    assert _listing(path) == listing
    assert len(read_back(spark, path)) == 100
    # the same for a failing write that would have created the log dir
    fresh = str(tmp_path / "fresh")
    with pytest.raises(Exception, match="task failure on purpose"):
        failing.write.format("segmentlog").mode("append").option("topic", "t") \
            .option("numPartitions", 2).save(fresh)
    assert not os.path.exists(fresh)


def test_concurrent_write_to_the_same_topic_fails_clearly(spark, tmp_path):
    path = str(tmp_path / "logdir")
    df = spark.range(50).select(F.col("id").cast("string").alias("value"))
    df.write.format("segmentlog").mode("append").option("topic", "t").option("numPartitions", 1).save(path)
    other = SegmentLogWriter(path, "t")  # another write in progress
    other.write_table(pa.table({"value": [b"other"]}))
    with pytest.raises(Exception, match="being written by another segmentlog write"):
        df.write.format("segmentlog").mode("append").option("topic", "t").save(path)
    other.commit()
    df.write.format("segmentlog").mode("append").option("topic", "t").save(path)
    got = read_back(spark, path)
    assert len(got) == 101 and sorted(r[4] for r in got) == list(range(101))


def test_default_timestamp_is_the_write_time(spark, tmp_path):
    path = str(tmp_path / "logdir")
    before = int(time.time() * 1000)
    spark.range(5).select(F.col("id").cast("string").alias("value")).write.format("segmentlog") \
        .mode("append").option("topic", "t").option("numPartitions", 1).save(path)
    after = int(time.time() * 1000)
    timestamps = {r[5] for r in read_back(spark, path)}
    assert len(timestamps) == 1 and before <= timestamps.pop() <= after


@pytest.mark.parametrize("build, message", [
    (lambda df: df.withColumn("extra", F.lit(1)), "'extra' cannot be written"),
    (lambda df: df.withColumn("partition", F.lit("0")), "column 'partition' has type string"),
    (lambda df: df.withColumn("timestamp", F.lit(5)), "column 'timestamp' has type int"),
    (lambda df: df.drop("value").withColumn("key", F.lit("k")), "no 'value' column"),
])
def test_bad_columns_fail_before_any_file(spark, tmp_path, build, message):
    path = str(tmp_path / "logdir")
    df = build(spark.range(3).select(F.col("id").cast("string").alias("value")))
    with pytest.raises(Exception, match=message):
        df.write.format("segmentlog").mode("append").option("topic", "t") \
            .option("numPartitions", 1).save(path)
    assert not os.path.exists(path)


def test_bad_options_and_save_mode(spark, tmp_path):
    path = str(tmp_path / "logdir")
    df = spark.range(3).select(F.col("id").cast("string").alias("value"))
    with pytest.raises(Exception, match="'compression.type' must be one of"):
        df.write.format("segmentlog").mode("append").option("topic", "t") \
            .option("compression.type", "brotli").save(path)
    with pytest.raises(Exception, match="unknown write option 'segment.size'"):
        df.write.format("segmentlog").mode("append").option("topic", "t") \
            .option("segment.size", "1").save(path)
    with pytest.raises(Exception, match="set the 'numPartitions' option"):
        df.write.format("segmentlog").mode("append").option("topic", "t").save(path)
    # Spark itself refuses the default mode (errorifexists) for Python data sources
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("segmentlog").option("topic", "t").option("numPartitions", 1).save(path)
    assert not os.path.exists(path)


def test_a_store_without_conditional_creates_is_refused(spark):
    df = spark.range(3).select(F.col("id").cast("string").alias("value"))
    with pytest.raises(Exception, match=r"option 'path' is 'gs://bucket/x': writing into gs:// "
                                        r"stores is not supported"):
        df.write.format("segmentlog").mode("append").option("topic", "t") \
            .option("numPartitions", 1).save("gs://bucket/x")


def test_bad_values_found_in_tasks_leave_no_trace(spark, tmp_path):
    path = str(tmp_path / "logdir")
    spark.range(10).select(F.col("id").cast("string").alias("value")).write.format("segmentlog") \
        .mode("append").option("topic", "t").option("numPartitions", 2).save(path)
    listing = _listing(path)
    bad_partition = spark.range(100, numPartitions=2).select(
        F.col("id").cast("string").alias("value"),
        F.when(F.col("id") == 77, 5).otherwise(0).cast("int").alias("partition"))
    with pytest.raises(Exception, match="column 'partition' holds 5 for topic 't', which has 2"):
        bad_partition.write.format("segmentlog").mode("append").option("topic", "t").save(path)
    too_big = spark.range(3).select(F.expr("repeat('x', 2000000)").alias("value"))
    with pytest.raises(Exception, match="raise the 'max.message.bytes' option"):
        too_big.write.format("segmentlog").mode("append").option("topic", "t").save(path)
    assert _listing(path) == listing
    assert len(read_back(spark, path)) == 10


def test_empty_partitions_of_a_new_topic_read_back(spark, tmp_path):
    path = str(tmp_path / "logdir")
    spark.createDataFrame([("k", "v")], "key string, value string").write.format("segmentlog") \
        .mode("append").option("topic", "t").option("numPartitions", 3).save(path)
    assert sorted(os.listdir(path)) == LOG_DIR_FILES + ["t-0", "t-1", "t-2"]
    got = read_back(spark, path)
    assert [(r[0], r[1], r[3], r[4]) for r in got] == [(b"k", b"v", kafka_partition(b"k", 3), 0)]
