"""End-to-end Spark read benchmarks, measured side by side in one run.

(b) `spark.read.format("segmentlog")` count/sum over a generated log, against a trivial
    Python data source that yields the very same rows as prebuilt Arrow batches (Arrow
    IPC files, memory-mapped): the ceiling of Spark's Python data source path. The two
    are timed in turns after --warmup scans of each (the JVM compiles for about ten).
(c) a point lookup (one offset of one partition) through options (offset_range), beside
    the floor of any Python data source query (one split yielding one prebuilt row of the
    same schema), a pushed-down filter and the full scan.

Usage: python benchmarks/bench_spark_read.py [--records 4000000] [--value-size 200]
(4M records of 200-byte values make an 875 MB log: a point lookup costs about what any
Spark query costs, so its share of a full scan is measured on a log of realistic size.)
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import pyarrow as pa  # noqa: E402

from _gen import generate_log  # noqa: E402
# The Spark workers import the sources from a module of their own: what a worker imports
# stays in every garbage collection Spark's daemon runs after each of its tasks.
from prebuilt_sources import (  # noqa: E402
    OneRowSource, PrebuiltArrowSource, encode_batch, workers_import_from_here)

workers_import_from_here()


def planned_groups(options):
    """segmentlog's Spark partitions for these read options, each as its Arrow batches,
    planned and read without Spark."""
    from segmentlog_datasource.read.options import parse_read_options
    from segmentlog_datasource.read.fragments import scan_fragments, scan_options
    from segmentlog_datasource.read.planning import Constraints, group_fragments, plan_fragments

    read = parse_read_options(options)
    for group in group_fragments(plan_fragments(read, Constraints()), read):
        yield list(scan_fragments(group, scan_options(read)))


def prebuild_arrow(logdir, target, read_options=None):
    """Write the Arrow output of each segmentlog Spark partition (read with
    `read_options` besides the path) to one IPC file."""
    os.makedirs(target)
    groups = 0
    for n, batches in enumerate(planned_groups(dict(read_options or {}, path=logdir))):
        with pa.OSFile(os.path.join(target, f"{n:05d}.arrow"), "wb") as sink:
            with pa.ipc.new_file(sink, batches[0].schema) as writer:
                for batch in batches:
                    writer.write_batch(batch)
        groups += 1
    return groups


def lookup_batch(logdir, options) -> pa.RecordBatch:
    """The looked-up rows as one Arrow batch."""
    batches = [b for group in planned_groups({"path": logdir, **options}) for b in group]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


# The (b) scan: every row's offset and value read, one row back.
SCAN_AGGREGATE = ["count(*) AS n", "sum(offset) AS offsets", "sum(length(value)) AS bytes"]


def bench_session(app_name):
    """The benchmarks' local[2] session, segmentlog and the prebuilt-Arrow ceiling
    registered."""
    from pyspark.sql import SparkSession

    import segmentlog_datasource

    spark = (SparkSession.builder.master("local[2]").appName(app_name)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    segmentlog_datasource.register(spark, enable_filter_pushdown=False)
    spark.dataSource.register(PrebuiltArrowSource)
    return spark


def best_of(runs, fn):
    times = []
    result = None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def cpu_seconds():
    """(Spark's Python workers, its JVM, the JVM's JIT compiler threads): CPU seconds so far
    of this process's descendants, exited workers included (their daemon reaped them);
    None without psutil."""
    try:
        import psutil
    except ImportError:
        return None
    python = jvm = compilers = 0.0
    for process in psutil.Process().children(recursive=True):
        try:
            name, times = process.name(), process.cpu_times()
        except psutil.Error:
            continue
        total = times.user + times.system + times.children_user + times.children_system
        if name.startswith("python"):
            python += total
        elif name == "java":
            jvm += total
            compilers += jit_seconds(process.pid)
    return python, jvm, compilers


def jit_seconds(pid):
    """CPU seconds so far of the JVM's C1 and C2 compiler threads (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    seconds = 0.0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return float("nan")
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if "CompilerThre" in name:
            seconds += (int(fields[11]) + int(fields[12])) / ticks
    return seconds


def scan_in_turns(runs, warmup, first, second):
    """Time `first` and `second` (scans returning a row) in turns after `warmup` scans of
    each: the JVM's JIT compilers keep working through about ten scans of a fresh
    session, and a source timed while they do pays for it. The order changes every round
    so that drift hits both alike. Returns each side's times, last result, and CPU
    seconds a scan (cpu_seconds' fields, None without psutil)."""
    for _ in range(warmup):
        first()
        second()
    times, results, cpu = ([], []), [None, None], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    for turn in range(runs):
        for side in ((0, 1) if turn % 2 == 0 else (1, 0)):
            before = cpu_seconds()
            start = time.perf_counter()
            results[side] = (first, second)[side]()
            times[side].append(time.perf_counter() - start)
            after = cpu_seconds()
            if before is None:
                cpu = None
            else:
                for i, (a, b) in enumerate(zip(before, after)):
                    cpu[side][i] += (b - a) / runs
    return times, results, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=4_000_000)
    parser.add_argument("--value-size", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--segment-bytes", type=int, default=16 << 20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=8,
                        help="scans of each source before the (b) timings (JIT warm-up)")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--skip-lookup", action="store_true", help="(b) only")
    parser.add_argument("--max-records-per-batch", type=int, default=None,
                        help="the maxRecordsPerBatch read option (the ceiling is built "
                             "from the batches it gives)")
    args = parser.parse_args()
    read_options = {} if args.max_records_per_batch is None else \
        {"maxRecordsPerBatch": str(args.max_records_per_batch)}

    os.environ["PYSPARK_PYTHON"] = sys.executable
    import segmentlog_datasource

    workdir = args.workdir or tempfile.mkdtemp(prefix="segmentlog-bench-")
    logdir = os.path.join(workdir, "logdir")
    try:
        if not os.path.isdir(logdir):
            start = time.perf_counter()
            generate_log(logdir, "bench", args.partitions, args.records // args.partitions,
                         args.value_size, segment_bytes=args.segment_bytes)
            print(f"generated {args.records:,} records in {time.perf_counter() - start:.1f}s")
        log_bytes = sum(os.path.getsize(os.path.join(root, name))
                        for root, _, names in os.walk(logdir) for name in names
                        if name.endswith(".log"))
        arrow_dir = os.path.join(workdir, "arrow")
        shutil.rmtree(arrow_dir, ignore_errors=True)
        partitions = prebuild_arrow(logdir, arrow_dir, read_options)
        print(f"log: {log_bytes / 1e6:.1f} MB in .log files, {partitions} Spark partitions")

        spark = bench_session("segmentlog-bench")
        spark.dataSource.register(OneRowSource)

        def scan(fmt, path):
            options = read_options if fmt == "segmentlog" else {}
            return lambda: (spark.read.format(fmt).options(**options).load(path)
                            .selectExpr(*SCAN_AGGREGATE).first())

        times, (r_segmentlog, r_ceiling), cpu = scan_in_turns(
            args.runs, args.warmup, scan("segmentlog", logdir), scan("prebuilt_arrow", arrow_dir))
        t_segmentlog, t_ceiling = min(times[0]), min(times[1])
        ratios = sorted(s / c for s, c in zip(*times))
        median_ratio = ratios[len(ratios) // 2] if len(ratios) % 2 else \
            (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
        assert tuple(r_segmentlog) == tuple(r_ceiling), (r_segmentlog, r_ceiling)
        if args.skip_lookup:
            extra = ""
            if cpu is not None:  # per scan: Python workers, the JVM, its JIT compilers
                extra = (" cpu segmentlog python {:.3f} jvm {:.3f} ceiling python {:.3f} jvm "
                         "{:.3f}".format(cpu[0][0], cpu[0][1], cpu[1][0], cpu[1][1]) +
                         " jit segmentlog {:.3f} ceiling {:.3f}".format(cpu[0][2], cpu[1][2]))
            print(f"(b) segmentlog {t_segmentlog:.3f} s  ceiling {t_ceiling:.3f} s  ratio "
                  f"{t_segmentlog / t_ceiling:.3f}x  ({r_segmentlog.n:,} records, best of "
                  f"{args.runs}){extra} median {median_ratio:.3f}x")
            spark.stop()
            return

        target = args.records // args.partitions // 2
        lookup = segmentlog_datasource.offset_range("bench", 0, target, target + 1)

        def by_options():
            return spark.read.format("segmentlog").options(**lookup).load(logdir).collect()

        def pushed_point():  # a new load() per filtered query: exact even on Spark 4.3
            return spark.read.format("segmentlog").load(logdir).where(
                f"topic = 'bench' AND partition = 0 AND offset = {target}").collect()

        row_batch = encode_batch(lookup_batch(logdir, lookup))
        floor = spark.read.format("one_row").option("batch", row_batch)

        # Interleaved rounds, so that drift of the machine hits every figure alike.
        t_options = t_floor = t_point = float("inf")
        for _ in range(args.runs):
            t, rows = best_of(1, by_options)
            t_options = min(t_options, t)
            assert len(rows) == 1 and rows[0].offset == target
            t, rows = best_of(1, lambda: floor.load().collect())
            t_floor = min(t_floor, t)
            assert len(rows) == 1 and rows[0].offset == target
            spark.conf.set(segmentlog_datasource.PUSHDOWN_CONF, "true")
            t, rows = best_of(1, pushed_point)
            spark.conf.set(segmentlog_datasource.PUSHDOWN_CONF, "false")
            t_point = min(t_point, t)
            assert len(rows) == 1 and rows[0].offset == target

        print()
        print(f"(b) end-to-end count/sum over {r_segmentlog.n:,} records, local[2], best of "
              f"{args.runs}")
        print(f"    segmentlog                 {t_segmentlog:8.2f} s  "
              f"{r_segmentlog.n / t_segmentlog:12,.0f} records/s")
        print(f"    prebuilt Arrow (ceiling)   {t_ceiling:8.2f} s  "
              f"{r_ceiling.n / t_ceiling:12,.0f} records/s")
        print(f"    ratio segmentlog/ceiling   {t_segmentlog / t_ceiling:8.2f}x  (target <= 1.05x)")
        print(f"    median of the turns' ratios {median_ratio:7.2f}x  ({args.warmup} warm-up "
              f"scans of each first)")
        print(f"(c) point lookup on {log_bytes / 1e6:.0f} MB, best of {args.runs}, interleaved")
        print(f"    by options (offset_range)  {t_options:8.3f} s")
        print(f"    floor: one prebuilt row    {t_floor:8.3f} s  (one split, same schema)")
        print(f"    ratio options/floor        {t_options / t_floor:8.2f}x  (target <= 1.5x)")
        print(f"    pushed-down filter         {t_point:8.3f} s  (pushdown on, fresh load())")
        print(f"    full scan                  {t_segmentlog:8.3f} s")
        print(f"    ratio options/full scan    {100 * t_options / t_segmentlog:8.1f}%")
        spark.stop()
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
