"""Independent checks for written logs, shared by the writer tests.

Nothing here uses segmentlog's own decoder: records are decoded with kafka-python's
record reader, and index lookups are done from the raw index bytes the way Kafka's
OffsetIndex/TimeIndex and LogSegment do them.
"""
import bisect
import os
import re
import struct

from kafka.partitioner.default import murmur2 as kafka_python_murmur2
from kafka.record.memory_records import MemoryRecords

SEGMENT = re.compile(r"^(\d{20})\.log$")
PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
BATCH_HEAD = struct.Struct(">qiib")  # baseOffset, batchLength, leaderEpoch, magic
V2 = struct.Struct(">qiiBIhiqqqhii")


def kafka_partition(key: bytes, num_partitions: int) -> int:
    """Kafka's default partition for a key, computed with kafka-python's murmur2."""
    return (kafka_python_murmur2(key) & 0x7FFFFFFF) % num_partitions


def segments_of(partition_dir):
    return sorted(int(m.group(1)) for m in map(SEGMENT.match, os.listdir(partition_dir)) if m)


def read_batches(path):
    """Raw v2 batch headers of a segment file, parsed with struct."""
    with open(path, "rb") as handle:
        data = handle.read()
    batches = []
    pos = 0
    while pos < len(data):
        fields = V2.unpack_from(data, pos)
        base, length = fields[0], fields[1]
        batches.append({
            "position": pos, "base_offset": base, "size": 12 + length, "epoch": fields[2],
            "magic": fields[3], "crc": fields[4], "attributes": fields[5],
            "last_offset": base + fields[6], "base_timestamp": fields[7],
            "max_timestamp": fields[8], "producer_id": fields[9], "producer_epoch": fields[10],
            "base_sequence": fields[11], "record_count": fields[12],
        })
        pos += 12 + length
    assert pos == len(data), f"{path}: batches do not end at the end of the file"
    return batches


def decode_partition(partition_dir):
    """All records of a partition directory via kafka-python, checking every CRC, the
    contiguity of offsets and that each segment starts at its file name's offset.

    Returns [(offset, timestamp, timestamp_type, key, value, headers)].
    """
    records = []
    expected = None
    for base in segments_of(partition_dir):
        path = os.path.join(partition_dir, f"{base:020d}.log")
        with open(path, "rb") as handle:
            data = handle.read()
        memory = MemoryRecords(data)
        first = True
        while memory.has_next():
            batch = memory.next_batch()
            assert batch.magic == 2
            assert batch.validate_crc(), f"bad CRC in {path} at offset {batch.base_offset}"
            if first:
                assert batch.base_offset == base, (path, batch.base_offset)
                first = False
            if expected is not None:
                assert batch.base_offset == expected, (path, batch.base_offset, expected)
            for record in batch:
                records.append((record.offset, record.timestamp, batch.timestamp_type,
                                record.key, record.value, [tuple(h) for h in record.headers]))
            expected = batch.base_offset + batch.last_offset_delta + 1
    offsets = [r[0] for r in records]
    if offsets:
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    return records


def decode_logdir(logdir):
    """{(topic, partition): records} for every partition directory (dot-names skipped)."""
    result = {}
    for name in sorted(os.listdir(logdir)):
        match = PARTITION_DIR.match(name)
        if name.startswith(".") or not match or not os.path.isdir(os.path.join(logdir, name)):
            continue
        result[(match.group(1), int(match.group(2)))] = decode_partition(os.path.join(logdir, name))
    return result


# -------------------------------------------------------------- Kafka-style lookups

def _index_entries(path, entry, base):
    with open(path, "rb") as handle:
        data = handle.read()
    assert len(data) % entry.size == 0, f"{path} is not trimmed to whole entries"
    return [entry.unpack_from(data, i) for i in range(0, len(data), entry.size)]


def offset_index(partition_dir, base):
    entries = _index_entries(os.path.join(partition_dir, f"{base:020d}.index"),
                             struct.Struct(">ii"), base)
    return [(base + rel, pos) for rel, pos in entries]


def time_index(partition_dir, base):
    entries = _index_entries(os.path.join(partition_dir, f"{base:020d}.timeindex"),
                             struct.Struct(">qi"), base)
    return [(ts, base + rel) for ts, rel in entries]


def kafka_lookup_offset(partition_dir, target):
    """(segment base, batch) holding `target`, found as Kafka's read path finds it:
    the segment with the largest base <= target, the offset index's largest entry <=
    target, then a scan of batch headers from that position."""
    bases = segments_of(partition_dir)
    base = bases[bisect.bisect_right(bases, target) - 1]
    entries = offset_index(partition_dir, base)
    i = bisect.bisect_right([o for o, _ in entries], target) - 1
    position = entries[i][1] if i >= 0 else 0
    path = os.path.join(partition_dir, f"{base:020d}.log")
    with open(path, "rb") as handle:
        handle.seek(position)
        scanned = 0
        while True:
            head = handle.read(V2.size)
            if len(head) < V2.size:
                return base, None, scanned
            fields = V2.unpack(head)
            last = fields[0] + fields[6]
            scanned += 1
            if last >= target:
                return base, {"base_offset": fields[0], "last_offset": last,
                              "position": position}, scanned
            position += 12 + fields[1]
            handle.seek(position)


def kafka_lookup_time(partition_dir, target_ts, records_by_offset):
    """First offset with timestamp >= target_ts, found as Kafka's fetchOffsetByTimestamp:
    the first segment whose largest time-index timestamp reaches the target, its time
    index entry below the target, the offset index position for that offset, then a scan."""
    for base in segments_of(partition_dir):
        entries = time_index(partition_dir, base)
        if entries and entries[-1][0] < target_ts:
            continue
        timestamps = [ts for ts, _ in entries]
        i = bisect.bisect_right(timestamps, target_ts) - 1
        start_offset = entries[i][1] if i >= 0 else base
        oentries = offset_index(partition_dir, base)
        j = bisect.bisect_right([o for o, _ in oentries], start_offset) - 1
        position = oentries[j][1] if j >= 0 else 0
        for batch in read_batches(os.path.join(partition_dir, f"{base:020d}.log")):
            if batch["position"] < position or batch["max_timestamp"] < target_ts:
                continue
            for offset in range(batch["base_offset"], batch["last_offset"] + 1):
                if records_by_offset[offset] >= target_ts:
                    return offset
    return None


def check_partition_indexes(partition_dir, index_interval_bytes=4096):
    """The indexes of every segment agree with its batches and with Kafka-style lookups."""
    records = decode_partition(partition_dir)
    timestamps = {r[0]: r[1] for r in records}
    bases = segments_of(partition_dir)
    for base in bases:
        batches = read_batches(os.path.join(partition_dir, f"{base:020d}.log"))
        by_position = {b["position"]: b for b in batches}
        entries = offset_index(partition_dir, base)
        for offset, position in entries:
            assert position in by_position, "offset index entry not at a batch start"
            assert by_position[position]["last_offset"] == offset
        # entries are sparse: no two closer than index.interval.bytes
        positions = [0] + [p for _, p in entries]
        assert all(b - a > index_interval_bytes for a, b in zip(positions, positions[1:]))
        tentries = time_index(partition_dir, base)
        if batches:
            best = max(b["max_timestamp"] for b in batches)
            assert tentries and tentries[-1][0] == best
            holder = [b for b in batches if b["max_timestamp"] == best][0]
            assert tentries[-1][1] == holder["last_offset"]
        for (ts1, o1), (ts2, o2) in zip(tentries, tentries[1:]):
            assert ts2 > ts1 and o2 >= o1
        for ts, offset in tentries:
            # a time index entry's timestamp is the max timestamp of batches up to its offset
            upto = [b["max_timestamp"] for b in batches if b["last_offset"] <= offset]
            assert upto and max(upto) == ts
    for offset in list(timestamps)[:: max(1, len(timestamps) // 200)] + list(timestamps)[-1:]:
        _, batch, _ = kafka_lookup_offset(partition_dir, offset)
        assert batch is not None and batch["base_offset"] <= offset <= batch["last_offset"]
    ordered = sorted(set(timestamps.values()))
    for target in ordered[:: max(1, len(ordered) // 50)] + [ordered[-1] + 1] if ordered else []:
        expected = next((o for o in sorted(timestamps) if timestamps[o] >= target), None)
        assert kafka_lookup_time(partition_dir, target, timestamps) == expected, target
