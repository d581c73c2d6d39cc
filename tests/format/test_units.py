"""Unit tests of the format core's building blocks (no fixtures needed).

Expected values come from the specifications (protobuf zig-zag varints, CRC check
values, the xerial snappy and LZ4 frame layouts), from independent encoders (kafka-python,
cramjam's raw snappy, lz4, zstandard, gzip) or from Kafka's naming rules.
"""
import gzip
import os
import random
import struct
import warnings
import zlib

import pyarrow as pa
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec as kafka_codec
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    from kafka.record.util import decode_varint as kafka_decode_varint
    from kafka.record.util import encode_varint as kafka_encode_varint

from support.manifest import arrow_rows
from segmentlog_datasource.format import (
    CorruptLogError, PartitionLog, ScanOptions, SegmentLogError, discover_partitions,
    SegmentRange, scan_segment, segment_file_name,
)
from segmentlog_datasource.format import compression
from segmentlog_datasource.format.fastpath.pure import RecordAccumulator
from segmentlog_datasource.format.crc import crc32, crc32c
from segmentlog_datasource.format.indexes import OffsetIndex, TimeIndex
from segmentlog_datasource.format.log import parse_partition_dir_name, partition_dir_name
from segmentlog_datasource.format.entries import read_entry_header
from segmentlog_datasource.format.varint import read_varint, write_varint
from support.kafka_codecs import xxh32

INT32_MIN, INT32_MAX = -2**31, 2**31 - 1
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


# -------------------------------------------------------------------------- varints

# Zig-zag varints as the protobuf specification encodes them.
VARINT_VECTORS = [
    (0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"),
    (-65, "8101"), (150, "ac02"), (INT32_MAX, "feffffff0f"), (INT32_MIN, "ffffffff0f"),
    (INT64_MAX, "feffffffffffffffff01"), (INT64_MIN, "ffffffffffffffffff01"),
]


@pytest.mark.parametrize("value,encoded", VARINT_VECTORS)
def test_varint_vectors(value, encoded):
    out = bytearray()
    write_varint(value, out)
    assert out.hex() == encoded
    assert read_varint(bytes.fromhex(encoded) + b"\xaa", 0) == (value, len(out))


def test_varint_round_trips_against_kafka_python():
    rng = random.Random(1)
    values = [rng.randint(INT64_MIN, INT64_MAX) for _ in range(2000)]
    values += [rng.randint(INT32_MIN, INT32_MAX) for _ in range(2000)]
    values += [2**k + d for k in range(63) for d in (-1, 0, 1)]
    values += [-(2**k) + d for k in range(64) for d in (-1, 0, 1) if -(2**k) + d >= INT64_MIN]
    buffer = bytearray()
    for value in values:
        ours = bytearray()
        write_varint(value, ours)
        theirs = bytearray()
        kafka_encode_varint(value, theirs.append)
        assert ours == theirs, value
        assert kafka_decode_varint(bytes(ours), 0) == (value, len(ours))
        buffer += ours
    pos = 0
    for value in values:  # back to back in one buffer
        got, pos = read_varint(buffer, pos)
        assert got == value
    assert pos == len(buffer)


def test_varint_errors():
    with pytest.raises(ValueError):
        read_varint(b"\xff" * 11, 0)  # longer than 10 bytes
    with pytest.raises(IndexError):
        read_varint(b"\x80\x80", 0)  # runs off the end


# --------------------------------------------------------------------------- CRCs

def test_crc_check_values():
    assert crc32c(b"123456789") == 0xE3069283  # CRC-32C (Castagnoli) check value
    assert crc32(b"123456789") == 0xCBF43926  # CRC-32 (IEEE) check value
    assert crc32c(memoryview(b"xx123456789")[2:]) == 0xE3069283
    assert crc32c(b"") == 0 and crc32(b"") == 0


# -------------------------------------------------------------------- compression

def _payloads():
    rng = random.Random(5)
    text = b" ".join(rng.choice([b"alpha", b"bravo", b"charlie", b"delta"]) for _ in range(200_000))
    return {
        "empty": b"",
        "one": b"x",
        "text": text[:5000],
        "large-text": text,  # ~1.3 MB: many 32 KiB snappy / 64 KiB lz4 blocks
        "random": rng.randbytes(200_000),  # incompressible: lz4 stores blocks raw
    }


PAYLOADS = _payloads()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("payload", list(PAYLOADS))
def test_compression_round_trips(codec, payload):
    data = PAYLOADS[payload]
    cid = compression.CODEC_IDS[codec]
    assert compression.codec_name(cid) == codec
    assert compression.decompress(cid, compression.compress(cid, data)) == data
    assert compression.decompress(cid, memoryview(compression.compress(cid, data))) == data


_KAFKA_PYTHON_CODECS = {
    "gzip": (kafka_codec.gzip_encode, kafka_codec.gzip_decode),
    "snappy": (kafka_codec.snappy_encode, kafka_codec.snappy_decode),
    "lz4": (kafka_codec.lz4_encode, kafka_codec.lz4_decode),
    "zstd": (kafka_codec.zstd_encode, kafka_codec.zstd_decode),
}


@pytest.mark.parametrize("codec", list(_KAFKA_PYTHON_CODECS))
@pytest.mark.parametrize("payload", ["one", "text", "large-text", "random"])
def test_compression_interoperates_with_kafka_python(kafka_python_codecs, codec, payload):
    data = PAYLOADS[payload]
    encode, decode = _KAFKA_PYTHON_CODECS[codec]
    cid = compression.CODEC_IDS[codec]
    assert compression.decompress(cid, encode(data)) == data
    assert decode(compression.compress(cid, data)) == data


def test_unknown_codec():
    with pytest.raises(SegmentLogError):
        compression.decompress(5, b"")
    with pytest.raises(SegmentLogError):
        compression.codec_name(7)


def test_gzip_stream_must_be_complete():
    data = gzip.compress(PAYLOADS["text"])
    with pytest.raises(zlib.error):
        compression.decompress(compression.GZIP, data[: len(data) // 2])


# ------------------------------------------------------------------ xerial snappy

XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _raw_snappy(data):
    import cramjam

    return bytes(cramjam.snappy.compress_raw(data))


def _xerial(blocks, version=1, compatible=1):
    out = XERIAL_MAGIC + struct.pack(">ii", version, compatible)
    for block in blocks:
        compressed = _raw_snappy(block)
        out += struct.pack(">i", len(compressed)) + compressed
    return out


def test_xerial_snappy_framing_is_parsed():
    blocks = [b"first block " * 100, b"", b"second " * 5000, b"x"]
    assert compression.decompress(compression.SNAPPY, _xerial(blocks)) == b"".join(blocks)
    # Header only: no blocks.
    assert compression.decompress(compression.SNAPPY, _xerial([])) == b""


def test_xerial_snappy_written_as_kafka_writes_it():
    data = PAYLOADS["large-text"]
    framed = compression.compress(compression.SNAPPY, data)
    assert framed[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    import cramjam

    pos, out, blocks = 16, b"", 0
    while pos < len(framed):
        (length,) = struct.unpack_from(">i", framed, pos)
        block = bytes(cramjam.snappy.decompress_raw(framed[pos + 4 : pos + 4 + length]))
        assert len(block) <= 32 * 1024  # SnappyOutputStream's block size
        out += block
        pos += 4 + length
        blocks += 1
    assert out == data and blocks == -(-len(data) // (32 * 1024))


def test_raw_snappy_block_is_accepted():
    assert compression.decompress(compression.SNAPPY, _raw_snappy(b"raw block")) == b"raw block"


@pytest.mark.parametrize("cut", [17, 20, -3])
def test_truncated_xerial_stream_is_an_error(cut):
    framed = _xerial([b"abc" * 1000, b"def" * 1000])
    with pytest.raises(Exception):
        compression.decompress(compression.SNAPPY, framed[:cut])


# ---------------------------------------------------------------- LZ4 legacy frames

def _kafka_legacy_lz4(data, **options):
    """An LZ4 frame with Kafka's old (magic 0) header checksum: xxh32 over magic too."""
    import lz4.frame

    frame = bytearray(lz4.frame.compress(data, block_linked=False, **options))
    descriptor_end = 6 + (8 if frame[4] & 0x08 else 0)
    correct = (xxh32(bytes(frame[4:descriptor_end])) >> 8) & 0xFF
    assert frame[descriptor_end] == correct
    broken = (xxh32(bytes(frame[0:descriptor_end])) >> 8) & 0xFF
    frame[descriptor_end] = broken
    return bytes(frame), broken != correct


@pytest.mark.parametrize("options", [
    {}, {"store_size": False}, {"block_size": 4 << 16},
    {"block_checksum": True, "content_checksum": True}, {"store_size": False,
                                                         "content_checksum": True},
])
@pytest.mark.parametrize("payload", ["empty", "text", "large-text", "random"])
def test_lz4_frame_with_kafkas_legacy_header_checksum(options, payload):
    import lz4.frame

    data = PAYLOADS[payload]
    frame, differs = _kafka_legacy_lz4(data, **options)
    if differs:
        with pytest.raises(RuntimeError):
            lz4.frame.decompress(frame)  # a strict decoder refuses it
    assert compression.decompress(compression.LZ4, frame) == data


def test_lz4_legacy_frame_from_kafka_python(kafka_python_codecs):
    data = PAYLOADS["large-text"]
    assert compression.decompress(compression.LZ4, kafka_codec.lz4_encode_old_kafka(data)) == data


def test_lz4_garbage_is_an_error():
    with pytest.raises(Exception):
        compression.decompress(compression.LZ4, b"\x04\x22\x4d\x18" + b"\x00" * 12)
    with pytest.raises(Exception):
        compression.decompress(compression.LZ4, b"not an lz4 frame at all")


# ------------------------------------------------------------ partition directories

@pytest.mark.parametrize("name,expected", [
    ("my.topic-name-12", ("my.topic-name", 12)),
    ("a-0", ("a", 0)),
    ("topic-with-many-dashes-3", ("topic-with-many-dashes", 3)),
    ("__consumer_offsets-49", ("__consumer_offsets", 49)),
    ("x-1-2", ("x-1", 2)),
    ("dots.and_underscores-007", ("dots.and_underscores", 7)),
    ("topic", None),
    ("topic-", None),
    ("-3", None),
    ("topic-3.5d7c0a7b1a6f4e2c8d9e0f1a2b3c4d5e-delete", None),  # a deleted partition
    ("topic-3.5d7c0a7b1a6f4e2c8d9e0f1a2b3c4d5e-future", None),  # a future replica
    ("topic-3.5d7c0a7b1a6f4e2c8d9e0f1a2b3c4d5e-stray", None),
    ("topic-x", None),
])
def test_partition_dir_names(name, expected):
    assert parse_partition_dir_name(name) == expected
    if expected:
        assert partition_dir_name(*expected) == name.replace("-007", "-7")


def test_segment_file_names():
    assert segment_file_name(0) == "00000000000000000000.log"
    assert segment_file_name(8589938834, ".index") == "00000000008589938834.index"
    assert segment_file_name(INT64_MAX, ".timeindex") == "9223372036854775807.timeindex".zfill(30)


def _v1_entries(base_offset, count):
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(count):
        builder.append(base_offset + i, timestamp=1_700_000_000_000 + i, key=None,
                       value=b"value-%d" % (base_offset + i))
    return bytes(builder.build())


def _make_partition(root, name, segments=((0, 3),), extra_files=()):
    """A partition directory with small magic-1 segments [(base offset, records)]."""
    directory = os.path.join(root, name)
    os.makedirs(directory)
    for base, count in segments:
        with open(os.path.join(directory, segment_file_name(base)), "wb") as handle:
            handle.write(_v1_entries(base, count))
    for extra in extra_files:
        with open(os.path.join(directory, extra), "wb") as handle:
            handle.write(b"\x00\x00\x00\x07 not segment data " * 3)
    return directory


def _summary(logs):
    return [(log.topic, log.partition, [s.base_offset for s in log.segments]) for log in logs]


def test_discovery_of_a_log_dir_a_partition_dir_and_several_paths(tmp_path):
    one, two = str(tmp_path / "disk1"), str(tmp_path / "disk2")
    _make_partition(one, "my.topic-name-12", [(0, 3), (3, 4)])
    _make_partition(one, "other-0")
    _make_partition(two, "my.topic-name-2", [(100, 2)])
    os.makedirs(os.path.join(one, ".staging-0"))  # dot-prefixed: unfinished writes
    for name in ("meta.properties", "recovery-point-offset-checkpoint",
                 "cleaner-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint", ".lock"):
        with open(os.path.join(one, name), "w") as handle:
            handle.write("0\n")
    os.makedirs(os.path.join(one, "gone-1.0a1b2c3d4e5f60718293a4b5c6d7e8f9-delete"))

    assert _summary(discover_partitions([one])) == [
        ("my.topic-name", 12, [0, 3]), ("other", 0, [0])]
    assert _summary(discover_partitions([os.path.join(one, "my.topic-name-12")])) == [
        ("my.topic-name", 12, [0, 3])]
    assert _summary(discover_partitions([one, two])) == [
        ("my.topic-name", 2, [100]), ("my.topic-name", 12, [0, 3]), ("other", 0, [0])]
    assert _summary(discover_partitions([two, os.path.join(one, "other-0")])) == [
        ("my.topic-name", 2, [100]), ("other", 0, [0])]
    # The partitions read back their records.
    log = discover_partitions([os.path.join(one, "my.topic-name-12")])[0]
    assert log.end_offset() == 7
    segment = log.segments[1]
    rows = arrow_rows(scan_segment(SegmentRange(
            log.topic, log.partition, segment.log_path, segment.size, 0, segment.size, 0,
            2**63 - 1, True),
        ScanOptions()),
                      include_headers=False)
    assert [r["offset"] for r in rows] == [3, 4, 5, 6]
    assert rows[0]["value"] == b"value-3"


def test_discovery_of_a_log_dir_whose_name_looks_like_a_partition(tmp_path):
    logdir = str(tmp_path / "kafka-logs-1")
    _make_partition(logdir, "events-0")
    assert _summary(discover_partitions([logdir])) == [("events", 0, [0])]


def test_the_same_partition_twice_is_an_error(tmp_path):
    one, two = str(tmp_path / "a"), str(tmp_path / "b")
    _make_partition(one, "t-0")
    _make_partition(two, "t-0")
    with pytest.raises(SegmentLogError, match="appears twice"):
        discover_partitions([one, two])


def test_missing_path_is_an_error(tmp_path):
    with pytest.raises(SegmentLogError, match="no such directory"):
        discover_partitions([str(tmp_path / "nowhere")])


NOT_DATA = [
    "00000000000000000000.log.deleted", "00000000000000000000.index.deleted",
    "00000000000000000000.timeindex.deleted", "00000000000000000000.txnindex.deleted",
    "00000000000000000050.log.cleaned", "00000000000000000050.index.cleaned",
    "00000000000000000050.log.swap", "00000000000000000050.timeindex.swap",
    "00000000000000000003.snapshot", "00000000000000000099.snapshot",
    "leader-epoch-checkpoint", "leader-epoch-checkpoint.tmp", "partition.metadata",
    "partition.metadata.tmp",
]


def test_files_that_are_never_data(tmp_path):
    directory = _make_partition(str(tmp_path), "t.x-4", [(0, 3), (3, 2)], extra_files=NOT_DATA)
    for logs in (discover_partitions([str(tmp_path)]), discover_partitions([directory])):
        assert _summary(logs) == [("t.x", 4, [0, 3])]
    log = PartitionLog.open(directory)
    assert [s.size for s in log.segments] == [len(_v1_entries(0, 3)), len(_v1_entries(3, 2))]
    assert log.end_offset() == 5


@pytest.mark.parametrize("bad_name", ["123.log", "0000000000000000000a.log", "segment.log",
                                      "000000000000000000000.log", ".log"])
def test_bad_log_file_name_is_a_clear_error(tmp_path, bad_name):
    directory = _make_partition(str(tmp_path), "t-0")
    with open(os.path.join(directory, bad_name), "wb") as handle:
        handle.write(_v1_entries(10, 1))
    with pytest.raises(SegmentLogError) as info:
        PartitionLog.open(directory)
    assert os.path.join(directory, bad_name) in str(info.value)
    assert "20-digit" in str(info.value)
    with pytest.raises(SegmentLogError):
        discover_partitions([str(tmp_path)])


def test_partition_open_needs_a_partition_dir_name(tmp_path):
    directory = tmp_path / "not_a_partition"
    directory.mkdir()
    with pytest.raises(SegmentLogError, match="not a partition directory"):
        PartitionLog.open(str(directory))


# -------------------------------------------------------------------------- indexes

def _offset_index_bytes(entries, base, tail_entries=0):
    data = b"".join(struct.pack(">ii", offset - base, position) for offset, position in entries)
    return data + b"\x00" * 8 * tail_entries


def test_offset_index_lookup_semantics():
    entries = [(110, 4000), (125, 9000), (140, 15000)]
    index = OffsetIndex.parse(_offset_index_bytes(entries, 100, tail_entries=20), 100)
    assert index.entries() == entries
    assert index.lookup(99) == (100, 0)
    assert index.lookup(109) == (100, 0)
    assert index.lookup(110) == (110, 4000)
    assert index.lookup(124) == (110, 4000)
    assert index.lookup(125) == (125, 9000)
    assert index.lookup(10**12) == (140, 15000)
    # The entry after the first entry reaching the target bounds a scan for it.
    assert index.position_after(105) == 9000
    assert index.position_after(110) == 9000
    assert index.position_after(111) == 15000
    assert index.position_after(130) is None
    assert OffsetIndex.parse(b"", 5).lookup(7) == (5, 0)


def test_offset_index_all_zero_file_has_no_entries():
    # A freshly preallocated index: every slot zero, no entry (not "base offset at 0").
    assert OffsetIndex.parse(b"\x00" * 8192, 42).entries() == []
    assert TimeIndex.parse(b"\x00" * 8184, 42).entries() == []


def test_time_index_lookup_semantics():
    data = b"".join(struct.pack(">qi", ts, rel) for ts, rel in
                    [(1000, 5), (2000, 9), (2500, 9), (4000, 20)]) + b"\x00" * 12 * 3
    index = TimeIndex.parse(data, 100)
    assert index.entries() == [(1000, 105), (2000, 109), (2500, 109), (4000, 120)]
    assert index.max_timestamp == 4000
    assert index.lookup(999) == (-1, 100)
    assert index.lookup(1000) == (1000, 105)
    assert index.lookup(2499) == (2000, 109)
    assert index.lookup(10**15) == (4000, 120)
    assert index.offset_below(1000) is None
    assert index.offset_below(1001) == 105
    assert index.offset_below(4000) == 109
    assert index.offset_below(4001) == 120
    assert TimeIndex.parse(b"", 3).max_timestamp is None


def test_index_errors_name_file_and_entry():
    data = _offset_index_bytes([(110, 4000), (120, 3000)], 100)
    with pytest.raises(CorruptLogError) as info:
        OffsetIndex.parse(data, 100, path="/x/00000000000000000100.index")
    assert info.value.position == 8
    assert str(info.value).startswith("/x/00000000000000000100.index at byte 8:")
    with pytest.raises(CorruptLogError) as info:
        OffsetIndex.parse(_offset_index_bytes([(110, 4000)], 100), 100, path="p", log_size=4000)
    assert info.value.position == 0


# ------------------------------------------------------------------ entries, errors

def test_entry_header_of_too_few_bytes_is_a_torn_tail():
    assert read_entry_header(b"\x00" * 16, 0, 0) is None
    assert read_entry_header(b"", 0, 0) is None


def test_corrupt_log_error_message():
    error = CorruptLogError("/d/t-0/00000000000000000000.log", 4711, "bad things")
    assert str(error) == "/d/t-0/00000000000000000000.log at byte 4711: bad things"
    assert (error.path, error.position, error.reason) == (
        "/d/t-0/00000000000000000000.log", 4711, "bad things")
    assert str(CorruptLogError(None, None, "x")) == "<buffer>: x"
    assert isinstance(error, SegmentLogError)


def test_v1_wrapper_at_offset_zero_keeps_its_inner_offsets(tmp_path):
    """Kafka's legacy reader: a v1 wrapper offset of 0 means the inner offsets stand."""
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=1, batch_size=1 << 20)
    for i in range(4):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None, value=b"v%d" % i)
    directory = tmp_path / "t-0"
    directory.mkdir()
    (directory / segment_file_name(0)).write_bytes(bytes(builder.build()))  # wrapper offset 0
    log = PartitionLog.open(str(directory))
    segment = log.segments[0]
    rows = arrow_rows(scan_segment(SegmentRange(
            "t", 0, segment.log_path, segment.size, 0, segment.size, 0, 2**63 - 1, True),
        ScanOptions()), include_headers=False)
    assert [(r["offset"], r["value"]) for r in rows] == [(i, b"v%d" % i) for i in range(4)]


def test_timestamps_in_microseconds_utc():
    accumulator = RecordAccumulator(include_headers=True)
    for offset, ts in enumerate([-1, 0, 1, 1_700_000_000_123, 253402300799999]):
        accumulator.add(offset, ts, 0 if ts >= 0 else -1, None, b"v", [("h", None)])
    batch = accumulator.take("t", 3)
    assert batch.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [
        -1000, 0, 1000, 1_700_000_000_123_000, 253402300799999000]
    assert batch.column("partition").to_pylist() == [3] * 5
    assert batch.column("topic").to_pylist() == ["t"] * 5
    assert batch.column("headers").to_pylist()[0] == [{"key": "h", "value": None}]


def test_lz4_frame_header_is_the_one_kafka_writes(kafka_logdir):
    # Kafka's LZ4 stream: independent 64 KiB blocks, no content size, no content checksum.
    from segmentlog_datasource.format import compression
    from segmentlog_datasource.format.log import PartitionLog

    segment = PartitionLog.open(os.path.join(kafka_logdir, "codec-lz4-0")).segments[0]
    with open(segment.log_path, "rb") as handle:
        kafka_frame_header = handle.read(61 + 7)[61:]
    assert compression.compress(compression.LZ4, b"x" * 100)[:7] == kafka_frame_header


def compiled_crc32c():
    from segmentlog_datasource.format.fastpath import _compiled

    compiled = _compiled(warn=False)
    return compiled.crc32c if compiled is not None else None


@pytest.mark.parametrize("available, backend", [
    ({"compiled", "package"}, "compiled"), ({"package"}, "crc32c"), (set(), "crcmod")])
def test_crc32c_takes_the_first_implementation_there(monkeypatch, available, backend):
    import sys

    from segmentlog_datasource.format import crc as crc_module

    if "compiled" in available and compiled_crc32c() is None:
        pytest.skip("no compiled decoder, or a CPU without the CRC32C instruction")
    if "compiled" not in available:
        monkeypatch.setattr(crc_module, "_compiled_crc32c", lambda: None)
    if "package" not in available:
        monkeypatch.setitem(sys.modules, "crc32c", None)  # as if the package were absent
    for name in ("_crc32c_impl", "_crc32c_continue", "_backend"):
        monkeypatch.setattr(crc_module, name, None)
    assert crc_module.crc32c_backend() == backend
    assert crc_module.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert crc_module.crc32c(memoryview(b"123456789")) == 0xE3069283
    continuing = crc_module.crc32c_continuing()
    if backend == "crcmod":
        assert continuing is None
    else:
        assert continuing(b"56789", continuing(b"1234")) == 0xE3069283


def test_compiled_crc32c_equals_crcmod_at_every_length_and_alignment():
    """The compiled checksum's three-stream blocks, its ends and its continuation, against
    crcmod's table-driven code (independent of the CRC instruction)."""
    import crcmod.predefined

    crc32c = compiled_crc32c()
    if crc32c is None:
        pytest.skip("no compiled decoder, or a CPU without the CRC32C instruction")
    table_driven = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
    rng = random.Random(5)
    data = bytes(rng.getrandbits(8) for _ in range(3 * 768 * 4 + 64))
    for size in [0, 1, 7, 8, 767, 768, 769, 2303, 2304, 2305, 3 * 768 * 4]:
        for start in (0, 1, 5):
            piece = memoryview(data)[start:start + size]
            expected = table_driven(bytes(piece))
            assert crc32c(piece) == expected, (size, start)
            cut = rng.randrange(size + 1)
            assert crc32c(piece[cut:], crc32c(piece[:cut])) == expected
    assert crc32c(bytes(1 << 17)) == table_driven(bytes(1 << 17))  # GIL released


@pytest.mark.parametrize("libdeflate", [True, False])
def test_gzip_written_with_or_without_libdeflate_is_plain_gzip(monkeypatch, libdeflate):
    import gzip
    import sys

    from segmentlog_datasource.format import compression

    if not libdeflate:
        monkeypatch.setitem(sys.modules, "deflate", None)  # as if it were not installed
    data = b"kafka record batch " * 5000
    for level in (None, 1, 9):
        packed = compression.compress(compression.GZIP, data, level)
        assert packed[:2] == b"\x1f\x8b"  # a gzip member, as Kafka's GZIPInputStream reads
        assert gzip.decompress(packed) == data
        assert compression.decompress(compression.GZIP, packed) == data
