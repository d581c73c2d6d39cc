"""Tiered storage (#44): a full scan of a tiered partition beside the same segments laid
out plainly, and what planning a store of many remote segments costs.

(1) Full scan. One partition (--records, --segment-kb: about 150 segments) is generated
on local disk and laid out twice: (a) plainly, a log dir; (b) tiered, as Kafka keeps it:
every segment but the last in a LocalTieredStorage store
(`<topic>-0-<topicId>/<base>-<segmentId>.*`), the last in a broker's log dir whose
checkpoints put the log start at 0 (below the local segment) and whose
`__remote_log_metadata-0` holds COPY_SEGMENT_STARTED and COPY_SEGMENT_FINISHED for each
remote segment (leader epoch 0). Both are uploaded to moto's S3 server on loopback
(tests/support/s3server.py). The engine (plan_fragments + scan_fragments, every record)
reads each side, plain and tiered alternating, a warm-up then --scans rounds: from local
disk, then from S3. Before timing, both sides must give the same row count and the same
offsets (first, last, sum).

(2) Planning a store of --segments tiny remote segments (--per-segment records each) with
twice as many metadata records, beside the same segments in a log dir, on local disk;
then a store of --s3-segments in S3 (fewer by default: uploading and listing tens of
thousands of objects in moto takes minutes; --skip-s3-planning leaves it out), with the
requests of one more run of each counted through the proxy. The tiered planning is timed whole
(consumer_partitions: listing, metadata, join; plan_fragments: that and the fragments)
and in pieces: discover_copies of the broker dir and of the store (the listing and the
partitions' objects), the metadata records read and decoded, their replay, and the join
(read.tiered.tiered_log). Medians of --repeats, alternating. --profile prints where the
tiered consumer_partitions spends its time (local disk).

Usage (from outside the checkout):
  cd /tmp && python /path/to/checkout/benchmarks/bench_tiered.py
"""
import argparse
import collections
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import pyarrow as pa  # noqa: E402

from _gen import BASE_TIMESTAMP_MS, generate_log  # noqa: E402
from support.s3server import S3Server  # noqa: E402
from support.tiered_layout import write_local_tiered_partition  # noqa: E402

from segmentlog_datasource.format import checkpoints  # noqa: E402
from segmentlog_datasource.format.internal.remote_log_metadata import (  # noqa: E402
    encode_remote_log_metadata)
from segmentlog_datasource.format.log import RemotePartitionLog, discover_copies  # noqa: E402
from segmentlog_datasource.format.scan import ScanOptions  # noqa: E402
from segmentlog_datasource.read import tiered  # noqa: E402
from segmentlog_datasource.read.fragments import scan_fragments  # noqa: E402
from segmentlog_datasource.read.options import parse_read_options  # noqa: E402
from segmentlog_datasource.read.planning import Constraints, plan_fragments  # noqa: E402
from segmentlog_datasource.read.replicas import consumer_partitions  # noqa: E402
from segmentlog_datasource.storage.resolve import resolve  # noqa: E402
from segmentlog_datasource.writer import write_log  # noqa: E402

BUCKET = "bench-tiered"
TOPIC = "bench"
METADATA_TOPIC = tiered.REMOTE_LOG_METADATA_TOPIC


# ---------------------------------------------------------------- layouts


def segment_bases(partition_dir):
    return sorted(int(name[:-4]) for name in os.listdir(partition_dir) if name.endswith(".log"))


def lay_out_tiered(source_dir, work, end_offset, local_segments=1):
    """Lay the partition at `source_dir` (offsets [0, end_offset)) out as a tiered one,
    its last `local_segments` on the broker: (broker dir, store root, remote count)."""
    bases = segment_bases(source_dir)
    remote_bases, local_bases = bases[:-local_segments], bases[-local_segments:]
    # The store is written from a directory holding the remote segments alone (links).
    staged = os.path.join(work, "staged", f"{TOPIC}-0")
    os.makedirs(staged)
    for base in remote_bases:
        for suffix in (".log", ".index", ".timeindex"):
            name = f"{base:020d}{suffix}"
            os.link(os.path.join(source_dir, name), os.path.join(staged, name))
    ends = {base: following - 1 for base, following in zip(bases, bases[1:])}
    manifest = {"segments": [
        {"base_offset": base, "batches": [{"base_offset": base, "last_offset": ends[base],
                                           "max_timestamp": BASE_TIMESTAMP_MS + ends[base],
                                           "partition_leader_epoch": 0}]}
        for base in remote_bases]}
    store = os.path.join(work, "store")
    prefix, ids = write_local_tiered_partition(staged, store, TOPIC, 0, manifest=manifest)
    shutil.rmtree(os.path.join(work, "staged"))
    topic_id = prefix.rstrip("/").rsplit("-", 1)[1]

    broker = os.path.join(work, "broker")
    values = []
    partition = {"name": TOPIC, "id": topic_id, "partition": 0}
    for number, base in enumerate(remote_bases):
        key = {"topicIdPartition": partition, "id": ids[base]}
        event = BASE_TIMESTAMP_MS + 10_000_000 + 2 * number
        values.append(encode_remote_log_metadata(tiered.SEGMENT_RECORD, {
            "remoteLogSegmentId": key, "startOffset": base, "endOffset": ends[base],
            "brokerId": 0, "maxTimestampMs": BASE_TIMESTAMP_MS + ends[base],
            "eventTimestampMs": event,
            "segmentLeaderEpochs": [{"leaderEpoch": 0, "offset": base}],
            "segmentSizeInBytes": os.path.getsize(os.path.join(source_dir, f"{base:020d}.log")),
            "customMetadata": None, "remoteLogSegmentState": tiered.COPY_SEGMENT_STARTED}))
        values.append(encode_remote_log_metadata(tiered.UPDATE_RECORD, {
            "remoteLogSegmentId": key, "brokerId": 0, "eventTimestampMs": event + 1,
            "customMetadata": None, "remoteLogSegmentState": tiered.COPY_SEGMENT_FINISHED}))
    write_log(broker, pa.table({
        "key": pa.nulls(len(values), pa.binary()),
        "value": pa.array(values, pa.binary()),
        "partition": pa.array([0] * len(values), pa.int32())}),
        topic=METADATA_TOPIC, num_partitions=1)

    local = os.path.join(broker, f"{TOPIC}-0")
    os.makedirs(local)
    for base in local_bases:
        for suffix in (".log", ".index", ".timeindex"):
            name = f"{base:020d}{suffix}"
            shutil.copyfile(os.path.join(source_dir, name), os.path.join(local, name))
    write_file(os.path.join(local, checkpoints.LEADER_EPOCH_FILE),
               checkpoints.format_leader_epochs([(0, 0)]))
    write_file(os.path.join(local, checkpoints.PARTITION_METADATA_FILE),
               checkpoints.format_partition_metadata(topic_id))
    ends_at = {(TOPIC, 0): end_offset, (METADATA_TOPIC, 0): len(values)}
    for name, offsets in ((checkpoints.HIGH_WATERMARK_FILE, ends_at),
                          (checkpoints.RECOVERY_POINT_FILE, ends_at),
                          (checkpoints.LOG_START_FILE, {key: 0 for key in ends_at})):
        write_file(os.path.join(broker, name), checkpoints.format_offset_checkpoint(offsets))
    return broker, store, len(remote_bases)


def write_file(path, data):
    with open(path, "wb") as handle:
        handle.write(data)


# ---------------------------------------------------------------- reads


def options_of(paths, extra):
    return dict(extra, paths=json.dumps(paths), assign=json.dumps({TOPIC: [0]}))


def full_scan(options):
    """(plan s, scan s, rows)."""
    started = time.perf_counter()
    fragments = plan_fragments(parse_read_options(options), Constraints())
    planned = time.perf_counter()
    rows = sum(b.num_rows for b in scan_fragments(fragments, ScanOptions()))
    return planned - started, time.perf_counter() - planned, rows


def offsets_summary(options):
    """(rows, first offset, last offset, sum of offsets) of a full read."""
    fragments = plan_fragments(parse_read_options(options), Constraints())
    rows, first, last, total = 0, None, None, 0
    for batch in scan_fragments(fragments, ScanOptions()):
        offsets = batch.column("offset").to_pylist()
        if not offsets:
            continue
        rows += len(offsets)
        first = offsets[0] if first is None else first
        last = offsets[-1]
        total += sum(offsets)
    return rows, first, last, total


def planning_pieces(broker, store, config):
    """Seconds of each piece of planning the tiered partition, in order."""
    times = {}
    where, root = resolve(store, config)
    t = time.perf_counter()
    listed = len(where.tree(root).files_under(root))
    listing = time.perf_counter() - t
    t = time.perf_counter()
    broker_logs = discover_copies([broker], config)
    times["discover_copies: broker dir"] = time.perf_counter() - t
    t = time.perf_counter()
    remote, = [log for log in discover_copies([store], config)
               if isinstance(log, RemotePartitionLog)]
    times["discover_copies: store (listing, objects)"] = time.perf_counter() - t
    times[f"  of which the store's listing alone ({listed:,} objects)"] = listing
    metadata = [log for log in broker_logs if log.topic == METADATA_TOPIC]
    local, = [log for log in broker_logs if log.topic == TOPIC]
    t = time.perf_counter()
    records = list(tiered.metadata_records(metadata))
    times["metadata records read and decoded"] = time.perf_counter() - t
    t = time.perf_counter()
    states = tiered.replay(records)
    times["replay"] = time.perf_counter() - t
    state, = states.values()
    t = time.perf_counter()
    joined = tiered.tiered_log(local, remote, state)
    times["join (tiered_log)"] = time.perf_counter() - t
    return times, len(records), len(joined.segments)


def timed(call):
    t = time.perf_counter()
    call()
    return time.perf_counter() - t


def median(values):
    return statistics.median(values)


# ---------------------------------------------------------------- (1) full scan


def bench_full_scan(args, work, server):
    source = os.path.join(work, "plain")
    generate_log(source, TOPIC, 1, args.records, args.value_size,
                 segment_bytes=args.segment_kb << 10)
    broker, store, remote_count = lay_out_tiered(os.path.join(source, f"{TOPIC}-0"),
                                                 os.path.join(work, "tiered"), args.records)
    log_bytes = sum(os.path.getsize(os.path.join(source, f"{TOPIC}-0", n))
                    for n in os.listdir(os.path.join(source, f"{TOPIC}-0")) if n.endswith(".log"))
    t = time.perf_counter()
    server.upload_tree(source, BUCKET, "scan/plain")
    server.upload_tree(broker, BUCKET, "scan/broker")
    server.upload_tree(store, BUCKET, "scan/store")
    upload = time.perf_counter() - t
    creds = s3_options(server)
    sides = {
        "local": {"plain": options_of([source], {}),
                  "tiered": options_of([broker, store], {})},
        "s3": {"plain": options_of([f"s3://{BUCKET}/scan/plain"], creds),
               "tiered": options_of([f"s3://{BUCKET}/scan/broker", f"s3://{BUCKET}/scan/store"],
                                    creds)},
    }
    print(f"(1) full scan: {args.records:,} records of {args.value_size} bytes, "
          f"{log_bytes / 1e6:.0f} MB in {remote_count + 1} segments "
          f"({remote_count} remote + 1 local when tiered); upload to moto {upload:.1f} s")
    for where, pair in sides.items():
        plain, tiered_ = (offsets_summary(pair[name]) for name in ("plain", "tiered"))
        assert plain == tiered_ and plain[0] == args.records, (where, plain, tiered_)
        print(f"  {where}: both sides read {plain[0]:,} rows, offsets {plain[1]}..{plain[2]}, "
              f"sum {plain[3]:,}")
    results = {}
    for where, pair in sides.items():
        samples = collections.defaultdict(list)
        for round_ in range(args.scans + 1):  # the first is a warm-up
            for name, options in pair.items():
                plan_s, scan_s, rows = full_scan(options)
                assert rows == args.records
                if round_:
                    samples[name].append((plan_s, scan_s))
        results[where] = samples
    print(f"\n  median of {args.scans} alternating rounds   planning      scan     total"
          f"   records/s    MB/s")
    for where, samples in results.items():
        totals = {name: [p + s for p, s in samples[name]] for name in samples}
        for name in ("plain", "tiered"):
            plan_s = median(p for p, _ in samples[name])
            scan_s = median(s for _, s in samples[name])
            total = median(totals[name])
            print(f"  {where + ' ' + name:35s} {plan_s * 1e3:8.1f} ms {scan_s:7.3f} s "
                  f"{total:7.3f} s {args.records / total / 1e6:7.2f}M "
                  f"{log_bytes / 1e6 / total:7.0f}")
        ratios = [t / p for p, t in zip(totals["plain"], totals["tiered"])]
        planning = (median(p for p, _ in samples["tiered"])
                    / median(p for p, _ in samples["plain"]))
        print(f"  {where}: tiered / plain {median(totals['tiered']) / median(totals['plain']):.2f}x"
              f" (each round: {', '.join(f'{r:.2f}' for r in ratios)}); planning "
              f"{planning:.1f}x")
        print(f"    totals, s: plain {[round(t, 3) for t in totals['plain']]}, "
              f"tiered {[round(t, 3) for t in totals['tiered']]}")
    print("\n  requests of one more s3 full scan of each (through the counting proxy): count, MB")
    proxied = dict(creds, **{"store.endpoint": server.endpoint})
    for name, paths in (("plain", [f"s3://{BUCKET}/scan/plain"]),
                        ("tiered", [f"s3://{BUCKET}/scan/broker", f"s3://{BUCKET}/scan/store"])):
        server.reset_counts()
        fragments = plan_fragments(parse_read_options(options_of(paths, proxied)), Constraints())
        planning = server.requests()
        server.reset_counts()
        sum(b.num_rows for b in scan_fragments(fragments, ScanOptions()))
        for phase, requests in (("planning", planning), ("scan", server.requests())):
            by_kind = collections.defaultdict(lambda: [0, 0])
            for request in requests:
                by_kind[kind(request)][0] += 1
                by_kind[kind(request)][1] += request.response_bytes
            print(f"    {name} {phase}: {len(fragments)} fragments; " if phase == "scan"
                  else f"    {name} {phase}: ", end="")
            print(", ".join(f"{k} {n} ({size / 1e6:.1f})"
                            for k, (n, size) in sorted(by_kind.items())))


# ---------------------------------------------------------------- (2) planning


def planning_layout(work, segments, per_segment):
    """`segments` remote segments of `per_segment` records and one local, tiered and
    plain: (plain log dir, broker dir, store root)."""
    source = os.path.join(work, "plain")
    records = (segments + 1) * per_segment
    # segment_bytes 1: every batch rolls a segment of its own.
    generate_log(source, TOPIC, 1, records, 20, records_per_batch=per_segment, segment_bytes=1)
    broker, store, remote_count = lay_out_tiered(os.path.join(source, f"{TOPIC}-0"),
                                                 os.path.join(work, "tiered"), records)
    assert remote_count == segments
    return source, broker, store


def kind(request):
    if "list-type" in request.query:
        return "LIST"
    name = (request.key or "").rsplit("/", 1)[-1]
    ext = os.path.splitext(name)[1] or name
    return f"{request.method} {ext}"


def bench_planning(args, work, server):
    print(f"\n(2) planning: remote segments of {args.per_segment} records (+1 local), two "
          f"metadata records each; the same segments in a log dir")
    places = [("local", args.segments, None)]
    if not args.skip_s3_planning:
        places.append(("s3", args.s3_segments, s3_options(server)))
    for where, segments, creds in places:
        plain, broker, store = planning_layout(os.path.join(work, where), segments,
                                               args.per_segment)
        if creds is not None:
            t = time.perf_counter()
            server.upload_tree(plain, BUCKET, "plan/plain")
            server.upload_tree(broker, BUCKET, "plan/broker")
            server.upload_tree(store, BUCKET, "plan/store")
            print(f"  upload to moto ({segments:,} segments): {time.perf_counter() - t:.1f} s")
            plain, broker, store = (f"s3://{BUCKET}/plan/{name}"
                                    for name in ("plain", "broker", "store"))
        time_planning(args, where, segments, plain, broker, store, creds, server)


def time_planning(args, where, remote_count, plain, broker, store, creds, server):
    plain_options = options_of([plain], creds or {})
    tiered_options = options_of([broker, store], creds or {})
    config = parse_read_options(plain_options).store
    counts = (len(consumer_partitions([plain], config)[0].segments),
              len(next(log for log in consumer_partitions([broker, store], config)
                       if log.topic == TOPIC).segments))
    assert counts == (remote_count + 1,) * 2, counts
    calls = {
        "plain: consumer_partitions": lambda options: consumer_partitions(
            [plain], parse_read_options(options).store),
        "plain: plan_fragments": lambda options: plan_fragments(
            parse_read_options(options), Constraints()),
        "tiered: consumer_partitions": lambda options: consumer_partitions(
            [broker, store], parse_read_options(options).store),
        "tiered: plan_fragments": lambda options: plan_fragments(
            parse_read_options(options), Constraints()),
    }
    samples = collections.defaultdict(list)
    for round_ in range(args.repeats + 1):  # the first is a warm-up
        measured = {name: timed(lambda: call(tiered_options if name.startswith("tiered")
                                             else plain_options))
                    for name, call in calls.items()}
        pieces, metadata_count, joined = planning_pieces(broker, store, config)
        assert metadata_count == 2 * remote_count and joined == remote_count + 1
        measured.update({f"tiered, piece: {k}": v for k, v in pieces.items()})
        if round_:
            for name, seconds in measured.items():
                samples[name].append(seconds)
    print(f"\n  {where}, {remote_count:,} remote segments, {2 * remote_count:,} metadata "
          f"records: median of {args.repeats} rounds      total   per segment")
    for name, values in samples.items():
        seconds = median(values)
        print(f"    {name:55s} {seconds * 1e3:9.1f} ms {seconds / remote_count * 1e6:8.1f} us"
              f"   (runs {', '.join(f'{v * 1e3:.0f}' for v in values)} ms)")
    for name in ("consumer_partitions", "plan_fragments"):
        ratio = median(samples["tiered: " + name]) / median(samples["plain: " + name])
        print(f"    tiered / plain, {name}: {ratio:.2f}x")
    if creds is not None:
        # One more run of each through the counting proxy.
        proxied = dict(creds, **{"store.endpoint": server.endpoint})
        print("    requests (one run through the counting proxy):")
        for name, call in calls.items():
            server.reset_counts()
            paths = [broker, store] if name.startswith("tiered") else [plain]
            call(options_of(paths, proxied))
            by_kind = collections.Counter(kind(r) for r in server.requests())
            print(f"      {name:30s} " + ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())))
    if where == "local" and args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        consumer_partitions([broker, store], config)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
        print("\n  profile of the tiered consumer_partitions (local), by cumulative time:")
        print("\n".join("    " + line for line in out.getvalue().splitlines()[6:]
                        if line.strip()))


def s3_options(server):
    return {"store.region": server.region, "store.accessKeyId": server.access_key,
            "store.secretAccessKey": server.secret_key,
            "store.endpoint": server.direct_endpoint}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_500_000,
                        help="records of the full scan's partition")
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--segment-kb", type=int, default=1280,
                        help="segment size of the full scan's partition, KiB")
    parser.add_argument("--scans", type=int, default=5, help="full scans per side")
    parser.add_argument("--segments", type=int, default=10_000,
                        help="remote segments of the planning store")
    parser.add_argument("--s3-segments", type=int, default=2_000,
                        help="remote segments of the planning store in S3")
    parser.add_argument("--per-segment", type=int, default=3, help="records a segment")
    parser.add_argument("--repeats", type=int, default=5, help="plannings per side")
    parser.add_argument("--skip-scan", action="store_true")
    parser.add_argument("--skip-planning", action="store_true")
    parser.add_argument("--skip-s3-planning", action="store_true")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="bench-tiered-")
    try:
        with S3Server() as server:
            server.make_bucket(BUCKET)
            if not args.skip_scan:
                bench_full_scan(args, os.path.join(work, "scan"), server)
            if not args.skip_planning:
                bench_planning(args, os.path.join(work, "planning"), server)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
