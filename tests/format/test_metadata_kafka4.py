"""KRaft's `__cluster_metadata` as Kafka 4.2 writes it (the internal-topics-kafka4 fixture:
a cluster formatted at metadata.version 3.9-IV0 and upgraded to 4.2-IV1, written by Kafka
4.2.0's MetadataRecordSerde, raft layer and RecordsSnapshotWriter), and as Kafka 3.9 wrote
it (the internal-topics fixture).

Every record of the `.log` segments, every control record and every record of each
snapshot decodes to what Kafka's own JSON converters made of it (the manifests), compared
with JSON types (a boolean is a boolean). The cluster's state as of each offset, the
eligible leader replicas, the feature levels and the voters, is checked against what the
manifests' records say, worked out here from their JSON or stated by hand from reading it,
never taken from the code under test.
"""
import base64
import json
import os
import shutil

import pyarrow as pa
import pytest

from segmentlog_datasource.errors import RecordDecodeError
from segmentlog_datasource.format import ScanOptions
from segmentlog_datasource.format.internal import messages
from segmentlog_datasource.format.internal.metadata_image import (
    MetadataReplayError, MetadataReplay, replay)
from segmentlog_datasource.format.internal.metadata_records import (
    CONTROL_MESSAGES, RECORD_TYPES, decode_control_record, decode_metadata_record,
    encode_control_record, encode_metadata_record)
from segmentlog_datasource.format.internal.snapshots import read_snapshot
from segmentlog_datasource.read.cluster_metadata import cluster_state
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from support.fixtures import internal_topics_kafka4_root, internal_topics_root
from support.kafka_json import as_kafka_json, assert_same

METADATA_DIR = "__cluster_metadata-0"
SETS = {"kafka-4.2": internal_topics_kafka4_root, "kafka-3.9": internal_topics_root}


def _manifest(root):
    with open(os.path.join(root, METADATA_DIR + ".manifest.json")) as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def kafka4():
    root = internal_topics_kafka4_root()
    return root, _manifest(root)


def _b64(text):
    return None if text is None else base64.b64decode(text)


def _log_rows(root):
    """{offset: row} of every record of the `.log` segments, control records included,
    as a read of the partition gives them."""
    read = parse_read_options({"path": root, "subscribe": "__cluster_metadata",
                               "includeControlRecords": "true", "includeMetadata": "true"})
    rows = {}
    for fragment in plan_fragments(read, Constraints()):
        for batch in fragment.scan(ScanOptions(include_metadata=True,
                                               include_control_records=True)):
            columns = {name: batch.column(name) for name in batch.schema.names}
            columns["timestamp"] = columns["timestamp"].cast(pa.int64())
            for row in pa.Table.from_pydict(columns).to_pylist():
                assert row["offset"] not in rows
                rows[row["offset"]] = row
    return rows


# ------------------------------------------------------------------ Kafka's bytes

@pytest.mark.parametrize("fixture_set", sorted(SETS))
def test_every_log_record_decodes_to_what_kafka_decoded(fixture_set):
    root = SETS[fixture_set]()
    manifest = _manifest(root)
    rows = _log_rows(root)
    expected_offsets = sorted([r["offset"] for r in manifest["records"]] +
                              [c["offset"] for c in manifest["control_records"]])
    assert sorted(rows) == expected_offsets
    assert max(rows) + 1 == manifest["log_end_offset"]
    assert len(manifest["records"]) == manifest["record_count"]
    for record in manifest["records"]:
        where = f"{fixture_set} offset {record['offset']}"
        row = rows[record["offset"]]
        assert row["controlType"] is None, where
        assert (row["key"], row["value"]) == (None, _b64(record["value_b64"])), where
        assert (row["timestamp"] // 1000, row["leaderEpoch"], row["batchOffset"],
                row["segment"], row["position"]) == (
            record["timestamp"], record["partition_leader_epoch"],
            record["batch_base_offset"], record["segment"], record["position"]), where
        decoded = decode_metadata_record(row["value"])
        assert decoded.known and decoded.key is None and decoded.key_version is None, where
        assert (decoded.record_type, decoded.value_version) == (
            record["record_type_name"], record["value_version"]), where
        assert RECORD_TYPES[record["record_type"]][0] == record["record_type_name"], where
        assert_same(as_kafka_json(decoded.value), record["value"], where)
        # and written back as MetadataRecordSerde wrote it, byte for byte
        assert encode_metadata_record(decoded.record_type, decoded.value_version,
                                      decoded.value) == row["value"], where
    for control in manifest["control_records"]:
        where = f"{fixture_set} control record at offset {control['offset']}"
        row = rows[control["offset"]]
        assert row["controlType"] == control["control_type"], where
        assert (row["key"], row["value"]) == (_b64(control["key_b64"]),
                                              _b64(control["value_b64"])), where
        assert row["leaderEpoch"] == control["partition_leader_epoch"], where
        _check_control_record(row["key"], row["value"], control, where)


def _check_control_record(key, value, control, where):
    decoded = decode_control_record(key, value)
    assert decoded.known, where
    assert (decoded.record_type, decoded.value_version) == (
        control["control_type"], control["value_version"]), where
    assert decoded.key == {"version": 0, "type": int.from_bytes(key[2:4], "big")}, where
    assert_same(as_kafka_json(decoded.value), control["value"], where)
    assert encode_control_record(decoded.record_type, decoded.value) == (key, value), where


def test_every_record_of_each_snapshot_decodes_to_what_kafka_decoded(kafka4):
    root, manifest = kafka4
    directory = os.path.join(root, METADATA_DIR)
    assert sorted(s["file"] for s in manifest["snapshots"]) == sorted(
        name for name in os.listdir(directory) if name.endswith(".checkpoint"))
    for expected in manifest["snapshots"]:
        snapshot = read_snapshot(os.path.join(directory, expected["file"]))
        where = expected["file"]
        assert (snapshot.end_offset, snapshot.epoch) == (expected["end_offset"],
                                                         expected["epoch"]), where
        assert len(snapshot.records) == expected["record_count"] == len(expected["records"])
        for got, record in zip(snapshot.records, expected["records"]):
            at = f"{where} record {record['offset']}"
            assert (got.offset, got.timestamp, got.value) == (
                record["offset"], record["timestamp"], _b64(record["value_b64"])), at
            assert (got.record.record_type, got.record.value_version) == (
                record["record_type_name"], record["value_version"]), at
            assert_same(as_kafka_json(got.record.value), record["value"], at)
            assert encode_metadata_record(got.record.record_type, got.record.value_version,
                                          got.record.value) == got.value, at
        assert [c.offset for c in snapshot.control_records] == \
            [c["offset"] for c in expected["control_records"]], where
        for got, control in zip(snapshot.control_records, expected["control_records"]):
            at = f"{where} control record {control['offset']}"
            assert got.timestamp == control["timestamp"], at
            _check_control_record(_b64(control["key_b64"]), got.value, control, at)
            assert_same(as_kafka_json(got.record.value), control["value"], at)
        assert snapshot.header == expected["control_records"][0]["value"]
        assert snapshot.footer == expected["control_records"][-1]["value"]
    # the fixture covers what it says: 4.2's record versions, the KRaft control records
    versions = {(r["record_type_name"], r["value_version"]) for r in manifest["records"]}
    assert {("PARTITION_RECORD", 2), ("PARTITION_CHANGE_RECORD", 2),
            ("CLEAR_ELR_RECORD", 0), ("REGISTER_BROKER_RECORD", 3),
            ("BROKER_REGISTRATION_CHANGE_RECORD", 2)} <= versions
    controls = {c["control_type"] for s in manifest["snapshots"]
                for c in s["control_records"]} | \
        {c["control_type"] for c in manifest["control_records"]}
    assert controls == {"LEADER_CHANGE", "KRAFT_VERSION", "KRAFT_VOTERS", "SNAPSHOT_HEADER",
                        "SNAPSHOT_FOOTER"}


# ------------------------------------------------------------------ the definitions

# Kafka 4.2.0's metadata record types: api key -> (name, newest version), as its message
# definitions (metadata/src/main/resources/common/metadata) give them.
KAFKA_4_2_RECORD_TYPES = {
    0: ("REGISTER_BROKER_RECORD", 3), 1: ("UNREGISTER_BROKER_RECORD", 0),
    2: ("TOPIC_RECORD", 0), 3: ("PARTITION_RECORD", 2), 4: ("CONFIG_RECORD", 0),
    5: ("PARTITION_CHANGE_RECORD", 2), 7: ("FENCE_BROKER_RECORD", 0),
    8: ("UNFENCE_BROKER_RECORD", 0), 9: ("REMOVE_TOPIC_RECORD", 0),
    10: ("DELEGATION_TOKEN_RECORD", 0), 11: ("USER_SCRAM_CREDENTIAL_RECORD", 0),
    12: ("FEATURE_LEVEL_RECORD", 0), 14: ("CLIENT_QUOTA_RECORD", 0),
    15: ("PRODUCER_IDS_RECORD", 0), 17: ("BROKER_REGISTRATION_CHANGE_RECORD", 2),
    18: ("ACCESS_CONTROL_ENTRY_RECORD", 0), 19: ("REMOVE_ACCESS_CONTROL_ENTRY_RECORD", 0),
    20: ("NO_OP_RECORD", 0), 21: ("ZK_MIGRATION_STATE_RECORD", 0),
    22: ("REMOVE_USER_SCRAM_CREDENTIAL_RECORD", 0), 23: ("BEGIN_TRANSACTION_RECORD", 0),
    24: ("END_TRANSACTION_RECORD", 0), 25: ("ABORT_TRANSACTION_RECORD", 0),
    26: ("REMOVE_DELEGATION_TOKEN_RECORD", 0), 27: ("REGISTER_CONTROLLER_RECORD", 0),
    28: ("CLEAR_ELR_RECORD", 0),
}


def test_every_record_type_of_kafka_4_2_in_every_version_and_no_newer():
    assert {key: (name, message.span[1]) for key, (name, message) in RECORD_TYPES.items()} \
        == KAFKA_4_2_RECORD_TYPES
    assert all(message.span[0] == 0 for _, message in RECORD_TYPES.values())
    for key, (name, newest) in KAFKA_4_2_RECORD_TYPES.items():
        body = encode_metadata_record(name, newest, {})
        too_new = body[:2] + bytes([newest + 1]) + body[3:]
        # MetadataRecordSerde reads a version past the newest without checking it, as
        # Kafka's generated reader reads it: here, with every field open-ended ("N+")
        # and no struct in the arrays, as the newest
        decoded = decode_metadata_record(too_new)
        assert (decoded.record_type, decoded.value_version, decoded.value) == \
            (name, newest + 1, decode_metadata_record(body).value), name
    for name, message in CONTROL_MESSAGES.items():
        newest = message.span[1]
        key, value = encode_control_record(name, {"version": newest})
        with pytest.raises(RecordDecodeError, match=rf"{name} control record: .*version "
                                                    rf"{newest + 1} is unknown"):
            decode_control_record(key, (newest + 1).to_bytes(2, "big") + value[2:])


def _field(record_type, name):
    (message,) = [m for n, m in RECORD_TYPES.values() if n == record_type]
    (found,) = [f for f in message.fields if f.name == name]
    return found


@pytest.mark.parametrize("record_type, name, tag, versions, default", [
    # Kafka 4.2's definitions: tag, versions (tagged and nullable alike), default
    ("PARTITION_RECORD", "leaderRecoveryState", 0, "0+", 0),
    ("PARTITION_RECORD", "eligibleLeaderReplicas", 1, "2+", None),
    ("PARTITION_RECORD", "lastKnownElr", 2, "2+", None),
    ("PARTITION_CHANGE_RECORD", "isr", 0, "0+", None),
    ("PARTITION_CHANGE_RECORD", "leader", 1, "0+", -2),
    ("PARTITION_CHANGE_RECORD", "replicas", 2, "0+", None),
    ("PARTITION_CHANGE_RECORD", "removingReplicas", 3, "0+", None),
    ("PARTITION_CHANGE_RECORD", "addingReplicas", 4, "0+", None),
    ("PARTITION_CHANGE_RECORD", "leaderRecoveryState", 5, "0+", -1),
    ("PARTITION_CHANGE_RECORD", "eligibleLeaderReplicas", 6, "2+", None),
    ("PARTITION_CHANGE_RECORD", "lastKnownElr", 7, "2+", None),
    ("PARTITION_CHANGE_RECORD", "directories", 8, "1+", None),
    ("REGISTER_BROKER_RECORD", "logDirs", 0, "3+", []),
    ("BROKER_REGISTRATION_CHANGE_RECORD", "fenced", 0, "0+", 0),
    ("BROKER_REGISTRATION_CHANGE_RECORD", "inControlledShutdown", 1, "1+", 0),
    ("BROKER_REGISTRATION_CHANGE_RECORD", "logDirs", 2, "2+", []),
    ("BEGIN_TRANSACTION_RECORD", "name", 0, "0+", None),
    ("ABORT_TRANSACTION_RECORD", "reason", 0, "0+", None),
])
def test_tagged_fields_have_kafkas_tags_versions_and_defaults(record_type, name, tag,
                                                               versions, default):
    item = _field(record_type, name)
    assert (item.tag, item.tagged_versions, item.versions) == (tag, versions, versions)
    assert item.default_value() == default
    nullable = default is None
    assert (item.nullable == versions) if nullable else item.nullable == "none"


TOPIC_ID = "JeHjViRwC1fmLrX3helpYw"


def test_partition_change_record_v2_elr_fields_null_empty_and_set_on_the_wire():
    head = (7).to_bytes(4, "big") + messages.uuid_bytes(TOPIC_ID)
    frame = b"\x01\x05\x02"  # frame 1, api key 5, version 2
    cases = [
        ({}, b"\x00"),  # null: unchanged, not written
        ({"eligibleLeaderReplicas": []}, b"\x01" + b"\x06\x01\x01"),
        ({"lastKnownElr": [3]}, b"\x01" + b"\x07\x05\x02\x00\x00\x00\x03"),
        ({"eligibleLeaderReplicas": [2, 0], "lastKnownElr": []},
         b"\x02" + b"\x06\x09\x03\x00\x00\x00\x02\x00\x00\x00\x00" + b"\x07\x01\x01"),
    ]
    for fields, tagged in cases:
        value = {"partitionId": 7, "topicId": TOPIC_ID, **fields}
        encoded = encode_metadata_record("PARTITION_CHANGE_RECORD", 2, value)
        assert encoded == frame + head + tagged, fields
        assert decode_metadata_record(encoded).value == value, fields
    # version 1 has no ELR tags, but tag 6 is one Kafka's class knows (for versions 2+):
    # its reader refuses it ("Tag 6 is not valid for version 1"); a tag it does not know
    # at all is skipped
    elr_in_v1 = b"\x01\x05\x01" + head + b"\x01\x06\x01\x01"
    with pytest.raises(RecordDecodeError, match="field eligibleLeaderReplicas: is tag 6, "
                                                "which is not valid for version 1"):
        decode_metadata_record(elr_in_v1)
    unknown_tag = b"\x01\x05\x01" + head + b"\x01\x1e\x01\x01"
    assert decode_metadata_record(unknown_tag).value == {"partitionId": 7,
                                                         "topicId": TOPIC_ID}


def test_4_2_record_versions_round_trip_with_their_fields():
    """The versions Kafka 4.x writes, each field away from its default, through the bytes
    and back, and with their tagged fields at default (left out, as Kafka's JSON)."""
    cases = [
        ("PARTITION_RECORD", 2, {
            "partitionId": 3, "topicId": TOPIC_ID, "replicas": [0, 1, 2], "isr": [0],
            "removingReplicas": [2], "addingReplicas": [1], "leader": 0,
            "leaderRecoveryState": 1, "leaderEpoch": 4, "partitionEpoch": 9,
            "directories": ["HRNeZY-Nd_UvE8LlM_e0wQ"] * 3,
            "eligibleLeaderReplicas": [1], "lastKnownElr": [2]}),
        ("PARTITION_CHANGE_RECORD", 2, {
            "partitionId": 3, "topicId": TOPIC_ID, "isr": [0, 1], "leader": -1,
            "replicas": [0, 1], "removingReplicas": [], "addingReplicas": [],
            "leaderRecoveryState": 0, "directories": ["HRNeZY-Nd_UvE8LlM_e0wQ"] * 2,
            "eligibleLeaderReplicas": [], "lastKnownElr": [1]}),
        ("CLEAR_ELR_RECORD", 0, {"topicName": ""}),
        ("CLEAR_ELR_RECORD", 0, {"topicName": "events-b"}),
        ("REGISTER_BROKER_RECORD", 3, {
            "brokerId": 4, "isMigratingZkBroker": True, "incarnationId": TOPIC_ID,
            "brokerEpoch": 77, "endPoints": [{"name": "PLAINTEXT", "host": "h", "port": 9092,
                                              "securityProtocol": 0}],
            "features": [{"name": "share.version", "minSupportedVersion": 0,
                          "maxSupportedVersion": 1}],
            "rack": None, "fenced": False, "inControlledShutdown": True,
            "logDirs": ["HRNeZY-Nd_UvE8LlM_e0wQ"]}),
        ("BROKER_REGISTRATION_CHANGE_RECORD", 2, {
            "brokerId": 4, "brokerEpoch": 77, "fenced": -1, "inControlledShutdown": 1,
            "logDirs": ["HRNeZY-Nd_UvE8LlM_e0wQ"]}),
        ("REGISTER_CONTROLLER_RECORD", 0, {
            "controllerId": 3003, "incarnationId": TOPIC_ID, "zkMigrationReady": False,
            "endPoints": [{"name": "CONTROLLER", "host": "c", "port": 9093,
                           "securityProtocol": 0}],
            "features": [{"name": "kraft.version", "minSupportedVersion": 0,
                          "maxSupportedVersion": 1}]}),
        ("FEATURE_LEVEL_RECORD", 0, {"name": "streams.version", "featureLevel": 1}),
        ("BEGIN_TRANSACTION_RECORD", 0, {"name": "Bootstrap records"}),
        ("ABORT_TRANSACTION_RECORD", 0, {"reason": "Controller failover"}),
        ("END_TRANSACTION_RECORD", 0, {}),
        ("ZK_MIGRATION_STATE_RECORD", 0, {"zkMigrationState": 3}),
    ]
    for name, version, value in cases:
        encoded = encode_metadata_record(name, version, value)
        decoded = decode_metadata_record(encoded)
        assert (decoded.record_type, decoded.value_version) == (name, version)
        assert_same(as_kafka_json(decoded.value), value, f"{name} v{version}")
        message = dict(RECORD_TYPES.values())[name]
        tagged = {f.name for f in message.fields if f.tag is not None}
        bare = {k: v for k, v in value.items() if k not in tagged}
        assert decode_metadata_record(encode_metadata_record(name, version, bare)).value \
            == bare, name
    for name, value in [
            ("KRAFT_VERSION", {"version": 0, "kRaftVersion": 1}),
            ("KRAFT_VOTERS", {"version": 0, "voters": [{
                "voterId": 3003, "voterDirectoryId": TOPIC_ID,
                "endpoints": [{"name": "CONTROLLER", "host": "10.0.1.4", "port": 9093}],
                "kRaftVersionFeature": {"minSupportedVersion": 0,
                                        "maxSupportedVersion": 1}}]}),
            ("LEADER_CHANGE", {"version": 1, "leaderId": 3002,
                               "voters": [{"voterId": 3002, "voterDirectoryId": TOPIC_ID}],
                               "grantingVoters": []}),
            ("SNAPSHOT_HEADER", {"version": 0, "lastContainedLogTimestamp": 1759913855848}),
            ("SNAPSHOT_FOOTER", {"version": 0})]:
        key, data = encode_control_record(name, value)
        decoded = decode_control_record(key, data)
        assert decoded.record_type == name
        assert_same(decoded.value, value, name)


# ------------------------------------------------------------------ the cluster as of N

def _committed(records):
    """The records that count as of each offset, Kafka's metadata transactions applied:
    [(offset, record)] in order with the records of an aborted transaction left out, and
    for each offset inside a transaction still open there, where its records begin."""
    out, pending, open_at = [], None, {}
    for record in records:
        kind = record["record_type_name"]
        if kind == "BEGIN_TRANSACTION_RECORD":
            pending = []
        elif kind == "ABORT_TRANSACTION_RECORD":
            pending = None
        elif kind == "END_TRANSACTION_RECORD":
            out.extend(pending)
            pending = None
        elif pending is not None:
            pending.append(record)
        else:
            out.append(record)
    return out


def _expected_elr(records, upto):
    """{(topic, partition): (ELR, last known ELR)} after the committed records up to
    `upto`, from the manifest's JSON: a PARTITION_RECORD sets both (absent: empty), a
    PARTITION_CHANGE_RECORD the ones it holds, CLEAR_ELR_RECORD empties them for its topic
    (by name) or for every topic (an empty name)."""
    names, state = {}, {}
    for record in records:
        if record["offset"] > upto:
            break
        kind, value = record["record_type_name"], record["value"]
        if kind == "TOPIC_RECORD":
            names[value["topicId"]] = value["name"]
        elif kind == "REMOVE_TOPIC_RECORD":
            gone = names.pop(value["topicId"])
            state = {key: elr for key, elr in state.items() if key[0] != gone}
        elif kind == "PARTITION_RECORD":
            state[(names[value["topicId"]], value["partitionId"])] = (
                value.get("eligibleLeaderReplicas") or [], value.get("lastKnownElr") or [])
        elif kind == "PARTITION_CHANGE_RECORD":
            key = (names[value["topicId"]], value["partitionId"])
            elr, last = state[key]
            if value.get("eligibleLeaderReplicas") is not None:
                elr = value["eligibleLeaderReplicas"]
            if value.get("lastKnownElr") is not None:
                last = value["lastKnownElr"]
            state[key] = (elr, last)
        elif kind == "CLEAR_ELR_RECORD":
            for key in state:
                if value["topicName"] in ("", key[0]):
                    state[key] = ([], [])
    return state


def _expected_features(records, controls, upto):
    """The finalized features after the committed records up to `upto`: the feature level
    records' (level 0 removes one; kraft.version's are not Kafka's to set this way) and
    kraft.version from the last KRaftVersion control record, from level 1 on."""
    features = {}
    for record in records:
        if record["offset"] <= upto and record["record_type_name"] == "FEATURE_LEVEL_RECORD":
            name, level = record["value"]["name"], record["value"]["featureLevel"]
            if name == "kraft.version":
                continue
            if level == 0 and name != "metadata.version":
                features.pop(name, None)
            else:
                features[name] = level
    kraft = [c["value"]["kRaftVersion"] for offset, c in controls
             if offset <= upto and c["control_type"] == "KRAFT_VERSION"]
    if kraft and kraft[-1] > 0:
        features["kraft.version"] = kraft[-1]
    return features


def _controls(manifest):
    """(log offset, control record) of the bootstrap snapshot (as of offset -1) and of the
    log, in order."""
    found = []
    for snapshot in manifest["snapshots"]:
        if snapshot["end_offset"] == 0:
            found += [(-1, c) for c in snapshot["control_records"]]
    return found + [(c["offset"], c) for c in manifest["control_records"]]


def _elr_of(state):
    return {(name, p["partition"]): (p["eligibleLeaderReplicas"], p["lastKnownElr"])
            for name, topic in state["topics"].items() for p in topic["partitions"]}


def test_cluster_state_eligible_leader_replicas_features_and_voters_at_every_offset(kafka4):
    root, manifest = kafka4
    committed = _committed(manifest["records"])
    controls = _controls(manifest)
    voters = [(offset, c["value"]["voters"]) for offset, c in controls
              if c["control_type"] == "KRAFT_VOTERS"]
    assert [offset for offset, _ in voters] == [-1, 2, 174]
    for offset in range(12, manifest["log_end_offset"]):  # from the bootstrap's end on
        state = cluster_state(root, offset).to_dict()
        assert state["offset"] == offset
        assert _elr_of(state) == _expected_elr(committed, offset), offset
        assert state["features"] == _expected_features(committed, controls, offset), offset
        assert state["kraftVersion"] == 1
        assert state["voters"] == [v for at, v in voters if at <= offset][-1], offset


def test_cluster_state_as_kafka_replays_the_elr_changes_by_hand(kafka4):
    """events-a-2's ISR shrinks to nothing and back (offsets 158-162), read off the
    manifest: its eligible leader replicas grow, it loses its leader, a replica of the ELR
    is elected, the ELR empties."""
    root, _ = kafka4

    def events_a_2(offset):
        state = cluster_state(root, offset).to_dict()
        partition = state["topics"]["events-a"]["partitions"][2]
        return (partition["leader"], partition["isr"], partition["eligibleLeaderReplicas"],
                partition["lastKnownElr"], partition["leaderEpoch"],
                partition["partitionEpoch"])

    assert events_a_2(157) == (2, [2, 0, 1], [], [], 0, 0)
    assert events_a_2(158) == (2, [2, 0], [], [], 0, 1)  # no ELR field: unchanged
    assert events_a_2(159) == (2, [2], [0], [], 0, 2)
    assert events_a_2(160) == (-1, [], [2, 0], [], 1, 3)  # leader -1 bumps the epoch
    assert events_a_2(161) == (2, [2], [0], [], 2, 4)
    assert events_a_2(162) == (2, [2, 0, 1], [], [], 2, 5)


def test_clear_elr_records_of_the_fixture_leave_partitions_without_an_elr_alone(kafka4):
    """ClearElrRecord at 114 (every topic: none had an ELR yet) and at 164 (events-b, none
    of whose partitions has one): Kafka changes no partition, no epoch moves."""
    root, manifest = kafka4
    clears = {r["offset"]: r["value"]["topicName"] for r in manifest["records"]
              if r["record_type_name"] == "CLEAR_ELR_RECORD"}
    assert clears == {114: "", 164: "events-b"}
    for offset in clears:
        before = cluster_state(root, offset - 1).to_dict()
        after = cluster_state(root, offset).to_dict()
        assert after["topics"] == before["topics"], offset


def test_cluster_state_features_through_the_bootstrap_and_the_upgrade_by_hand(kafka4):
    root, _ = kafka4
    kraft = {"kraft.version": 1}  # the bootstrap snapshot's and offset 1's KRaftVersion
    # 3-7: a bootstrap transaction aborted; 8-12: written again and ended
    for offset in (0, 3, 4, 7, 8, 11):
        state = cluster_state(root, offset).to_dict()
        assert (state["features"], state["metadataVersion"]) == (kraft, None), offset
    state = cluster_state(root, 12).to_dict()
    assert (state["features"], state["metadataVersion"]) == (
        {"metadata.version": 21, **kraft}, "3.9-IV0")
    upgraded = {"metadata.version": 29, "eligible.leader.replicas.version": 1,
                "group.version": 1, "share.version": 1, "streams.version": 1,
                "transaction.version": 2, **kraft}
    assert cluster_state(root, 107).to_dict()["metadataVersion"] == "4.2-IV1"
    assert cluster_state(root, 111).to_dict()["features"] == {  # 112 adds the last one
        name: level for name, level in upgraded.items() if name != "transaction.version"}
    end = cluster_state(root).to_dict()
    assert (end["offset"], end["features"], end["metadataVersion"], end["kraftVersion"]) == \
        (216, upgraded, "4.2-IV1", 1)
    assert [v["voterId"] for v in end["voters"]] == [3000, 3001, 3002, 3003]


# ------------------------------------------------------------------ the second snapshot

CONFIG_RESOURCE_TYPES = {2: "TOPIC", 4: "BROKER"}  # Kafka's ConfigResource.Type ids


def _uuid_order(text):
    """Uuid.compareTo's order: the most, then the least significant 64 bits, signed. Kafka's
    BrokerRegistration keeps a broker's log dirs in it, whatever order a record lists them
    in (the snapshot's record for broker 3 lists them otherwise)."""
    raw = base64.urlsafe_b64decode(text + "==")
    return (int.from_bytes(raw[:8], "big", signed=True),
            int.from_bytes(raw[8:], "big", signed=True))


def _image_of_snapshot(snapshot, upto):
    """The cluster state a snapshot's records describe, laid out as cluster_state's
    to_dict lays it out, from the manifest's JSON."""
    values = {}
    for record in snapshot["records"]:
        values.setdefault(record["record_type_name"], []).append(record["value"])
    topics = {t["topicId"]: {"name": t["name"], "topicId": t["topicId"], "partitions": []}
              for t in values.get("TOPIC_RECORD", [])}
    for p in values.get("PARTITION_RECORD", []):
        topics[p["topicId"]]["partitions"].append({
            "partition": p["partitionId"], "replicas": p["replicas"], "isr": p["isr"],
            "removingReplicas": p["removingReplicas"], "addingReplicas": p["addingReplicas"],
            "leader": p["leader"], "leaderRecoveryState": p.get("leaderRecoveryState", 0),
            "leaderEpoch": p["leaderEpoch"], "partitionEpoch": p["partitionEpoch"],
            "directories": p["directories"],
            "eligibleLeaderReplicas": p.get("eligibleLeaderReplicas") or [],
            "lastKnownElr": p.get("lastKnownElr") or []})
    for topic in topics.values():
        topic["partitions"].sort(key=lambda p: p["partition"])
    configs = {}
    for c in values.get("CONFIG_RECORD", []):
        configs.setdefault(CONFIG_RESOURCE_TYPES[c["resourceType"]], {}).setdefault(
            c["resourceName"], {})[c["name"]] = c["value"]
    controls = {c["control_type"]: c["value"] for c in snapshot["control_records"]}
    features = {f["name"]: f["featureLevel"] for f in values.get("FEATURE_LEVEL_RECORD", [])}
    if controls["KRAFT_VERSION"]["kRaftVersion"] > 0:
        features["kraft.version"] = controls["KRAFT_VERSION"]["kRaftVersion"]
    quotas = {}
    for q in values.get("CLIENT_QUOTA_RECORD", []):
        entity = sorted((e["entityType"], e["entityName"]) for e in q["entity"])
        quotas.setdefault(repr(entity), (entity, {}))[1][q["key"]] = q["value"]
    (producer_ids,) = values["PRODUCER_IDS_RECORD"]
    return {
        "offset": upto, "snapshot": None,
        "topics": {t["name"]: t for t in topics.values()},
        "configs": configs,
        "brokers": {b["brokerId"]: {
            "brokerId": b["brokerId"], "brokerEpoch": b["brokerEpoch"],
            "incarnationId": b["incarnationId"], "endPoints": b["endPoints"],
            "features": b["features"], "rack": b["rack"], "fenced": b["fenced"],
            "inControlledShutdown": b["inControlledShutdown"],
            "isMigratingZkBroker": b["isMigratingZkBroker"],
            "logDirs": sorted(b["logDirs"], key=_uuid_order)}
            for b in values.get("REGISTER_BROKER_RECORD", [])},
        "controllers": {c["controllerId"]: c
                        for c in values.get("REGISTER_CONTROLLER_RECORD", [])},
        "features": features,
        "metadataVersion": "4.2-IV1",  # level 29
        "kraftVersion": controls["KRAFT_VERSION"]["kRaftVersion"],
        "voters": controls["KRAFT_VOTERS"]["voters"],
        "producerIds": {"nextProducerId": producer_ids["nextProducerId"]},
        "acls": sorted(values.get("ACCESS_CONTROL_ENTRY_RECORD", []), key=lambda a: a["id"]),
        "clientQuotas": [{"entity": [{"entityType": t, "entityName": n} for t, n in e],
                          "quotas": q} for _, (e, q) in sorted(quotas.items())],
        "scramCredentials": sorted(({"name": s["name"], "mechanism": s["mechanism"],
                                     "iterations": s["iterations"]}
                                    for s in values.get("USER_SCRAM_CREDENTIAL_RECORD", [])),
                                   key=lambda s: (s["name"], s["mechanism"])),
        "delegationTokens": sorted(values.get("DELEGATION_TOKEN_RECORD", []),
                                   key=lambda t: t["tokenId"]),
        "zkMigrationState": None,
    }


def _same_as_json(state, expected, where):
    """to_dict's state (int keys for brokers and controllers) against the expected JSON
    form, JSON types included."""
    assert_same(json.loads(json.dumps(state)), json.loads(json.dumps(expected)), where)


def test_the_log_replayed_to_the_second_snapshot_is_the_image_the_snapshot_holds(kafka4,
                                                                                  tmp_path):
    root, manifest = kafka4
    (second,) = [s for s in manifest["snapshots"] if s["end_offset"] > 0]
    upto = second["end_offset"] - 1
    expected = _image_of_snapshot(second, upto)
    assert set(expected["features"]) == {
        "metadata.version", "kraft.version", "eligible.leader.replicas.version",
        "group.version", "share.version", "streams.version", "transaction.version"}

    # the log alone (the bootstrap snapshot, then every record to the snapshot's offset)
    copy = tmp_path / "logdir"
    shutil.copytree(os.path.join(root, METADATA_DIR), copy / METADATA_DIR)
    os.remove(copy / METADATA_DIR / second["file"])
    from_log = cluster_state(str(copy), upto).to_dict()
    assert from_log.pop("snapshot") == "00000000000000000000-0000000000.checkpoint"
    expected.pop("snapshot")
    _same_as_json(from_log, expected, "replayed log")

    # the snapshot alone, and the log's records past it
    from_snapshot = cluster_state(root, upto).to_dict()
    assert from_snapshot.pop("snapshot") == second["file"]
    _same_as_json(from_snapshot, expected, "snapshot")
    for offset in (upto + 1, upto + 20, manifest["log_end_offset"] - 1):
        with_snapshot = cluster_state(root, offset).to_dict()
        with_log = cluster_state(str(copy), offset).to_dict()
        assert with_snapshot.pop("snapshot") == second["file"]
        with_log.pop("snapshot")
        assert with_snapshot == with_log, offset


# ------------------------------------------------------------------ Kafka's replay rules

def _records(*records):
    return [(offset, decode_metadata_record(encode_metadata_record(*record)))
            for offset, record in enumerate(records)]


OTHER_ID = "MWuo2OG-8-KQy6dNHeI_QQ"


def _partition_record(topic_id, partition, **fields):
    return ("PARTITION_RECORD", 2, {
        "partitionId": partition, "topicId": topic_id, "replicas": [0, 1, 2],
        "isr": [0, 1, 2], "removingReplicas": [], "addingReplicas": [], "leader": 0,
        "leaderEpoch": 0, "partitionEpoch": 0, "directories": [messages.ZERO_UUID] * 3,
        **fields})


TWO_TOPICS = [
    ("TOPIC_RECORD", 0, {"name": "events-a", "topicId": TOPIC_ID}),
    _partition_record(TOPIC_ID, 0, eligibleLeaderReplicas=[1], lastKnownElr=[2]),
    _partition_record(TOPIC_ID, 1),
    ("TOPIC_RECORD", 0, {"name": "events-b", "topicId": OTHER_ID}),
    _partition_record(OTHER_ID, 0, eligibleLeaderReplicas=[2], lastKnownElr=[]),
    _partition_record(OTHER_ID, 1, lastKnownElr=[0]),
]


def _elr(image):
    return {(topic.name, p): (part.eligible_leader_replicas, part.last_known_elr,
                              part.partition_epoch)
            for topic in image.topics.values() for p, part in topic.partitions.items()}


def test_clear_elr_record_clears_one_topic_by_name_or_every_topic():
    assert _elr(replay(_records(*TWO_TOPICS))) == {
        ("events-a", 0): ([1], [2], 0), ("events-a", 1): ([], [], 0),
        ("events-b", 0): ([2], [], 0), ("events-b", 1): ([], [0], 0)}
    one = replay(_records(*TWO_TOPICS, ("CLEAR_ELR_RECORD", 0, {"topicName": "events-b"})))
    assert _elr(one) == {  # a partition with an ELR or last known ELR changes (epoch + 1)
        ("events-a", 0): ([1], [2], 0), ("events-a", 1): ([], [], 0),
        ("events-b", 0): ([], [], 1), ("events-b", 1): ([], [], 1)}
    every = replay(_records(*TWO_TOPICS, ("CLEAR_ELR_RECORD", 0, {"topicName": ""})))
    assert _elr(every) == {
        ("events-a", 0): ([], [], 1), ("events-a", 1): ([], [], 0),
        ("events-b", 0): ([], [], 1), ("events-b", 1): ([], [], 1)}
    # a topic deleted and created again by its name: the new one's are cleared
    again = replay(_records(
        *TWO_TOPICS, ("REMOVE_TOPIC_RECORD", 0, {"topicId": OTHER_ID}),
        ("TOPIC_RECORD", 0, {"name": "events-b", "topicId": "qTgFNPdSxbuiq6NRkNydXQ"}),
        _partition_record("qTgFNPdSxbuiq6NRkNydXQ", 0, eligibleLeaderReplicas=[1]),
        ("CLEAR_ELR_RECORD", 0, {"topicName": "events-b"})))
    assert _elr(again)[("events-b", 0)] == ([], [], 1)
    with pytest.raises(MetadataReplayError, match="CLEAR_ELR_RECORD: no topic named 'gone'"):
        replay(_records(*TWO_TOPICS, ("CLEAR_ELR_RECORD", 0, {"topicName": "gone"})))


def test_partition_change_record_null_or_absent_elr_fields_keep_them():
    change = {"partitionId": 0, "topicId": TOPIC_ID}
    image = replay(_records(
        *TWO_TOPICS,
        ("PARTITION_CHANGE_RECORD", 2, dict(change, isr=[0])),  # no ELR fields
        ("PARTITION_CHANGE_RECORD", 1, dict(change, isr=[0, 1])),  # a version without them
        ("PARTITION_CHANGE_RECORD", 0, dict(change, leader=1))))
    partition = image.topic("events-a").partitions[0]
    assert (partition.eligible_leader_replicas, partition.last_known_elr) == ([1], [2])
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch) == (1, 1, 3)
    image = replay(_records(
        *TWO_TOPICS,
        ("PARTITION_CHANGE_RECORD", 2, dict(change, eligibleLeaderReplicas=[])),
        ("PARTITION_CHANGE_RECORD", 2, dict(change, lastKnownElr=[1, 2]))))
    partition = image.topic("events-a").partitions[0]
    assert (partition.eligible_leader_replicas, partition.last_known_elr) == ([], [1, 2])
    # a version-1 partition record has no ELR: both empty
    image = replay(_records(("TOPIC_RECORD", 0, {"name": "t", "topicId": TOPIC_ID}),
                            ("PARTITION_RECORD", 1, _partition_record(TOPIC_ID, 0)[2])))
    assert _elr(image) == {("t", 0): ([], [], 0)}


def test_kraft_version_is_the_control_records_and_outside_metadata_transactions():
    kraft_1 = decode_control_record(*encode_control_record(
        "KRAFT_VERSION", {"version": 0, "kRaftVersion": 1}))
    voters = {"version": 0, "voters": [{
        "voterId": 1, "voterDirectoryId": TOPIC_ID,
        "endpoints": [{"name": "CONTROLLER", "host": "c1", "port": 9093}],
        "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1}}]}
    voters_record = decode_control_record(*encode_control_record("KRAFT_VOTERS", voters))
    image = replay(_records(
        ("FEATURE_LEVEL_RECORD", 0, {"name": "metadata.version", "featureLevel": 27}),
        ("FEATURE_LEVEL_RECORD", 0, {"name": "kraft.version", "featureLevel": 1})))
    # KAFKA-18979: a feature level record for kraft.version is skipped
    assert (image.finalized_features(), image.kraft_version, image.voters) == (
        {"metadata.version": 27}, 0, None)
    assert image.metadata_version == "4.1-IV1"
    replayer = MetadataReplay()
    for offset, record in _records(
            ("FEATURE_LEVEL_RECORD", 0, {"name": "metadata.version", "featureLevel": 28}),
            ("BEGIN_TRANSACTION_RECORD", 0, {})):
        replayer.apply(record, offset)
    replayer.apply_control(kraft_1, 2)
    replayer.apply_control(voters_record, 3)
    assert replayer.result().kraft_version == 1  # open transaction: its records hidden,
    for offset, record in _records(("ABORT_TRANSACTION_RECORD", 0, {})):  # not KRaft's
        replayer.apply(record, 4)
    state = replayer.result().to_dict()
    assert (state["features"], state["metadataVersion"], state["kraftVersion"],
            state["voters"], state["offset"]) == (
        {"kraft.version": 1, "metadata.version": 28}, "4.2-IV0", 1, voters["voters"], 4)
