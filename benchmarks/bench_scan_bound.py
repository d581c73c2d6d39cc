"""How close a Spark scan of segmentlog can come to its prebuilt-Arrow ceiling: the ceiling,
the ceiling plus the per-byte work no reader of Kafka's log avoids (every batch's key and
value bytes checked with CRC32C, every buffer copied into the reader's own memory, no
parsing: `prebuilt_arrow_checked`), and segmentlog, in turns.

Prints, per source, the best and median seconds a scan, the median over the turns of its
ratio to the ceiling, and the Python workers' and JVM's CPU seconds a scan.

Usage: python benchmarks/bench_scan_bound.py --workdir DIR [--runs 9] [--warmup 8]
DIR is a bench_spark_read.py --workdir (its `logdir` and `arrow`). Run from outside the
checkout (cd /tmp), PYTHONPATH picking the build.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_spark_read import SCAN_AGGREGATE, bench_session, cpu_seconds  # noqa: E402
from prebuilt_sources import CheckedCopyArrowSource  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--warmup", type=int, default=8, help="scans of each source first")
    args = parser.parse_args()
    spark = bench_session("segmentlog-scan-bound")
    spark.dataSource.register(CheckedCopyArrowSource)
    arrow = os.path.join(args.workdir, "arrow")
    sources = {"ceiling": ("prebuilt_arrow", arrow),
               "ceiling, checked and copied": ("prebuilt_arrow_checked", arrow),
               "segmentlog": ("segmentlog", os.path.join(args.workdir, "logdir"))}

    def scan(name):
        fmt, path = sources[name]
        return spark.read.format(fmt).load(path).selectExpr(*SCAN_AGGREGATE).first()

    names = list(sources)
    for _ in range(args.warmup):  # the workers, and the JVM's JIT (about ten scans)
        for name in names:
            scan(name)
    times = {name: [] for name in names}
    cpu = {name: [0.0, 0.0] for name in names}
    results = {}
    for turn in range(args.runs):
        order = names[turn % len(names):] + names[:turn % len(names)]  # drift hits all alike
        for name in order:
            before = cpu_seconds()
            start = time.perf_counter()
            results[name] = tuple(scan(name))
            times[name].append(time.perf_counter() - start)
            after = cpu_seconds()
            if before is not None:
                for i in range(2):
                    cpu[name][i] += (after[i] - before[i]) / args.runs
    assert len(set(results.values())) == 1, results
    print(f"{args.runs} turns after {args.warmup} warm-up scans of each; "
          f"{results['ceiling'][0]:,} records")
    print(f"{'source':<30}{'best s':>8}{'median s':>10}{'ratio, median of turns':>24}"
          f"{'python CPU-s':>14}{'JVM CPU-s':>11}")
    for name in names:
        ratio = statistics.median(t / c for t, c in zip(times[name], times["ceiling"]))
        print(f"{name:<30}{min(times[name]):>8.3f}{statistics.median(times[name]):>10.3f}"
              f"{ratio:>23.3f}x{cpu[name][0]:>14.3f}{cpu[name][1]:>11.3f}")
    spark.stop()


if __name__ == "__main__":
    main()
