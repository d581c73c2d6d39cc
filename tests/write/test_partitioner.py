"""Kafka's default partitioning (writer/partitioner.py)."""
import random

import numpy as np
import pyarrow as pa

from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from segmentlog_datasource.writer.partitioner import (
    StickyRoundRobin, assign_partitions, murmur2, murmur2_array, partitions_for_keys,
)

# Kafka's UtilsTest.testMurmur2 vectors (signed 32-bit results)
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def test_murmur2_matches_kafka_test_vectors():
    for key, expected in KAFKA_VECTORS.items():
        assert murmur2(key) == expected
    column = murmur2_array(pa.array(list(KAFKA_VECTORS)))
    assert [int(h) - (1 << 32) if h >= 1 << 31 else int(h) for h in column] == \
        list(KAFKA_VECTORS.values())


def test_column_murmur2_matches_kafka_python_for_all_lengths():
    rng = random.Random(3)
    lengths = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 63, 64, 255, 1023, 1024, 1025, 5000]
    keys = [bytes(rng.getrandbits(8) for _ in range(rng.choice(lengths))) for _ in range(2000)]
    hashes = murmur2_array(pa.array(keys))
    for key, value in zip(keys, hashes.tolist()):
        assert value == kafka_python_murmur2(key) & 0xFFFFFFFF
    # a sliced array and string keys hash the same bytes
    assert murmur2_array(pa.array(keys).slice(500, 100)).tolist() == hashes[500:600].tolist()
    words = ["caf\u00e9", "k-1", ""]
    assert murmur2_array(pa.array(words)).tolist() == \
        [kafka_python_murmur2(w.encode()) & 0xFFFFFFFF for w in words]


def test_partition_for_key_is_kafkas():
    keys = [f"user-{i}".encode() for i in range(5000)]
    for n in (1, 3, 7, 64):
        expected = [(kafka_python_murmur2(k) & 0x7FFFFFFF) % n for k in keys]
        assert partitions_for_keys(pa.array(keys), n).tolist() == expected


def test_keyless_rows_rotate_after_batch_size_bytes():
    sticky = StickyRoundRobin(4, batch_size=1000, start=1)
    first = sticky.assign(np.full(25, 100))  # 2500 bytes: 10 rows per partition turn
    assert first.tolist() == [1] * 10 + [2] * 10 + [3] * 5
    second = sticky.assign(np.full(10, 100))  # state carries over between calls
    assert second.tolist() == [3] * 5 + [0] * 5
    spread = StickyRoundRobin(4, batch_size=1000).assign(np.full(4000, 100))
    assert np.bincount(spread, minlength=4).tolist() == [1000] * 4


def test_assign_partitions_explicit_then_key_then_sticky():
    keys = pa.array([b"a", None, b"b", None, b"c"])
    explicit = np.array([2, 1, -1, -1, -1])
    sticky = StickyRoundRobin(3, batch_size=10, start=0)
    result = assign_partitions(keys, explicit, 3, sticky, np.full(5, 4))
    assert result[0] == 2 and result[1] == 1
    assert result[2] == (kafka_python_murmur2(b"b") & 0x7FFFFFFF) % 3
    assert result[4] == (kafka_python_murmur2(b"c") & 0x7FFFFFFF) % 3
    assert result[3] == 0


def test_kafka_python_murmur2_matches_kafka_vectors():
    # Kafka's UtilsTest vectors: murmur2 as a signed int; kafka-python returns it unsigned.
    vectors = {b"21": -973932308, b"foobar": -790332482, b"abc": 479470107}
    for key, value in vectors.items():
        assert kafka_python_murmur2(key) & 0xFFFFFFFF == value & 0xFFFFFFFF
