"""df.write.format("segmentlog") into S3 (moto's server on loopback behind the counting
proxy; #12): a new topic and an append read back through spark.read as written, with the
same segment bytes as the same write to a local dir; overwrite and streaming refused.

The store is named by store.* options: Spark's Python workers get the environment the JVM
had when the session started, not the one this module could set.
"""
import os

import pytest
from pyspark.sql import functions as F
from segmentlog_datasource.format.pending import PUBLISH_TOKEN

BUCKET = "spark-writes"
ACCESS_KEY = "AKIASEGMENTLOGWRITE1"
SECRET = "sl-spark-write-secret-Hq2m8Rt4"  # moto takes any secret: this one is looked for


@pytest.fixture(scope="module")
def store_options(s3_server):
    s3_server.make_bucket(BUCKET)
    return {"store.endpoint": s3_server.endpoint, "store.region": s3_server.region,
            "store.accessKeyId": ACCESS_KEY, "store.secretAccessKey": SECRET}


def frame(spark, tag, count):
    rows = [(f"key-{i % 11}".encode(), f"{tag}-{i:04d}".encode()) for i in range(count)]
    # two input partitions: two tasks, each staging and uploading its own batches
    return spark.createDataFrame(rows, "key binary, value binary").repartition(2)


def written(spark, path, options):
    reader = spark.read.format("segmentlog").options(**options)
    return reader.load(path).select("topic", "partition", "offset", "key", "value").collect()


def local_files(logdir):
    found = {}
    for root, _, names in os.walk(logdir):
        for name in names:
            if not name.startswith("."):
                path = os.path.join(root, name)
                with open(path, "rb") as handle:
                    found[os.path.relpath(path, logdir)] = handle.read()
    return found


def s3_files(s3_server, prefix):
    client = s3_server.client()
    found = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET,
                                                                  Prefix=prefix + "/"):
        for item in page.get("Contents", ()):
            found[item["Key"][len(prefix) + 1:]] = \
                client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read()
    return found


def test_write_and_append_read_back_through_spark(spark, s3_server, store_options, tmp_path):
    uri = f"s3://{BUCKET}/events"
    first, second = frame(spark, "first", 300), frame(spark, "second", 200)
    for path, options in ((uri, store_options), (str(tmp_path / "local"), {})):
        (first.write.format("segmentlog").options(**options).option("topic", "events")
         .option("numPartitions", "3").option("segment.bytes", "4096").mode("append")
         .save(path))
        (second.write.format("segmentlog").options(**options).option("topic", "events")
         .option("segment.bytes", "4096").mode("append").save(path))

    rows = written(spark, uri, store_options)
    assert sorted(r.value for r in rows) == sorted(
        [f"first-{i:04d}".encode() for i in range(300)]
        + [f"second-{i:04d}".encode() for i in range(200)])
    assert {r.partition for r in rows} == {0, 1, 2}
    for partition in range(3):
        offsets = sorted(r.offset for r in rows if r.partition == partition)
        assert offsets == list(range(len(offsets)))
    # keys place rows as Kafka's producer would, so the placement matches the local write
    local_rows = written(spark, str(tmp_path / "local"), {})
    assert sorted((r.partition, r.key, r.value) for r in rows) == \
        sorted((r.partition, r.key, r.value) for r in local_rows)

    in_s3 = s3_files(s3_server, "events")
    assert PUBLISH_TOKEN in in_s3  # replaced as each publish began (readers' hint)
    del in_s3[PUBLISH_TOKEN]
    assert not [name for name in in_s3 if name.startswith(".")], "staging or lock left"
    assert len(in_s3) > 9  # rolled segments
    # task order decides batch order within a partition; Spark's two tasks may differ
    # between the runs only in timing, not in what each holds
    # the checkpoint files a local write keeps beside the segments (#21) are not written
    # into stores
    assert sorted(in_s3) == sorted(
        name for name in local_files(tmp_path / "local")
        if not name.endswith(("-checkpoint", "partition.metadata")))


def test_overwrite_is_refused_with_the_reason(spark, store_options):
    with pytest.raises(Exception, match="no atomic replace") as caught:
        (frame(spark, "x", 5).write.format("segmentlog").options(**store_options)
         .option("topic", "t").option("numPartitions", "1").mode("overwrite")
         .save(f"s3://{BUCKET}/overwritten"))
    assert SECRET not in str(caught.value)


def test_streaming_into_s3_is_refused(spark, store_options, tmp_path):
    stream = (spark.readStream.format("rate").option("rowsPerSecond", "5").load()
              .select(F.col("value").cast("string").cast("binary").alias("value")))
    with pytest.raises(Exception, match="streaming sink writes local"):
        query = (stream.writeStream.format("segmentlog").options(**store_options)
                 .option("topic", "t").option("checkpointLocation", str(tmp_path / "cp"))
                 .start(f"s3://{BUCKET}/streamed"))
        try:
            query.awaitTermination(60)
        finally:
            query.stop()
