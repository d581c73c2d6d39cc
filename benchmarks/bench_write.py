"""Write throughput: the writer engine alone, and Spark end to end next to Parquet.

    .venv/bin/python benchmarks/bench_write.py                 # 1M rows, everything
    .venv/bin/python benchmarks/bench_write.py --rows 200000 --skip-spark

Part 1 writes one Arrow table with the engine (`writer.write_log`) once per codec.
Part 2 builds a cached DataFrame of the same shape (key, value, timestamp), then writes it
with `format("segmentlog")` and as Parquet in the same Spark session, alternating, and
reports the best of `--repeat` runs of each. MB/s counts the input's key and value bytes.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
T0 = 1_700_000_000_000


def make_table(rows: int, seed: int = 0) -> pa.Table:
    """Keys like 'user-123' and ~100-byte JSON-ish values, as an event stream has them."""
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 100_000, rows)
    amounts = rng.integers(0, 1_000_000, rows)
    keys = pa.array([b"user-%d" % u for u in users.tolist()], pa.binary())
    values = pa.array(
        [b'{"user":%d,"amount":%d,"currency":"EUR","status":"settled","source":"web"}'
         % (u, a) for u, a in zip(users.tolist(), amounts.tolist())], pa.binary())
    timestamps = pa.array(T0 + np.arange(rows, dtype=np.int64) * 3, pa.timestamp("ms", tz="UTC"))
    return pa.table({"key": keys, "value": values, "timestamp": timestamps})


def payload_bytes(table: pa.Table) -> int:
    return sum(len(b) for b in (table.column("key").combine_chunks().buffers()[2],
                                table.column("value").combine_chunks().buffers()[2]))


def dir_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def bench_engine(rows: int, partitions: int, workdir: str) -> None:
    from segmentlog_datasource.writer import write_log

    table = make_table(rows)
    mb = payload_bytes(table) / 1e6
    print(f"\n== writer engine alone: {rows:,} records, {mb:.1f} MB of keys+values, "
          f"{partitions} partitions, one Python process ==")
    print(f"{'codec':<8}{'seconds':>9}{'records/s':>14}{'MB/s':>9}{'on disk MB':>12}")
    for codec in CODECS:
        target = os.path.join(workdir, f"engine-{codec}")
        shutil.rmtree(target, ignore_errors=True)
        start = time.perf_counter()
        write_log(target, table, topic="bench", num_partitions=partitions, compression=codec)
        seconds = time.perf_counter() - start
        print(f"{codec:<8}{seconds:>9.2f}{rows / seconds:>14,.0f}{mb / seconds:>9.1f}"
              f"{dir_size(target) / 1e6:>12.1f}")
        shutil.rmtree(target, ignore_errors=True)


def bench_spark(rows: int, partitions: int, workdir: str, repeat: int, codecs) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession, functions as F

    import segmentlog_datasource

    spark = (SparkSession.builder.master("local[2]").appName("segmentlog-bench-write")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "3g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    segmentlog_datasource.register(spark)
    try:
        df = (spark.range(rows, numPartitions=2)
              .select(F.concat(F.lit("user-"), (F.col("id") * 7919 % 100_000).cast("string"))
                      .cast("binary").alias("key"),
                      F.concat(F.lit('{"user":'), (F.col("id") * 7919 % 100_000).cast("string"),
                               F.lit(',"amount":'), (F.col("id") * 104729 % 1_000_000).cast("string"),
                               F.lit(',"currency":"EUR","status":"settled","source":"web"}'))
                      .cast("binary").alias("value"),
                      F.timestamp_millis(F.lit(T0) + F.col("id") * 3).alias("timestamp"))
              .cache())
        count = df.count()
        mb = df.select(F.sum(F.length("key") + F.length("value"))).first()[0] / 1e6
        print(f"\n== Spark local[2] end to end: {count:,} rows, {mb:.1f} MB of keys+values, "
              f"cached DataFrame, best of {repeat} ==")

        def run_parquet():
            target = os.path.join(workdir, "parquet")
            shutil.rmtree(target, ignore_errors=True)
            start = time.perf_counter()
            df.write.mode("overwrite").parquet(target)
            seconds = time.perf_counter() - start
            return seconds, dir_size(target)

        def run_segmentlog(codec):
            target = os.path.join(workdir, f"segmentlog-{codec}")
            shutil.rmtree(target, ignore_errors=True)
            start = time.perf_counter()
            (df.write.format("segmentlog").mode("append").option("topic", "bench")
             .option("numPartitions", partitions).option("compression.type", codec).save(target))
            seconds = time.perf_counter() - start
            return seconds, dir_size(target)

        run_parquet()  # warm-up: JVM code paths, Python workers
        run_segmentlog(codecs[0])
        results = {"parquet (snappy)": []}
        for codec in codecs:
            results[f"segmentlog {codec}"] = []
        for _ in range(repeat):
            results["parquet (snappy)"].append(run_parquet())
            for codec in codecs:
                results[f"segmentlog {codec}"].append(run_segmentlog(codec))
        best = {name: min(runs) for name, runs in results.items()}
        parquet_seconds = best["parquet (snappy)"][0]
        print(f"{'write':<22}{'seconds':>9}{'records/s':>14}{'MB/s':>9}{'on disk MB':>12}"
              f"{'vs parquet':>12}")
        for name, (seconds, size) in best.items():
            print(f"{name:<22}{seconds:>9.2f}{count / seconds:>14,.0f}{mb / seconds:>9.1f}"
                  f"{size / 1e6:>12.1f}{seconds / parquet_seconds:>11.2f}x")
        df.unpersist()
    finally:
        spark.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4, help="Kafka partitions")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--spark-codecs", default=",".join(CODECS),
                        help="codecs for the Spark comparison (comma-separated)")
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--workdir", help="where to write (default: a temp dir, removed after)")
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="segmentlog-bench-write-")
    try:
        if not args.skip_engine:
            bench_engine(args.rows, args.partitions, workdir)
        if not args.skip_spark:
            bench_spark(args.rows, args.partitions, workdir, args.repeat,
                        [c for c in args.spark_codecs.split(",") if c])
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
