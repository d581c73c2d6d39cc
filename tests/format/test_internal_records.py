"""Decoding `__consumer_offsets`, `__share_group_state` and `__transaction_state` records
(format/internal).

The ground truth is ../shared/fixtures/internal-topics (Kafka 3.9) and
internal-topics-kafka4 (Kafka 4.2): partitions that Kafka's own serializers wrote, with
manifests holding every record's bytes and Kafka's decoding of it.
Beside them: every message version encoded with all fields set and decoded back, the
errors Kafka's loaders raise, and kafka-python's consumer-protocol encoder.
"""
import base64
import json
import os
import struct

import pytest

from segmentlog_datasource.errors import RecordDecodeError
from segmentlog_datasource.format import ScanOptions
from segmentlog_datasource.format.internal import consumer_protocol
from segmentlog_datasource.format.internal.group_records import (
    ASSIGNMENT_DECODED, CONSUMER_OFFSETS, GROUP_METADATA_VALUE, OFFSET_COMMIT_VALUE,
    RECORD_TYPES, SUBSCRIPTION_DECODED)
from segmentlog_datasource.format.internal.messages import (
    Array, Struct, in_range, uuid_text, versions, write_version)
from segmentlog_datasource.format.internal.share_records import (
    RECORD_TYPES as SHARE_RECORD_TYPES, SHARE_GROUP_STATE)
from segmentlog_datasource.format.internal.registry import internal_topics
from segmentlog_datasource.format.internal.transaction_records import (
    TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE, TRANSACTION_STATE)
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from support.fixtures import internal_topics_kafka4_root, internal_topics_root
from support.kafka_json import as_kafka_json, assert_same

PARTITIONS = {"__consumer_offsets-0": CONSUMER_OFFSETS,
              "__consumer_offsets-1": CONSUMER_OFFSETS,
              "__transaction_state-0": TRANSACTION_STATE,
              "__share_group_state-0": SHARE_GROUP_STATE}
SETS = {"kafka-3.9": internal_topics_root, "kafka-4.2": internal_topics_kafka4_root}
CASES = [(kafka, name) for kafka, root in SETS.items() for name in PARTITIONS
         if os.path.isfile(os.path.join(root(), name + ".manifest.json"))]


def load_manifest(kafka, name):
    with open(os.path.join(SETS[kafka](), name + ".manifest.json")) as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def manifests():
    root = internal_topics_root()
    found = {}
    for kafka, name in CASES:
        if kafka == "kafka-3.9":
            found[name] = load_manifest(kafka, name)
    return root, found


def _bytes(text):
    return None if text is None else base64.b64decode(text)


def as_json(value):
    """Kafka's JSON form: bytes as base64."""
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {name: as_json(item) for name, item in value.items()}
    if isinstance(value, list):
        return [as_json(item) for item in value]
    return value


def _without_version(decoded):
    return {name: as_json(item) for name, item in decoded.items() if name != "version"}


def test_both_sets_hold_every_internal_topic():
    assert sorted(CASES) == sorted(
        [("kafka-3.9", name) for name in PARTITIONS if name != "__share_group_state-0"]
        + [("kafka-4.2", name) for name in PARTITIONS])


@pytest.mark.parametrize("kafka,partition", CASES)
def test_every_record_decodes_as_kafka_decoded_it(kafka, partition):
    topic = PARTITIONS[partition]
    manifest = load_manifest(kafka, partition)
    records = manifest["records"]
    assert records
    types_seen = set()
    for expected in records:
        where = f"{kafka} {partition} offset {expected['offset']}"
        decoded = topic.decode(_bytes(expected["key_b64"]), _bytes(expected["value_b64"]))
        assert decoded.known, where
        assert decoded.key_version == expected["key_version"], where
        assert_same(decoded.key, expected["key"], where + " key")
        assert decoded.value_version == expected["value_version"], where
        assert decoded.deleted is expected["tombstone"], where
        assert decoded.record_type == expected.get("record_type_name", "TransactionLog"), where
        types_seen.add(decoded.record_type)
        value = None if decoded.value is None else dict(decoded.value)
        if topic is TRANSACTION_STATE and not expected["tombstone"]:
            assert value.pop("state") == expected["state"], where
        if expected.get("members_decoded") is not None:
            members = [dict(member) for member in value["members"]]
            value["members"] = members
            assert [(member["memberId"],
                     member[SUBSCRIPTION_DECODED]["version"],
                     _without_version(member[SUBSCRIPTION_DECODED]),
                     member[ASSIGNMENT_DECODED]["version"],
                     _without_version(member[ASSIGNMENT_DECODED])) for member in members] == \
                [(member["member_id"], member["subscription_version"],
                  member["subscription"], member["assignment_version"],
                  member["assignment"]) for member in expected["members_decoded"]], where
            for member in members:
                del member[SUBSCRIPTION_DECODED], member[ASSIGNMENT_DECODED]
        assert_same(as_kafka_json(value), expected["value"], where + " value")
    manifest_types = {name.split(":")[0] for name in manifest["record_types"]}
    assert types_seen == manifest_types


def test_segmentlog_reads_the_manifests_bytes(manifests):
    root, found = manifests
    options = parse_read_options({"path": root,
                                  "subscribe": "__consumer_offsets,__transaction_state"})
    read = {}
    for fragment in plan_fragments(options, Constraints()):
        for batch in fragment.scan(ScanOptions()):
            columns = [batch.column(name).to_pylist()
                       for name in ("topic", "partition", "offset", "key", "value")]
            for topic, partition, offset, key, value in zip(*columns):
                read[(f"{topic}-{partition}", offset)] = (key, value)
    expected = {(name, record["offset"]): (_bytes(record["key_b64"]),
                                           _bytes(record["value_b64"]))
                for name, manifest in found.items() for record in manifest["records"]}
    assert read == expected


# ---- every message version, encoded with every field set and decoded back ----------------

def _present(item, version, flexible):
    if item.tag is not None:
        return flexible and in_range(version, versions(item.tagged_versions))
    return in_range(version, versions(item.versions))


def sample(kind, seed, version, flexible):
    """A value of `kind` that is no field's default."""
    if isinstance(kind, Struct):
        return sample_fields(kind.fields, seed, version, flexible)
    if isinstance(kind, Array):
        return [sample(kind.element, seed + offset, version, flexible) for offset in (1, 2)]
    if kind == "string":
        return f"text-{seed}"
    if kind == "bytes":
        return bytes([seed % 256, 1, 2])
    if kind == "uuid":
        return uuid_text(bytes((seed + index) % 256 for index in range(16)))
    if kind == "bool":
        return True
    return {"int8": 3, "int16": 300, "uint16": 60000, "int32": 70000}.get(kind, 1 << 40) \
        + seed % 7


def sample_fields(fields, seed, version, flexible):
    return {item.name: sample(item.type, seed + index * 11, version, flexible)
            for index, item in enumerate(fields) if _present(item, version, flexible)}


def every_message():
    seen = {}
    for record_type, (name, key, value) in [*RECORD_TYPES.items(),
                                            *SHARE_RECORD_TYPES.items()]:
        seen.setdefault(key.name, (key, [0]))
        seen.setdefault(value.name, (value, list(range(value.span[0], value.span[1] + 1))))
    seen["TransactionLogKey"] = (TRANSACTION_LOG_KEY, [0])
    seen["TransactionLogValue"] = (TRANSACTION_LOG_VALUE, [0, 1])
    seen["Subscription"] = (consumer_protocol.SUBSCRIPTION, [0, 1, 2, 3])
    seen["Assignment"] = (consumer_protocol.ASSIGNMENT, [0, 1, 2, 3])
    return [(message, version) for message, message_versions in seen.values()
            for version in message_versions]


def test_every_message_version_round_trips():
    cases = every_message()
    assert len(cases) >= 60
    for message, version in cases:
        flexible = message.is_flexible(version)
        value = sample_fields(message.fields, version, version, flexible)
        assert message.decode(message.encode(value, version), version) == value, \
            (message.name, version)


def test_nullable_fields_round_trip_as_null():
    value = {"instanceId": None, "rackId": None, "clientId": "c", "clientHost": "/h",
             "subscribedTopicNames": [], "subscribedTopicRegex": None,
             "rebalanceTimeoutMs": -1, "serverAssignor": None}
    message = RECORD_TYPES[5][2]
    data = message.encode({**value, "classicMemberMetadata": None}, 0)
    assert message.decode(data, 0) == value  # a null tagged struct is not written
    classic = {"sessionTimeoutMs": 45000,
               "supportedProtocols": [{"name": "range", "metadata": b"\x00\x03"}]}
    data = message.encode({**value, "classicMemberMetadata": classic}, 0)
    # Kafka writes the tagged struct as: 1 tagged field, tag 0, size 17, varint 1
    # (present), then the struct (its array and strings compact, each struct's empty tags)
    body = struct.pack(">i", 45000) + b"\x02" + b"\x06range" + b"\x03\x00\x03" + b"\x00\x00"
    assert data.endswith(bytes([1, 0, 1 + len(body), 1]) + body)
    assert message.decode(data, 0) == {**value, "classicMemberMetadata": classic}


@pytest.mark.parametrize("topic,table", [(CONSUMER_OFFSETS, RECORD_TYPES),
                                         (SHARE_GROUP_STATE, SHARE_RECORD_TYPES)],
                         ids=["consumerOffsets", "shareGroupState"])
def test_every_record_type_decodes_through_the_topic(topic, table):
    for record_type, (name, key, value) in table.items():
        key_value = sample_fields(key.fields, record_type, 0, False)
        for version in range(value.span[0], value.span[1] + 1):
            fields = sample_fields(value.fields, version, version, value.is_flexible(version))
            if value is GROUP_METADATA_VALUE:
                fields["protocolType"] = "other"  # members' bytes are no consumer protocol
            decoded = topic.decode(
                write_version(record_type) + key.encode(key_value, 0),
                write_version(version) + value.encode(fields, version))
            assert (decoded.record_type, decoded.key_version, decoded.value_version,
                    decoded.key, decoded.value, decoded.deleted, decoded.known) == \
                (name, record_type, version, key_value, fields, False, True)
        gone = topic.decode(write_version(record_type) + key.encode(key_value, 0), None)
        assert (gone.record_type, gone.key, gone.value, gone.deleted) == \
            (name, key_value, None, True)
    assert topic.record_types == tuple(name for name, _, _ in table.values())
    assert internal_topics()[topic.option_value] is topic
    assert internal_topics()["transactionState"] is TRANSACTION_STATE


def test_kafka_42_record_types_are_numbered_as_kafka_numbers_them():
    assert {number: name for number, (name, _, _) in RECORD_TYPES.items()} == {
        0: "LegacyOffsetCommit", 1: "OffsetCommit", 2: "GroupMetadata",
        3: "ConsumerGroupMetadata", 4: "ConsumerGroupPartitionMetadata",
        5: "ConsumerGroupMemberMetadata", 6: "ConsumerGroupTargetAssignmentMetadata",
        7: "ConsumerGroupTargetAssignmentMember", 8: "ConsumerGroupCurrentMemberAssignment",
        10: "ShareGroupMemberMetadata", 11: "ShareGroupMetadata",
        12: "ShareGroupTargetAssignmentMetadata", 13: "ShareGroupTargetAssignmentMember",
        14: "ShareGroupCurrentMemberAssignment", 15: "ShareGroupStatePartitionMetadata",
        16: "ConsumerGroupRegularExpression", 17: "StreamsGroupMetadata",
        19: "StreamsGroupMemberMetadata", 20: "StreamsGroupTargetAssignmentMetadata",
        21: "StreamsGroupTargetAssignmentMember", 22: "StreamsGroupCurrentMemberAssignment",
        23: "StreamsGroupTopology"}
    assert {number: name for number, (name, _, _) in SHARE_RECORD_TYPES.items()} == {
        0: "ShareSnapshot", 1: "ShareUpdate"}


def test_transaction_4x_tagged_fields_and_states():
    value = {"producerId": 7, "previousProducerId": 5, "nextProducerId": 9,
             "producerEpoch": 2, "nextProducerEpoch": 0, "transactionTimeoutMs": 60000,
             "transactionStatus": 7,
             "transactionPartitions": [{"topic": "orders", "partitionIds": [0, 1]}],
             "transactionLastUpdateTimestampMs": 10, "transactionStartTimestampMs": 9,
             "clientTransactionVersion": 2}
    key = write_version(0) + TRANSACTION_LOG_KEY.encode({"transactionalId": "t"}, 0)
    decoded = TRANSACTION_STATE.decode(key, write_version(1) +
                                       TRANSACTION_LOG_VALUE.encode(value, 1))
    assert decoded.value == {**value, "state": "PrepareEpochFence"}
    gone = TRANSACTION_STATE.decode(key, None)
    assert (gone.deleted, gone.value, gone.value_version, gone.key) == \
        (True, None, None, {"transactionalId": "t"})
    with pytest.raises(RecordDecodeError, match="transactionStatus 8"):
        TRANSACTION_STATE.decode(key, write_version(1) + TRANSACTION_LOG_VALUE.encode(
            {**value, "transactionStatus": 8}, 1))
    unknown = TRANSACTION_STATE.decode(write_version(3) + b"xyz", b"\x00\x00")
    assert (unknown.record_type, unknown.known, unknown.key) == ("UNKNOWN_3", False, None)


# ---- errors ---------------------------------------------------------------------------

OFFSET_KEY = write_version(1) + RECORD_TYPES[1][1].encode(
    {"group": "g", "topic": "t", "partition": 0}, 0)
OFFSET_VALUE = write_version(3) + OFFSET_COMMIT_VALUE.encode(
    {"offset": 5, "leaderEpoch": 1, "metadata": "m", "commitTimestamp": 9}, 3)


def test_unknown_value_version_is_an_error_naming_it():
    with pytest.raises(RecordDecodeError, match="OffsetCommitValue version 5 is unknown"):
        CONSUMER_OFFSETS.decode(OFFSET_KEY, write_version(5) + OFFSET_VALUE[2:])
    with pytest.raises(RecordDecodeError, match="TransactionLogValue version 2 is unknown"):
        TRANSACTION_STATE.decode(write_version(0) + b"\x00\x01t", write_version(2) + b"")


def test_truncated_values_are_errors_naming_the_message_and_bytes_after_one_are_not():
    with pytest.raises(RecordDecodeError, match="OffsetCommitValue version 3 ends early"):
        CONSUMER_OFFSETS.decode(OFFSET_KEY, OFFSET_VALUE[:-3])
    # Kafka's CoordinatorRecordSerde never checks that a key or value was read to its end
    assert CONSUMER_OFFSETS.decode(OFFSET_KEY + b"\x00", OFFSET_VALUE + b"\x00").value == \
        CONSUMER_OFFSETS.decode(OFFSET_KEY, OFFSET_VALUE).value
    with pytest.raises(RecordDecodeError, match="OffsetCommitKey version 0 ends early"):
        CONSUMER_OFFSETS.decode(OFFSET_KEY[:-1], OFFSET_VALUE)
    with pytest.raises(RecordDecodeError, match="too short for its version"):
        CONSUMER_OFFSETS.decode(b"\x00", OFFSET_VALUE)


def test_unknown_record_type_is_a_record_of_unknown_type():
    # 9 and 18: the share and streams groups' early-access types, none of Kafka 4.2's
    for record_type in (9, 18, 24):
        decoded = CONSUMER_OFFSETS.decode(write_version(record_type) + b"\x00\x01g",
                                          b"\x00\x00\x01")
        assert (decoded.record_type, decoded.known, decoded.key, decoded.value,
                decoded.key_version, decoded.deleted) == \
            (f"UNKNOWN_{record_type}", False, None, None, record_type, False)
    unknown = SHARE_GROUP_STATE.decode(write_version(2) + b"\x00\x01g", b"\x00\x00")
    assert (unknown.record_type, unknown.known) == ("UNKNOWN_2", False)
    assert CONSUMER_OFFSETS.decode(write_version(99), None).deleted


# ---- the consumer protocol ------------------------------------------------------------

def _group_value(subscription, assignment, protocol_type="consumer"):
    member = {"memberId": "m", "groupInstanceId": None, "clientId": "c", "clientHost": "/h",
              "rebalanceTimeout": 1, "sessionTimeout": 2, "subscription": subscription,
              "assignment": assignment}
    value = {"protocolType": protocol_type, "generation": 1, "protocol": "range",
             "leader": "m", "currentStateTimestamp": 3, "members": [member]}
    decoded = CONSUMER_OFFSETS.decode(
        write_version(2) + RECORD_TYPES[2][1].encode({"group": "g"}, 0),
        write_version(3) + GROUP_METADATA_VALUE.encode(value, 3))
    return decoded.value["members"][0]


def test_kafka_python_consumer_protocol_bytes_decode_alike():
    from kafka.protocol.consumer.metadata import (
        ConsumerProtocolAssignment, ConsumerProtocolSubscription)
    for version in range(4):
        subscription = ConsumerProtocolSubscription(
            version=version, topics=["orders", "pay"], user_data=b"ud",
            owned_partitions=[("orders", [1, 2])], generation_id=7, rack_id="r1").encode()
        assignment = ConsumerProtocolAssignment(
            version=version, assigned_partitions=[("orders", [0, 2]), ("pay", [1])],
            user_data=b"x").encode()
        member = _group_value(subscription, assignment)
        expected = {"version": version, "topics": ["orders", "pay"], "userData": b"ud",
                    "ownedPartitions": [{"topic": "orders", "partitions": [1, 2]}],
                    "generationId": 7, "rackId": "r1"}
        present = ["version", "topics", "userData", "ownedPartitions", "generationId",
                   "rackId"][:3 + version]
        assert member[SUBSCRIPTION_DECODED] == {name: expected[name] for name in present}
        assert member[ASSIGNMENT_DECODED] == {
            "version": version, "userData": b"x",
            "assignedPartitions": [{"topic": "orders", "partitions": [0, 2]},
                                   {"topic": "pay", "partitions": [1]}]}
        assert (member["subscription"], member["assignment"]) == (subscription, assignment)


def test_consumer_protocol_read_as_kafka_reads_it():
    version3 = consumer_protocol.encode(consumer_protocol.ASSIGNMENT, {
        "assignedPartitions": [{"topic": "t", "partitions": [4]}], "userData": None}, 3)
    # a newer version: read with the newest known layout, what follows it unread
    newer = struct.pack(">h", 9) + version3[2:] + b"\x07\x07"
    member = _group_value(b"", newer)
    assert member[ASSIGNMENT_DECODED] == {
        "version": 9, "assignedPartitions": [{"topic": "t", "partitions": [4]}],
        "userData": None}
    assert member[SUBSCRIPTION_DECODED] is None  # no bytes: nothing to decode
    # bytes that do not parse: unknown, as Kafka's coordinator takes them, never an error
    for garbage in (b"\x00", b"\xff\xff\x00", b"\x00\x03\x00\x00\x00\x09abc"):
        member = _group_value(garbage, garbage)
        assert (member[SUBSCRIPTION_DECODED], member[ASSIGNMENT_DECODED]) == (None, None)
        assert member["subscription"] == garbage
    # another protocol type's members keep only their bytes
    member = _group_value(version3, version3, protocol_type="connect")
    assert SUBSCRIPTION_DECODED not in member and ASSIGNMENT_DECODED not in member


def _shapes(topic):
    return {shape.name: (dict(shape.key), dict(shape.value)) for shape in topic.record_shapes()}


def test_each_record_type_has_a_shape_of_its_own():
    shapes = _shapes(CONSUMER_OFFSETS)
    assert list(shapes) == list(CONSUMER_OFFSETS.record_types)
    values = {name: value for name, (_, value) in shapes.items()}
    assert values["OffsetCommit"]["offset"] == "int64"
    assert values["OffsetCommit"]["topicId"] == "string"
    assert values["ConsumerGroupCurrentMemberAssignment"]["state"] == "int8"
    members = values["GroupMetadata"]["members"][1][1]
    assert members[SUBSCRIPTION_DECODED][1]["rackId"] == "string"
    assert members[ASSIGNMENT_DECODED][1]["version"] == "int16"
    # one name, two types: each record type keeps its own
    assert values["ConsumerGroupPartitionMetadata"]["topics"][0] == "array"
    assert values["ConsumerGroupPartitionMetadata"]["topics"][1][0] == "struct"
    assert values["ConsumerGroupRegularExpression"]["topics"] == ("array", "string")
    assert values["StreamsGroupTopology"]["subtopologies"][1][1]["copartitionGroups"] == \
        ("array", ("struct", {"sourceTopics": ("array", "int16"),
                              "sourceTopicRegex": ("array", "int16"),
                              "repartitionSourceTopics": ("array", "int16")}))
    assert shapes["OffsetCommit"][0] == {"group": "string", "topic": "string",
                                         "partition": "int32"}
    transaction = _shapes(TRANSACTION_STATE)["TransactionLog"][1]
    assert transaction["state"] == "string" and transaction["nextProducerEpoch"] == "int16"
    share = _shapes(SHARE_GROUP_STATE)
    assert share["ShareSnapshot"][1]["stateBatches"] == ("array", ("struct", {
        "firstOffset": "int64", "lastOffset": "int64", "deliveryState": "int8",
        "deliveryCount": "int16"}))
    assert share["ShareUpdate"][0] == {"groupId": "string", "topicId": "string",
                                       "partition": "int32"}
