"""Tiered storage (KIP-405) as Kafka serves it: the remote log metadata decides which
remote segments exist, and a partition reads as one offset space with its brokers' disks.

Kafka's brokers learn which remote segments exist from `__remote_log_metadata`: each
segment's upload starts (COPY_SEGMENT_STARTED, with its offsets and leader epochs),
finishes (COPY_SEGMENT_FINISHED), and its deletion starts and finishes; a partition
delete ends the partition's remote state. Replayed in offset order, as the metadata
cache replays them:

- a started upload is unreferenced until it finishes; a transition Kafka does not allow
  is ignored, as Kafka ignores it; so is an update of a segment whose start was never
  seen (retention of the metadata topic, or damage), with a warning naming it;
- within each leader epoch of a finished segment, the segment is referenced from the
  offset that epoch starts at in it; references of that epoch starting at or after that
  offset are dropped when the segment reaches at least as far as every one of them (an
  upload that covers earlier uploads replaces them);
- a deletion that started takes the segment out; DELETE_PARTITION_FINISHED forgets the
  partition.

A fetch of offset `o` below the leader's first local segment takes the epoch of `o` from
the leader's leader-epoch-checkpoint, then the segment that epoch references at the
greatest offset <= `o` (if `o` lies within the epoch's range in that segment), and reads
it from `o` to its end; the next fetch starts after that end. So a segment that no epoch
of the leader's chain references never serves (an unfinished upload, one replaced, a
diverged leader's upload, one being deleted), and overlapping segments each serve a
distinct run of offsets. From the leader's local log start on, the local segments serve.

Without the brokers' dirs (a store and a copy of the metadata topic), the leader epochs
and the offsets the remote part ends at come from the newest serving segment's own
leader-epoch checkpoint and metadata.
"""
import bisect
import warnings
from dataclasses import dataclass, field, replace
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from ..errors import CorruptLogError, SegmentLogError
from ..format import checkpoints
from ..format.checkpoints import EpochEntry
from ..format.internal.remote_log_metadata import (
    PARTITION_DELETE_METADATA, PARTITION_DELETE_STATES, SEGMENT_METADATA,
    SEGMENT_METADATA_SNAPSHOT, SEGMENT_METADATA_UPDATE, SEGMENT_STATES, TOPIC,
    decode_remote_log_metadata)
from ..format.layout import MAX_OFFSET
from ..format.log import REMOTE_EPOCHS_SUFFIX, PartitionLog, RemotePartitionLog
from ..format.scan import ScanOptions
from ..format.tiered import RemoteSegment
from .fragments import Fragment, scan_fragments

REMOTE_LOG_METADATA_TOPIC = TOPIC

COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED = \
    range(4)  # the codes of SEGMENT_STATES
DELETE_PARTITION_FINISHED = 2  # of PARTITION_DELETE_STATES
_ALLOWED = {  # the transitions Kafka's cache applies; any other update is ignored
    COPY_SEGMENT_STARTED: {COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED},
    COPY_SEGMENT_FINISHED: {DELETE_SEGMENT_STARTED},
    DELETE_SEGMENT_STARTED: {DELETE_SEGMENT_FINISHED},
    DELETE_SEGMENT_FINISHED: set(),
}

TopicIdPartition = Tuple[str, int]  # topic id, partition


@dataclass
class RemoteSegmentState:
    """One remote segment as the metadata describes it."""

    segment_id: str
    topic: str
    topic_id: str
    partition: int
    start_offset: int
    end_offset: int
    leader_epochs: List[Tuple[int, int]]  # (epoch, first offset in the segment), by epoch
    broker_id: int
    max_timestamp_ms: int
    size_in_bytes: int
    state: int
    # (metadata partition, offset, what happened) for each record about the segment
    history: List[Tuple[int, int, str]] = field(default_factory=list)

    @property
    def state_name(self) -> str:
        return SEGMENT_STATES[self.state]

    def epoch_end(self, epoch: int) -> int:
        """The last offset of `epoch` in this segment."""
        later = [start for e, start in self.leader_epochs if e > epoch]
        return later[0] - 1 if later else self.end_offset


class _EpochReferences:
    """The segments one leader epoch references, by the offset the epoch starts at in
    each, and the highest offset of the epoch they reach."""

    def __init__(self):
        self.starts: List[int] = []
        self.ids: List[str] = []
        self.highest: Optional[int] = None

    def finished(self, start: int, segment_id: str, epoch_end: int) -> List[str]:
        replaced = []
        while self.starts and self.starts[-1] >= start and self.highest <= epoch_end:
            self.starts.pop()
            replaced.append(self.ids.pop())
        at = bisect.bisect_left(self.starts, start)
        if at < len(self.starts) and self.starts[at] == start:
            replaced.append(self.ids[at])
            self.ids[at] = segment_id
        else:
            self.starts.insert(at, start)
            self.ids.insert(at, segment_id)
        if self.highest is None or epoch_end > self.highest:
            self.highest = epoch_end
        return replaced

    def remove(self, start: int, segment_id: str) -> None:
        at = bisect.bisect_left(self.starts, start)
        if at < len(self.starts) and self.starts[at] == start and self.ids[at] == segment_id:
            del self.starts[at]
            del self.ids[at]

    def floor(self, offset: int) -> Optional[str]:
        at = bisect.bisect_right(self.starts, offset)
        return self.ids[at - 1] if at else None


class PartitionRemoteState:
    """The remote segments of one topic-id-partition, replayed from the metadata."""

    def __init__(self, topic: str, topic_id: str, partition: int):
        self.topic, self.topic_id, self.partition = topic, topic_id, partition
        self.segments: Dict[str, RemoteSegmentState] = {}  # every segment ever seen
        self.epochs: Dict[int, _EpochReferences] = {}
        self.replaced_by: Dict[str, str] = {}  # a segment an upload replaced, by that upload
        self.delete_states: List[str] = []

    @property
    def deleted(self) -> bool:
        return "DELETE_PARTITION_FINISHED" in self.delete_states

    def started(self, segment: RemoteSegmentState, where: Tuple[int, int]) -> None:
        known = self.segments.get(segment.segment_id)
        if known is not None:
            known.history.append((*where, "COPY_SEGMENT_STARTED again: ignored"))
            return
        segment.history.append((*where, "COPY_SEGMENT_STARTED"))
        self.segments[segment.segment_id] = segment

    def updated(self, segment_id: str, state: int, where: Tuple[int, int]) -> None:
        segment = self.segments[segment_id]
        name = SEGMENT_STATES[state]
        if state != segment.state and state not in _ALLOWED[segment.state]:
            segment.history.append((*where, f"{name}: ignored, as Kafka ignores a move from "
                                            f"{segment.state_name}"))
            return
        segment.history.append((*where, name))
        if state == segment.state:
            return
        segment.state = state
        for epoch, start in segment.leader_epochs:
            references = self.epochs.setdefault(epoch, _EpochReferences())
            if state == COPY_SEGMENT_FINISHED:
                for old in references.finished(start, segment_id, segment.epoch_end(epoch)):
                    if old != segment_id:
                        self.replaced_by[old] = segment_id
            elif state == DELETE_SEGMENT_STARTED:
                references.remove(start, segment_id)

    def referenced_ids(self) -> set:
        return {segment_id for references in self.epochs.values() for segment_id in references.ids}

    def segment_for(self, epoch: int, offset: int) -> Optional[RemoteSegmentState]:
        """The segment Kafka's cache returns for `offset` in `epoch`, or None."""
        references = self.epochs.get(epoch)
        segment_id = None if references is None else references.floor(offset)
        if segment_id is None:
            return None
        segment = self.segments[segment_id]
        return segment if offset <= segment.epoch_end(epoch) else None


def replay(records: Iterable[Tuple[int, int, str, dict]]) -> Dict[TopicIdPartition, PartitionRemoteState]:
    """The remote state of every topic-id-partition from the metadata records
    (metadata partition, offset, record type, record), each partition's in offset order."""
    states: Dict[TopicIdPartition, PartitionRemoteState] = {}
    forgotten: Dict[TopicIdPartition, PartitionRemoteState] = {}
    orphans: List[str] = []

    def state_of(topic_id_partition: dict) -> PartitionRemoteState:
        key = (topic_id_partition["id"], topic_id_partition["partition"])
        if key not in states:
            states[key] = PartitionRemoteState(topic_id_partition["name"], *key)
        return states[key]

    for metadata_partition, offset, record_type, record in records:
        where = (metadata_partition, offset)
        if record_type == SEGMENT_METADATA:
            segment_key = record["remoteLogSegmentId"]
            state = state_of(segment_key["topicIdPartition"])
            if record["remoteLogSegmentState"] != COPY_SEGMENT_STARTED:
                raise CorruptLogError(
                    _metadata_name(metadata_partition), None,
                    f"offset {offset}: remote segment {segment_key['id']} is added in state "
                    f"{_state_name(record['remoteLogSegmentState'])}; Kafka adds a segment "
                    f"only as COPY_SEGMENT_STARTED")
            state.started(RemoteSegmentState(
                segment_id=segment_key["id"], topic=state.topic, topic_id=state.topic_id,
                partition=state.partition, start_offset=record["startOffset"],
                end_offset=record["endOffset"],
                leader_epochs=sorted((e["leaderEpoch"], e["offset"])
                                     for e in record["segmentLeaderEpochs"]),
                broker_id=record["brokerId"], max_timestamp_ms=record["maxTimestampMs"],
                size_in_bytes=record["segmentSizeInBytes"],
                state=COPY_SEGMENT_STARTED), where)
        elif record_type == SEGMENT_METADATA_UPDATE:
            segment_key = record["remoteLogSegmentId"]
            state = state_of(segment_key["topicIdPartition"])
            if segment_key["id"] not in state.segments:
                # Kafka's metadata cache drops such an update (with a warning once loaded)
                orphans.append(
                    f"{_metadata_name(metadata_partition)} offset {offset}: "
                    f"{_state_name(record['remoteLogSegmentState'])} for remote segment "
                    f"{segment_key['id']} of {state.topic}-{state.partition}")
                continue
            state.updated(segment_key["id"], record["remoteLogSegmentState"], where)
        elif record_type == PARTITION_DELETE_METADATA:
            state = state_of(record["topicIdPartition"])
            delete_state = record["remotePartitionDeleteState"]
            state.delete_states.append(PARTITION_DELETE_STATES.get(delete_state,
                                                                   str(delete_state)))
            if delete_state == DELETE_PARTITION_FINISHED:
                forgotten[(state.topic_id, state.partition)] = states.pop(
                    (state.topic_id, state.partition))
        elif record_type == SEGMENT_METADATA_SNAPSHOT:
            raise SegmentLogError(
                f"{_metadata_name(metadata_partition)} offset {offset}: a remote log segment "
                f"metadata snapshot record, which Kafka keeps in the metadata manager's own "
                f"snapshot files, not in the topic")
    for key, state in forgotten.items():
        states.setdefault(key, state)
    if orphans:
        shown = "; ".join(orphans[:5]) + (f"; and {len(orphans) - 5} more"
                                           if len(orphans) > 5 else "")
        warnings.warn(OrphanRemoteUpdateWarning(
            f"{len(orphans)} remote log metadata update(s) of segments whose "
            f"COPY_SEGMENT_STARTED record is not in the metadata read were ignored, as "
            f"Kafka's metadata cache ignores them (the metadata topic's retention or damage "
            f"removed the start): {shown}"), stacklevel=2)
    return states


class OrphanRemoteUpdateWarning(RuntimeWarning):
    """Remote log metadata updates of segments the metadata read never started."""


def _state_name(state: int) -> str:
    return SEGMENT_STATES.get(state, f"state {state}")


def _metadata_name(partition: int) -> str:
    return f"{REMOTE_LOG_METADATA_TOPIC}-{partition}"


def metadata_records(logs: List[PartitionLog]) -> Iterator[Tuple[int, int, str, dict]]:
    """(metadata partition, offset, record type, record) of every record of the
    `__remote_log_metadata` partitions `logs`, each partition in offset order, up to its
    high watermark where a checkpoint gives it."""
    for log in sorted(logs, key=lambda log: log.partition):
        end = log.high_watermark
        end = log.end_offset() if end is None else min(end, log.end_offset())
        fragments = []
        for number, segment in enumerate(log.segments):
            if segment.base_offset >= end:
                break
            fragments.append(Fragment(
                topic=log.topic, partition=log.partition, log_path=segment.log_path,
                log_size=segment.size, start_position=0, end_position=segment.size,
                min_offset=log.start_offset, end_offset=end,
                allow_torn_tail=log.is_last(segment), store=segment.store,
                next_base_offset=None if log.is_last(segment)
                else log.segments[number + 1].base_offset, log_chunks=segment.log_chunks))
        for batch in scan_fragments(fragments, ScanOptions()):
            for offset, value in zip(batch.column("offset").to_pylist(),
                                     batch.column("value").to_pylist()):
                if value is None:
                    raise CorruptLogError(log.directory, None,
                                          f"offset {offset}: a remote log metadata record "
                                          f"without a value")
                try:
                    decoded = decode_remote_log_metadata(value)
                except CorruptLogError as error:
                    raise CorruptLogError(
                        log.directory, None, f"offset {offset}: {error.reason}") from error
                yield log.partition, offset, decoded.record_type, decoded.value


# ---------------------------------------------------------------- one offset space


@dataclass
class RemoteRead:
    """One fetch of the remote part: `segment` serves offsets [first, last]."""

    fetch_offset: int
    epoch: int
    segment: RemoteSegmentState

    @property
    def last(self) -> int:
        return self.segment.end_offset


def epoch_for(epochs: List[EpochEntry], offset: int) -> Optional[int]:
    """The leader epoch of `offset` in a leader-epoch chain, as Kafka's cache finds it."""
    found = None
    for entry in epochs:
        if entry.start_offset > offset:
            break
        found = entry.epoch
    return found


def remote_reads(state: PartitionRemoteState, epochs: List[EpochEntry], log_start: int,
                 local_start: int, where: str) -> List[RemoteRead]:
    """The fetches that read [log_start, local_start) from the remote segments."""
    reads = []
    offset = log_start
    while offset < local_start:
        epoch = epoch_for(epochs, offset)
        segment = None if epoch is None else state.segment_for(epoch, offset)
        if segment is None:
            raise SegmentLogError(
                f"{where}: offset {offset} of {state.topic}-{state.partition} (leader epoch "
                f"{epoch}) lies below the leader's first local segment ({local_start}), "
                f"and no finished remote segment of that epoch holds it: Kafka would answer "
                f"OFFSET_OUT_OF_RANGE. The remote store or its metadata is incomplete")
        reads.append(RemoteRead(offset, epoch, segment))
        offset = segment.end_offset + 1
    return reads


class TieredLog(PartitionLog):
    """A partition read as one offset space: the remote segments the metadata serves
    below the leader's local log start, then the leader's local segments. `leader` is
    the local copy that serves (None: the remote part alone)."""

    def __init__(self, leader: Optional[PartitionLog], remote: RemotePartitionLog,
                 state: PartitionRemoteState, reads: List[RemoteRead],
                 epochs: List[EpochEntry], log_start: int, end_of_remote: int):
        self.leader = leader
        self.remote = remote
        self.remote_state = state
        self.reads = reads
        served = []
        for number, fetch in enumerate(reads):
            segment = remote.segments_by_id[fetch.segment.segment_id]
            following = reads[number + 1].fetch_offset if number + 1 < len(reads) else None
            served.append(replace(segment, serves_from=fetch.fetch_offset,
                                  serves_to=fetch.last + 1 if following is None
                                  else following))
        self.local_from = end_of_remote
        if leader is not None:
            local = leader.segments
            for number, segment in enumerate(local):
                following = local[number + 1].base_offset if number + 1 < len(local) else None
                if following is not None and following <= end_of_remote:
                    continue
                if segment.base_offset < end_of_remote:
                    segment = replace(segment, serves_from=end_of_remote)
                served.append(segment)
        directory = leader.directory if leader is not None else remote.directory
        store = leader.store if leader is not None else remote.store
        log_dir = leader.log_dir if leader is not None else remote.log_dir
        super().__init__(directory, remote.topic, remote.partition, served, store, log_dir)
        self._base_offsets = [segment.first_served for segment in served]
        self._start_offset = log_start
        self._epochs = epochs
        self._end_of_remote = end_of_remote
        if leader is not None:
            self.files_before = leader.files_before

    @property
    def local_start_offset(self) -> int:
        return self.local_from

    def leader_epochs(self) -> Optional[List[EpochEntry]]:
        return self._epochs

    def topic_id(self) -> Optional[str]:
        return self.remote.remote_topic_id

    @property
    def first_segment_offset(self) -> int:
        return self.segments[0].first_served if self.segments else self._start_offset

    @property
    def high_watermark(self) -> Optional[int]:
        if self.leader is None:
            return self._end_of_remote
        return super().high_watermark

    def end_offset(self, verify: bool = False) -> int:
        if self.leader is None or not self.leader.segments:
            return self._end_of_remote
        return max(self.leader.end_offset(verify), self._end_of_remote)

    def last_stable_offset(self, verify: bool = False, up_to: Optional[int] = None) -> int:
        # Kafka uploads only segments below the last stable offset: no transaction still
        # open began in the remote part, so the local segments alone decide.
        if self.leader is None:
            end = self._end_of_remote if up_to is None else min(up_to, self._end_of_remote)
            return max(end, self.start_offset)
        return max(self.leader.last_stable_offset(verify, up_to), self.start_offset)

    def aborted_transactions(self):
        """Each served segment's aborted transactions whose marker it serves."""
        aborted = []
        for segment in self.segments:
            low, high = segment.first_served, segment.serves_to or MAX_OFFSET
            aborted.extend(entry for entry in segment.aborted_transactions()
                           if low <= entry.last_offset < high)
        return aborted

    def offset_for_timestamp(self, timestamp: int) -> Optional[int]:
        from ..format.scan import first_offset_at_or_after_time

        start = self.start_offset
        for segment in self.segments[self.segment_index_for(start):]:
            max_ts = segment.time_index.max_timestamp
            if not self.is_last(segment) and max_ts is not None and max_ts < timestamp:
                continue
            found = first_offset_at_or_after_time(self, segment, timestamp,
                                                  max(start, segment.first_served))
            if found is not None and (segment.serves_to is None or found < segment.serves_to):
                return found
        return None

    def describe_remote(self) -> List[dict]:
        return remote_report(self.remote_state, self.remote, self.reads, self._epochs,
                             self.start_offset, self.local_from if self.leader else None)


def remote_report(state: PartitionRemoteState, remote: RemotePartitionLog,
                  reads: List[RemoteRead], epochs: Optional[List[EpochEntry]],
                  log_start: int, local_start: Optional[int]) -> List[dict]:
    """Every remote segment of the partition, in start-offset order: its state, whether it
    counts, why not, and the offsets it serves."""
    serves: Dict[str, List[List[int]]] = {}
    for number, fetch in enumerate(reads):
        following = reads[number + 1].fetch_offset if number + 1 < len(reads) else None
        last = fetch.last if following is None else following - 1
        serves.setdefault(fetch.segment.segment_id, []).append([fetch.fetch_offset, last])
    referenced = state.referenced_ids()
    chain = {entry.epoch: entry.start_offset for entry in epochs or []}
    copies = _copies_by_id(remote)
    rows = []
    for segment in sorted(state.segments.values(),
                          key=lambda s: (s.start_offset, s.end_offset, s.segment_id)):
        copy = copies.get(segment.segment_id)
        present = segment.segment_id in remote.segments_by_id and not (
            copy.missing if copy is not None else ())
        within = within_leader_epochs(segment, chain) if chain else None
        served = serves.get(segment.segment_id, [])
        if served:
            reason = "serves"
        elif state.deleted:
            reason = "the partition was deleted (DELETE_PARTITION_FINISHED)"
        elif segment.state == COPY_SEGMENT_STARTED:
            reason = "upload never finished (COPY_SEGMENT_STARTED only)"
        elif segment.state in (DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED):
            reason = f"being deleted or deleted ({segment.state_name})"
        elif segment.segment_id not in referenced:
            by = state.replaced_by.get(segment.segment_id)
            reason = "replaced by a later upload of the same offsets" + (f" ({by})" if by else "")
        elif within is False:
            reason = "outside the leader's epoch chain"
        elif segment.end_offset < log_start:
            reason = f"below the log start offset {log_start}"
        elif local_start is not None and segment.start_offset >= local_start:
            reason = f"at or above the leader's local log start offset {local_start}: read from the local log"
        else:
            reason = "not reached by the fetches (another segment serves its offsets)"
        rows.append({
            "topic": state.topic, "partition": state.partition, "segment_id": segment.segment_id,
            "start_offset": segment.start_offset, "end_offset": segment.end_offset,
            "leader_epochs": [list(pair) for pair in segment.leader_epochs],
            "broker": segment.broker_id, "state": segment.state_name,
            "files_present": present, "within_leader_epochs": within,
            "valid": segment.state == COPY_SEGMENT_FINISHED and segment.segment_id in referenced
            and within is not False and segment.end_offset >= log_start and not state.deleted,
            "serves": served, "reason": reason,
            "history": [f"{_metadata_name(p)}@{o}: {what}" for p, o, what in segment.history],
        })
    return rows


def within_leader_epochs(segment: RemoteSegmentState, chain: Dict[int, int]) -> bool:
    """Whether the segment's epochs follow the leader's chain, as Kafka's retention
    checks it: its last epoch within the chain's, and every epoch from the first the
    chain knows in the chain, starting where the chain starts it (the first may start
    later, inside it), ending by the chain's next epoch."""
    epochs = dict(segment.leader_epochs)
    ordered = sorted(chain)
    last = max(epochs)
    if last < ordered[0] or last > ordered[-1]:
        return False
    first = min((e for e in epochs if e >= ordered[0]), default=None)
    if first is None:
        return False
    for epoch in sorted(e for e in epochs if e >= first):
        if epoch not in chain:
            return False
        offset = epochs[epoch]
        earlier = [e for e in ordered if e < epoch]
        if epoch == first and earlier and offset < chain[epoch]:
            return False
        if epoch != first and offset != chain[epoch]:
            return False
        if epoch == last:
            later = [chain[e] for e in ordered if e > epoch]
            if later and segment.end_offset >= later[0]:
                return False
    return True


# ---------------------------------------------------------------- a read's partitions


def join_tiered(leaders: Dict[Tuple[str, int], PartitionLog],
                remotes: List[RemotePartitionLog]) -> Dict[Tuple[str, int], PartitionLog]:
    """The read's partitions with the remote ones joined in: with the metadata topic's
    partitions among `leaders`, each remote partition as the metadata serves it (joined
    with its brokers' copy where there is one); without, by its layout alone."""
    metadata_logs = [log for (topic, _), log in leaders.items()
                     if topic == REMOTE_LOG_METADATA_TOPIC]
    joined = dict(leaders)
    if not metadata_logs:
        for remote in remotes:
            local = leaders.get(remote.topic_partition)
            if remote.layout_error is not None:
                raise remote.layout_error
            if local is None:
                joined[remote.topic_partition] = remote
            else:
                raise SegmentLogError(
                    f"{remote.topic}-{remote.partition} is in the remote store "
                    f"{remote.directory} and on the brokers ({local.directory}), but no "
                    f"{REMOTE_LOG_METADATA_TOPIC} partition was given to say which remote "
                    f"segments count: give the brokers' whole log dirs (or the "
                    f"{REMOTE_LOG_METADATA_TOPIC}-<n> directories)")
        return joined
    states = replay(metadata_records(metadata_logs))
    by_partition: Dict[Tuple[str, int], List[RemotePartitionLog]] = {}
    for remote in remotes:
        by_partition.setdefault(remote.topic_partition, []).append(remote)
    for topic_partition, candidates in by_partition.items():
        local = leaders.get(topic_partition)
        local_id = local.topic_id() if local is not None else None
        chosen = [remote for remote in candidates
                  if (remote.remote_topic_id, remote.partition) in states
                  and not states[(remote.remote_topic_id, remote.partition)].deleted
                  and (local_id is None or remote.remote_topic_id == local_id)]
        if not chosen:
            unknown = [remote for remote in candidates
                       if (remote.remote_topic_id, remote.partition) not in states
                       and (local_id is None or remote.remote_topic_id == local_id)]
            if unknown:
                raise SegmentLogError(
                    f"{topic_partition[0]}-{topic_partition[1]} (topic id "
                    f"{unknown[0].remote_topic_id}) is in the remote store "
                    f"{unknown[0].directory}, but no {REMOTE_LOG_METADATA_TOPIC} record "
                    f"read names it: give every {REMOTE_LOG_METADATA_TOPIC}-<n> partition "
                    f"(the brokers' whole log dirs), one of which holds its segments' states")
            continue  # a deleted partition's leftovers, or an older topic of that name
        if len(chosen) > 1:
            raise SegmentLogError(
                f"{topic_partition[0]}-{topic_partition[1]}: the remote store holds it under "
                f"several topic ids ({', '.join(r.directory for r in chosen)}) and the "
                f"metadata knows each; give the brokers' dirs to tell the current one")
        remote = chosen[0]
        state = states[(remote.remote_topic_id, remote.partition)]
        joined[topic_partition] = tiered_log(local, remote, state)
    return joined


def tiered_log(local: Optional[PartitionLog], remote: RemotePartitionLog,
               state: PartitionRemoteState) -> TieredLog:
    """One partition as one offset space (see the module's text)."""
    if local is not None:
        epochs = local.leader_epochs() or []
        entry = local.checkpointed(checkpoints.LOG_START_FILE)
        local_start = local.segments[0].base_offset if local.segments else local.start_offset
        log_start = local_start if entry is None else min(entry.offset, local_start)
        if entry is not None and entry.offset > local_start:
            log_start = local.start_offset
        reads = remote_reads(state, epochs, log_start, local_start, local.directory)
        end_of_remote = max([local_start] + [fetch.last + 1 for fetch in reads])
    else:
        epochs, log_start, end_of_remote = _remote_only_bounds(state, remote)
        reads = remote_reads(state, epochs, log_start, end_of_remote, remote.directory)
    copies = _copies_by_id(remote)
    for fetch in reads:
        copy = copies.get(fetch.segment.segment_id)
        if copy is None:
            raise CorruptLogError(
                remote.directory, None,
                f"remote segment {fetch.segment.segment_id} (offsets "
                f"{fetch.segment.start_offset}..{fetch.segment.end_offset}) serves offset "
                f"{fetch.fetch_offset}, but the store holds none of its objects")
        from ..format.tiered import check_readable
        check_readable(copy)
    return TieredLog(local, remote, state, reads, epochs, log_start, end_of_remote)


def _copies_by_id(remote: RemotePartitionLog) -> Dict[str, RemoteSegment]:
    """Each segment id's first copy in the store, looked up once per read, not scanned."""
    copies: Dict[str, RemoteSegment] = {}
    for copy in remote.copies:
        copies.setdefault(copy.segment_id, copy)
    return copies


def _remote_only_bounds(state: PartitionRemoteState, remote: RemotePartitionLog
                        ) -> Tuple[List[EpochEntry], int, int]:
    """Without the brokers: the leader epochs from the checkpoint the newest referenced
    segment was uploaded with, the log start at the first segment that chain serves,
    the end after the newest."""
    referenced = [state.segments[i] for i in state.referenced_ids()
                  if state.segments[i].state == COPY_SEGMENT_FINISHED]
    if not referenced:
        return [], 0, 0
    newest = max(referenced, key=lambda s: (s.end_offset, s.leader_epochs[-1][0]))
    segment = remote.segments_by_id.get(newest.segment_id)
    data = None
    if segment is not None and segment.locations and REMOTE_EPOCHS_SUFFIX in segment.locations:
        path, position, length = segment.locations[REMOTE_EPOCHS_SUFFIX]
        data = segment.store.read_bytes(path, position, length) if length else b""
        epochs = checkpoints.parse_leader_epochs(data, path)
    else:
        epochs = [EpochEntry(epoch, start) for epoch, start in newest.leader_epochs]
    chain = {entry.epoch: entry.start_offset for entry in epochs}
    starts = [s.start_offset for s in referenced
              if within_leader_epochs(s, chain) and epoch_for(epochs, s.start_offset) is not None]
    log_start = min(starts, default=newest.start_offset)
    log_start = max(log_start, epochs[0].start_offset if epochs else log_start)
    return epochs, log_start, newest.end_offset + 1
