"""Helpers for streaming tests: growing logs, transaction markers, delivered offsets."""
import os
import struct

import pyarrow as pa

from segmentlog_datasource.format.crc import crc32c
from segmentlog_datasource.format.layout import (
    ATTR_CONTROL, ATTR_TRANSACTIONAL, V2_ATTRIBUTES, V2_CRC, V2_CRC_START, V2_PRODUCER_EPOCH,
    V2_PRODUCER_ID,
)
from segmentlog_datasource.format.encode import build_record_batch
from segmentlog_datasource.writer import write_log

BASE_TS = 1_700_000_000_000


def records_table(first_id: int, count: int, partitions: int = 1, value_bytes: int = 40,
                  timestamp_ms: int = BASE_TS) -> pa.Table:
    """`count` rows with ids from `first_id`, spread round-robin over `partitions`."""
    ids = range(first_id, first_id + count)
    return pa.table({
        "key": pa.array([b"k%d" % i for i in ids], pa.binary()),
        "value": pa.array([b"v%08d-" % i + b"x" * value_bytes for i in ids], pa.binary()),
        "partition": pa.array([i % partitions for i in ids], pa.int32()),
        "timestamp": pa.array([timestamp_ms + i for i in ids], pa.timestamp("ms", tz="UTC")),
    })


def append(logdir: str, topic: str, first_id: int, count: int, partitions: int = 1, **options):
    """Append `count` records to `topic` (created with `partitions` partitions)."""
    return write_log(logdir, records_table(first_id, count, partitions), topic=topic,
                     num_partitions=partitions, **options)


def last_segment(partition_dir: str) -> str:
    logs = sorted(n for n in os.listdir(partition_dir) if n.endswith(".log"))
    return os.path.join(partition_dir, logs[-1])


def producer_batch(records, base_offset: int, producer_id: int, producer_epoch: int,
                   control: bool = False) -> bytes:
    """A transactional batch of `producer_id` (a control batch when `control`), built as a
    broker stores it: attributes and producer fields set, CRC-32C over the rest."""
    data = bytearray(build_record_batch(records, base_offset=base_offset))
    attributes = struct.unpack_from(">h", data, V2_ATTRIBUTES)[0] | ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    struct.pack_into(">h", data, V2_ATTRIBUTES, attributes)
    struct.pack_into(">q", data, V2_PRODUCER_ID, producer_id)
    struct.pack_into(">h", data, V2_PRODUCER_EPOCH, producer_epoch)
    struct.pack_into(">I", data, V2_CRC, crc32c(bytes(data[V2_CRC_START:])))
    return bytes(data)


COMMIT, ABORT = 1, 0


def marker_batch(kind: int, base_offset: int, producer_id: int, producer_epoch: int,
                 coordinator_epoch: int = 7, timestamp_ms: int = BASE_TS) -> bytes:
    """An end-transaction marker: a control batch with one control record."""
    key = struct.pack(">hh", 0, kind)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return producer_batch([(key, value, timestamp_ms, [])], base_offset, producer_id,
                          producer_epoch, control=True)


def append_bytes(path: str, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def append_aborted_txn_entry(txn_index_path: str, producer_id: int, first_offset: int,
                             last_offset: int, last_stable_offset: int) -> None:
    """What a broker adds to the active segment's .txnindex when it appends an ABORT."""
    append_bytes(txn_index_path, struct.pack(">hqqqq", 0, producer_id, first_offset,
                                             last_offset, last_stable_offset))


def offsets_by_partition(rows):
    """{(topic, partition): [offsets in delivery order]} of (topic, partition, offset) rows."""
    result = {}
    for topic, partition, offset in rows:
        result.setdefault((topic, partition), []).append(offset)
    return result


def delivered_offsets(frame, checkpoint: str):
    """Runs a streaming read `frame` to what is there now (availableNow) and gives
    ({(topic, partition): [offsets in delivery order]}, the number of micro-batches)."""
    batches = []

    def collect(batch, batch_id):
        batches.append([tuple(r) for r in batch.select("topic", "partition", "offset").collect()])

    query = frame.writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint) \
        .trigger(availableNow=True).start()
    assert query.awaitTermination(300)
    assert query.exception() is None
    return offsets_by_partition([row for rows in batches for row in rows]), len(batches)


def drop_oldest_segment(partition_dir: str) -> int:
    """What retention does: the oldest segment and its indexes are deleted. Returns the
    base offset of the segment that is now the first."""
    bases = sorted(n[:-len(".log")] for n in os.listdir(partition_dir) if n.endswith(".log"))
    for name in os.listdir(partition_dir):
        if name.startswith(bases[0] + "."):
            os.remove(os.path.join(partition_dir, name))
    return int(bases[1])
