"""Walking a `.log` file entry by entry for the command line, damage included.

The readers in `format` stop at the first damage (that is what a query needs); `dump`
and `verify` must show every entry, its stored and computed checksum, and where and why
the entries stop. The header layout, checksums and record decoding are the format
layer's; this module only keeps going where a reader would raise.
"""
import os
from dataclasses import dataclass
from typing import Iterator, List, Optional, Union

from ..errors import CorruptLogError
from ..format import compression
from ..format.control import CONTROL_KEY, END_TXN_MARKER, control_type_name, is_transaction_marker
from ..format.crc import crc32, crc32c
from ..format.entries import BatchHeader, read_entry_header
from ..format.layout import (ENTRY_PREFIX, ENTRY_PREFIX_SIZE, LEGACY_CRC_START, LOG_OVERHEAD,
                             MAX_OFFSET, TIMESTAMP_TYPE_NAMES, V2_CRC_START, V2_HEADER_SIZE)
from ..format.legacy import decode_legacy_message
from ..format.v2 import batch_records_payload, decode_v2_records, record_sequence


@dataclass
class Record:
    offset: int
    timestamp: int
    timestamp_type: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: list


class RecordList:
    """The sink the format layer's decoders fill."""

    def __init__(self):
        self.records: List[Record] = []

    def add(self, offset, timestamp, timestamp_type, key, value, headers):
        self.records.append(Record(offset, timestamp, timestamp_type, key, value, list(headers)))


@dataclass
class LogEntry:
    """One magic-2 batch or shallow magic-0/1 message, with its bytes."""

    header: BatchHeader
    data: bytes

    @property
    def computed_crc(self) -> int:
        if self.header.magic == 2:
            return crc32c(self.data[V2_CRC_START:])
        return crc32(self.data[LEGACY_CRC_START:])

    @property
    def crc_valid(self) -> bool:
        return self.computed_crc == self.header.crc

    @property
    def legacy_wrapper(self) -> bool:
        return self.header.magic < 2 and self.header.compression != compression.NONE

    def records(self, path) -> List[Record]:
        """The entry's records (a legacy wrapper's inner messages); CorruptLogError when
        they cannot be decoded."""
        found = RecordList()
        header = self.header
        if header.magic == 2:
            if header.record_count:
                payload = batch_records_payload(self.data, 0, header, path)
                decode_v2_records(payload, header.record_count, header, found, -MAX_OFFSET - 1,
                                  MAX_OFFSET, path)
        else:
            decode_legacy_message(self.data, 0, header, found, -MAX_OFFSET - 1, MAX_OFFSET,
                                  True, path)
        return found.records

    def record_total(self, path) -> int:
        """How many records the entry holds, decoding only a legacy wrapper."""
        if self.header.magic == 2:
            return self.header.record_count or 0
        return len(self.records(path)) if self.legacy_wrapper else 1


@dataclass
class LogStop:
    """Where a file's entries stop before its end, and why."""

    position: int
    remaining: int  # bytes from `position` to the end of the file
    kind: str  # "torn" (a short last entry), "zero-filled" or "unframeable"
    reason: str
    declared_base_offset: Optional[int] = None
    declared_size: Optional[int] = None
    declared_magic: Optional[int] = None


def walk_log(reader, path, size: int, start: int = 0) -> Iterator[Union[LogEntry, LogStop]]:
    """Every entry from `start` to the end of the file, then a LogStop if the entries do
    not reach it. Checksums are not checked here: each entry tells its own validity."""
    position = start
    while position < size:
        remaining = size - position
        head = reader.pread(min(V2_HEADER_SIZE, remaining), position)
        declared = ENTRY_PREFIX.unpack_from(head) if len(head) >= ENTRY_PREFIX_SIZE else None
        try:
            header = read_entry_header(head, 0, position, path, remaining=remaining)
        except CorruptLogError as damage:
            yield LogStop(position, remaining, "unframeable", damage.reason, *_declared(declared))
            return
        if header is None:
            if declared is not None and not any(head[:ENTRY_PREFIX_SIZE]):
                yield LogStop(position, remaining, "zero-filled",
                              f"zero-filled space ({remaining} bytes) after the last entry")
            else:
                base, size_declared, magic = _declared(declared)
                wanted = "more than the prefix" if size_declared is None else \
                    f"{size_declared} bytes"
                yield LogStop(position, remaining, "torn",
                              f"torn tail: the entry at position {position} "
                              f"(base offset {base}) declares {wanted} but only {remaining} "
                              f"remain in the file", base, size_declared, magic)
            return
        yield LogEntry(header, reader.pread(header.size, position))
        position += header.size


def _declared(prefix):
    if prefix is None:
        return None, None, None
    offset, length, _, magic = prefix
    return offset, LOG_OVERHEAD + length, magic


def control_fields(record: Record) -> Optional[dict]:
    """A control record's type (Kafka's ControlRecordType name, with its id when Kafka
    does not know it) and a transaction marker's coordinator epoch, None when it is not
    a control record. Damage shows as what can be read, not as an error: dump shows all."""
    if record.key is None or len(record.key) < CONTROL_KEY.size:
        return None
    _, kind = CONTROL_KEY.unpack_from(record.key)
    epoch = None
    if is_transaction_marker(kind) and record.value is not None and \
            len(record.value) >= END_TXN_MARKER.size:
        epoch = END_TXN_MARKER.unpack_from(record.value)[1]
    name = control_type_name(kind)
    return {"type": name if name != "UNKNOWN" else f"UNKNOWN({kind})",
            "coordinator_epoch": epoch}


def record_metadata(entry: LogEntry, records: List[Record], path) -> dict:
    """What the includeMetadata columns give the records of `entry`, under the same names
    (the record's own `sequence` is record_sequence_of's)."""
    header = entry.header
    batch_offset = header.base_offset
    if entry.legacy_wrapper and records:
        batch_offset = records[0].offset
    return {
        "producerId": header.producer_id,
        "producerEpoch": header.producer_epoch,
        "leaderEpoch": header.partition_leader_epoch,
        "isTransactional": header.is_transactional,
        "compression": compression.CODEC_NAMES.get(header.compression,
                                                   f"unknown({header.compression})"),
        "magic": header.magic,
        "batchOffset": batch_offset,
        "segment": os.path.basename(path),
        "position": header.position,
    }


def record_sequence_of(entry: LogEntry, record: Record) -> int:
    """The record's sequence, as Kafka's DefaultRecord gives it (-1 for legacy messages)."""
    header = entry.header
    if header.magic < 2:
        return -1
    return record_sequence(header.base_sequence, record.offset - header.base_offset)


def batch_fields(entry: LogEntry, records: Optional[List[Record]]) -> dict:
    """An entry as kafka-dump-log shows a batch, in the fixtures' manifest names. A legacy
    wrapper's base offset is its first inner offset (known once `records` are decoded)."""
    header = entry.header
    base_offset = header.base_offset
    if entry.legacy_wrapper and records:
        base_offset = records[0].offset
    fields = {
        "base_offset": base_offset,
        "last_offset": header.last_offset,
        "magic": header.magic,
        "compression": compression.CODEC_NAMES.get(header.compression,
                                                   f"unknown({header.compression})"),
        "timestamp_type": TIMESTAMP_TYPE_NAMES[header.timestamp_type],
        "max_timestamp": header.max_timestamp,
    }
    if header.magic == 2:
        fields["base_timestamp"] = header.base_timestamp
        fields["delete_horizon_ms"] = header.delete_horizon_ms
    fields.update({
        "is_transactional": header.is_transactional,
        "is_control": header.is_control,
        "producer_id": header.producer_id,
        "producer_epoch": header.producer_epoch,
        "base_sequence": header.base_sequence,
        "partition_leader_epoch": header.partition_leader_epoch,
        "position": header.position,
        "size_in_bytes": header.size,
        "crc": header.crc,
        "crc_valid": entry.crc_valid,
        "record_count": header.record_count,
    })
    if header.is_control and records:
        fields["control"] = control_fields(records[0])
    return fields


def timestamp_type_name(timestamp_type: int) -> str:
    return TIMESTAMP_TYPE_NAMES[timestamp_type]

