"""The records of `__remote_log_metadata`: tiered storage's (KIP-405) account of which
remote segments exist and in which state, as Kafka's TopicBasedRemoteLogMetadataManager
publishes it.

A record has a null key; its value is framed as Kafka's RemoteLogMetadataSerde
(AbstractApiMessageSerde) frames it, like a KRaft metadata record:

    unsigned varint frame version (1) | unsigned varint api key | unsigned varint version |
    the message, in its (always flexible) version

The api key picks the record type, named as Kafka's generated MetadataRecordType of the
storage module names it:

- 0 REMOTE_LOG_SEGMENT_METADATA_RECORD: a segment's upload began (COPY_SEGMENT_STARTED):
  its id (topic name, topic id, partition, segment id), offsets, leader epochs, size,
  maximum timestamp, uploading broker
- 1 REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD: a segment's later state
- 2 REMOTE_PARTITION_DELETE_METADATA_RECORD: a deleted partition's state
- 3 REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD: a segment's whole metadata, its segment id
  alone naming it

Every type has version 0 alone, in Kafka 3.9 as in 4.2. Kafka 4.0 added the tagged field
txnIndexEmpty (tag 0) to types 0 and 3 without a new version: a 3.9 broker skips it, and it
is written, and shown here, only when true (whether the segment's transaction index is
empty). A frame version other than 1, an api key or a version outside these, and bytes
that end early or run on are errors, as they are for Kafka's serde. So, as Kafka's serde
(3.9 and 4.x alike) refuses them, are a state code that is no RemoteLogSegmentState or
RemotePartitionDeleteState, a segment (type 0 or 3) without leader epochs, and a type 0
segment whose start offset is negative or whose end offset is below its start.
"""
from typing import Dict, List, Optional, Tuple

from ...errors import RecordDecodeError
from .messages import Array, Field, Message, Struct
from .metadata_records import encode_frame, read_frame as read_serde_frame
from .topics import DecodedRecord, InternalTopic, RecordShape, shape_of

TOPIC = "__remote_log_metadata"
WHAT = "remote log metadata record"  # how errors name a record of the topic

SEGMENT_METADATA = "REMOTE_LOG_SEGMENT_METADATA_RECORD"
SEGMENT_METADATA_UPDATE = "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD"
PARTITION_DELETE_METADATA = "REMOTE_PARTITION_DELETE_METADATA_RECORD"
SEGMENT_METADATA_SNAPSHOT = "REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD"

# Kafka's RemoteLogSegmentState by the id remoteLogSegmentState holds
SEGMENT_STATES: Dict[int, str] = {
    0: "COPY_SEGMENT_STARTED",
    1: "COPY_SEGMENT_FINISHED",
    2: "DELETE_SEGMENT_STARTED",
    3: "DELETE_SEGMENT_FINISHED",
}
# Kafka's RemotePartitionDeleteState by the id remotePartitionDeleteState holds
PARTITION_DELETE_STATES: Dict[int, str] = {
    0: "DELETE_PARTITION_MARKED",
    1: "DELETE_PARTITION_STARTED",
    2: "DELETE_PARTITION_FINISHED",
}

_TOPIC_ID_PARTITION = Struct("TopicIdPartitionEntry", (
    Field("name", "string"),
    Field("id", "uuid"),
    Field("partition", "int32"),
))
_SEGMENT_ID = Struct("RemoteLogSegmentIdEntry", (
    Field("topicIdPartition", _TOPIC_ID_PARTITION),
    Field("id", "uuid"),
))
_LEADER_EPOCHS = Array(Struct("SegmentLeaderEpochEntry", (
    Field("leaderEpoch", "int32"),
    Field("offset", "int64"),
)))
_CUSTOM_METADATA = Field("customMetadata", "bytes", nullable="0+")
_SEGMENT_STATE = Field("remoteLogSegmentState", "int8")
_TXN_INDEX_EMPTY = Field("txnIndexEmpty", "bool", tag=0, tagged_versions="0+")

SEGMENT_METADATA_RECORD = Message("RemoteLogSegmentMetadataRecord", "0", "0+", (
    Field("remoteLogSegmentId", _SEGMENT_ID),
    Field("startOffset", "int64"),
    Field("endOffset", "int64"),
    Field("brokerId", "int32"),
    Field("maxTimestampMs", "int64"),
    Field("eventTimestampMs", "int64"),
    Field("segmentLeaderEpochs", _LEADER_EPOCHS),
    Field("segmentSizeInBytes", "int32"),
    _CUSTOM_METADATA,
    _SEGMENT_STATE,
    _TXN_INDEX_EMPTY,
))

SEGMENT_METADATA_UPDATE_RECORD = Message("RemoteLogSegmentMetadataUpdateRecord", "0", "0+", (
    Field("remoteLogSegmentId", _SEGMENT_ID),
    Field("brokerId", "int32"),
    Field("eventTimestampMs", "int64"),
    _CUSTOM_METADATA,
    _SEGMENT_STATE,
))

PARTITION_DELETE_METADATA_RECORD = Message("RemotePartitionDeleteMetadataRecord", "0", "0+", (
    Field("topicIdPartition", _TOPIC_ID_PARTITION),
    Field("brokerId", "int32"),
    Field("eventTimestampMs", "int64"),
    Field("remotePartitionDeleteState", "int8"),
))

SEGMENT_METADATA_SNAPSHOT_RECORD = Message(
    "RemoteLogSegmentMetadataSnapshotRecord", "0", "0+", (
        Field("segmentId", "uuid"),
        Field("startOffset", "int64"),
        Field("endOffset", "int64"),
        Field("brokerId", "int32"),
        Field("maxTimestampMs", "int64"),
        Field("eventTimestampMs", "int64"),
        Field("segmentLeaderEpochs", _LEADER_EPOCHS),
        Field("segmentSizeInBytes", "int32"),
        _CUSTOM_METADATA,
        _SEGMENT_STATE,
        _TXN_INDEX_EMPTY,
    ))

# api key -> (MetadataRecordType name, message)
RECORD_TYPES: Dict[int, Tuple[str, Message]] = {
    0: (SEGMENT_METADATA, SEGMENT_METADATA_RECORD),
    1: (SEGMENT_METADATA_UPDATE, SEGMENT_METADATA_UPDATE_RECORD),
    2: (PARTITION_DELETE_METADATA, PARTITION_DELETE_METADATA_RECORD),
    3: (SEGMENT_METADATA_SNAPSHOT, SEGMENT_METADATA_SNAPSHOT_RECORD),
}
RECORD_TYPE_KEYS: Dict[str, int] = {name: key for key, (name, _) in RECORD_TYPES.items()}


def record_type_name(api_key: int) -> str:
    """The record type of `api_key`, UNKNOWN_<n> for a key Kafka does not define."""
    known = RECORD_TYPES.get(api_key)
    return known[0] if known else f"UNKNOWN_{api_key}"


def read_frame(value) -> Tuple[int, int, int]:
    """(api key, version, where the message starts) of a record's value."""
    return read_serde_frame(value, WHAT)


def decode_remote_log_metadata(value) -> DecodedRecord:
    """One record's value in Kafka's JSON form: record_type as MetadataRecordType names
    it, value_version, value a dict of camelCase fields (uuids as Kafka prints them,
    customMetadata as bytes or None); key and key_version None. Raises
    RecordDecodeError naming what is wrong (the caller adds topic, partition, offset)."""
    api_key, version, position = read_frame(value)
    known = RECORD_TYPES.get(api_key)
    if known is None:
        raise RecordDecodeError(
            f"{WHAT} has api key {api_key}, which is no record type of {TOPIC} "
            f"({', '.join(f'{key} {name}' for key, (name, _) in RECORD_TYPES.items())})")
    name, message = known
    try:
        decoded = message.decode(value, version, position)
        _check(name, decoded)
    except RecordDecodeError as error:
        raise RecordDecodeError(f"{WHAT} {name} (api key {api_key}) version {version}: "
                                f"{error.reason}") from None
    return DecodedRecord(name, None, version, None, decoded)


def _check(name: str, value: dict) -> None:
    """What Kafka's serde refuses of a message that parses."""
    for field, states, kind in (("remoteLogSegmentState", SEGMENT_STATES,
                                 "RemoteLogSegmentState"),
                                ("remotePartitionDeleteState", PARTITION_DELETE_STATES,
                                 "RemotePartitionDeleteState")):
        if field in value and value[field] not in states:
            raise RecordDecodeError(
                f"{field} is {value[field]}, which is no {kind} (" +
                ", ".join(f"{code} {state}" for code, state in states.items()) + ")")
    if value.get("segmentLeaderEpochs") == []:
        raise RecordDecodeError("segmentLeaderEpochs is empty (a remote segment has at "
                                "least one leader epoch)")
    if name == SEGMENT_METADATA:
        start, end = value["startOffset"], value["endOffset"]
        if start < 0:
            raise RecordDecodeError(f"startOffset is {start}: a remote segment's start "
                                    f"offset cannot be negative")
        if end < start:
            raise RecordDecodeError(f"endOffset {end} is below startOffset {start}")


def encode_remote_log_metadata(record_type, value: dict, version: int = 0) -> bytes:
    """A record's value as RemoteLogMetadataSerde writes it; `record_type` by name
    (REMOTE_LOG_SEGMENT_METADATA_RECORD) or api key."""
    api_key = RECORD_TYPE_KEYS.get(record_type, record_type)
    if api_key not in RECORD_TYPES:
        raise RecordDecodeError(f"{record_type!r} is no record type of {TOPIC}")
    message = RECORD_TYPES[api_key][1]
    return encode_frame(api_key, version) + message.encode(value, version)


class RemoteLogMetadataTopic(InternalTopic):
    option_value = "remoteLogMetadata"
    topic = TOPIC
    record_types = tuple(name for name, _ in RECORD_TYPES.values())

    def decode(self, key: Optional[bytes], value: Optional[bytes]) -> DecodedRecord:
        return decode_remote_log_metadata(value)

    def record_shapes(self) -> List[RecordShape]:
        # the records have no key
        return [RecordShape(name, (), shape_of(message))
                for name, message in RECORD_TYPES.values()]


REMOTE_LOG_METADATA = RemoteLogMetadataTopic()
