"""The cluster as KRaft's metadata log says it was at an offset: topics, partitions (with
leaders, ISR, replicas, eligible leader replicas), configs, brokers, features (kraft.version
from the KRaftVersion control records), the quorum's voters, producer ids, ACLs, client
quotas.

`__cluster_metadata-0` holds the metadata records from its log start offset on, and its
`.checkpoint` snapshot files hold the whole state as of their end offsets (exclusive).
The state as of offset N is the newest snapshot ending at or before N + 1, then the log's
records from that snapshot's end through N, replayed as Kafka's image classes do
(format/internal/metadata_image.py).
"""
import os
from typing import List, Optional

from ..errors import InvalidOptionError, RecordDecodeError, SegmentLogError
from ..format.internal.metadata_image import ClusterImage, MetadataReplay, MetadataReplayError
from ..format.internal.metadata_records import (METADATA_TOPIC, decode_control_record,
                                                decode_metadata_record)
from ..format.internal.snapshots import (
    SnapshotFile, list_snapshots, parse_snapshot_name, read_snapshot)
from ..format.layout import MAX_OFFSET
from ..format.log import PartitionLog
from ..format.scan import ScanOptions
from .fragments import Fragment
from .options import ReadOptions, parse_read_options
from .planning import Constraints, offset_ranges, plan_ranges, select_partitions
from .replicas import read_bound

METADATA_PARTITION = 0
TRANSACTION_MARKERS = ("COMMIT", "ABORT")  # a scan gives their values as null


def _metadata_log(path, options: Optional[dict]):
    """The read options and the `__cluster_metadata-0` log under `path` (a log dir or the
    partition directory itself)."""
    given = dict(options or {})
    for name in ("subscribe", "subscribePattern", "assign"):
        if any(key.lower() == name.lower() for key in given):
            raise InvalidOptionError(f"option {name!r}: cluster_state reads "
                                     f"{METADATA_TOPIC} alone", name)
    read = parse_read_options({"path": str(path), "subscribe": METADATA_TOPIC, **given})
    try:
        logs = select_partitions(read, Constraints())
    except SegmentLogError as error:
        raise SegmentLogError(f"no {METADATA_TOPIC}-{METADATA_PARTITION} directory under "
                              f"{path} (a KRaft controller's metadata log dir): {error}") from None
    logs = [log for log in logs if log.partition == METADATA_PARTITION]
    if not logs:
        raise SegmentLogError(f"no {METADATA_TOPIC}-{METADATA_PARTITION} directory under {path}")
    return read, logs[0]


def _answerable_from(log_start: int, snapshots: List[SnapshotFile]) -> Optional[int]:
    """The first offset from which every later one can be answered: 0 when the log
    starts at 0, else the end of the first snapshot that reaches the log's start."""
    if log_start == 0:
        return 0
    reaching = [s.last_contained_offset for s in snapshots if s.end_offset >= log_start]
    return min(reaching) if reaching else None


def cluster_state(path, as_of_offset: Optional[int] = None,
                  options: Optional[dict] = None) -> ClusterImage:
    """The cluster's metadata state after the record at `as_of_offset` (default: the
    last offset a read reaches, the high watermark by default, see readUpTo).

    `path`: a log dir holding `__cluster_metadata-0`, or that directory; `options`: read
    options (store.*, readUpTo, verifyChecksums, ...). Raises SegmentLogError when the
    offset is outside what the log and its snapshots can answer, naming the offsets that
    can be."""
    read, log = _metadata_log(path, options)
    snapshots = list_snapshots(log.directory, log.store)
    bound = read_bound(log, read)
    log_end = log.end_offset(verify=read.verify_checksums)
    if bound is not None:
        log_end = min(log_end, bound)
    last = max([log_end] + [s.end_offset for s in snapshots]) - 1
    if as_of_offset is None:
        as_of_offset = last
    if as_of_offset < 0 or as_of_offset > last:
        if last < 0:
            raise SegmentLogError(f"{log.directory}: the metadata log holds no record and "
                                  f"there is no snapshot")
        raise SegmentLogError(
            f"{log.directory}: offset {as_of_offset} is outside the metadata log: its last "
            f"offset is {last}" + ("" if bound is None else
                                   f" (the high watermark, {bound}, bounds it; readUpTo=logEnd "
                                   f"reads past it)"))
    target = as_of_offset + 1
    usable = [s for s in snapshots if s.end_offset <= target]
    base = usable[-1] if usable else None
    replay_from = base.end_offset if base else 0
    if replay_from < target and replay_from < log.start_offset:
        earliest = _answerable_from(log.start_offset, snapshots)
        what = ("the earliest offset it can answer is "
                f"{earliest}" if earliest is not None else
                "no snapshot reaches the log start, so no offset can be answered")
        raise SegmentLogError(
            f"{log.directory}: the cluster's state as of offset {as_of_offset} is not known: "
            f"the metadata log starts at offset {log.start_offset} and "
            + (f"the newest snapshot at or before it ends at offset {replay_from}"
               if base else "no snapshot covers the offsets before it")
            + f"; {what}")
    if target > log_end and replay_from != target:
        raise SegmentLogError(
            f"{log.directory}: offset {as_of_offset} is past the metadata log's end "
            f"({log_end}) and no snapshot ends right after it")
    replayer = MetadataReplay()
    if base is not None:
        _replay_snapshot(replayer, base, log, read.verify_checksums)
    for offset, control_type, key, value in _log_entries(log, read, replay_from, target):
        try:
            if control_type is None:
                replayer.apply(decode_metadata_record(value), offset)
            elif control_type not in TRANSACTION_MARKERS:  # (none in KRaft's log)
                # KRaftVersion and Voters set KRaft's state; a leader change, nothing
                replayer.apply_control(decode_control_record(key, value), offset)
        except RecordDecodeError as error:
            raise error.at(METADATA_TOPIC, METADATA_PARTITION, offset) from None
    image = replayer.result()
    image.snapshot = os.path.basename(base.path) if base else None
    return image


def _replay_snapshot(replayer: MetadataReplay, snapshot: SnapshotFile, log: PartitionLog,
                     verify: bool) -> None:
    contents = read_snapshot(snapshot, log.store, verify_checksums=verify)
    for entry in contents.control_records:  # KRaftVersion and Voters, after the header
        replayer.apply_control(entry.record, snapshot.last_contained_offset)
    for entry in contents.records:
        try:
            replayer.apply(entry.record, snapshot.last_contained_offset)
        except MetadataReplayError as error:
            raise MetadataReplayError(f"{snapshot.path}: snapshot record {entry.offset}: "
                                      f"{error}") from None
    if replayer.in_transaction:
        raise MetadataReplayError(f"{snapshot.path}: the snapshot ends inside a metadata "
                                  f"transaction (Kafka's snapshots never do)")


def metadata_log_values(path, start: int, end: int, options: Optional[dict] = None):
    """(offset, raw value) of the metadata records of the log under `path` (a log dir or
    `__cluster_metadata-0`) in [start, end), in offset order."""
    read, log = _metadata_log(path, options)
    return _log_values(log, read, max(start, log.start_offset), end)


def _log_entries(log: PartitionLog, read, start: int, end: int):
    """(offset, control type, key, value) of the log's records in [start, end): metadata
    records (control type None) and the records of control batches, in offset order."""
    if start >= end:
        return
    fragments = plan_ranges([log], {log.topic_partition: (start, end)}, read)
    scan = ScanOptions(verify_checksums=read.verify_checksums,
                       max_batch_inflated_bytes=read.max_batch_inflated_bytes,
                       include_control_records=True)
    for fragment in fragments:
        for batch in fragment.scan(scan):
            yield from zip(batch.column("offset").to_pylist(),
                           batch.column("controlType").to_pylist(),
                           batch.column("key").to_pylist(),
                           batch.column("value").to_pylist())


def _log_values(log: PartitionLog, read, start: int, end: int):
    """(offset, value) of the log's metadata records in [start, end); control batches
    (leader changes) are not metadata records and are skipped by the scan."""
    if start >= end:
        return
    fragments = plan_ranges([log], {log.topic_partition: (start, end)}, read)
    scan = ScanOptions(verify_checksums=read.verify_checksums,
                       max_batch_inflated_bytes=read.max_batch_inflated_bytes)
    for fragment in fragments:
        for batch in fragment.scan(scan):
            offsets = batch.column("offset").to_pylist()
            values = batch.column("value").to_pylist()
            yield from zip(offsets, values)


def snapshot_fragments(logs: List[PartitionLog], verify_checksums: bool = True
                       ) -> List[Fragment]:
    """Each snapshot file of the `__cluster_metadata` partitions among `logs` as one
    fragment (its records at the offsets they have inside it), oldest first; each is
    checked complete (header first, footer last, checksums) before it is planned."""
    fragments = []
    for log in logs:
        if log.topic != METADATA_TOPIC:
            continue
        for snapshot in list_snapshots(log.directory, log.store):
            read_snapshot(snapshot, log.store, verify_checksums)
            fragments.append(Fragment(
                topic=log.topic, partition=log.partition, log_path=snapshot.path,
                log_size=snapshot.size, start_position=0, end_position=snapshot.size,
                min_offset=0, end_offset=MAX_OFFSET, allow_torn_tail=False,
                min_entry_offset=0, store=log.store))
    return fragments


def is_snapshot_fragment(fragment: Fragment) -> bool:
    return parse_snapshot_name(os.path.basename(fragment.log_path)) is not None


def plan_metadata_read(read: ReadOptions, constraints: Constraints) -> List[Fragment]:
    """plan_fragments, with the snapshot files of `__cluster_metadata` first when the
    read starts at the earliest offset and no filter bounds offsets or timestamps: a read
    of the whole metadata log begins with the states its snapshots hold."""
    logs = select_partitions(read, constraints)
    fragments = plan_ranges(logs, offset_ranges(read, logs), read, constraints)
    whole = read.starting.kind == "earliest" and read.ending.kind == "latest" and \
        constraints.offset_low == 0 and constraints.offset_high == MAX_OFFSET and \
        constraints.offset_values is None and constraints.timestamp_low_us is None and \
        constraints.timestamp_high_us is None
    return (snapshot_fragments(logs, read.verify_checksums) if whole else []) + fragments
