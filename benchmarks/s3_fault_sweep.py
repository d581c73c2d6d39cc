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

Usage (from outside the checkout):
  cd /tmp && python /path/to/checkout/benchmarks/s3_fault_sweep.py [--read-timeout 1]
"""
import argparse
import os
import shutil
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--read-timeout", default="1", help="store.readTimeout (seconds)")
    parser.add_argument("--max-attempts", default="5", help="store.maxAttempts")
    args = parser.parse_args()
    remote.CHUNK_BYTES, remote.MIN_FETCH_BYTES, remote.READ_PAST_BYTES = 1024, 256, 128

    work = tempfile.mkdtemp(prefix="fault-sweep-")
    try:
        with S3Server() as server:
            server.make_bucket(BUCKET)
            options = {**server.store_options(), "store.readTimeout": args.read_timeout,
                       "store.maxAttempts": args.max_attempts}
            local = os.path.join(work, "logdir")
            write_log(local, table("row", 40, [0, 1]), num_partitions=2, **SMALL)
            server.upload_tree(local, BUCKET, "read")
            uri = f"s3://{BUCKET}/read"
            fault_free = read_rows(uri, options)
            print(f"reads ({len(fault_free)} rows; standard retry mode, store.readTimeout "
                  f"{args.read_timeout} s)")
            reads = {"listing": dict(op="LIST"),
                     "HEAD": dict(op="HEAD", key="read/t-0/*.log"),
                     "index GET": dict(op="GET", key="read/t-1/*.index"),
                     "mid-segment GET": dict(op="GET", key="read/t-0/*.log", min_range_start=1)}
            for place, match in reads.items():
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

            print(f"\ntries run out (store.maxAttempts {args.max_attempts})")
            for place, match in (("mid-segment GET", reads["mid-segment GET"]),
                                 ("listing", reads["listing"])):
                for kind in ("slowdown", "reset", "truncated"):
                    outcome, fired, seconds = run(
                        server, [Fault(kind, times=1000, **match)],
                        lambda: read_rows(uri, options) and "read?!")
                    print(f"  {place:16s} {kind:12s} fired {fired} {seconds:6.2f} s\n"
                          f"    {outcome}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
