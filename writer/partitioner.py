"""Kafka's default producer partitioning, over whole Arrow columns.

Rows with a key go to `toPositive(murmur2(key)) % numPartitions` (Kafka's
`BuiltInPartitioner.partitionForKey`: murmur2 with seed 0x9747b28c, toPositive = x &
0x7fffffff). Rows without a key and without an explicit partition are spread the way
Kafka's sticky partitioner spreads them, made deterministic: they stay on one partition
until `batch.size` bytes went there, then move on to the next partition round-robin.
"""
from typing import Optional

import numpy as np
import pyarrow as pa

from ..format.arrow import as_binary, as_binary_column, binary_offsets, int64_array, validity
from ..format.fastpath import compiled_key_hasher

SEED = 0x9747B28C
M = 0x5BD1E995
_M32 = np.uint32(M)
# Keys longer than this are hashed one at a time; shorter ones column-wise.
_VECTOR_MAX_KEY = 1024


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` as a signed 32-bit int."""
    length = len(data)
    h = (SEED ^ length) & 0xFFFFFFFF
    words = length // 4
    for i in range(words):
        j = 4 * i
        k = data[j] | (data[j + 1] << 8) | (data[j + 2] << 16) | (data[j + 3] << 24)
        k = (k * M) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * M) & 0xFFFFFFFF
        h = ((h * M) & 0xFFFFFFFF) ^ k
    tail = length & 3
    base = words * 4
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * M) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * M) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_array(keys: pa.Array) -> np.ndarray:
    """murmur2 of every value of a binary array, as uint32 (nulls hash as empty keys)."""
    keys = as_binary(keys)
    n = len(keys)
    offsets = binary_offsets(keys)
    data_buffer = keys.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None and n else \
        np.zeros(0, dtype=np.uint8)
    lengths = offsets[1:] - offsets[:-1]
    if keys.null_count:
        lengths = np.where(validity(keys), lengths, 0)
    starts = offsets[:-1]
    h = (np.uint32(SEED) ^ lengths.astype(np.uint32)).astype(np.uint32)
    long_rows = np.nonzero(lengths > _VECTOR_MAX_KEY)[0]
    words = np.where(lengths > _VECTOR_MAX_KEY, 0, lengths // 4)
    # Rows sorted by word count, longest first: the rows still hashing at word j are a
    # prefix of this order.
    order = np.argsort(-words, kind="stable")
    sorted_words = words[order]
    max_words = int(sorted_words[0]) if n else 0
    # Rows with more than j words: how many of sorted_words exceed j.
    active_counts = np.searchsorted(-sorted_words, -(np.arange(max_words) + 1), side="right")
    # Every 4 bytes starting at any position, as a row of a (len - 3, 4) strided view:
    # gathering rows of it and viewing them as little-endian uint32 reads the words.
    windows = np.lib.stride_tricks.as_strided(data, shape=(max(len(data) - 3, 0), 4),
                                              strides=(1, 1), writeable=False)
    with np.errstate(over="ignore"):
        for j in range(max_words):
            rows = order[: active_counts[j]]
            k = np.ascontiguousarray(windows[starts[rows] + 4 * j]).view("<u4").ravel()
            k *= _M32
            k ^= k >> np.uint32(24)
            k *= _M32
            h[rows] = (h[rows] * _M32) ^ k
        tail = (lengths & 3).astype(np.int64)
        base = starts + (lengths - tail)
        short = lengths <= _VECTOR_MAX_KEY
        for size, shift in ((3, 16), (2, 8), (1, 0)):
            rows = np.nonzero((tail >= size) & short)[0]
            if len(rows):
                h[rows] ^= data[base[rows] + size - 1].astype(np.uint32) << np.uint32(shift)
        rows = np.nonzero((tail > 0) & short)[0]
        h[rows] *= _M32
        h ^= h >> np.uint32(13)
        h *= _M32
        h ^= h >> np.uint32(15)
    for row in long_rows.tolist():
        start = int(starts[row])
        h[row] = murmur2(bytes(data[start : start + int(lengths[row])])) & 0xFFFFFFFF
    return h


def key_hashes(keys: pa.Array, use_fast_path: bool = True) -> np.ndarray:
    """murmur2 of every key as uint32 (nulls as empty keys): compiled beside the encoder
    when it is built (fastpath.compiled_key_hasher), else murmur2_array, its twin."""
    compiled = compiled_key_hasher(use_fast_path)
    return (compiled or murmur2_array)(keys)


def partitions_from_hashes(hashes: np.ndarray, num_partitions: int) -> np.ndarray:
    """Kafka's default partitioner: the key's murmur2, its sign bit cleared, modulo the
    partition count (int64)."""
    return (hashes & np.uint32(0x7FFFFFFF)).astype(np.int64) % num_partitions


def partitions_for_keys(keys: pa.Array, num_partitions: int,
                        use_fast_path: bool = True) -> np.ndarray:
    """Kafka's partition for each key (int64); meaningless for null keys. The compiled
    hasher gives them in the same pass as the hashes."""
    compiled = compiled_key_hasher(use_fast_path)
    if compiled is not None:
        return compiled(keys, num_partitions)
    return partitions_from_hashes(murmur2_array(keys), num_partitions)


class StickyRoundRobin:
    """Where rows without key and partition go: `batch_size` bytes per partition in turn.

    State carries over between calls, so a task's rows spread the same way however its
    input is chunked.
    """

    def __init__(self, num_partitions: int, batch_size: int, start: int = 0):
        self.num_partitions = num_partitions
        self.batch_size = max(1, batch_size)
        self.current = start % num_partitions
        self.filled = 0  # bytes already sent to the current partition

    def assign(self, sizes: np.ndarray) -> np.ndarray:
        """Partition of each row, given each row's approximate size in bytes."""
        sizes = np.asarray(sizes, dtype=np.int64)
        if not len(sizes):
            return np.zeros(0, dtype=np.int64)
        before = np.empty(len(sizes), dtype=np.int64)
        before[0] = 0
        np.cumsum(sizes[:-1], out=before[1:])
        before += self.filled
        # A row opens a new partition's turn when the one before it filled the turn.
        turns = before // self.batch_size
        partitions = (self.current + turns) % self.num_partitions
        total = int(before[-1] + sizes[-1])
        self.current = int((self.current + total // self.batch_size) % self.num_partitions)
        self.filled = total % self.batch_size
        return partitions


def assign_partitions(keys: pa.Array, explicit: Optional[np.ndarray], num_partitions: int,
                      sticky: StickyRoundRobin, sizes: np.ndarray) -> np.ndarray:
    """Partition of each row: the explicit one, else by key, else sticky round-robin.

    `explicit` holds -1 where the row gave no partition.
    """
    n = len(keys)
    result = np.full(n, -1, dtype=np.int64) if explicit is None else explicit.copy()
    need = result < 0
    if not need.any():
        return result
    keys = as_binary_column(keys)
    has_key = validity(keys)
    by_key = need & has_key
    if by_key.any():
        if by_key.all():
            result = partitions_for_keys(keys, num_partitions)
        else:
            rows = np.nonzero(by_key)[0]
            result[rows] = partitions_for_keys(keys.take(int64_array(rows)), num_partitions)
    keyless = need & ~has_key
    if keyless.any():
        rows = np.nonzero(keyless)[0]
        result[rows] = sticky.assign(sizes[rows])
    return result
