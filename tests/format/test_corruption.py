"""Damaged segment and index files: clear errors that name the file and byte position.

Every test damages a private copy of a Kafka-written partition directory (`copy_of`) or
bytes built here; the shared fixtures are never touched. Positions are taken from the
manifests (where Kafka found each batch), not from the code under test.
"""
import os
import shutil
import signal
import struct
import warnings
import zlib

import pytest

from support.manifest import arrow_rows, b64, expected_rows, load_manifest
from segmentlog_datasource.format import (
    CorruptLogError, PartitionLog, ScanOptions, SegmentRange, TransactionFilter, scan_segment,
)
from segmentlog_datasource.format.layout import MAX_OFFSET
from segmentlog_datasource.format.scan import iter_segment_batches

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record._crc32c import crc as pure_crc32c
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

V2_HEADER_SIZE = 61
# Record decoding runs in the compiled fast path when it is built, else in Python.
BOTH_PATHS = pytest.mark.parametrize("use_fast_path", [False, True], ids=["python", "fast"])


@pytest.fixture(autouse=True)
def no_hang():
    """Damaged input must fail fast: any test still running after 20 s fails."""
    def expired(signum, frame):
        raise TimeoutError("a format-core call hung on damaged input")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def copy_of(kafka_logdir, tmp_path):
    """copy_of(name) -> a private log dir holding a writable copy of partition `name`.

    Only the partitions a test damages are copied (the whole fixture log dir is 5 MB);
    expected values are read from the shared manifests, which are never written.
    """
    logdir = tmp_path / "logdir"

    def copy(name):
        target = logdir / name
        if not target.exists():
            shutil.copytree(os.path.join(kafka_logdir, name), target)
            for entry in target.iterdir():
                entry.chmod(0o644)
            target.chmod(0o755)
        return str(logdir)

    return copy


# ------------------------------------------------------------------------- helpers

def _read(path):
    with open(path, "rb") as handle:
        return bytearray(handle.read())


def _write(path, data):
    with open(path, "wb") as handle:
        handle.write(data)


def _patch(path, position, data):
    content = _read(path)
    content[position : position + len(data)] = data
    _write(path, content)


def _flip(path, position, mask=0x01):
    content = _read(path)
    content[position] ^= mask
    _write(path, content)


def _open(logdir, name):
    return PartitionLog.open(os.path.join(logdir, name))


def _scan(log, segment, verify=True, allow_torn_tail=None, start=0, transactions=None,
          use_fast_path=True):
    if allow_torn_tail is None:
        allow_torn_tail = log.is_last(segment)
    batches = scan_segment(SegmentRange(
            log.topic, log.partition, segment.log_path, segment.size, start, segment.size, 0,
            MAX_OFFSET, allow_torn_tail, transactions=transactions),
        ScanOptions(verify_checksums=verify, include_headers=True, use_fast_path=use_fast_path))
    return arrow_rows(batches)


def _batch(manifest, segment_index, predicate=lambda b: True):
    segment = manifest["segments"][segment_index]
    return next(b for b in segment["batches"] if predicate(b))


def _assert_names(error, path, position):
    assert error.path == str(path)
    assert error.position == position
    assert str(path) in str(error) and f"at byte {position}" in str(error)


def _recompute_v2_crc(path, position):
    """Make a damaged magic-2 batch's checksum valid again (pure-Python CRC32C)."""
    content = _read(path)
    (length,) = struct.unpack_from(">i", content, position + 8)
    end = position + 12 + length
    struct.pack_into(">I", content, position + 17, pure_crc32c(bytes(content[position + 21 : end])))
    _write(path, content)


def _recompute_legacy_crc(path, position):
    content = _read(path)
    (length,) = struct.unpack_from(">i", content, position + 8)
    end = position + 12 + length
    struct.pack_into(">I", content, position + 12, zlib.crc32(bytes(content[position + 16 : end])))
    _write(path, content)


# ----------------------------------------------------------------------- checksums

def test_flipped_record_byte_is_a_checksum_error(kafka_logdir, copy_of):
    manifest = load_manifest(kafka_logdir, "plain-0")
    log = _open(copy_of("plain-0"), "plain-0")
    segment = log.segments[0]
    batch = _batch(manifest, 0, lambda b: b["base_offset"] == 15)  # mid-segment
    _flip(segment.log_path, batch["position"] + batch["size_in_bytes"] // 2)
    with pytest.raises(CorruptLogError) as info:
        _scan(log, segment)
    _assert_names(info.value, segment.log_path, batch["position"])
    assert "checksum" in info.value.reason
    with pytest.raises(CorruptLogError) as info:
        list(iter_segment_batches(segment.log_path, segment.size, 0, segment.size, False, True))
    _assert_names(info.value, segment.log_path, batch["position"])
    # A scan that ends before the damaged batch never sees it.
    rows = list(scan_segment(SegmentRange(
            log.topic, log.partition, segment.log_path, segment.size, 0, batch["position"], 0,
            MAX_OFFSET, False),
        ScanOptions()))
    assert sum(b.num_rows for b in rows) == len(
        [r for r in expected_rows(manifest, segment=0) if r["offset"] < 15])


@BOTH_PATHS
def test_flipped_value_byte_decodes_without_checksum_verification(kafka_logdir, copy_of,
                                                                  use_fast_path):
    manifest = load_manifest(kafka_logdir, "plain-0")
    log = _open(copy_of("plain-0"), "plain-0")
    segment = log.segments[0]
    batch = _batch(manifest, 0, lambda b: b["base_offset"] == 15)
    record = max(batch["records"], key=lambda r: len(r["value"] or ""))
    value = b64(record["value"])
    content = _read(segment.log_path)
    at = content.find(value, batch["position"] + V2_HEADER_SIZE)
    assert batch["position"] < at < batch["position"] + batch["size_in_bytes"]
    flip_at = at + len(value) // 2
    _flip(segment.log_path, flip_at, 0x20)
    damaged = bytearray(value)
    damaged[len(value) // 2] ^= 0x20
    rows = _scan(log, segment, verify=False, use_fast_path=use_fast_path)
    expected = expected_rows(manifest, segment=0)
    for row in expected:
        if row["offset"] == record["offset"]:
            row["value"] = bytes(damaged)
    assert rows == expected
    with pytest.raises(CorruptLogError):
        _scan(log, segment, verify=True)


def test_checksum_covers_header_fields_from_attributes_on(kafka_logdir, copy_of):
    manifest = load_manifest(kafka_logdir, "plain-1")
    log = _open(copy_of("plain-1"), "plain-1")
    segment = log.segments[0]
    batch = _batch(manifest, 0, lambda b: b["producer_id"] == 4244)
    # partitionLeaderEpoch (bytes 12..15) is outside Kafka's CRC: no error.
    _flip(segment.log_path, batch["position"] + 15)
    assert _scan(log, segment) == expected_rows(manifest, segment=0)
    # producerId (bytes 43..50) is covered.
    _flip(segment.log_path, batch["position"] + 50)
    with pytest.raises(CorruptLogError) as info:
        _scan(log, segment)
    _assert_names(info.value, segment.log_path, batch["position"])


@pytest.mark.parametrize("name,codec", [("codec-gzip-0", "gzip"), ("codec-zstd-0", "zstd"),
                                        ("legacy-v0-0", "none"), ("legacy-v1-0", "lz4")])
def test_checksum_errors_in_compressed_and_legacy_entries(kafka_logdir, copy_of, name, codec):
    manifest = load_manifest(kafka_logdir, name)
    log = _open(copy_of(name), name)
    segment = log.segments[0]
    batch = [b for b in manifest["segments"][0]["batches"] if b["compression"] == codec][-1]
    _flip(segment.log_path, batch["position"] + batch["size_in_bytes"] - 3)
    with pytest.raises(CorruptLogError) as info:
        _scan(log, segment)
    _assert_names(info.value, segment.log_path, batch["position"])
    assert "checksum" in info.value.reason


def test_inner_message_checksum_of_a_legacy_wrapper(tmp_path):
    """A v1 gzip wrapper whose inner message was damaged before compression."""
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=1, batch_size=1 << 20)
    for i in range(5):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"key-%d" % i,
                       value=b"value %d " % i * 20)
    # Damage the third inner message's value before the wrapper is built.
    inner = builder._buffer
    at = inner.find(b"value 2 ")
    inner[at] ^= 0x01
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, 104)  # absolute offset of the last inner message
    directory = tmp_path / "t-0"
    directory.mkdir()
    prefix = _legacy_plain_entry(99)
    path = directory / "00000000000000000099.log"
    _write(path, prefix + data)
    log = PartitionLog.open(str(directory))
    with pytest.raises(CorruptLogError) as info:
        _scan(log, log.segments[0])
    _assert_names(info.value, path, len(prefix))
    rows = _scan(log, log.segments[0], verify=False)
    assert [r["offset"] for r in rows] == [99, 100, 101, 102, 103, 104]
    assert rows[3]["value"][0] == ord("v") ^ 0x01


def _legacy_plain_entry(offset):
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(offset, timestamp=1_700_000_000_000, key=None, value=b"first")
    return bytes(builder.build())


# ------------------------------------------------------------------ entry framing

def _assert_active_data_ends_at(log, segment, manifest, batch, caplog):
    """Kafka's recovery rule for the active segment: its data ends at the entry that
    cannot be framed, with a warning naming the file and byte; the rows before it read."""
    caplog.clear()
    for use_fast_path in (True, False):
        rows = _scan(log, segment, allow_torn_tail=True, use_fast_path=use_fast_path)
        assert rows == expected_rows(manifest, segment=segment.base_offset,
                                     hi=batch["base_offset"])
    assert any(segment.log_path in message and f"at byte {batch['position']}" in message
               for message in caplog.messages), caplog.messages


@pytest.mark.parametrize("length", [-1, -2**31, 0, 48, 16])
def test_impossible_batch_length(kafka_logdir, copy_of, length, caplog):
    manifest = load_manifest(kafka_logdir, "plain-0")
    for index in (0, -1):  # a middle segment and the last one (its data may end there)
        log = _open(copy_of("plain-0"), "plain-0")
        segment = log.segments[index]
        batch = manifest["segments"][index]["batches"][1]
        original = _read(segment.log_path)
        _patch(segment.log_path, batch["position"] + 8, struct.pack(">i", length))
        with pytest.raises(CorruptLogError) as info:
            _scan(log, segment, allow_torn_tail=False)
        _assert_names(info.value, segment.log_path, batch["position"])
        with pytest.raises(CorruptLogError):
            list(segment.iter_headers(0, allow_torn_tail=False))
        _assert_active_data_ends_at(log, segment, manifest, batch, caplog)
        assert [h.position for h in segment.iter_headers(0, allow_torn_tail=True)] == \
            [b["position"] for b in manifest["segments"][index]["batches"][:1]]
        _write(segment.log_path, original)


@pytest.mark.parametrize("name,length", [("legacy-v0-0", 13), ("legacy-v0-0", -7),
                                         ("legacy-v1-0", 21), ("legacy-v1-0", 0)])
def test_impossible_legacy_message_length(kafka_logdir, copy_of, name, length, caplog):
    manifest = load_manifest(kafka_logdir, name)
    log = _open(copy_of(name), name)
    segment = log.segments[-1]
    batch = manifest["segments"][-1]["batches"][2]
    _patch(segment.log_path, batch["position"] + 8, struct.pack(">i", length))
    with pytest.raises(CorruptLogError) as info:
        _scan(log, segment, allow_torn_tail=False)
    _assert_names(info.value, segment.log_path, batch["position"])
    _assert_active_data_ends_at(log, segment, manifest, batch, caplog)


def test_length_running_past_a_non_last_segment(kafka_logdir, copy_of):
    manifest = load_manifest(kafka_logdir, "plain-0")
    log = _open(copy_of("plain-0"), "plain-0")
    segment = log.segments[1]
    batch = manifest["segments"][1]["batches"][2]
    _patch(segment.log_path, batch["position"] + 8, struct.pack(">i", 2**31 - 1))
    with pytest.raises(CorruptLogError) as info:
        _scan(log, segment)
    _assert_names(info.value, segment.log_path, batch["position"])


@pytest.mark.parametrize("magic", [3, 0x7F, 0x80, 0xFF])
def test_unknown_magic(kafka_logdir, copy_of, magic, caplog):
    manifest = load_manifest(kafka_logdir, "codec-snappy-0")
    log = _open(copy_of("codec-snappy-0"), "codec-snappy-0")
    for index, segment in enumerate(log.segments):  # non-last and last
        batch = manifest["segments"][index]["batches"][-1]
        _patch(segment.log_path, batch["position"] + 16, bytes([magic]))
        with pytest.raises(CorruptLogError) as info:
            _scan(log, segment, verify=False, allow_torn_tail=False)
        _assert_names(info.value, segment.log_path, batch["position"])
        assert "magic" in info.value.reason
        _assert_active_data_ends_at(log, segment, manifest, batch, caplog)


def test_negative_record_count(kafka_logdir, copy_of):
    manifest = load_manifest(kafka_logdir, "plain-2")
    log = _open(copy_of("plain-2"), "plain-2")
    segment = log.segments[0]
    batch = manifest["segments"][0]["batches"][3]
    _patch(segment.log_path, batch["position"] + 57, struct.pack(">i", -5))
    _recompute_v2_crc(segment.log_path, batch["position"])
    with pytest.raises(CorruptLogError) as info:
        _scan(log, segment)
    _assert_names(info.value, segment.log_path, batch["position"])


@BOTH_PATHS
@pytest.mark.parametrize("count", [2**31 - 1, 1])
def test_record_count_disagreeing_with_the_records(kafka_logdir, copy_of, count, use_fast_path):
    manifest = load_manifest(kafka_logdir, "plain-0")
    log = _open(copy_of("plain-0"), "plain-0")
    segment = log.segments[0]
    batch = _batch(manifest, 0, lambda b: b["record_count"] > 3)
    _patch(segment.log_path, batch["position"] + 57, struct.pack(">i", count))
    _recompute_v2_crc(segment.log_path, batch["position"])
    with pytest.raises(CorruptLogError) as info:
        _scan(log, segment, use_fast_path=use_fast_path)
    _assert_names(info.value, segment.log_path, batch["position"])


# -------------------------------------------------------------------- truncations

def test_truncated_batch_in_a_non_last_segment(kafka_logdir, copy_of):
    manifest = load_manifest(kafka_logdir, "plain-0")
    path = os.path.join(copy_of("plain-0"), "plain-0", "00000000000000000113.log")
    batch = manifest["segments"][1]["batches"][-1]
    os.truncate(path, batch["position"] + batch["size_in_bytes"] // 2)
    log = _open(copy_of("plain-0"), "plain-0")
    segment = log.segments[1]
    assert not log.is_last(segment)
    with pytest.raises(CorruptLogError) as info:
        _scan(log, segment)
    _assert_names(info.value, path, batch["position"])
    with pytest.raises(CorruptLogError) as info:
        log.last_stable_offset()
    _assert_names(info.value, path, batch["position"])


TORN_CUTS = [1, 11, 12, 16, 17, 60, 61, 62, "half", "all-but-one"]


@pytest.mark.parametrize("cut", TORN_CUTS)
@pytest.mark.parametrize("name", ["bigoffset-0", "legacy-v1-0", "codec-gzip-0", "codec-lz4-0"])
def test_truncated_tail_of_the_last_segment_stops_cleanly(kafka_logdir, copy_of, name, cut):
    """Cut inside the last batch: the read ends at the batch before it, as Kafka's does."""
    manifest = load_manifest(kafka_logdir, name)
    expected_segment = manifest["segments"][-1]
    batch = expected_segment["batches"][-1]  # no offset-index entry points at it
    assert batch["position"] not in [p for _, p in expected_segment["offset_index"]["entries"]]
    _check_torn_tail(copy_of(name), name, manifest, batch, cut)


@pytest.mark.parametrize("cut", [17, "half"])
def test_truncated_tail_inside_an_indexed_batch(kafka_logdir, copy_of, cut):
    """The torn batch is the one the last offset-index entry points at.

    After a crash the index can hold an entry for an append whose bytes did not all reach
    the log. Kafka's recovery then ends the log at the last complete batch; the log end
    offset must agree with what a scan returns.
    """
    manifest = load_manifest(kafka_logdir, "plain-0")
    expected_segment = manifest["segments"][-1]
    entry_offset, entry_position = expected_segment["offset_index"]["entries"][-1]
    batch = _batch(manifest, -1, lambda b: b["position"] == entry_position)
    assert batch["last_offset"] == entry_offset
    _check_torn_tail(copy_of("plain-0"), "plain-0", manifest, batch, cut)


def _check_torn_tail(logdir, name, manifest, batch, cut):
    """Truncate `batch` (in the last segment) to `cut` bytes and read the partition."""
    assert not manifest["summary"]["open_transactions"]
    if cut == "half":
        cut = batch["size_in_bytes"] // 2
    elif cut == "all-but-one":
        cut = batch["size_in_bytes"] - 1
    path = os.path.join(logdir, name, manifest["segments"][-1]["log_file"])
    os.truncate(path, batch["position"] + cut)
    log = _open(logdir, name)
    segment = log.segments[-1]
    rows = _scan(log, segment)
    assert rows == [r for r in expected_rows(manifest, segment=segment.base_offset)
                    if r["offset"] < batch["base_offset"]]
    headers = list(segment.iter_headers(0, allow_torn_tail=True))
    assert (headers[-1].end_position if headers else 0) == batch["position"]
    # The log ends where the complete batches end (the torn batch's first offset).
    assert log.end_offset() == batch["base_offset"]
    assert log.last_stable_offset() == batch["base_offset"]
    committed = _scan(log, segment, transactions=TransactionFilter(
        log.aborted_transactions(), log.last_stable_offset()))
    assert committed == rows
    # The same file where a torn tail is not allowed (as if a segment followed it).
    with pytest.raises(CorruptLogError) as info:
        _scan(log, segment, allow_torn_tail=False)
    _assert_names(info.value, path, batch["position"])


def test_segment_shrinking_after_planning(kafka_logdir, copy_of):
    log = _open(copy_of("plain-0"), "plain-0")
    segment = log.segments[0]
    os.truncate(segment.log_path, segment.size - 100)
    with pytest.raises(CorruptLogError) as info:
        _scan(log, segment)
    assert info.value.path == segment.log_path


# ------------------------------------------------------------------------- indexes

def test_offset_index_entry_past_the_log(kafka_logdir, copy_of):
    log = _open(copy_of("plain-0"), "plain-0")
    segment = log.segments[0]
    entries = len(load_manifest(kafka_logdir, "plain-0")["segments"][0]["offset_index"]
                  ["entries"])
    last = (entries - 1) * 8
    _patch(segment.index_path, last + 4, struct.pack(">i", segment.size + 100))
    with pytest.raises(CorruptLogError) as info:
        segment.offset_index
    _assert_names(info.value, segment.index_path, last)
    with pytest.raises(CorruptLogError):
        _open(copy_of("plain-0"), "plain-0").segments[0].offset_index.lookup(50)


@pytest.mark.parametrize("swap_at", [0, 2])
def test_offset_index_entries_out_of_order(kafka_logdir, copy_of, swap_at):
    log = _open(copy_of("plain-0"), "plain-0")
    segment = log.segments[0]
    data = _read(segment.index_path)
    first = data[swap_at * 8 : swap_at * 8 + 8]
    second = data[swap_at * 8 + 8 : swap_at * 8 + 16]
    data[swap_at * 8 : swap_at * 8 + 16] = second + first
    _write(segment.index_path, data)
    with pytest.raises(CorruptLogError) as info:
        segment.offset_index
    _assert_names(info.value, segment.index_path, swap_at * 8 + 8)


def test_offset_index_repeated_entry(kafka_logdir, copy_of):
    log = _open(copy_of("plain-0"), "plain-0")
    segment = log.segments[0]
    data = _read(segment.index_path)
    data[8:16] = data[0:8]
    _write(segment.index_path, data)
    with pytest.raises(CorruptLogError) as info:
        segment.offset_index
    _assert_names(info.value, segment.index_path, 8)


def test_time_index_entries_out_of_order(kafka_logdir, copy_of):
    log = _open(copy_of("live-0"), "live-0")
    segment = log.segments[0]
    data = _read(segment.time_index_path)
    data[0:24] = data[12:24] + data[0:12]
    _write(segment.time_index_path, data)
    with pytest.raises(CorruptLogError) as info:
        segment.time_index
    _assert_names(info.value, segment.time_index_path, 12)


@pytest.mark.parametrize("suffix,entry_size,entries,garbage", [
    (".index", 8, 5, struct.pack(">ii", 3, 77)),
    (".index", 8, 5, struct.pack(">ii", 0, 1)),
    (".timeindex", 12, 4, struct.pack(">qi", 5, 0)),
    (".timeindex", 12, 4, b"\x00" * 11 + b"\x01"),
])
def test_garbage_after_the_zero_tail_of_a_preallocated_index(kafka_logdir, copy_of, suffix,
                                                              entry_size, entries, garbage):
    log = _open(copy_of("live-0"), "live-0")
    segment = log.segments[-1]
    path = segment.index_path if suffix == ".index" else segment.time_index_path
    assert os.path.getsize(path) // entry_size > 600  # still preallocated
    # Well past the real entries, then one byte into the tail.
    for position in (entry_size * 500, entry_size * (entries + 3)):
        original = _read(path)
        _patch(path, position, garbage)
        fresh = _open(copy_of("live-0"), "live-0").segments[-1]
        with pytest.raises(CorruptLogError) as info:
            fresh.offset_index if suffix == ".index" else fresh.time_index
        _assert_names(info.value, path, position)
        _write(path, original)
    # Undamaged, the same file reads to its real entries.
    fresh = _open(copy_of("live-0"), "live-0").segments[-1]
    assert len(fresh.offset_index if suffix == ".index" else fresh.time_index) == entries


@pytest.mark.parametrize("extra", [1, 5, 33])
def test_transaction_index_size_not_a_multiple_of_34(kafka_logdir, copy_of, extra):
    log = _open(copy_of("txn-0"), "txn-0")
    segment = log.segments[0]
    size = os.path.getsize(segment.txn_index_path)
    assert size == 3 * 34
    with open(segment.txn_index_path, "ab") as handle:
        handle.write(b"\x00" * extra)
    with pytest.raises(CorruptLogError) as info:
        segment.aborted_transactions()
    assert info.value.path == segment.txn_index_path
    assert segment.txn_index_path in str(info.value)
    with pytest.raises(CorruptLogError):
        log.aborted_transactions()


def test_transaction_index_bad_entries(kafka_logdir, copy_of):
    log = _open(copy_of("txn-0"), "txn-0")
    segment = log.segments[0]
    original = _read(segment.txn_index_path)
    _patch(segment.txn_index_path, 34, struct.pack(">h", 1))  # unknown version
    with pytest.raises(CorruptLogError) as info:
        segment.aborted_transactions()
    _assert_names(info.value, segment.txn_index_path, 34)
    _write(segment.txn_index_path, original)
    # lastOffset before firstOffset
    _patch(segment.txn_index_path, 68 + 10, struct.pack(">qq", 50, 40))
    with pytest.raises(CorruptLogError) as info:
        segment.aborted_transactions()
    _assert_names(info.value, segment.txn_index_path, 68)


# ------------------------------------------------------------ garbled compression

@pytest.mark.parametrize("name", ["codec-gzip-0", "codec-snappy-0", "codec-lz4-0",
                                  "codec-zstd-0"])
@pytest.mark.parametrize("how", ["overwrite", "zeros", "truncate-frame"])
@BOTH_PATHS
def test_garbled_compressed_batch(kafka_logdir, copy_of, name, how, use_fast_path):
    """The payload is garbled and the checksum made valid again: only decoding can tell."""
    manifest = load_manifest(kafka_logdir, name)
    log = _open(copy_of(name), name)
    segment = log.segments[0]
    batch = manifest["segments"][0]["batches"][1]
    payload_start = batch["position"] + V2_HEADER_SIZE
    payload_end = batch["position"] + batch["size_in_bytes"]
    if how == "overwrite":
        middle = (payload_start + payload_end) // 2
        _patch(segment.log_path, middle, b"\xff\x00\x13\x37" * 8)
    elif how == "zeros":
        _patch(segment.log_path, payload_start, b"\x00" * (payload_end - payload_start))
    else:  # the compressed stream ends early; the batch is padded with zeros
        keep = (payload_end - payload_start) // 3
        _patch(segment.log_path, payload_start + keep,
               b"\x00" * (payload_end - payload_start - keep))
    _recompute_v2_crc(segment.log_path, batch["position"])
    for verify in (True, False):
        with pytest.raises(CorruptLogError) as info:
            _scan(log, segment, verify=verify, use_fast_path=use_fast_path)
        _assert_names(info.value, segment.log_path, batch["position"])


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
@pytest.mark.parametrize("name", ["legacy-v0-0", "legacy-v1-0"])
def test_garbled_legacy_wrapper(kafka_logdir, copy_of, name, codec):
    manifest = load_manifest(kafka_logdir, name)
    log = _open(copy_of(name), name)
    segment = log.segments[0]
    batch = _batch(manifest, 0, lambda b: b["compression"] == codec)
    start, end = batch["position"], batch["position"] + batch["size_in_bytes"]
    value_start = start + (26 if name == "legacy-v0-0" else 34)
    _patch(segment.log_path, value_start + 20, b"\x00" * (end - value_start - 20))
    _recompute_legacy_crc(segment.log_path, start)
    for verify in (True, False):
        with pytest.raises(CorruptLogError) as info:
            _scan(log, segment, verify=verify)
        _assert_names(info.value, segment.log_path, start)


@BOTH_PATHS
def test_malformed_record_inside_an_uncompressed_batch(kafka_logdir, copy_of, use_fast_path):
    """A record whose length varint claims more than the batch holds."""
    manifest = load_manifest(kafka_logdir, "plain-0")
    log = _open(copy_of("plain-0"), "plain-0")
    segment = log.segments[0]
    batch = _batch(manifest, 0, lambda b: b["record_count"] > 2)
    _patch(segment.log_path, batch["position"] + V2_HEADER_SIZE, b"\xfe\xff\xff\xff\x07")
    _recompute_v2_crc(segment.log_path, batch["position"])
    with pytest.raises(CorruptLogError) as info:
        _scan(log, segment, use_fast_path=use_fast_path)
    _assert_names(info.value, segment.log_path, batch["position"])


# ------------------------------------------------------- legacy wrapper invariants

def _legacy_wrapper(magic, wrapper_offset, count, codec=1):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(count):
        builder.append(i if magic == 1 else wrapper_offset - count + 1 + i,
                       timestamp=1_700_000_000_000 + i, key=None, value=b"v%d" % i)
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, wrapper_offset)
    return bytes(data)


def _wrapper_with_payload(magic, wrapper_offset, payload, codec=1):
    """A legacy wrapper whose value is `payload` (already compressed), valid checksum."""
    key_offset = 18 if magic == 0 else 26
    data = bytearray(key_offset + 8 + len(payload))
    struct.pack_into(">qiIbb", data, 0, wrapper_offset, len(data) - 12, 0, magic, codec)
    if magic == 1:
        struct.pack_into(">q", data, 18, 1_700_000_000_000)
    struct.pack_into(">ii", data, key_offset, -1, len(payload))
    data[key_offset + 8 :] = payload
    struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])))
    return bytes(data)


def _legacy_log(tmp_path, chunks, base_offset):
    directory = tmp_path / "legacy-0"
    directory.mkdir()
    path = directory / ("%020d.log" % base_offset)
    _write(path, b"".join(chunks))
    return PartitionLog.open(str(directory)), str(path)


@pytest.mark.parametrize("magic", [0, 1])
def test_compressed_wrapper_without_inner_messages(tmp_path, magic):
    """Kafka refuses a compressed wrapper whose message set is empty."""
    import gzip

    first = _legacy_wrapper(magic, 4, 5)
    empty = _wrapper_with_payload(magic, 5, gzip.compress(b""))
    log, path = _legacy_log(tmp_path, [first, empty], 0)
    for verify in (True, False):
        with pytest.raises(CorruptLogError) as info:
            _scan(log, log.segments[0], verify=verify)
        _assert_names(info.value, path, len(first))


def test_v1_wrapper_offset_below_its_last_relative_offset(tmp_path):
    """The wrapper's (absolute, last) offset cannot be smaller than the last relative one."""
    good = _legacy_wrapper(1, 9, 10)
    bad = bytearray(_legacy_wrapper(1, 12, 10))
    struct.pack_into(">q", bad, 0, 3)  # outside the CRC: checksums still pass
    log, path = _legacy_log(tmp_path, [good, bytes(bad)], 0)
    with pytest.raises(CorruptLogError) as info:
        _scan(log, log.segments[0])
    _assert_names(info.value, path, len(good))


@pytest.mark.parametrize("suffix,entry_size", [(".index", 8), (".timeindex", 12)])
def test_index_size_not_a_multiple_of_its_entries(kafka_logdir, copy_of, suffix, entry_size):
    log = _open(copy_of("plain-0"), "plain-0")
    segment = log.segments[0]
    path = segment.index_path if suffix == ".index" else segment.time_index_path
    size = os.path.getsize(path)
    assert size and size % entry_size == 0
    with open(path, "ab") as handle:
        handle.write(b"\x01\x02\x03")
    with pytest.raises(CorruptLogError) as info:
        segment.offset_index if suffix == ".index" else segment.time_index
    _assert_names(info.value, path, size)
