"""The other files of a partition directory, entry by entry as they are on disk.

Index entries are shown raw (the zero padding of a preallocated index and entries out of
order included), with each entry's byte position; the format layer's parsers, which
refuse such files, decide what a reader would accept. The producer-state snapshot
(`.snapshot`) is Kafka's ProducerStateManager file: int16 version (1), uint32 CRC32C of
everything after the CRC, then an int32 count of producer entries of 46 bytes each.
"""
import struct
from typing import List, Optional

from ..errors import CorruptLogError
from ..format.crc import crc32c
from ..format.indexes import OFFSET_ENTRY, TIME_ENTRY, parse_transaction_index

SNAPSHOT_HEAD = struct.Struct(">hI")  # version, crc
SNAPSHOT_COUNT = struct.Struct(">i")
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_VERSION = 1
SNAPSHOT_CRC_START = SNAPSHOT_HEAD.size


def offset_index_entries(data: bytes, base_offset: int) -> List[dict]:
    """Every 8-byte entry: absolute offset and log position (a trailing partial entry is
    left out; verify reports it)."""
    return [{"index_position": pos, "offset": base_offset + rel, "position": log_pos,
             "zero": rel == 0 and log_pos == 0}
            for pos in range(0, len(data) - len(data) % OFFSET_ENTRY.size, OFFSET_ENTRY.size)
            for rel, log_pos in [OFFSET_ENTRY.unpack_from(data, pos)]]


def time_index_entries(data: bytes, base_offset: int) -> List[dict]:
    """Every 12-byte entry: timestamp and absolute offset."""
    return [{"index_position": pos, "timestamp": ts, "offset": base_offset + rel,
             "zero": ts == 0 and rel == 0}
            for pos in range(0, len(data) - len(data) % TIME_ENTRY.size, TIME_ENTRY.size)
            for ts, rel in [TIME_ENTRY.unpack_from(data, pos)]]


def transaction_index_entries(data: bytes, path) -> List[dict]:
    return [{"index_position": txn.position, "version": txn.version,
             "producer_id": txn.producer_id, "first_offset": txn.first_offset,
             "last_offset": txn.last_offset, "last_stable_offset": txn.last_stable_offset}
            for txn in parse_transaction_index(data, path)]


def producer_snapshot(data: bytes, path) -> dict:
    """A producer-state snapshot's version, CRC (and whether it matches) and entries."""
    if len(data) < SNAPSHOT_HEAD.size + SNAPSHOT_COUNT.size:
        raise CorruptLogError(path, 0, f"a producer snapshot of {len(data)} bytes is shorter "
                                       f"than its version, CRC and entry count")
    version, crc = SNAPSHOT_HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptLogError(path, 0, f"unknown producer snapshot version {version}")
    (count,) = SNAPSHOT_COUNT.unpack_from(data, SNAPSHOT_HEAD.size)
    start = SNAPSHOT_HEAD.size + SNAPSHOT_COUNT.size
    if count < 0 or start + count * SNAPSHOT_ENTRY.size != len(data):
        raise CorruptLogError(path, SNAPSHOT_HEAD.size,
                              f"producer snapshot declares {count} entries of "
                              f"{SNAPSHOT_ENTRY.size} bytes but holds {len(data) - start} bytes "
                              f"after the count")
    entries = []
    for number in range(count):
        position = start + number * SNAPSHOT_ENTRY.size
        (producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp,
         coordinator_epoch, txn_first) = SNAPSHOT_ENTRY.unpack_from(data, position)
        entries.append({
            "snapshot_position": position, "producer_id": producer_id, "producer_epoch": epoch,
            "last_sequence": last_sequence, "last_offset": last_offset,
            "offset_delta": offset_delta, "timestamp": timestamp,
            "coordinator_epoch": coordinator_epoch,
            "current_txn_first_offset": None if txn_first < 0 else txn_first,
        })
    computed = crc32c(data[SNAPSHOT_CRC_START:])
    return {"version": version, "crc": crc, "crc_valid": computed == crc,
            "computed_crc": computed, "entries": entries}


def base_offset_of(name: str) -> Optional[int]:
    """The base offset a segment file's name gives (20 digits), None for other names."""
    stem = name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None
