"""Two builds of segmentlog side by side in one run: the Spark scan of bench_spark_read.py
(b) against its prebuilt-Arrow ceiling, and the engine's scan alone (no Spark), each
build in processes of its own that alternate round by round. Beside the Spark times, the
CPU seconds a scan takes in Spark's Python workers and in its JVM (psutil, over all the
runs): steadier than wall times on a shared machine.

Usage: python benchmarks/bench_scan_ceiling.py --before /tmp/wt-scan-before [--after .]
       [--rounds 2] [--runs 5] [--workdir /tmp/scan-ceiling]
Each side is a checkout with its compiled modules built in place
(`python setup.py build_ext --inplace`); it is put first on PYTHONPATH, which the Spark
driver and its Python workers inherit. Run from outside any checkout (cd /tmp), as Spark's
workers put their working directory first on sys.path.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# The engine alone: plan the read, scan every split (best of 5), and read the prebuilt
# Arrow IPC files of the same batches; CPU time and page faults of the scans.
ENGINE = r"""
import os, resource, sys, time
import pyarrow as pa
import segmentlog_datasource
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.format.scan import ScanOptions
from segmentlog_datasource.read.fragments import scan_fragments
from segmentlog_datasource.read.planning import Constraints, group_fragments, plan_fragments
logdir, arrow = sys.argv[1], sys.argv[2]
read = parse_read_options({"path": logdir})
def scan():
    groups = list(group_fragments(plan_fragments(read, Constraints()), read))
    return sum(b.num_rows for g in groups for b in scan_fragments(g, ScanOptions()))
def ipc():
    rows = 0
    for name in sorted(os.listdir(arrow)):
        with pa.memory_map(os.path.join(arrow, name)) as source:
            reader = pa.ipc.open_file(source)
            rows += sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    return rows
best = {}
for name, fn in (("scan", scan), ("ipc", ipc)):
    for _ in range(5):
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        rows = fn()
        took = time.perf_counter() - start
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        row = (took, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime,
               r1.ru_minflt - r0.ru_minflt, rows)
        best[name] = min(best.get(name, row), row)
print(os.path.dirname(os.path.dirname(segmentlog_datasource.__file__)))
for name, (took, user, system, faults, rows) in best.items():
    print(f"{name} {took:.3f} {user:.3f} {system:.3f} {faults} {rows}")
"""


def run(side, args, env, workdir):
    env = dict(env, PYTHONPATH=side)
    spark = subprocess.run(
        [sys.executable, os.path.join(workdir, "bench", "bench_spark_read.py"),
         "--workdir", workdir, "--runs", str(args.runs), "--skip-lookup"],
        env=env, capture_output=True, text=True, check=True).stdout
    line = [x for x in spark.splitlines() if x.startswith("(b)")][-1].split()
    segmentlog, ceiling = float(line[2]), float(line[5])
    # CPU seconds a scan of Spark's Python workers, then of its JVM: segmentlog's, the
    # ceiling's
    at = line.index("cpu") if "cpu" in line else None
    cpu = tuple(float("nan") if at is None else float(line[at + i]) for i in (3, 8, 5, 10))
    engine = subprocess.run(
        [sys.executable, "-c", ENGINE, os.path.join(workdir, "logdir"),
         os.path.join(workdir, "arrow")],
        env=env, capture_output=True, text=True, check=True).stdout.splitlines()
    loaded = engine[0]
    assert os.path.samefile(loaded, side), f"{side} ran the package in {loaded}"
    figures = {parts[0]: tuple(float(x) for x in parts[1:]) for parts in
               (row.split() for row in engine[1:])}
    return segmentlog, ceiling, cpu, figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", default=os.path.dirname(HERE))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="segmentlog-ceiling-")
    # The scripts run from a copy, so that their own checkout does not come first on
    # sys.path: PYTHONPATH picks the build.
    os.makedirs(os.path.join(workdir, "bench"), exist_ok=True)
    for name in ("bench_spark_read.py", "prebuilt_sources.py", "_gen.py"):
        shutil.copy(os.path.join(HERE, name), os.path.join(workdir, "bench", name))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    sides = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    results = {name: [] for name in sides}
    for round_number in range(args.rounds):
        for name, side in sides.items():
            result = run(side, args, env, workdir)
            results[name].append(result)
            segmentlog, ceiling, cpu, figures = result
            scan, ipc = figures["scan"], figures["ipc"]
            print(f"round {round_number + 1} {name:6s}  Spark: segmentlog {segmentlog:.3f} s, "
                  f"ceiling {ceiling:.3f} s, ratio {segmentlog / ceiling:.3f}x, workers' CPU "
                  f"{cpu[0]:.3f} s against {cpu[1]:.3f} s (JVM {cpu[2]:.3f} s, {cpu[3]:.3f} s)  "
                  f"| engine scan "
                  f"{scan[0]:.3f} s (user {scan[1]:.3f}, system {scan[2]:.3f}, "
                  f"{int(scan[3]):,} page faults), IPC read {ipc[0]:.3f} s", flush=True)
    print()
    print("| build | Spark: segmentlog | ceiling | ratio | workers' CPU: segmentlog | ceiling "
          "| engine scan | user | system | page faults | IPC read |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, rows in results.items():
        for segmentlog, ceiling, cpu, figures in rows:
            scan, ipc = figures["scan"], figures["ipc"]
            print(f"| {name} | {segmentlog:.3f} s | {ceiling:.3f} s | "
                  f"**{segmentlog / ceiling:.3f}x** | {cpu[0]:.3f} s | {cpu[1]:.3f} s | "
                  f"{scan[0]:.3f} s | {scan[1]:.3f} s | "
                  f"{scan[2]:.3f} s | {int(scan[3]):,} | {ipc[0]:.3f} s |")


if __name__ == "__main__":
    main()
