"""Damaged logs never give wrong rows silently: each damage is an error naming the file
and byte position, or (where noted) the rows Kafka's reader gives.

The damage is done to copies of the Kafka-written fixtures (kafka_logdir_copy) at named
byte positions; expected rows and batch positions come from the fixtures' manifests.
"""
import json
import os
import struct

import pytest

from segmentlog_datasource.errors import CorruptLogError
from segmentlog_datasource.format import PartitionLog, ScanOptions
from segmentlog_datasource.read.fragments import scan_fragments
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.read.stream import _TailScan

from support.manifest import arrow_rows, expected_rows, iter_batches, load_manifest

FAST = pytest.mark.parametrize("use_fast_path", [True, False], ids=["compiled", "pure"])
# Field positions inside a magic-2 batch (Kafka's RecordBatch layout).
BASE_OFFSET, LAST_OFFSET_DELTA, PRODUCER_ID = 0, 23, 43


def read_rows(logdir, use_fast_path=True, **options):
    """Rows of a batch read of `logdir`, planned and scanned as Spark's reader does."""
    read = parse_read_options({"path": logdir, "includeHeaders": "true", **options})
    fragments = plan_fragments(read, Constraints())
    return arrow_rows(scan_fragments(fragments, ScanOptions(
        verify_checksums=read.verify_checksums, include_headers=True,
        use_fast_path=use_fast_path,
        max_batch_inflated_bytes=read.max_batch_inflated_bytes)))


def poke(path, position, data: bytes):
    with open(path, "r+b") as handle:
        handle.seek(position)
        handle.write(data)


def segment_path(logdir, name, base_offset):
    return os.path.join(logdir, name, f"{base_offset:020d}.log")


def batch_at(manifest, segment_base, position):
    """The manifest's batch of segment `segment_base` that holds byte `position`."""
    for segment, batch in iter_batches(manifest):
        if segment["base_offset"] == segment_base and \
                batch["position"] <= position < batch["position"] + batch["size_in_bytes"]:
            return batch
    raise AssertionError(f"no batch holds byte {position}")


def assert_corrupt_at(error, path, position):
    assert os.path.samefile(error.value.path, path), error.value
    assert error.value.position == position, error.value
    assert f"at byte {position}" in str(error.value)


# ------------------------------------------------- item: checksum before any decision
@FAST
def test_offset_range_read_with_damaged_last_offset_delta_is_an_error(
        kafka_logdir_copy, use_fast_path):
    # A compressed batch's lastOffsetDelta made 0: the batch seems to end before the range,
    # and used to be skipped before its checksum was checked (138 of 196 rows, silently).
    name, position = "codec-zstd-0", 8815
    manifest = load_manifest(kafka_logdir_copy, name)
    batch = batch_at(manifest, 0, position)
    assert batch["position"] + LAST_OFFSET_DELTA + 3 == position
    start, end = batch["base_offset"] + 12, batch["base_offset"] + 12 + 196
    options = {"assign": '{"codec-zstd": [0]}',
               "startingOffsets": '{"codec-zstd": {"0": %d}}' % start,
               "endingOffsets": '{"codec-zstd": {"0": %d}}' % end}
    expected = expected_rows(manifest, lo=start, hi=end)
    assert len(expected) == 196
    assert read_rows(kafka_logdir_copy, use_fast_path, **options) == expected

    path = segment_path(kafka_logdir_copy, name, 0)
    poke(path, position, b"\x00")
    with pytest.raises(CorruptLogError, match="checksum mismatch") as error:
        read_rows(kafka_logdir_copy, use_fast_path, **options)
    assert_corrupt_at(error, path, batch["position"])


@FAST
def test_plain_batch_skipped_by_the_compiled_run_is_verified_first(
        kafka_logdir_copy, use_fast_path):
    # The same damage in an uncompressed batch, which decode_run() walks by itself.
    name = "plain-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment, batch = next(
        (s, b) for s, b in iter_batches(manifest)
        if b["compression"] == "none" and b["record_count"] > 2 and b["position"] > 0
        and not b["is_control"])
    start = batch["base_offset"] + 1
    options = {"assign": '{"plain": [0]}', "startingOffsets": '{"plain": {"0": %d}}' % start,
               "endingOffsets": '{"plain": {"0": %d}}' % (batch["last_offset"] + 1)}
    assert read_rows(kafka_logdir_copy, use_fast_path, **options) == \
        expected_rows(manifest, lo=start, hi=batch["last_offset"] + 1)
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])
    poke(path, batch["position"] + LAST_OFFSET_DELTA, struct.pack(">i", 0))
    with pytest.raises(CorruptLogError, match="checksum mismatch") as error:
        read_rows(kafka_logdir_copy, use_fast_path, **options)
    assert_corrupt_at(error, path, batch["position"])


TXN_DAMAGE = ("txn-0", 181, 4365)  # a byte of a transactional batch's producerId


def test_read_committed_with_damaged_producer_id_is_an_error(kafka_logdir_copy):
    # The damaged producerId used to open a transaction that never ends, moving the last
    # stable offset: read_committed gave 117 of 119 rows.
    name, segment_base, position = TXN_DAMAGE
    manifest = load_manifest(kafka_logdir_copy, name)
    batch = batch_at(manifest, segment_base, position)
    assert batch["is_transactional"] and not batch["is_control"]
    assert batch["position"] + PRODUCER_ID <= position < batch["position"] + PRODUCER_ID + 8
    committed = {"isolationLevel": "read_committed"}
    expected = expected_rows(manifest, "read_committed")
    assert len(expected) == manifest["summary"]["records_visible_read_committed"]
    options = dict(committed, subscribe="txn")
    assert read_rows(kafka_logdir_copy, **options) == expected

    path = segment_path(kafka_logdir_copy, name, segment_base)
    with open(path, "rb") as handle:
        handle.seek(position)
        byte = handle.read(1)[0]
    poke(path, position, bytes([byte ^ 0x40]))
    with pytest.raises(CorruptLogError, match="checksum mismatch") as error:
        read_rows(kafka_logdir_copy, **options)
    assert_corrupt_at(error, path, batch["position"])
    log = PartitionLog.open(os.path.join(kafka_logdir_copy, name))
    with pytest.raises(CorruptLogError) as error:
        _TailScan(track_transactions=True, verify=True).advance(log)
    assert_corrupt_at(error, path, batch["position"])


def test_log_end_from_a_damaged_last_batch_ends_before_it(kafka_logdir_copy):
    # The log end offset (batch reads' "latest", a stream's tail) comes from the last
    # batch's lastOffsetDelta, which its checksum covers. A last batch of the active
    # segment that fails its checksum ends the data, as Kafka's recovery truncates it
    # (docs/reading.md, "What is read"; a damaged batch before it is an error: test_log_end).
    name = "plain-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment, batch = list(iter_batches(manifest))[-1]
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])
    poke(path, batch["position"] + LAST_OFFSET_DELTA, struct.pack(">i", 1000))
    log = PartitionLog.open(os.path.join(kafka_logdir_copy, name))
    assert log.end_offset(verify=True) == batch["base_offset"]
    for committed in (False, True):
        assert _TailScan(track_transactions=committed, verify=True).advance(log) == (
            batch["base_offset"], batch["base_offset"])
    # Without verification the header is taken as it stands (docs/reading.md, "What checksums catch").
    assert log.end_offset(verify=False) == batch["base_offset"] + 1001


# ------------------------------------------- item: unknown codecs, timestamps at 2^63
ATTRIBUTES, CRC, BASE_TIMESTAMP = 21, 17, 27


def rewrite_v2_batch(path, position, size, patch):
    """Apply patch(bytearray of the batch) and store a valid CRC32C again, so that only
    the patched field is wrong."""
    import crc32c as crc32c_package  # an implementation independent of the reader's

    with open(path, "r+b") as handle:
        handle.seek(position)
        batch = bytearray(handle.read(size))
        patch(batch)
        struct.pack_into(">I", batch, CRC, crc32c_package.crc32c(bytes(batch[ATTRIBUTES:])))
        handle.seek(position)
        handle.write(batch)


def first_plain_batch(manifest, min_records=1):
    return next((s, b) for s, b in iter_batches(manifest)
                if b["compression"] == "none" and not b["is_control"]
                and b["record_count"] >= min_records)


def scan_whole_log(logdir, name, use_fast_path, verify=True):
    from segmentlog_datasource.format import SegmentRange, scan_segment

    log = PartitionLog.open(os.path.join(logdir, name))
    batches = []
    for segment in log.segments:
        batches.extend(scan_segment(SegmentRange(
            log.topic, log.partition, segment.log_path, segment.size, 0, segment.size, 0,
            2**63 - 1, log.is_last(segment)), ScanOptions(
                verify_checksums=verify, include_headers=True, use_fast_path=use_fast_path)))
    return batches


@FAST
@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_id_names_file_and_position(kafka_logdir_copy, use_fast_path, codec):
    name = "plain-0"
    segment, batch = first_plain_batch(load_manifest(kafka_logdir_copy, name))
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])

    def set_codec(data):
        (attributes,) = struct.unpack_from(">h", data, ATTRIBUTES)
        struct.pack_into(">h", data, ATTRIBUTES, (attributes & ~7) | codec)

    rewrite_v2_batch(path, batch["position"], batch["size_in_bytes"], set_codec)
    with pytest.raises(CorruptLogError, match=f"unknown compression codec id {codec}") as error:
        scan_whole_log(kafka_logdir_copy, name, use_fast_path)
    assert_corrupt_at(error, path, batch["position"])


def test_unknown_codec_id_in_a_legacy_wrapper_names_file_and_position(kafka_logdir_copy):
    import zlib

    name = "legacy-v1-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment, batch = next((s, b) for s, b in iter_batches(manifest)
                          if b["compression"] != "none")
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])
    with open(path, "r+b") as handle:  # offset, size, crc, magic, attributes, ...
        handle.seek(batch["position"])
        message = bytearray(handle.read(batch["size_in_bytes"]))
        message[17] = (message[17] & ~7) | 6
        struct.pack_into(">I", message, 12, zlib.crc32(bytes(message[16:])))
        handle.seek(batch["position"])
        handle.write(message)
    with pytest.raises(CorruptLogError, match="unknown compression codec id 6") as error:
        scan_whole_log(kafka_logdir_copy, name, True)
    assert_corrupt_at(error, path, batch["position"])


def _wrap64(value):
    return (value + 2**63) % 2**64 - 2**63


def test_timestamps_past_the_int64_range_wrap_alike_in_both_decoders(kafka_logdir_copy):
    # A base timestamp of 2^63 - 1 plus a record's positive delta passes the int64 range:
    # as Kafka's long arithmetic, both decoders wrap (the pure one raised OverflowError).
    name = "plain-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment, batch = next((s, b) for s, b in iter_batches(manifest)
                          if b["compression"] == "none" and not b["is_control"] and
                          any(r["timestamp"] > b["base_timestamp"] for r in b["records"]))
    assert batch["timestamp_type"] == "CreateTime"
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])
    top = 2**63 - 1
    rewrite_v2_batch(path, batch["position"], batch["size_in_bytes"],
                     lambda data: struct.pack_into(">q", data, BASE_TIMESTAMP, top))
    expected = {r["offset"]: _wrap64(_wrap64(top + r["timestamp"] - batch["base_timestamp"])
                                     * 1000)
                for r in batch["records"]}
    assert any(top + r["timestamp"] - batch["base_timestamp"] > top for r in batch["records"])
    import pyarrow as pa

    for use_fast_path in (True, False):
        got = {}
        for arrow_batch in scan_whole_log(kafka_logdir_copy, name, use_fast_path):
            offsets = arrow_batch.column("offset").to_pylist()
            micros = arrow_batch.column("timestamp").cast(pa.int64()).to_pylist()
            got.update((o, m) for o, m in zip(offsets, micros) if o in expected)
        assert got == expected, use_fast_path


# ------------------------------------------------ item: offsets go backwards or repeat
def segments_with_batches(manifest):
    return [s for s in manifest["segments"] if len(s["batches"]) >= 3]


@FAST
@pytest.mark.parametrize("verify", ["true", "false"])
def test_a_repeated_base_offset_is_an_error(kafka_logdir_copy, use_fast_path, verify):
    # baseOffset is outside the checksummed bytes: set to the previous batch's, the batch
    # passes its CRC, and only the order of offsets shows the damage.
    name = "plain-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment = segments_with_batches(manifest)[0]
    before, batch = segment["batches"][1], segment["batches"][2]
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])
    poke(path, batch["position"] + BASE_OFFSET, struct.pack(">q", before["base_offset"]))
    with pytest.raises(CorruptLogError, match="offsets must increase") as error:
        read_rows(kafka_logdir_copy, use_fast_path, subscribe="plain", verifyChecksums=verify)
    assert_corrupt_at(error, path, batch["position"])
    log = PartitionLog.open(os.path.join(kafka_logdir_copy, name))
    with pytest.raises(CorruptLogError, match="offsets must increase") as error:
        log.last_stable_offset()
    assert_corrupt_at(error, path, batch["position"])


@FAST
def test_a_base_offset_below_the_segment_is_an_error(kafka_logdir_copy, use_fast_path):
    name = "plain-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment = next(s for s in manifest["segments"] if s["base_offset"] > 0 and s["batches"])
    batch = segment["batches"][0]
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])
    poke(path, batch["position"] + BASE_OFFSET, struct.pack(">q", segment["base_offset"] - 1))
    with pytest.raises(CorruptLogError, match="offsets must increase") as error:
        read_rows(kafka_logdir_copy, use_fast_path, subscribe="plain")
    assert_corrupt_at(error, path, batch["position"])


@FAST
def test_a_valid_looking_batch_with_old_offsets_at_the_tail_is_an_error(
        kafka_logdir_copy, use_fast_path):
    # A whole earlier batch (valid CRC) repeated after the last one, as a stray length
    # would make the reader land on: its offsets go back, so it is not the log's end.
    name = "plain-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment = manifest["segments"][-1]
    first = segment["batches"][0]
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])
    with open(path, "rb") as handle:
        data = handle.read()
    copy = data[first["position"]:first["position"] + first["size_in_bytes"]]
    with open(path, "ab") as handle:
        handle.write(copy)
    log = PartitionLog.open(os.path.join(kafka_logdir_copy, name))
    for call in (lambda: log.end_offset(verify=True), lambda: log.end_offset(verify=False),
                 lambda: read_rows(kafka_logdir_copy, use_fast_path, subscribe="plain")):
        with pytest.raises(CorruptLogError, match="offsets must increase") as error:
            call()
        assert_corrupt_at(error, path, len(data))


# Offsets increase across split boundaries too: each split checks the entry at its start
# against the offset index and the entry just past its end against its own last offset.
def index_entries(path_of, segment):
    """[(offset, position)] of the segment's .index, as Kafka wrote it."""
    with open(path_of(segment["base_offset"])[:-len(".log")] + ".index", "rb") as handle:
        data = handle.read()
    return [(segment["base_offset"] + relative, position)
            for relative, position in struct.iter_unpack(">ii", data) if relative or position]


def indexed_batch_after_unindexed(manifest, path_of):
    """(segment, index entries, j): the batch at entry j's position follows a batch that
    no index entry points at, and which lies past entry j - 1's offset."""
    for segment in manifest["segments"]:
        entries = index_entries(path_of, segment)
        positions = [b["position"] for b in segment["batches"]]
        for j in range(1, len(entries)):
            at = positions.index(entries[j][1])
            before = segment["batches"][at - 1]
            if before["position"] != entries[j - 1][1] and \
                    before["base_offset"] > entries[j - 1][0]:
                return segment, entries, j
    raise AssertionError("no indexed batch after an unindexed one")


def split_at(logdir, name, position):
    """Every split of a read cut at every index entry, and the one that starts at
    `position` (a read that planned no such split would test nothing)."""
    read = parse_read_options({"path": logdir, "subscribe": name.rsplit("-", 1)[0],
                               "maxPartitionBytes": "1"})
    fragments = plan_fragments(read, Constraints())
    assert any(f.start_position == position for f in fragments), fragments
    return fragments


def scan_each(fragments, use_fast_path):
    """Each split scanned on its own, as separate Spark tasks scan them; the errors."""
    errors = []
    for fragment in fragments:
        try:
            list(fragment.scan(ScanOptions(use_fast_path=use_fast_path)))
        except CorruptLogError as error:
            errors.append(error)
    return errors


@FAST
def test_an_indexed_batch_moved_back_across_a_split_boundary_is_an_error(
        kafka_logdir_copy, use_fast_path):
    name = "plain-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    path_of = lambda base: segment_path(kafka_logdir_copy, name, base)  # noqa: E731
    segment, entries, j = indexed_batch_after_unindexed(manifest, path_of)
    position = entries[j][1]
    before = next(b for b in reversed(segment["batches"]) if b["position"] < position)
    # Back onto the previous batch's offsets, yet past the index entry before it: only
    # the split that ends here sees that its own offsets went past this batch's.
    poke(path_of(segment["base_offset"]), position + BASE_OFFSET,
         struct.pack(">q", before["base_offset"]))
    fragments = split_at(kafka_logdir_copy, name, position)
    errors = scan_each(fragments, use_fast_path)
    assert len(errors) == 1 and "offsets must increase" in errors[0].reason
    assert errors[0].path == path_of(segment["base_offset"])
    assert errors[0].position == position
    with pytest.raises(CorruptLogError, match="offsets must increase"):
        read_rows(kafka_logdir_copy, use_fast_path, subscribe="plain", maxPartitionBytes="1")


@FAST
def test_an_indexed_batch_moved_past_its_index_entry_is_an_error(kafka_logdir_copy,
                                                                 use_fast_path):
    name = "plain-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    path_of = lambda base: segment_path(kafka_logdir_copy, name, base)  # noqa: E731
    segment, entries, j = indexed_batch_after_unindexed(manifest, path_of)
    indexed_offset, position = entries[j]
    batch = next(b for b in segment["batches"] if b["position"] == position)
    moved = batch["base_offset"] + 1000
    poke(path_of(segment["base_offset"]), position + BASE_OFFSET, struct.pack(">q", moved))
    errors = scan_each(split_at(kafka_logdir_copy, name, position), use_fast_path)
    assert errors and errors[0].position == position
    assert errors[0].path == path_of(segment["base_offset"])
    assert f"past offset {indexed_offset}" in errors[0].reason


@FAST
def test_a_rolled_segments_last_batch_moved_into_the_next_segment_fails_its_scan(
        kafka_logdir_copy, use_fast_path):
    # Found by the fuzz test: nothing follows a rolled segment's last batch inside its
    # segment, and its base offset is outside the checksum; the next segment's base
    # offset bounds it.
    name = "codec-snappy-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment, following = manifest["segments"][0], manifest["segments"][1]
    batch = segment["batches"][-1]
    moved = following["base_offset"] - (batch["last_offset"] - batch["base_offset"])
    assert moved > batch["base_offset"]
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])
    poke(path, batch["position"] + BASE_OFFSET, struct.pack(">q", moved))
    # Planning reads no segment bytes for it (a lookup plans without reading .log files);
    # the scan that reads the batch reports it, whichever split holds it.
    fragments = plan_fragments(parse_read_options(
        {"path": kafka_logdir_copy, "subscribe": "codec-snappy"}), Constraints())
    assert fragments
    with pytest.raises(CorruptLogError, match="runs into the next segment") as error:
        read_rows(kafka_logdir_copy, use_fast_path, subscribe="codec-snappy")
    assert_corrupt_at(error, path, batch["position"])
    for split_bytes in (200, 1000):
        with pytest.raises(CorruptLogError, match="runs into the next segment"):
            read_rows(kafka_logdir_copy, use_fast_path, subscribe="codec-snappy",
                      maxPartitionBytes=str(split_bytes))


def test_a_legacy_wrapper_whose_messages_go_back_is_an_error(kafka_logdir_copy):
    # Found by the fuzz test: a magic-0 message's offset is outside its checksum; moved
    # onto the first offset of the compressed wrapper after it, that wrapper's messages
    # (offsets inside it, also unchecked by the wrapper's offset) repeat it.
    name = "legacy-v0-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment = manifest["segments"][0]
    first, wrapper = segment["batches"][0], segment["batches"][1]
    assert first["compression"] == "none" and wrapper["compression"] != "none"
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])
    poke(path, first["position"] + BASE_OFFSET, struct.pack(">q", wrapper["base_offset"]))
    for use_fast_path in (True, False):
        with pytest.raises(CorruptLogError, match="out of order") as error:
            read_rows(kafka_logdir_copy, use_fast_path, subscribe="legacy-v0")
        assert_corrupt_at(error, path, wrapper["position"])


def index_entry_file(logdir, name, base_offset):
    return segment_path(logdir, name, base_offset)[:-len(".log")] + ".index"


@FAST
def test_an_index_entry_off_a_batch_boundary_in_the_active_segment_is_an_error(
        kafka_logdir_copy, use_fast_path):
    # Found by the fuzz test: the split starting at such an entry took the bytes there for
    # the active segment's torn end and returned nothing more, without an error.
    name = "compacted-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment = manifest["segments"][-1]
    inside = segment["batches"][0]["position"] + 300
    assert not any(b["position"] == inside for b in segment["batches"])
    index = index_entry_file(kafka_logdir_copy, name, segment["base_offset"])
    assert os.path.getsize(index) == 0 or not any(open(index, "rb").read())
    with open(index, "wb") as handle:  # one entry: (relative offset 0, position 300)
        handle.write(struct.pack(">ii", 0, inside))
    with pytest.raises(CorruptLogError, match="does not point at an entry") as error:
        read_rows(kafka_logdir_copy, use_fast_path, subscribe="compacted")
    assert error.value.path == index and error.value.position == 0


@FAST
def test_a_range_read_checks_the_batch_after_the_one_it_stops_at(kafka_logdir_copy,
                                                                  use_fast_path):
    # Found by the fuzz test: a batch whose base offset (outside the checksum) was moved
    # past the range's end stopped the read, hiding the rows of the batches after it.
    name = "logappend-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment = manifest["segments"][0]
    assert len(manifest["segments"]) > 1
    batch, after = segment["batches"][1], segment["batches"][2]
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])
    poke(path, batch["position"] + BASE_OFFSET, struct.pack(">q", after["last_offset"] + 100))
    ending = after["last_offset"] + 1
    with pytest.raises(CorruptLogError, match="offsets must increase") as error:
        read_rows(kafka_logdir_copy, use_fast_path, subscribe="logappend",
                  startingOffsets=json.dumps({"logappend": {"0": batch["base_offset"]}}),
                  endingOffsets=json.dumps({"logappend": {"0": ending}}))
    assert_corrupt_at(error, path, after["position"])


def test_a_legacy_wrapper_moved_forward_is_seen_by_a_range_read_that_ends_in_it(
        kafka_logdir_copy):
    # Found by the fuzz test: a magic-1 wrapper's offset moved forward by one shifts its
    # messages' offsets; a range ending in it returned a wrong record.
    name = "legacy-v1-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment, wrapper, after = next(
        (s, b, s["batches"][i + 1]) for s in manifest["segments"]
        for i, b in enumerate(s["batches"][:-1])
        if b["compression"] != "none" and s["batches"][i + 1]["compression"] != "none")
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])
    moved = wrapper["last_offset"] + 1
    poke(path, wrapper["position"] + BASE_OFFSET, struct.pack(">q", moved))
    for use_fast_path in (True, False):
        with pytest.raises(CorruptLogError, match="offsets must increase") as error:
            read_rows(kafka_logdir_copy, use_fast_path, subscribe="legacy-v1",
                      startingOffsets=json.dumps({"legacy-v1": {"0": moved}}),
                      endingOffsets=json.dumps({"legacy-v1": {"0": moved + 1}}))
        assert_corrupt_at(error, path, after["position"])


@FAST
def test_offsets_past_the_largest_offset_are_an_error(kafka_logdir_copy, use_fast_path):
    # Found by the fuzz test: the batch's records were dropped without an error.
    name = "compacted-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment = manifest["segments"][-1]
    batch = segment["batches"][0]
    assert batch["last_offset"] > batch["base_offset"]
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])
    poke(path, batch["position"] + BASE_OFFSET, struct.pack(">q", 2**63 - 1))
    with pytest.raises(CorruptLogError, match="pass the largest offset") as error:
        read_rows(kafka_logdir_copy, use_fast_path, subscribe="compacted")
    assert_corrupt_at(error, path, batch["position"])


def test_a_last_offset_of_2_63_minus_1_is_an_error(kafka_logdir_copy):
    # Found by the fuzz test: a magic-1 wrapper's offset set to 2^63 - 1 shifted its
    # messages there, and the last of them was dropped without an error (the log end
    # offset after it, 2^63, does not fit Kafka's long).
    name = "legacy-v1-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment = manifest["segments"][-1]
    batch = segment["batches"][-1]
    path = segment_path(kafka_logdir_copy, name, segment["base_offset"])
    poke(path, batch["position"] + BASE_OFFSET, struct.pack(">q", 2**63 - 1))
    for use_fast_path in (True, False):
        with pytest.raises(CorruptLogError, match="pass the largest offset") as error:
            read_rows(kafka_logdir_copy, use_fast_path, subscribe="legacy-v1")
        assert_corrupt_at(error, path, batch["position"])


# A .txnindex entry ends at its producer's ABORT marker (Kafka appends both together):
# read_committed checks that before it hides records by the entry.
def txn_index_entry(logdir):
    """(path, byte, fields) of the first aborted transaction entry of txn-0."""
    directory = os.path.join(logdir, "txn-0")
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.endswith(".txnindex") and os.path.getsize(path):
            with open(path, "rb") as handle:
                return path, 0, list(struct.unpack(">hqqqq", handle.read(34)))
    raise AssertionError("txn-0 has no aborted transaction entry")


@pytest.mark.parametrize("field,value", [(1, 4242), (3, 2**40)], ids=["producerId", "lastOffset"])
def test_a_damaged_aborted_transaction_entry_is_an_error(kafka_logdir_copy, field, value):
    # Found by the fuzz test: read_committed hid records of the wrong producer, or of
    # later committed transactions of the same producer.
    path, position, fields = txn_index_entry(kafka_logdir_copy)
    fields[field] = value
    poke(path, position, struct.pack(">hqqqq", *fields))
    with pytest.raises(CorruptLogError, match="aborted transaction entry") as error:
        read_rows(kafka_logdir_copy, subscribe="txn", isolationLevel="read_committed")
    assert error.value.path == path and error.value.position == position
    assert len(read_rows(kafka_logdir_copy, subscribe="txn")) == \
        len(expected_rows(load_manifest(kafka_logdir_copy, "txn-0")))  # not used there


def test_an_entry_for_a_marker_appended_after_the_log_was_sized_is_fine(kafka_logdir_copy):
    # A live broker appends the ABORT marker, then the .txnindex entry: a reader that
    # sized the .log before the marker reads an entry whose marker it does not see.
    manifest = load_manifest(kafka_logdir_copy, "txn-0")
    open_first = manifest["broker_last_stable_offset"]
    segment, batch = next((s, b) for s, b in iter_batches(manifest)
                          if b["base_offset"] == open_first)
    log_end = manifest["segments"][-1]["batches"][-1]["last_offset"] + 1
    txn_index = segment_path(kafka_logdir_copy, "txn-0",
                             manifest["segments"][-1]["base_offset"])[:-4] + ".txnindex"
    with open(txn_index, "ab") as handle:
        handle.write(struct.pack(">hqqqq", 0, batch["producer_id"], open_first, log_end + 3,
                                 open_first))
    assert read_rows(kafka_logdir_copy, subscribe="txn", isolationLevel="read_committed") == \
        expected_rows(manifest, "read_committed")


def test_aborted_transaction_entries_that_overlap_are_an_error(kafka_logdir_copy):
    # Found by the fuzz test: a first offset moved back over the producer's earlier
    # transactions made the lookup of aborted spans miss records it should hide.
    directory = os.path.join(kafka_logdir_copy, "txn-0")
    entries = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".txnindex"):
            with open(os.path.join(directory, name), "rb") as handle:
                data = handle.read()
            entries += [(os.path.join(directory, name), at,
                         list(struct.unpack_from(">hqqqq", data, at)))
                        for at in range(0, len(data), 34)]
    later = next(e for e in entries[1:]
                 if any(o[2][1] == e[2][1] and o[2][3] < e[2][2] for o in entries))
    path, position, fields = later
    fields[2] = -202
    poke(path, position, struct.pack(">hqqqq", *fields))
    with pytest.raises(CorruptLogError, match="overlap") as error:
        read_rows(kafka_logdir_copy, subscribe="txn", isolationLevel="read_committed")
    assert error.value.path == path and error.value.position == position


def test_a_timestamp_lookup_through_an_index_entry_off_a_batch_boundary_is_an_error(
        kafka_logdir_copy):
    # Found by the fuzz test: the lookup started inside a batch of the active segment,
    # took it for the end of the data and found no record at all.
    name = "plain-0"
    manifest = load_manifest(kafka_logdir_copy, name)
    segment = manifest["segments"][-1]
    offset, position = segment["offset_index"]["entries"][0]
    index = index_entry_file(kafka_logdir_copy, name, segment["base_offset"])
    poke(index, 4, struct.pack(">i", position + 7))
    first_ts = segment["batches"][-1]["max_timestamp"]
    with pytest.raises(CorruptLogError, match="does not point at an entry") as error:
        read_rows(kafka_logdir_copy, subscribe="plain", startingTimestamp=str(first_ts))
    assert error.value.path == index and error.value.position == 0


# ------------------------------------------------------------- item: decompression bombs
BOMB_CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BOMB_BYTES = 16 << 20


def write_bomb_log(logdir, codec_id):
    """A partition `bomb-0` whose one batch, written by kafka-python, holds a record of
    16 MiB of zeros (under 1 MiB compressed). Returns (log path, kafka-python's records)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec_id, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    builder.append(0, 1700000000000, b"k", b"\0" * BOMB_BYTES, [])
    builder.append(1, 1700000000001, b"small", b"v", [])
    data = bytes(builder.build())
    assert len(data) < BOMB_BYTES // 16  # snappy inflates at most about 21x
    directory = os.path.join(logdir, "bomb-0")
    os.makedirs(directory)
    path = os.path.join(directory, f"{0:020d}.log")
    with open(path, "wb") as handle:
        handle.write(data)
    records = [(r.offset, r.key, r.value) for r in MemoryRecords(data).next_batch()]
    return path, records


@FAST
@pytest.mark.parametrize("codec", list(BOMB_CODECS))
def test_a_batch_inflating_past_the_bound_is_an_error(tmp_path, kafka_python_codecs,
                                                       use_fast_path, codec):
    import tracemalloc

    path, records = write_bomb_log(str(tmp_path), BOMB_CODECS[codec])
    assert [len(value) for _, _, value in records] == [BOMB_BYTES, 1]
    # Under the bound (the default is far above it), Kafka's records.
    rows = read_rows(str(tmp_path), use_fast_path)
    assert [(r["offset"], r["key"], r["value"]) for r in rows] == records
    rows = read_rows(str(tmp_path), use_fast_path, maxBatchInflatedBytes=str(BOMB_BYTES + 64))
    assert [(r["offset"], r["key"], r["value"]) for r in rows] == records

    limit = 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(CorruptLogError, match="maxBatchInflatedBytes") as error:
            read_rows(str(tmp_path), use_fast_path, maxBatchInflatedBytes=str(limit))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_corrupt_at(error, path, 0)
    # Decompression stopped near the bound instead of inflating the whole batch first.
    assert peak < 4 * limit, peak


def test_max_batch_inflated_bytes_must_be_a_positive_integer(tmp_path):
    from segmentlog_datasource.errors import InvalidOptionError

    for bad in ("0", "-1", "lots"):
        with pytest.raises(InvalidOptionError, match="maxBatchInflatedBytes"):
            parse_read_options({"path": str(tmp_path), "maxBatchInflatedBytes": bad})
