"""Entries of a segment: the header of a magic-2 record batch or of a magic-0/1 message.

The byte layout is in `layout`; record decoding is in `v2` and `legacy`.
"""
import logging
from dataclasses import dataclass
from typing import Callable, Optional

from ..errors import CorruptLogError
from .crc import crc32, crc32c
from .layout import (
    ATTR_COMPRESSION_MASK, ATTR_CONTROL, ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL, CREATE_TIME, INT64_MAX, ENTRY_PREFIX, ENTRY_PREFIX_SIZE, LEGACY_ATTRIBUTES,
    LEGACY_CRC_START, LEGACY_TIMESTAMP, LOG_APPEND_TIME, LOG_OVERHEAD, MIN_LEGACY_MESSAGE_SIZE,
    NO_TIMESTAMP_TYPE, V1_TIMESTAMP, V2_CRC_START, V2_HEADER, V2_HEADER_SIZE,
)


@dataclass
class BatchHeader:
    """One magic-2 record batch, or one shallow magic-0/1 message, in a segment."""

    position: int  # of the entry's first byte in its file
    base_offset: int  # first offset (for legacy wrappers: first inner offset, when known)
    last_offset: int
    size: int  # whole entry, including the 12-byte offset+length prefix
    magic: int
    attributes: int
    crc: int
    partition_leader_epoch: int = -1
    max_timestamp: int = -1
    base_timestamp: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    record_count: Optional[int] = None

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & ATTR_TIMESTAMP_TYPE else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & ATTR_CONTROL)

    @property
    def delete_horizon_ms(self) -> Optional[int]:
        if self.magic >= 2 and self.attributes & ATTR_DELETE_HORIZON:
            return self.base_timestamp
        return None

    @property
    def end_position(self) -> int:
        return self.position + self.size


def read_entry_header(view, pos: int, file_position: int, path=None,
                      remaining: Optional[int] = None) -> Optional[BatchHeader]:
    """Parse the entry at `pos` of `view` (file position `file_position`).

    `remaining` is how many bytes the file holds from the entry on (default: the rest
    of `view`; `view` need only hold the header bytes). Returns None where the data ends:
    fewer bytes remain than an entry's prefix or than the entry declares (a torn tail), or
    the prefix is all zeros (preallocated, zero-filled space); the caller decides
    whether an end is acceptable there. Raises on other impossible lengths or an unknown
    magic.
    """
    if remaining is None:
        remaining = len(view) - pos
    if remaining < ENTRY_PREFIX_SIZE:
        return None
    offset, length, epoch_or_crc, magic = ENTRY_PREFIX.unpack_from(view, pos)
    if not (offset or length or epoch_or_crc or magic):
        # Zero-filled space (a preallocated segment): nothing was written here. A zero
        # length beside other non-zero bytes is damage, reported below.
        return None
    if magic == 2:
        if length < V2_HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptLogError(
                path, file_position, f"record batch length {length} is smaller than a batch header"
            )
        if LOG_OVERHEAD + length > remaining:
            return None
        (base_offset, _, epoch, _, crc, attributes, last_delta, base_ts, max_ts,
         producer_id, producer_epoch, base_sequence, count) = V2_HEADER.unpack_from(view, pos)
        if last_delta < 0 or count < 0:
            raise CorruptLogError(
                path, file_position,
                f"record batch at offset {base_offset} declares {count} records "
                f"and last offset delta {last_delta}",
            )
        return BatchHeader(
            file_position, base_offset, base_offset + last_delta, LOG_OVERHEAD + length, 2,
            attributes, crc, epoch, max_ts, base_ts,
            producer_id, producer_epoch, base_sequence, count,
        )
    if magic in (0, 1):
        if length < MIN_LEGACY_MESSAGE_SIZE[magic]:
            raise CorruptLogError(
                path, file_position, f"message of magic {magic} has impossible size {length}"
            )
        if LOG_OVERHEAD + length > remaining:
            return None
        attributes = view[pos + LEGACY_ATTRIBUTES]
        timestamp = -1
        if magic == 1:
            (timestamp,) = V1_TIMESTAMP.unpack_from(view, pos + LEGACY_TIMESTAMP)
        return BatchHeader(
            file_position, offset, offset, LOG_OVERHEAD + length, magic, attributes,
            epoch_or_crc, max_timestamp=timestamp, base_timestamp=timestamp,
        )
    raise CorruptLogError(path, file_position, f"unknown magic byte {magic} at offset {offset}")


_log = logging.getLogger("segmentlog_datasource.format")
_warned_ends = set()


def read_entry_or_end(view, pos: int, file_position: int, path, remaining: int,
                      active: bool) -> Optional[BatchHeader]:
    """The entry at `pos`, or None where an active segment's data ends.

    Kafka's recovery truncates the active segment at the first entry that is short,
    zero-filled or cannot be framed (an impossible length, an unknown magic): so does the
    reader, with a warning for damage that is not a plain torn tail. Such an entry in any
    other segment is corruption, reported with file and position.
    """
    try:
        header = read_entry_header(view, pos, file_position, path, remaining=remaining)
    except CorruptLogError as damage:
        if not active:
            raise
        if (path, file_position) not in _warned_ends:
            _warned_ends.add((path, file_position))
            _log.warning("%s: the active segment's data ends at byte %d, where %s; the %d "
                         "bytes from there on are not read (Kafka's recovery would truncate "
                         "them)", path, file_position, damage.reason, remaining)
        return None
    if header is None and not active:
        raise CorruptLogError(
            path, file_position,
            f"no complete entry here (torn or zero-filled; {remaining} bytes remain)"
            " and this is not the last segment",
        )
    return header


def _computed_checksum(view, pos: int, header: BatchHeader) -> int:
    if header.magic == 2:
        return crc32c(view[pos + V2_CRC_START : pos + header.size])
    return crc32(view[pos + LEGACY_CRC_START : pos + header.size])


def verify_checksum(view, pos: int, header: BatchHeader, path=None,
                    is_last: Optional[Callable[[], bool]] = None) -> bool:
    """Raise unless the entry's checksum matches. Where `is_last()` says the entry is the
    active segment's last, a mismatch ends the segment's data instead, as Kafka's
    recovery truncates there: returns False."""
    actual = _computed_checksum(view, pos, header)
    if actual == header.crc:
        return True
    if is_last is not None and is_last():
        return False
    raise CorruptLogError(
        path, header.position,
        f"checksum mismatch in {'record batch' if header.magic == 2 else 'message'} "
        f"at offset {header.base_offset}: stored {header.crc:#010x}, computed {actual:#010x}",
    )


def check_offset_order(header: BatchHeader, next_offset: int, path) -> None:
    """Offsets of a segment's entries increase and start at its base offset; an entry
    below `next_offset` (the base offset, or one past the previous entry), or one whose
    offsets reach 2^63 - 1 (the log end offset after it would not fit Kafka's long), is
    damage."""
    if header.last_offset >= INT64_MAX:
        raise CorruptLogError(
            path, header.position,
            f"entry offsets {header.base_offset}..{header.last_offset} pass the largest "
            f"offset, {INT64_MAX - 1}")
    if header.base_offset < next_offset:
        raise CorruptLogError(
            path, header.position,
            f"entry offset {header.base_offset} is below {next_offset}, "
            "where the segment's offsets had reached: offsets must increase")


def ends_data(view, pos: int, remaining: int) -> bool:
    """Whether an active segment's data ends at `pos` (`remaining` bytes from there to the
    end of the file): the end of the file, or an entry that is torn, zero-filled or cannot
    be framed (see read_entry_or_end)."""
    try:
        return remaining <= 0 or read_entry_header(view, pos, pos, remaining=remaining) is None
    except CorruptLogError:
        return True
