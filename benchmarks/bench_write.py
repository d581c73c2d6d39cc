"""Write throughput: the writer engine alone, and Spark end to end next to its floor.

    .venv/bin/python benchmarks/bench_write.py                 # 1M rows, everything
    .venv/bin/python benchmarks/bench_write.py --rows 200000 --skip-spark

Part 1, pinned to one core, per codec (best of `--repeat`): the engine writing one Arrow
table (`writer.write_log`: partitioning, encoding, staging, commit), the record batch
encoder alone on the same rows as one partition (`encode_batches`), the codec's library
alone compressing the records sections of those same batches, and pyarrow's Parquet
writer on the same table with the same codec at the same level (gzip 6, zstd 3: Kafka's
defaults, which the engine uses; Arrow's own would be 9 and 1).
Part 2 builds a cached DataFrame of the same shape (key, value, timestamp), then writes it
with `format("segmentlog")`, as Parquet, and into a do-nothing Python data source (a
DataSourceArrowWriter that drops the Arrow batches Spark hands it: the floor of any
Python data source write) in the same Spark session, a round of each in turn, and
(per codec but none) into that sink with the codec's library compressing the keys and
values it receives in 16 KiB sections: the floor of a write with that codec
(`--staged-floors`: also, for every codec, that sink writing its output with its CRC32C
to a file of each task's: the floor of such a write that lands on disk). It
reports the best of `--repeat` runs of each and the median over the rounds of each
write's time over its round's floor, after `--warmup` untimed rounds. MB/s counts the
input's key and value bytes. Each segmentlog write creates its topic anew, except the
"append" row's, which appends to one topic round after round. `--variant-option
NAME=VALUE` adds, per codec, the same write with that option set, in the same rounds.
"""
import argparse
import collections
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


def pin_to_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        cpu = sorted(os.sched_getaffinity(0))[-1]
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    return "not pinned (no sched_setaffinity)"


def timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def best_of(repeat: int, run) -> float:
    return min(timed(run) for _ in range(repeat))


def alternating(repeat: int, first, second):
    """Best times of `first` and `second` run in turns, and the median of each turn's ratio
    first/second: the machine's load drifts, and runs in turns see the same drift."""
    pairs = [(timed(first), timed(second)) for _ in range(repeat)]
    ratios = sorted(a / b for a, b in pairs)
    return min(a for a, _ in pairs), min(b for _, b in pairs), ratios[len(ratios) // 2]


PARQUET_CODECS = {"none": "none", "gzip": "gzip", "snappy": "snappy", "lz4": "lz4",
                  "zstd": "zstd"}
# Parquet at the engine's levels (Kafka's defaults), not Arrow's own (gzip 9, zstd 1)
PARQUET_LEVELS = {"gzip": 6, "zstd": 3}


def bench_engine(rows: int, partitions: int, workdir: str, repeat: int, codecs) -> None:
    import pyarrow.parquet as pq

    from segmentlog_datasource.format import compression
    from segmentlog_datasource.format.layout import V2_HEADER_SIZE
    from segmentlog_datasource.format.encode import encode_batches
    from segmentlog_datasource.format.v2_encode import RecordColumns
    from segmentlog_datasource.writer import write_log

    pinned = pin_to_one_core()
    table = make_table(rows)
    mb = payload_bytes(table) / 1e6
    columns = RecordColumns(table.column("key"), table.column("value"),
                            table.column("timestamp").cast("int64").to_numpy())
    plain = encode_batches(columns)  # the batches every codec compresses
    view = memoryview(plain.data)
    sections = [view[int(p) + V2_HEADER_SIZE : int(p + size)]
                for p, size in zip(plain.positions, plain.sizes)]
    print(f"\n== one core ({pinned}): {rows:,} records, {mb:.1f} MB of keys+values, "
          f"{len(sections):,} batches, best of {repeat} ==")
    print(f"{'codec':<8}{'engine s':>9}{'records/s':>12}{'encoder s':>10}{'records/s':>12}"
          f"{'library s':>10}{'parquet s':>10}{'engine/pq':>10}{'median':>8}{'on disk MB':>11}")
    for codec in codecs:
        target = os.path.join(workdir, f"engine-{codec}")
        codec_id = compression.CODEC_IDS[codec]

        def engine():
            shutil.rmtree(target, ignore_errors=True)
            write_log(target, table, topic="bench", num_partitions=partitions,
                      compression=codec)

        def encoder():
            encode_batches(columns, codec=codec_id)

        def library():
            if hasattr(compression, "compressor"):
                compress = compression.compressor(codec_id)
            else:  # a checkout from before it (run from there for a "before" figure)
                def compress(data):
                    return compression.compress(codec_id, data)
            for section in sections:
                compress(section)

        def parquet():
            pq.write_table(table, os.path.join(workdir, "table.parquet"),
                           compression=PARQUET_CODECS[codec],
                           compression_level=PARQUET_LEVELS.get(codec))

        # engine and Parquet in turns: "median" is the median of the turns' ratios
        engine_s, parquet_s, median = alternating(repeat, engine, parquet)
        on_disk = dir_size(target)
        shutil.rmtree(target, ignore_errors=True)
        encoder_s = best_of(repeat, encoder)
        library_s = best_of(repeat, library) if codec != "none" else float("nan")
        print(f"{codec:<8}{engine_s:>9.3f}{rows / engine_s:>12,.0f}{encoder_s:>10.3f}"
              f"{rows / encoder_s:>12,.0f}{library_s:>10.3f}{parquet_s:>10.3f}"
              f"{engine_s / parquet_s:>9.2f}x{median:>7.2f}x{on_disk / 1e6:>11.1f}")


def floor_source():
    """A Python data source whose writer drops the Arrow batches Spark hands it."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class FloorWriter(DataSourceArrowWriter):
        def write(self, iterator):
            collections.deque(iterator, maxlen=0)  # drained: the floor receives, keeps nothing
            return WriterCommitMessage()

    class FloorSource(DataSource):
        @classmethod
        def name(cls):
            return "segmentlog_bench_floor"

        def writer(self, schema, overwrite):
            return FloorWriter()

    return FloorSource


# The producer's default batch.size: the records sections a compressed write hands the
# codec's library are about this long.
SECTION_BYTES = 16384


def codec_floor_source():
    """The floor sink plus the codec's library: its writer compresses the keys and values
    of the batches Spark hands it, SECTION_BYTES at a time, and drops the output. The
    least a write compressed with that codec can take (its records sections hold the
    same bytes and their varints, about a tenth more). With the option `stage` (a
    directory), each section's output is also checked with CRC32C and written to a file
    of the task's there, removed at the end of the task: the least such a write that
    lands on disk with Kafka's checksum can take. Codec `none` then stages the bytes as
    they are."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class CodecFloorWriter(DataSourceArrowWriter):
        def __init__(self, codec, stage):
            self.codec = codec
            self.stage = stage

        def write(self, iterator):
            import tempfile

            from segmentlog_datasource.format import compression
            from segmentlog_datasource.format.crc import crc32c

            codec = compression.CODEC_IDS[self.codec]
            compress = compression.compressor(codec) if codec != compression.NONE else None
            staging = tempfile.NamedTemporaryFile(dir=self.stage) if self.stage else None
            try:
                for batch in iterator:
                    for name in ("key", "value"):
                        data = batch.column(name).buffers()[2]
                        view = memoryview(data) if data is not None else memoryview(b"")
                        for at in range(0, len(view), SECTION_BYTES):
                            section = view[at:at + SECTION_BYTES]
                            out = compress(section) if compress is not None else section
                            if staging is not None:
                                crc32c(out)
                                staging.write(out)
            finally:
                if staging is not None:
                    staging.close()
            return WriterCommitMessage()

    class CodecFloorSource(DataSource):
        @classmethod
        def name(cls):
            return "segmentlog_bench_codec_floor"

        def writer(self, schema, overwrite):
            return CodecFloorWriter(self.options["codec"], self.options.get("stage"))

    return CodecFloorSource


def spark_frame(spark, rows: int):
    """The benchmark's rows as a cached DataFrame in two Spark partitions (key, value,
    timestamp: make_table's shape, built by Spark)."""
    from pyspark.sql import functions as F

    return (spark.range(rows, numPartitions=2)
            .select(F.concat(F.lit("user-"), (F.col("id") * 7919 % 100_000).cast("string"))
                    .cast("binary").alias("key"),
                    F.concat(F.lit('{"user":'), (F.col("id") * 7919 % 100_000).cast("string"),
                             F.lit(',"amount":'), (F.col("id") * 104729 % 1_000_000).cast("string"),
                             F.lit(',"currency":"EUR","status":"settled","source":"web"}'))
                    .cast("binary").alias("value"),
                    F.timestamp_millis(F.lit(T0) + F.col("id") * 3).alias("timestamp"))
            .cache())


def bench_spark(rows: int, partitions: int, workdir: str, repeat: int, codecs,
                warmup: int = 3, variant=None, staged_floors=False) -> None:
    """`variant`: an (option, value) pair; each codec is then also written with that
    write option set, in the same rounds (a setting's before and after side by side).
    `staged_floors`: each codec's floor sink also stages its output with its checksum."""
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
    spark.dataSource.register(floor_source())
    spark.dataSource.register(codec_floor_source())
    try:
        df = spark_frame(spark, rows)
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

        def run_segmentlog(codec, append=False, options=()):
            target = os.path.join(workdir, f"segmentlog-{codec}" + ("-append" if append else ""))
            if not append:
                shutil.rmtree(target, ignore_errors=True)
            start = time.perf_counter()
            (df.write.format("segmentlog").mode("append").option("topic", "bench")
             .option("numPartitions", partitions).option("compression.type", codec)
             .options(**dict(options)).save(target))
            seconds = time.perf_counter() - start
            return seconds, dir_size(target)

        def run_floor():
            start = time.perf_counter()
            df.write.format("segmentlog_bench_floor").mode("append").save()
            return time.perf_counter() - start, 0

        def run_codec_floor(codec, stage=False):
            options = {"codec": codec}
            if stage:
                options["stage"] = workdir
            start = time.perf_counter()
            df.write.format("segmentlog_bench_codec_floor").mode("append") \
                .options(**options).save()
            return time.perf_counter() - start, 0

        compressed = [codec for codec in codecs if codec != "none"]
        staged = list(codecs) if staged_floors else []

        def staged_name(codec):
            return "floor, staged" if codec == "none" else f"floor + {codec} library, staged"

        # Warm-up rounds: the Python workers, and the JVM's JIT compilers, which keep
        # working through about ten queries of a fresh session.
        variants = [(f"segmentlog {codec} {variant[0]}={variant[1]}", codec)
                    for codec in codecs] if variant else []
        for _ in range(warmup):
            run_parquet()
            run_floor()
            for codec in compressed:
                run_codec_floor(codec)
            for codec in staged:
                run_codec_floor(codec, stage=True)
            for codec in codecs:
                run_segmentlog(codec)
            for _, codec in variants:
                run_segmentlog(codec, options=[variant])
        run_segmentlog(codecs[0], append=True)  # creates the topic the rounds append to
        results = {"floor (drops batches)": [], "parquet (snappy)": []}
        for codec in compressed:
            results[f"floor + {codec} library"] = []
        for codec in staged:
            results[staged_name(codec)] = []
        for codec in codecs:
            results[f"segmentlog {codec}"] = []
        for name, _ in variants:
            results[name] = []
        appended = f"segmentlog {codecs[0]}, append"
        results[appended] = []
        for _ in range(repeat):
            results["floor (drops batches)"].append(run_floor())
            results["parquet (snappy)"].append(run_parquet())
            for codec in compressed:
                results[f"floor + {codec} library"].append(run_codec_floor(codec))
            for codec in staged:
                results[staged_name(codec)].append(run_codec_floor(codec, stage=True))
            for codec in codecs:
                results[f"segmentlog {codec}"].append(run_segmentlog(codec))
            for name, codec in variants:
                results[name].append(run_segmentlog(codec, options=[variant]))
            before = dir_size(os.path.join(workdir, f"segmentlog-{codecs[0]}-append"))
            seconds, size = run_segmentlog(codecs[0], append=True)
            results[appended].append((seconds, size - before))
        best = {name: min(runs) for name, runs in results.items()}
        floor_seconds = best["floor (drops batches)"][0]
        parquet_seconds = best["parquet (snappy)"][0]
        floors = [seconds for seconds, _ in results["floor (drops batches)"]]
        width = max(24, *(len(name) + 2 for name in results))
        print(f"{'write':<{width}}{'seconds':>9}{'records/s':>14}{'MB/s':>9}{'on disk MB':>12}"
              f"{'vs floor':>10}{'vs parquet':>12}{'median vs floor':>17}")
        for name, (seconds, size) in best.items():
            # each round's time over the same round's floor: the machine's drift cancels
            rounds = sorted(s / f for (s, _), f in zip(results[name], floors))
            print(f"{name:<{width}}{seconds:>9.2f}{count / seconds:>14,.0f}{mb / seconds:>9.1f}"
                  f"{size / 1e6:>12.1f}{seconds / floor_seconds:>9.2f}x"
                  f"{seconds / parquet_seconds:>11.2f}x{rounds[len(rounds) // 2]:>16.2f}x")
        for codec in compressed:
            # what the write adds to its codec's library alone, round by round
            rounds = sorted(s / f for (s, _), (f, _) in zip(
                results[f"segmentlog {codec}"], results[f"floor + {codec} library"]))
            print(f"segmentlog {codec} over floor + {codec} library: median of rounds "
                  f"{rounds[len(rounds) // 2]:.2f}x")
        for codec in staged:
            rounds = sorted(s / f for (s, _), (f, _) in zip(
                results[f"segmentlog {codec}"], results[staged_name(codec)]))
            print(f"segmentlog {codec} over {staged_name(codec)}: median of rounds "
                  f"{rounds[len(rounds) // 2]:.2f}x")
        df.unpersist()
    finally:
        spark.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4, help="Kafka partitions")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3,
                        help="Spark: untimed rounds of every write first")
    parser.add_argument("--spark-codecs", default=",".join(CODECS),
                        help="codecs for the Spark comparison (comma-separated)")
    parser.add_argument("--engine-codecs", default=",".join(CODECS),
                        help="codecs for the one-core figures (comma-separated)")
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--workdir", help="where to write (default: a temp dir, removed after)")
    parser.add_argument("--variant-option", metavar="NAME=VALUE",
                        help="Spark: also write each codec with this write option, in turn "
                             "with the others (taskSegmentBytes=9223372036854775807: every "
                             "task's batches copied into one segment, as before it)")
    parser.add_argument("--staged-floors", action="store_true",
                        help="Spark: also each codec's floor sink staging its output, with "
                             "its CRC32C, in a file of each task's")
    args = parser.parse_args()
    variant = tuple(args.variant_option.split("=", 1)) if args.variant_option else None
    workdir = args.workdir or tempfile.mkdtemp(prefix="segmentlog-bench-write-")
    try:
        if not args.skip_engine:
            bench_engine(args.rows, args.partitions, workdir, args.repeat,
                         [c for c in args.engine_codecs.split(",") if c])
        if not args.skip_spark:
            bench_spark(args.rows, args.partitions, workdir, args.repeat,
                        [c for c in args.spark_codecs.split(",") if c], args.warmup, variant,
                        args.staged_floors)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
