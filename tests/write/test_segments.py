"""Segment rolls and index entries placed exactly as Kafka placed them in the fixtures."""
import json
import os

import numpy as np
import pyarrow as pa
import pytest

from segmentlog_datasource.errors import InvalidOptionError
from segmentlog_datasource.writer import WriteError, write_log
from segmentlog_datasource.writer.job import WriteJob
from segmentlog_datasource.writer.options import WriteOptions
from segmentlog_datasource.writer.segments import plan_segments
from segmentlog_datasource.writer.task import PartitionBatches, TaskResult

from segmentlog_datasource.format.pending import PUBLISH_TOKEN
from support.manifest import b64
from support.kafka_logs import check_partition_indexes, decode_partition, read_batches
from segmentlog_datasource.format.encode import build_record_batch

# One batch per LogSegment.append call and contiguous offsets: the leader path the writer
# takes. (plain-2 appends several batches at once, compacted-0 has offset gaps and
# bigoffset-0 jumps offsets, so they are not the writer's case.)
LEADER_PATH = ["plain-0", "plain-1", "codec-gzip-0", "codec-snappy-0", "codec-lz4-0",
               "codec-zstd-0", "logappend-0", "txn-0"]


def manifest(logdir, name):
    with open(os.path.join(logdir, f"{name}.manifest.json")) as handle:
        return json.load(handle)


def config_kwargs(config):
    return dict(segment_bytes=config["segment.bytes"], segment_ms=config["segment.ms"],
                segment_index_bytes=config["segment.index.bytes"],
                index_interval_bytes=config["index.interval.bytes"])


@pytest.mark.parametrize("name", LEADER_PATH)
def test_plan_matches_kafka(kafka_logdir, name):
    m = manifest(kafka_logdir, name)
    batches = [b for s in m["segments"] for b in s["batches"]]
    # The leader-path cases have contiguous offsets, as the planner's input assumes.
    assert all(b2["base_offset"] == b1["last_offset"] + 1 for b1, b2 in zip(batches, batches[1:]))
    plans = plan_segments(
        batches[0]["base_offset"], [b["size_in_bytes"] for b in batches],
        [b["last_offset"] - b["base_offset"] + 1 for b in batches],
        [b["max_timestamp"] for b in batches], **config_kwargs(m["config"]))
    assert [p.base_offset for p in plans] == [s["base_offset"] for s in m["segments"]]
    for plan, segment in zip(plans, m["segments"]):
        assert plan.size == segment["log_size"]
        assert [list(e) for e in zip(plan.index_offsets, plan.index_positions)] == \
            segment["offset_index"]["entries"]
        assert [list(e) for e in zip(plan.time_timestamps, plan.time_offsets)] == \
            segment["time_index"]["entries"]
        with open(os.path.join(kafka_logdir, name, segment["offset_index"]["file"]), "rb") as f:
            assert plan.offset_index_bytes() == f.read()
        with open(os.path.join(kafka_logdir, name, segment["time_index"]["file"]), "rb") as f:
            assert plan.time_index_bytes() == f.read()


def test_roll_rules():
    # segment.bytes: a segment takes a batch only while it fits, but always takes one
    plans = plan_segments(0, [400] * 5 + [5000], [1] * 6, [1] * 6, segment_bytes=1000,
                          segment_ms=10**12, segment_index_bytes=10**6, index_interval_bytes=4096)
    assert [(p.base_offset, p.batch_count, p.size) for p in plans] == \
        [(0, 2, 800), (2, 2, 800), (4, 1, 400), (5, 1, 5000)]
    # segment.ms: rolls when a batch's max timestamp is too far past the first batch's
    plans = plan_segments(10, [100] * 4, [2] * 4, [1000, 1500, 2001, 2100], segment_bytes=10**6,
                          segment_ms=1000, segment_index_bytes=10**6, index_interval_bytes=4096)
    assert [p.base_offset for p in plans] == [10, 14]
    # a full offset index (segment.index.bytes / 8 entries) rolls the segment; the time
    # index keeps its last slot for the roll entry
    plans = plan_segments(0, [100] * 12, [1] * 12, list(range(1, 13)), segment_bytes=10**6,
                          segment_ms=10**12, segment_index_bytes=36, index_interval_bytes=0)
    assert all(len(p.time_timestamps) <= 3 and len(p.index_offsets) <= 4 for p in plans)
    assert sum(p.batch_count for p in plans) == 12
    # relative offsets must fit 32 bits
    plans = plan_segments(0, [100, 100], [2**31 - 10, 20], [1, 1], segment_bytes=10**6,
                          segment_ms=10**12, segment_index_bytes=10**6, index_interval_bytes=4096)
    assert [p.base_offset for p in plans] == [0, 2**31 - 10]


def test_commit_writes_kafkas_files_for_plain_0(kafka_logdir, tmp_path):
    """Feed the commit exactly plain-0's batches (re-encoded from its records, as a task
    would stage them): segment names, index files and segment bytes come out as Kafka's."""
    m = manifest(kafka_logdir, "plain-0")
    logdir = str(tmp_path / "logdir")
    options = WriteOptions.from_mapping(
        {"segment.bytes": 65536, "index.interval.bytes": 4096, "numPartitions": 1})
    job = WriteJob(logdir, topic="plain", options=options).start()
    staged = bytearray()
    positions, sizes, counts, max_ts = [], [], [], []
    for segment in m["segments"]:
        for batch in segment["batches"]:
            records = [(b64(r["key"]), b64(r["value"]), r["timestamp"],
                        [(k, b64(v)) for k, v in r["headers"]]) for r in batch["records"]]
            data = build_record_batch(records)  # at relative offset 0, as a task stages it
            positions.append(len(staged))
            sizes.append(len(data))
            counts.append(len(records))
            max_ts.append(batch["max_timestamp"])
            staged += data
    with open(os.path.join(job.staging_dir, "task-0.batches"), "wb") as handle:
        handle.write(staged)
    result = TaskResult(job.job_id, 0, 0, "task-0.batches", records=sum(counts), bytes=len(staged))
    result.partitions[("plain", 0)] = PartitionBatches(
        np.array(positions), np.array(sizes), np.array(counts), np.array(max_ts))
    result.topic_counts["plain"] = 1
    job.commit([result])

    ours = os.path.join(logdir, "plain-0")
    kafka = os.path.join(kafka_logdir, "plain-0")
    expected = sorted(f for f in os.listdir(kafka) if not f.endswith(".snapshot"))
    # the fixture keeps no leader-epoch-checkpoint or partition.metadata; ours has them
    assert sorted(os.listdir(ours)) == sorted(expected + ["leader-epoch-checkpoint",
                                                          "partition.metadata"])
    with open(os.path.join(ours, "leader-epoch-checkpoint"), "rb") as handle:
        assert handle.read() == b"0\n1\n0 0\n"
    epochs = {b["base_offset"]: b["partition_leader_epoch"] for s in m["segments"]
              for b in s["batches"]}
    for name in expected:
        with open(os.path.join(ours, name), "rb") as a, open(os.path.join(kafka, name), "rb") as b:
            mine, theirs = bytearray(a.read()), bytearray(b.read())
        if name.endswith(".log"):
            # the only difference: Kafka's leader epoch changed during the write, ours is 0
            pos = 0
            while pos < len(theirs):
                base = int.from_bytes(theirs[pos : pos + 8], "big")
                assert mine[pos + 12 : pos + 16] == b"\x00\x00\x00\x00"
                mine[pos + 12 : pos + 16] = epochs[base].to_bytes(4, "big", signed=True)
                pos += 12 + int.from_bytes(theirs[pos + 8 : pos + 12], "big")
        assert mine == theirs, name
    assert not [n for n in os.listdir(logdir) if n.startswith(".") and n != PUBLISH_TOKEN]
    check_partition_indexes(ours)
    assert len(decode_partition(ours)) == 371


# ------------------------------------------------------ the planner against its reference

def reference_plan(start_offset, sizes, record_counts, max_timestamps, *, segment_bytes,
                   segment_ms, segment_index_bytes, index_interval_bytes, roll_before=()):
    """The rules of segments.py applied one batch at a time, as a broker appends (and a
    roll before each batch of `roll_before`)."""
    offset_index_max = segment_index_bytes // 8
    time_index_max = segment_index_bytes // 12
    segments, current, next_offset = [], None, start_offset

    def close(segment, end_batch, next_offset):
        segment["end"], segment["next"] = end_batch, next_offset
        if segment["max_ts"] > (segment["time"][-1][0] if segment["time"] else -1):
            segment["time"].append((segment["max_ts"], segment["max_at"]))
        segments.append(segment)

    for b, (size, count, max_ts) in enumerate(zip(sizes, record_counts, max_timestamps)):
        last_offset = next_offset + count - 1
        if current is not None and current["size"] > 0 and (
                b in roll_before
                or current["size"] + size > segment_bytes
                or (current["rolling"] >= 0 and max_ts - current["rolling"] > segment_ms)
                or len(current["index"]) >= offset_index_max
                or len(current["time"]) >= time_index_max - 1
                or last_offset - current["base"] > 2**31 - 1):
            close(current, b, next_offset)
            current = None
        if current is None:
            current = {"base": next_offset, "first": b, "size": 0, "since": 0, "index": [],
                       "time": [], "rolling": max_ts, "max_ts": -1, "max_at": next_offset}
        if max_ts > current["max_ts"]:
            current["max_ts"], current["max_at"] = max_ts, last_offset
        if current["since"] > index_interval_bytes:
            current["index"].append((last_offset, current["size"]))
            if current["max_ts"] > (current["time"][-1][0] if current["time"] else -1):
                current["time"].append((current["max_ts"], current["max_at"]))
            current["since"] = 0
        current["since"] += size
        current["size"] += size
        next_offset = last_offset + 1
    if current is not None:
        close(current, len(sizes), next_offset)
    return [(s["base"], s["first"], s["end"], s["size"], s["next"], s["index"], s["time"])
            for s in segments]


# 300 cases in the suite (a few seconds); a sweep by hand: PLAN_SEGMENTS_CASES=20000
PLAN_SEGMENTS_CASES = int(os.environ.get("PLAN_SEGMENTS_CASES", "300"))


def test_plan_segments_matches_its_batch_at_a_time_reference():
    rng = np.random.default_rng(25)
    for _ in range(PLAN_SEGMENTS_CASES):
        n = int(rng.integers(0, 200))
        sizes = rng.choice([61, 100, 500, 3000, 5000, 9000], n).tolist()
        counts = rng.choice([1, 2, 5, 77, 2**30], n).tolist()
        stamps = rng.choice([-1, 5, 40, 1000, 10**6], n)
        stamps = (np.sort(stamps) if rng.random() < 0.5 else stamps).tolist()
        options = dict(segment_bytes=int(rng.choice([100, 1000, 5000, 10**9])),
                       segment_ms=int(rng.choice([10, 1000, 10**12])),
                       segment_index_bytes=int(rng.choice([0, 12, 24, 36, 100, 10**7])),
                       index_interval_bytes=int(rng.choice([0, 100, 1000, 4096, 10000])))
        start = int(rng.choice([0, 5, 2**31]))
        if rng.random() < 0.5:  # the batches where a task's own segment starts
            options["roll_before"] = sorted(set(rng.integers(0, n + 1, rng.integers(0, 6))
                                                .tolist()))
        plans = plan_segments(start, sizes, counts, stamps, **options)
        assert [(p.base_offset, p.first_batch, p.end_batch, p.size, p.next_offset,
                 list(zip(p.index_offsets, p.index_positions)),
                 list(zip(p.time_timestamps, p.time_offsets))) for p in plans] == \
            reference_plan(start, sizes, counts, stamps, **options), (start, options)


# ------------------------------------------- staged files renamed into place, re-stamped

def test_staged_partition_files_become_segments_with_the_offsets_and_epoch_given(tmp_path):
    """A task stamps its per-partition files from offset 0 at the likely epoch; the
    commit renames them into place and stamps them again where the write differs: an
    append (offsets after the log end), another epoch, a second task's batches."""
    logdir = str(tmp_path / "log")

    def batch_fields(directory):
        return [(batch["base_offset"], batch["epoch"])
                for name in sorted(os.listdir(directory)) if name.endswith(".log")
                for batch in read_batches(os.path.join(directory, name))]

    rows = pa.table({"value": [b"v%d" % i for i in range(5000)]})
    write_log(logdir, rows, topic="t", num_partitions=1, batch_size=1024)
    write_log(logdir, rows, topic="t", batch_size=1024, leader_epoch=3)
    job = WriteJob(logdir, topic="t", options=WriteOptions.from_mapping(
        {"batch.size": 1024})).start()
    results = []
    for task_index in range(2):
        task = job.task_writer(task_index)
        task.write(rows)
        results.append(task.finish())
    assert all(p.file for r in results for p in r.partitions.values())
    job.commit(results)
    assert [r[4] for r in decode_partition(os.path.join(logdir, "t-0"))] == \
        [b"v%d" % i for i in range(5000)] * 4
    fields = batch_fields(os.path.join(logdir, "t-0"))
    offsets = [o for o, _ in fields]
    assert offsets[0] == 0 and offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    epochs = [e for _, e in fields]
    assert epochs == sorted(epochs) and epochs[0] == 0 and epochs[-1] == 3
    check_partition_indexes(os.path.join(logdir, "t-0"))
    assert not [n for n in os.listdir(logdir) if n.startswith(".segmentlog-staging")]


# --------------------------------------------------- a task's batches in a segment of its own

def test_large_task_batches_start_their_own_segment_renamed_into_place(tmp_path):
    """A task's batches of a partition that reach taskSegmentBytes start a segment: the
    staged file itself becomes its .log (same inode), stamped again in place with the
    offsets after the previous task's. Smaller ones join the segment before them; the
    first task's start the write's first segment as ever. kafka-python reads every batch
    with its offsets, and the indexes hold Kafka's rules."""
    from kafka.record.memory_records import MemoryRecords

    logdir = str(tmp_path / "log")
    rows = [pa.table({"value": [b"t%d-%05d" % (t, i) for i in range(n)]})
            for t, n in enumerate([3000, 40, 2500])]
    write_log(logdir, rows[0], topic="t", num_partitions=1, batch_size=1024)  # an append
    job = WriteJob(logdir, topic="t", options=WriteOptions.from_mapping(
        {"batch.size": 1024, "taskSegmentBytes": 20_000})).start()
    results, inodes = [], []
    for task_index, table in enumerate(rows):
        task = job.task_writer(task_index)
        task.write(table)
        results.append(task.finish())
        (piece,) = results[-1].partitions.values()
        staged = os.path.join(job.staging_dir, piece.file)
        inodes.append((os.stat(staged).st_ino, os.path.getsize(staged)))
    assert inodes[0][1] > 20_000 > inodes[1][1] and inodes[2][1] > 20_000
    summary = job.commit(results)
    partition = os.path.join(logdir, "t-0")
    # the first write's segment, then this write's: task 0 (with task 1's few batches
    # after it), then task 2's own
    assert summary.partitions[0].segments == [3000, 6040]
    logs = sorted(n for n in os.listdir(partition) if n.endswith(".log"))
    assert logs == ["%020d.log" % base for base in (0, 3000, 6040)]
    stats = {n: os.stat(os.path.join(partition, n)) for n in logs}
    assert stats[logs[1]].st_ino == inodes[0][0]  # renamed, then task 1's copied after it
    assert (stats[logs[2]].st_ino, stats[logs[2]].st_size) == inodes[2]
    expected = [row for table in [rows[0], *rows] for row in table.column("value").to_pylist()]
    assert [r[4] for r in decode_partition(partition)] == expected
    offsets = []
    for name in logs:
        with open(os.path.join(partition, name), "rb") as handle:
            records = MemoryRecords(handle.read())
        while records.has_next():
            batch = records.next_batch()
            assert batch.validate_crc()
            offsets += [record.offset for record in batch]
    assert offsets == list(range(len(expected)))
    check_partition_indexes(partition)
    assert not [n for n in os.listdir(logdir) if n.startswith(".segmentlog-staging")]


def test_task_segment_bytes_is_checked_and_defaults_to_8_mib():
    assert WriteOptions().task_segment_bytes == 8 << 20
    assert WriteOptions.from_mapping({"TaskSegmentBytes": "0"}).task_segment_bytes == 0
    with pytest.raises(InvalidOptionError, match="taskSegmentBytes"):
        WriteOptions.from_mapping({"taskSegmentBytes": "-1"})


def _two_task_commit(logdir, truncate_second=False):
    """An append of two tasks whose second starts its own segment; the partition's files."""
    rows = pa.table({"value": [b"v%05d" % i for i in range(3000)],
                     "timestamp": pa.array(range(3000), pa.timestamp("ms"))})
    write_log(logdir, rows, topic="t", num_partitions=1, batch_size=1024)
    job = WriteJob(logdir, topic="t", options=WriteOptions.from_mapping(
        {"batch.size": 1024, "taskSegmentBytes": 1, "leaderEpoch": 4})).start()
    results = []
    for task_index in range(2):
        task = job.task_writer(task_index)
        task.write(rows)
        results.append(task.finish())
    if truncate_second:
        (piece,) = results[1].partitions.values()
        os.truncate(os.path.join(job.staging_dir, piece.file), 5000)
    job.commit(results)
    partition = os.path.join(logdir, "t-0")
    return {name: open(os.path.join(partition, name), "rb").read()
            for name in sorted(os.listdir(partition)) if name.endswith("index") or
            name.endswith(".log")}


def test_headers_set_through_a_mapping_equal_those_written_with_pwrite(tmp_path, monkeypatch):
    """A renamed task file whose offsets and epoch change gets its headers through a
    writable mapping (ext4, XFS, tmpfs); elsewhere with pwrite: the same bytes."""
    from segmentlog_datasource.writer import assembly

    directory = os.open(str(tmp_path), os.O_RDONLY)
    try:
        if assembly.filesystem_type(directory) not in assembly.OVERWRITE_IN_PLACE_FILESYSTEMS:
            pytest.skip("headers are set through a mapping only on ext4, XFS and tmpfs, and "
                        "the temporary directory is on another file system")
    finally:
        os.close(directory)
    taken = []
    mapped = assembly._restamp_mapped
    monkeypatch.setattr(assembly, "_restamp_mapped",
                        lambda *a: taken.append(mapped(*a)) or taken[-1])
    files = _two_task_commit(str(tmp_path / "mapped"))
    # the second task's file only: the first's was stamped with the append's start and epoch
    assert taken == [True]
    monkeypatch.setattr(assembly, "OVERWRITE_IN_PLACE_FILESYSTEMS", frozenset())
    assert _two_task_commit(str(tmp_path / "written")) == files
    assert [name for name in files if name.endswith(".log")] == \
        ["%020d.log" % base for base in (0, 3000, 6000)]  # each task's file a segment
    partition = str(tmp_path / "mapped" / "t-0")
    assert [r[4] for r in decode_partition(partition)] == [b"v%05d" % i for i in range(3000)] * 3
    check_partition_indexes(partition)
    logs = [name for name in files if name.endswith(".log")]
    assert [{b["epoch"] for b in read_batches(os.path.join(partition, name))}
            for name in logs] == [{0}, {4}, {4}]


def test_a_task_file_that_shrank_before_the_commit_fails_it_cleanly(tmp_path):
    """The mapping's fault (a header past the file's end) sends the commit to pwrite,
    which names the staging file; the log dir keeps the first write alone."""
    logdir = str(tmp_path / "log")
    with pytest.raises(WriteError, match=r"staging file task-00001-.* is shorter than its "
                                         r"task reported"):
        _two_task_commit(logdir, truncate_second=True)
    assert sorted(n for n in os.listdir(os.path.join(logdir, "t-0")) if n.endswith(".log")) \
        == ["%020d.log" % 0]
    assert len(decode_partition(os.path.join(logdir, "t-0"))) == 3000
