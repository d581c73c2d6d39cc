"""The records of `__share_group_state`: the share coordinator's state of each
share-partition (a share group's view of one topic partition, KIP-932).

Framed as coordinator.py says. Record type 0, ShareSnapshot, holds a share-partition's
whole state at a snapshot epoch; type 1, ShareUpdate, a change on top of the latest
snapshot. Both keys name the group, the topic id and the partition. A state batch covers
the offsets firstOffset to lastOffset in one delivery state (Kafka's RecordState: 0
AVAILABLE, 1 ACQUIRED, 2 ACKNOWLEDGED, 4 ARCHIVED) with its delivery count. A tombstone
deletes the share-partition's state.
"""
from typing import Dict

from .coordinator import CoordinatorTopic, key_message
from .messages import Array, Field, Message, Struct

SHARE_SNAPSHOT = "ShareSnapshot"
SHARE_UPDATE = "ShareUpdate"

# Kafka's RecordState by the id a state batch's deliveryState holds
DELIVERY_STATES: Dict[int, str] = {0: "AVAILABLE", 1: "ACQUIRED", 2: "ACKNOWLEDGED",
                                   4: "ARCHIVED"}

_KEY_FIELDS = (
    Field("groupId", "string"),
    Field("topicId", "uuid"),
    Field("partition", "int32"),
)

_STATE_BATCH = Struct("StateBatch", (
    Field("firstOffset", "int64"),
    Field("lastOffset", "int64"),
    Field("deliveryState", "int8"),
    Field("deliveryCount", "int16"),
))

SHARE_SNAPSHOT_VALUE = Message("ShareSnapshotValue", "0", "0+", (
    Field("snapshotEpoch", "int32"),
    Field("stateEpoch", "int32"),
    Field("leaderEpoch", "int32"),
    Field("startOffset", "int64"),
    Field("deliveryCompleteCount", "int32", tag=0, tagged_versions="0+", default=-1),
    Field("createTimestamp", "int64"),
    Field("writeTimestamp", "int64"),
    Field("stateBatches", Array(_STATE_BATCH)),
))

SHARE_UPDATE_VALUE = Message("ShareUpdateValue", "0", "0+", (
    Field("snapshotEpoch", "int32"),
    Field("leaderEpoch", "int32"),
    Field("startOffset", "int64"),
    Field("deliveryCompleteCount", "int32", tag=0, tagged_versions="0+", default=-1),
    Field("stateBatches", Array(_STATE_BATCH)),
))

RECORD_TYPES = {
    0: (SHARE_SNAPSHOT, key_message("ShareSnapshotKey", *_KEY_FIELDS), SHARE_SNAPSHOT_VALUE),
    1: (SHARE_UPDATE, key_message("ShareUpdateKey", *_KEY_FIELDS), SHARE_UPDATE_VALUE),
}


class ShareGroupState(CoordinatorTopic):
    option_value = "shareGroupState"
    topic = "__share_group_state"
    records = RECORD_TYPES
    record_types = (SHARE_SNAPSHOT, SHARE_UPDATE)


SHARE_GROUP_STATE = ShareGroupState()
