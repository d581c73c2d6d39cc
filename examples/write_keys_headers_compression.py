"""Writing with Spark: keys, headers, timestamps, explicit partitions and compression.

Writes one DataFrame of page views into a topic per compression codec and compares their
sizes on disk, checks that every key landed in a single partition (Kafka's murmur2
partitioner), reads the headers back, appends to a topic (offsets continue at the log
end) and overwrites one with a new partition count.

    python examples/write_keys_headers_compression.py
"""
import importlib.util
import os
import shutil
import tempfile

from example_session import ExampleSession

START_MS = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC
# Codecs whose Python package is installed: lz4 and gzip always are, zstd and snappy come
# with the `zstd` and `snappy` extras (or `all`).
CODECS = ["none", "gzip", "lz4"] + [codec for codec, module in [("zstd", "zstandard"),
                                                                ("snappy", "cramjam")]
                                    if importlib.util.find_spec(module) is not None]


def disk_bytes(logdir, topic):
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(logdir)
               if os.path.basename(root).rsplit("-", 1)[0] == topic
               for name in names)


def main(spark=None, views_count=20_000):
    """Runs on `spark` when given (and leaves it running), else on a local session;
    `views_count` page views are written with each codec."""
    from pyspark.sql import functions as F

    logdir = tempfile.mkdtemp(prefix="segmentlog-write-")
    session = ExampleSession(spark, "segmentlog-write-example",
                             {"spark.sql.session.timeZone": "UTC"})
    spark = session.spark
    try:
        views = (spark.range(0, views_count, 1, numPartitions=2)
                 .select(
                     F.format_string("visitor-%d", (F.col("id") * 7919 % 1_000).cast("int")).alias("key"),
                     F.to_json(F.struct(F.col("id").alias("view"),
                                        F.element_at(F.array(*[F.lit(p) for p in ["/", "/search", "/product", "/cart"]]),
                                                     (F.col("id") % 4 + 1).cast("int")).alias("page"),
                                        F.lit("Mozilla/5.0 (X11; Linux x86_64)").alias("agent"))).alias("value"),
                     F.timestamp_millis(F.lit(START_MS) + F.col("id") * 20).alias("timestamp"),
                     F.array(F.struct(F.lit("content-type").alias("key"),
                                      F.lit(b"application/json").alias("value")),
                             F.struct(F.lit("region").alias("key"),
                                      F.when(F.col("id") % 3 == 0, F.lit(b"eu")).otherwise(F.lit(b"us"))
                                      .alias("value"))).alias("headers")))
        views.cache().count()

        print(f"the same {views_count:,} page views written with each codec:")
        for codec in CODECS:
            (views.write.format("segmentlog")
             .mode("append")  # Python data sources take append or overwrite only
             .option("topic", f"views-{codec}")
             .option("numPartitions", 4)
             .option("compression.type", codec)
             .option("batch.size", 64 * 1024)
             .save(logdir))
            print(f"  {codec:>6}: {disk_bytes(logdir, f'views-{codec}') / 1024:8.0f} KiB on disk")

        written = spark.read.format("segmentlog").option("subscribe", "views-lz4") \
            .option("includeHeaders", "true").load(logdir)
        spread = written.groupBy("key").agg(F.countDistinct("partition").alias("partitions"))
        most = spread.agg(F.max("partitions")).first()[0]
        print(f"{spread.count():,} keys, each in {most} partition (murmur2 of the key, as Kafka's producer)")
        assert most == 1
        (written.select("partition", "offset", F.col("key").cast("string").alias("key"),
                        F.transform("headers", lambda h: F.concat_ws("=", h["key"], h["value"].cast("string")))
                        .alias("headers"))
         .where("offset = 0").orderBy("partition").show(truncate=False))

        # A `partition` column places rows itself (a null one leaves it to the key); without
        # a timestamp column the write time is taken. Append continues at the log end offset.
        late = spark.createDataFrame(
            [("visitor-1", "late view", 0), ("visitor-2", "late view", 0), (None, "no key", 3)],
            "key string, value string, partition int")
        late.write.format("segmentlog").mode("append").option("topic", "views-lz4").save(logdir)
        (spark.read.format("segmentlog").option("subscribe", "views-lz4").load(logdir)
         .where("CAST(value AS STRING) IN ('late view', 'no key')")
         .select("partition", "offset", F.col("key").cast("string").alias("key"),
                 F.col("value").cast("string").alias("value"), "timestamp")
         .orderBy("partition", "offset").show(truncate=False))

        # overwrite replaces the topic (here with another partition count), and only it.
        views.limit(1_000).write.format("segmentlog").mode("overwrite") \
            .option("topic", "views-none").option("numPartitions", 2).save(logdir)
        replaced = spark.read.format("segmentlog").option("subscribe", "views-none").load(logdir)
        partitions = sorted(row.partition for row in replaced.select("partition").distinct().collect())
        print(f"views-none overwritten: {replaced.count():,} records in partitions {partitions}; "
              f"views-gzip still has {spark.read.format('segmentlog').option('subscribe', 'views-gzip').load(logdir).count():,}")
        assert partitions == [0, 1]
    finally:
        session.close()
        shutil.rmtree(logdir, ignore_errors=True)
    print("removed", os.path.basename(logdir))


if __name__ == "__main__":
    main()
