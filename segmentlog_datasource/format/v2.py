"""Magic-2 record batches: the records section, decompressed and decoded (pure Python).

Encoding is in `v2_encode`; both follow the header layout in `layout`.
"""
from ..errors import CorruptLogError, UnsupportedFormatError
from . import compression
from .entries import BatchHeader
from .layout import LOG_APPEND_TIME, NO_SEQUENCE, V2_HEADER_SIZE
from .varint import read_varint

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def batch_records_payload(view, pos: int, header: BatchHeader, path=None,
                          max_inflated: int = compression.DEFAULT_MAX_INFLATED_BYTES):
    """The records section of a magic-2 batch, decompressed (to at most `max_inflated`
    bytes: past that, the batch is reported as damaged)."""
    payload = view[pos + V2_HEADER_SIZE : pos + header.size]
    codec = header.compression
    if codec == compression.NONE:
        return payload
    if codec not in compression.CODEC_NAMES:
        raise CorruptLogError(
            path, header.position,
            f"record batch at offset {header.base_offset} names unknown compression codec "
            f"id {codec}")
    try:
        return compression.decompress(codec, payload, max_inflated)
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
                if append_time is None:
                    timestamp = base_ts + ts_delta
                    if not _INT64_MIN <= timestamp <= _INT64_MAX:
                        # Kafka's long arithmetic (and the compiled decoder) wrap.
                        timestamp = (timestamp - _INT64_MIN) % (1 << 64) + _INT64_MIN
                else:
                    timestamp = append_time
                add(offset, timestamp, ts_type, key, value, headers)
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


def _java_int(value: int) -> int:
    """`value` wrapped as Java's int arithmetic leaves it."""
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences go on from 0 past
    Integer.MAX_VALUE (arrow.record_sequences is its vectorized twin)."""
    int32_max = (1 << 31) - 1
    if sequence > _java_int(int32_max - increment):
        return _java_int(increment - _java_int(int32_max - sequence) - 1)
    return _java_int(sequence + increment)


def record_sequence(base_sequence: int, offset_delta: int) -> int:
    """A record's sequence, as Kafka's DefaultRecord reads it (-1: none)."""
    if base_sequence < 0:
        return NO_SEQUENCE
    return increment_sequence(base_sequence, _java_int(offset_delta))


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """A batch's lastSequence, as DefaultRecordBatch.lastSequence() gives it."""
    if base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return increment_sequence(base_sequence, _java_int(last_offset_delta))
