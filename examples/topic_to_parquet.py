"""Converting a topic to Parquet.

The writer engine makes an `orders` topic of JSON values with a header; Spark reads it as
a `read_committed` consumer would (what a copy of a topic with transactions needs; the
engine writes none, so nothing is hidden here), parses the JSON, keeps the Kafka
coordinates (partition, offset, timestamp) and the header as columns, and writes Parquet
partitioned by day. The Parquet table is read back and compared.

    python examples/topic_to_parquet.py
"""
import datetime as dt
import json
import os
import shutil
import tempfile

import pyarrow as pa

from example_session import ExampleSession

START = dt.datetime(2023, 11, 13, 20, 0, tzinfo=dt.timezone.utc)
ORDERS = 9_000  # one every 30 s for three days and a half
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def write_orders(logdir):
    from segmentlog_datasource.writer import write_log

    start_ms = int(START.timestamp() * 1000)
    table = pa.table({
        "key": [f"customer-{i * 37 % 500}" for i in range(ORDERS)],
        "value": [json.dumps({"order": i, "amount": round(5 + i % 200 * 0.75, 2),
                              "items": 1 + i % 4}) for i in range(ORDERS)],
        "timestamp": pa.array([start_ms + i * 30_000 for i in range(ORDERS)],
                              pa.timestamp("ms", tz="UTC")),
        "headers": pa.array([[{"key": "channel", "value": b"web" if i % 3 else b"app"}]
                             for i in range(ORDERS)], HEADERS),
    })
    write_log(logdir, table, topic="orders", num_partitions=3, compression="gzip")


def main(spark=None):
    """Runs on `spark` when given (and leaves it running), else on a local session."""
    from pyspark.sql import functions as F

    workdir = tempfile.mkdtemp(prefix="segmentlog-parquet-")
    logdir, table_dir = os.path.join(workdir, "logs"), os.path.join(workdir, "orders.parquet")
    write_orders(logdir)
    session = ExampleSession(spark, "segmentlog-parquet-example",
                             {"spark.sql.session.timeZone": "UTC",
                                               "spark.sql.shuffle.partitions": "2"})
    spark = session.spark
    try:
        order_schema = "order BIGINT, amount DOUBLE, items INT"
        orders = (spark.read.format("segmentlog")
                  .option("subscribe", "orders")
                  .option("includeHeaders", "true")
                  .option("isolationLevel", "read_committed")
                  .load(logdir)
                  .select(F.col("key").cast("string").alias("customer"),
                          F.from_json(F.col("value").cast("string"), order_schema).alias("o"),
                          F.filter("headers", lambda h: h["key"] == "channel")[0]["value"]
                          .cast("string").alias("channel"),
                          "partition", "offset", "timestamp")
                  .select("customer", "o.*", "channel", "partition", "offset", "timestamp",
                          F.to_date("timestamp").alias("day")))
        orders.write.mode("overwrite").partitionBy("day").parquet(table_dir)
        days = sorted(name for name in os.listdir(table_dir) if name.startswith("day="))
        print(f"wrote {table_dir.rsplit(os.sep, 1)[-1]} with {len(days)} day partitions: {', '.join(days)}")

        parquet = spark.read.parquet(table_dir)
        parquet.printSchema()
        (parquet.groupBy("day", "channel").agg(F.count("*").alias("orders"),
                                               F.round(F.sum("amount"), 2).alias("revenue"))
         .orderBy("day", "channel").show())
        parquet.orderBy("order").show(3, truncate=False)

        copied = parquet.count()
        print(f"{copied:,} rows in Parquet, {ORDERS:,} records in the topic")
        assert copied == ORDERS
        # The Kafka coordinates survive the copy: each (partition, offset) once.
        assert parquet.select("partition", "offset").distinct().count() == ORDERS
    finally:
        session.close()
        shutil.rmtree(workdir, ignore_errors=True)
    print("removed", os.path.basename(workdir))


if __name__ == "__main__":
    main()
