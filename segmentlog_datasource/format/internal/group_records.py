"""The records of `__consumer_offsets`: the group coordinator's keys and values.

Framed as coordinator.py says (Kafka 3.x wrote the same bytes, calling a key's record type
its version). The record types are Kafka 4.2's (group-coordinator's message definitions):

- 0 LegacyOffsetCommit (value v0), 1 OffsetCommit (values v0 to v4, v4 flexible with the
  topic id tag), 2 GroupMetadata (classic groups, values v0 to v4);
- 3 to 8 and 16: consumer groups of the KIP-848 protocol (group epoch and metadata hash,
  partition metadata, members, target and current assignments, regular expressions);
- 10 to 15: share groups (KIP-932);
- 17 and 19 to 23: streams groups (KIP-1071).

Unknown record types and value versions: see coordinator.py. Type 9, the partition
metadata of the share groups' early access in Kafka 3.9, is no type of Kafka 4.x. Field
names are those of Kafka's JSON form of each message (its definitions' names with a
lower-case first letter).
"""
from typing import Dict, Tuple

from . import consumer_protocol
from .coordinator import CoordinatorTopic, key_message
from .messages import Array, Field, Message, Struct


def _value(name: str, *fields: Field, valid: str = "0", flexible: str = "0+") -> Message:
    return Message(name, valid, flexible, fields)


_GROUP_ID = Field("groupId", "string")
_MEMBER_ID = Field("memberId", "string")
_GROUP_KEY = (_GROUP_ID,)
_MEMBER_KEY = (_GROUP_ID, _MEMBER_ID)

_TOPIC_PARTITIONS = Struct("TopicPartitions", (
    Field("topicId", "uuid"),
    Field("partitions", Array("int32")),
))
_TOPIC_PARTITIONS_INFO = Struct("TopicPartitionsInfo", (
    Field("topicId", "uuid"),
    Field("topicName", "string"),
    Field("partitions", Array("int32")),
))
_TOPIC_INFO = Struct("TopicInfo", (
    Field("topicId", "uuid"),
    Field("topicName", "string"),
))
_KEY_VALUE = Struct("KeyValue", (Field("key", "string"), Field("value", "string")))

# -- offset commits and classic groups

_OFFSET_KEY_FIELDS = (
    Field("group", "string"),
    Field("topic", "string"),
    Field("partition", "int32"),
)

LEGACY_OFFSET_COMMIT_VALUE = _value(
    "LegacyOffsetCommitValue",
    Field("offset", "int64", "0"),
    Field("metadata", "string", "0"),
    Field("commitTimestamp", "int64", "0"),
    flexible="none")

OFFSET_COMMIT_VALUE = _value(
    "OffsetCommitValue",
    Field("offset", "int64"),
    Field("leaderEpoch", "int32", "3+", default=-1),
    Field("metadata", "string"),
    Field("commitTimestamp", "int64"),
    Field("expireTimestamp", "int64", "1", default=-1),
    Field("topicId", "uuid", "4+", tag=0, tagged_versions="4+"),
    valid="0-4", flexible="4+")

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

# -- consumer groups (KIP-848)

CONSUMER_GROUP_METADATA_VALUE = _value(
    "ConsumerGroupMetadataValue",
    Field("epoch", "int32"),
    Field("metadataHash", "int64", tag=0, tagged_versions="0+", default=0))

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

CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE = _value(
    "ConsumerGroupRegularExpressionValue",
    Field("topics", Array("string")),
    Field("version", "int64"),
    Field("timestamp", "int64"))

# -- share groups (KIP-932)

SHARE_GROUP_MEMBER_METADATA_VALUE = _value(
    "ShareGroupMemberMetadataValue",
    Field("rackId", "string", nullable="0+"),
    Field("clientId", "string"),
    Field("clientHost", "string"),
    Field("subscribedTopicNames", Array("string")))

SHARE_GROUP_METADATA_VALUE = _value(
    "ShareGroupMetadataValue",
    Field("epoch", "int32"),
    Field("metadataHash", "int64"))

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
    Field("initializingTopics", Array(_TOPIC_PARTITIONS_INFO)),
    Field("initializedTopics", Array(_TOPIC_PARTITIONS_INFO)),
    Field("deletingTopics", Array(_TOPIC_INFO)))

# -- streams groups (KIP-1071)

_TASK_IDS = Struct("TaskIds", (
    Field("subtopologyId", "string"),
    Field("partitions", Array("int32")),
))
_TASK_IDS_WITH_EPOCHS = Struct("TaskIds", (
    Field("subtopologyId", "string"),
    Field("partitions", Array("int32")),
    Field("assignmentEpochs", Array("int32"), nullable="0+", tag=0, tagged_versions="0+"),
))
_STREAMS_TOPIC_INFO = Struct("TopicInfo", (
    Field("name", "string"),
    Field("partitions", "int32"),
    Field("replicationFactor", "int16"),
    Field("topicConfigs", Array(_KEY_VALUE)),
))

STREAMS_GROUP_METADATA_VALUE = _value(
    "StreamsGroupMetadataValue",
    Field("epoch", "int32"),
    Field("metadataHash", "int64"),
    Field("validatedTopologyEpoch", "int32", tag=0, tagged_versions="0+", default=-1),
    Field("lastAssignmentConfigs", Array(_KEY_VALUE), nullable="0+", tag=1,
          tagged_versions="0+"))

STREAMS_GROUP_MEMBER_METADATA_VALUE = _value(
    "StreamsGroupMemberMetadataValue",
    Field("instanceId", "string", nullable="0+"),
    Field("rackId", "string", nullable="0+"),
    Field("clientId", "string"),
    Field("clientHost", "string"),
    Field("rebalanceTimeoutMs", "int32", default=-1),
    Field("topologyEpoch", "int32"),
    Field("processId", "string"),
    Field("userEndpoint", Struct("Endpoint", (
        Field("host", "string"),
        Field("port", "uint16"),
    )), nullable="0+"),
    Field("clientTags", Array(_KEY_VALUE)))

STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = _value(
    "StreamsGroupTargetAssignmentMetadataValue", Field("assignmentEpoch", "int32"))

STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = _value(
    "StreamsGroupTargetAssignmentMemberValue",
    Field("activeTasks", Array(_TASK_IDS)),
    Field("standbyTasks", Array(_TASK_IDS)),
    Field("warmupTasks", Array(_TASK_IDS)))

STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = _value(
    "StreamsGroupCurrentMemberAssignmentValue",
    Field("memberEpoch", "int32"),
    Field("previousMemberEpoch", "int32"),
    Field("state", "int8"),
    Field("activeTasks", Array(_TASK_IDS_WITH_EPOCHS)),
    Field("standbyTasks", Array(_TASK_IDS_WITH_EPOCHS)),
    Field("warmupTasks", Array(_TASK_IDS_WITH_EPOCHS)),
    Field("activeTasksPendingRevocation", Array(_TASK_IDS_WITH_EPOCHS)),
    Field("standbyTasksPendingRevocation", Array(_TASK_IDS_WITH_EPOCHS)),
    Field("warmupTasksPendingRevocation", Array(_TASK_IDS_WITH_EPOCHS)))

STREAMS_GROUP_TOPOLOGY_VALUE = _value(
    "StreamsGroupTopologyValue",
    Field("epoch", "int32"),
    Field("subtopologies", Array(Struct("Subtopology", (
        Field("subtopologyId", "string"),
        Field("sourceTopics", Array("string")),
        Field("sourceTopicRegex", Array("string")),
        Field("stateChangelogTopics", Array(_STREAMS_TOPIC_INFO)),
        Field("repartitionSinkTopics", Array("string")),
        Field("repartitionSourceTopics", Array(_STREAMS_TOPIC_INFO)),
        Field("copartitionGroups", Array(Struct("CopartitionGroup", (
            Field("sourceTopics", Array("int16")),
            Field("sourceTopicRegex", Array("int16")),
            Field("repartitionSourceTopics", Array("int16")),
        )))),
    )))))


def _record(name: str, key_fields, value: Message) -> Tuple[str, Message, Message]:
    return name, key_message(name + "Key", *key_fields), value


# record type (the key's int16) -> (Kafka's name for it, key message, value message)
RECORD_TYPES: Dict[int, Tuple[str, Message, Message]] = {
    0: _record("LegacyOffsetCommit", _OFFSET_KEY_FIELDS, LEGACY_OFFSET_COMMIT_VALUE),
    1: _record("OffsetCommit", _OFFSET_KEY_FIELDS, OFFSET_COMMIT_VALUE),
    2: _record("GroupMetadata", (Field("group", "string"),), GROUP_METADATA_VALUE),
    3: _record("ConsumerGroupMetadata", _GROUP_KEY, CONSUMER_GROUP_METADATA_VALUE),
    4: _record("ConsumerGroupPartitionMetadata", _GROUP_KEY,
               CONSUMER_GROUP_PARTITION_METADATA_VALUE),
    5: _record("ConsumerGroupMemberMetadata", _MEMBER_KEY,
               CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    6: _record("ConsumerGroupTargetAssignmentMetadata", _GROUP_KEY,
               CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    7: _record("ConsumerGroupTargetAssignmentMember", _MEMBER_KEY,
               CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    8: _record("ConsumerGroupCurrentMemberAssignment", _MEMBER_KEY,
               CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    10: _record("ShareGroupMemberMetadata", _MEMBER_KEY, SHARE_GROUP_MEMBER_METADATA_VALUE),
    11: _record("ShareGroupMetadata", _GROUP_KEY, SHARE_GROUP_METADATA_VALUE),
    12: _record("ShareGroupTargetAssignmentMetadata", _GROUP_KEY,
                SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    13: _record("ShareGroupTargetAssignmentMember", _MEMBER_KEY,
                SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    14: _record("ShareGroupCurrentMemberAssignment", _MEMBER_KEY,
                SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    15: _record("ShareGroupStatePartitionMetadata", _GROUP_KEY,
                SHARE_GROUP_STATE_PARTITION_METADATA_VALUE),
    16: _record("ConsumerGroupRegularExpression",
                (_GROUP_ID, Field("regularExpression", "string")),
                CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE),
    17: _record("StreamsGroupMetadata", _GROUP_KEY, STREAMS_GROUP_METADATA_VALUE),
    19: _record("StreamsGroupMemberMetadata", _MEMBER_KEY,
                STREAMS_GROUP_MEMBER_METADATA_VALUE),
    20: _record("StreamsGroupTargetAssignmentMetadata", _GROUP_KEY,
                STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    21: _record("StreamsGroupTargetAssignmentMember", _MEMBER_KEY,
                STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    22: _record("StreamsGroupCurrentMemberAssignment", _MEMBER_KEY,
                STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    23: _record("StreamsGroupTopology", _GROUP_KEY, STREAMS_GROUP_TOPOLOGY_VALUE),
}

OFFSET_COMMIT_KEY = RECORD_TYPES[1][1]

# The record types that commit an offset (what consumer lag replays).
OFFSET_COMMIT_TYPES = ("LegacyOffsetCommit", "OffsetCommit")

# Each group protocol's metadata record (its latest, if not deleted, says the group's type;
# a group with commits alone is a classic group, as Kafka's coordinator makes it).
GROUP_TYPES = {"GroupMetadata": "classic", "ConsumerGroupMetadata": "consumer",
               "ShareGroupMetadata": "share", "StreamsGroupMetadata": "streams"}

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


class ConsumerOffsets(CoordinatorTopic):
    option_value = "consumerOffsets"
    topic = "__consumer_offsets"
    records = RECORD_TYPES
    record_types = tuple(name for name, _, _ in RECORD_TYPES.values())
    added_fields = {"GroupMetadata": (_DECODED_MEMBERS, 3)}

    def complete(self, name: str, value: dict, version: int) -> None:
        if name == "GroupMetadata":
            _add_consumer_protocol(value)


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


CONSUMER_OFFSETS = ConsumerOffsets()
