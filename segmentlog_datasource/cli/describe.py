"""`segmentlog describe`: what each topic-partition of a log holds, from its headers."""
from typing import Callable, Dict, List, Optional

from ..errors import CorruptLogError
from ..format import PartitionLog, TransactionFilter
from ..format.compression import CODEC_NAMES
from ..read.replicas import replica_report
from ..read.tiered import TieredLog
from .entries import LogStop, walk_log


def describe_partition(log: PartitionLog,
                       advance: Callable[[int], None] = lambda size: None) -> dict:
    """Segments, offsets, the time index's range, counts, codecs and transactions of one
    partition as its files hold them, and what a consumer reads of it (see
    _consumer_view): `log` is the copy that serves it, its other copies in `replicas`.
    Records are counted from batch headers (legacy wrappers are decoded); `records` is
    every record on disk, control records included. `advance(size)` is told of each
    segment read (for a progress bar)."""
    segments: List[dict] = []
    entries: List[tuple] = []  # (segment path, LogEntry) of the data entries
    open_since: Dict[int, int] = {}
    codecs = set()
    torn_tail: Optional[dict] = None
    for number, segment in enumerate(log.segments):
        path = segment.log_path
        counts = {"batches": 0, "records": 0, "first_offset": None, "last_offset": None,
                  "valid_bytes": 0}
        with segment.store.reader(path, segment.size, segment.log_chunks) as reader:
            for item in walk_log(reader, path, segment.size):
                if not isinstance(item, LogStop) and \
                        not segment.serves_entry(item.header, first=number == 0):
                    continue
                if isinstance(item, LogStop):
                    if log.is_last(segment) and item.kind in ("torn", "zero-filled"):
                        torn_tail = {"file": path, "position": item.position,
                                     "trailing_bytes": item.remaining, "kind": item.kind,
                                     "reason": item.reason}
                    else:
                        torn_tail = {"file": path, "position": item.position,
                                     "trailing_bytes": item.remaining, "kind": "damage",
                                     "reason": item.reason}
                    break
                header = item.header
                records = item.record_total(path)
                first = item.records(path)[0].offset if item.legacy_wrapper else \
                    header.base_offset
                counts["batches"] += 1
                counts["records"] += records
                counts["valid_bytes"] = header.end_position
                if counts["first_offset"] is None:
                    counts["first_offset"] = first
                counts["last_offset"] = header.last_offset
                codecs.add(CODEC_NAMES.get(header.compression, str(header.compression)))
                if header.is_transactional:
                    if header.is_control:
                        open_since.pop(header.producer_id, None)
                    else:
                        open_since.setdefault(header.producer_id, header.base_offset)
                entries.append((path, item))
        time_index = segment.time_index
        offset_index = segment.offset_index
        served = {} if segment.serves_from is None and segment.serves_to is None else {
            "serves": [segment.first_served,
                       None if segment.serves_to is None else segment.serves_to - 1]}
        segments.append({
            "base_offset": segment.base_offset, "log_file": path, "log_size": segment.size,
            **({"segment_id": segment.segment_id} if segment.segment_id else {}), **served,
            **counts,
            "offset_index_entries": len(offset_index),
            "time_index_entries": len(time_index),
            "time_index_first": time_index.timestamps[0] if len(time_index) else None,
            "max_timestamp": time_index.max_timestamp,
            "aborted_transactions": len(segment.aborted_transactions()),
        })
        advance(segment.size)
    with_data = [s for s in segments if s["batches"]]
    log_end = with_data[-1]["last_offset"] + 1 if with_data else log.start_offset
    consumer = _consumer_view(log, entries, log_end)
    firsts = [s["time_index_first"] for s in segments if s["time_index_first"] is not None]
    maxima = [s["max_timestamp"] for s in segments if s["max_timestamp"] is not None]
    epochs = log.leader_epochs()
    return {
        "topic": log.topic,
        "partition": log.partition,
        "directory": log.directory,
        "segments": segments,
        "batches": sum(s["batches"] for s in segments),
        "records": sum(s["records"] for s in segments),
        "first_offset": with_data[0]["first_offset"] if with_data else None,
        "last_offset": with_data[-1]["last_offset"] if with_data else None,
        "log_end_offset": log_end,
        "last_stable_offset": consumer["last_stable_offset"],
        "open_transactions": sorted([pid, first] for pid, first in open_since.items()),
        "has_producer_ids": any(entry.header.producer_id >= 0 for _, entry in entries),
        "records_visible_read_uncommitted": consumer["read_uncommitted"],
        "records_visible_read_committed": consumer["read_committed"],
        "bytes": sum(s["log_size"] for s in segments),
        "valid_bytes": sum(s["valid_bytes"] for s in segments),
        "codecs": sorted(codecs),
        "time_index_range": [min(firsts), max(maxima)] if firsts and maxima else None,
        "torn_tail": torn_tail,
        "log_start_offset": log.start_offset,
        "high_watermark": consumer["high_watermark"],
        "leader_epochs": None if epochs is None else [[e.epoch, e.start_offset]
                                                      for e in epochs],
        "topic_id": log.topic_id(),
        "replicas": replica_report(log),
        **({"remote_segments": log.describe_remote()} if isinstance(log, TieredLog) else {}),
    }


def _consumer_view(log: PartitionLog, entries, log_end: int) -> dict:
    """What a consumer of the partition reads: the high watermark, the last stable offset
    up to it and the data records in [log start, high watermark) (to the log end where no
    checkpoint gives a high watermark), all records and those read_committed shows.

    The LSO is the log's own (PartitionLog.last_stable_offset); where damage stops its
    walk of the headers it is None, and so is the read_committed count."""
    high_watermark = log.high_watermark
    if high_watermark is not None:
        high_watermark = min(high_watermark, log_end)  # as Kafka loads it
    end = log_end if high_watermark is None else high_watermark
    try:
        last_stable: Optional[int] = log.last_stable_offset(up_to=high_watermark)
    except CorruptLogError:
        last_stable = None  # the on-disk columns (tail) say where and why
    hidden = TransactionFilter(log.aborted_transactions(),
                               end if last_stable is None else last_stable)
    start = log.start_offset
    uncommitted = committed = 0
    for path, entry in entries:
        header = entry.header
        if header.is_control:
            continue
        uncommitted += _records_between(entry, path, start, end)
        if last_stable is None or header.is_transactional and hidden.is_aborted(header):
            continue
        committed += _records_between(entry, path, start, min(end, last_stable))
    return {"high_watermark": high_watermark, "last_stable_offset": last_stable,
            "read_uncommitted": uncommitted,
            "read_committed": None if last_stable is None else committed}


def _records_between(entry, path, low: int, high: int) -> int:
    """How many of the entry's records have offsets in [low, high): an entry across a
    bound is decoded (a compacted batch has gaps in its offsets; a legacy wrapper's
    header gives its last offset only)."""
    header = entry.header
    if header.last_offset < low or header.base_offset >= high:
        return 0
    if low <= header.base_offset and header.last_offset < high and not entry.legacy_wrapper:
        return entry.record_total(path)
    return sum(1 for record in entry.records(path) if low <= record.offset < high)


# What each directory a broker renames a partition's to is (format.log's
# parse_moved_dir_name).
RENAMED = {
    "future": "a copy of the partition that the broker is moving into this log dir from "
              "another of its log dirs (kafka-reassign-partitions with log_dirs, or "
              "kafka-log-dirs), swapped in for the current copy once it has caught up",
    "delete": "the directory of a deleted partition, which the broker removes after "
              "file.delete.delay.ms",
    "stray": "a partition the broker found it no longer hosts, kept until it is deleted",
}


def renamed_notes(paths, passed_over: bool = True) -> List[str]:
    """Notes on the renamed partition directories (`<topic>-<p>.<id>-future`, `-delete`,
    `-stray`) among `paths`, and directly under them if `passed_over`: what each is, that
    one named is read as its partition, that a log dir's listing passes over the others
    and how to read one."""
    from ..format.log import parse_moved_dir_name
    from ..storage import resolve

    notes = []
    for given in paths:
        store, path = resolve(given)
        moved = parse_moved_dir_name(store.basename(path))
        if moved is not None:
            topic, partition, kind = moved
            notes.append(f"{given} is {topic}-{partition}'s -{kind} directory: "
                         f"{RENAMED[kind]}; read as partition {topic}-{partition}")
            continue
        for name in store.child_dirs(path) if passed_over else ():
            moved = parse_moved_dir_name(name)
            if moved is not None:
                topic, partition, kind = moved
                named = store.join(given, name)
                notes.append(f"{named} is not shown: {topic}-{partition}'s -{kind} "
                             f"directory, {RENAMED[kind]}; name it to read it (segmentlog "
                             f"describe {named})")
    return notes


def describe_log(logs: List[PartitionLog]) -> List[dict]:
    return [describe_partition(log) for log in logs]
