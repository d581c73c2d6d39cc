"""What `segmentlog_datasource.register(spark)` costs on a session's first call.

Each run is a fresh Python process, started outside the checkout, that starts a local
Spark session, runs one tiny job (every session's first job warms the JVM and starts
Spark's Python daemon; not register's doing), then times `register(spark)` and the first
read after it. "probe" is register as it was before #22: it also ran the pushdown probe
(three tiny queries against a two-row source); "now" trusts the known answer for Spark
4.3 and runs no Spark job; "none" reads without register (Spark finds the installed
`pyspark_segmentlog` itself; from a default editable install it cannot, so put the
checkout on PYTHONPATH there).

Usage: python benchmarks/bench_register.py [--runs 3] [--modes probe,now,none]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(HERE)
LOG = os.path.join(CHECKOUT, "tests", "fixtures", "kafka-written", "logdir", "plain-0")

RUN = r'''
import os, sys, time
import segmentlog_datasource
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.range(1).count()
start = time.perf_counter()
if sys.argv[1] == "probe":
    from segmentlog_datasource.spark.pushdown_check import pushed_reads_leak
    pushed_reads_leak(spark)
if sys.argv[1] != "none":
    segmentlog_datasource.register(spark)
registered = time.perf_counter()
spark.read.format("segmentlog").load(sys.argv[2]).count()
read = time.perf_counter()
print(registered - start, read - registered)
spark.stop()
'''


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", default="probe,now,none")
    args = parser.parse_args()
    times = {mode: [] for mode in args.modes.split(",")}
    with tempfile.TemporaryDirectory(prefix="segmentlog-bench-") as elsewhere:
        for _ in range(args.runs):
            for mode in times:
                out = subprocess.run([sys.executable, "-c", RUN, mode, LOG], cwd=elsewhere,
                                     capture_output=True, text=True, check=True).stdout
                times[mode].append(tuple(float(x) for x in out.split()[-2:]))
    for mode, runs in times.items():
        register = statistics.median(r for r, _ in runs)
        first_read = statistics.median(q for _, q in runs)
        total = statistics.median(r + q for r, q in runs)
        print(f"{mode:5s} register {register:.2f} s, then the first read {first_read:.2f} s, "
              f"together {total:.2f} s (medians of {len(runs)})")


if __name__ == "__main__":
    main()
