"""The compiled fast path is the pure-Python decoder's twin.

Every scan here runs with use_fast_path=True and False, and the Arrow batches must be
equal; malformed records must raise CorruptLogError on both paths, naming the batch.
Both scans walk plain batches with the accumulator's decode_run(); two more readings
feed each accumulator one batch at a time from the scan loop (runs that stop at once)
and must agree too. test_decode_run.py compares the two decode_run()s step by step.
Inputs: every Kafka-written fixture partition, and segments of batches built with
kafka-python's DefaultRecordBatchBuilder (or by hand, for malformed records).
"""
import os
import random
import struct
import warnings

import pyarrow as pa
import pytest

with warnings.catch_warnings():
    # kafka-python's protocol modules use deprecated importlib.resources calls on import.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder

from segmentlog_datasource.format import (
    CorruptLogError, ScanOptions, SegmentRange, TransactionFilter, discover_partitions,
    scan_segment,
)
import segmentlog_datasource.format.scan as scan_module
from segmentlog_datasource.format.arrow import arrow_schema
from segmentlog_datasource.format.crc import crc32c
from segmentlog_datasource.format.entries import read_entry_header
from segmentlog_datasource.format.fastpath import RUN_ENTRY_FOR_PYTHON, make_accumulator
from segmentlog_datasource.format.fastpath.pure import RecordAccumulator
from segmentlog_datasource.format.layout import MAX_OFFSET
from segmentlog_datasource.format.varint import write_varint

from support.compiled import NOT_BUILT as FAST_IMPORT_ERROR
from support.compiled import compiled as fast
from support.compiled import requires_compiled as requires_fast

T0 = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
LOG_APPEND_TIME_BIT = 0x08


def test_fast_path_is_built_when_required():
    if os.environ.get("SEGMENTLOG_REQUIRE_FAST") != "1":
        pytest.skip("SEGMENTLOG_REQUIRE_FAST=1 is not set: without a C compiler the pure-Python "
                    "decoder is a supported install, so only CI (which sets it) demands the build")
    assert fast is not None, f"the compiled fast path does not import: {FAST_IMPORT_ERROR}"


@requires_fast
def test_scan_uses_the_fast_accumulator():
    assert isinstance(make_accumulator(False, use_fast_path=True), fast.CompiledAccumulator)
    assert isinstance(make_accumulator(False, use_fast_path=False), RecordAccumulator)


# ------------------------------------------------------------------------ helpers

class _OneBatchAtATime:
    """Runs that stop at once: the scan loop reads every entry itself, one batch at a time."""

    def decode_run(self, view, position, *_):
        return position, RUN_ENTRY_FOR_PYTHON


class _CompiledOneBatchAtATime(_OneBatchAtATime, fast.CompiledAccumulator if fast else object):
    pass


class _PureOneBatchAtATime(_OneBatchAtATime, RecordAccumulator):
    pass


@pytest.fixture
def scan_batch_at_a_time(monkeypatch):
    """scan(segment_range, options) -> batches: scan_segment without decode_run() walks,
    with the accumulator options.use_fast_path chooses."""
    def scan(segment_range, options):
        accumulator_class = (_CompiledOneBatchAtATime if options.use_fast_path
                             else _PureOneBatchAtATime)
        made = []

        def make_accumulator(include_headers, use_fast_path):
            made.append(accumulator_class(include_headers))
            return made[-1]

        with monkeypatch.context() as patch:  # the other readings keep the real accumulators
            patch.setattr(scan_module, "make_accumulator", make_accumulator)
            batches = list(scan_segment(segment_range, options))
        assert len(made) == 1, "scan_segment no longer gets its accumulator from make_accumulator"
        return batches

    return scan


READINGS = (  # name, reads with decode_run() walks, use_fast_path
    ("fast", True, True), ("pure", True, False),
    ("batchwise", False, True), ("pure batchwise", False, False),
)


@pytest.fixture
def scan_every_way(scan_batch_at_a_time):
    """scan(path, ...) -> {reading name: batches} for one whole segment file.

    "fast" and "pure" are scan_segment with the compiled and the pure accumulator, both
    walking plain batches with decode_run(); "batchwise" and "pure batchwise" feed the
    same accumulators one batch at a time from the scan loop.
    """
    def scan(path, include_headers=False, min_offset=0, end_offset=MAX_OFFSET,
             max_batch_rows=10_000, transactions=None, allow_torn_tail=True,
             verify_checksums=True):
        size = os.path.getsize(path)
        results = {}
        for name, with_runs, use_fast_path in READINGS:
            options = ScanOptions(verify_checksums=verify_checksums,
                                  include_headers=include_headers,
                                  max_batch_rows=max_batch_rows, use_fast_path=use_fast_path)
            segment_range = SegmentRange("topic", 3, str(path), size, 0, size, min_offset,
                                         end_offset, allow_torn_tail, transactions)
            results[name] = list((scan_segment if with_runs else scan_batch_at_a_time)(
                segment_range, options))
        return results

    return scan


@pytest.fixture
def scan_both(scan_every_way):
    """scan(path, ...) -> (fast batches, pure batches); the batch-at-a-time readings must
    equal the pure one."""
    def scan(path, *args, **kwargs):
        results = scan_every_way(path, *args, **kwargs)
        for name in ("batchwise", "pure batchwise"):
            assert_twins(results[name], results["pure"], f"{name} reading of {path}")
        return results["fast"], results["pure"]

    return scan


def assert_twins(fast_batches, pure_batches, what=""):
    assert len(fast_batches) == len(pure_batches), what
    for fast_batch, pure_batch in zip(fast_batches, pure_batches):
        assert fast_batch.schema == pure_batch.schema, what
        assert fast_batch.equals(pure_batch), (
            f"{what}\nfast: {fast_batch.to_pylist()[:3]}\npure: {pure_batch.to_pylist()[:3]}"
        )


def rows_of(batches):
    return [row for batch in batches for row in batch.to_pylist()]


def kafka_batch(base_offset, records, codec="none", log_append_time=None):
    """Bytes of one magic-2 batch of (timestamp, key, value, headers) records."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=CODECS[codec], is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1,
    )
    for delta, (timestamp, key, value, headers) in enumerate(records):
        builder.append(delta, timestamp=timestamp, key=key, value=value, headers=headers)
    batch = bytearray(builder.build())
    struct.pack_into(">q", batch, 0, base_offset)  # the broker assigns offsets
    if log_append_time is not None:
        # What a broker with LogAppendTime does to a producer's batch, in place.
        (attributes,) = struct.unpack_from(">h", batch, 21)
        struct.pack_into(">h", batch, 21, attributes | LOG_APPEND_TIME_BIT)
        struct.pack_into(">q", batch, 35, log_append_time)
        struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def raw_batch(base_offset, count, records_section, base_timestamp=T0, last_offset_delta=None):
    """A magic-2 batch around hand-made record bytes, with a valid CRC."""
    last_delta = count - 1 if last_offset_delta is None else last_offset_delta
    body = struct.pack(">hiqqqhii", 0, max(last_delta, 0), base_timestamp, base_timestamp,
                       -1, -1, -1, count) + records_section
    crc = crc32c(body)
    return struct.pack(">qiiBI", base_offset, 9 + len(body), 0, 2, crc) + body


def record_bytes(offset_delta, key, value, headers=(), timestamp_delta=0, attributes=0):
    """One record, encoded by this test (not by the code under test)."""
    body = bytearray([attributes])
    write_varint(timestamp_delta, body)
    write_varint(offset_delta, body)
    for field in (key, value):
        if field is None:
            write_varint(-1, body)
        else:
            write_varint(len(field), body)
            body += field
    write_varint(len(headers), body)
    for header_key, header_value in headers:
        encoded = header_key.encode("utf-8") if isinstance(header_key, str) else header_key
        write_varint(len(encoded), body)
        body += encoded
        if header_value is None:
            write_varint(-1, body)
        else:
            write_varint(len(header_value), body)
            body += header_value
    out = bytearray()
    write_varint(len(body), out)
    return bytes(out + body)


def write_segment(tmp_path, batches, name="00000000000000000000.log"):
    path = tmp_path / name
    path.write_bytes(b"".join(batches))
    return path


def varied_records(count, start_timestamp=T0, seed=0):
    """Records covering the value shapes a log holds."""
    rng = random.Random(seed)
    records = []
    for i in range(count):
        kind = i % 7
        key = None if kind == 0 else ("ключ-%d-ü" % i).encode("utf-8") if kind == 1 else \
            bytes([0xff, 0xfe, i % 256]) if kind == 2 else b"key-%d" % i
        value = None if kind == 3 else b"" if kind == 4 else bytes(rng.getrandbits(8) for _ in
                                                                 range(rng.randrange(1, 300)))
        headers = []
        if i % 3 == 0:
            headers = [("trace-id", b"%d" % i), ("empty", b""), ("null", None),
                       ("ключ-ü-✓", "värde".encode("utf-8"))]
        elif i % 3 == 1:
            headers = [("", None)]
        # Timestamps jump back and forth: deltas from the first record go negative.
        timestamp = start_timestamp + rng.randrange(-120_000, 120_000)
        records.append((timestamp, key, value, headers))
    return records


# ----------------------------------------------------- Kafka-written fixtures

@requires_fast
@pytest.mark.parametrize("include_headers", [False, True])
def test_every_fixture_partition_scans_the_same(kafka_logdir, include_headers, scan_both):
    logs = discover_partitions([kafka_logdir])
    assert len(logs) >= 14
    total_rows = 0
    for log in logs:
        for segment in log.segments:
            what = f"{log.directory} {segment.log_path}"
            fast_batches, pure_batches = scan_both(
                segment.log_path, include_headers, max_batch_rows=50,
                allow_torn_tail=log.is_last(segment))
            assert_twins(fast_batches, pure_batches, what)
            total_rows += sum(batch.num_rows for batch in pure_batches)
    assert total_rows > 4000


@requires_fast
def test_fixture_offset_ranges_and_read_committed(kafka_logdir, scan_both):
    for log in discover_partitions([kafka_logdir]):
        transactions = TransactionFilter(log.aborted_transactions(), log.last_stable_offset())
        for segment in log.segments:
            headers = list(segment.iter_headers(allow_torn_tail=log.is_last(segment)))
            if not headers:
                continue
            first, last = headers[0].base_offset, headers[-1].last_offset
            # Bounds that cut through batches, including compressed ones.
            low, high = first + (last - first) // 3, first + 2 * (last - first) // 3 + 1
            for min_offset, end_offset, txn in [(low, high, None), (0, MAX_OFFSET, transactions),
                                                (low, MAX_OFFSET, transactions)]:
                fast_batches, pure_batches = scan_both(
                    segment.log_path, True, min_offset, end_offset, max_batch_rows=17,
                    transactions=txn, allow_torn_tail=log.is_last(segment))
                assert_twins(fast_batches, pure_batches,
                             f"{segment.log_path} [{min_offset}, {end_offset}) txn={bool(txn)}")


# ------------------------------------------------- batches built by kafka-python

@requires_fast
@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd", "snappy"])
@pytest.mark.parametrize("include_headers", [False, True])
def test_generated_batches_scan_the_same(tmp_path, codec, include_headers, scan_both):
    batches, offset = [], 1000
    for size in (1, 7, 60, 200, 3):
        batches.append(kafka_batch(offset, varied_records(size, seed=offset), codec))
        offset += size
    path = write_segment(tmp_path, batches)
    fast_batches, pure_batches = scan_both(path, include_headers, max_batch_rows=45)
    assert_twins(fast_batches, pure_batches)
    assert sum(b.num_rows for b in pure_batches) == offset - 1000
    rows = rows_of(pure_batches)
    assert any(row["key"] is None for row in rows) and any(row["value"] is None for row in rows)
    assert any(row["value"] == b"" for row in rows)
    if include_headers:
        assert any(("null", None) in [(h["key"], h["value"]) for h in row["headers"]]
                   for row in rows)


@requires_fast
@pytest.mark.parametrize("min_offset,end_offset", [
    (0, MAX_OFFSET), (105, MAX_OFFSET), (0, 117), (103, 104), (111, 137), (104, 104),
    (140, MAX_OFFSET), (-(2**63), 2**63),
])
def test_offset_filter_inside_batches(tmp_path, min_offset, end_offset, scan_both):
    path = write_segment(tmp_path, [
        kafka_batch(100, varied_records(10, seed=1)),
        kafka_batch(110, varied_records(20, seed=2), "lz4"),
        kafka_batch(130, varied_records(10, seed=3)),
    ])
    fast_batches, pure_batches = scan_both(path, True, min_offset, end_offset)
    assert_twins(fast_batches, pure_batches)
    expected = [o for o in range(100, 140) if min_offset <= o < end_offset]
    assert [row["offset"] for row in rows_of(fast_batches)] == expected


@requires_fast
def test_log_append_time_and_negative_deltas(tmp_path, scan_both):
    records = [(T0 + 5_000 - 1_000 * i, b"k%d" % i, b"v", []) for i in range(10)]
    path = write_segment(tmp_path, [
        kafka_batch(0, records),
        kafka_batch(10, records, log_append_time=T0 + 99_999),
        kafka_batch(20, records, "gzip", log_append_time=T0 + 12_345),
    ])
    fast_batches, pure_batches = scan_both(path)
    assert_twins(fast_batches, pure_batches)
    rows = rows_of(fast_batches)
    assert [row["timestampType"] for row in rows] == [0] * 10 + [1] * 20
    millis = [int(row["timestamp"].timestamp() * 1000) for row in rows]
    assert millis[:10] == [T0 + 5_000 - 1_000 * i for i in range(10)]
    assert millis[10:20] == [T0 + 99_999] * 10 and millis[20:] == [T0 + 12_345] * 10


@requires_fast
def test_timestamps_at_the_ends_of_the_int64_range(tmp_path, scan_both):
    # The compiled decoder turns milliseconds into microseconds in place; past about
    # 292,000 years either way the product wraps, as the pure twin's int64 product does.
    extremes = [-(1 << 63), -(1 << 53) - 7, -1, 0, 1, (1 << 53) + 3, (1 << 63) - 1]
    batches = [kafka_batch(i, [(ts, b"k", b"v", [])]) for i, ts in enumerate(extremes)]
    batches.append(kafka_batch(len(extremes), [(T0, b"k", b"v", [])],
                               log_append_time=(1 << 62) + 11))
    fast_batches, pure_batches = scan_both(write_segment(tmp_path, batches))
    assert_twins(fast_batches, pure_batches)
    micros = [v for b in fast_batches
              for v in b.column("timestamp").cast(pa.int64()).to_pylist()]
    wrapped = [((ms * 1000 + (1 << 63)) % (1 << 64)) - (1 << 63)
               for ms in extremes + [(1 << 62) + 11]]
    assert micros == wrapped


@requires_fast
def test_large_values_and_many_headers(tmp_path, scan_both):
    records = [
        (T0, b"big", os.urandom(3 << 20), [("h%d" % i, os.urandom(i)) for i in range(200)]),
        (T0 + 1, None, b"x" * 70_000, []),
        (T0 + 2, b"k" * 20_000, None, [("ü" * 5_000, None)]),
    ]
    path = write_segment(tmp_path, [kafka_batch(0, records), kafka_batch(3, records, "zstd")])
    fast_batches, pure_batches = scan_both(path, True)
    assert_twins(fast_batches, pure_batches)
    assert rows_of(fast_batches)[0]["value"] == records[0][2]


@requires_fast
def test_unusual_but_valid_record_encodings(tmp_path, scan_both):
    # Any negative length reads as null, a negative header count as no headers, and
    # varints may carry redundant continuation bytes: the pure decoder accepts all three.
    padded_one = b"\x82\x80\x80\x00"  # zig-zag 1 in four bytes
    # attributes, timestamp delta 0, offset delta 1 (padded), key length -3,
    # value length -2, header count -1
    body = b"\x00" + b"\x00" + padded_one + b"\x05" + b"\x03" + b"\x01"
    records = record_bytes(0, b"a", b"b") + bytes([len(body) << 1]) + body
    path = write_segment(tmp_path, [raw_batch(0, 2, records)])
    fast_batches, pure_batches = scan_both(path, True)
    assert_twins(fast_batches, pure_batches)
    rows = rows_of(fast_batches)
    assert [row["offset"] for row in rows] == [0, 1]
    assert rows[1]["key"] is None and rows[1]["value"] is None and rows[1]["headers"] == []


# --------------------------------------------------------------- malformed records

GOOD = record_bytes(0, b"key", b"value", [("h", b"v")])
TRUNCATED_VARINT = record_bytes(0, b"k", b"v") + b"\x80"  # second record's length, cut off
BAD_RECORDS = {
    "truncated varint": (2, TRUNCATED_VARINT),
    "length past batch": (1, b"\x7e" + GOOD[1:]),  # declares 63 bytes, holds fewer
    "trailing bytes": (1, GOOD + b"\x00\x00"),
    "fewer records than count": (3, GOOD + GOOD),
    "negative record length": (1, b"\x01" + GOOD[1:]),
    "fields end before the length": (1, bytes([GOOD[0] + 2]) + GOOD[1:] + b"\x00"),
    "fields end after the length": (1, bytes([GOOD[0] - 2]) + GOOD[1:]),
    "key past record": (1, record_bytes(0, b"k" * 10, b"v")[:-4]),
    "header key not UTF-8": (1, record_bytes(0, b"k", b"v", [(b"\xff\xfe", b"v")])),
    "header key is a surrogate": (1, record_bytes(0, b"k", b"v", [(b"\xed\xa0\x80", None)])),
    "header key overlong": (1, record_bytes(0, b"k", b"v", [(b"\xc0\xaf", None)])),
    "header key negative length": (1, record_bytes(0, b"k", b"v", [("ab", None)])
                                   .replace(b"\x04ab", b"\x03ab")),
    "varint longer than 10 bytes": (1, b"\x1e\x00" + b"\xff" * 11 + b"\x00" * 3),
    "zero-length record": (1, b"\x00"),
}


@requires_fast
@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
@pytest.mark.parametrize("include_headers", [False, True])
def test_malformed_records_raise_on_both_paths(tmp_path, case, include_headers,
                                               scan_batch_at_a_time):
    count, records = BAD_RECORDS[case]
    good = kafka_batch(500, varied_records(5))
    bad = raw_batch(505, count, records)
    path = write_segment(tmp_path, [good, bad])
    for name, with_runs, use_fast_path in READINGS:
        scan = scan_segment if with_runs else scan_batch_at_a_time
        options = ScanOptions(include_headers=include_headers, use_fast_path=use_fast_path)
        with pytest.raises(CorruptLogError) as raised:
            list(scan(SegmentRange("topic", 3, str(path), os.path.getsize(path), 0,
                                   os.path.getsize(path), 0, MAX_OFFSET, True), options))
        assert raised.value.position == len(good), (case, name)
        assert "505" in raised.value.reason, (case, name, raised.value.reason)


@requires_fast
def test_malformed_batch_leaves_the_accumulator_as_it_was():
    accumulator = fast.CompiledAccumulator(True)
    good = kafka_batch(0, varied_records(30))
    header = read_entry_header(good, 0, 0)
    accumulator.add_v2_batch(memoryview(good)[61:], header.record_count, header, 0, MAX_OFFSET)
    payload = accumulator.payload_bytes
    bad = raw_batch(30, 3, GOOD + GOOD + TRUNCATED_VARINT)
    bad_header = read_entry_header(bad, 0, 0)
    with pytest.raises(CorruptLogError):
        accumulator.add_v2_batch(bad[61:], 3, bad_header, 0, MAX_OFFSET, "x.log")
    assert len(accumulator) == 30 and accumulator.payload_bytes == payload
    pure = RecordAccumulator(True)
    pure.add_v2_batch(good[61:], header.record_count, header, 0, MAX_OFFSET)
    assert accumulator.take("t", 0).equals(pure.take("t", 0))


@requires_fast
def test_mutated_batches_agree(tmp_path):
    """Random damage to a records section: both paths reject it or both read it alike."""
    rng = random.Random(20240611)
    source = kafka_batch(0, varied_records(12, seed=5))
    header = read_entry_header(source, 0, 0)
    section = source[61:]
    outcomes = {"rejected": 0, "accepted": 0}
    for trial in range(1500):
        data = bytearray(section)
        for _ in range(rng.randrange(1, 4)):
            what = rng.random()
            position = rng.randrange(len(data))
            if what < 0.6:
                data[position] = rng.randrange(256)
            elif what < 0.8:
                del data[position:position + rng.randrange(1, 8)]
            else:
                data[position:position] = bytes(rng.randrange(256) for _ in range(3))
        count = header.record_count + (rng.random() < 0.1) * rng.choice([-1, 1])
        results = []
        for accumulator in (fast.CompiledAccumulator(True), RecordAccumulator(True)):
            try:
                accumulator.add_v2_batch(bytes(data), count, header, 3, 10)
                results.append(accumulator.take("t", 0))
            except CorruptLogError as exc:
                assert "offset 0" in exc.reason
                results.append("rejected")
        if results[1] == "rejected":
            assert results[0] == "rejected", f"trial {trial}: fast path accepted {bytes(data)!r}"
            outcomes["rejected"] += 1
        else:
            assert results[0] != "rejected", f"trial {trial}: fast path rejected {bytes(data)!r}"
            assert results[0].equals(results[1]), f"trial {trial}: {bytes(data)!r}"
            outcomes["accepted"] += 1
    assert outcomes["rejected"] > 100 and outcomes["accepted"] > 10, outcomes


# ------------------------------------------------------- the accumulator API itself

@requires_fast
@pytest.mark.parametrize("include_headers", [False, True])
def test_add_and_take_match_the_pure_accumulator(include_headers):
    rows = [
        (5, T0, 0, b"k", b"v", [("a", b"1"), ("ü", None)]),
        (6, -1, -1, None, None, []),
        (7, T0 + 1, 1, b"", b"", [("", b"")]),
        (8, T0 - 10, 0, bytearray(b"ba"), memoryview(b"mv"), []),
    ]
    accumulators = [fast.CompiledAccumulator(include_headers), RecordAccumulator(include_headers)]
    for accumulator in accumulators:
        assert accumulator.include_headers is include_headers
        for row in rows:
            accumulator.add(*row)
        assert len(accumulator) == 4
    assert accumulators[0].payload_bytes == accumulators[1].payload_bytes == 6
    first = [accumulator.take("töpic", 7) for accumulator in accumulators]
    assert first[0].equals(first[1])
    assert first[0].schema == arrow_schema(include_headers)
    assert len(accumulators[0]) == 0 and accumulators[0].payload_bytes == 0
    # Empty takes, then a second round on the same accumulators.
    empty = [accumulator.take("t", 0) for accumulator in accumulators]
    assert empty[0].num_rows == 0 and empty[0].equals(empty[1])
    for accumulator in accumulators:
        accumulator.add(*rows[0])
    second = [accumulator.take("t", 0) for accumulator in accumulators]
    assert second[0].equals(second[1])


@requires_fast
def test_buffers_outlive_the_accumulator_and_the_input():
    batch_bytes = kafka_batch(0, varied_records(50, seed=9))
    header = read_entry_header(batch_bytes, 0, 0)
    section = bytearray(batch_bytes[61:])
    accumulator = fast.CompiledAccumulator(True)
    accumulator.add_v2_batch(section, header.record_count, header, 0, MAX_OFFSET)
    taken = accumulator.take("t", 0)
    del accumulator
    section[:] = b"\x00" * len(section)  # the batch holds copies, not views of the input
    pure = RecordAccumulator(True)
    pure.add_v2_batch(batch_bytes[61:], header.record_count, header, 0, MAX_OFFSET)
    assert taken.equals(pure.take("t", 0))
    assert pa.Table.from_batches([taken]).num_rows == 50


# ------------------------------------------------------------------- decode_run()

@requires_fast
@pytest.mark.parametrize("value_size", [10, 9_000])  # batches below and above 4 KiB
def test_checksum_damage_is_reported_by_every_reading(tmp_path, value_size, scan_every_way,
                                                      scan_batch_at_a_time):
    records = [(T0 + i, b"k", bytes([i]) * value_size, []) for i in range(3)]
    batches = [kafka_batch(0, records), kafka_batch(3, records), kafka_batch(6, records)]
    damaged = bytearray(batches[1])
    damaged[-2] ^= 0x40  # inside the last value: still well-formed records
    path = write_segment(tmp_path, [batches[0], bytes(damaged), batches[2]])
    results = scan_every_way(path, verify_checksums=False)
    for name in ("fast", "batchwise", "pure batchwise"):
        assert_twins(results[name], results["pure"], name)
    for name, with_runs, use_fast_path in READINGS:
        scan = scan_segment if with_runs else scan_batch_at_a_time
        with pytest.raises(CorruptLogError, match="checksum mismatch") as raised:
            list(scan(SegmentRange("t", 0, str(path), os.path.getsize(path), 0,
                                   os.path.getsize(path), 0, MAX_OFFSET, True),
                      ScanOptions(use_fast_path=use_fast_path)))
        assert raised.value.position == len(batches[0]), name


@requires_fast
@pytest.mark.parametrize("max_batch_rows", [1, 4, 5, 1000])
@pytest.mark.parametrize("min_offset,end_offset",
                         [(0, MAX_OFFSET), (3, 13), (4, 6), (10, 11), (7, 7), (12, 16)])
def test_runs_flush_and_stop_like_the_scan_loop(tmp_path, max_batch_rows, min_offset, end_offset,
                                                scan_both):
    # Plain batches, a control batch, an empty batch, a compressed batch, a torn tail.
    control = bytearray(kafka_batch(4, [(T0, b"\x00\x00\x00\x01", b"\x00" * 6, [])]))
    struct.pack_into(">h", control, 21, 0x30)  # transactional control batch (a COMMIT)
    struct.pack_into(">I", control, 17, crc32c(bytes(control[21:])))
    batches = [kafka_batch(0, varied_records(3, seed=1)),
               kafka_batch(3, varied_records(1, seed=2)),
               bytes(control),
               raw_batch(5, 0, b"", last_offset_delta=1),
               kafka_batch(7, varied_records(4, seed=3), "gzip"),
               kafka_batch(11, varied_records(5, seed=4))]
    torn = kafka_batch(16, varied_records(2, seed=5))[:40]
    path = write_segment(tmp_path, batches + [torn])
    fast_batches, pure_batches = scan_both(path, True, min_offset, end_offset,
                                           max_batch_rows=max_batch_rows)
    assert_twins(fast_batches, pure_batches)


@requires_fast
def test_checksum_helper_matches_the_crc_module():
    from segmentlog_datasource.format.fastpath._fastrecords import checksum_matches

    rng = random.Random(7)
    for size in list(range(70)) + [4095, 4096, 4097, 65_536]:
        data = bytes(rng.getrandbits(8) for _ in range(size + 7))
        for start in (0, 3, 7):
            view = memoryview(data)[start:start + size]
            expected = crc32c(view)
            assert checksum_matches(view, expected, crc32c)
            assert not checksum_matches(view, expected ^ 0x100, crc32c)


@requires_fast
def test_scan_loop_and_compiled_run_agree_on_run_states():
    from segmentlog_datasource.format import fastpath

    compiled = fast._fastrecords
    assert (fastpath.RUN_ENTRY_FOR_PYTHON, fastpath.RUN_FLUSH, fastpath.RUN_DONE,
            fastpath.RUN_END) == (compiled.RUN_ENTRY_FOR_PYTHON, compiled.RUN_FLUSH,
                                  compiled.RUN_DONE, compiled.RUN_END)


# ------------------------------------- recycled column blocks (spare blocks, size hints)

def _scan_whole(path, include_headers, max_batch_rows, use_fast_path, allow_torn_tail=True):
    size = os.path.getsize(path)
    options = ScanOptions(include_headers=include_headers, max_batch_rows=max_batch_rows,
                          use_fast_path=use_fast_path)
    return scan_segment(SegmentRange("topic", 3, str(path), size, 0, size, 0, MAX_OFFSET,
                                     allow_torn_tail), options)


def _large_segment(tmp_path, seed, name="00000000000000000000.log"):
    """Batches whose key and value columns pass 64 KiB (the compiled decoder keeps such
    blocks for later batches once they are let go), sizes varying from batch to batch."""
    rng = random.Random(seed)
    batches, offset = [], 0
    for count in (300, 1200, 90, 1500, 7, 500):
        records = varied_records(count, seed=seed + offset)
        # Some values large, so that batches differ in size by several block sizes.
        records = [(t, k, (v or b"") * rng.choice((1, 1, 5, 20)) if v is not None else None, h)
                   for t, k, v, h in records]
        batches.append(kafka_batch(offset, records))
        offset += count
    return write_segment(tmp_path, batches, name)


@requires_fast
@pytest.mark.parametrize("include_headers", [False, True])
def test_recycled_blocks_leave_every_batch_as_decoded(tmp_path, kafka_logdir, include_headers):
    """Batches let go hand their blocks to later ones: the batches still held, of every
    fixture and generated segment, read as the pure twin's, whatever was dropped, kept or
    decoded after them (scans of other sizes, interleaved, each from a new accumulator)."""
    paths = [_large_segment(tmp_path, seed, f"{seed:020d}.log") for seed in (1, 2)]
    fixtures = [(segment.log_path, log.is_last(segment))
                for log in discover_partitions([kafka_logdir]) for segment in log.segments]
    cases = [(path, True, rows) for path in paths for rows in (97, 10_000)] + \
        [(path, torn, rows) for path, torn in fixtures for rows in (13, 10_000)]
    held = []
    for n, (path, allow_torn_tail, max_batch_rows) in enumerate(cases):
        expected = list(_scan_whole(path, include_headers, max_batch_rows, False,
                                    allow_torn_tail))
        fast_scan = _scan_whole(path, include_headers, max_batch_rows, True, allow_torn_tail)
        for i, (batch, pure_batch) in enumerate(zip(fast_scan, expected)):
            assert batch.equals(pure_batch), f"{path} batch {i}"
            if (n + i) % 3 == 0:
                held.append((batch, pure_batch, f"{path} batch {i}"))  # the rest are let go
        # Partly read scans let go of their accumulator with rows in it, too.
        partial = _scan_whole(path, include_headers, max(1, max_batch_rows // 7), True,
                              allow_torn_tail)
        next(partial, None)
        partial.close()
    assert len(held) > 20
    for batch, pure_batch, what in held:
        assert batch.equals(pure_batch), what
        batch.validate(full=True)


# In a fresh interpreter (spare blocks and size hints are per process): the page faults of
# a scan of 1,000-row batches, before and after a scan of 40,000-row batches, as in a
# Spark worker that serves a query of larger batches (or records) and then a smaller one.
_SMALLER_AFTER_LARGER = r"""
import json, resource, sys
import pyarrow as pa
from segmentlog_datasource.format import ScanOptions, SegmentRange, discover_partitions, scan_segment
from segmentlog_datasource.format.layout import MAX_OFFSET
from segmentlog_datasource.writer import write_log
logdir = sys.argv[1]
n = 100_000
write_log(logdir, pa.table({"value": pa.array([b"%08d" % i + b"v" * 192 for i in range(n)])}),
          topic="t", num_partitions=1)
segment = discover_partitions([logdir])[0].segments[0]
def faults(rows):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    size = segment.size
    scanned = SegmentRange("t", 0, segment.log_path, size, 0, size, 0, MAX_OFFSET, True)
    count = sum(b.num_rows for b in scan_segment(scanned, ScanOptions(max_batch_rows=rows)))
    assert count == n, count
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults(1_000)
print(json.dumps({"before": faults(1_000), "large": faults(40_000), "after": faults(1_000)}))
"""


@requires_fast
def test_smaller_batches_after_larger_ones_recycle_their_own_blocks(tmp_path):
    import json
    import subprocess
    import sys

    from support.paths import CHECKOUT

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(CHECKOUT), os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([sys.executable, "-c", _SMALLER_AFTER_LARGER, str(tmp_path / "log")],
                         env=env, capture_output=True, text=True, cwd=str(CHECKOUT.parent))
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    # A hundred 200 KB value blocks: about 5,000 fresh pages when each batch's block is new.
    assert figures["after"] < figures["before"] + 1_000, figures


@requires_fast
def test_accumulators_after_larger_ones_take_like_the_pure_twin():
    """A new accumulator starts its buffers at the sizes the last one reached: small and
    empty takes after large ones, and large after small, equal the pure twin's."""
    big = [(i, T0 + i, 0, b"k" * (i % 50), b"v" * 700 if i % 11 else None, [("h", b"x")])
           for i in range(3000)]
    small = [(7, T0, 1, None, b"", [])]
    for include_headers in (True, False, True):
        for rows in (big, small, [], big, small):
            fast_acc = fast.CompiledAccumulator(include_headers)
            pure_acc = RecordAccumulator(include_headers)
            for accumulator in (fast_acc, pure_acc):
                for row in rows:
                    accumulator.add(*row)
            taken, expected = fast_acc.take("t", 1), pure_acc.take("t", 1)
            del fast_acc  # its buffers go spare; the batch taken keeps its own
            assert taken.equals(expected)
            taken.validate(full=True)
