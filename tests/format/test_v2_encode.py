"""The record batch encoder (segmentlog_datasource/format/builder.py)."""
import os
import random

import numpy as np
import pyarrow as pa
import pytest

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import encode_varint, size_of_varint

from segmentlog_datasource.format import compression
from segmentlog_datasource.format.arrow import HEADER_TYPE
from segmentlog_datasource.format.layout import LOG_APPEND_TIME, V2_HEADER_SIZE
from segmentlog_datasource.format.encode import build_record_batch, encode_batches
from segmentlog_datasource.format.v2_encode import (
    RecordColumns, RecordTooLargeError, patch_batch_headers)
from segmentlog_datasource.format.varint import varint_concat, varint_sizes
from support.manifest import b64, load_manifest

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def sample_records(n, seed=7):
    rng = random.Random(seed)
    records = []
    for i in range(n):
        key = None if i % 5 == 0 else f"key-{rng.randrange(1000)}".encode()
        value = None if i % 11 == 0 else bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 50, 300, 2000])))
        ts = 1_700_000_000_000 + rng.randint(-3_600_000, 3_600_000)
        headers = [] if i % 3 else [("trace", b"abc"), ("h\u00fc", None), ("empty", b"")]
        records.append((key, value, ts, headers))
    return records


def decode(data):
    out = []
    memory = MemoryRecords(bytes(data))
    while memory.has_next():
        batch = memory.next_batch()
        assert batch.validate_crc()
        out.append((batch, [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
                            for r in batch]))
    return out


def test_varints_match_kafka_python():
    values = [0, -1, 1, 63, 64, -64, -65, 8191, 8192, 2**31 - 1, -(2**31), 2**62, -(2**63),
              2**63 - 1]
    assert varint_sizes(np.array(values)).tolist() == [size_of_varint(v) for v in values]
    firsts, seconds = values, values[::-1]
    encoded = varint_concat([np.array(firsts), b"\x00", np.array(seconds)])
    for a, b, got in zip(firsts, seconds, encoded.to_pylist()):
        expected = bytearray()
        encode_varint(a, expected.append)
        expected.append(0)
        encode_varint(b, expected.append)
        assert got == bytes(expected)


def test_batches_are_byte_identical_to_kafka_python_builder():
    records = sample_records(400)
    encoded = encode_batches(RecordColumns.from_records(records), batch_size=16384)
    assert len(encoded) > 3
    position = 0
    for b in range(len(encoded)):
        first, count = int(encoded.first_rows[b]), int(encoded.record_counts[b])
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=False, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        for j in range(first, first + count):
            key, value, ts, headers = records[j]
            builder.append(j - first, ts, key, value, headers)
        theirs = bytes(builder.build())
        ours = bytes(encoded.data[position : position + int(encoded.sizes[b])])
        # kafka-python writes partitionLeaderEpoch 0, a producer leaves -1 (bytes 12..15);
        # neither is covered by the CRC
        assert ours[12:16] == b"\xff\xff\xff\xff"
        assert ours[:12] + ours[16:] == theirs[:12] + theirs[16:]
        position += int(encoded.sizes[b])
    assert position == len(encoded.data)


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_decodes_with_kafka_python(codec):
    records = sample_records(300)
    encoded = encode_batches(RecordColumns.from_records(records),
                             codec=compression.CODEC_IDS[codec], batch_size=8000)
    batches = decode(encoded.data)
    assert len(batches) == len(encoded) > 1
    got = []
    for batch, rows in batches:
        assert batch.compression_type == compression.CODEC_IDS[codec]
        assert batch.producer_id == -1 and batch.producer_epoch == -1 and batch.base_sequence == -1
        assert not batch.is_transactional and not batch.is_control_batch
        assert batch.base_offset == 0
        assert batch.first_timestamp == rows[0][1]
        assert batch.max_timestamp == max(r[1] for r in rows)
        got.extend((key, value, ts, headers) for _, ts, key, value, headers in rows)
    assert got == records


def test_batch_size_is_respected_like_the_producer():
    records = [(None, b"x" * 100, 1_700_000_000_000, [])] * 1000
    encoded = encode_batches(RecordColumns.from_records(records), batch_size=4096)
    sizes = encoded.sizes.tolist()
    assert all(size <= 4096 for size in sizes)
    # each full batch could not have taken one more record
    record_size = (sizes[0] - V2_HEADER_SIZE) // int(encoded.record_counts[0])
    assert all(size + record_size + 1 > 4096 for size in sizes[:-1])
    assert int(encoded.record_counts.sum()) == 1000
    # a record larger than batch.size gets a batch of its own
    big = encode_batches(RecordColumns.from_records(
        [(None, b"a", 1, []), (None, b"b" * 10000, 1, []), (None, b"c", 1, [])]), batch_size=4096)
    assert big.record_counts.tolist() == [1, 1, 1]
    # batch.size 0 disables batching
    single = encode_batches(RecordColumns.from_records(records[:5]), batch_size=0)
    assert single.record_counts.tolist() == [1] * 5


def test_max_batch_bytes_is_enforced():
    records = [(None, b"v" * 5000, 1, [])]
    with pytest.raises(RecordTooLargeError, match="larger than the 4000-byte limit"):
        encode_batches(RecordColumns.from_records(records), max_batch_bytes=4000)


def test_log_append_time_batches():
    records = sample_records(50)
    encoded = encode_batches(RecordColumns.from_records(records), timestamp_type=LOG_APPEND_TIME,
                             log_append_time=1_800_000_000_000)
    for batch, rows in decode(encoded.data):
        assert batch.attributes & 0x08
        assert batch.max_timestamp == 1_800_000_000_000
        assert all(ts == 1_800_000_000_000 for _, ts, *_ in rows)
    with pytest.raises(ValueError):
        encode_batches(RecordColumns.from_records(records), timestamp_type=LOG_APPEND_TIME)


def test_patching_base_offset_and_epoch_keeps_batches_valid():
    records = sample_records(200)
    encoded = encode_batches(RecordColumns.from_records(records), batch_size=5000)
    data = bytearray(encoded.data)
    bases = np.array([10**12 + 7 * i for i in range(len(encoded))], dtype=np.int64)
    patch_batch_headers(data, encoded.positions, bases, 42)
    for (batch, rows), base in zip(decode(data), bases.tolist()):
        assert batch.base_offset == base
        assert batch.leader_epoch == 42
        assert rows[0][0] == base


def test_build_record_batch_and_arrow_inputs():
    data = build_record_batch([(b"k", b"v", 5, [("a", b"b")]), (None, None, 3, [])],
                              base_offset=100, partition_leader_epoch=3)
    [(batch, rows)] = decode(data)
    assert batch.base_offset == 100 and batch.leader_epoch == 3
    assert rows == [(100, 5, b"k", b"v", [("a", b"b")]), (101, 3, None, None, [])]
    # string columns are their UTF-8 bytes; sliced and null header lists work
    headers = pa.array([[{"key": "x", "value": b"1"}], None, [], [{"key": "y", "value": None}]],
                       HEADER_TYPE).slice(1)
    columns = RecordColumns(pa.array(["\u00e9", None, "c"]), pa.array(["v1", "", None]),
                            np.array([1, 2, 3]), headers)
    rows = [r for _, rs in decode(encode_batches(columns).data) for r in rs]
    assert rows == [(0, 1, "\u00e9".encode(), b"v1", []), (1, 2, None, b"", []),
                    (2, 3, b"c", None, [("y", None)])]
    with pytest.raises(ValueError, match="header key is null"):
        encode_batches(RecordColumns(pa.array([b"k"]), pa.array([b"v"]), np.array([1]),
                                     pa.array([[{"key": None, "value": b"1"}]], HEADER_TYPE)))


@pytest.mark.parametrize("name, codec, batches", [("plain-0", compression.NONE, 48),
                                                   ("codec-lz4-0", compression.LZ4, 8)])
def test_reencoding_kafka_written_batches_gives_the_same_bytes(kafka_logdir, name, codec,
                                                               batches):
    """Written by Kafka's own record classes: re-encoding each batch's records with the
    same base offset and leader epoch must give the very same bytes, CRC included. For
    lz4 too: Kafka's LZ4 stream compresses as lz4's frame API does at level 0 (lz4's block
    API packs the same bytes differently)."""
    manifest = load_manifest(kafka_logdir, name)
    checked = 0
    for segment in manifest["segments"]:
        with open(os.path.join(kafka_logdir, name, segment["log_file"]), "rb") as handle:
            log = handle.read()
        for batch in segment["batches"]:
            records = [(b64(r["key"]), b64(r["value"]), r["timestamp"],
                        [(k, b64(v)) for k, v in r["headers"]]) for r in batch["records"]]
            ours = build_record_batch(records, base_offset=batch["base_offset"], codec=codec,
                                      partition_leader_epoch=batch["partition_leader_epoch"])
            kafka = log[batch["position"] : batch["position"] + batch["size_in_bytes"]]
            assert ours == kafka, f"batch at offset {batch['base_offset']}"
            checked += 1
    assert checked == manifest["summary"]["batches"] == batches


@pytest.mark.parametrize("name", ["codec-gzip-0", "codec-snappy-0", "codec-lz4-0", "codec-zstd-0"])
def test_compressed_kafka_batches_have_our_records_section(kafka_logdir, name):
    """Compressed bytes differ between compressor implementations (gzip, zstd, some snappy
    blocks), but the header and the decompressed records section of a Kafka-written batch
    must equal ours."""
    manifest = load_manifest(kafka_logdir, name)
    codec = compression.CODEC_IDS[name.split("-")[1]]
    for segment in manifest["segments"]:
        with open(os.path.join(kafka_logdir, name, segment["log_file"]), "rb") as handle:
            log = handle.read()
        for batch in segment["batches"]:
            records = [(b64(r["key"]), b64(r["value"]), r["timestamp"],
                        [(k, b64(v)) for k, v in r["headers"]]) for r in batch["records"]]
            kafka = log[batch["position"] : batch["position"] + batch["size_in_bytes"]]
            ours = build_record_batch(records, base_offset=batch["base_offset"], codec=codec,
                                      partition_leader_epoch=batch["partition_leader_epoch"])
            # everything from attributes to recordCount except the CRC is the same
            assert ours[21:61] == kafka[21:61]
            assert compression.decompress(codec, ours[61:]) == \
                compression.decompress(codec, kafka[61:])


def test_tiny_records_fill_batches_exactly():
    n = 20000
    columns = RecordColumns(pa.nulls(n, pa.binary()), pa.array([b""] * n), np.full(n, 5))
    encoded = encode_batches(columns, batch_size=16384)
    # 7-byte records while the offset delta fits one varint byte (< 64), 8 bytes after
    assert encoded.record_counts.tolist()[:9] == [2048] * 9
    assert encoded.sizes.tolist()[:9] == [61 + 64 * 7 + 1984 * 8] * 9
    assert int(encoded.record_counts.sum()) == n
    assert len(decode(encoded.data)) == len(encoded)


@pytest.mark.parametrize("seed", range(6))
def test_batch_boundaries_follow_the_producer_rule(seed):
    """Random records and batch sizes: every batch is the longest prefix that fits, with
    record sizes computed independently by kafka-python's builder."""
    rng = random.Random(seed)
    records = []
    for i in range(rng.randrange(200, 600)):
        key = None if rng.random() < 0.3 else os.urandom(rng.choice([0, 3, 70, 200]))
        value = None if rng.random() < 0.1 else os.urandom(rng.choice([0, 1, 60, 127, 128, 900, 9000]))
        ts = rng.choice([0, 10**12, 1_700_000_000_000 + rng.randint(-10**9, 10**9), 2**50])
        headers = [] if rng.random() < 0.7 else [("k" * rng.randrange(0, 5), None), ("x", b"y" * 70)]
        records.append((key, value, ts, headers))
    batch_size = rng.choice([0, 100, 1000, 4096, 16384, 100000])
    encoded = encode_batches(RecordColumns.from_records(records), batch_size=batch_size)

    def size(j, first):
        key, value, ts, headers = records[j]
        return DefaultRecordBatchBuilder.size_in_bytes(
            j - first, ts - records[first][2], key, value, headers)

    assert decode(encoded.data)  # valid batches
    starts = encoded.first_rows.tolist() + [len(records)]
    for b, (first, end) in enumerate(zip(starts, starts[1:])):
        total = V2_HEADER_SIZE + sum(size(j, first) for j in range(first, end))
        assert total == int(encoded.sizes[b])
        if end - first > 1:
            assert total <= batch_size
        if end < len(records):
            assert total + size(end, first) > batch_size
