"""Object stores (#12): the Spark-free engine reading a log from local disk and from S3,
side by side in one run.

A log is generated on local disk, uploaded to moto's S3 server on loopback (started here,
tests/support/s3server.py), and read both ways with plan_fragments + scan_fragments:

  full scan      every record of the log
  point lookup   planning and scan of one offset (median of --repeats)

Timed runs talk to moto directly (its own process); one more run of each through the
counting proxy counts the requests and bytes. Where the time goes: the listing, index
GETs and HEADs timed alone through the same pyarrow filesystem, the raw ranged GETs of
every segment (no decoding), and the local scan (decoding alone).

The anchor (#25), in the same alternating rounds as the s3 full scan: a plain download
of the objects that scan reads (every .log and .index), through the same pyarrow
filesystem and server: one listing, then each object opened (a HEAD) and read into one
buffer in ranged GETs of the scan's chunk size, one at a time ("same ranges"); and the
best plain download found with the same library ("best": --best-workers objects at once,
ranges of --best-chunk-mb).

Usage (from outside the checkout):
  cd /tmp && python /path/to/checkout/benchmarks/bench_store.py [--records 1200000]
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

BUCKET = "bench-logs"
TOPIC = "bench"


def run(options, constraints):
    """(planning s, scan s, rows)."""
    started = time.perf_counter()
    fragments = plan_fragments(parse_read_options(options), constraints)
    planned = time.perf_counter()
    rows = sum(b.num_rows for b in scan_fragments(fragments, ScanOptions()))
    return planned - started, time.perf_counter() - planned, rows


def kind(request):
    if "list-type" in request.query:
        return "LIST"
    if request.method == "HEAD":
        return "HEAD"
    ext = os.path.splitext(request.key or "")[1]
    if request.method == "GET" and ext == ".log":
        return "GET .log (range)" if request.range_header else "GET .log"
    return f"{request.method} {ext or '?'}"


def counted(server, options, constraints):
    """{phase: {request kind: [count, bytes]}} of one planning and scan."""
    remote._filesystems.clear()  # a new connection, as a new process would make
    server.reset_counts()
    fragments = plan_fragments(parse_read_options(options), constraints)
    planning = server.requests()
    server.reset_counts()
    sum(b.num_rows for b in scan_fragments(fragments, ScanOptions()))
    result = {}
    for phase, requests in (("planning", planning), ("scan", server.requests())):
        by_kind = result[phase] = collections.defaultdict(lambda: [0, 0])
        for r in requests:
            by_kind[kind(r)][0] += 1
            by_kind[kind(r)][1] += r.response_bytes
    return result


def pieces(uri, options, local):
    """Seconds of the planning requests and the raw segment fetches, each alone."""
    from pyarrow import fs as pafs

    store = remote.ArrowStore("s3", "s3://", "", parse_read_options(
        dict(options, path=uri)).store.settled("s3"))
    fs = store.fs
    root = store.to_fs(uri)
    t = time.perf_counter()
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    listing = time.perf_counter() - t
    files = [i for i in infos if i.type == pafs.FileType.File]
    indexes = [i.path for i in files if i.path.endswith(".index")]
    logs = [i for i in files if i.path.endswith(".log")]
    t = time.perf_counter()
    for path in indexes:
        with fs.open_input_stream(path) as stream:
            stream.read()
    index_gets = time.perf_counter() - t
    t = time.perf_counter()
    handles = [fs.open_input_file(i.path) for i in logs]  # one HEAD each
    heads = time.perf_counter() - t
    t = time.perf_counter()
    fetched = 0
    for handle, info in zip(handles, logs):
        position = 0
        while position < info.size:
            fetched += len(handle.read_at(min(remote.CHUNK_BYTES, info.size - position),
                                          position))
            position += remote.CHUNK_BYTES
        handle.close()
    raw_fetch = time.perf_counter() - t
    log_bytes = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(local)
                    for n in names if n.endswith(".log"))
    assert fetched == log_bytes
    return {"listing": listing, "index GETs": index_gets, "HEADs": heads,
            "raw ranged GETs": raw_fetch, "files": len(files), "indexes": len(indexes),
            "segments": len(logs), "log bytes": log_bytes}


def plain_download(fs, root, chunk_bytes, workers=1):
    """Bytes read: a listing under `root`, then every .log and .index object opened and
    read in ranged GETs of `chunk_bytes` into one buffer each (no decoding, no copy);
    `workers` objects at a time."""
    from concurrent.futures import ThreadPoolExecutor

    from pyarrow import fs as pafs

    infos = [i for i in fs.get_file_info(pafs.FileSelector(root, recursive=True))
             if i.type == pafs.FileType.File and i.path.endswith((".log", ".index"))]

    def fetch(info):
        buffer = bytearray(info.size)
        view = memoryview(buffer)
        with fs.open_input_file(info.path) as handle:
            position = 0
            while position < info.size:
                end = min(info.size, position + chunk_bytes)
                handle.seek(position)
                got = handle.readinto(view[position:end])
                assert got == end - position, (info.path, position, got)
                position = end
        return info.size

    if workers == 1:
        return sum(fetch(info) for info in infos)
    # Largest first, so that the pool does not end on one big object alone.
    with ThreadPoolExecutor(workers) as pool:
        return sum(pool.map(fetch, sorted(infos, key=lambda i: -i.size)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_200_000,
                        help="records in all (default 1.2M: about 290 MB)")
    parser.add_argument("--value-size", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--segment-mb", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7, help="point lookups per side")
    parser.add_argument("--scans", type=int, default=3, help="full scans per side")
    parser.add_argument("--best-workers", type=int, default=4,
                        help="objects downloaded at once by the best plain download")
    parser.add_argument("--best-chunk-mb", type=int, default=32,
                        help="ranges of the best plain download, MiB")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="bench-store-")
    try:
        local = os.path.join(work, "logdir")
        per_partition = args.records // args.partitions
        generate_log(local, TOPIC, args.partitions, per_partition, args.value_size,
                     segment_bytes=args.segment_mb << 20)
        with S3Server() as server:
            server.make_bucket(BUCKET)
            t = time.perf_counter()
            server.upload_tree(local, BUCKET, "log")
            upload = time.perf_counter() - t
            uri = f"s3://{BUCKET}/log"
            creds = {"store.region": server.region, "store.accessKeyId": server.access_key,
                     "store.secretAccessKey": server.secret_key}
            direct = dict(creds, **{"store.endpoint": server.direct_endpoint})
            proxied = dict(creds, **{"store.endpoint": server.endpoint})
            sides = {"local": {"path": local}, "s3": dict(direct, path=uri)}
            full, lookup = Constraints(), None

            # Full scans and the plain downloads, alternating (a warm-up of each first).
            store = remote.ArrowStore("s3", "s3://", "", parse_read_options(
                dict(direct, path=uri)).store.settled("s3"))
            downloads = {"same ranges": (remote.CHUNK_BYTES, 1),
                         "best": (args.best_chunk_mb << 20, args.best_workers)}
            scans = collections.defaultdict(list)
            anchor = collections.defaultdict(list)
            anchor_bytes = 0
            for round_ in range(args.scans + 1):
                for name, options in sides.items():
                    plan_s, scan_s, rows = run(options, full)
                    assert rows == per_partition * args.partitions, rows
                    if round_:
                        scans[name].append((plan_s, scan_s))
                for name, (chunk, workers) in downloads.items():
                    t = time.perf_counter()
                    anchor_bytes = plain_download(store.fs, store.to_fs(uri), chunk, workers)
                    if round_:
                        anchor[name].append(time.perf_counter() - t)
            # Point lookups: a different offset each time, in the middle of a segment.
            targets = [per_partition // (args.repeats + 1) * (i + 1) + 17
                       for i in range(args.repeats)]
            lookups = collections.defaultdict(list)
            for target in targets:
                for name, options in sides.items():
                    c = Constraints(partitions=frozenset({1}),
                                    offset_values=frozenset({target}))
                    plan_s, scan_s, rows = run(options, c)
                    assert rows == 1
                    lookups[name].append((plan_s, scan_s))
            lookup = Constraints(partitions=frozenset({1}),
                                 offset_values=frozenset({targets[len(targets) // 2]}))
            scan_requests = counted(server, dict(proxied, path=uri), full)
            lookup_requests = counted(server, dict(proxied, path=uri), lookup)
            parts = pieces(uri, direct, local)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    mb = parts["log bytes"] / 1e6
    print(f"log: {args.records:,} records, {mb:.0f} MB in {parts['segments']} segments, "
          f"{args.partitions} partitions, {parts['files']} files; upload {upload:.1f} s")

    def best(samples):
        return min(samples, key=lambda s: s[0] + s[1])

    def median(samples, i=None):
        return statistics.median(s[0] + s[1] if i is None else s[i] for s in samples)

    print("\nfull scan (best of %d)        planning      scan     total    MB/s" % args.scans)
    for name in sides:
        plan_s, scan_s = best(scans[name])
        print(f"  {name:26s} {plan_s * 1e3:8.1f} ms {scan_s:8.2f} s {plan_s + scan_s:8.2f} s"
              f" {mb / (plan_s + scan_s):7.0f}")
    ratio = sum(best(scans["s3"])) / sum(best(scans["local"]))
    print(f"  s3 / local: {ratio:.2f}x")
    s3_total = sum(best(scans["s3"]))
    print(f"\nthe anchor: plain downloads of the same .log and .index objects "
          f"({anchor_bytes / 1e6:.0f} MB), best of {args.scans}, alternating with the scans")
    for name, (chunk, workers) in downloads.items():
        took = min(anchor[name])
        label = f"{name} ({chunk >> 20} MiB GETs, {workers} at once)"
        print(f"  {label:40s} {took:6.2f} s {anchor_bytes / 1e6 / took:7.0f} MB/s   "
              f"segmentlog s3 full scan at {took / s3_total:.0%} of its throughput")
    print(f"  (segmentlog s3 full scan: {s3_total:.2f} s, {mb / s3_total:.0f} MB/s of "
          f"segments; each side's runs: s3 {[round(sum(x), 2) for x in scans['s3']]}, "
          f"same ranges {[round(x, 2) for x in anchor['same ranges']]}, "
          f"best {[round(x, 2) for x in anchor['best']]})")
    print("\npoint lookup (median of %d)   planning      scan     total" % args.repeats)
    for name in sides:
        print(f"  {name:26s} {median(lookups[name], 0) * 1e3:8.1f} ms "
              f"{median(lookups[name], 1) * 1e3:6.1f} ms {median(lookups[name]) * 1e3:7.1f} ms")
    print(f"  s3 / local: {median(lookups['s3']) / median(lookups['local']):.1f}x")

    print("\nrequests (one run through the counting proxy)      count        bytes")
    for title, table in (("full scan", scan_requests), ("point lookup", lookup_requests)):
        for phase, kinds in table.items():
            print(f"  {title}, {phase}")
            for name, (count, size) in sorted(kinds.items()):
                print(f"    {name:44s} {count:6d} {size:12,d}")

    print("\nwhere the s3 full scan's time goes (each piece alone)")
    for name in ("listing", "index GETs", "HEADs"):
        print(f"  {name:26s} {parts[name] * 1e3:8.1f} ms")
    walked = scan_requests["planning"].get("GET .log (range)", [0, 0])[1]
    print(f"  planning's .log GETs: {walked / 1e6:.1f} MB (headers walked on the driver); "
          f"planning {best(scans['s3'])[0] * 1e3:.0f} ms against listing + index GETs + "
          f"HEADs {(parts['listing'] + parts['index GETs'] + parts['HEADs']) * 1e3:.0f} ms")
    print(f"  {'raw ranged GETs':26s} {parts['raw ranged GETs']:8.2f} s "
          f"({mb / parts['raw ranged GETs']:.0f} MB/s, {remote.CHUNK_BYTES >> 20} MiB chunks)")
    print(f"  {'decode (= local scan)':26s} {best(scans['local'])[1]:8.2f} s")
    print(f"  s3 scan {best(scans['s3'])[1]:.2f} s against fetch + decode "
          f"{parts['raw ranged GETs'] + best(scans['local'])[1]:.2f} s "
          f"(the read-ahead overlaps them)")


if __name__ == "__main__":
    main()
