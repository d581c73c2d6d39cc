"""Kafka's zig-zag varints: one value at a time (decoding) and whole columns (encoding)."""
from typing import List, Sequence

import numpy as np
import pyarrow as pa

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


# Zig-zag values below 2**(7k) take k varint bytes.
_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)
_POSITIVE_LIMITS = np.array([1 << (7 * k - 1) for k in range(1, 10)], dtype=np.int64)


def zigzag(values) -> np.ndarray:
    """Zig-zag encode int64 values into uint64 (as Kafka's varint/varlong do)."""
    v = np.asarray(values, dtype=np.int64)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def varint_sizes(values) -> np.ndarray:
    """Bytes each signed value takes as a zig-zag varint (1..10), as int64."""
    return zigzag_sizes(zigzag(values))


def zigzag_sizes(encoded: np.ndarray) -> np.ndarray:
    return np.searchsorted(_VARINT_LIMITS, encoded, side="right").astype(np.int64) + 1


def varint_concat(fields: Sequence) -> pa.BinaryArray:
    """One binary value per row: the zig-zag varints of `fields`, concatenated.

    Each field is an int64 array (varint-encoded) or a `bytes` constant written as is.
    The bytes of all rows are laid out in a (rows x bytes) matrix with a validity mask
    and compacted in one step, row-major, which is exactly the concatenation.
    """
    n = None
    for field in fields:
        if not isinstance(field, (bytes, bytearray)):
            n = len(field)
            break
    if n is None:
        raise ValueError("varint_concat needs at least one array field")
    columns: List[np.ndarray] = []
    masks: List[np.ndarray] = []
    all_true = None
    for field in fields:
        if isinstance(field, (bytes, bytearray)):
            if all_true is None:
                all_true = np.ones(n, dtype=bool)
            for byte in field:
                columns.append(np.full(n, byte, dtype=np.uint8))
                masks.append(all_true)
            continue
        encoded = zigzag(field)
        sizes = zigzag_sizes(encoded)
        width = int(sizes.max()) if n else 1
        for j in range(width):
            chunk = ((encoded >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8)
            more = sizes > j + 1
            chunk |= more.astype(np.uint8) << 7
            columns.append(chunk)
            masks.append(sizes > j)
    matrix = np.stack(columns, axis=1)
    mask = np.stack(masks, axis=1)
    data = matrix[mask]
    lengths = mask.sum(axis=1, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def positive_varint_sizes(values: np.ndarray) -> np.ndarray:
    """Zig-zag varint sizes of values known to be >= 0 (zig-zag of x is 2x)."""
    return np.searchsorted(_POSITIVE_LIMITS, values, side="right") + 1


def signed_varint_sizes(values: np.ndarray) -> np.ndarray:
    """Zig-zag varint sizes of int64 values: x and -x-1 (= x ^ -1) take the same bytes."""
    return np.searchsorted(_POSITIVE_LIMITS, values ^ (values >> 63), side="right") + 1
