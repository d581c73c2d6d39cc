"""KRaft's `__cluster_metadata`: metadata records and control records decoded as Kafka's
own classes decode them (the internal-topics fixture, written by Kafka 3.9's
MetadataRecordSerde and raft BatchBuilder), encoder round trips of every record type and
version, snapshot files, and the cluster's state as of an offset."""
import base64
import json
import os
import shutil

import pytest

from segmentlog_datasource.errors import CorruptLogError, RecordDecodeError, SegmentLogError
from segmentlog_datasource.format.checkpoints import format_offset_checkpoint
from segmentlog_datasource.format.internal import messages
from segmentlog_datasource.format.internal.messages import Array, Struct
from segmentlog_datasource.format.internal.metadata_image import MetadataReplayError, replay
from segmentlog_datasource.format.internal.metadata_records import (
    CLUSTER_METADATA, RECORD_TYPES, decode_control_record, decode_metadata_record,
    encode_control_record, encode_metadata_record)
from segmentlog_datasource.format.internal.snapshots import (
    encode_snapshot, list_snapshots, parse_snapshot_name, read_snapshot, snapshot_file_name,
    write_snapshot)
from segmentlog_datasource.format.internal.registry import internal_topics
from segmentlog_datasource.read.cluster_metadata import cluster_state, metadata_log_values

from support.fixtures import internal_topics_root

METADATA_DIR = "__cluster_metadata-0"


@pytest.fixture(scope="module")
def logdir():
    return internal_topics_root()


@pytest.fixture(scope="module")
def manifest(logdir):
    with open(os.path.join(logdir, METADATA_DIR + ".manifest.json")) as handle:
        return json.load(handle)


@pytest.fixture
def logdir_copy(logdir, tmp_path):
    target = tmp_path / "logdir"
    target.mkdir()
    shutil.copytree(os.path.join(logdir, METADATA_DIR), target / METADATA_DIR)
    for root, dirs, files in os.walk(target):
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
    return str(target)


# ------------------------------------------------------------------ Kafka's bytes

def test_every_fixture_record_decodes_as_kafka_decoded_it(logdir, manifest):
    from_segments = dict(metadata_log_values(logdir, 0, manifest["log_end_offset"]))
    assert sorted(from_segments) == [r["offset"] for r in manifest["records"]]
    for record in manifest["records"]:
        value = base64.b64decode(record["value_b64"])
        assert from_segments[record["offset"]] == value
        assert record["key_b64"] is None
        decoded = decode_metadata_record(value)
        assert (decoded.record_type, decoded.value_version, decoded.value) == (
            record["record_type_name"], record["value_version"], record["value"]), \
            record["offset"]
        assert decoded.key is None and decoded.key_version is None and decoded.known
        assert RECORD_TYPES[record["record_type"]][0] == record["record_type_name"]
        # and written back byte for byte as MetadataRecordSerde wrote it
        assert encode_metadata_record(decoded.record_type, decoded.value_version,
                                      decoded.value) == value


def test_leader_change_control_records_decode_as_kafka_decoded_them(manifest):
    assert [c["control_type"] for c in manifest["control_records"]] == ["LEADER_CHANGE"] * 2
    for control in manifest["control_records"]:
        key = base64.b64decode(control["key_b64"])
        value = base64.b64decode(control["value_b64"])
        decoded = decode_control_record(key, value)
        assert (decoded.record_type, decoded.value_version, decoded.value) == (
            "LEADER_CHANGE", control["value_version"], control["value"])
        assert decoded.key == {"version": 0, "type": 2}
        assert encode_control_record("LEADER_CHANGE", decoded.value) == (key, value)


# ------------------------------------------------------------------ every type and version

def _sample(kind, version, salt):
    """A value of `kind` unlike its default."""
    if isinstance(kind, Struct):
        return _sample_fields(kind.fields, version, salt)
    if isinstance(kind, Array):
        return [_sample(kind.element, version, salt + i) for i in range(2)]
    return {"bool": salt % 2 == 0, "int8": -3 - salt % 100, "int16": 300 + salt,
            "uint16": 65000 - salt, "int32": 70000 + salt, "int64": (1 << 40) + salt,
            "float64": 1.5 + salt, "string": f"s{salt}", "bytes": bytes([salt % 256, 7]),
            "uuid": messages.uuid_text(bytes([salt % 256] * 16))}[kind]


def _sample_fields(fields, version, salt):
    value = {}
    for number, item in enumerate(fields):
        tagged = item.tag is not None
        present = messages.in_range(version, messages.versions(
            item.tagged_versions if tagged else item.versions))
        if present:
            value[item.name] = _sample(item.type, version, salt + number)
    return value


RECORD_VERSIONS = [(name, version) for name, message in RECORD_TYPES.values()
                   for version in range(message.span[0], message.span[1] + 1)]


def test_every_record_type_and_version_round_trips_with_every_field_set():
    assert len(RECORD_VERSIONS) == 35
    for name, version in RECORD_VERSIONS:
        message = dict(RECORD_TYPES.values())[name]
        value = _sample_fields(message.fields, version, 5)
        encoded = encode_metadata_record(name, version, value)
        decoded = decode_metadata_record(encoded)
        assert (decoded.record_type, decoded.value_version, decoded.value) == \
            (name, version, value), (name, version)
        # tagged fields at their default are left out, as Kafka's JSON form leaves them
        tagged = [f for f in message.fields if f.tag is not None and
                  messages.in_range(version, messages.versions(f.tagged_versions))]
        plain = decode_metadata_record(encode_metadata_record(
            name, version, {k: v for k, v in value.items()
                            if k not in {f.name for f in tagged}}))
        assert not set(plain.value) & {f.name for f in tagged}, (name, version)


def test_partition_change_record_defaults_mean_no_change():
    value = {"partitionId": 4, "topicId": "dRzr426iXA60hDUc1AIkrQ", "leader": -1}
    encoded = encode_metadata_record("PARTITION_CHANGE_RECORD", 0, value)
    assert decode_metadata_record(encoded).value == value  # -1 (no leader) is shown
    unchanged = encode_metadata_record("PARTITION_CHANGE_RECORD", 0,
                                       {"partitionId": 4, "topicId": value["topicId"]})
    assert unchanged.endswith(b"\x00")  # no tagged field written
    assert "leader" not in decode_metadata_record(unchanged).value


def test_unknown_version_truncation_and_bad_frames_are_errors_naming_them(manifest):
    partition = base64.b64decode(next(r["value_b64"] for r in manifest["records"]
                                      if r["record_type_name"] == "PARTITION_RECORD"))
    assert partition[:3] == b"\x01\x03\x01"  # frame 1, api key 3, version 1
    # a version past Kafka's (2) is read as Kafka's serde reads it, without a check: its
    # fields are of versions 0+ and 1+, so version 3 reads as version 1's bytes do
    future = decode_metadata_record(b"\x01\x03\x03" + partition[3:])
    assert (future.value_version, future.value) == (3, decode_metadata_record(partition).value)
    with pytest.raises(RecordDecodeError, match=r"PARTITION_RECORD .*version 1.*ends early"):
        decode_metadata_record(partition[:-5])
    with pytest.raises(RecordDecodeError, match=r"PARTITION_RECORD .*2 more bytes follow"):
        decode_metadata_record(partition + b"\x00\x00")
    with pytest.raises(RecordDecodeError, match="frame version 2 is unknown"):
        decode_metadata_record(b"\x02" + partition[1:])
    with pytest.raises(RecordDecodeError, match="frame version 0 .*2.8 preview"):
        decode_metadata_record(b"\x00" + partition[1:])
    with pytest.raises(RecordDecodeError, match="ends inside its record version"):
        decode_metadata_record(b"\x01\x03")
    with pytest.raises(RecordDecodeError, match="null value"):
        decode_metadata_record(None)


def test_an_unknown_record_type_is_kept_raw_without_error():
    decoded = decode_metadata_record(b"\x01\xe7\x07\x00\x05whatever")  # api key 999
    assert (decoded.record_type, decoded.known, decoded.value, decoded.value_version) == \
        ("UNKNOWN_999", False, None, 0)
    assert CLUSTER_METADATA.decode(None, b"\x01\x10\x00\x00").known is False  # key 16: none


def test_the_topic_is_registered_with_a_shape_per_record_type():
    topic = internal_topics()["clusterMetadata"]
    assert topic is CLUSTER_METADATA and topic.topic == "__cluster_metadata"
    shapes = {shape.name: shape for shape in topic.record_shapes()}
    assert list(shapes) == list(topic.record_types)
    assert all(shape.key == () for shape in shapes.values())  # metadata records: no key
    values = {name: dict(shape.value) for name, shape in shapes.items()}
    # one field name, each record type's own type: a boolean and a byte, text and a
    # double, a uuid and an int
    assert values["REGISTER_BROKER_RECORD"]["fenced"] == "bool"
    assert values["BROKER_REGISTRATION_CHANGE_RECORD"]["fenced"] == "int8"
    assert values["CONFIG_RECORD"]["value"] == "string"
    assert values["CLIENT_QUOTA_RECORD"]["value"] == "float64"
    assert values["PARTITION_RECORD"]["isr"] == ("array", "int32")
    assert values["TOPIC_RECORD"]["topicId"] == "string"
    assert values["CLIENT_QUOTA_RECORD"]["entity"] == (
        "array", ("struct", {"entityType": "string", "entityName": "string"}))
    assert values["NO_OP_RECORD"] == {}
    assert "TOPIC_RECORD" in topic.record_types and "CLEAR_ELR_RECORD" in topic.record_types


# ------------------------------------------------------------------ snapshots

SNAPSHOT_RECORDS = [
    ("FEATURE_LEVEL_RECORD", 0, {"name": "metadata.version", "featureLevel": 21}),
    ("TOPIC_RECORD", 0, {"name": "t", "topicId": "dRzr426iXA60hDUc1AIkrQ"}),
    ("PARTITION_RECORD", 2, {"partitionId": 0, "topicId": "dRzr426iXA60hDUc1AIkrQ",
                             "replicas": [1, 2], "isr": [2], "removingReplicas": [],
                             "addingReplicas": [], "leader": 2, "leaderEpoch": 7,
                             "partitionEpoch": 9, "directories": [messages.ZERO_UUID] * 2,
                             "eligibleLeaderReplicas": [1], "lastKnownElr": [1]}),
    ("CLEAR_ELR_RECORD", 0, {"topicName": "t"}),
]


def test_snapshot_written_then_read_back(tmp_path):
    assert parse_snapshot_name("00000000000000000100-0000000002.checkpoint") == (100, 2)
    assert parse_snapshot_name("00000000000000000100-0000000002.checkpoint.part") is None
    path = write_snapshot(str(tmp_path), 100, 2, SNAPSHOT_RECORDS * 3, records_per_batch=5,
                          last_contained_log_timestamp=1700000000000, kraft_version=1)
    assert os.path.basename(path) == snapshot_file_name(100, 2)
    assert [(s.end_offset, s.epoch) for s in list_snapshots(str(tmp_path))] == [(100, 2)]
    snapshot = read_snapshot(path)
    assert (snapshot.end_offset, snapshot.epoch) == (100, 2)
    assert snapshot.header == {"version": 0, "lastContainedLogTimestamp": 1700000000000}
    assert snapshot.footer == {"version": 0}
    assert [c.record.record_type for c in snapshot.control_records] == [
        "SNAPSHOT_HEADER", "KRAFT_VERSION", "SNAPSHOT_FOOTER"]
    assert [(r.record.record_type, r.record.value_version, r.record.value)
            for r in snapshot.records] == SNAPSHOT_RECORDS * 3
    # offsets count from 0 inside the snapshot, the header's control batch first
    assert [r.offset for r in snapshot.records] == list(range(2, 14))


def test_damaged_or_incomplete_snapshots_raise_naming_the_file(tmp_path):
    data = encode_snapshot(SNAPSHOT_RECORDS, 1)
    path = str(tmp_path / snapshot_file_name(10, 1))
    with open(path, "wb") as out:
        out.write(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    with pytest.raises(CorruptLogError, match="checksum mismatch") as damaged:
        read_snapshot(path)
    assert damaged.value.path == path and damaged.value.position is not None
    without_footer = data[:_footer_start(data)]
    with open(path, "wb") as out:
        out.write(without_footer)
    with pytest.raises(CorruptLogError, match="no SnapshotFooter") as incomplete:
        read_snapshot(path)
    assert incomplete.value.path == path and incomplete.value.position == len(without_footer)
    with open(path, "wb") as out:
        out.write(data[:-7])
    with pytest.raises(CorruptLogError, match="ends inside a record batch") as torn:
        read_snapshot(path)
    assert torn.value.path == path and torn.value.position == _footer_start(data)


def _footer_start(data: bytes) -> int:
    """Where the last batch (the footer's) starts."""
    position = 0
    while True:
        size = 12 + int.from_bytes(data[position + 8:position + 12], "big")
        if position + size == len(data):
            return position
        position += size


# ------------------------------------------------------------------ the cluster as of N

ORDERS_ID = "dRzr426iXA60hDUc1AIkrQ"
SCRATCH_ID = "ZT1Tydyez0Po3wx0iFv73g"
TOPICS_AT_END = {"audit-log": 2, "clicks": 4, "events-a": 6, "events-b": 6, "events-c": 6,
                 "orders": 3, "payments": 2}


def _partition(state, topic, partition):
    return state["topics"][topic]["partitions"][partition]


def _check_end_state(state):
    """What the manifest's records leave, worked out by hand from them."""
    assert {name: len(t["partitions"]) for name, t in state["topics"].items()} == TOPICS_AT_END
    assert state["topics"]["orders"]["topicId"] == ORDERS_ID
    # offset 100 moved orders-1's leader to 2 with ISR [1, 2]; 105 set the ISR to [1, 2, 0]
    assert _partition(state, "orders", 1) == {
        "partition": 1, "replicas": [1, 2, 0], "isr": [1, 2, 0], "removingReplicas": [],
        "addingReplicas": [], "leader": 2, "leaderRecoveryState": 0, "leaderEpoch": 1,
        "partitionEpoch": 2,
        "directories": ["G75-mQJAiZNzc-ktcxYzzg", "5Wz1UyRBas3EMZehHUK0NA",
                        "tNMVliTZhV-nKBegp5aaVw"],
        "eligibleLeaderReplicas": [], "lastKnownElr": []}
    assert [(p["leader"], p["isr"], p["leaderEpoch"], p["partitionEpoch"])
            for p in state["topics"]["orders"]["partitions"]] == [
        (0, [0, 1, 2], 0, 0), (2, [1, 2, 0], 1, 2), (2, [2, 0, 1], 0, 0)]
    # 103 removed scratch, its partition and its config; 107 deleted orders' retention.ms
    assert "scratch" not in state["topics"] and "scratch" not in state["configs"]["TOPIC"]
    assert state["configs"]["TOPIC"]["orders"] == {"cleanup.policy": "delete"}
    assert state["configs"]["TOPIC"]["payments"] == {"cleanup.policy": "compact"}
    assert state["configs"]["BROKER"] == {"": {"log.retention.ms": "604800000"}}
    # registered fenced (3-5), unfenced (6-8); broker 0 fenced at 101, unfenced at 104
    assert {b: (s["fenced"], s["brokerEpoch"], s["rack"]) for b, s in state["brokers"].items()} \
        == {0: (False, 3, "rack-a"), 1: (False, 4, "rack-b"), 2: (False, 5, "rack-c")}
    assert state["brokers"][1]["logDirs"] == ["G75-mQJAiZNzc-ktcxYzzg"]
    assert state["features"] == {"metadata.version": 21}  # kraft.version 0: not a feature
    assert state["producerIds"] == {"nextProducerId": 2000}  # broker 1's block, at 102
    assert (state["metadataVersion"], state["kraftVersion"], state["voters"]) == \
        ("3.9-IV0", 0, None)  # a static quorum: no KRaftVersion nor Voters record
    assert state["acls"] == [{"id": "9yxoMg0Mohu2gLUiwPmgFg", "resourceType": 2,
                              "resourceName": "orders", "patternType": 3,
                              "principal": "User:billing", "host": "*", "operation": 3,
                              "permissionType": 3}]
    assert state["clientQuotas"] == [{
        "entity": [{"entityType": "client-id", "entityName": "batch-loader"}],
        "quotas": {"producer_byte_rate": 1048576.0}}]


def test_cluster_state_at_the_end_and_before_the_topic_removal(logdir):
    state = cluster_state(logdir).to_dict()
    assert state["offset"] == 137 and state["snapshot"] is None
    _check_end_state(state)
    assert cluster_state(os.path.join(logdir, METADATA_DIR), 137).to_dict() == state

    before = cluster_state(logdir, 102)
    assert before.offset == 102
    assert before.topic("scratch").topic_id == SCRATCH_ID
    assert before.topic_configs("scratch") == {"cleanup.policy": "delete"}
    orders_1 = before.topic("orders").partitions[1]
    assert (orders_1.leader, orders_1.isr, orders_1.leader_epoch, orders_1.partition_epoch) \
        == (2, [1, 2], 1, 1)
    assert before.brokers[0].fenced is True and before.brokers[1].fenced is False
    assert before.producer_ids["nextProducerId"] == 2000
    assert cluster_state(logdir, 106).topic_configs("orders") == {
        "cleanup.policy": "delete", "retention.ms": "86400000"}
    early = cluster_state(logdir, 5)  # brokers registered, none unfenced yet
    assert early.topics == {} and {b: s.fenced for b, s in early.brokers.items()} == \
        {0: True, 1: True, 2: True}
    with pytest.raises(SegmentLogError, match="offset 138 is outside .* last offset is 137"):
        cluster_state(logdir, 138)


def _without_snapshot_name(state):
    state = state.to_dict()
    state.pop("snapshot")
    return state


def test_cluster_state_from_a_snapshot_then_without_the_log_it_replaces(logdir, logdir_copy,
                                                                        manifest):
    directory = os.path.join(logdir_copy, METADATA_DIR)
    covered = [(r["record_type_name"], r["value_version"], r["value"])
               for r in manifest["records"] if r["offset"] < 100]
    write_snapshot(directory, 100, 2, covered)
    state = cluster_state(logdir_copy)
    assert state.snapshot == "00000000000000000100-0000000002.checkpoint"
    assert _without_snapshot_name(state) == _without_snapshot_name(cluster_state(logdir))
    at_102 = cluster_state(logdir_copy, 102)
    assert at_102.snapshot is not None
    assert _without_snapshot_name(at_102) == _without_snapshot_name(cluster_state(logdir, 102))
    assert cluster_state(logdir_copy, 98).snapshot is None  # before the snapshot's end

    # the segment the snapshot replaces removed, the log start moved past it
    for suffix in (".log", ".index", ".timeindex"):
        os.remove(os.path.join(directory, "00000000000000000000" + suffix))
    with open(os.path.join(logdir_copy, "log-start-offset-checkpoint"), "wb") as out:
        out.write(format_offset_checkpoint({("__cluster_metadata", 0): 100}))
    state = cluster_state(logdir_copy)
    assert state.snapshot is not None
    _check_end_state(state.to_dict())
    assert cluster_state(logdir_copy, 99).snapshot is not None
    at_99 = cluster_state(logdir_copy, 99)
    assert at_99.topic("scratch") is not None and at_99.brokers[0].fenced is False
    with pytest.raises(SegmentLogError,
                       match=r"offset 50 is not known: the metadata log starts at offset 100 "
                             r"and no snapshot .*earliest offset it can answer is 99"):
        cluster_state(logdir_copy, 50)


def _records(*records):
    """(offset, DecodedRecord) pairs from (type, version, value), through the bytes."""
    return [(offset, decode_metadata_record(encode_metadata_record(*record)))
            for offset, record in enumerate(records)]


def test_replay_rules_of_kafkas_image_classes():
    topic_id = "dRzr426iXA60hDUc1AIkrQ"
    change = {"partitionId": 0, "topicId": topic_id}
    broker = {"brokerId": 4, "incarnationId": topic_id, "brokerEpoch": 9, "endPoints": [],
              "features": [], "rack": None,
              "logDirs": ["G75-mQJAiZNzc-ktcxYzzg", "5Wz1UyRBas3EMZehHUK0NA"]}
    image = replay(_records(
        *SNAPSHOT_RECORDS,  # partition at leader epoch 7, partition epoch 9, ELR [1]
        ("PARTITION_CHANGE_RECORD", 0, dict(change, leader=-1, isr=[1])),
        ("PARTITION_CHANGE_RECORD", 2, dict(change, replicas=[1, 2, 3],
                                            eligibleLeaderReplicas=[3])),
        ("FEATURE_LEVEL_RECORD", 0, {"name": "group.version", "featureLevel": 1}),
        ("FEATURE_LEVEL_RECORD", 0, {"name": "transaction.version", "featureLevel": 2}),
        ("FEATURE_LEVEL_RECORD", 0, {"name": "group.version", "featureLevel": 0}),
        ("REGISTER_BROKER_RECORD", 3, broker),
        ("FENCE_BROKER_RECORD", 0, {"id": 4, "epoch": 9}),
        ("UNFENCE_BROKER_RECORD", 0, {"id": 4, "epoch": 9}),
        ("BROKER_REGISTRATION_CHANGE_RECORD", 1, {"brokerId": 4, "brokerEpoch": 9,
                                                   "inControlledShutdown": 1}),
        ("BEGIN_TRANSACTION_RECORD", 0, {"name": "big change"}),
        ("TOPIC_RECORD", 0, {"name": "undone", "topicId": "9hphI-pQx0mxIA4UdRFvTA"}),
        ("ABORT_TRANSACTION_RECORD", 0, {}),
        ("USER_SCRAM_CREDENTIAL_RECORD", 0, {"name": "alice", "mechanism": 1, "salt": b"s",
                                             "storedKey": b"k", "serverKey": b"v",
                                             "iterations": 4096}),
        ("CONFIG_RECORD", 0, {"resourceType": 2, "resourceName": "t", "name": "a",
                              "value": "1"}),
        ("BEGIN_TRANSACTION_RECORD", 0, {}),
        ("TOPIC_RECORD", 0, {"name": "pending", "topicId": "9hphI-pQx0mxIA4UdRFvTA"}),
    ))
    partition = image.topic("t").partitions[0]
    # CLEAR_ELR bumped the partition epoch (9 -> 10); leader -1 is a change (epoch 7 -> 8)
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch) == (-1, 8, 12)
    assert (partition.isr, partition.replicas) == ([1], [1, 2, 3])
    assert (partition.eligible_leader_replicas, partition.last_known_elr) == ([3], [])
    assert partition.directories == [messages.ZERO_UUID] * 3  # MIGRATING for each replica
    assert image.features == {"metadata.version": 21, "transaction.version": 2}
    assert (image.brokers[4].fenced, image.brokers[4].in_controlled_shutdown) == (False, True)
    assert image.brokers[4].log_dirs == ["5Wz1UyRBas3EMZehHUK0NA", "G75-mQJAiZNzc-ktcxYzzg"]
    assert image.topic("undone") is None  # aborted
    assert image.topic("pending") is None  # its transaction is still open
    assert image.topic_configs("t") == {"a": "1"}
    assert image.scram_credentials[("alice", 1)]["iterations"] == 4096
    with pytest.raises(MetadataReplayError, match=r"offset 0: PARTITION_CHANGE_RECORD: no "
                                                  r"partition 0 of topic id"):
        replay(_records(("PARTITION_CHANGE_RECORD", 0, change)))
    with pytest.raises(MetadataReplayError, match="broker epoch 8 is not broker 4's"):
        replay(_records(("REGISTER_BROKER_RECORD", 3, broker),
                        ("FENCE_BROKER_RECORD", 0, {"id": 4, "epoch": 8})))
