"""The format core against directories Apache Kafka itself wrote (SEGMENTLOG_FIXTURES).

Every expected value comes from the manifest beside each partition directory, which
records what Kafka's own reader code returned for it (see the fixtures' README.md), or
is derived from the manifest's records here, never from the code under test.
"""
import bisect
import os

import pyarrow as pa
import pytest

from support.fixtures import fixtures_root
from support.manifest import (
    TIMESTAMP_TYPE_IDS, arrow_rows, b64, expected_row, expected_rows, iter_batches,
    iter_records, load_manifest, partition_names,
)
from segmentlog_datasource.format import (
    CorruptLogError, PartitionLog, ScanOptions, SegmentRange, TransactionFilter,
    discover_partitions, scan_segment,
)
from segmentlog_datasource.format.layout import MAX_OFFSET
from segmentlog_datasource.format.legacy import legacy_first_offset

EXPECTED_PARTITIONS = 14
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

_ROOT = fixtures_root()
# Discovered at collection time; without the fixtures one placeholder id is collected and
# the `kafka_logdir` fixture skips it with its reason.
PARTITIONS = (partition_names(_ROOT) if _ROOT and os.path.isdir(_ROOT) else None) or [
    "fixtures-unavailable"
]


@pytest.fixture(params=PARTITIONS)
def case(request, kafka_logdir):
    """(PartitionLog opened through discovery, manifest) of one partition directory."""
    name = request.param
    logs = {os.path.basename(log.directory): log for log in _discovered(kafka_logdir)}
    return logs[name], load_manifest(kafka_logdir, name)


_DISCOVERED = {}


def _discovered(logdir):
    if logdir not in _DISCOVERED:
        _DISCOVERED[logdir] = discover_partitions([logdir])
    return _DISCOVERED[logdir]


def _read(log, isolation="read_uncommitted", include_headers=True, use_fast_path=True,
          verify=True):
    transactions = None
    if isolation == "read_committed":
        transactions = TransactionFilter(log.aborted_transactions(), log.last_stable_offset())
    options = ScanOptions(verify_checksums=verify, include_headers=include_headers,
                          use_fast_path=use_fast_path)
    batches = []
    for segment in log.segments:
        batches.extend(scan_segment(SegmentRange(
                log.topic, log.partition, segment.log_path, segment.size, 0, segment.size, 0,
                MAX_OFFSET, log.is_last(segment), transactions=transactions),
            options))
    return batches


def _is_legacy(batch):
    return batch["magic"] < 2


# ------------------------------------------------------------------------ discovery

def test_logdir_holds_all_fourteen_cases(kafka_logdir):
    names = partition_names(kafka_logdir)
    assert len(names) == EXPECTED_PARTITIONS, names
    assert PARTITIONS == names
    logs = discover_partitions([kafka_logdir])
    assert len(logs) == EXPECTED_PARTITIONS
    found = {(log.topic, log.partition): os.path.basename(log.directory) for log in logs}
    for name in names:
        manifest = load_manifest(kafka_logdir, name)
        assert found[(manifest["topic"], manifest["partition"])] == manifest["partition_dir"]


def test_segments_and_snapshots(case):
    log, manifest = case
    assert (log.topic, log.partition) == (manifest["topic"], manifest["partition"])
    expected = [(s["base_offset"], s["log_size"]) for s in manifest["segments"]]
    assert [(s.base_offset, s.size) for s in log.segments] == expected
    assert len(log.segments) == manifest["summary"]["segments"]
    for segment, expected_segment in zip(log.segments, manifest["segments"]):
        assert os.path.basename(segment.log_path) == expected_segment["log_file"]
    # Producer snapshots are not segment data, even when named after no .log file.
    snapshots = manifest["producer_snapshot_files"]
    assert snapshots, "every case has producer snapshots"
    for name in snapshots:
        assert os.path.exists(os.path.join(log.directory, name))
    # A snapshot named after no segment (clean shutdown: the log end offset) adds nothing.
    bases = {s.base_offset for s in log.segments}
    if manifest["partition_dir"] != "live-0":  # a running broker: no shutdown snapshot
        assert any(int(name.split(".")[0]) not in bases for name in snapshots)
    # A partition directory given directly is the same partition.
    direct = discover_partitions([log.directory])
    assert [(p.topic, p.partition, [s.base_offset for s in p.segments]) for p in direct] == [
        (log.topic, log.partition, [s.base_offset for s in log.segments])
    ]


def test_batch_headers(case):
    log, manifest = case
    for segment, expected_segment in zip(log.segments, manifest["segments"]):
        headers = list(segment.iter_headers(0, allow_torn_tail=log.is_last(segment)))
        batches = expected_segment["batches"]
        assert len(headers) == len(batches)
        for header, batch in zip(headers, batches):
            where = (segment.base_offset, batch["position"])
            assert header.position == batch["position"], where
            assert header.size == batch["size_in_bytes"], where
            assert header.magic == batch["magic"], where
            assert header.last_offset == batch["last_offset"], where
            assert header.compression == CODECS[batch["compression"]], where
            assert header.timestamp_type == TIMESTAMP_TYPE_IDS[batch["timestamp_type"]], where
            assert header.max_timestamp == batch["max_timestamp"], where
            assert header.crc == batch["crc"], where
            assert header.is_transactional == batch["is_transactional"], where
            assert header.is_control == batch["is_control"], where
            assert header.record_count == batch["record_count"], where
            if _is_legacy(batch):
                # A legacy entry's offset field is its last offset; a compressed wrapper's
                # first offset is only known from the inner messages.
                with open(segment.log_path, "rb") as handle:
                    data = handle.read()
                assert legacy_first_offset(memoryview(data), header.position, header,
                                           segment.log_path) == batch["base_offset"], where
            else:
                assert header.base_offset == batch["base_offset"], where
                assert header.base_timestamp == batch["base_timestamp"], where
                assert header.delete_horizon_ms == batch["delete_horizon_ms"], where
                assert header.partition_leader_epoch == batch["partition_leader_epoch"], where
                assert header.producer_id == batch["producer_id"], where
                assert header.producer_epoch == batch["producer_epoch"], where
                assert header.base_sequence == batch["base_sequence"], where
        valid = expected_segment["valid_bytes"]
        assert (headers[-1].end_position if headers else 0) == valid


# -------------------------------------------------------------------------- records

@pytest.mark.parametrize("use_fast_path", [False, True], ids=["python", "fast"])
def test_records_read_uncommitted(case, use_fast_path):
    log, manifest = case
    batches = _read(log, "read_uncommitted", use_fast_path=use_fast_path)
    got = arrow_rows(batches)
    expected = expected_rows(manifest, "read_uncommitted")
    assert len(got) == manifest["summary"]["records_visible_read_uncommitted"]
    assert got == expected
    for batch in batches:
        assert set(batch.column("topic").to_pylist()) == {manifest["topic"]}
        assert set(batch.column("partition").to_pylist()) == {manifest["partition"]}


def test_records_read_committed(case):
    log, manifest = case
    got = arrow_rows(_read(log, "read_committed"))
    assert len(got) == manifest["summary"]["records_visible_read_committed"]
    assert got == expected_rows(manifest, "read_committed")


def test_records_without_headers_and_without_checksums(case):
    log, manifest = case
    batches = _read(log, include_headers=False, verify=False, use_fast_path=False)
    for batch in batches:
        assert "headers" not in batch.schema.names
    expected = [dict(row) for row in expected_rows(manifest)]
    for row in expected:
        del row["headers"]
    assert arrow_rows(batches, include_headers=False) == expected


def test_arrow_schema_is_sparks_kafka_schema(kafka_logdir):
    log = PartitionLog.open(os.path.join(kafka_logdir, "plain-0"))
    batch = _read(log)[0]
    fields = [(f.name, f.type) for f in batch.schema]
    assert fields[:7] == [
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
        ("partition", pa.int32()), ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
    ]
    name, header_type = fields[7]
    assert name == "headers" and pa.types.is_list(header_type)
    element = header_type.value_type
    assert [(f.name, f.type) for f in element] == [("key", pa.string()), ("value", pa.binary())]
    # The first record of plain-0 at its exact instant (ms * 1000 us, UTC).
    first = load_manifest(kafka_logdir, "plain-0")["segments"][0]["batches"][0]["records"][0]
    assert batch.column("timestamp")[0].value == first["timestamp"] * 1000


def test_control_records_are_never_data(kafka_logdir):
    manifest = load_manifest(kafka_logdir, "txn-0")
    control = [r for _, b, r in iter_records(manifest) if b["is_control"]]
    assert len(control) == manifest["summary"]["records"] - \
        manifest["summary"]["records_visible_read_uncommitted"]
    # Kafka's control key: version 0, type 0 (ABORT) or 1 (COMMIT).
    assert {b64(r["key"]) for r in control} == {b"\x00\x00\x00\x00", b"\x00\x00\x00\x01"}
    log = PartitionLog.open(os.path.join(kafka_logdir, "txn-0"))
    for isolation in ("read_uncommitted", "read_committed"):
        offsets = {row["offset"] for row in arrow_rows(_read(log, isolation))}
        assert not offsets & {r["offset"] for r in control}


def test_headers_null_empty_and_non_ascii(kafka_logdir):
    """The plain cases hold the header shapes the docs promise; they read back exactly."""
    manifest = load_manifest(kafka_logdir, "plain-0")
    headers = [h for _, _, r in iter_records(manifest) for h in r["headers"]]
    assert any(value is None for _, value in headers)
    assert any(value == "" for _, value in headers)
    assert any(not key.isascii() for key, _ in headers)
    records = [r for _, _, r in iter_records(manifest)]
    assert any(r["key"] is None for r in records)
    assert any(r["value"] is None for r in records)
    assert any(r["value"] == "" for r in records)
    got = {row["offset"]: row for row in arrow_rows(_read(
        PartitionLog.open(os.path.join(kafka_logdir, "plain-0"))))}
    for record in records:
        row = got[record["offset"]]
        assert row == expected_row(record)
        if record["value"] == "":
            assert row["value"] == b""
        if record["value"] is None:
            assert row["value"] is None


def test_timestamps_as_kafka_reports_them(kafka_logdir):
    # legacy v0: no timestamps at all.
    v0 = arrow_rows(_read(PartitionLog.open(os.path.join(kafka_logdir, "legacy-v0-0"))))
    assert {(r["timestamp"], r["timestampType"]) for r in v0} == {(-1, -1)}
    # legacy v1 LogAppendTime: every inner message reports its wrapper's timestamp.
    manifest = load_manifest(kafka_logdir, "legacy-v1-0")
    got = {r["offset"]: r for r in arrow_rows(
        _read(PartitionLog.open(os.path.join(kafka_logdir, "legacy-v1-0"))))}
    seen_types = set()
    for _, batch, record in iter_records(manifest):
        seen_types.add(batch["timestamp_type"])
        if batch["timestamp_type"] == "LogAppendTime":
            assert got[record["offset"]]["timestamp"] == batch["max_timestamp"]
            assert got[record["offset"]]["timestampType"] == 1
    assert seen_types == {"CreateTime", "LogAppendTime"}
    # magic 2 LogAppendTime: the batch's maxTimestamp, not base + delta.
    manifest = load_manifest(kafka_logdir, "logappend-0")
    got = {r["offset"]: r for r in arrow_rows(
        _read(PartitionLog.open(os.path.join(kafka_logdir, "logappend-0"))))}
    differs = 0
    for _, batch, record in iter_records(manifest):
        assert got[record["offset"]]["timestamp"] == batch["max_timestamp"]
        assert got[record["offset"]]["timestampType"] == 1
        differs += batch["base_timestamp"] != batch["max_timestamp"]
    assert differs, "some producer CreateTimes differ from the append time"


# -------------------------------------------------------------------------- indexes

def test_offset_and_time_index_entries(case):
    log, manifest = case
    for segment, expected in zip(log.segments, manifest["segments"]):
        offset_index, time_index = segment.offset_index, segment.time_index
        assert [list(e) for e in offset_index.entries()] == expected["offset_index"]["entries"]
        assert [list(e) for e in time_index.entries()] == expected["time_index"]["entries"]
        assert os.path.getsize(segment.index_path) == expected["offset_index"]["file_size"]
        assert os.path.getsize(segment.time_index_path) == expected["time_index"]["file_size"]
        if expected["time_index"]["entries"] and not log.is_last(segment):
            assert time_index.max_timestamp == expected["time_index"]["segment_max_timestamp"]


def test_preallocated_indexes_of_the_active_segment(kafka_logdir):
    manifest = load_manifest(kafka_logdir, "live-0")
    log = PartitionLog.open(os.path.join(kafka_logdir, "live-0"))
    active, expected = log.segments[-1], manifest["segments"][-1]
    assert expected["offset_index"]["preallocated_untrimmed"]
    assert expected["time_index"]["preallocated_untrimmed"]
    assert len(active.offset_index) == manifest["active_segment_in_memory_offset_index_entries"]
    assert len(active.time_index) == manifest["active_segment_in_memory_time_index_entries"]
    # The real entries are what Kafka's own recovery rebuilds for the segment.
    recovered = manifest["log_segment_recover_of_active_segment"]
    assert [list(e) for e in active.offset_index.entries()] == recovered["offset_index_after"]
    assert [list(e) for e in active.time_index.entries()] == recovered["time_index_after"]
    # No bogus (base offset, 0) entry from the zero tail.
    assert (active.base_offset, 0) not in active.offset_index.entries()
    assert 0 not in active.time_index.timestamps


def test_transaction_indexes(case):
    log, manifest = case
    all_expected = []
    for segment, expected in zip(log.segments, manifest["segments"]):
        txn = expected["txn_index"]
        assert os.path.exists(segment.txn_index_path) == (txn is not None)
        got = [(a.version, a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset)
               for a in segment.aborted_transactions()]
        want = [(e["version"], e["producer_id"], e["first_offset"], e["last_offset"],
                 e["last_stable_offset"]) for e in (txn["entries"] if txn else [])]
        assert got == want
        all_expected += want
    assert [(a.version, a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset)
            for a in log.aborted_transactions()] == all_expected
    if manifest["partition_dir"] == "txn-0":
        assert len(all_expected) == 9


def test_summary_offsets(case):
    log, manifest = case
    summary = manifest["summary"]
    assert log.end_offset() == summary["log_end_offset"] == summary["last_offset"] + 1
    assert log.last_stable_offset() == summary["last_stable_offset"]
    assert log.start_offset == manifest["segments"][0]["base_offset"] == summary["first_offset"]
    if "broker_last_stable_offset" in manifest:
        assert log.last_stable_offset() == manifest["broker_last_stable_offset"]


# ------------------------------------------------------------------------ torn tail

def test_torn_tail_of_the_active_segment(kafka_logdir):
    manifest = load_manifest(kafka_logdir, "live-0")
    torn = manifest["segments"][-1]["torn_tail"]
    assert torn["position"] == 46375 and torn["declared_base_offset"] == 155
    log = PartitionLog.open(os.path.join(kafka_logdir, "live-0"))
    active = log.segments[-1]
    assert active.size == torn["position"] + torn["trailing_bytes"]
    rows = arrow_rows(scan_segment(SegmentRange(
            log.topic, log.partition, active.log_path, active.size, 0, active.size, 0, MAX_OFFSET,
            True),
        ScanOptions(True, True)))
    assert rows == expected_rows(manifest, segment=active.base_offset)
    assert rows[-1]["offset"] == 154
    assert log.end_offset() == 155
    # Started right at the torn batch: nothing, and no error.
    assert list(scan_segment(SegmentRange(
            log.topic, log.partition, active.log_path, active.size, torn["position"], active.size,
            0, MAX_OFFSET, True),
        ScanOptions())) == []
    # The same bytes are an error where a torn tail is not allowed (a non-last segment).
    with pytest.raises(CorruptLogError) as info:
        list(scan_segment(SegmentRange(
                log.topic, log.partition, active.log_path, active.size, 0, active.size, 0,
                MAX_OFFSET, False),
            ScanOptions()))
    assert info.value.position == torn["position"]
    assert info.value.path == active.log_path
    assert active.log_path in str(info.value) and str(torn["position"]) in str(info.value)


# -------------------------------------------------------------------- offset lookups

def _expected_lookup(entries, base_offset, target):
    """Kafka's OffsetIndex.lookup on the manifest's entries: last entry with offset <= target."""
    i = bisect.bisect_right([offset for offset, _ in entries], target) - 1
    return (base_offset, 0) if i < 0 else tuple(entries[i])


def test_offset_index_lookups(case):
    log, manifest = case
    for segment, expected in zip(log.segments, manifest["segments"]):
        batches = expected["batches"]
        entries = expected["offset_index"]["entries"]
        positions = [b["position"] for b in batches]
        # Kafka's read-back resolved each v2 batch's base and last offset and each legacy
        # entry's offset (its last offset); the manifest counts those lookups.
        targets = []
        for batch in batches:
            targets.append(batch["last_offset"])
            if not _is_legacy(batch):
                targets.append(batch["base_offset"])
        assert len(targets) == expected["offset_index"]["lookups_resolved"]
        records = {r["offset"]: r for b in batches for r in b["records"]}
        targets += list(records)
        for target in targets:
            found = segment.offset_index.lookup(target)
            assert found == _expected_lookup(entries, segment.base_offset, target), target
            position = found[1]
            assert position in positions or (position == 0 and not batches), (target, position)
            # Nothing at or above the target lies before the position ...
            before = [b for b in batches if b["position"] < position]
            assert all(b["last_offset"] < target for b in before), (target, position)
            # ... and the batch holding the target is at or after it.
            holder = [b for b in batches if b["base_offset"] <= target <= b["last_offset"]]
            assert holder and holder[0]["position"] >= position, target
        # A scan from the looked-up position finds each record (data records only).
        for offset, record in records.items():
            if _in_control_batch(batches, offset):
                continue
            position = segment.offset_index.lookup(offset)[1]
            rows = arrow_rows(scan_segment(SegmentRange(
                    log.topic, log.partition, segment.log_path, segment.size, position,
                    segment.size, offset, offset + 1, log.is_last(segment)),
                ScanOptions(include_headers=True)))
            assert rows == [expected_row(record)], offset


def _in_control_batch(batches, offset):
    return any(b["is_control"] and b["base_offset"] <= offset <= b["last_offset"]
               for b in batches)


def test_position_after_and_offset_below(case):
    log, manifest = case
    for segment, expected in zip(log.segments, manifest["segments"]):
        batches = expected["batches"]
        records = [r for b in batches for r in b["records"]]
        offsets = sorted({b["base_offset"] for b in batches} | {b["last_offset"] for b in batches}
                         | {r["offset"] for r in records})
        for target in offsets:
            position = segment.offset_index.position_after(target)
            if position is not None:
                assert position in [b["position"] for b in batches]
                assert all(b["base_offset"] > target
                           for b in batches if b["position"] >= position), target
        timestamps = sorted({r["timestamp"] for r in records})
        for bound in timestamps + [t + 1 for t in timestamps]:
            below = segment.time_index.offset_below(bound)
            if below is not None:
                older = [r for r in records if r["offset"] <= below]
                assert all(r["timestamp"] < bound for r in older), bound


# ---------------------------------------------------------------- offsets for times

def _kafka_offset_for_timestamp(manifest, target):
    """Kafka's offsetsForTimes, from the manifest's records (control records included).

    The first segment whose largest timestamp is >= target; in it the first record, in
    log order, whose timestamp (as Kafka reports it) is >= target; None if none.
    """
    for segment in manifest["segments"]:
        records = [r for b in segment["batches"] for r in b["records"]]
        if not records:
            continue
        largest = max(r["timestamp"] for r in records)
        assert largest == segment["time_index"]["segment_max_timestamp"]
        if largest < target:
            continue
        return next(r["offset"] for r in records if r["timestamp"] >= target)
    return None


def test_offset_for_timestamp(case):
    log, manifest = case
    timestamps = sorted({r["timestamp"] for _, _, r in iter_records(manifest)})
    targets = {0, timestamps[0] - 1, timestamps[-1], timestamps[-1] + 1, 1700000000000}
    step = max(1, len(timestamps) // 25)
    for ts in timestamps[::step]:
        targets.update((ts, ts + 1))
    targets = sorted(t for t in targets if t >= 0)  # negative targets are special in Kafka
    if manifest["partition_dir"] == "legacy-v0-0":
        assert timestamps == [-1]
    found_any = False
    for target in targets:
        expected = _kafka_offset_for_timestamp(manifest, target)
        assert log.offset_for_timestamp(target) == expected, target
        found_any |= expected is not None
    assert found_any == (manifest["partition_dir"] != "legacy-v0-0")


# ----------------------------------------------------------------- sub-range scans

def _scan_rows(log, segment, start, end_position, lo, hi, transactions=None):
    return arrow_rows(scan_segment(SegmentRange(
            log.topic, log.partition, segment.log_path, segment.size, start, end_position, lo, hi,
            log.is_last(segment), transactions=transactions),
        ScanOptions(include_headers=True)))


def test_sub_range_scans(case):
    log, manifest = case
    checked = 0
    for segment, expected in zip(log.segments, manifest["segments"]):
        batches = [b for b in expected["batches"]]
        starts = [0] + [position for _, position in expected["offset_index"]["entries"]]
        for start in starts:
            after = [b for b in batches if b["position"] >= start]
            if len(after) < 2:
                continue
            first, later = after[0], after[len(after) // 2]
            # Offsets in the middle of batches (or at their edges for one-record batches).
            lo = (first["base_offset"] + first["last_offset"] + 1) // 2
            hi = (later["base_offset"] + later["last_offset"] + 1) // 2 + 1
            rows = _scan_rows(log, segment, start, segment.size, lo, hi)
            assert rows == expected_rows(manifest, lo=lo, hi=hi, segment=segment.base_offset)
            # An end position at a batch boundary stops before the batch starting there.
            stop = after[-1]["position"]
            rows = _scan_rows(log, segment, start, stop, 0, MAX_OFFSET)
            within = {r["offset"] for b in after[:-1] for r in b["records"]}
            assert rows == [r for r in expected_rows(manifest, segment=segment.base_offset)
                            if r["offset"] in within]
            checked += 1
    assert checked


def test_sub_range_read_committed(kafka_logdir):
    """txn-0 in offset windows: aborted batches and the LSO cut apply inside the range."""
    manifest = load_manifest(kafka_logdir, "txn-0")
    log = PartitionLog.open(os.path.join(kafka_logdir, "txn-0"))
    transactions = TransactionFilter(log.aborted_transactions(), log.last_stable_offset())
    for segment in log.segments:
        for lo, hi in [(segment.base_offset + 3, segment.base_offset + 19),
                       (segment.base_offset, MAX_OFFSET), (190, 200)]:
            position = segment.offset_index.lookup(lo)[1]
            rows = _scan_rows(log, segment, position, segment.size, lo, hi, transactions)
            assert rows == expected_rows(manifest, "read_committed", lo, hi,
                                         segment.base_offset), (segment.base_offset, lo, hi)


def test_compacted_gaps_and_header_only_batch(kafka_logdir):
    """compacted-0: gaps inside and between batches, and a batch kept with no records."""
    manifest = load_manifest(kafka_logdir, "compacted-0")
    log = PartitionLog.open(os.path.join(kafka_logdir, "compacted-0"))
    empty = [(s, b) for s, b in iter_batches(manifest) if b["record_count"] == 0]
    assert [(b["base_offset"], b["last_offset"]) for _, b in empty] == [(158, 167)]
    segment = log.segments[[s.base_offset for s in log.segments].index(150)]
    header = next(h for h in segment.iter_headers() if h.base_offset == 158)
    assert (header.position, header.last_offset, header.record_count) == (1340, 167, 0)
    assert header.size == 61  # the batch header alone, offset and length included
    # Scans starting at, ending in or spanning the empty batch.
    for lo, hi in [(158, 168), (155, 170), (150, 159), (167, 200)]:
        assert _scan_rows(log, segment, header.position if lo >= 158 else 0, segment.size,
                          lo, hi) == expected_rows(manifest, lo=lo, hi=hi, segment=150)
    assert _scan_rows(log, segment, header.position, header.end_position, 0, MAX_OFFSET) == []
    # Segment 500 starts with a gap: its first batch is at offset 504.
    segment = log.segments[[s.base_offset for s in log.segments].index(500)]
    first = manifest["segments"][[s["base_offset"] for s in manifest["segments"]].index(500)][
        "batches"][0]
    assert (first["position"], first["base_offset"]) == (0, 504)
    rows = _scan_rows(log, segment, 0, segment.size, 500, first["last_offset"] + 1)
    assert rows == expected_rows(manifest, lo=500, hi=first["last_offset"] + 1, segment=500)
    assert rows and rows[0]["offset"] >= 504
    # Offsets inside gaps are not records; every kept offset is.
    kept = {row["offset"] for row in arrow_rows(_read(log))}
    assert kept == {r["offset"] for _, _, r in iter_records(manifest)}
    assert len(kept) < manifest["summary"]["log_end_offset"] - manifest["summary"]["first_offset"]
