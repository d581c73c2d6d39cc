"""KRaft's metadata records, the records of `__cluster_metadata`, and its control records.

A metadata record has no key; its value is framed as Kafka's MetadataRecordSerde
(AbstractApiMessageSerde) frames it:

    unsigned varint frame version (1) | unsigned varint api key | unsigned varint version |
    the message, in its (always flexible) version

The api key picks the record type (Kafka's MetadataRecordType: TOPIC_RECORD, ...). The
tables below are Kafka's metadata message definitions
(metadata/src/main/resources/common/metadata) with every version Kafka 3.0 to 4.2 defines:
Kafka 4.2 defines the api keys 0-5, 7-12, 14, 15 and 17-28 (none with 6, 13 or 16), each
up to the newest version listed here. As Kafka's MetadataRecordSerde, which does not check
a record's version before reading it, a version past those is read as Kafka's generated
reader reads it (messages.py): as the newest, for most record types, and an error where a
struct in it cannot be read at that version (a broker's endpoints, say).

Versions and what they add, with the metadata.version that first writes them:
REGISTER_BROKER_RECORD v1 inControlledShutdown (3.3-IV3), v2 isMigratingZkBroker (3.4-IV0),
v3 the logDirs tag (3.7-IV2); BROKER_REGISTRATION_CHANGE_RECORD v1 inControlledShutdown,
v2 the logDirs tag; PARTITION_RECORD / PARTITION_CHANGE_RECORD v1 directories (3.7-IV2),
v2 the eligibleLeaderReplicas and lastKnownElr tags (KIP-966, 4.0-IV1, as CLEAR_ELR_RECORD;
they hold replicas once eligible.leader.replicas.version is 1).
PARTITION_CHANGE_RECORD carries only what changes: every field but partitionId and topicId
is tagged, and its default (a null list, leader -2, leaderRecoveryState -1) means
"unchanged".

The KRaft control records (LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION,
KRAFT_VOTERS) and transaction markers (COMMIT, ABORT) sit in control batches: key int16
version + int16 type (ControlRecordType), value the message with no frame
(decode_control_record).
"""
import struct
from typing import Dict, List, Optional, Tuple

from ...errors import RecordDecodeError
from ..control import CONTROL_KEY, CONTROL_TYPE_NAMES, END_TXN_MARKER
from .messages import Array, Field, Message, Struct
from .topics import DecodedRecord, InternalTopic, RecordShape, shape_of

METADATA_TOPIC = "__cluster_metadata"
FRAME_VERSION = 1  # AbstractApiMessageSerde's only frame version
METADATA_RECORD = "metadata record"  # how errors name a record of the topic
_SHORT_MAX = (1 << 15) - 1


def _m(name: str, valid: str, *fields: Field) -> Message:
    return Message(name, valid, "0+", tuple(fields))


_INT32S = Array("int32")
_UUIDS = Array("uuid")

_BROKER_ENDPOINT = Struct("BrokerEndpoint", (
    Field("name", "string"), Field("host", "string"), Field("port", "uint16"),
    Field("securityProtocol", "int16")))
_FEATURE_RANGE = Struct("BrokerFeature", (
    Field("name", "string"), Field("minSupportedVersion", "int16"),
    Field("maxSupportedVersion", "int16")))
# RegisterControllerRecord's structs: the same fields under their own names
_CONTROLLER_ENDPOINT = Struct("ControllerEndpoint", _BROKER_ENDPOINT.fields)
_CONTROLLER_FEATURE = Struct("ControllerFeature", _FEATURE_RANGE.fields)

# api key -> (MetadataRecordType name, message)
RECORD_TYPES: Dict[int, Tuple[str, Message]] = {
    0: ("REGISTER_BROKER_RECORD", _m(
        "RegisterBrokerRecord", "0-3",
        Field("brokerId", "int32"),
        Field("isMigratingZkBroker", "bool", versions="2+", default=False),
        Field("incarnationId", "uuid"),
        Field("brokerEpoch", "int64"),
        Field("endPoints", Array(_BROKER_ENDPOINT)),
        Field("features", Array(_FEATURE_RANGE)),
        Field("rack", "string", nullable="0+"),
        Field("fenced", "bool", default=True),
        Field("inControlledShutdown", "bool", versions="1+", default=False),
        Field("logDirs", _UUIDS, versions="3+", tag=0, tagged_versions="3+"))),
    1: ("UNREGISTER_BROKER_RECORD", _m(
        "UnregisterBrokerRecord", "0",
        Field("brokerId", "int32"), Field("brokerEpoch", "int64"))),
    2: ("TOPIC_RECORD", _m(
        "TopicRecord", "0",
        Field("name", "string"), Field("topicId", "uuid"))),
    3: ("PARTITION_RECORD", _m(
        "PartitionRecord", "0-2",
        Field("partitionId", "int32", default=-1),
        Field("topicId", "uuid"),
        Field("replicas", _INT32S),
        Field("isr", _INT32S),
        Field("removingReplicas", _INT32S),
        Field("addingReplicas", _INT32S),
        Field("leader", "int32", default=-1),
        Field("leaderRecoveryState", "int8", tag=0, tagged_versions="0+", default=0),
        Field("leaderEpoch", "int32", default=-1),
        Field("partitionEpoch", "int32", default=-1),
        Field("directories", _UUIDS, versions="1+"),
        Field("eligibleLeaderReplicas", _INT32S, versions="2+", nullable="2+", tag=1,
              tagged_versions="2+"),
        Field("lastKnownElr", _INT32S, versions="2+", nullable="2+", tag=2,
              tagged_versions="2+"))),
    4: ("CONFIG_RECORD", _m(
        "ConfigRecord", "0",
        Field("resourceType", "int8"), Field("resourceName", "string"),
        Field("name", "string"), Field("value", "string", nullable="0+"))),
    5: ("PARTITION_CHANGE_RECORD", _m(
        "PartitionChangeRecord", "0-2",
        Field("partitionId", "int32", default=-1),
        Field("topicId", "uuid"),
        Field("isr", _INT32S, nullable="0+", tag=0, tagged_versions="0+"),
        Field("leader", "int32", tag=1, tagged_versions="0+", default=-2),
        Field("replicas", _INT32S, nullable="0+", tag=2, tagged_versions="0+"),
        Field("removingReplicas", _INT32S, nullable="0+", tag=3, tagged_versions="0+"),
        Field("addingReplicas", _INT32S, nullable="0+", tag=4, tagged_versions="0+"),
        Field("leaderRecoveryState", "int8", tag=5, tagged_versions="0+", default=-1),
        Field("directories", _UUIDS, versions="1+", nullable="1+", tag=8,
              tagged_versions="1+"),
        Field("eligibleLeaderReplicas", _INT32S, versions="2+", nullable="2+", tag=6,
              tagged_versions="2+"),
        Field("lastKnownElr", _INT32S, versions="2+", nullable="2+", tag=7,
              tagged_versions="2+"))),
    7: ("FENCE_BROKER_RECORD", _m(
        "FenceBrokerRecord", "0", Field("id", "int32"), Field("epoch", "int64"))),
    8: ("UNFENCE_BROKER_RECORD", _m(
        "UnfenceBrokerRecord", "0", Field("id", "int32"), Field("epoch", "int64"))),
    9: ("REMOVE_TOPIC_RECORD", _m(
        "RemoveTopicRecord", "0", Field("topicId", "uuid"))),
    10: ("DELEGATION_TOKEN_RECORD", _m(
        "DelegationTokenRecord", "0",
        Field("owner", "string"), Field("requester", "string"),
        Field("renewers", Array("string")), Field("issueTimestamp", "int64"),
        Field("maxTimestamp", "int64"), Field("expirationTimestamp", "int64"),
        Field("tokenId", "string"))),
    11: ("USER_SCRAM_CREDENTIAL_RECORD", _m(
        "UserScramCredentialRecord", "0",
        Field("name", "string"), Field("mechanism", "int8"), Field("salt", "bytes"),
        Field("storedKey", "bytes"), Field("serverKey", "bytes"),
        Field("iterations", "int32"))),
    12: ("FEATURE_LEVEL_RECORD", _m(
        "FeatureLevelRecord", "0",
        Field("name", "string"), Field("featureLevel", "int16"))),
    14: ("CLIENT_QUOTA_RECORD", _m(
        "ClientQuotaRecord", "0",
        Field("entity", Array(Struct("EntityData", (
            Field("entityType", "string"),
            Field("entityName", "string", nullable="0+"))))),
        Field("key", "string"), Field("value", "float64"), Field("remove", "bool"))),
    15: ("PRODUCER_IDS_RECORD", _m(
        "ProducerIdsRecord", "0",
        Field("brokerId", "int32"), Field("brokerEpoch", "int64", default=-1),
        Field("nextProducerId", "int64"))),
    17: ("BROKER_REGISTRATION_CHANGE_RECORD", _m(
        "BrokerRegistrationChangeRecord", "0-2",
        Field("brokerId", "int32"), Field("brokerEpoch", "int64"),
        Field("fenced", "int8", tag=0, tagged_versions="0+"),
        Field("inControlledShutdown", "int8", versions="1+", tag=1, tagged_versions="1+"),
        Field("logDirs", _UUIDS, versions="2+", tag=2, tagged_versions="2+"))),
    18: ("ACCESS_CONTROL_ENTRY_RECORD", _m(
        "AccessControlEntryRecord", "0",
        Field("id", "uuid"), Field("resourceType", "int8"), Field("resourceName", "string"),
        Field("patternType", "int8"), Field("principal", "string"), Field("host", "string"),
        Field("operation", "int8"), Field("permissionType", "int8"))),
    19: ("REMOVE_ACCESS_CONTROL_ENTRY_RECORD", _m(
        "RemoveAccessControlEntryRecord", "0", Field("id", "uuid"))),
    20: ("NO_OP_RECORD", _m("NoOpRecord", "0")),
    21: ("ZK_MIGRATION_STATE_RECORD", _m(
        "ZkMigrationStateRecord", "0", Field("zkMigrationState", "int8"))),
    22: ("REMOVE_USER_SCRAM_CREDENTIAL_RECORD", _m(
        "RemoveUserScramCredentialRecord", "0",
        Field("name", "string"), Field("mechanism", "int8"))),
    23: ("BEGIN_TRANSACTION_RECORD", _m(
        "BeginTransactionRecord", "0",
        Field("name", "string", nullable="0+", tag=0, tagged_versions="0+"))),
    24: ("END_TRANSACTION_RECORD", _m("EndTransactionRecord", "0")),
    25: ("ABORT_TRANSACTION_RECORD", _m(
        "AbortTransactionRecord", "0",
        Field("reason", "string", nullable="0+", tag=0, tagged_versions="0+"))),
    26: ("REMOVE_DELEGATION_TOKEN_RECORD", _m(
        "RemoveDelegationTokenRecord", "0", Field("tokenId", "string"))),
    27: ("REGISTER_CONTROLLER_RECORD", _m(
        "RegisterControllerRecord", "0",
        Field("controllerId", "int32"), Field("incarnationId", "uuid"),
        Field("zkMigrationReady", "bool"),
        Field("endPoints", Array(_CONTROLLER_ENDPOINT)),
        Field("features", Array(_CONTROLLER_FEATURE)))),
    28: ("CLEAR_ELR_RECORD", _m(  # topicName "" clears every topic's ELR
        "ClearElrRecord", "0", Field("topicName", "string"))),
}

RECORD_TYPE_KEYS: Dict[str, int] = {name: key for key, (name, _) in RECORD_TYPES.items()}


def record_type_name(api_key: int) -> str:
    """MetadataRecordType's name of `api_key`, UNKNOWN_<n> for a key this module lacks."""
    known = RECORD_TYPES.get(api_key)
    return known[0] if known else f"UNKNOWN_{api_key}"


def message_of(record_type) -> Tuple[int, str, Message]:
    """(api key, type name, message) of a record type given by name or api key."""
    key = RECORD_TYPE_KEYS.get(record_type, record_type)
    if key not in RECORD_TYPES:
        raise RecordDecodeError(f"{record_type!r} is not a metadata record type this "
                                f"library defines")
    name, message = RECORD_TYPES[key]
    return key, name, message


def _read_uvarint(data, position: int, what: str, record: str) -> Tuple[int, int]:
    result = shift = 0
    start = position
    while True:
        if position >= len(data):
            raise RecordDecodeError(
                f"{record} of {len(data)} bytes ends inside its {what} (a varint "
                f"from byte {start})")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift > 28:
            raise RecordDecodeError(
                f"{record}'s {what} at byte {start} is a varint longer than 5 bytes")
    # As AbstractApiMessageSerde reads it: a Java int (a 5th byte's high bits are lost, or
    # make it negative), refused above 32767, then cast to a short.
    result &= 0xFFFFFFFF
    if result & 0x80000000:
        result -= 1 << 32
    if result > _SHORT_MAX:
        raise RecordDecodeError(f"{record}'s {what} is {result}, larger than "
                                f"{_SHORT_MAX}")
    result &= 0xFFFF
    return (result - (1 << 16) if result & 0x8000 else result), position


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_frame(value, record: str = METADATA_RECORD) -> Tuple[int, int, int]:
    """(api key, version, where the message starts) of a value framed as
    AbstractApiMessageSerde frames it: a metadata record's, or another serde's `record`
    (how errors name it)."""
    if value is None:
        raise RecordDecodeError(f"{record} has a null value ({record}s always have one)")
    frame, position = _read_uvarint(value, 0, "frame version", record)
    if frame != FRAME_VERSION:
        hint = (" (frame version 0 is KRaft's 2.8 preview, which later Kafka cannot read "
                "either)") if frame == 0 and record == METADATA_RECORD else ""
        raise RecordDecodeError(
            f"{record} frame version {frame} is unknown (only frame version "
            f"{FRAME_VERSION} is defined){hint}")
    api_key, position = _read_uvarint(value, position, "record type (api key)", record)
    version, position = _read_uvarint(value, position, "record version", record)
    return api_key, version, position


def encode_frame(api_key: int, version: int) -> bytes:
    """The frame AbstractApiMessageSerde writes before a message."""
    return _uvarint(FRAME_VERSION) + _uvarint(api_key) + _uvarint(version)


def decode_metadata_record(value) -> DecodedRecord:
    """One metadata record's value in Kafka's JSON form. A record type this module does
    not define gives known=False and no value (a newer Kafka's type, where Kafka 4.2's
    serde fails); bytes Kafka's serde cannot read raise RecordDecodeError."""
    api_key, version, position = read_frame(value)
    known = RECORD_TYPES.get(api_key)
    if api_key < 0:  # no type a newer Kafka could add: a varint of 5 bytes gone negative
        raise RecordDecodeError(f"metadata record has api key {api_key}, which is no "
                                f"record type")
    if known is None:
        return DecodedRecord(f"UNKNOWN_{api_key}", None, version, None, None, known=False)
    name, message = known
    try:
        decoded = message.decode(value, version, position)
    except RecordDecodeError as error:
        raise RecordDecodeError(f"metadata record {name} (api key {api_key}) version "
                                f"{version}: {error.reason}") from None
    return DecodedRecord(name, None, version, None, decoded)


def encode_metadata_record(record_type, version: int, value: dict) -> bytes:
    """A metadata record's framed value, as MetadataRecordSerde writes it; `record_type`
    by name (TOPIC_RECORD) or api key."""
    api_key, _, message = message_of(record_type)
    return encode_frame(api_key, version) + message.encode(value, version)


# ------------------------------------------------------------------ control records

CONTROL_TYPES = CONTROL_TYPE_NAMES  # format/control.py: the one home of these facts
CONTROL_TYPE_IDS = {name: type_id for type_id, name in CONTROL_TYPES.items()}

_VOTER = Struct("Voter", (Field("voterId", "int32"),
                          Field("voterDirectoryId", "uuid", versions="1+")))
# Each starts with an int16 Version field, the version its value is written in.
CONTROL_MESSAGES: Dict[str, Message] = {
    "LEADER_CHANGE": Message("LeaderChangeMessage", "0-1", "0+", (
        Field("version", "int16"), Field("leaderId", "int32"),
        Field("voters", Array(_VOTER)), Field("grantingVoters", Array(_VOTER)))),
    "SNAPSHOT_HEADER": Message("SnapshotHeaderRecord", "0", "0+", (
        Field("version", "int16"), Field("lastContainedLogTimestamp", "int64"))),
    "SNAPSHOT_FOOTER": Message("SnapshotFooterRecord", "0", "0+", (
        Field("version", "int16"),)),
    "KRAFT_VERSION": Message("KRaftVersionRecord", "0", "0+", (
        Field("version", "int16"), Field("kRaftVersion", "int16"))),
    "KRAFT_VOTERS": Message("VotersRecord", "0", "0+", (
        Field("version", "int16"),
        Field("voters", Array(Struct("Voter", (
            Field("voterId", "int32"), Field("voterDirectoryId", "uuid"),
            Field("endpoints", Array(Struct("Endpoint", (
                Field("name", "string"), Field("host", "string"),
                Field("port", "uint16"))))),
            Field("kRaftVersionFeature", Struct("KRaftVersionFeature", (
                Field("minSupportedVersion", "int16"),
                Field("maxSupportedVersion", "int16")))))))))),
}
_END_TXN_MARKER = END_TXN_MARKER


def decode_control_record(key, value) -> DecodedRecord:
    """A control record: record_type is the ControlRecordType name, key {version, type},
    value the message in Kafka's JSON form (value_version: its Version field). An unknown
    control type gives known=False, as Kafka ignores such records."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise RecordDecodeError(f"control record key is {0 if key is None else len(key)} "
                                f"bytes long; a control record key has {CONTROL_KEY.size}")
    key_version, type_id = CONTROL_KEY.unpack_from(key, 0)
    if key_version < 0:
        raise RecordDecodeError(f"control record key version {key_version} is negative")
    decoded_key = {"version": key_version, "type": type_id}
    name = CONTROL_TYPES.get(type_id)
    if name is None:
        return DecodedRecord(f"UNKNOWN_{type_id}", key_version, None, decoded_key, None,
                             known=False)
    if value is None:
        raise RecordDecodeError(f"{name} control record has a null value")
    if name in ("ABORT", "COMMIT"):
        if len(value) < _END_TXN_MARKER.size:
            raise RecordDecodeError(f"{name} marker value is {len(value)} bytes long, too "
                                    f"short for its version and coordinator epoch")
        version, epoch = _END_TXN_MARKER.unpack_from(value, 0)
        return DecodedRecord(name, key_version, version, decoded_key,
                             {"version": version, "coordinatorEpoch": epoch})
    if len(value) < 2:
        raise RecordDecodeError(f"{name} control record value is {len(value)} bytes long, "
                                f"too short for its version")
    (version,) = struct.unpack_from(">h", value, 0)
    message = CONTROL_MESSAGES[name]
    try:
        message.check_version(version)
        decoded = message.decode(value, version)
    except RecordDecodeError as error:
        raise RecordDecodeError(f"{name} control record: {error.reason}") from None
    return DecodedRecord(name, key_version, version, decoded_key, decoded)


def encode_control_record(control_type: str, value: dict) -> Tuple[bytes, bytes]:
    """(key, value) of a KRaft control record; value holds its `version` field."""
    type_id = CONTROL_TYPE_IDS[control_type]
    key = CONTROL_KEY.pack(0, type_id)
    if control_type in ("ABORT", "COMMIT"):
        return key, _END_TXN_MARKER.pack(value.get("version", 0), value["coordinatorEpoch"])
    return key, CONTROL_MESSAGES[control_type].encode(value, value.get("version", 0))


# ------------------------------------------------------------------ the topic

class ClusterMetadataTopic(InternalTopic):
    option_value = "clusterMetadata"
    topic = METADATA_TOPIC
    record_types = tuple(name for name, _ in RECORD_TYPES.values())
    has_snapshots = True

    def decode(self, key: Optional[bytes], value: Optional[bytes]) -> DecodedRecord:
        return decode_metadata_record(value)

    def record_shapes(self) -> List[RecordShape]:
        # metadata records have no key
        return [RecordShape(name, (), shape_of(message))
                for name, message in RECORD_TYPES.values()]


CLUSTER_METADATA = ClusterMetadataTopic()
