"""The records of `__consumer_offsets`: the group coordinator's keys and values.

A key is an int16 then the key message; the int16 is the record type (Kafka's coordinator
record type: 0 and 1 offset commits, 2 classic group metadata, 3 and on the consumer-group
protocol's records of KIP-848 and the share groups' of KIP-932). A value is an int16
version then the value message; a null value deletes the key (a tombstone).

As Kafka's group coordinator loads the topic: a record type it does not know is skipped,
not an error (here: a record of type "UNKNOWN_<n>" with nothing decoded), while a value
version it does not know is an error. Field names are those of Kafka's JSON form of each
message (its definitions' names with a lower-case first letter).

Not decoded (type "UNKNOWN_<n>"): the streams groups' records of KIP-1071 (types 17 on),
whose layouts Kafka still marks as subject to incompatible change.
"""
from typing import Dict, List, Optional, Tuple

from . import consumer_protocol
from .messages import Array, Field, Message, Struct, field_tree, read_version
from .topics import DecodedRecord, InternalTopic, register


def _key(name: str, record_type: int, *fields: Field) -> Message:
    # a key message's version is its record type (Kafka <= 3.9 writes its definitions so;
    # 4.x reads the same bytes as version 0 of a "coordinator-key")
    return Message(name, str(record_type), "none", fields)


def _value(name: str, *fields: Field, valid: str = "0", flexible: str = "0+") -> Message:
    return Message(name, valid, flexible, fields)


_GROUP_ID = Field("groupId", "string")
_MEMBER_ID = Field("memberId", "string")

_TOPIC_PARTITIONS = Struct("TopicPartitions", (
    Field("topicId", "uuid"),
    Field("partitions", Array("int32")),
))

OFFSET_COMMIT_KEY = Message("OffsetCommitKey", "0-1", "none", (
    Field("group", "string"),
    Field("topic", "string"),
    Field("partition", "int32"),
))

OFFSET_COMMIT_VALUE = _value(
    "OffsetCommitValue",
    Field("offset", "int64"),
    Field("leaderEpoch", "int32", "3+", default=-1),
    Field("metadata", "string"),
    Field("commitTimestamp", "int64"),
    Field("expireTimestamp", "int64", "1", default=-1),
    valid="0-4", flexible="4+")

GROUP_METADATA_KEY = _key("GroupMetadataKey", 2, Field("group", "string"))

MEMBER_METADATA = Struct("MemberMetadata", (
    Field("memberId", "string"),
    Field("groupInstanceId", "string", "3+", nullable="3+"),
    Field("clientId", "string"),
    Field("clientHost", "string"),
    Field("rebalanceTimeout", "int32", "1+", default=-1),
    Field("sessionTimeout", "int32"),
    Field("subscription", "bytes"),
    Field("assignment", "bytes"),
))

GROUP_METADATA_VALUE = _value(
    "GroupMetadataValue",
    Field("protocolType", "string"),
    Field("generation", "int32"),
    Field("protocol", "string", nullable="0+"),
    Field("leader", "string", nullable="0+"),
    Field("currentStateTimestamp", "int64", "2+", default=-1),
    Field("members", Array(MEMBER_METADATA)),
    valid="0-4", flexible="4+")

CONSUMER_GROUP_METADATA_VALUE = _value(
    "ConsumerGroupMetadataValue", Field("epoch", "int32"))

CONSUMER_GROUP_PARTITION_METADATA_VALUE = _value(
    "ConsumerGroupPartitionMetadataValue",
    Field("topics", Array(Struct("TopicMetadata", (
        Field("topicId", "uuid"),
        Field("topicName", "string"),
        Field("numPartitions", "int32"),
        Field("partitionMetadata", Array(Struct("PartitionMetadata", (
            Field("partition", "int32"),
            Field("racks", Array("string")),
        )))),
    )))))

CONSUMER_GROUP_MEMBER_METADATA_VALUE = _value(
    "ConsumerGroupMemberMetadataValue",
    Field("instanceId", "string", nullable="0+"),
    Field("rackId", "string", nullable="0+"),
    Field("clientId", "string"),
    Field("clientHost", "string"),
    Field("subscribedTopicNames", Array("string")),
    Field("subscribedTopicRegex", "string", nullable="0+"),
    Field("rebalanceTimeoutMs", "int32", default=-1),
    Field("serverAssignor", "string", nullable="0+"),
    Field("classicMemberMetadata", Struct("ClassicMemberMetadata", (
        Field("sessionTimeoutMs", "int32"),
        Field("supportedProtocols", Array(Struct("ClassicProtocol", (
            Field("name", "string"),
            Field("metadata", "bytes"),
        )))),
    )), nullable="0+", tag=0, tagged_versions="0+"))

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = _value(
    "ConsumerGroupTargetAssignmentMetadataValue", Field("assignmentEpoch", "int32"))

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = _value(
    "ConsumerGroupTargetAssignmentMemberValue",
    Field("topicPartitions", Array(Struct("TopicPartition", _TOPIC_PARTITIONS.fields))))

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = _value(
    "ConsumerGroupCurrentMemberAssignmentValue",
    Field("memberEpoch", "int32"),
    Field("previousMemberEpoch", "int32"),
    Field("state", "int8"),
    Field("assignedPartitions", Array(_TOPIC_PARTITIONS)),
    Field("partitionsPendingRevocation", Array(_TOPIC_PARTITIONS)))

_TOPIC_PARTITIONS_INFO = Struct("TopicPartitionsInfo", (
    Field("topicId", "uuid"),
    Field("topicName", "string"),
    Field("partitions", Array("int32")),
))
_TOPIC_INFO = Struct("TopicInfo", (
    Field("topicId", "uuid"),
    Field("topicName", "string"),
))

SHARE_GROUP_PARTITION_METADATA_VALUE = _value(
    "ShareGroupPartitionMetadataValue",
    Field("initializedTopics", Array(_TOPIC_PARTITIONS_INFO)),
    Field("deletingTopics", Array(_TOPIC_INFO)))

SHARE_GROUP_MEMBER_METADATA_VALUE = _value(
    "ShareGroupMemberMetadataValue",
    Field("rackId", "string", nullable="0+"),
    Field("clientId", "string"),
    Field("clientHost", "string"),
    Field("subscribedTopicNames", Array("string")))

SHARE_GROUP_METADATA_VALUE = _value("ShareGroupMetadataValue", Field("epoch", "int32"))

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = _value(
    "ShareGroupTargetAssignmentMetadataValue", Field("assignmentEpoch", "int32"))

SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = _value(
    "ShareGroupTargetAssignmentMemberValue",
    Field("topicPartitions", Array(Struct("TopicPartition", _TOPIC_PARTITIONS.fields))))

SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = _value(
    "ShareGroupCurrentMemberAssignmentValue",
    Field("memberEpoch", "int32"),
    Field("previousMemberEpoch", "int32"),
    Field("state", "int8"),
    Field("assignedPartitions", Array(_TOPIC_PARTITIONS)))

SHARE_GROUP_STATE_PARTITION_METADATA_VALUE = _value(
    "ShareGroupStatePartitionMetadataValue",
    Field("initializedTopics", Array(_TOPIC_PARTITIONS_INFO)),
    Field("deletingTopics", Array(_TOPIC_INFO)))

CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE = _value(
    "ConsumerGroupRegularExpressionValue",
    Field("topics", Array("string")),
    Field("version", "int64"),
    Field("timestamp", "int64"))


# record type (the key's version) -> (Kafka's name for it, key message, value message)
RECORD_TYPES: Dict[int, Tuple[str, Message, Message]] = {
    0: ("OffsetCommit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    1: ("OffsetCommit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    2: ("GroupMetadata", GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
    3: ("ConsumerGroupMetadata", _key("ConsumerGroupMetadataKey", 3, _GROUP_ID),
        CONSUMER_GROUP_METADATA_VALUE),
    4: ("ConsumerGroupPartitionMetadata",
        _key("ConsumerGroupPartitionMetadataKey", 4, _GROUP_ID),
        CONSUMER_GROUP_PARTITION_METADATA_VALUE),
    5: ("ConsumerGroupMemberMetadata",
        _key("ConsumerGroupMemberMetadataKey", 5, _GROUP_ID, _MEMBER_ID),
        CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    6: ("ConsumerGroupTargetAssignmentMetadata",
        _key("ConsumerGroupTargetAssignmentMetadataKey", 6, _GROUP_ID),
        CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    7: ("ConsumerGroupTargetAssignmentMember",
        _key("ConsumerGroupTargetAssignmentMemberKey", 7, _GROUP_ID, _MEMBER_ID),
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    8: ("ConsumerGroupCurrentMemberAssignment",
        _key("ConsumerGroupCurrentMemberAssignmentKey", 8, _GROUP_ID, _MEMBER_ID),
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    9: ("ShareGroupPartitionMetadata",
        _key("ShareGroupPartitionMetadataKey", 9, _GROUP_ID),
        SHARE_GROUP_PARTITION_METADATA_VALUE),
    10: ("ShareGroupMemberMetadata",
         _key("ShareGroupMemberMetadataKey", 10, _GROUP_ID, _MEMBER_ID),
         SHARE_GROUP_MEMBER_METADATA_VALUE),
    11: ("ShareGroupMetadata", _key("ShareGroupMetadataKey", 11, _GROUP_ID),
         SHARE_GROUP_METADATA_VALUE),
    12: ("ShareGroupTargetAssignmentMetadata",
         _key("ShareGroupTargetAssignmentMetadataKey", 12, _GROUP_ID),
         SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    13: ("ShareGroupTargetAssignmentMember",
         _key("ShareGroupTargetAssignmentMemberKey", 13, _GROUP_ID, _MEMBER_ID),
         SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    14: ("ShareGroupCurrentMemberAssignment",
         _key("ShareGroupCurrentMemberAssignmentKey", 14, _GROUP_ID, _MEMBER_ID),
         SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    15: ("ShareGroupStatePartitionMetadata",
         _key("ShareGroupStatePartitionMetadataKey", 15, _GROUP_ID),
         SHARE_GROUP_STATE_PARTITION_METADATA_VALUE),
    16: ("ConsumerGroupRegularExpression",
         _key("ConsumerGroupRegularExpressionKey", 16, _GROUP_ID,
              Field("regularExpression", "string")),
         CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE),
}

# What decode() adds to each member of a GroupMetadata value whose protocol type is
# "consumer": its subscription and assignment bytes as Kafka's consumer protocol reads them.
SUBSCRIPTION_DECODED = "subscriptionDecoded"
ASSIGNMENT_DECODED = "assignmentDecoded"
_DECODED_MEMBERS = Message("GroupMetadataValue", "3", "none", (
    Field("members", Array(Struct("MemberMetadata", (
        Field(SUBSCRIPTION_DECODED, Struct(
            "ConsumerProtocolSubscription",
            consumer_protocol.shape_fields(consumer_protocol.SUBSCRIPTION))),
        Field(ASSIGNMENT_DECODED, Struct(
            "ConsumerProtocolAssignment",
            consumer_protocol.shape_fields(consumer_protocol.ASSIGNMENT))),
    )))),
))


def unknown_type_name(record_type: int) -> str:
    return f"UNKNOWN_{record_type}"


def _all_versions(message: Message) -> List[int]:
    low, high = message.span
    return list(range(low, high + 1))


class ConsumerOffsets(InternalTopic):
    option_value = "consumerOffsets"
    topic = "__consumer_offsets"
    record_types = tuple(dict.fromkeys(name for name, _, _ in RECORD_TYPES.values()))

    def decode(self, key: Optional[bytes], value: Optional[bytes]) -> DecodedRecord:
        record_type, start = read_version(key, "the __consumer_offsets record's key")
        known = RECORD_TYPES.get(record_type)
        if known is None:
            return DecodedRecord(unknown_type_name(record_type), record_type, None, None,
                                 None, deleted=value is None, known=False)
        name, key_message, value_message = known
        decoded_key = key_message.decode(key, record_type, start)
        if value is None:
            return DecodedRecord(name, record_type, None, decoded_key, None, deleted=True)
        value_version, start = read_version(value, f"the {value_message.name}")
        decoded_value = value_message.decode(value, value_version, start)
        if value_message is GROUP_METADATA_VALUE:
            _add_consumer_protocol(decoded_value)
        return DecodedRecord(name, record_type, value_version, decoded_key, decoded_value)

    def key_fields(self):
        keys = {id(key): key for _, key, _ in RECORD_TYPES.values()}
        return field_tree([(key, _all_versions(key)) for key in keys.values()])

    def value_fields(self):
        values = {id(value): value for _, _, value in RECORD_TYPES.values()}
        messages = [(value, _all_versions(value)) for value in values.values()]
        return field_tree(messages + [(_DECODED_MEMBERS, [3])])


def _add_consumer_protocol(value: dict) -> None:
    """Each member's subscription and assignment decoded, when the group's protocol type
    is "consumer"; None where the bytes are empty or do not parse (see consumer_protocol)."""
    if value.get("protocolType") != consumer_protocol.PROTOCOL_TYPE:
        return
    for member in value.get("members") or ():
        member[SUBSCRIPTION_DECODED] = consumer_protocol.decode_or_none(
            consumer_protocol.SUBSCRIPTION, member.get("subscription"))
        member[ASSIGNMENT_DECODED] = consumer_protocol.decode_or_none(
            consumer_protocol.ASSIGNMENT, member.get("assignment"))


CONSUMER_OFFSETS = register(ConsumerOffsets())
