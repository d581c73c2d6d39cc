"""Faults and retries (#22), every fault kind at every place, with the production retry
strategy (the SDKs' standard mode): run by hand; CI runs one case of each kind
(tests/store/test_s3_faults.py).

moto's S3 server runs behind the fault-injecting proxy of tests/support/s3server.py
(started here). For each place a read or a write requests something (the listing, a
HEAD, an index GET, a ranged GET inside a segment; a staged PUT, a conditional PUT, the
lock's PUT, GET and DELETE, a download, the writer's listing) and each fault kind
(503 SlowDown, 500 InternalError, a reset before or after the headers, a body cut short
with its Content-Length or without, a stall before or inside the body), one request gets
the fault and the script checks the rows read (or written) against a fault-free run.
Kinds that need a response body are skipped where the answer has none (PUT, DELETE,
HEAD). A second table runs each fault until the tries run out and prints the error.

A third table (#46) throttles every request the way a store under load does, in each run
of a read and of a write: in bursts (n requests in a row out of every ten answered 503
SlowDown, 500 InternalError or a reset), at random (each request with a chance p,
seeded by the run), or in windows of time (every request in the first 2 s of every 5 s),
and prints how many runs gave exact rows and how long they took. The last table is a
store that stays down (every request 503) and the time until the read fails.

Usage (from outside the checkout):
  cd /tmp && python /path/to/checkout/benchmarks/s3_fault_sweep.py [--read-timeout 1]
  cd /tmp && python /path/to/checkout/benchmarks/s3_fault_sweep.py --sections throttling \
      --runs 20
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import pyarrow as pa  # noqa: E402

from support.s3server import FAULT_KINDS, Fault, S3Server  # noqa: E402

from segmentlog_datasource.format.scan import ScanOptions  # noqa: E402
from segmentlog_datasource.read.fragments import scan_fragments  # noqa: E402
from segmentlog_datasource.read.options import parse_read_options  # noqa: E402
from segmentlog_datasource.read.planning import Constraints, plan_fragments  # noqa: E402
from segmentlog_datasource.storage import remote  # noqa: E402
from segmentlog_datasource.writer import write_log  # noqa: E402

try:
    from segmentlog_datasource.storage import retry  # noqa: E402
except ImportError:  # a checkout before #46 (its retries were the SDKs')
    retry = None

BUCKET = "fault-sweep"
SMALL = {"segment_bytes": 1024, "batch_size": 256, "index_interval_bytes": 200}
BODY_KINDS = ("reset_after_headers", "short_body", "truncated", "stall_mid_body")


def table(tag, per_partition, partitions):
    values = [b"%s-p%d-%03d-" % (tag.encode(), p, i) + b"x" * 60
              for p in partitions for i in range(per_partition)]
    return pa.table({"value": values,
                     "partition": pa.array([p for p in partitions for _ in range(per_partition)],
                                           pa.int32()),
                     "topic": ["t"] * len(values)})


def read_rows(uri, options):
    fragments = plan_fragments(parse_read_options(dict(options, path=uri)), Constraints())
    rows = []
    for batch in scan_fragments(fragments, ScanOptions()):
        rows.extend(zip(*(batch.column(c).to_pylist()
                          for c in ("topic", "partition", "offset", "value"))))
    return sorted(rows)


def run(server, faults, action):
    """(outcome, tries of the faulted requests, seconds)."""
    remote._filesystems.clear()
    if retry is not None:
        retry.reset_limiters()  # each run meets a store that has not throttled yet
    server.reset_counts()
    started = time.monotonic()
    with server.inject(*faults):
        try:
            outcome = action()
        except Exception as exc:
            outcome = f"ERROR {type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
    seconds = time.monotonic() - started
    fired = sum(fault.fired for fault in faults)
    return outcome, fired, seconds


READS = {"listing": dict(op="LIST"),
         "HEAD": dict(op="HEAD", key="read/t-0/*.log"),
         "index GET": dict(op="GET", key="read/t-1/*.index"),
         "mid-segment GET": dict(op="GET", key="read/t-0/*.log", min_range_start=1)}


def kinds(server, uri, options, fault_free, read_timeout):
    """One fault of each kind at each place of a read and of a write."""
    print(f"reads ({len(fault_free)} rows; store.readTimeout {read_timeout} s)")
    for place, match in READS.items():
        for kind in FAULT_KINDS:
            if place == "HEAD" and kind in BODY_KINDS:
                continue
            outcome, fired, seconds = run(
                server, [Fault(kind, stall_s=30, **match)],
                lambda: "same rows" if read_rows(uri, options) == fault_free
                else "WRONG ROWS")
            print(f"  {place:16s} {kind:20s} {outcome:12.160s} fired {fired} "
                  f"{seconds:6.2f} s")

    print("\nwrites (a new topic of 2 partitions)")
    want = sorted(table("job", 8, [0, 1]).column("value").to_pylist())
    writes = {
        "staged PUT": dict(op="PUT", key="*/.segmentlog-staging-*/publish/t-0/*.log"),
        "conditional PUT": dict(op="PUT", key="*/t-1/*.log",
                                conditional="If-None-Match"),
        "conditional PUT, written": dict(op="PUT", key="*/t-1/*.log",
                                         conditional="If-None-Match", upstream=True),
        "lock PUT, written": dict(op="PUT", key="*/.segmentlog-lock-t",
                                  upstream=True),
        "lock GET": dict(op="GET", key="*/.segmentlog-lock-t"),
        "lock DELETE, done": dict(op="DELETE", key="*/.segmentlog-lock-t",
                                  upstream=True),
        "task download": dict(op="GET", key="*/.segmentlog-staging-*/task-*"),
        "writer LIST": dict(op="LIST", key=None),
    }
    for number, (place, match) in enumerate(writes.items()):
        for kind in FAULT_KINDS:
            if match["op"] in ("PUT", "DELETE") and kind in BODY_KINDS:
                continue
            target = f"s3://{BUCKET}/write-{number}-{kind}"

            def write():
                write_log(target, table("job", 8, [0, 1]), num_partitions=2,
                          options=options, **SMALL)
                got = sorted(v for r in read_rows(target, options) for v in [r[3]])
                leftovers = [k["Key"] for k in server.client().list_objects_v2(
                    Bucket=BUCKET, Prefix=target[len(f"s3://{BUCKET}/"):] + "/"
                ).get("Contents", ()) if "/.segmentlog-staging-" in k["Key"] or
                    "/.segmentlog-lock-" in k["Key"]]
                return ("same rows" if got == want else "WRONG ROWS") + \
                    (f", left {leftovers}" if leftovers else "")

            outcome, fired, seconds = run(server, [Fault(kind, stall_s=30, **match)],
                                          write)
            print(f"  {place:26s} {kind:20s} {outcome:12.160s} fired {fired} "
                  f"{seconds:6.2f} s")


def exhausted(server, uri, options, max_attempts):
    """Each fault on every try of one place, until the tries run out."""
    print(f"\ntries run out (store.maxAttempts {max_attempts or 'default'})")
    for place, match in (("mid-segment GET", READS["mid-segment GET"]),
                         ("listing", READS["listing"])):
        for kind in ("slowdown", "reset", "truncated"):
            outcome, fired, seconds = run(
                server, [Fault(kind, times=1000, **match)],
                lambda: read_rows(uri, options) and "read?!")
            print(f"  {place:16s} {kind:12s} fired {fired} {seconds:6.2f} s\n"
                  f"    {outcome}")


# (name, rule of every request, given the run's number): the throttling table's patterns
THROTTLING = [
    ("none", lambda run: []),
    ("burst 503 1/10", lambda run: [Fault("slowdown", every=10, times=1)]),
    ("burst 503 3/10", lambda run: [Fault("slowdown", every=10, times=3)]),
    ("burst 500 3/10", lambda run: [Fault("internal", every=10, times=3)]),
    ("burst reset 3/10", lambda run: [Fault("reset", every=10, times=3)]),
    ("burst 503 5/10", lambda run: [Fault("slowdown", every=10, times=5)]),
    ("random 503 p=0.1", lambda run: [Fault("slowdown", probability=0.1, seed=run)]),
    ("random 503 p=0.2", lambda run: [Fault("slowdown", probability=0.2, seed=run)]),
    ("random 503 p=1/3", lambda run: [Fault("slowdown", probability=1 / 3, seed=run)]),
    ("random 500 p=1/3", lambda run: [Fault("internal", probability=1 / 3, seed=run)]),
    ("random 503 p=0.5", lambda run: [Fault("slowdown", probability=0.5, seed=run)]),
    ("down 2 s of every 5 s", lambda run: [Fault("slowdown", burst_s=2.0, every_s=5.0)]),
]


def throttling(server, uri, options, fault_free, runs, patterns):
    """Each pattern on every request, `runs` reads and `runs` writes; the runs with exact
    rows, the median and longest time, the first error."""
    want = sorted(table("job", 8, [0, 1]).column("value").to_pylist())
    print(f"\nthrottling every request ({runs} runs each; {len(fault_free)} rows read, "
          f"16 written)")
    print(f"  {'pattern':24s} {'':6s} {'exact':>7s} {'median':>8s} {'max':>8s}  faults/run")
    for name, rules in THROTTLING:
        if patterns and not any(p in name for p in patterns):
            continue
        for side in ("read", "write"):
            times, good, fired, errors = [], 0, 0, []
            for number in range(runs):
                if side == "read":
                    def action():
                        return read_rows(uri, options) == fault_free
                else:
                    target = f"s3://{BUCKET}/throttled-{time.time_ns()}"

                    def action():
                        write_log(target, table("job", 8, [0, 1]), num_partitions=2,
                                  options=options, **SMALL)
                        return True
                faults = rules(number)
                outcome, count, seconds = run(server, faults, action)
                if side == "write" and outcome is True:  # read back without faults
                    outcome = sorted(r[3] for r in read_rows(target, options)) == want
                fired += count
                times.append(seconds)
                if outcome is True:
                    good += 1
                else:
                    errors.append(outcome if isinstance(outcome, str) else "WRONG ROWS")
            print(f"  {name:24s} {side:6s} {good:3d}/{runs:<3d} {statistics.median(times):7.2f}s "
                  f"{max(times):7.2f}s  {fired / runs:5.1f}", flush=True)
            if errors:
                print(f"      {len(errors)} failed, e.g. {errors[0][:300]}")


def stays_down(server, uri, options):
    print("\na store that stays down (every request 503 SlowDown)")
    for place, match in (("read", {}), ("segment GET", dict(op="GET", key="read/t-0/*.log"))):
        outcome, fired, seconds = run(server, [Fault("slowdown", times=10 ** 9, **match)],
                                      lambda: read_rows(uri, options) and "read?!")
        print(f"  {place:16s} fired {fired:4d} {seconds:6.2f} s\n    {outcome}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--read-timeout", default="1", help="store.readTimeout (seconds)")
    parser.add_argument("--max-attempts", default=None,
                        help="store.maxAttempts (default: segmentlog's)")
    parser.add_argument("--retry-timeout", default=None,
                        help="store.retryTimeout (default: segmentlog's; not before #46)")
    parser.add_argument("--sections", default="kinds,exhausted,throttling,down",
                        help="which tables: kinds, exhausted, throttling, down")
    parser.add_argument("--runs", type=int, default=10, help="runs of each throttling pattern")
    parser.add_argument("--patterns", default="",
                        help="throttling patterns whose name holds one of these (comma-separated)")
    parser.add_argument("--no-limiter", action="store_true",
                        help="throttling answers do not lower the requests in flight (#46's "
                             "retries alone, to measure what the limiter does)")
    args = parser.parse_args()
    if args.no_limiter:
        retry.Limiter.throttled = lambda self: None
    sections = set(args.sections.split(","))
    remote.CHUNK_BYTES, remote.MIN_FETCH_BYTES, remote.READ_PAST_BYTES = 1024, 256, 128

    work = tempfile.mkdtemp(prefix="fault-sweep-")
    try:
        with S3Server() as server:
            server.make_bucket(BUCKET)
            options = {**server.store_options(), "store.readTimeout": args.read_timeout}
            if args.max_attempts is not None:
                options["store.maxAttempts"] = args.max_attempts
            if args.retry_timeout is not None:
                options["store.retryTimeout"] = args.retry_timeout
            local = os.path.join(work, "logdir")
            write_log(local, table("row", 40, [0, 1]), num_partitions=2, **SMALL)
            server.upload_tree(local, BUCKET, "read")
            uri = f"s3://{BUCKET}/read"
            fault_free = read_rows(uri, options)
            if "kinds" in sections:
                kinds(server, uri, options, fault_free, args.read_timeout)
            if "exhausted" in sections:
                exhausted(server, uri, options, args.max_attempts)
            if "throttling" in sections:
                throttling(server, uri, options, fault_free, args.runs,
                           [p for p in args.patterns.split(",") if p])
            if "down" in sections:
                stays_down(server, uri, options)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
