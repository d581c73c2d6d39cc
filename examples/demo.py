"""segmentlog end to end, in Spark local mode.

Writes a sample Kafka segment log with `df.write.format("segmentlog")`, reads it back with
`spark.read.format("segmentlog")`, and shows offset/timestamp lookups served from the
sparse indexes. No registration call is needed: Spark discovers the installed source.

    python examples/demo.py [--logdir DIR] [--rows N]
"""
import argparse
import os
import shutil
import sys
import tempfile
import time


def main():
    parser = argparse.ArgumentParser(description="segmentlog demo")
    parser.add_argument("--logdir", help="where to write the log (default: a temp dir)")
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from segmentlog_datasource import offset_range, time_range

    spark = (SparkSession.builder.master("local[2]").appName("segmentlog-demo")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    logdir = args.logdir or tempfile.mkdtemp(prefix="segmentlog-demo-")
    work = tempfile.mkdtemp(prefix="segmentlog-demo-stream-")
    try:
        orders = (spark.range(args.rows)
                  .select(
                      F.concat(F.lit("customer-"), (F.col("id") % 1000).cast("string")).alias("key"),
                      F.to_json(F.struct(F.col("id").alias("order"),
                                         (F.col("id") % 97 * 1.5).alias("amount"))).alias("value"),
                      (F.lit(1_700_000_000_000) + F.col("id") * 10).cast("long").alias("ts_ms"))
                  .select("key", "value",
                          F.timestamp_millis("ts_ms").alias("timestamp"),
                          F.array(F.struct(F.lit("source").alias("key"),
                                           F.lit(b"demo").alias("value"))).alias("headers")))

        start = time.perf_counter()
        (orders.write.format("segmentlog")
         .mode("append")  # Python data sources take append or overwrite only
         .option("topic", "orders")
         .option("numPartitions", "3")
         .option("compression.type", "lz4")
         .option("segment.bytes", str(1 << 20))
         .save(logdir))
        print(f"wrote {args.rows:,} records as topic 'orders' in {time.perf_counter() - start:.1f}s")
        for name in sorted(os.listdir(logdir)):
            if not os.path.isdir(os.path.join(logdir, name)):
                print(f"  {name}")  # the log dir's checkpoints: high watermarks, ...
                continue
            files = sorted(os.listdir(os.path.join(logdir, name)))
            print(f"  {name}/: {len(files)} files, e.g. {', '.join(files[:3])}")

        df = spark.read.format("segmentlog").option("includeHeaders", "true").load(logdir)
        df.printSchema()
        counts = df.groupBy("partition").agg(F.count("*").alias("records"),
                                             F.min("offset").alias("first"),
                                             F.max("offset").alias("last")).orderBy("partition")
        counts.show()
        total = df.count()
        assert total == args.rows, (total, args.rows)

        print("point lookup: partition 1, offset 1234 (one index interval read)")
        (spark.read.format("segmentlog").options(**offset_range("orders", 1, 1234, 1235))
         .load(logdir)
         .select("partition", "offset", F.col("key").cast("string").alias("key"),
                 F.col("value").cast("string").alias("value"), "timestamp").show(truncate=False))

        print("records of a 50 ms window, the offsets found through the time index:")
        middle = 1_700_000_000_000 + args.rows // 2 * 10
        window = spark.read.format("segmentlog").options(
            **time_range(middle, middle + 50, topics=["orders"])).load(logdir)
        window.select("partition", "offset", "timestamp").orderBy("timestamp").show()

        # Values as Avro, registered in the log dir's own _schemas topic (as Confluent's
        # serializers frame them), and read back as a typed struct.
        avro_dir = os.path.join(work, "avro")
        (spark.range(1000).selectExpr("struct(id, id % 97 * 1.5 AS amount) AS value")
         .write.format("segmentlog").mode("append").option("topic", "orders-avro")
         .option("numPartitions", "1").option("valueFormat", "avro").save(avro_dir))
        decoded = (spark.read.format("segmentlog").option("subscribe", "orders-avro")
                   .option("valueFormat", "avro").load(avro_dir)
                   .agg(F.count("valueDecoded").alias("n"), F.sum("valueDecoded.id").alias("ids"))
                   .first())
        assert (decoded.n, decoded.ids) == (1000, sum(range(1000))), decoded
        print(f"valueFormat=avro: {decoded.n:,} records decoded into a struct column")

        same = spark.read.format("segmentlog").option("subscribe", "orders") \
            .option("startingOffsets", '{"orders":{"0":100,"1":-2,"2":-1}}') \
            .option("endingOffsets", '{"orders":{"0":110,"1":5,"2":-1}}').load(logdir)
        print(f"offset-range read as with Spark's Kafka source: {same.count()} records")

        # Streaming: the log read as a stream, in rate-limited micro-batches, into a second
        # log dir through the streaming sink; AvailableNow stops once all is copied.
        copy_dir, checkpoint = os.path.join(work, "copy"), os.path.join(work, "checkpoint")
        query = (spark.readStream.format("segmentlog")
                 .option("maxOffsetsPerTrigger", str(max(1, args.rows // 4))).load(logdir)
                 .select("key", "value", "partition", "timestamp")
                 .writeStream.format("segmentlog").option("topic", "orders-copy")
                 .option("numPartitions", "3").option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start(copy_dir))
        query.awaitTermination()
        copied = spark.read.format("segmentlog").load(copy_dir).count()
        print(f"streamed {copied:,} records into {copy_dir} in "
              f"{len(query.recentProgress)} micro-batches")
        assert copied == args.rows, (copied, args.rows)
        print("demo finished: the log was written and read back with Spark")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
        if not args.logdir:
            shutil.rmtree(logdir, ignore_errors=True)


if __name__ == "__main__":
    main()
