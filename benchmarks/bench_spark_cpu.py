"""Where a Spark scan's CPU goes, by process: bench_spark_read.py's (b) scan of segmentlog
and of its prebuilt-Arrow ceiling, CPU seconds a scan of Spark's JVM and of its Python
workers by kind (task workers, the planner's), exited workers counted through the daemon
that reaped them.

Usage: python benchmarks/bench_spark_cpu.py --workdir DIR [--runs 4] [--warmup 8]
       [--max-records-per-batch N]
DIR is a bench_spark_read.py --workdir that holds its log and prebuilt Arrow files
(`logdir`, `arrow`). Run from outside the checkout (cd /tmp), PYTHONPATH picking the build.
"""
import argparse
import collections
import os
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import psutil  # noqa: E402

from bench_spark_read import SCAN_AGGREGATE, bench_session, jit_seconds  # noqa: E402


def cpu_by_process():
    """{process kind: CPU seconds so far} over this process's descendants."""
    found = collections.Counter()
    for process in psutil.Process().children(recursive=True):
        try:
            name, command, times = process.name(), process.cmdline(), process.cpu_times()
        except psutil.Error:
            continue
        kind = " ".join(a for a in command if a.startswith("pyspark")) \
            if name.startswith("python") else name
        found[kind] += times.user + times.system + times.children_user + times.children_system
        if name == "java":  # of which its JIT compiler threads
            found["java: of which JIT compilers"] += jit_seconds(process.pid)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=8, help="scans of each source first")
    parser.add_argument("--max-records-per-batch", type=int, default=None,
                        help="the maxRecordsPerBatch read option; DIR's Arrow files must "
                             "come from bench_spark_read.py with the same value")
    args = parser.parse_args()
    read_options = {} if args.max_records_per_batch is None else \
        {"maxRecordsPerBatch": str(args.max_records_per_batch)}
    spark = bench_session("segmentlog-cpu")
    paths = {"segmentlog": os.path.join(args.workdir, "logdir"),
             "prebuilt_arrow": os.path.join(args.workdir, "arrow")}

    def scan(fmt):
        options = read_options if fmt == "segmentlog" else {}
        return (spark.read.format(fmt).options(**options).load(paths[fmt])
                .selectExpr(*SCAN_AGGREGATE).first())

    for _ in range(args.warmup):  # the workers, and the JVM's JIT (about ten scans)
        for fmt in paths:
            scan(fmt)
    for fmt in list(paths) * 2:
        before = cpu_by_process()
        start = time.perf_counter()
        for _ in range(args.runs):
            scan(fmt)
        took = (time.perf_counter() - start) / args.runs
        after = cpu_by_process()
        print(f"{fmt}: {took:.3f} s a scan (mean of {args.runs}); CPU seconds a scan:")
        for kind in sorted(set(before) | set(after)):
            spent = (after[kind] - before[kind]) / args.runs
            if spent >= 0.005:
                print(f"    {spent:7.3f}  {kind}")
    spark.stop()


if __name__ == "__main__":
    main()
