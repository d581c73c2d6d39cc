"""Share groups' progress (KIP-932), from `__share_group_state` and the partitions beside
it: what `kafka-share-groups --describe --offsets` shows, with no cluster.

Each share-partition's state is replayed as Kafka's share coordinator replays its
partition: a ShareSnapshot replaces the whole state; a ShareUpdate moves the leader epoch
and the start offset where it gives them (-1: unchanged), sets the delivery complete count,
and combines its state batches with the current ones; a tombstone deletes the state. Batches
combine as the coordinator combines them: those below the start offset are dropped (or cut
at it), and where batches overlap each offset takes the batch with the higher delivery
count, then the higher delivery state; neighbouring batches in one state and count join.
The lag is Kafka's: the partition's high watermark minus the start offset minus the
delivery complete count (null where either is unknown, -1).
"""
from dataclasses import asdict, dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from ..errors import RecordDecodeError
from ..format.internal.share_records import DELIVERY_STATES, SHARE_GROUP_STATE, SHARE_SNAPSHOT
from .consumer_lag import internal_read_options, topic_partitions, topic_rows
from .replicas import read_bound

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
UNINITIALIZED = -1  # a start offset, leader epoch or delivery complete count not set
UNINITIALIZED_EPOCH = NO_TIMESTAMP = 0  # an update's state epoch and timestamps
SharePartition = Tuple[str, str, int]  # group, topic id, partition

# A state batch: (first offset, last offset, delivery state, delivery count)
StateBatch = Tuple[int, int, int, int]


def combine_state_batches(current: Iterable[StateBatch], new: Iterable[StateBatch],
                          start_offset: int) -> List[StateBatch]:
    """The state batches after `new` is combined with `current` (see the module's text),
    in offset order."""
    batches = []
    for first, last, state, count in [*current, *new]:
        if start_offset != UNINITIALIZED:
            if last < start_offset:
                continue
            first = max(first, start_offset)
        batches.append((first, last, state, count))
    # Sweep the batches' bounds: between two bounds, every offset has the same winner.
    bounds = sorted({first for first, _, _, _ in batches} | {last + 1 for _, last, _, _ in batches})
    combined: List[StateBatch] = []
    for low, high in zip(bounds, bounds[1:]):
        covering = [(count, state) for first, last, state, count in batches
                    if first <= low and high - 1 <= last]
        if not covering:
            continue
        count, state = max(covering)
        if combined and combined[-1][1] == low - 1 and combined[-1][2:] == (state, count):
            combined[-1] = (combined[-1][0], high - 1, state, count)
        else:
            combined.append((low, high - 1, state, count))
    return combined


@dataclass
class SharePartitionState:
    group: str
    topic_id: str
    topic: Optional[str]  # from the partition's partition.metadata, where it is loaded
    partition: int
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    create_timestamp: int
    write_timestamp: int
    state_batches: List[dict] = field(default_factory=list)
    written_at: int = 0  # the offset in __share_group_state of the last record applied
    high_watermark: Optional[int] = None
    lag: Optional[int] = None

    @property
    def in_flight_records(self) -> int:
        """Offsets in the batches still to deliver (AVAILABLE or ACQUIRED)."""
        return sum(b["lastOffset"] - b["firstOffset"] + 1 for b in self.state_batches
                   if b["deliveryState"] in ("AVAILABLE", "ACQUIRED"))

    @property
    def max_delivery_count(self) -> int:
        return max((b["deliveryCount"] for b in self.state_batches), default=0)

    def to_dict(self) -> dict:
        return dict(asdict(self), in_flight_records=self.in_flight_records,
                    max_delivery_count=self.max_delivery_count)


def _batches(value: dict) -> List[StateBatch]:
    return [(b["firstOffset"], b["lastOffset"], b["deliveryState"], b["deliveryCount"])
            for b in value["stateBatches"]]


def _batch_dicts(batches: List[StateBatch]) -> List[dict]:
    return [{"firstOffset": first, "lastOffset": last,
             "deliveryState": DELIVERY_STATES.get(state, f"UNKNOWN_{state}"),
             "deliveryCount": count} for first, last, state, count in batches]


class _State:
    __slots__ = ("snapshot_epoch", "state_epoch", "leader_epoch", "start_offset",
                 "delivery_complete_count", "create_timestamp", "write_timestamp",
                 "batches", "written_at")


def _from_snapshot(value: dict, offset: int) -> _State:
    state = _State()
    state.snapshot_epoch = value["snapshotEpoch"]
    state.state_epoch = value["stateEpoch"]
    state.leader_epoch = value["leaderEpoch"]
    state.start_offset = value["startOffset"]
    state.delivery_complete_count = value.get("deliveryCompleteCount", UNINITIALIZED)
    state.create_timestamp = value["createTimestamp"]
    state.write_timestamp = value["writeTimestamp"]
    state.batches = _batches(value)
    state.written_at = offset
    return state


def _apply_update(state: Optional[_State], value: dict, offset: int) -> _State:
    if state is None:  # an update with no snapshot before it stands alone, as in Kafka
        state = _State()
        state.snapshot_epoch = value["snapshotEpoch"]
        state.state_epoch = UNINITIALIZED_EPOCH
        state.leader_epoch = value["leaderEpoch"]
        state.start_offset = value["startOffset"]
        state.delivery_complete_count = value.get("deliveryCompleteCount", UNINITIALIZED)
        state.create_timestamp = state.write_timestamp = NO_TIMESTAMP
        state.batches = _batches(value)
        state.written_at = offset
        return state
    if value["startOffset"] != UNINITIALIZED:
        state.start_offset = value["startOffset"]
    if value["leaderEpoch"] != UNINITIALIZED:
        state.leader_epoch = value["leaderEpoch"]
    state.delivery_complete_count = value.get("deliveryCompleteCount", UNINITIALIZED)
    state.batches = combine_state_batches(state.batches, _batches(value), state.start_offset)
    state.written_at = offset
    return state


def share_group_state(paths: List[str], options: Optional[dict] = None,
                      group: Optional[str] = None) -> List[SharePartitionState]:
    """Each share-partition's state in the `__share_group_state` partitions under `paths`
    (read options such as readUpTo and store.* apply), of `group` alone if given, with
    its partition's high watermark and lag where the partition is under `paths` too."""
    read = internal_read_options(paths, options, SHARE_GROUP_STATE_TOPIC)
    logs = topic_partitions(read, SHARE_GROUP_STATE_TOPIC)
    states: Dict[SharePartition, _State] = {}
    for row in topic_rows(read, logs, SHARE_GROUP_STATE_TOPIC):
        if row["controlType"] is not None:
            continue
        try:
            record = SHARE_GROUP_STATE.decode(row["key"], row["value"])
        except RecordDecodeError as error:
            raise error.at(SHARE_GROUP_STATE_TOPIC, row["partition"], row["offset"]) from None
        if not record.known:
            continue  # as Kafka's share coordinator skips a type it does not know
        key = (record.key["groupId"], record.key["topicId"], record.key["partition"])
        if group is not None and key[0] != group:
            continue
        if record.deleted:
            states.pop(key, None)
        elif record.record_type == SHARE_SNAPSHOT:
            states[key] = _from_snapshot(record.value, row["offset"])
        else:
            states[key] = _apply_update(states.get(key), record.value, row["offset"])
    names = {}
    by_partition = {}
    for (topic, partition), log in logs.items():
        topic_id = log.topic_id()
        if topic_id is not None:
            names[topic_id] = topic
            by_partition[(topic_id, partition)] = log
    result = []
    for key in sorted(states):
        state = states[key]
        group_id, topic_id, partition = key
        watermark = lag = None
        log = by_partition.get((topic_id, partition))
        if log is not None:
            end = log.end_offset(verify=read.verify_checksums)
            bound = read_bound(log, read)
            watermark = end if bound is None else min(end, bound)
            if UNINITIALIZED not in (state.start_offset, state.delivery_complete_count):
                lag = watermark - state.start_offset - state.delivery_complete_count
        result.append(SharePartitionState(
            group=group_id, topic_id=topic_id, topic=names.get(topic_id),
            partition=partition, snapshot_epoch=state.snapshot_epoch,
            state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
            start_offset=state.start_offset,
            delivery_complete_count=state.delivery_complete_count,
            create_timestamp=state.create_timestamp, write_timestamp=state.write_timestamp,
            state_batches=_batch_dicts(state.batches), written_at=state.written_at,
            high_watermark=watermark, lag=lag))
    return result
