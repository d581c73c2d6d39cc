"""Faults and retries (#22): what the retry layer's bookkeeping costs a fault-free S3 scan.

A log is generated on local disk and uploaded to moto's S3 server on loopback (started
here, tests/support/s3server.py); the timed runs talk to moto directly, not through the
counting proxy. Two sides, alternating, several repetitions each:

  before   ranged reads as before #22: pyarrow's read_at, the bytes copied into the
           segment's buffer (no check of the last byte), no retry loop of segmentlog's
           (the SDK's standard retries with 3 tries before #46; since, one try: this
           side is no longer what ran before #22, but the bookkeeping it measures is)
  after    this checkout: each read into the buffer itself, its last byte set first and
           checked (read again when it was not written), each try through
           storage/retry.py's request loop and limiter (#46)

Measured: full scans (plan_fragments + scan_fragments, every record), and the raw ranged
reads of every segment in 8 MiB chunks without decoding (the bookkeeping alone). Medians
and the after/before ratio are printed, and how many reads were read again because the
data's last byte matched the marker (about one in 256).

Usage (from outside the checkout):
  cd /tmp && python /path/to/checkout/benchmarks/bench_s3_retries.py [--records 600000]
"""
import argparse
import collections
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from _gen import generate_log  # noqa: E402
from support.s3server import S3Server  # noqa: E402

from segmentlog_datasource.format.scan import ScanOptions  # noqa: E402
from segmentlog_datasource.read.fragments import scan_fragments  # noqa: E402
from segmentlog_datasource.read.options import parse_read_options  # noqa: E402
from segmentlog_datasource.read.planning import Constraints, plan_fragments  # noqa: E402
from segmentlog_datasource.storage import remote  # noqa: E402

BUCKET = "bench-retries"
TOPIC = "bench"
NEW_READ_INTO = remote.ArrowStore.read_into
rereads = collections.Counter()


def old_read_into(self, handle, path, position, view):
    """The read before #22: pyarrow's read_at, then a copy (as FetchedLog did)."""
    try:
        data = handle.file.read_at(len(view), position)
    except Exception as exc:
        raise self.error(path, f"cannot read bytes {position}..{position + len(view)}",
                         exc) from None
    view[:len(data)] = data
    return len(data)


def counting_read_into(self, handle, path, position, view):
    """The new read, counting the reads made (readinto calls) per call."""
    file = handle.file
    calls = [0]
    real = file.readinto

    class Counted:
        def __getattr__(self, name):
            return getattr(file, name)

        def readinto(self, buffer):
            calls[0] += 1
            return real(buffer)

    handle.file = Counted()
    try:
        return NEW_READ_INTO(self, handle, path, position, view)
    finally:
        handle.file = file
        rereads["reads"] += 1
        rereads["read again"] += calls[0] - 1


SIDES = {
    "before": (old_read_into, {"store.maxAttempts": "3"}),
    "after": (NEW_READ_INTO, {}),
}


def use(side):
    remote.ArrowStore.read_into = SIDES[side][0]
    remote._filesystems.clear()  # a filesystem with the side's retry settings


def full_scan(options):
    started = time.perf_counter()
    fragments = plan_fragments(parse_read_options(options), Constraints())
    rows = sum(b.num_rows for b in scan_fragments(fragments, ScanOptions()))
    return time.perf_counter() - started, rows


def raw_reads(uri, options):
    """Seconds to read every segment in CHUNK_BYTES ranges through ArrowStore (no decode)."""
    from pyarrow import fs as pafs

    store = remote.ArrowStore("s3", "s3://", "", parse_read_options(
        dict(options, path=uri)).store.settled("s3"))
    infos = [i for i in store.fs.get_file_info(pafs.FileSelector(store.to_fs(uri),
                                                                 recursive=True))
             if i.type == pafs.FileType.File and i.path.endswith(".log")]
    started = time.perf_counter()
    fetched = 0
    for info in infos:
        path = store.to_uri(info.path)
        handle = store._open_file(path, info.size)
        buffer = bytearray(remote.CHUNK_BYTES)
        try:
            for position in range(0, info.size, remote.CHUNK_BYTES):
                view = memoryview(buffer)[:min(remote.CHUNK_BYTES, info.size - position)]
                fetched += store.read_into(handle, path, position, view)
        finally:
            handle.close()
    return time.perf_counter() - started, fetched


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=600_000,
                        help="records in all (default 600k: about 140 MB)")
    parser.add_argument("--value-size", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--segment-mb", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5, help="runs per side of each measure")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="bench-retries-")
    results = collections.defaultdict(list)
    try:
        local = os.path.join(work, "logdir")
        per_partition = args.records // args.partitions
        generate_log(local, TOPIC, args.partitions, per_partition, args.value_size,
                     segment_bytes=args.segment_mb << 20)
        log_bytes = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(local)
                        for n in names if n.endswith(".log"))
        with S3Server() as server:
            server.make_bucket(BUCKET)
            server.upload_tree(local, BUCKET, "log")
            uri = f"s3://{BUCKET}/log"
            base = {"path": uri, "store.endpoint": server.direct_endpoint,
                    "store.region": server.region, "store.accessKeyId": server.access_key,
                    "store.secretAccessKey": server.secret_key}
            for round_ in range(args.repeats + 1):  # round 0 warms up, not counted
                for side in (SIDES if round_ % 2 else reversed(list(SIDES))):
                    use(side)
                    options = dict(base, **SIDES[side][1])
                    seconds, rows = full_scan(options)
                    assert rows == per_partition * args.partitions, rows
                    raw, fetched = raw_reads(uri, options)
                    assert fetched == log_bytes, (fetched, log_bytes)
                    if round_:
                        results[side, "full scan"].append(seconds)
                        results[side, "raw ranged reads"].append(raw)
            # How often a read is made twice (the data's last byte equal to the marker).
            remote.ArrowStore.read_into = counting_read_into
            remote._filesystems.clear()
            for _ in range(args.repeats):
                raw_reads(uri, base)
                full_scan(base)
    finally:
        remote.ArrowStore.read_into = NEW_READ_INTO
        shutil.rmtree(work, ignore_errors=True)

    mb = log_bytes / 1e6
    print(f"log: {args.records:,} records, {mb:.0f} MB of segments, {args.partitions} "
          f"partitions, {args.segment_mb} MiB segments; {args.repeats} runs per side, "
          f"alternating")
    print(f"\n{'':22s}{'before':>12s}{'after':>12s}{'after/before':>14s}   (medians)")
    for measure in ("full scan", "raw ranged reads"):
        before = statistics.median(results["before", measure])
        after = statistics.median(results["after", measure])
        print(f"  {measure:20s}{before:10.3f} s{after:10.3f} s{after / before:13.3f}x   "
              f"({mb / after:.0f} MB/s after)")
    for measure in ("full scan", "raw ranged reads"):
        for side in SIDES:
            runs = ", ".join(f"{s:.3f}" for s in results[side, measure])
            print(f"  {measure}, {side}: {runs}")
    print(f"\nreads made twice (last byte equal to the marker): {rereads['read again']} of "
          f"{rereads['reads']} ({rereads['read again'] / max(1, rereads['reads']):.2%}; "
          f"one in 256 expected)")


if __name__ == "__main__":
    main()
