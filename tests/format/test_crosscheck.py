"""Cross-check against an independent encoder: kafka-python's record builders.

Batches are built with kafka-python (DefaultRecordBatchBuilder for magic 2,
LegacyRecordBatchBuilder for magic 0 and 1), placed in a segment file with the offsets a
broker assigns, read back with `scan_segment`, and compared with what was fed in. Each
segment is also read with kafka-python's own reader, which shows that the file is laid
out the way Kafka lays it out before segmentlog's reading of it is judged.

Broker-side conventions applied to the producer-built bytes (fields outside the
checksum, or re-checksummed with kafka-python's pure-Python CRCs):
  * magic 2: baseOffset and partitionLeaderEpoch are set by the broker; LogAppendTime
    sets attribute bit 3 and maxTimestamp to the append time.
  * magic 0 compressed wrapper: the inner messages carry absolute offsets; the wrapper's
    offset is the last inner offset.
  * magic 1 compressed wrapper: the inner messages carry relative offsets 0..n-1; the
    wrapper's offset is the absolute last offset, and its timestamp the max inner
    timestamp (CreateTime) or the append time with attribute bit 3 (LogAppendTime,
    stamped in place: the inner messages keep their CreateTime bytes).
  * magic 0 lz4 wrappers carry Kafka's old, wrong frame-header checksum (over the magic
    number too); kafka-python writes it with the xxhash package, which is not installed
    for the tests: XXH32 is supplied below in pure Python (and checked against lz4's
    correct frame-header checksums). python-snappy, which kafka-python uses for raw
    snappy blocks, is likewise supplied through cramjam when absent.
"""
import random
import struct
import warnings
import zlib

import pytest

with warnings.catch_warnings():
    # kafka-python's protocol modules use deprecated importlib.resources calls on import.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record._crc32c import crc as pure_crc32c
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

from support.kafka_codecs import xxh32
from support.manifest import arrow_rows
from segmentlog_datasource.format import PartitionLog, ScanOptions, SegmentRange, scan_segment
from segmentlog_datasource.format.entries import read_entry_header
from segmentlog_datasource.format.layout import MAX_OFFSET
from segmentlog_datasource.format.legacy import legacy_first_offset

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
V2_CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
LEGACY_CODECS = ["none", "gzip", "snappy", "lz4"]
T0 = 1_700_000_000_000


pytestmark = pytest.mark.usefixtures("kafka_python_codecs")


def test_pure_python_xxh32_matches_lz4_frame_header_checksums():
    import lz4.frame

    assert xxh32(b"") == 0x02CC5D05  # the specification's empty-input value
    for payload in (b"", b"x", b"abc" * 1000):
        for store_size in (False, True):
            frame = lz4.frame.compress(payload, store_size=store_size)
            descriptor_end = 6 + (8 if frame[4] & 0x08 else 0)
            assert frame[descriptor_end] == (xxh32(frame[4:descriptor_end]) >> 8) & 0xFF


# --------------------------------------------------------------------- test data

def _text(rng, words):
    vocabulary = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
                  "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]
    return " ".join(rng.choice(vocabulary) for _ in range(words)).encode()


def make_records(rng, count, headers=True, large=False):
    """(key, value, headers, timestamp) tuples: nulls, empties, non-ASCII, skewed times."""
    records = []
    for i in range(count):
        key = None if i % 7 == 3 else ("k-%d-ü" % rng.randrange(1000)).encode()
        if i % 11 == 5:
            value = None
        elif i % 13 == 6:
            value = b""
        else:
            value = _text(rng, rng.randrange(1, 40))
        if large and i == count // 2:
            value = _text(rng, 60_000)  # ~330 KB: several snappy / lz4 blocks
        record_headers = []
        if headers and i % 3:
            record_headers = [("trace-id", b"%016x" % rng.getrandbits(64)), ("empty", b""),
                              ("null", None), ("hdr-ü-✓", _text(rng, 2))][: 1 + i % 4]
        timestamp = T0 + i * 10 + rng.randrange(-5000, 5000)  # non-monotonic
        records.append((key, value, record_headers, timestamp))
    return records


# ------------------------------------------------------------------ batch builders

def v2_batch(base_offset, records, codec, deltas=None, log_append_time=None,
             producer=(-1, -1, -1), transactional=False, leader_epoch=3):
    """A magic-2 batch (bytes) and the rows a Kafka reader reports for it."""
    producer_id, producer_epoch, base_sequence = producer
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=CODECS[codec], is_transactional=transactional,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        batch_size=64 << 20,
    )
    deltas = list(range(len(records))) if deltas is None else deltas
    for delta, (key, value, headers, timestamp) in zip(deltas, records):
        assert builder.append(delta, timestamp=timestamp, key=key, value=value,
                              headers=headers) is not None
    data = bytearray(builder.build())
    assert data[22] & 0x07 == CODECS[codec], "kafka-python fell back to no compression"
    struct.pack_into(">q", data, 0, base_offset)
    struct.pack_into(">i", data, 12, leader_epoch)
    timestamp_type = 0
    if log_append_time is not None:
        (attributes,) = struct.unpack_from(">h", data, 21)
        struct.pack_into(">h", data, 21, attributes | 0x08)
        struct.pack_into(">q", data, 35, log_append_time)
        struct.pack_into(">I", data, 17, pure_crc32c(bytes(data[21:])))
        timestamp_type = 1
    rows = []
    for delta, (key, value, headers, timestamp) in zip(deltas, records):
        rows.append({
            "offset": base_offset + delta,
            "timestamp": timestamp if log_append_time is None else log_append_time,
            "timestampType": timestamp_type, "key": key, "value": value,
            "headers": list(headers),
        })
    return bytes(data), rows


def legacy_entries(magic, codec, base_offset, records, log_append_time=None):
    """Magic 0/1 entries (bytes) for `records` at base_offset.., and the expected rows."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=CODECS[codec],
                                       batch_size=64 << 20)
    relative = magic == 1 and codec != "none"
    for i, (key, value, _, timestamp) in enumerate(records):
        offset = i if relative else base_offset + i
        assert builder.append(offset, timestamp=timestamp, key=key, value=value) is not None
    data = bytearray(builder.build())
    last_offset = base_offset + len(records) - 1
    timestamp_type = -1 if magic == 0 else 0
    if codec != "none":
        assert data[17] & 0x07 == CODECS[codec]
        struct.pack_into(">q", data, 0, last_offset)
        if magic == 1:
            wrapper_ts = max(r[3] for r in records)
            if log_append_time is not None:
                data[17] |= 0x08
                wrapper_ts = log_append_time
                timestamp_type = 1
            struct.pack_into(">q", data, 18, wrapper_ts)
            struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])) & 0xFFFFFFFF)
    else:
        assert log_append_time is None
    rows = []
    for i, (key, value, _, timestamp) in enumerate(records):
        if magic == 0:
            timestamp = -1
        elif log_append_time is not None:
            timestamp = log_append_time
        rows.append({"offset": base_offset + i, "timestamp": timestamp,
                     "timestampType": timestamp_type, "key": key, "value": value,
                     "headers": []})
    return bytes(data), rows


def write_segment(tmp_path, chunks, base_offset, topic="cross-check.topic"):
    """Chunks back to back as a partition's only segment; returns its PartitionLog."""
    directory = tmp_path / f"{topic}-7"
    directory.mkdir()
    (directory / ("%020d.log" % base_offset)).write_bytes(b"".join(chunks))
    log = PartitionLog.open(str(directory))
    assert (log.topic, log.partition) == (topic, 7)
    return log


def _kafka_python_rows(data):
    """The rows kafka-python's own reader sees in segment bytes."""
    reader = MemoryRecords(bytes(data))
    while reader.has_next():
        batch = reader.next_batch()
        if getattr(batch, "is_control_batch", False):
            continue
        for record in batch:
            headers = list(getattr(record, "headers", None) or [])
            # kafka-python says None where Kafka says -1 (magic 0: NoTimestampType).
            timestamp = -1 if record.timestamp is None else record.timestamp
            timestamp_type = -1 if record.timestamp_type is None else record.timestamp_type
            yield {
                "offset": record.offset, "timestamp": timestamp,
                "timestampType": timestamp_type, "key": record.key,
                "value": record.value, "headers": [(k, v) for k, v in headers],
            }


def read_back(log, use_fast_path, min_offset=0, end_offset=MAX_OFFSET, include_headers=True):
    segment = log.segments[0]
    return arrow_rows(scan_segment(SegmentRange(
            log.topic, log.partition, segment.log_path, segment.size, 0, segment.size, min_offset,
            end_offset, True),
        ScanOptions(include_headers=include_headers, use_fast_path=use_fast_path,
                    max_batch_rows=997)), include_headers=include_headers)


def check(log, expected, use_fast_path):
    with open(log.segments[0].log_path, "rb") as handle:
        data = handle.read()
    assert list(_kafka_python_rows(data)) == expected, "the test built a wrong segment"
    assert read_back(log, use_fast_path) == expected
    assert log.end_offset() == expected[-1]["offset"] + 1
    # A window in the middle: inside batches / wrappers.
    offsets = [row["offset"] for row in expected]
    lo, hi = offsets[len(offsets) // 3], offsets[2 * len(offsets) // 3]
    assert read_back(log, use_fast_path, lo, hi) == [r for r in expected if lo <= r["offset"] < hi]


FAST = pytest.mark.parametrize("use_fast_path", [False, True], ids=["python", "fast"])


# -------------------------------------------------------------------------- magic 2

@FAST
@pytest.mark.parametrize("codec", V2_CODECS)
def test_magic2_every_codec(tmp_path, codec, use_fast_path):
    rng = random.Random(codec)
    chunks, expected = [], []
    offset = 1000
    plans = [
        dict(records=make_records(rng, 25)),
        dict(records=make_records(rng, 9, large=True)),
        dict(records=make_records(rng, 3000, headers=False)),  # many records
        # compacted-like gaps inside the batch (lastOffsetDelta is the last delta)
        dict(records=make_records(rng, 6), deltas=[0, 2, 3, 7, 8, 15]),
        dict(records=make_records(rng, 12), log_append_time=T0 + 99_999),
        dict(records=make_records(rng, 10), producer=(4244, 2, 17), transactional=True),
        dict(records=make_records(rng, 10), producer=(4245, 0, 0)),
        dict(records=[(None, None, [], T0)] * 40),  # all-null records
    ]
    for plan in plans:
        plan.setdefault("deltas", None)
        data, rows = v2_batch(offset, plan["records"], codec, plan["deltas"],
                              plan.get("log_append_time"), plan.get("producer", (-1, -1, -1)),
                              plan.get("transactional", False))
        chunks.append(data)
        expected += rows
        offset = rows[-1]["offset"] + 1 + (5 if plan["deltas"] else 0)
    log = write_segment(tmp_path, chunks, 1000)
    check(log, expected, use_fast_path)
    headers = [read_entry_header(c, 0, 0) for c in chunks]
    assert [h.compression for h in headers] == [CODECS[codec]] * len(chunks)
    assert headers[4].timestamp_type == 1
    assert headers[5].is_transactional and headers[5].producer_id == 4244
    assert headers[5].producer_epoch == 2 and headers[5].base_sequence == 17


@pytest.mark.parametrize("codec", V2_CODECS)
def test_magic2_without_headers_column(tmp_path, codec):
    rng = random.Random(7)
    data, rows = v2_batch(0, make_records(rng, 50), codec)
    log = write_segment(tmp_path, [data], 0)
    for row in rows:
        del row["headers"]
    assert read_back(log, False, include_headers=False) == rows


def test_magic2_extreme_offsets_and_timestamps(tmp_path):
    """Offsets past 2^33 and timestamps before the epoch and far in the future."""
    records = [(b"k", b"v", [], -1), (b"k", b"v", [], 0), (b"k", None, [], 253402300799999),
               (None, b"v", [], 1)]
    data, rows = v2_batch(2**40 + 3, records, "none")
    data2, rows2 = v2_batch(2**40 + 3_000_000_000, records, "none")
    log = write_segment(tmp_path, [data, data2], 2**40 + 3)
    assert read_back(log, False) == rows + rows2


# --------------------------------------------------------------------- magic 0 / 1

@FAST
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_legacy_every_codec(tmp_path, magic, codec, use_fast_path):
    rng = random.Random(f"{magic}{codec}")
    chunks, expected = [], []
    offset = 500
    groups = [make_records(rng, 20, headers=False),
              make_records(rng, 5, headers=False, large=True),
              make_records(rng, 1500, headers=False),
              [(None, None, [], T0 + 5)] * 3]
    if codec == "none":
        groups = groups[:1] + [make_records(rng, 2, headers=False, large=True)] + groups[3:]
    for records in groups:
        data, rows = legacy_entries(magic, codec, offset, records)
        chunks.append(data)
        expected += rows
        offset += len(records)
    log = write_segment(tmp_path, chunks, 500)
    check(log, expected, use_fast_path)
    if codec != "none":
        # The wrapper's offset field is its last offset; the first is found inside.
        with open(log.segments[0].log_path, "rb") as handle:
            view = memoryview(handle.read())
        header = read_entry_header(view, 0, 0)
        assert header.last_offset == 519
        assert legacy_first_offset(view, 0, header) == 500
        if (magic, codec) == (0, "lz4"):
            # Kafka's old frame-header checksum: a strict LZ4 frame decoder refuses it.
            import lz4.frame

            (value_length,) = struct.unpack_from(">i", view, 22)
            with pytest.raises(RuntimeError):
                lz4.frame.decompress(bytes(view[26 : 26 + value_length]))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_magic1_log_append_time_wrapper(tmp_path, codec):
    """Stamped in place: inner messages keep CreateTime bytes, readers report the wrapper's."""
    rng = random.Random(codec)
    create, rows_create = legacy_entries(1, codec, 0, make_records(rng, 30, headers=False))
    appended, rows_append = legacy_entries(1, codec, 30, make_records(rng, 30, headers=False),
                                           log_append_time=T0 + 424242)
    log = write_segment(tmp_path, [create, appended], 0)
    check(log, rows_create + rows_append, False)
    assert {r["timestamp"] for r in rows_append} == {T0 + 424242}
    assert {r["timestampType"] for r in rows_append} == {1}
    assert len({r["timestamp"] for r in rows_create}) > 1


def test_mixed_magics_in_one_segment(tmp_path):
    """A topic upgraded over time: v0, then v1, then v2 entries in one segment."""
    rng = random.Random(3)
    v0, rows0 = legacy_entries(0, "lz4", 0, make_records(rng, 10, headers=False))
    v1, rows1 = legacy_entries(1, "snappy", 10, make_records(rng, 10, headers=False))
    v1b, rows1b = legacy_entries(1, "none", 20, make_records(rng, 3, headers=False))
    v2, rows2 = v2_batch(23, make_records(rng, 10), "zstd")
    log = write_segment(tmp_path, [v0, v1, v1b, v2], 0)
    check(log, rows0 + rows1 + rows1b + rows2, False)
    check(log, rows0 + rows1 + rows1b + rows2, True)
