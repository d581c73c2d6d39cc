"""Where a Spark scan's samples go, system-wide: bench_spark_read.py's (b) scan of
segmentlog and of its prebuilt-Arrow ceiling, each profiled apart with `perf record -a`
after the warm-up, then the samples of Spark's Python workers split into CPython's
garbage collector, segmentlog's record parser and the rest.

Usage: python benchmarks/profile_spark_scan.py --workdir DIR [--scans 5] [--warmup 6]
       [--out DIR]
DIR is a bench_spark_read.py --workdir (its `logdir` and `arrow`). Needs Linux `perf`
allowed to sample every process (root, or kernel.perf_event_paranoid <= 0). Run from
outside the checkout (cd /tmp), PYTHONPATH picking the build.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_spark_read import SCAN_AGGREGATE, bench_session  # noqa: E402

# CPython's cyclic garbage collector, by the symbols its samples land in.
COLLECTOR_SYMBOLS = ("gc_collect", "visit_reachable", "visit_decref", "_traverse",
                     "PyObject_IS_GC", "type_is_gc", "_PyDict_MaybeUntrack",
                     "_PyObject_VisitInstanceAttributes", "deduce_unreachable")
PARSER_SYMBOLS = ("decode_records",)


def samples_by_symbol(data, comm=None):
    """{symbol: samples} of a perf.data file, for one command name or all."""
    command = ["perf", "report", "-i", data, "--no-children", "--sort", "sym", "-q",
               "-g", "none", "-F", "sample,sym"]
    if comm:
        command += ["--comms", comm]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0].isdigit():
            found[parts[2].strip()] = found.get(parts[2].strip(), 0) + int(parts[0])
    return found


def share(found, names):
    return sum(n for symbol, n in found.items() if any(name in symbol for name in names))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--scans", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=6, help="scans of each source first")
    parser.add_argument("--out", default=None, help="where the perf.data files go")
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="segmentlog-profile-")
    os.makedirs(out, exist_ok=True)
    spark = bench_session("segmentlog-profile")
    paths = {"segmentlog": os.path.join(args.workdir, "logdir"),
             "prebuilt_arrow": os.path.join(args.workdir, "arrow")}

    def scan(fmt):
        return spark.read.format(fmt).load(paths[fmt]).selectExpr(*SCAN_AGGREGATE).first()

    for _ in range(args.warmup):
        for fmt in paths:
            scan(fmt)
    print(f"{'source':<16}{'s a scan':>9}{'all':>9}{'Python workers':>16}"
          f"{'collector':>11}{'parser':>8}   (samples at 1999 Hz over {args.scans} scans)")
    for fmt in paths:
        data = os.path.join(out, f"{fmt}.data")
        perf = subprocess.Popen(["perf", "record", "-a", "-g", "-F", "1999", "-o", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # perf is sampling before the first scan starts
        start = time.perf_counter()
        for _ in range(args.scans):
            scan(fmt)
        took = (time.perf_counter() - start) / args.scans
        perf.send_signal(signal.SIGINT)
        perf.wait()
        everything = sum(samples_by_symbol(data).values())
        workers = samples_by_symbol(data, "python")
        print(f"{fmt:<16}{took:>9.3f}{everything:>9,}{sum(workers.values()):>16,}"
              f"{share(workers, COLLECTOR_SYMBOLS):>11,}{share(workers, PARSER_SYMBOLS):>8,}")
    print(f"perf data: {out}")
    spark.stop()


if __name__ == "__main__":
    main()
