"""Where a Spark write's CPU goes, by process: bench_write.py's cached DataFrame written
with format("segmentlog") per codec and into its do-nothing sink, CPU seconds a write of
Spark's JVM and of its Python workers by kind (task workers, the writer's planner, the
commit's), as bench_spark_cpu.py counts them for scans.

Usage: python benchmarks/bench_write_cpu.py [--rows 1000000] [--runs 4] [--codecs none,lz4]
       [--pause 1.5] [--conf KEY=VALUE ...]
Each write is followed by `--pause` seconds (not counted in its time), as rounds of
bench_write.py are seconds apart. "busy cores": how many of the machine's cores were
busy on average during the writes (/proc/stat). Run from outside the checkout (cd /tmp).
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
# The floor sink is pickled by reference: Spark's workers import it from here.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from bench_spark_cpu import cpu_by_process  # noqa: E402
from bench_write import floor_source, spark_frame  # noqa: E402


def machine_ticks():
    """(busy, all) clock ticks of every core so far (/proc/stat; idle and iowait idle)."""
    with open("/proc/stat") as stat:
        ticks = [int(field) for field in stat.readline().split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4, help="Kafka partitions")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=4, help="untimed writes of each first")
    parser.add_argument("--codecs", default="none,lz4")
    parser.add_argument("--pause", type=float, default=1.5)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the session (repeatable)")
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    import segmentlog_datasource

    builder = (SparkSession.builder.master("local[2]").appName("segmentlog-write-cpu")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "3g"))
    for setting in args.conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    segmentlog_datasource.register(spark)
    spark.dataSource.register(floor_source())
    workdir = tempfile.mkdtemp(prefix="segmentlog-write-cpu-")
    try:
        df = spark_frame(spark, args.rows)
        df.count()

        def segmentlog(codec):
            def write():
                target = os.path.join(workdir, codec)
                shutil.rmtree(target, ignore_errors=True)
                (df.write.format("segmentlog").mode("append").option("topic", "bench")
                 .option("numPartitions", args.partitions).option("compression.type", codec)
                 .save(target))
            return write

        def floor():
            df.write.format("segmentlog_bench_floor").mode("append").save()

        writes = {"floor": floor}
        writes.update((codec, segmentlog(codec)) for codec in args.codecs.split(","))
        for _ in range(args.warmup):  # the workers, and the JVM's JIT (about ten queries)
            for write in writes.values():
                write()
        print(f"{args.rows:,} rows; per write: seconds (mean of {args.runs}), then CPU "
              f"seconds by process")
        for name, write in list(writes.items()) * 2:
            before = cpu_by_process()
            took, busy, ticks = 0.0, 0, 0
            for _ in range(args.runs):
                start, (busy_at, ticks_at) = time.perf_counter(), machine_ticks()
                write()
                took += time.perf_counter() - start
                busy_end, ticks_end = machine_ticks()
                busy, ticks = busy + busy_end - busy_at, ticks + ticks_end - ticks_at
                time.sleep(args.pause)
            after = cpu_by_process()
            spent = {kind.split()[-1]: (after[kind] - before[kind]) / args.runs
                     for kind in set(before) | set(after)}
            cores = os.cpu_count() * busy / ticks if ticks else 0.0
            print(f"{name:<6} {took / args.runs:.3f} s  busy cores {cores:.2f}  " + "  ".join(
                f"{kind} {seconds:.3f}" for kind, seconds in sorted(spent.items())
                if seconds >= 0.005), flush=True)
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
