"""`__remote_log_metadata` as Kafka's RemoteLogMetadataSerde writes it (docs/metadata.md,
"Kafka's internal topics as tables").

The ground truth is the tiered-cluster set: its brokers' `__remote_log_metadata`
partitions, written by Kafka 3.9's serde, and its manifest, which holds every record as
Kafka decoded it. Every record of every replica must decode to the manifest's record,
field by field with JSON types and in Kafka's field order. The records Kafka 3.9 never
wrote (the snapshot record, Kafka 4's tagged txnIndexEmpty) and the broken ones are built
here by `Writer`, a writer of the layout as Kafka's message definitions
(storage/src/main/resources/message/*.json) describe it, independent of the code under
test; it is checked first against Kafka's own bytes.
"""
import base64
import json
import os
import struct
import uuid

import pyarrow as pa
import pytest

from segmentlog_datasource.errors import RecordDecodeError
from segmentlog_datasource.format.internal.registry import internal_topics
from segmentlog_datasource.format.internal.remote_log_metadata import (
    PARTITION_DELETE_STATES, REMOTE_LOG_METADATA, SEGMENT_STATES, decode_remote_log_metadata,
    encode_remote_log_metadata)
from segmentlog_datasource.writer import write_log
from support.fixtures import tiered_cluster_root
from support.kafka_json import as_kafka_json, assert_same
from support.reading import decoded_rows

TOPIC = "__remote_log_metadata"
BROKERS = ("broker-0", "broker-1", "broker-2")
PARTITIONS = range(5)


@pytest.fixture(scope="module")
def manifest():
    with open(os.path.join(tiered_cluster_root(), "manifest.json")) as handle:
        return json.load(handle)


def expected_records(manifest, partition):
    return manifest["partitions"][f"{TOPIC}-{partition}"]["decoded_records"]


@pytest.fixture(scope="module")
def broker_rows():
    """{broker: {(partition, offset): row}} of a decode=remoteLogMetadata read of each
    broker's log dir, as Spark's reader gets the rows."""
    found = {}
    for broker in BROKERS:
        rows = decoded_rows({"path": os.path.join(tiered_cluster_root(), broker),
                             "decode": "remoteLogMetadata"})
        found[broker] = {(row["partition"], row["offset"]): row for row in rows}
    return found


# ------------------------------------------------------------------ an independent writer

class Writer:
    """Kafka's flexible-version encoding, by hand: big-endian numbers, compact (varint
    length + 1) strings, bytes and arrays, an empty tagged-field section closing every
    struct unless tags are given."""

    def __init__(self):
        self.out = bytearray()

    def uvarint(self, value):
        while value >= 0x80:
            self.out.append((value & 0x7F) | 0x80)
            value >>= 7
        self.out.append(value)
        return self

    def fixed(self, code, value):
        self.out += struct.pack(code, value)
        return self

    def string(self, text):
        data = text.encode()
        self.uvarint(len(data) + 1)
        self.out += data
        return self

    def nullable_bytes(self, data):
        if data is None:
            return self.uvarint(0)
        self.uvarint(len(data) + 1)
        self.out += data
        return self

    def uuid(self, text):
        raw = uuid_raw(text)
        assert len(raw) == 16
        self.out += raw
        return self

    def tags(self, tagged=()):
        """The tagged-field section: (tag, body bytes) pairs, in tag order."""
        self.uvarint(len(tagged))
        for tag, body in tagged:
            self.uvarint(tag).uvarint(len(body))
            self.out += body
        return self

    def frame(self, api_key, version=0, frame_version=1):
        return self.uvarint(frame_version).uvarint(api_key).uvarint(version)

    def topic_id_partition(self, entry):
        self.string(entry["name"]).uuid(entry["id"]).fixed(">i", entry["partition"])
        return self.tags()

    def segment_id(self, entry):
        self.topic_id_partition(entry["topicIdPartition"])
        return self.uuid(entry["id"]).tags()

    def leader_epochs(self, epochs):
        self.uvarint(len(epochs) + 1)
        for entry in epochs:
            self.fixed(">i", entry["leaderEpoch"]).fixed(">q", entry["offset"]).tags()
        return self


def uuid_raw(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def txn_index_empty(record):
    """Kafka 4's tag 0 (a bool), written only when true."""
    return [(0, b"\x01")] if record.get("txnIndexEmpty") else []


def write_segment_metadata(record, writer=None):
    writer = (writer or Writer()).frame(0)
    writer.segment_id(record["remoteLogSegmentId"])
    writer.fixed(">q", record["startOffset"]).fixed(">q", record["endOffset"])
    writer.fixed(">i", record["brokerId"]).fixed(">q", record["maxTimestampMs"])
    writer.fixed(">q", record["eventTimestampMs"]).leader_epochs(record["segmentLeaderEpochs"])
    writer.fixed(">i", record["segmentSizeInBytes"]).nullable_bytes(record["customMetadata"])
    writer.fixed(">b", record["remoteLogSegmentState"]).tags(txn_index_empty(record))
    return bytes(writer.out)


def write_segment_update(record):
    writer = Writer().frame(1).segment_id(record["remoteLogSegmentId"])
    writer.fixed(">i", record["brokerId"]).fixed(">q", record["eventTimestampMs"])
    writer.nullable_bytes(record["customMetadata"])
    writer.fixed(">b", record["remoteLogSegmentState"]).tags()
    return bytes(writer.out)


def write_partition_delete(record):
    writer = Writer().frame(2).topic_id_partition(record["topicIdPartition"])
    writer.fixed(">i", record["brokerId"]).fixed(">q", record["eventTimestampMs"])
    writer.fixed(">b", record["remotePartitionDeleteState"]).tags()
    return bytes(writer.out)


def write_snapshot(record):
    writer = Writer().frame(3).uuid(record["segmentId"])
    writer.fixed(">q", record["startOffset"]).fixed(">q", record["endOffset"])
    writer.fixed(">i", record["brokerId"]).fixed(">q", record["maxTimestampMs"])
    writer.fixed(">q", record["eventTimestampMs"]).leader_epochs(record["segmentLeaderEpochs"])
    writer.fixed(">i", record["segmentSizeInBytes"]).nullable_bytes(record["customMetadata"])
    writer.fixed(">b", record["remoteLogSegmentState"]).tags(txn_index_empty(record))
    return bytes(writer.out)


WRITERS = {"REMOTE_LOG_SEGMENT_METADATA_RECORD": write_segment_metadata,
           "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD": write_segment_update,
           "REMOTE_PARTITION_DELETE_METADATA_RECORD": write_partition_delete,
           "REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD": write_snapshot}


def a_uuid(seed):
    return uuid_text(uuid.UUID(int=seed * 0x9E3779B97F4A7C15 % (1 << 128)).bytes)


def uuid_text(raw):
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


SEGMENT_ID = {"topicIdPartition": {"name": "clicks", "id": a_uuid(1), "partition": 3},
              "id": a_uuid(2)}
SEGMENT = {"remoteLogSegmentId": SEGMENT_ID, "startOffset": 100, "endOffset": 199,
           "brokerId": 2, "maxTimestampMs": 1700000000999, "eventTimestampMs": 1700000100000,
           "segmentLeaderEpochs": [{"leaderEpoch": 4, "offset": 100},
                                   {"leaderEpoch": 6, "offset": 150}],
           "segmentSizeInBytes": 6000, "customMetadata": None, "remoteLogSegmentState": 0}
SNAPSHOT = {"segmentId": a_uuid(3), "startOffset": 0, "endOffset": 99, "brokerId": 1,
            "maxTimestampMs": 1700000000500, "eventTimestampMs": 1700000200000,
            "segmentLeaderEpochs": [{"leaderEpoch": 0, "offset": 0}],
            "segmentSizeInBytes": 5120, "customMetadata": b"\x01plugin\xff",
            "remoteLogSegmentState": 1}


# ------------------------------------------------------------------ Kafka's records

@pytest.mark.parametrize("broker", BROKERS)
@pytest.mark.parametrize("partition", PARTITIONS)
def test_every_record_of_every_replica_decodes_as_kafka_decoded_it(manifest, broker_rows,
                                                                   broker, partition):
    expected = expected_records(manifest, partition)
    rows = broker_rows[broker]
    offsets = sorted(offset for p, offset in rows if p == partition)
    assert offsets == [record["offset"] for record in expected]
    for record in expected:
        row = rows[(partition, record["offset"])]
        where = f"{broker}/{TOPIC}-{partition} offset {record['offset']}"
        assert row["key"] is None, where
        assert round(row["timestamp"].timestamp() * 1000) == record["timestamp"], where
        decoded = decode_remote_log_metadata(row["value"])
        assert (decoded.record_type, decoded.key_version, decoded.value_version,
                decoded.key, decoded.deleted, decoded.known) == \
            (record["type"], None, 0, None, False, True), where
        assert_same(as_kafka_json(decoded.value), record["record"], where)
        assert list(decoded.value) == list(record["record"]), where  # Kafka's field order
        # the read's columns: the member of the record's type holds the same fields
        assert (row["recordType"], row["keyVersion"], row["valueVersion"], row["deleted"]) \
            == (record["type"], None, 0, False), where
        members = row["valueDecoded"]
        assert [name for name, member in members.items() if member is not None] == \
            [record["type"]], where
        member = members[record["type"]]
        assert {name: item for name, item in member.items() if item is not None} == \
            {name: item for name, item in decoded.value.items() if item is not None}, where
        assert row["keyDecoded"] is None, where


def test_the_reader_inputs_copies_are_the_manifest_records(manifest):
    # the copies the manifest lists, one per partition, hold every decoded record
    inputs = manifest["reader_inputs"]["remote_log_metadata_partitions"]
    assert sorted(int(path.rsplit("-", 1)[1]) for path in inputs) == list(PARTITIONS)
    for path in inputs:
        broker, name = path.split("/")
        partition = int(name.rsplit("-", 1)[1])
        rows = decoded_rows({"path": os.path.join(tiered_cluster_root(), broker),
                             "assign": json.dumps({TOPIC: [partition]}),
                             "decode": "remoteLogMetadata"})
        assert [(row["offset"], row["recordType"]) for row in rows] == \
            [(r["offset"], r["type"]) for r in expected_records(manifest, partition)]


def test_the_fixture_holds_every_state_kafka_39_writes(manifest):
    records = [r for p in PARTITIONS for r in expected_records(manifest, p)]
    segment_states = {r["record"]["remoteLogSegmentState"] for r in records
                      if "remoteLogSegmentState" in r["record"]}
    delete_states = {r["record"]["remotePartitionDeleteState"] for r in records
                     if "remotePartitionDeleteState" in r["record"]}
    assert segment_states == set(SEGMENT_STATES) and delete_states == set(PARTITION_DELETE_STATES)
    assert SEGMENT_STATES == {0: "COPY_SEGMENT_STARTED", 1: "COPY_SEGMENT_FINISHED",
                              2: "DELETE_SEGMENT_STARTED", 3: "DELETE_SEGMENT_FINISHED"}
    assert PARTITION_DELETE_STATES == {0: "DELETE_PARTITION_MARKED",
                                       1: "DELETE_PARTITION_STARTED",
                                       2: "DELETE_PARTITION_FINISHED"}


def test_the_writer_and_the_encoder_give_kafkas_bytes(manifest, broker_rows):
    rows = broker_rows["broker-0"]
    for partition in PARTITIONS:
        for record in expected_records(manifest, partition):
            kafka = rows[(partition, record["offset"])]["value"]
            assert WRITERS[record["type"]](record["record"]) == kafka, record["offset"]
            assert encode_remote_log_metadata(record["type"], record["record"]) == kafka


# ------------------------------------------------------------------ built by hand

def test_the_snapshot_record():
    decoded = decode_remote_log_metadata(write_snapshot(SNAPSHOT))
    assert (decoded.record_type, decoded.value_version, decoded.key) == \
        ("REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD", 0, None)
    assert decoded.value == SNAPSHOT and list(decoded.value) == list(SNAPSHOT)
    with_tag = dict(SNAPSHOT, txnIndexEmpty=True)
    assert decode_remote_log_metadata(write_snapshot(with_tag)).value == with_tag
    assert encode_remote_log_metadata(3, with_tag) == write_snapshot(with_tag)


def test_kafka_4_txn_index_empty_tag_and_unknown_tags():
    # Kafka 4.0+ writes tag 0 when the segment's transaction index is empty, in version 0
    tagged = dict(SEGMENT, txnIndexEmpty=True)
    decoded = decode_remote_log_metadata(write_segment_metadata(tagged))
    assert decoded.value == tagged
    assert list(decoded.value)[-2:] == ["remoteLogSegmentState", "txnIndexEmpty"]
    # false is its default, which Kafka does not write: no field, as Kafka's JSON
    assert "txnIndexEmpty" not in decode_remote_log_metadata(
        write_segment_metadata(SEGMENT)).value
    # a tag no version of Kafka defines is passed over, as Kafka's reader does
    writer = Writer().frame(1).segment_id(SEGMENT_ID)
    writer.fixed(">i", 0).fixed(">q", 5).nullable_bytes(b"md").fixed(">b", 2)
    writer.tags([(0, b"\x01"), (9, b"future")])
    decoded = decode_remote_log_metadata(bytes(writer.out))
    assert decoded.value == {"remoteLogSegmentId": SEGMENT_ID, "brokerId": 0,
                             "eventTimestampMs": 5, "customMetadata": b"md",
                             "remoteLogSegmentState": 2}
    # ... and so are tags inside the nested structs
    writer = Writer().frame(2).string("t").uuid(a_uuid(5)).fixed(">i", 1)
    writer.tags([(3, b"xy")]).fixed(">i", 0).fixed(">q", 9).fixed(">b", 1).tags()
    assert decode_remote_log_metadata(bytes(writer.out)).value == {
        "topicIdPartition": {"name": "t", "id": a_uuid(5), "partition": 1},
        "brokerId": 0, "eventTimestampMs": 9, "remotePartitionDeleteState": 1}


def test_a_tag_of_the_wrong_size_is_an_error():
    good = write_segment_metadata(SEGMENT)
    broken = good[:-1] + bytes([1, 0, 2, 1, 1])  # txnIndexEmpty said to take 2 bytes
    # Kafka's generated reader reads a known tag's value without checking its size: the
    # byte the size claims past the bool is left over, which the serde refuses
    with pytest.raises(RecordDecodeError, match="REMOTE_LOG_SEGMENT_METADATA_RECORD "
                                                r"\(api key 0\) version 0: .*1 more bytes "
                                                r"follow"):
        decode_remote_log_metadata(broken)


# ------------------------------------------------------------------ errors

def test_frame_version_api_key_and_version_errors_name_what_is_wrong():
    body = write_segment_update(dict(SEGMENT, remoteLogSegmentState=1))[3:]
    cases = [
        (Writer().frame(0, frame_version=0), "frame version 0 is unknown (only frame "
                                             "version 1 is defined)"),
        (Writer().frame(0, frame_version=2), "frame version 2 is unknown"),
        (Writer().frame(4), "api key 4, which is no record type of __remote_log_metadata "
                            "(0 REMOTE_LOG_SEGMENT_METADATA_RECORD, 1 "),
        (Writer().frame(17), "api key 17, which is no record type"),
        (Writer().frame(1, version=1), "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD (api key "
                                       "1) version 1: RemoteLogSegmentMetadataUpdateRecord "
                                       "version 1 is unknown (versions 0 to 0 are defined)"),
        (Writer().uvarint(1).uvarint(1 << 15), "record type (api key) is 32768, larger than "
                                               "32767"),
    ]
    for writer, message in cases:
        with pytest.raises(RecordDecodeError) as failure:
            decode_remote_log_metadata(bytes(writer.out) + body)
        assert str(failure.value).startswith("remote log metadata record"), failure.value
        assert message in str(failure.value), (message, str(failure.value))
    with pytest.raises(RecordDecodeError, match="remote log metadata record has a null value"):
        decode_remote_log_metadata(None)


def test_truncated_and_overlong_values_are_errors():
    for record, build in [(SEGMENT, write_segment_metadata), (SNAPSHOT, write_snapshot),
                          (dict(SEGMENT, remoteLogSegmentState=3), write_segment_update)]:
        data = build(record)
        for end in range(len(data)):
            with pytest.raises(RecordDecodeError, match="remote log metadata record") as failure:
                decode_remote_log_metadata(data[:end])
            reason = str(failure.value)
            assert ("ends" in reason or "frame version" in reason or "runs past" in reason), \
                (end, reason)
        with pytest.raises(RecordDecodeError, match="1 more bytes follow"):
            decode_remote_log_metadata(data + b"\x00")
    cut = write_segment_metadata(SEGMENT)[:20]
    with pytest.raises(RecordDecodeError, match="REMOTE_LOG_SEGMENT_METADATA_RECORD "
                                                r"\(api key 0\) version 0: .*ends early"):
        decode_remote_log_metadata(cut)


def test_what_kafkas_serde_refuses_though_it_parses():
    cases = [
        (write_segment_metadata(dict(SEGMENT, remoteLogSegmentState=4)),
         "remoteLogSegmentState is 4, which is no RemoteLogSegmentState (0 "
         "COPY_SEGMENT_STARTED, 1 COPY_SEGMENT_FINISHED"),
        (write_segment_update(dict(SEGMENT, remoteLogSegmentState=-1)),
         "remoteLogSegmentState is -1, which is no RemoteLogSegmentState"),
        (write_partition_delete({"topicIdPartition": SEGMENT_ID["topicIdPartition"],
                                 "brokerId": 0, "eventTimestampMs": 1,
                                 "remotePartitionDeleteState": 3}),
         "remotePartitionDeleteState is 3, which is no RemotePartitionDeleteState (0 "
         "DELETE_PARTITION_MARKED"),
        (write_snapshot(dict(SNAPSHOT, segmentLeaderEpochs=[])),
         "REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD (api key 3) version 0: "
         "segmentLeaderEpochs is empty"),
        (write_segment_metadata(dict(SEGMENT, segmentLeaderEpochs=[])),
         "segmentLeaderEpochs is empty"),
        (write_segment_metadata(dict(SEGMENT, startOffset=-1)),
         "REMOTE_LOG_SEGMENT_METADATA_RECORD (api key 0) version 0: startOffset is -1: a "
         "remote segment's start offset cannot be negative"),
        (write_segment_metadata(dict(SEGMENT, endOffset=99)),
         "endOffset 99 is below startOffset 100"),
    ]
    for data, message in cases:
        with pytest.raises(RecordDecodeError) as failure:
            decode_remote_log_metadata(data)
        assert message in str(failure.value), (message, str(failure.value))
    # a one-record segment ends where it starts; the snapshot record's offsets are not
    # checked by Kafka's serde
    single = dict(SEGMENT, endOffset=100)
    assert decode_remote_log_metadata(write_segment_metadata(single)).value == single
    odd = dict(SNAPSHOT, startOffset=-1, endOffset=-5)
    assert decode_remote_log_metadata(write_snapshot(odd)).value == odd


def test_a_read_names_the_topic_partition_and_offset_of_an_undecodable_record(tmp_path):
    good = write_segment_metadata(SEGMENT)
    bad = bytes([1, 7, 0]) + good[3:]  # api key 7
    write_log(str(tmp_path), pa.table({"key": pa.array([None, None, None], pa.binary()),
                                       "value": [good, bad, good]}),
              topic=TOPIC, num_partitions=1)
    options = {"path": str(tmp_path), "decode": "remoteLogMetadata"}
    with pytest.raises(RecordDecodeError) as failure:
        decoded_rows(options)
    assert (failure.value.topic, failure.value.partition, failure.value.offset) == (TOPIC, 0, 1)
    assert str(failure.value).startswith(f"{TOPIC}-0 offset 1: remote log metadata record "
                                         f"has api key 7")
    rows = decoded_rows(dict(options, mode="PERMISSIVE"))
    assert [row["recordType"] for row in rows] == [
        "REMOTE_LOG_SEGMENT_METADATA_RECORD", None, "REMOTE_LOG_SEGMENT_METADATA_RECORD"]
    assert rows[1]["valueDecoded"] is None and "offset 1: remote log" in rows[1]["decodeError"]
    assert rows[2]["valueDecoded"]["REMOTE_LOG_SEGMENT_METADATA_RECORD"]["startOffset"] == 100


# ------------------------------------------------------------------ the topic

def test_the_topic_is_registered_with_one_member_per_record_type():
    assert internal_topics()["remoteLogMetadata"] is REMOTE_LOG_METADATA
    assert (REMOTE_LOG_METADATA.topic, REMOTE_LOG_METADATA.has_snapshots) == (TOPIC, False)
    assert REMOTE_LOG_METADATA.record_types == tuple(WRITERS)
    shapes = REMOTE_LOG_METADATA.record_shapes()
    assert [shape.name for shape in shapes] == list(WRITERS)
    assert all(shape.key == () for shape in shapes)  # the records have no key
    segment = dict(shapes[0].value)
    assert segment["remoteLogSegmentId"] == ("struct", {
        "topicIdPartition": ("struct", {"name": "string", "id": "string",
                                        "partition": "int32"}),
        "id": "string"})
    assert segment["segmentLeaderEpochs"] == (
        "array", ("struct", {"leaderEpoch": "int32", "offset": "int64"}))
    assert (segment["customMetadata"], segment["remoteLogSegmentState"],
            segment["txnIndexEmpty"]) == ("bytes", "int8", "bool")
    assert list(dict(shapes[3].value)) == list(SNAPSHOT) + ["txnIndexEmpty"]
    decoded = REMOTE_LOG_METADATA.decode(None, write_segment_metadata(SEGMENT))
    assert (decoded.record_type, decoded.value) == ("REMOTE_LOG_SEGMENT_METADATA_RECORD",
                                                    SEGMENT)
