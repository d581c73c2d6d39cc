"""Record batches and legacy message sets: header parsing and record decoding.

Every entry in a segment starts with the same 17 bytes: int64 offset, int32 length
(bytes after this field), 4 bytes that are the partition leader epoch (magic 2) or the
CRC (magic 0/1), then int8 magic. Magic 2 batches are checked with CRC32C over
everything from the attributes on; magic 0/1 messages with CRC32 from the magic on.
"""
import struct
from dataclasses import dataclass
from typing import Optional

from . import compression
from .crc import crc32, crc32c
from .errors import CorruptLogError, UnsupportedFormatError

LOG_OVERHEAD = 12  # int64 offset + int32 length
V2_HEADER = struct.Struct(">qiiBIhiqqqhii")
V2_HEADER_SIZE = V2_HEADER.size  # 61
V2_CRC_START = 21  # attributes onwards
V0_HEADER = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
V1_TIMESTAMP = struct.Struct(">q")
MAX_BATCH_SIZE = 2**31 - 1 - LOG_OVERHEAD
MIN_LEGACY_MESSAGE_SIZE = {0: 14, 1: 22}  # crc..value length with empty key and value

NO_TIMESTAMP_TYPE, CREATE_TIME, LOG_APPEND_TIME = -1, 0, 1
TIMESTAMP_TYPE_NAMES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

CONTROL_ABORT, CONTROL_COMMIT = 0, 1


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
    of `view`; `view` need only hold the header bytes). Returns None when fewer bytes
    remain than the entry declares (a torn tail); the caller decides whether that is
    acceptable. Raises on impossible lengths or an unknown magic.
    """
    if remaining is None:
        remaining = len(view) - pos
    if remaining < LOG_OVERHEAD + 5:
        return None
    offset, length, epoch_or_crc, magic = struct.unpack_from(">qiIb", view, pos)
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
            attributes, crc, epoch if epoch < 2**31 else epoch - 2**32, max_ts, base_ts,
            producer_id, producer_epoch, base_sequence, count,
        )
    if magic in (0, 1):
        if length < MIN_LEGACY_MESSAGE_SIZE[magic]:
            raise CorruptLogError(
                path, file_position, f"message of magic {magic} has impossible size {length}"
            )
        if LOG_OVERHEAD + length > remaining:
            return None
        attributes = view[pos + 17]
        timestamp = -1
        if magic == 1:
            (timestamp,) = V1_TIMESTAMP.unpack_from(view, pos + 18)
        return BatchHeader(
            file_position, offset, offset, LOG_OVERHEAD + length, magic, attributes,
            epoch_or_crc, max_timestamp=timestamp, base_timestamp=timestamp,
        )
    raise CorruptLogError(path, file_position, f"unknown magic byte {magic} at offset {offset}")


def verify_checksum(view, pos: int, header: BatchHeader, path=None) -> None:
    if header.magic == 2:
        actual = crc32c(view[pos + V2_CRC_START : pos + header.size])
    else:
        actual = crc32(view[pos + 16 : pos + header.size])
    if actual != header.crc:
        raise CorruptLogError(
            path, header.position,
            f"checksum mismatch in {'record batch' if header.magic == 2 else 'message'} "
            f"at offset {header.base_offset}: stored {header.crc:#010x}, computed {actual:#010x}",
        )


# ---------------------------------------------------------------------------- varints

def read_varint(buf, pos: int):
    """Zig-zag varint (int32 or int64 range) at `pos`: (value, next position)."""
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint is longer than 10 bytes")


def write_varint(value: int, out: bytearray) -> None:
    value = (value << 1) ^ (value >> 63)
    value &= 0xFFFFFFFFFFFFFFFF
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


# ------------------------------------------------------------------ magic 2 records

def batch_records_payload(view, pos: int, header: BatchHeader, path=None):
    """The records section of a magic-2 batch, decompressed."""
    payload = view[pos + V2_HEADER_SIZE : pos + header.size]
    codec = header.compression
    if codec == compression.NONE:
        return payload
    try:
        return compression.decompress(codec, payload)
    except UnsupportedFormatError:
        raise
    except Exception as exc:
        raise CorruptLogError(
            path, header.position,
            f"cannot decompress {compression.codec_name(codec)} batch at offset "
            f"{header.base_offset}: {exc}",
        ) from exc


def decode_v2_records(data, count: int, header: BatchHeader, sink, min_offset: int,
                      end_offset: int, path=None) -> int:
    """Decode `count` records from `data` into `sink` (pure Python).

    Only records with min_offset <= offset < end_offset are kept. Returns rows kept.
    """
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    ts_type = header.timestamp_type
    append_time = header.max_timestamp if ts_type == LOG_APPEND_TIME else None
    pos = 0
    size = len(data)
    kept = 0
    add = sink.add
    try:
        for _ in range(count):
            length, pos = read_varint(data, pos)
            record_end = pos + length
            if length < 0 or record_end > size:
                raise ValueError(f"record length {length} runs past the batch")
            pos += 1  # attributes, unused
            ts_delta, pos = read_varint(data, pos)
            offset_delta, pos = read_varint(data, pos)
            key_len, pos = read_varint(data, pos)
            if key_len >= 0:
                key = bytes(data[pos : pos + key_len])
                pos += key_len
            else:
                key = None
            value_len, pos = read_varint(data, pos)
            if value_len >= 0:
                value = bytes(data[pos : pos + value_len])
                pos += value_len
            else:
                value = None
            header_count, pos = read_varint(data, pos)
            headers = []
            for _ in range(header_count):
                hkey_len, pos = read_varint(data, pos)
                if hkey_len < 0:
                    raise ValueError("header key has negative length")
                hkey = bytes(data[pos : pos + hkey_len]).decode("utf-8")
                pos += hkey_len
                hvalue_len, pos = read_varint(data, pos)
                if hvalue_len >= 0:
                    hvalue = bytes(data[pos : pos + hvalue_len])
                    pos += hvalue_len
                else:
                    hvalue = None
                headers.append((hkey, hvalue))
            if pos != record_end:
                raise ValueError(f"record fields end at {pos}, its length says {record_end}")
            offset = base_offset + offset_delta
            if min_offset <= offset < end_offset:
                add(offset, base_ts + ts_delta if append_time is None else append_time,
                    ts_type, key, value, headers)
                kept += 1
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise CorruptLogError(
            path, header.position,
            f"malformed record in batch at offset {base_offset}: {exc}",
        ) from exc
    if pos != size:
        raise CorruptLogError(
            path, header.position,
            f"batch at offset {base_offset} has {size - pos} bytes after its {count} records",
        )
    return kept


def control_record_type(data, header: BatchHeader, path=None) -> Optional[int]:
    """The type of a control batch's record (0 ABORT, 1 COMMIT), from its key."""
    try:
        length, pos = read_varint(data, 0)
        pos += 1
        _, pos = read_varint(data, pos)
        _, pos = read_varint(data, pos)
        key_len, pos = read_varint(data, pos)
        if key_len < 4:
            return None
        _version, control_type = struct.unpack_from(">hh", data, pos)
        return control_type
    except (ValueError, IndexError, struct.error) as exc:
        raise CorruptLogError(
            path, header.position, f"malformed control record at offset {header.base_offset}"
        ) from exc


# ---------------------------------------------------------- magic 0/1 message sets

def decode_legacy_message(view, pos: int, header: BatchHeader, sink, min_offset: int,
                          end_offset: int, verify: bool, path=None) -> int:
    """Decode one shallow magic-0/1 message, unwrapping compressed message sets."""
    message = view[pos + 16 : pos + header.size]  # from magic on
    key, value, timestamp = _legacy_fields(message, header.magic, path, header.position)
    codec = header.attributes & ATTR_COMPRESSION_MASK
    ts_type = header.timestamp_type
    if codec == compression.NONE:
        if min_offset <= header.base_offset < end_offset:
            sink.add(header.base_offset, timestamp, ts_type, key, value, [])
            return 1
        return 0
    if value is None:
        raise CorruptLogError(path, header.position, "compressed wrapper message has no value")
    try:
        inner = memoryview(compression.decompress(codec, value))
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
        inner_msg = inner[inner_pos + 16 : end]
        stored_crc = struct.unpack_from(">I", inner, inner_pos + 12)[0]
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
    kept = 0
    for inner_offset, its, ikey, ivalue in messages:
        offset = inner_offset + shift
        if header.magic == 1 and ts_type == LOG_APPEND_TIME:
            its = timestamp
        if min_offset <= offset < end_offset:
            sink.add(offset, its if header.magic == 1 else -1, ts_type, ikey, ivalue, [])
            kept += 1
    return kept


def legacy_first_offset(view, pos: int, header: BatchHeader, path=None) -> int:
    """First inner offset of a compressed legacy wrapper (decompresses it)."""
    counter = _FirstOffset()
    decode_legacy_message(view, pos, header, counter, -(2**63), 2**63, False, path)
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
