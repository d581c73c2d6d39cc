"""The same Spark scan started from the checkout and from another directory, side by side.

Spark's Python workers put their working directory first on sys.path, so a job started
from the repository root imports the checkout's package. This shows that such a job still
decodes on the compiled path (the installed build of the same _fastrecords.c).

Usage: python benchmarks/bench_from_checkout.py [--records 1500000]
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(HERE)

QUERY = r'''
import os, sys, time, warnings
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
q = lambda: spark.read.format("segmentlog").load(sys.argv[1]).selectExpr(
    "count(*)", "sum(length(value))").first()
q()
times = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    n = q()[0]
    times.append(time.perf_counter() - start)
print(n, min(times))
spark.stop()
'''


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_500_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    from _gen import generate_log

    with tempfile.TemporaryDirectory(prefix="segmentlog-bench-") as workdir:
        logdir = os.path.join(workdir, "logdir")
        generate_log(logdir, "bench", 2, args.records // 2, 100, segment_bytes=16 << 20)
        results = {}
        for label, cwd in (("from the checkout", CHECKOUT), ("from elsewhere", workdir)):
            out = subprocess.run([sys.executable, "-c", QUERY, logdir, str(args.runs)], cwd=cwd,
                                 capture_output=True, text=True, check=True).stdout.split()
            rows, seconds = int(out[-2]), float(out[-1])
            results[label] = seconds
            print(f"{label:18s} {rows:,} rows in {seconds:.2f} s = "
                  f"{rows / seconds / 1e6:.2f}M rows/s (best of {args.runs})")
        print(f"ratio checkout/elsewhere {results['from the checkout'] / results['from elsewhere']:.2f}x")


if __name__ == "__main__":
    main()
