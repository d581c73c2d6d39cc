"""Remote (tiered) partitions in Aiven's and Kafka's LocalTieredStorage layouts: segments,
index ranges, unknown files, malformed manifests and duplicate uploads."""
import json
import os
import random
import shutil

import pytest

from segmentlog_datasource.errors import CorruptLogError, UnsupportedFormatError
from segmentlog_datasource.format.tiered import (
    AIVEN, LOCAL, find_remote_partitions, partition_listing, read_log_range, remote_segments)
from support.fixtures import fixtures_root
from support.tiered_layout import (
    kafka_uuid, listing_of, reader_of, source_segments, write_aiven_partition,
    write_aiven_segment, segment_facts, write_local_tiered_partition)

SOURCES = ["plain-0", "txn-0", "compacted-0", "bigoffset-0"]


def _fixture(name):
    directory = os.path.join(fixtures_root(), name)
    with open(directory + ".manifest.json") as f:
        return directory, json.load(f)


def _read_file(path):
    with open(path, "rb") as f:
        return f.read()


def _read_range(root_dir, object_range):
    with open(os.path.join(root_dir, object_range.name), "rb") as f:
        f.seek(object_range.offset)
        return f.read(object_range.length)


def _partition(root, prefix, layout):
    directory = os.path.join(root, prefix)
    return remote_segments(layout, partition_listing(listing_of(root), prefix),
                           reader_of(directory)), directory


def _check_against_source(segments, directory, source_dir, fixture):
    expected = [s["base_offset"] for s in fixture["segments"]]
    assert [s.base_offset for s in segments] == expected
    for segment, (base, files) in zip(segments, source_segments(source_dir)):
        log = _read_file(files["log"])
        assert segment.log_size == len(log)
        assert read_log_range(segment, reader_of(directory), 0, segment.log_size) == log
        assert _read_range(directory, segment.offset_index) == _read_file(files["index"])
        assert _read_range(directory, segment.time_index) == _read_file(files["timeindex"])
        if "txnindex" in files:
            assert _read_range(directory, segment.txn_index) == _read_file(files["txnindex"])
        else:
            assert segment.txn_index is None


@pytest.mark.parametrize("source", SOURCES)
def test_aiven_layout_gives_the_source_segments_and_indexes(tmp_path, source):
    source_dir, fixture = _fixture(source)
    prefix, ids = write_aiven_partition(source_dir, str(tmp_path), "events", 3, manifest=fixture)
    segments, directory = _partition(str(tmp_path), prefix, AIVEN)
    _check_against_source(segments, directory, source_dir, fixture)
    for segment, expected in zip(segments, fixture["segments"]):
        assert segment.end_offset == expected["batches"][-1]["last_offset"]
        assert segment.segment_id == ids[segment.base_offset]
        assert segment.log_chunks is None
        assert segment.log_object == f"{segment.base_offset:020d}-{segment.segment_id}.log"


def test_txn_fixture_packs_a_transaction_index_somewhere_after_the_others(tmp_path):
    source_dir, fixture = _fixture("txn-0")
    prefix, _ = write_aiven_partition(source_dir, str(tmp_path), "events", 0, manifest=fixture)
    segments, _ = _partition(str(tmp_path), prefix, AIVEN)
    with_txn = [s for s in segments if s.txn_index is not None]
    assert len(with_txn) == 6  # every segment but 129 has aborted transactions
    for segment in with_txn:
        assert segment.txn_index.name == segment.offset_index.name
        assert segment.txn_index.offset > segment.time_index.offset > 0


@pytest.mark.parametrize("chunk_size", [1000, 4096, 1 << 20])
def test_compressed_aiven_segments_read_back_byte_for_byte(tmp_path, chunk_size):
    source_dir, fixture = _fixture("plain-0")
    prefix, _ = write_aiven_partition(source_dir, str(tmp_path), "events", 0, manifest=fixture,
                                      compression=True, chunk_size=chunk_size)
    segments, directory = _partition(str(tmp_path), prefix, AIVEN)
    _check_against_source(segments, directory, source_dir, fixture)
    rng = random.Random(7)
    read = reader_of(directory)
    for segment, (_, files) in zip(segments, source_segments(source_dir)):
        log = _read_file(files["log"])
        assert len(segment.log_chunks) == -(-len(log) // chunk_size)
        assert os.path.getsize(os.path.join(directory, segment.log_object)) != len(log)
        for _ in range(20):
            start = rng.randrange(len(log))
            length = rng.randrange(3 * chunk_size)
            assert read_log_range(segment, read, start, length) == log[start:start + length]


@pytest.mark.parametrize("source", SOURCES)
def test_local_tiered_storage_layout_gives_the_source_segments(tmp_path, source):
    source_dir, fixture = _fixture(source)
    prefix, ids = write_local_tiered_partition(source_dir, str(tmp_path), "events", 2,
                                               manifest=fixture)
    segments, directory = _partition(str(tmp_path), prefix, LOCAL)
    _check_against_source(segments, directory, source_dir, fixture)
    assert all(s.end_offset is None and s.log_chunks is None for s in segments)
    assert [s.segment_id for s in segments] == [ids[s.base_offset] for s in segments]


def test_partitions_of_both_layouts_are_found_and_other_paths_ignored(tmp_path):
    root = str(tmp_path)
    plain_dir, plain = _fixture("plain-0")
    txn_dir, txn = _fixture("txn-0")
    aiven_prefix, _ = write_aiven_partition(plain_dir, root, "orders.v1-eu", 12,
                                            manifest=plain, key_prefix="cluster-a/")
    local_prefix, _ = write_local_tiered_partition(txn_dir, root, "pay-ments-7", 4, manifest=txn)
    shutil.copytree(plain_dir, os.path.join(root, "plain-0"))  # a broker log dir: not remote
    (tmp_path / "cluster-a" / "README.txt").write_text("notes")
    found = find_remote_partitions(listing_of(root))
    assert [(p.layout, p.topic, p.partition, p.prefix) for p in found] == [
        (AIVEN, "orders.v1-eu", 12, aiven_prefix), (LOCAL, "pay-ments-7", 4, local_prefix)]
    assert aiven_prefix.startswith("cluster-a/orders.v1-eu-")
    assert found[0].topic_id == aiven_prefix.split("/")[1][-22:]


def _aiven(tmp_path, source="plain-0", **options):
    source_dir, fixture = _fixture(source)
    prefix, ids = write_aiven_partition(source_dir, str(tmp_path), "events", 0,
                                        manifest=fixture, **options)
    return os.path.join(str(tmp_path), prefix), ids


def _segments(directory, layout=AIVEN):
    return remote_segments(layout, listing_of(directory), reader_of(directory))


def test_unknown_files_are_skipped(tmp_path):
    directory, _ = _aiven(tmp_path)
    before = _segments(directory)
    for name in ("README", ".DS_Store", "00000000000000000000.log", "notes-1.json",
                 "00000000000000000000.index", "leader-epoch-checkpoint"):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(b"x")
    os.makedirs(os.path.join(directory, "sub"))
    shutil.copy(os.path.join(directory, before[0].log_object), os.path.join(directory, "sub"))
    assert _segments(directory) == before


def test_an_upload_without_its_manifest_is_skipped(tmp_path):
    directory, ids = _aiven(tmp_path)
    stem = os.path.join(directory, f"{113:020d}-{ids[113]}")
    os.remove(stem + ".rsm-manifest")
    assert [s.base_offset for s in _segments(directory)] == [0, 193, 326]


@pytest.mark.parametrize("name", [
    "0000000000000000113-AAAAAAAAAAAAAAAAAAAAAA.log",     # 19 digits
    "00000000000000000113-AAAAAAAAAAAAAAAAAAAAA.log",      # 21-character id
    "00000000000000000113-AAAAAAAAAAAAAAAAAAAAAA!.rsm-manifest",
    "00000000000000000113-AAAAAAAAAAAAAAAAAAAA==.indexes",
])
def test_names_that_look_like_segment_objects_but_are_wrong_raise(tmp_path, name):
    directory, _ = _aiven(tmp_path)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(b"x")
    with pytest.raises(CorruptLogError) as error:
        _segments(directory)
    assert error.value.path == name


def _manifest_path(directory, ids, base=113):
    return os.path.join(directory, f"{base:020d}-{ids[base]}.rsm-manifest")


def _edit_manifest(path, edit):
    with open(path) as f:
        document = json.load(f)
    edit(document)
    with open(path, "w") as f:
        json.dump(document, f)


def _set(path, value):
    def edit(document):
        *parents, last = path
        for key in parents:
            document = document[key]
        document[last] = value
    return edit


def _delete(*path):
    def edit(document):
        *parents, last = path
        for key in parents:
            document = document[key]
        del document[last]
    return edit


@pytest.mark.parametrize("edit", [
    _delete("chunkIndex"),
    _delete("segmentIndexes"),
    _delete("segmentIndexes", "offset"),
    _set(["chunkIndex", "type"], "striped"),
    _set(["chunkIndex", "originalFileSize"], 12),
    _set(["chunkIndex", "originalChunkSize"], True),
    _set(["chunkIndex", "transformedChunkSize"], 4124),
    _set(["compression"], "no"),
    _set(["compression"], True),
    _set(["segmentIndexes", "timestamp", "size"], 1 << 20),
    _set(["segmentIndexes", "offset", "position"], -1),
    _set(["remoteLogSegmentMetadata", "startOffset"], 114),
    _set(["remoteLogSegmentMetadata", "endOffset"], 100),
    _set(["remoteLogSegmentMetadata", "remoteLogSegmentId", "id"], "B" * 22),
    _set(["remoteLogSegmentMetadata", "eventTimestampMs"], "soon"),
])
def test_malformed_manifests_raise_naming_the_manifest(tmp_path, edit):
    directory, ids = _aiven(tmp_path)
    path = _manifest_path(directory, ids)
    _edit_manifest(path, edit)
    with pytest.raises(CorruptLogError) as error:
        _segments(directory)
    assert error.value.path == os.path.basename(path)


@pytest.mark.parametrize("content", [b"", b"{not json", b"[]", b"\xff\xfe"])
def test_manifests_that_are_not_json_objects_raise(tmp_path, content):
    directory, ids = _aiven(tmp_path)
    path = _manifest_path(directory, ids)
    with open(path, "wb") as f:
        f.write(content)
    with pytest.raises(CorruptLogError, match="rsm-manifest"):
        _segments(directory)


def test_damaged_compressed_chunk_sizes_raise(tmp_path):
    directory, ids = _aiven(tmp_path, compression=True)
    path = _manifest_path(directory, ids)
    _edit_manifest(path, _set(["chunkIndex", "transformedChunks"], "AAAA"))
    with pytest.raises(CorruptLogError) as error:
        _segments(directory)
    assert error.value.path == os.path.basename(path)


def test_encrypted_segments_and_unknown_versions_are_refused_by_name(tmp_path):
    directory, ids = _aiven(tmp_path)
    path = _manifest_path(directory, ids)
    _edit_manifest(path, _set(["encryption"], {"dataKey": "key:AAAA", "aad": "CgsMDQ=="}))
    with pytest.raises(UnsupportedFormatError, match=os.path.basename(path) + ".*encrypted"):
        _segments(directory)
    _edit_manifest(path, _set(["encryption"], None))
    assert len(_segments(directory)) == 4
    _edit_manifest(path, _set(["version"], "2"))
    with pytest.raises(UnsupportedFormatError, match=os.path.basename(path)):
        _segments(directory)


def test_a_manifest_without_its_log_raises(tmp_path):
    directory, ids = _aiven(tmp_path)
    os.remove(os.path.join(directory, f"{193:020d}-{ids[193]}.log"))
    with pytest.raises(CorruptLogError) as error:
        _segments(directory)
    assert error.value.path == f"{193:020d}-{ids[193]}.rsm-manifest"


def test_manifests_of_releases_without_segment_metadata_still_parse(tmp_path):
    directory, ids = _aiven(tmp_path)
    _edit_manifest(_manifest_path(directory, ids), _delete("remoteLogSegmentMetadata"))
    segments = _segments(directory)
    assert [s.end_offset for s in segments] == [112, None, 325, 370]


def _upload_again(directory, ids, base, seed, event_timestamp_ms, end_offset=None):
    """Upload the segment at `base` once more under a new id, as a retried copy does."""
    source_dir, fixture = _fixture("plain-0")
    files = dict(source_segments(source_dir))[base]
    facts = segment_facts(fixture, base)
    if end_offset is not None:
        facts = dict(facts, end_offset=end_offset)
    with open(_manifest_path(directory, ids, base)) as f:
        topic_id = json.load(f)["remoteLogSegmentMetadata"]["remoteLogSegmentId"][
            "topicIdPartition"]["topicId"]
    segment_id = kafka_uuid(random.Random(seed))
    write_aiven_segment(directory, "", "events", topic_id, 0, base, segment_id, files, facts,
                        compression=False, chunk_size=4096, event_timestamp_ms=event_timestamp_ms)
    return segment_id


def test_a_duplicate_upload_resolves_to_the_latest_copy(tmp_path):
    directory, ids = _aiven(tmp_path)  # segment 113's copy started at 1700000000113
    later = _upload_again(directory, ids, 113, seed=41, event_timestamp_ms=1700000009999)
    assert [s.segment_id for s in _segments(directory)] == [ids[0], later, ids[193], ids[326]]
    _upload_again(directory, ids, 193, seed=42, event_timestamp_ms=1600000000000)
    assert _segments(directory)[2].segment_id == ids[193]


def test_duplicates_the_manifests_cannot_settle_raise(tmp_path):
    directory, ids = _aiven(tmp_path)
    _upload_again(directory, ids, 113, seed=41, event_timestamp_ms=1700000000113)
    with pytest.raises(CorruptLogError, match="same eventTimestampMs"):
        _segments(directory)

    directory, ids = _aiven(tmp_path / "other")
    _upload_again(directory, ids, 113, seed=41, event_timestamp_ms=1800000000000,
                  end_offset=150)
    with pytest.raises(CorruptLogError, match="2 remote segments start at offset 113"):
        _segments(directory)


def test_overlapping_segments_raise(tmp_path):
    directory, ids = _aiven(tmp_path)
    _edit_manifest(_manifest_path(directory, ids, 113),
                   _set(["remoteLogSegmentMetadata", "endOffset"], 193))
    with pytest.raises(CorruptLogError, match="overlap") as error:
        _segments(directory)
    assert error.value.path == f"{113:020d}-{ids[113]}.log"


def test_local_layout_duplicates_and_incomplete_filesets_raise(tmp_path):
    source_dir, fixture = _fixture("plain-0")
    prefix, ids = write_local_tiered_partition(source_dir, str(tmp_path), "events", 0,
                                               manifest=fixture)
    directory = os.path.join(str(tmp_path), prefix)
    os.remove(os.path.join(directory, f"{326:020d}-{ids[326]}.snapshot"))
    with pytest.raises(CorruptLogError, match=r"\.snapshot"):
        _segments(directory, LOCAL)

    prefix, ids = write_local_tiered_partition(source_dir, str(tmp_path / "again"), "events", 0,
                                               manifest=fixture)
    directory = os.path.join(str(tmp_path / "again"), prefix)
    other = kafka_uuid(random.Random(99))
    for name in os.listdir(directory):
        if name.startswith(f"{193:020d}-"):
            shutil.copy(os.path.join(directory, name),
                        os.path.join(directory, name.replace(ids[193], other)))
    with pytest.raises(CorruptLogError, match="2 segments start at offset 193"):
        _segments(directory, LOCAL)
