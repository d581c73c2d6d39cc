"""`segmentlog describe`: what each topic-partition of a log holds, from its headers."""
from typing import Dict, List, Optional

from ..format import PartitionLog, TransactionFilter
from ..format.compression import CODEC_NAMES
from .entries import LogStop, walk_log


def describe_partition(log: PartitionLog) -> dict:
    """Segments, offsets, the time index's range, counts, codecs and transactions of one
    partition. Records are counted from batch headers (legacy wrappers are decoded);
    read_committed visibility follows the consumer's rule (aborted batches, control
    records and offsets at or past the last stable offset are hidden)."""
    segments: List[dict] = []
    entries: List[tuple] = []  # (segment path, LogEntry) of the data entries
    open_since: Dict[int, int] = {}
    codecs = set()
    torn_tail: Optional[dict] = None
    for segment in log.segments:
        path = segment.log_path
        counts = {"batches": 0, "records": 0, "first_offset": None, "last_offset": None,
                  "valid_bytes": 0}
        with segment.store.reader(path, segment.size, segment.log_chunks) as reader:
            for item in walk_log(reader, path, segment.size):
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
        segments.append({
            "base_offset": segment.base_offset, "log_file": path, "log_size": segment.size,
            **counts,
            "offset_index_entries": len(offset_index),
            "time_index_entries": len(time_index),
            "time_index_first": time_index.timestamps[0] if len(time_index) else None,
            "max_timestamp": time_index.max_timestamp,
            "aborted_transactions": len(segment.aborted_transactions()),
        })
    with_data = [s for s in segments if s["batches"]]
    log_end = with_data[-1]["last_offset"] + 1 if with_data else log.start_offset
    last_stable = min(open_since.values(), default=log_end)
    uncommitted, committed = _visible_records(log, entries, last_stable)
    firsts = [s["time_index_first"] for s in segments if s["time_index_first"] is not None]
    maxima = [s["max_timestamp"] for s in segments if s["max_timestamp"] is not None]
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
        "last_stable_offset": last_stable,
        "open_transactions": sorted([pid, first] for pid, first in open_since.items()),
        "has_producer_ids": any(entry.header.producer_id >= 0 for _, entry in entries),
        "records_visible_read_uncommitted": uncommitted,
        "records_visible_read_committed": committed,
        "bytes": sum(s["log_size"] for s in segments),
        "valid_bytes": sum(s["valid_bytes"] for s in segments),
        "codecs": sorted(codecs),
        "time_index_range": [min(firsts), max(maxima)] if firsts and maxima else None,
        "torn_tail": torn_tail,
    }


def _visible_records(log: PartitionLog, entries, last_stable: int):
    """Data records visible to read_uncommitted and read_committed consumers."""
    hidden = TransactionFilter(log.aborted_transactions(), last_stable)
    uncommitted = committed = 0
    for path, entry in entries:
        header = entry.header
        if header.is_control:
            continue
        records = entry.record_total(path)
        uncommitted += records
        if header.is_transactional and hidden.is_aborted(header):
            continue
        if header.last_offset < last_stable:
            committed += records
        elif header.base_offset < last_stable:
            committed += sum(1 for r in entry.records(path) if r.offset < last_stable)
    return uncommitted, committed



def describe_log(logs: List[PartitionLog]) -> List[dict]:
    return [describe_partition(log) for log in logs]
