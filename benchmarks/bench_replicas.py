"""What reading three copies of a partition costs beside reading one (no Spark).

Generates (once, then reuses) one partition of N records, copies it into three brokers'
log dirs with the files a broker keeps beside its segments (leader epochs, high
watermarks), and times, side by side in one run, alternating, best of R each:
  * 1 copy:  plan + scan of the whole partition from broker-0's dir;
  * 3 copies: plan + scan of the same partition from the three dirs together (the leader's
    copy serves; the other two are checked against it, batch headers only);
  * 3 copies, laid out apart: the followers' segments rolled elsewhere (every batch
    header compared, the slow path);
and the planning alone of each. With --spark, the same reads through Spark (local[2]):
`spark.read.format("segmentlog").load(paths)` summing the values' lengths.

    python benchmarks/bench_replicas.py                      # 2M records of 200 bytes
    python benchmarks/bench_replicas.py --records 500000 --spark
"""
import argparse
import os
import platform
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _gen import generate_log  # noqa: E402
from segmentlog_datasource.format.checkpoints import (  # noqa: E402
    format_leader_epochs, format_offset_checkpoint,
)
from segmentlog_datasource.format.log import PartitionLog  # noqa: E402
from segmentlog_datasource.format.scan import ScanOptions  # noqa: E402
from segmentlog_datasource.read.fragments import scan_fragments  # noqa: E402
from segmentlog_datasource.read.options import parse_read_options  # noqa: E402
from segmentlog_datasource.read.planning import Constraints, plan_fragments  # noqa: E402

TOPIC = "bench"


def make_brokers(data_dir, records, records_per_batch, segment_bytes, name):
    """Three brokers' log dirs with one copy each of the same partition."""
    root = os.path.join(data_dir, f"replicas-{name}-{records}r-{records_per_batch}pb")
    marker = os.path.join(root, "GENERATED")
    if os.path.exists(marker):
        return [os.path.join(root, f"broker-{n}") for n in range(3)]
    shutil.rmtree(root, ignore_errors=True)
    print(f"generating {root} ...", flush=True)
    brokers = []
    for number in range(3):
        broker = os.path.join(root, f"broker-{number}")
        # The followers of the "apart" set roll their segments at other sizes.
        size = segment_bytes if name == "alike" or number == 0 else segment_bytes + 777_777 * number
        generate_log(broker, TOPIC, 1, records, 200, records_per_batch=records_per_batch,
                     segment_bytes=size)
        log = PartitionLog.open(os.path.join(broker, f"{TOPIC}-0"))
        end = log.end_offset()
        with open(os.path.join(broker, "replication-offset-checkpoint"), "wb") as handle:
            handle.write(format_offset_checkpoint({(TOPIC, 0): end}))
        with open(os.path.join(broker, f"{TOPIC}-0", "leader-epoch-checkpoint"), "wb") as handle:
            handle.write(format_leader_epochs([(0, 0)]))
        brokers.append(broker)
    open(marker, "w").close()
    return brokers


def plan(paths):
    import json

    return plan_fragments(parse_read_options({"paths": json.dumps(paths)}), Constraints())


def plan_and_scan(paths):
    rows = 0
    for batch in scan_fragments(plan(paths), ScanOptions()):
        rows += batch.num_rows
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--records-per-batch", type=int, default=50,
                        help="50 records of 200 bytes: about a producer's 16 KB batch")
    parser.add_argument("--segment-bytes", type=int, default=64 << 20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--data-dir", default=os.path.join(os.getcwd(), "bench-data"))
    parser.add_argument("--spark", action="store_true", help="also time the reads in Spark")
    args = parser.parse_args(argv)

    alike = make_brokers(args.data_dir, args.records, args.records_per_batch,
                         args.segment_bytes, "alike")
    apart = make_brokers(args.data_dir, args.records, args.records_per_batch,
                         args.segment_bytes, "apart")
    log = PartitionLog.open(os.path.join(alike[0], f"{TOPIC}-0"))
    size = sum(segment.size for segment in log.segments)
    print(f"Python {platform.python_version()}; {args.records:,} records of 200 bytes, "
          f"{size / 2**20:.0f} MiB in {len(log.segments)} segments per copy; "
          f"alternating, best of {args.repeat}\n")
    cases = {"1 copy": alike[:1], "3 copies": alike, "3 copies, laid out apart": apart}
    best_scan = {name: float("inf") for name in cases}
    best_plan = {name: float("inf") for name in cases}
    for _ in range(args.repeat):
        for name, paths in cases.items():
            started = time.perf_counter()
            plan(paths)
            best_plan[name] = min(best_plan[name], time.perf_counter() - started)
            started = time.perf_counter()
            assert plan_and_scan(paths) == args.records
            best_scan[name] = min(best_scan[name], time.perf_counter() - started)
    base = best_scan["1 copy"]
    print(f"{'read':28} {'plan':>10} {'plan + scan':>12} {'vs 1 copy':>10}")
    for name in cases:
        print(f"{name:28} {best_plan[name] * 1000:8.1f} ms {best_scan[name] * 1000:9.1f} ms "
              f"{best_scan[name] / base:9.2f}x")
    active_segment_end(alike[0], args.repeat)
    if args.spark:
        spark_reads(cases, args.records, args.repeat)


def active_segment_end(broker, repeat):
    """Finding where the active segment's data ends (every read's planning and the
    leader choice pay it): with the compiled header walk, and header by header."""
    import segmentlog_datasource.format.fastpath as fastpath

    directory = os.path.join(broker, f"{TOPIC}-0")
    walker = fastpath.batch_header_walker
    best = {"compiled walk": float("inf"), "header by header": float("inf")}
    for _ in range(repeat):
        for name in best:
            fastpath.batch_header_walker = walker if name == "compiled walk" else \
                (lambda *args, **kwargs: None)
            segment = PartitionLog.open(directory).segments[-1]
            started = time.perf_counter()
            segment.valid_end(True)
            best[name] = min(best[name], time.perf_counter() - started)
    fastpath.batch_header_walker = walker
    segment = PartitionLog.open(directory).segments[-1]
    print(f"\nthe active segment's end ({segment.size / 2**20:.0f} MiB), best of {repeat}")
    for name, seconds in best.items():
        print(f"{name:28} {seconds * 1000:9.1f} ms")


def spark_reads(cases, records, repeat):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession, functions as F

    spark = (SparkSession.builder.master("local[2]").appName("bench-replicas")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    import segmentlog_datasource

    segmentlog_datasource.register(spark)

    def run(paths):
        frame = spark.read.format("segmentlog").load(paths)
        row = frame.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).collect()[0]
        assert row.n == records, row

    best = {name: float("inf") for name in cases}
    run(cases["1 copy"])  # warm: the source's registration and Python workers
    for _ in range(repeat):
        for name, paths in cases.items():
            started = time.perf_counter()
            run(paths)
            best[name] = min(best[name], time.perf_counter() - started)
    print(f"\nSpark local[2], count and sum of value lengths, best of {repeat}")
    for name in cases:
        print(f"{name:28} {best[name] * 1000:9.1f} ms {best[name] / best['1 copy']:9.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
