"""includeMetadata and includeControlRecords: each row's batch metadata, control records as rows.

Expected values come from kafka-python's batch objects (its own reading of the segment
files, for the kafka-written partitions) and from the internal-topics manifests (what
Apache Kafka's reader returned), never from the code under test. Both accumulators (the
compiled and the pure-Python one) are read and must agree.
"""
import base64
import os

import pyarrow as pa
import pytest
from kafka.record import MemoryRecords

from support.compiled import compiled
from support.fixtures import broker_disks_root, internal_topics_root
from support.manifest import load_manifest, partition_names
from segmentlog_datasource.format import (PartitionLog, ScanOptions, SegmentRange,
                                          TransactionFilter, discover_partitions, scan_segment)
from segmentlog_datasource.format.log import discover_copies
from segmentlog_datasource.format.arrow import (BASE_FIELDS, CONTROL_FIELDS, METADATA_FIELDS,
                                                arrow_schema)
from segmentlog_datasource.format.layout import MAX_OFFSET

METADATA = [field.name for field in METADATA_FIELDS]
CONTROL = [field.name for field in CONTROL_FIELDS]
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
ACCUMULATORS = [True, False] if compiled is not None else [False]  # use_fast_path


def read(log: PartitionLog, use_fast_path: bool, read_committed=False, **options):
    """The whole partition as one table (small batches: takes inside runs are covered)."""
    transactions = None
    if read_committed:
        transactions = TransactionFilter(log.aborted_transactions(), log.last_stable_offset())
    scan = ScanOptions(use_fast_path=use_fast_path, max_batch_rows=7, **options)
    batches = []
    for segment in log.segments:
        batches.extend(scan_segment(SegmentRange(
            log.topic, log.partition, segment.log_path, segment.size, 0, segment.size, 0,
            MAX_OFFSET, log.is_last(segment), transactions=transactions), scan))
    schema = arrow_schema(options.get("include_headers", False),
                          options.get("include_metadata", False),
                          options.get("include_control_records", False))
    for batch in batches:
        assert batch.schema == schema
    return pa.Table.from_batches(batches, schema=schema)


def read_both(log, **options):
    """read() with each accumulator; they must agree."""
    tables = [read(log, fast, **options) for fast in ACCUMULATORS]
    for table in tables[1:]:
        assert table.equals(tables[0]), log.directory
    return tables[0]


def rows_by_offset(table, columns):
    data = table.select(["offset"] + columns).to_pydict()
    return {offset: tuple(data[name][i] for name in columns)
            for i, offset in enumerate(data["offset"])}


def kafka_python_metadata(log: PartitionLog):
    """{offset: metadata columns} of every data record, as kafka-python reads the files."""
    expected = {}
    for segment in log.segments:
        with open(segment.log_path, "rb") as handle:
            data = handle.read()
        records = MemoryRecords(data)
        position = 0
        while records.has_next():
            batch = records.next_batch()
            if batch is None:
                break  # a torn tail
            size = batch.size_in_bytes
            if batch.magic == 2 and batch.is_control_batch:
                position += size
                continue
            rows = list(batch)
            # Kafka's RecordBatch.baseOffset(): a legacy wrapper's is its first inner offset
            # (kafka-python's base_offset is the wrapper's own, its last).
            first = batch.base_offset if batch.magic == 2 else rows[0].offset
            for record in rows:
                if batch.magic == 2:
                    sequence = -1 if batch.base_sequence < 0 else batch._increment_sequence(
                        batch.base_sequence, record.offset - batch.base_offset)
                    fields = (batch.producer_id, batch.producer_epoch, sequence,
                              batch.leader_epoch, batch.is_transactional)
                else:
                    fields = (-1, -1, -1, -1, False)
                expected[record.offset] = fields + (
                    CODEC_NAMES[batch.compression_type], batch.magic, first,
                    os.path.basename(segment.log_path), position)
            position += size
    return expected


@pytest.fixture(scope="module")
def kafka_written_logs(kafka_logdir):
    return discover_partitions([kafka_logdir])


@pytest.fixture(scope="module")
def internal_topic_logs():
    root = internal_topics_root()
    return root, {os.path.basename(log.directory): log for log in discover_partitions([root])}


def test_metadata_columns_equal_kafka_pythons_batches(kafka_written_logs):
    magics = set()
    for log in kafka_written_logs:
        table = read_both(log, include_metadata=True)
        assert table.column_names == [f.name for f in BASE_FIELDS] + METADATA
        got = rows_by_offset(table, METADATA)
        assert got == kafka_python_metadata(log), log.directory
        magics |= set(table.column("magic").to_pylist())
    assert magics == {0, 1, 2}  # legacy messages and wrappers are among them


def test_metadata_columns_of_every_brokers_copy_and_internal_topic(internal_topic_logs):
    """The other fixture sets: each broker's copy of each partition (leader epochs,
    producers, a diverged follower), and the internal topics, against kafka-python."""
    root = broker_disks_root()
    copies = discover_copies([os.path.join(root, name) for name in sorted(os.listdir(root))
                              if name.startswith("broker-")])
    assert len(copies) > 3
    for log in copies + list(internal_topic_logs[1].values()):
        table = read(log, ACCUMULATORS[0], include_metadata=True)
        assert rows_by_offset(table, METADATA) == kafka_python_metadata(log), log.directory


def test_legacy_wrappers_give_their_first_inner_offset_and_no_v2_fields(kafka_logdir):
    log = PartitionLog.open(os.path.join(kafka_logdir, "legacy-v1-0"))
    table = read_both(log, include_metadata=True, include_headers=True)
    rows = table.select(["offset", "batchOffset", "compression", "producerId", "sequence",
                         "leaderEpoch", "isTransactional", "magic"]).to_pylist()
    wrapped = [row for row in rows if row["compression"] == "gzip"]
    assert wrapped and {row["magic"] for row in rows} == {1}
    # The gzip wrapper at byte 2066 holds offsets 4..28 (the manifest's batch): all show 4.
    assert {row["batchOffset"] for row in wrapped if 4 <= row["offset"] <= 28} == {4}
    assert {(row["producerId"], row["sequence"], row["leaderEpoch"], row["isTransactional"])
            for row in rows} == {(-1, -1, -1, False)}


def _expected_internal_rows(manifest, with_control: bool):
    expected = {}
    for record in manifest["records"]:
        expected[record["offset"]] = record
    if with_control:
        for record in manifest["control_records"]:
            expected[record["offset"]] = record
    return dict(sorted(expected.items()))


def _manifest_columns(record):
    control_type = record.get("control_type")
    marker = control_type in ("COMMIT", "ABORT")
    value = base64.b64decode(record["value_b64"]) if record["value_b64"] is not None else None
    return (base64.b64decode(record["key_b64"]) if record["key_b64"] is not None else None,
            None if marker else value,
            record["producer_id"], record["producer_epoch"], record["sequence"],
            record["partition_leader_epoch"], record["is_transactional"], record["compression"],
            record["magic"], record["batch_base_offset"], record["segment"], record["position"],
            control_type, record.get("coordinator_epoch"))


def test_internal_topics_metadata_and_control_rows_equal_the_manifests(internal_topic_logs):
    root, logs = internal_topic_logs
    names = partition_names(root)
    assert len(names) == 4 and sorted(logs) == names
    control_types = set()
    for name in names:
        manifest = load_manifest(root, name)
        table = read_both(logs[name], include_metadata=True, include_control_records=True)
        assert table.column_names[-len(METADATA + CONTROL):] == METADATA + CONTROL
        got = rows_by_offset(table, ["key", "value"] + METADATA + CONTROL)
        expected = {offset: _manifest_columns(record) for offset, record in
                    _expected_internal_rows(manifest, with_control=True).items()}
        assert got == expected, name
        assert table.column("offset").to_pylist() == sorted(expected), name  # in offset order
        control_types |= {row[-2] for row in got.values()}
    assert control_types == {None, "COMMIT", "ABORT", "LEADER_CHANGE"}


def test_control_records_alone_and_read_committed(internal_topic_logs):
    """Without includeMetadata the two control columns follow the source columns; with
    read_committed the markers are still rows and the aborted batches stay hidden."""
    root, logs = internal_topic_logs
    log = logs["__consumer_offsets-0"]
    for fast in ACCUMULATORS:
        committed = read(log, fast, read_committed=True, include_control_records=True)
        assert committed.column_names == [f.name for f in BASE_FIELDS] + CONTROL
        data_rows = read(log, fast, read_committed=True)
        markers = {record["offset"]: (record["control_type"], record["coordinator_epoch"])
                   for record in load_manifest(root, log.topic + "-0")["control_records"]
                   if record["offset"] < log.last_stable_offset()}
        got = rows_by_offset(committed, CONTROL)
        assert {offset: row for offset, row in got.items() if row[0] is not None} == markers
        assert sorted(set(got) - set(markers)) == data_rows.column("offset").to_pylist()
        assert "ABORT" in {kind for kind, _ in markers.values()}
        # Without the option: the rows and schema of today.
        assert data_rows.schema == arrow_schema(False)
