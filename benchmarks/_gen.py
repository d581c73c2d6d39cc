"""Synthetic Kafka log directories for benchmarks.

Batches are built with kafka-python's DefaultRecordBatchBuilder (a test/benchmark-only
dependency) and laid out as a broker lays them out: segments rolled at `segment_bytes`,
named after their first offset, each with an offset index and a time index written the
way the broker writes them (an entry for an append once more than index.interval.bytes
were appended since the last entry; a final time index entry when the segment closes).
"""
import os
import random
import struct

from kafka.record.default_records import DefaultRecordBatchBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
INDEX_INTERVAL_BYTES = 4096
OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
BASE_TIMESTAMP_MS = 1_700_000_000_000
_WORDS = (b"alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
          b"november oscar papa quebec romeo sierra tango uniform victor whiskey xray "
          b"yankee zulu").split()


def _text_pool(size: int, seed: int) -> bytes:
    """Word salad: compresses about as well as typical JSON payloads do."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        out += rng.choice(_WORDS) + b" "
    return bytes(out[:size])


class _SegmentWriter:
    def __init__(self, directory: str, base_offset: int):
        name = f"{base_offset:020d}"
        self.base_offset = base_offset
        self.log = open(os.path.join(directory, name + ".log"), "wb")
        self.index = open(os.path.join(directory, name + ".index"), "wb")
        self.time_index = open(os.path.join(directory, name + ".timeindex"), "wb")
        self.size = 0
        self.bytes_since_entry = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.last_time_entry = -1

    def append(self, batch: bytes, last_offset: int, max_timestamp: int):
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_entry > INDEX_INTERVAL_BYTES:
            self.index.write(OFFSET_ENTRY.pack(last_offset - self.base_offset, self.size))
            self._time_entry()
            self.bytes_since_entry = 0
        self.log.write(batch)
        self.size += len(batch)
        self.bytes_since_entry += len(batch)

    def _time_entry(self):
        if self.max_timestamp > self.last_time_entry:
            self.time_index.write(TIME_ENTRY.pack(
                self.max_timestamp, self.offset_of_max_timestamp - self.base_offset))
            self.last_time_entry = self.max_timestamp

    def close(self):
        self._time_entry()
        for handle in (self.log, self.index, self.time_index):
            handle.close()


def build_batch(base_offset: int, records, codec: str = "none", leader_epoch: int = 0) -> bytes:
    """One magic-2 batch of (timestamp_ms, key, value, headers) records."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=CODECS[codec], is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1,
    )
    for delta, (timestamp, key, value, headers) in enumerate(records):
        builder.append(delta, timestamp=timestamp, key=key, value=value, headers=headers)
    batch = builder.build()
    # Base offset and leader epoch are the broker's to set; neither is under the CRC.
    struct.pack_into(">q", batch, 0, base_offset)
    struct.pack_into(">i", batch, 12, leader_epoch)
    return bytes(batch)


def generate_log(logdir: str, topic: str, partitions: int, records_per_partition: int,
                 value_size: int, codec: str = "none", records_per_batch: int = 500,
                 segment_bytes: int = 1 << 30, key_cardinality: int = 10_000,
                 seed: int = 0) -> str:
    """Write `partitions` partition directories `<topic>-<n>` under `logdir`.

    Each holds `records_per_partition` records with keys b"key-<n>" and compressible
    `value_size`-byte values, one CreateTime millisecond apart, in batches of
    `records_per_batch` compressed with `codec`. Returns `logdir`.
    """
    pool = _text_pool(1 << 16, seed)
    for partition in range(partitions):
        directory = os.path.join(logdir, f"{topic}-{partition}")
        os.makedirs(directory, exist_ok=True)
        segment = None
        offset = 0
        while offset < records_per_partition:
            count = min(records_per_batch, records_per_partition - offset)
            records = []
            for i in range(offset, offset + count):
                start = (i * 7919) % (len(pool) - value_size) if value_size < len(pool) else 0
                value = (b"%d:" % i + pool[start:start + value_size])[:value_size]
                records.append((BASE_TIMESTAMP_MS + i, b"key-%d" % (i % key_cardinality),
                                value, []))
            batch = build_batch(offset, records, codec)
            if segment is not None and segment.size + len(batch) > segment_bytes:
                segment.close()
                segment = None
            if segment is None:
                segment = _SegmentWriter(directory, offset)
            segment.append(batch, offset + count - 1, BASE_TIMESTAMP_MS + offset + count - 1)
            offset += count
        if segment is not None:
            segment.close()
    return logdir
