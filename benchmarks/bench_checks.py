"""What the robustness checks of #9 cost on the driver and in the tasks, side by side in
one run, on one core, without Spark.

Generates (once, then reuses) two one-partition logs with kafka-python's batch builder:
  * "active": one segment that is still the active one (nothing rolled), as a live
    broker's or a backup's last segment is;
  * "rolled": the same records in many small rolled segments.
Then, best of --repeat runs each:
  (a) the walk that finds where the active segment's data ends (every batch header once),
      against planning a whole-log read, a point lookup, and scanning the whole log;
  (b) the last stable offset of read_committed with checksums (the whole partition read)
      and without, against scanning the whole log;
  (c) planning and scanning the rolled log (the check that each rolled segment's last
      batch ends below the next segment is made by the scan that reads that batch, so
      planning reads no segment bytes for it);
  (d) one trigger of a streaming query over the active segment after a small append:
      the tail scan, and planning with the end the tail scan found, against the walk
      that planning did before it reused that end.

    cd /tmp && python /path/to/checkout/benchmarks/bench_checks.py [--records 2000000]
(Run it from outside the checkout, so that the installed package with its compiled
decoder is what runs.)
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _gen import build_batch, generate_log  # noqa: E402
from segmentlog_datasource.format import PartitionLog, ScanOptions  # noqa: E402
from segmentlog_datasource.read.fragments import scan_fragments  # noqa: E402
from segmentlog_datasource.read.options import parse_read_options  # noqa: E402
from segmentlog_datasource.read.planning import Constraints, plan_fragments  # noqa: E402
from segmentlog_datasource.read.stream import LogStream, parse_stream_options  # noqa: E402

TOPIC = "bench"


def best(function, repeat):
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return min(times), result


def make_log(data_dir, name, records, segment_bytes, records_per_batch):
    logdir = os.path.join(data_dir, f"{name}-{records}-{records_per_batch}")
    marker = os.path.join(logdir, ".complete")
    if not os.path.exists(marker):
        shutil.rmtree(logdir, ignore_errors=True)
        print(f"generating {logdir} ...", flush=True)
        generate_log(logdir, TOPIC, 1, records, 200, records_per_batch=records_per_batch,
                     segment_bytes=segment_bytes)
        open(marker, "w").close()
    return logdir


def partition(logdir):
    return PartitionLog.open(os.path.join(logdir, f"{TOPIC}-0"))


def plan(logdir, **options):
    read = parse_read_options({"path": logdir, **options})
    return plan_fragments(read, Constraints())


def scan_all(logdir):
    rows = 0
    for batch in scan_fragments(plan(logdir), ScanOptions()):
        rows += batch.num_rows
    return rows


def ms(seconds):
    return f"{seconds * 1000:9.1f} ms"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--records-per-batch", type=int, default=50,
                        help="50 records of 200 bytes: about a producer's 16 KB batch")
    parser.add_argument("--rolled-segment-bytes", type=int, default=1 << 20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--data-dir", default=os.path.join(os.getcwd(), "bench-data"))
    args = parser.parse_args(argv)

    from segmentlog_datasource.format.fastpath import compiled  # noqa: F401 (must be built)

    active = make_log(args.data_dir, "active", args.records, 1 << 40, args.records_per_batch)
    rolled = make_log(args.data_dir, "rolled", args.records, args.rolled_segment_bytes,
                      args.records_per_batch)
    log = partition(active)
    segment = log.segments[-1]
    batches = sum(1 for _ in segment.iter_headers(0, allow_torn_tail=True))
    print(f"Python {platform.python_version()}; {args.records:,} records of 200 bytes in "
          f"{batches:,} batches; active segment {segment.size / 2**20:.0f} MiB; rolled log "
          f"{len(partition(rolled).segments)} segments; best of {args.repeat}\n")

    # (a) where the active segment's data ends
    walk, _ = best(lambda: partition(active).segments[-1].valid_end(True), args.repeat)
    whole_plan, _ = best(lambda: plan(active), args.repeat)
    middle = args.records // 2
    lookup = {"startingOffsets": f'{{"{TOPIC}":{{"0":{middle}}}}}',
              "endingOffsets": f'{{"{TOPIC}":{{"0":{middle + 1}}}}}'}
    lookup_plan, _ = best(lambda: plan(active, **lookup), args.repeat)
    scan, rows = best(lambda: scan_all(active), max(1, args.repeat // 2))
    assert rows == args.records, rows
    print("(a) the active segment's end (a walk of every header, with the last CRC)")
    print(f"    walk                     {ms(walk)}")
    print(f"    plan, whole-log read     {ms(whole_plan)}   walk = {walk / whole_plan:.0%}")
    print(f"    plan, point lookup       {ms(lookup_plan)}   walk = {walk / lookup_plan:.0%}")
    print(f"    plan + scan, whole log   {ms(scan)}   walk = {walk / scan:.1%}\n")

    # (b) read_committed's last stable offset
    lso_verified, _ = best(lambda: partition(active).last_stable_offset(verify=True),
                           args.repeat)
    lso_headers, _ = best(lambda: partition(active).last_stable_offset(verify=False),
                          args.repeat)
    print("(b) read_committed's last stable offset, per plan")
    print(f"    headers only (verifyChecksums=false) {ms(lso_headers)}")
    print(f"    checksummed (default)               {ms(lso_verified)}   "
          f"= {lso_verified / scan:.0%} of plan + scan of the whole log\n")

    # (c) the rolled log: the bound on each segment's last batch is checked by its scan
    rolled_plan, _ = best(lambda: plan(rolled), args.repeat)
    rolled_scan, _ = best(lambda: scan_all(rolled), max(1, args.repeat // 2))
    count = len(partition(rolled).segments) - 1
    print(f"(c) {count} rolled segments (each last batch checked by the scan that reads it)")
    print(f"    plan, whole-log read     {ms(rolled_plan)}")
    print(f"    plan + scan, whole log   {ms(rolled_scan)}\n")

    # (d) a streaming trigger after a small append to the active segment
    copy = os.path.join(args.data_dir, "stream-copy")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(active, copy)
    stream = LogStream(parse_stream_options({"path": copy}))
    start = stream.initial_offsets()
    start = stream.latest_offsets(start, None)  # caught up
    log_path = partition(copy).segments[-1].log_path
    next_offset = args.records
    trigger_times, plan_times = [], []
    for _ in range(args.repeat):
        record = [(1_800_000_000_000, b"k", b"v" * 200, [])]
        with open(log_path, "ab") as handle:
            handle.write(build_batch(next_offset, record))
        next_offset += 1
        started = time.perf_counter()
        end = stream.latest_offsets(start, None)
        admitted = time.perf_counter()
        groups = stream.plan(start, end)
        planned = time.perf_counter()
        assert sum(1 for group in groups for _ in group) == 1
        trigger_times.append(admitted - started)
        plan_times.append(planned - admitted)
        start = end
    walk_now, _ = best(lambda: partition(copy).segments[-1].valid_end(True), args.repeat)
    print("(d) one streaming trigger after a one-record append to the active segment")
    print(f"    latest offsets (tail scan of the new batch)  {ms(min(trigger_times))}")
    print(f"    plan, end taken from the tail scan            {ms(min(plan_times))}")
    print(f"    the walk that planning did before             {ms(walk_now)}   "
          f"= {walk_now / (min(trigger_times) + min(plan_times)):.0f}x the trigger now")
    shutil.rmtree(copy, ignore_errors=True)


if __name__ == "__main__":
    main()
