"""Magic-0/1 messages (Kafka before 0.11), including compressed wrapper messages."""
import struct
from typing import Optional, Tuple

from ..errors import CorruptLogError, UnsupportedFormatError
from . import compression
from .crc import crc32
from .entries import BatchHeader
from .layout import (
    ATTR_COMPRESSION_MASK, LEGACY_CRC_START, LOG_APPEND_TIME, LOG_OVERHEAD, MAX_OFFSET,
    MIN_LEGACY_MESSAGE_SIZE, V1_TIMESTAMP,
)


def decode_legacy_message(view, pos: int, header: BatchHeader, sink, min_offset: int,
                          end_offset: int, verify: bool, path=None,
                          max_inflated: int = compression.DEFAULT_MAX_INFLATED_BYTES,
                          lowest_offset: Optional[int] = None) -> int:
    """Decode one shallow magic-0/1 message, unwrapping compressed message sets (that
    inflate to at most `max_inflated` bytes). A wrapper's messages must have increasing
    offsets from `lowest_offset` (where the segment's offsets had reached) up to the
    wrapper's own: its offset is outside the checksum and may be damaged. Returns the
    records kept."""
    return decode_legacy_entry(view, pos, header, sink, min_offset, end_offset, verify, path,
                               max_inflated, lowest_offset)[0]


def decode_legacy_entry(view, pos: int, header: BatchHeader, sink, min_offset: int,
                        end_offset: int, verify: bool, path=None,
                        max_inflated: int = compression.DEFAULT_MAX_INFLATED_BYTES,
                        lowest_offset: Optional[int] = None) -> Tuple[int, int]:
    """decode_legacy_message, returning (records kept, the entry's base offset as Kafka's
    RecordBatch.baseOffset() gives it: a wrapper's first inner offset, else the message's
    own)."""
    message = view[pos + LEGACY_CRC_START : pos + header.size]  # from magic on
    key, value, timestamp = _legacy_fields(message, header.magic, path, header.position)
    codec = header.attributes & ATTR_COMPRESSION_MASK
    ts_type = header.timestamp_type
    if codec == compression.NONE:
        if min_offset <= header.base_offset < end_offset:
            sink.add(header.base_offset, timestamp, ts_type, key, value, [])
            return 1, header.base_offset
        return 0, header.base_offset
    if value is None:
        raise CorruptLogError(path, header.position, "compressed wrapper message has no value")
    if codec not in compression.CODEC_NAMES:
        raise CorruptLogError(
            path, header.position,
            f"wrapper message at offset {header.base_offset} names unknown compression codec "
            f"id {codec}")
    try:
        inner = memoryview(compression.decompress(codec, value, max_inflated))
    except UnsupportedFormatError:
        raise
    except Exception as exc:
        raise CorruptLogError(
            path, header.position,
            f"cannot decompress {compression.codec_name(codec)} wrapper message at offset "
            f"{header.base_offset}: {exc}",
        ) from exc
    messages = []
    inner_pos = 0
    while inner_pos < len(inner):
        if len(inner) - inner_pos < LOG_OVERHEAD:
            raise CorruptLogError(path, header.position, "truncated message inside a wrapper")
        inner_offset, inner_size = struct.unpack_from(">qi", inner, inner_pos)
        end = inner_pos + LOG_OVERHEAD + inner_size
        if inner_size < MIN_LEGACY_MESSAGE_SIZE[0] or end > len(inner):
            raise CorruptLogError(
                path, header.position,
                f"message inside wrapper at offset {header.base_offset} has impossible size {inner_size}",
            )
        inner_msg = inner[inner_pos + LEGACY_CRC_START : end]
        stored_crc = struct.unpack_from(">I", inner, inner_pos + LOG_OVERHEAD)[0]
        if verify and crc32(inner_msg) != stored_crc:
            raise CorruptLogError(
                path, header.position,
                f"checksum mismatch in message {inner_offset} inside wrapper at offset "
                f"{header.base_offset}",
            )
        inner_magic = inner_msg[0]
        ikey, ivalue, its = _legacy_fields(inner_msg, inner_magic, path, header.position)
        messages.append((inner_offset, its, ikey, ivalue))
        inner_pos = end
    if not messages:
        # Kafka refuses a compressed wrapper whose message set is empty.
        raise CorruptLogError(
            path, header.position,
            f"compressed wrapper message at offset {header.base_offset} holds no messages",
        )
    if header.magic == 1:
        # Inner offsets are relative; the wrapper carries the absolute last offset
        # (Kafka's reader takes a wrapper offset of 0 as "inner offsets are absolute").
        shift = header.last_offset - messages[-1][0] if header.last_offset else 0
        if shift < 0:
            raise CorruptLogError(
                path, header.position,
                f"wrapper offset {header.last_offset} is below the last relative offset "
                f"{messages[-1][0]} of its messages",
            )
    else:
        shift = 0
    previous = lowest_offset - 1 if lowest_offset is not None else None
    # A magic-1 wrapper's offset of 0 leaves the inner offsets absolute, with no bound.
    highest = header.last_offset if header.magic == 0 or header.last_offset else MAX_OFFSET
    kept = 0
    for inner_offset, its, ikey, ivalue in messages:
        offset = inner_offset + shift
        if (previous is not None and offset <= previous) or offset > highest:
            reached = ("the wrapper's offset" if offset > highest else
                       f"{previous + 1}, where the offsets had reached")
            raise CorruptLogError(
                path, header.position,
                f"message offset {offset} inside the wrapper at offset {header.last_offset} "
                f"is out of order (must increase, up to the wrapper's offset; "
                f"compared with {reached})")
        previous = offset
        if header.magic == 1 and ts_type == LOG_APPEND_TIME:
            its = timestamp
        if min_offset <= offset < end_offset:
            sink.add(offset, its if header.magic == 1 else -1, ts_type, ikey, ivalue, [])
            kept += 1
    return kept, messages[0][0] + shift


def legacy_first_offset(view, pos: int, header: BatchHeader, path=None,
                        max_inflated: int = compression.DEFAULT_MAX_INFLATED_BYTES) -> int:
    """First inner offset of a compressed legacy wrapper (decompresses it)."""
    counter = _FirstOffset()
    decode_legacy_message(view, pos, header, counter, -MAX_OFFSET - 1, MAX_OFFSET + 1, False,
                          path, max_inflated)
    return counter.first if counter.first is not None else header.base_offset


class _FirstOffset:
    first = None

    def add(self, offset, *_):
        if self.first is None:
            self.first = offset


def _legacy_fields(message, magic: int, path, position):
    """(key, value, timestamp) of a message that starts at its magic byte."""
    pos = 2 if magic == 0 else 10
    timestamp = -1
    if magic == 1:
        (timestamp,) = V1_TIMESTAMP.unpack_from(message, 2)
    try:
        (key_len,) = struct.unpack_from(">i", message, pos)
        pos += 4
        key = None
        if key_len >= 0:
            key = bytes(message[pos : pos + key_len])
            if len(key) != key_len:
                raise ValueError("key runs past the message")
            pos += key_len
        (value_len,) = struct.unpack_from(">i", message, pos)
        pos += 4
        value = None
        if value_len >= 0:
            value = bytes(message[pos : pos + value_len])
            if len(value) != value_len:
                raise ValueError("value runs past the message")
            pos += value_len
    except (struct.error, ValueError) as exc:
        raise CorruptLogError(path, position, f"malformed message of magic {magic}: {exc}") from exc
    return key, value, timestamp
