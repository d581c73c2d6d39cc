"""Kafka tiered storage (KIP-405) layouts read as one offset space, from a local copy and
from an S3 store: Aiven's plugin layout (segments, packed .indexes, manifests) and Kafka's
LocalTieredStorage layout, laid out from the Kafka-written fixtures by
support/tiered_layout.py."""
import os

import pytest

from support.manifest import arrow_rows, expected_rows, load_manifest
from support.tiered_layout import write_aiven_partition, write_local_tiered_partition
from segmentlog_datasource.errors import CorruptLogError
from segmentlog_datasource.format.scan import ScanOptions
from segmentlog_datasource.read.fragments import scan_fragments
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments

CASES = ["plain-0", "txn-0", "compacted-0", "bigoffset-0", "codec-zstd-0"]
BUCKET = "tiered"


def _layout(kafka_logdir, root, writer):
    for name in CASES:
        topic, _, partition = name.rpartition("-")
        writer(os.path.join(kafka_logdir, name), str(root), topic, int(partition),
               manifest=load_manifest(kafka_logdir, name))
    return str(root)


@pytest.fixture(scope="module")
def aiven_root(kafka_logdir, tmp_path_factory):
    return _layout(kafka_logdir, tmp_path_factory.mktemp("aiven") / "bucket-prefix",
                   write_aiven_partition)


@pytest.fixture(scope="module")
def local_tiered_root(kafka_logdir, tmp_path_factory):
    return _layout(kafka_logdir, tmp_path_factory.mktemp("lts") / "remote",
                   write_local_tiered_partition)


def _rows(options):
    read = parse_read_options(dict(options, includeHeaders="true"))
    return arrow_rows(list(scan_fragments(plan_fragments(read, Constraints()),
                                          ScanOptions(include_headers=True))))


def _check_every_case(path, kafka_logdir, extra=None):
    """Each isolation level's read of the whole layout, its splits scanned partition by
    partition (one planning of the layout, not one per partition: in a store each is a
    listing of the whole prefix)."""
    for isolation in ("read_uncommitted", "read_committed"):
        read = parse_read_options({"path": path, "isolationLevel": isolation,
                                   "includeHeaders": "true", **(extra or {})})
        by_partition = {}
        for fragment in plan_fragments(read, Constraints()):
            by_partition.setdefault(f"{fragment.topic}-{fragment.partition}",
                                    []).append(fragment)
        assert sorted(by_partition) == sorted(CASES), (path, isolation)
        for name in CASES:
            rows = arrow_rows(list(scan_fragments(by_partition[name],
                                                  ScanOptions(include_headers=True))))
            assert rows == expected_rows(load_manifest(kafka_logdir, name),
                                         isolation), (name, isolation)


@pytest.mark.parametrize("layout", ["aiven", "local"])
def test_a_tiered_layout_on_disk_reads_as_kafka_read_it(layout, aiven_root, local_tiered_root,
                                                        kafka_logdir):
    _check_every_case(aiven_root if layout == "aiven" else local_tiered_root, kafka_logdir)


def test_lookups_in_a_tiered_layout_use_its_indexes(aiven_root, kafka_logdir):
    manifest = load_manifest(kafka_logdir, "plain-0")
    offsets = [row["offset"] for row in expected_rows(manifest)]
    target = offsets[len(offsets) // 2]
    read = parse_read_options({"path": aiven_root, "subscribe": "plain",
                               "includeHeaders": "true"})
    fragments = plan_fragments(read, Constraints(offset_values=frozenset({target})))
    # the offset index (a slice of the packed .indexes object) narrowed the read
    whole = sum(os.path.getsize(os.path.join(dirpath, name))
                for dirpath, _, names in os.walk(aiven_root)
                for name in names if name.endswith(".log") and "/plain-" in dirpath + "/")
    assert sum(f.bytes for f in fragments) < whole
    rows = arrow_rows(list(scan_fragments(fragments, ScanOptions(include_headers=True))))
    assert rows == expected_rows(manifest, lo=target, hi=target + 1)


def test_a_tiered_layout_in_s3_reads_as_kafka_read_it(s3_server, aiven_root,
                                                      local_tiered_root, kafka_logdir):
    s3_server.make_bucket(BUCKET)
    s3_server.upload_tree(aiven_root, BUCKET, "aiven")
    s3_server.upload_tree(local_tiered_root, BUCKET, "lts")
    store = s3_server.store_options()
    _check_every_case(f"s3://{BUCKET}/aiven", kafka_logdir, store)
    _check_every_case(f"s3://{BUCKET}/lts", kafka_logdir, store)


@pytest.mark.parametrize("chunk_size", [512, 4096])
def test_a_tiered_layout_stored_in_compressed_chunks_reads_the_same(kafka_logdir, tmp_path,
                                                                    chunk_size):
    root = tmp_path / "compressed"
    for name in CASES:
        topic, _, partition = name.rpartition("-")
        write_aiven_partition(os.path.join(kafka_logdir, name), str(root), topic,
                              int(partition), manifest=load_manifest(kafka_logdir, name),
                              compression=True, chunk_size=chunk_size)
    _check_every_case(str(root), kafka_logdir)
    # splits inside a segment start and end inside chunks
    read = parse_read_options({"path": str(root), "subscribe": "plain",
                               "maxPartitionBytes": "700", "includeHeaders": "true"})
    fragments = plan_fragments(read, Constraints())
    assert len(fragments) > 2
    rows = arrow_rows(list(scan_fragments(fragments, ScanOptions(include_headers=True))))
    assert rows == expected_rows(load_manifest(kafka_logdir, "plain-0"))


def test_a_damaged_compressed_chunk_names_the_object(kafka_logdir, tmp_path):
    root = tmp_path / "damaged"
    prefix, ids = write_aiven_partition(
        os.path.join(kafka_logdir, "plain-0"), str(root), "plain", 0,
        manifest=load_manifest(kafka_logdir, "plain-0"), compression=True, chunk_size=1024)
    base = min(ids)
    log_object = os.path.join(str(root), prefix, f"{base:020d}-{ids[base]}.log")
    with open(log_object, "r+b") as handle:
        handle.seek(40)
        byte = handle.read(1)
        handle.seek(40)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(CorruptLogError) as info:
        _rows({"path": str(root)})
    assert info.value.path == log_object
