"""Where a Spark write's time goes: each task and the commit, timed inside Spark's workers.

    .venv/bin/python benchmarks/bench_write_phases.py --rounds 8

Writes the cached DataFrame of bench_write.py (1M rows by default) with format("segmentlog")
into a new topic, and into a do-nothing sink, a round of each in turn. Inside the Python
workers it records, for every task and for the commit: wall time, user and system CPU
time, and minor page faults (getrusage of the worker process). Prints each round and the
medians. The first round (workers starting) is left out.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def measured(log_path, label, run):
    """Run `run()` and append its wall, user, system time and page faults to the log."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    try:
        return run()
    finally:
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
        with open(log_path, "a") as log:
            log.write(f"{label} {wall * 1000:.1f} {(after.ru_utime - before.ru_utime) * 1000:.1f} "
                      f"{(after.ru_stime - before.ru_stime) * 1000:.1f} "
                      f"{after.ru_minflt - before.ru_minflt}\n")


def sources(log_path):
    from pyspark.sql.datasource import DataSource

    from bench_write import floor_source
    from segmentlog_datasource.spark.write import SegmentLogSparkWriter

    class TimedFloorSource(floor_source()):
        """bench_write's do-nothing sink, its tasks timed."""

        @classmethod
        def name(cls):
            return "segmentlog_phases_floor"

        def writer(self, schema, overwrite):
            floor = super().writer(schema, overwrite)
            drain = floor.write
            floor.write = lambda iterator: measured(log_path, "floor-task",
                                                    lambda: drain(iterator))
            return floor

    class TimedWriter(SegmentLogSparkWriter):
        def write(self, iterator):
            return measured(log_path, "task", lambda: super(TimedWriter, self).write(iterator))

        def commit(self, messages):
            return measured(log_path, "commit",
                            lambda: super(TimedWriter, self).commit(messages))

    class TimedSource(DataSource):
        @classmethod
        def name(cls):
            return "segmentlog_phases"

        def writer(self, schema, overwrite):
            return TimedWriter(self.options, schema, overwrite)

    return TimedFloorSource, TimedSource


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4, help="Kafka partitions")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--codec", default="none")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from bench_write import spark_frame

    workdir = tempfile.mkdtemp(prefix="segmentlog-bench-phases-")
    log_path = os.path.join(workdir, "phases.log")
    spark = (SparkSession.builder.master("local[2]").appName("segmentlog-bench-phases")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "3g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    for source in sources(log_path):
        spark.dataSource.register(source)
    try:
        df = spark_frame(spark, args.rows)
        df.count()
        target = os.path.join(workdir, "out")
        rounds = []
        for round_number in range(args.rounds + 1):
            open(log_path, "w").close()
            shutil.rmtree(target, ignore_errors=True)
            start = time.perf_counter()
            (df.write.format("segmentlog_phases").mode("append").option("topic", "bench")
             .option("numPartitions", args.partitions).option("compression.type", args.codec)
             .save(target))
            write_s = time.perf_counter() - start
            start = time.perf_counter()
            df.write.format("segmentlog_phases_floor").mode("append").save()
            floor_s = time.perf_counter() - start
            with open(log_path) as log:
                rows = [line.split() for line in log]
            phases = {}
            for label, *figures in rows:
                phases.setdefault(label, []).append([float(x) for x in figures])
            if round_number:
                rounds.append((write_s, floor_s, phases))
        print(f"{args.rows:,} rows into {args.partitions} partitions, codec {args.codec}; per "
              f"task and commit: wall, user, system ms, minor faults")
        for write_s, floor_s, phases in rounds:
            shown = "  ".join(f"{label} " + ", ".join("/".join(f"{x:.0f}" for x in figures)
                                                     for figures in runs)
                              for label, runs in sorted(phases.items()))
            print(f"write {write_s:.3f} s  floor {floor_s:.3f} s  {shown}")

        def median_of(label, column):
            values = [f[column] for _, _, phases in rounds for f in phases.get(label, [])]
            return statistics.median(values) if values else float("nan")

        print(f"medians: write {statistics.median(r[0] for r in rounds):.3f} s, floor "
              f"{statistics.median(r[1] for r in rounds):.3f} s")
        for label in ("task", "floor-task", "commit"):
            print(f"  {label:<11} wall {median_of(label, 0):7.1f} ms  user {median_of(label, 1):6.1f}"
                  f"  system {median_of(label, 2):6.1f}  faults {median_of(label, 3):8.0f}")
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
