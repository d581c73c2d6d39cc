"""The writer engine without Spark: round trips, appends, overwrites, atomicity, errors."""
import datetime
import os
import random
import shutil

import pyarrow as pa
import pytest

from kafka.record.memory_records import MemoryRecords

from segmentlog_datasource.format import ScanOptions, SegmentRange, discover_partitions, scan_segment
from segmentlog_datasource.format.pending import PUBLISH_TOKEN
from segmentlog_datasource.writer import (
    ConcurrentWriteError, InvalidInputError, InvalidOptionError, SegmentLogWriter,
    TopicLayoutError, WriteAbortedError, WriteError, WriteJob, WriteOptions, write_log,
)
from segmentlog_datasource.writer.task import LOOK_UP_START_BYTES

from support.paths import CHECKOUT
from support.kafka_logs import (
    check_partition_indexes, decode_logdir, decode_partition, kafka_partition, read_batches,
    segments_of,
)

HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
T0 = 1_700_000_000_000
WRITE_TIME = 1_750_000_000_000
# What a write leaves beside the partition directories, and in each of them (#21)
LOG_DIR_FILES = [".segmentlog-publishing", "log-start-offset-checkpoint", "recovery-point-offset-checkpoint",
                 "replication-offset-checkpoint"]
PARTITION_FILES = ["leader-epoch-checkpoint", "partition.metadata"]


@pytest.fixture
def logdir(tmp_path):
    return str(tmp_path / "logdir")


def make_rows(n, seed=1, explicit_every=0, num_partitions=3, big_every=0):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        key = None if i % 4 == 0 else f"key-{rng.randrange(500)}".encode()
        if i % 13 == 0:
            value = None
        elif big_every and i % big_every == 0:
            value = bytes(rng.getrandbits(8) for _ in range(64)) * 8000  # 512000 bytes
        else:
            value = os.urandom(rng.choice([0, 5, 40, 300, 3000])) if i % 2 else \
                (f"value {i} " * rng.randrange(1, 20)).encode()
        headers = None if i % 5 else [("trace", f"{i}".encode()), ("\u00fcml", None), ("e", b"")]
        ts = T0 + rng.randint(-120_000, 120_000)
        partition = rng.randrange(num_partitions) if explicit_every and i % explicit_every == 0 else None
        rows.append({"key": key, "value": value, "timestamp": ts, "headers": headers,
                     "partition": partition})
    return rows


def to_table(rows, with_partition=True):
    columns = {
        "key": pa.array([r["key"] for r in rows], pa.binary()),
        "value": pa.array([r["value"] for r in rows], pa.binary()),
        "timestamp": pa.array([r["timestamp"] for r in rows], pa.timestamp("ms", tz="UTC")),
        "headers": pa.array([None if r["headers"] is None else
                             [{"key": k, "value": v} for k, v in r["headers"]] for r in rows],
                            HEADERS),
    }
    if with_partition:
        columns["partition"] = pa.array([r["partition"] for r in rows], pa.int32())
    return pa.table(columns)


def expected_by_partition(rows, num_partitions, keyless):
    """Rows per partition in input order; keyless rows are checked separately."""
    expected = {p: [] for p in range(num_partitions)}
    for r in rows:
        if r["partition"] is not None:
            p = r["partition"]
        elif r["key"] is not None:
            p = kafka_partition(r["key"], num_partitions)
        else:
            keyless.append(r)
            continue
        expected[p].append(r)
    return expected


def as_record(r):
    return (r["timestamp"], r["key"], r["value"], list(r["headers"] or []))


def check_round_trip(logdir, topic, rows, num_partitions, interval=4096):
    decoded = decode_logdir(logdir)
    assert sorted(decoded) == [(topic, p) for p in range(num_partitions)]
    keyless = []
    expected = expected_by_partition(rows, num_partitions, keyless)
    keyless_seen = []
    for p in range(num_partitions):
        got = [(ts, key, value, headers) for _, ts, _, key, value, headers in decoded[(topic, p)]]
        placed = [as_record(r) for r in expected[p]]
        # keyed and explicitly placed rows keep their input order within the partition
        assert [g for g in got if g in placed] == placed
        keyless_seen.extend(g for g in got if g not in placed)
        check_partition_indexes(os.path.join(logdir, f"{topic}-{p}"), interval)
    assert all(g[1] is None for g in keyless_seen)
    assert sorted(keyless_seen, key=repr) == sorted(map(as_record, keyless), key=repr)
    return decoded


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_every_codec(logdir, codec):
    rows = make_rows(3000, seed=len(codec), explicit_every=7)
    summary = write_log(logdir, to_table(rows), topic="events", num_partitions=3,
                        compression=codec, segment_bytes=60_000, batch_size=8192,
                        index_interval_bytes=1024, write_time_ms=WRITE_TIME)
    assert summary.records == 3000
    decoded = check_round_trip(logdir, "events", rows, 3, interval=1024)
    for p in range(3):
        directory = os.path.join(logdir, f"events-{p}")
        assert len(segments_of(directory)) > 1  # multi-segment output
        for base in segments_of(directory):
            for batch in read_batches(os.path.join(directory, f"{base:020d}.log")):
                assert batch["attributes"] & 0x07 == ["none", "gzip", "snappy", "lz4", "zstd"].index(codec)
                assert batch["producer_id"] == -1 and batch["producer_epoch"] == -1
                assert batch["base_sequence"] == -1 and batch["epoch"] == 0
                assert codec != "none" or batch["size"] <= 8192 or batch["record_count"] == 1
    # segmentlog's own reader sees the same records
    for log in discover_partitions([logdir]):
        got = []
        for segment in log.segments:
            for batch in scan_segment(SegmentRange(
                    log.topic, log.partition, segment.log_path, segment.size, 0, segment.size, 0,
                    2**62, False),
                ScanOptions()):
                got.extend(zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist()))
        assert got == [(r[0], r[4]) for r in decoded[(log.topic, log.partition)]]
    assert sorted(os.listdir(logdir)) == sorted(["events-0", "events-1", "events-2"] +
                                                LOG_DIR_FILES)


def test_null_keys_spread_over_partitions(logdir):
    table = pa.table({"value": pa.array([b"v" * 100] * 3000)})
    write_log(logdir, table, topic="t", num_partitions=3, batch_size=16384)
    counts = [len(decode_partition(os.path.join(logdir, f"t-{p}"))) for p in range(3)]
    assert sum(counts) == 3000 and min(counts) >= 900, counts


def test_many_partitions_and_topics_from_a_column(logdir):
    n = 4000
    topics = [f"topic-{i % 3}" for i in range(n)]
    keys = [f"k{i}".encode() for i in range(n)]
    table = pa.table({"topic": topics, "key": keys, "value": [b"%d" % i for i in range(n)]})
    write_log(logdir, table, num_partitions=40)
    decoded = decode_logdir(logdir)
    assert len(decoded) == 120
    for (topic, p), records in decoded.items():
        for _, _, _, key, value, _ in records:
            i = int(value)
            assert topics[i] == topic and kafka_partition(keys[i], 40) == p
    assert sum(len(r) for r in decoded.values()) == n


def test_large_records(logdir):
    rows = make_rows(60, seed=5, big_every=10)
    write_log(logdir, to_table(rows), topic="big", num_partitions=2, segment_bytes=2_000_000)
    check_round_trip(logdir, "big", rows, 2)
    huge = pa.table({"value": [b"x" * 3_000_000]})
    with pytest.raises(InvalidInputError, match="max.message.bytes"):
        write_log(logdir, huge, topic="big")
    write_log(logdir, huge, topic="big", max_message_bytes=4_000_000, segment_bytes=8_000_000)
    values = [r[4] for p in range(2) for r in decode_partition(os.path.join(logdir, f"big-{p}"))]
    assert b"x" * 3_000_000 in values


def test_append_continues_offsets_in_new_segments(logdir):
    first = make_rows(500, seed=2)
    write_log(logdir, to_table(first, False), topic="t", num_partitions=2)
    ends = {p: len(decode_partition(os.path.join(logdir, f"t-{p}"))) for p in range(2)}
    second = make_rows(300, seed=3)
    summary = write_log(logdir, to_table(second, False), topic="t")
    for part in summary.partitions:
        assert part.start_offset == ends[part.partition]
        assert part.segments[0] == ends[part.partition]
        directory = os.path.join(logdir, f"t-{part.partition}")
        assert segments_of(directory) == [0, ends[part.partition]]
        check_partition_indexes(directory)
    total = sum(len(decode_partition(os.path.join(logdir, f"t-{p}"))) for p in range(2))
    assert total == 800
    with pytest.raises(InvalidOptionError, match="already has 2 partitions"):
        write_log(logdir, to_table(second, False), topic="t", num_partitions=5)


def test_append_to_kafka_written_partition(kafka_logdir_copy):
    before = decode_partition(os.path.join(kafka_logdir_copy, "plain-0"))
    last_epoch = read_batches(os.path.join(kafka_logdir_copy, "plain-0",
                                           "00000000000000000326.log"))[-1]["epoch"]
    table = pa.table({"key": [b"a", b"b"], "value": [b"1", b"2"],
                      "partition": pa.array([0, 0], pa.int32())})
    summary = write_log(kafka_logdir_copy, table, topic="plain")  # plain has 3 partitions
    assert summary.offsets()[("plain", 0)] == (371, 373)
    directory = os.path.join(kafka_logdir_copy, "plain-0")
    after = decode_partition(directory)
    assert after[:371] == before and [r[0] for r in after[371:]] == [371, 372]
    new = read_batches(os.path.join(directory, "00000000000000000371.log"))
    assert {b["epoch"] for b in new} == {last_epoch}  # the leader epoch carries on
    check_partition_indexes(directory)


def _first_header(path):
    """(base offset, leader epoch) of the first batch in the file at `path`."""
    with open(path, "rb") as handle:
        head = handle.read(16)
    return int.from_bytes(head[:8], "big"), int.from_bytes(head[12:16], "big", signed=True)


def _stage_and_age(job, tables):
    """Stage one task per table; every staged file's times are set to 1970, so that a
    commit rewriting one gives it a new modification time."""
    results = []
    for index, table in enumerate(tables):
        task = job.task_writer(index)
        task.write(table)
        results.append(task.finish())
    for name in os.listdir(job.staging_dir):
        if name.endswith(".batches"):
            os.utime(os.path.join(job.staging_dir, name), (1, 1))
    return results


def test_an_append_is_stamped_at_the_log_end_and_renamed_into_place_untouched(logdir):
    write_log(logdir, pa.table({"value": [b"v%d" % i for i in range(40)]}), topic="t",
              num_partitions=2, leader_epoch=3)
    ends = {p: len(decode_partition(os.path.join(logdir, f"t-{p}"))) for p in range(2)}
    job = WriteJob(logdir, topic="t").start()
    assert job.spec.partition_starts == {("t", 0): (ends[0], 3), ("t", 1): (ends[1], 3)}
    table = pa.table({"key": [b"k%d" % i for i in range(60)], "value": [b"a"] * 60})
    results = _stage_and_age(job, [table])
    assert sorted(results[0].partitions) == [("t", 0), ("t", 1)]
    for (topic, partition), batches in results[0].partitions.items():
        assert (batches.stamped_start, batches.stamped_epoch) == (ends[partition], 3)
        assert _first_header(os.path.join(job.staging_dir, batches.file)) == (ends[partition], 3)
    job.commit(results)
    for partition in range(2):
        directory = os.path.join(logdir, f"t-{partition}")
        log = os.path.join(directory, "%020d.log" % ends[partition])
        assert os.stat(log).st_mtime_ns == 1_000_000_000  # the task's file, as it wrote it
        assert [r[0] for r in decode_partition(directory)] == \
            list(range(len(decode_partition(directory))))
        assert {b["epoch"] for b in read_batches(log)} == {3}
        check_partition_indexes(directory)
    assert sum(len(decode_partition(os.path.join(logdir, f"t-{p}"))) for p in range(2)) == 100


def test_a_file_stamped_from_a_wrong_start_is_placed_again(logdir):
    write_log(logdir, pa.table({"value": [b"v%d" % i for i in range(40)]}), topic="t",
              num_partitions=1)
    job = WriteJob(logdir, topic="t").start()
    job.spec.partition_starts[("t", 0)] = (7, 5)  # a guess the commit does not confirm
    results = _stage_and_age(job, [pa.table({"value": [b"new"] * 30})])
    assert _first_header(os.path.join(job.staging_dir, results[0].partitions[("t", 0)].file)) \
        == (7, 5)
    job.commit(results)
    directory = os.path.join(logdir, "t-0")
    log = os.path.join(directory, "%020d.log" % 40)
    assert os.stat(log).st_mtime_ns > 1_000_000_000  # rewritten with the right headers
    assert [r[0] for r in decode_partition(directory)] == list(range(70))
    assert {b["epoch"] for b in read_batches(log)} == {0}
    check_partition_indexes(directory)


def test_tasks_of_a_topic_column_write_find_the_log_end_themselves(logdir):
    write_log(logdir, pa.table({"value": [b"v"] * 25}), topic="t", num_partitions=1,
              leader_epoch=2)
    big = LOOK_UP_START_BYTES // 1000 + 1  # rows of 1000 bytes: enough to look the end up
    topics = ["t"] * big + ["u"] * big + ["v"] * 3
    table = pa.table({"topic": topics, "value": [b"x" * 1000] * len(topics),
                      "partition": pa.array([0] * len(topics), pa.int32())})
    write_log(logdir, pa.table({"value": [b"v"] * 9}), topic="v", num_partitions=1)
    job = WriteJob(logdir).start()  # topics from the column: none looked up at the start
    assert job.spec.partition_starts == {}
    results = _stage_and_age(job, [table])
    stamps = {key: (b.stamped_start, b.stamped_epoch) for key, b in results[0].partitions.items()}
    # t: existing, large: looked up; u: new; v: existing, but too little to be worth it
    assert stamps == {("t", 0): (25, 2), ("u", 0): (0, 0), ("v", 0): (0, 0)}
    job.commit(results)
    directory = os.path.join(logdir, "t-0")
    assert os.stat(os.path.join(directory, "%020d.log" % 25)).st_mtime_ns == 1_000_000_000
    assert [r[0] for r in decode_partition(directory)] == list(range(25 + big))
    assert [r[0] for r in decode_partition(os.path.join(logdir, "v-0"))] == list(range(12))


def test_append_refuses_a_live_or_damaged_tail(kafka_logdir, kafka_logdir_copy):
    table = pa.table({"value": [b"x"]})
    with pytest.raises(TopicLayoutError, match="preallocated"):
        write_log(kafka_logdir_copy, table, topic="live")
    # a last batch whose CRC fails
    path = os.path.join(kafka_logdir_copy, "plain-1", "00000000000000000214.log")
    last = read_batches(path)[-1]
    with open(path, "r+b") as handle:
        handle.seek(last["position"] + last["size"] - 1)
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(TopicLayoutError, match="plain-1: the last batch of its log is damaged"):
        write_log(kafka_logdir_copy, table, topic="plain")
    shutil.copyfile(os.path.join(kafka_logdir, "plain-1", "00000000000000000214.log"), path)
    # a torn last batch
    path = os.path.join(kafka_logdir_copy, "plain-0", "00000000000000000326.log")
    with open(path, "r+b") as handle:
        handle.truncate(os.path.getsize(path) - 10)
    with pytest.raises(TopicLayoutError, match="plain-0: its last segment .* complete batch"):
        write_log(kafka_logdir_copy, table, topic="plain")
    assert not [n for n in os.listdir(kafka_logdir_copy) if n.startswith(".") and n != PUBLISH_TOKEN]


def test_overwrite_replaces_only_the_written_topic(logdir):
    write_log(logdir, pa.table({"value": [b"a"] * 50}), topic="keep", num_partitions=1)
    write_log(logdir, pa.table({"value": [b"old"] * 100}), topic="t", num_partitions=3)
    keep_before = decode_logdir(logdir)[("keep", 0)]
    summary = write_log(logdir, pa.table({"key": [b"k1", b"k2"], "value": [b"new1", b"new2"]}),
                        topic="t", mode="overwrite", num_partitions=2)
    assert sorted(summary.offsets().values()) == sorted(
        [(0, 0 + sum(1 for k in (b"k1", b"k2") if kafka_partition(k, 2) == p)) for p in range(2)])
    decoded = decode_logdir(logdir)
    assert sorted(decoded) == [("keep", 0), ("t", 0), ("t", 1)]
    assert sorted(r[4] for p in range(2) for r in decoded[("t", p)]) == [b"new1", b"new2"]
    assert decoded[("keep", 0)] == keep_before
    assert not [n for n in os.listdir(logdir) if n.startswith(".") and n != PUBLISH_TOKEN]
    # overwrite without numPartitions keeps the count
    write_log(logdir, pa.table({"value": [b"x"]}), topic="t", mode="overwrite")
    assert sorted(k for k in decode_logdir(logdir) if k[0] == "t") == [("t", 0), ("t", 1)]


def test_new_topic_gets_every_partition_and_empty_ones_fill_later(logdir):
    write_log(logdir, pa.table({"key": [b"a"], "value": [b"1"]}), topic="t", num_partitions=4)
    assert sorted(os.listdir(logdir)) == LOG_DIR_FILES + [f"t-{p}" for p in range(4)]
    for p in range(4):
        files = sorted(os.listdir(os.path.join(logdir, f"t-{p}")))
        assert files == ["00000000000000000000.index", "00000000000000000000.log",
                         "00000000000000000000.timeindex"] + PARTITION_FILES
    empty = [p for p in range(4) if p != kafka_partition(b"a", 4)][0]
    write_log(logdir, pa.table({"value": [b"2"], "partition": pa.array([empty], pa.int32())}),
              topic="t")
    records = decode_partition(os.path.join(logdir, f"t-{empty}"))
    assert [(r[0], r[4]) for r in records] == [(0, b"2")]
    assert segments_of(os.path.join(logdir, f"t-{empty}")) == [0]


def _listing(logdir):
    """Each partition directory's names, and the bytes of each file beside them."""
    found = {}
    for name in os.listdir(logdir):
        path = os.path.join(logdir, name)
        if os.path.isdir(path):
            found[name] = sorted(os.listdir(path))
        else:
            with open(path, "rb") as handle:
                found[name] = handle.read()
    return found


def test_nothing_is_visible_before_commit_and_abort_leaves_no_trace(logdir):
    write_log(logdir, pa.table({"value": [b"a"] * 10}), topic="t", num_partitions=1)
    before = _listing(logdir)
    writer = SegmentLogWriter(logdir, "t")
    writer.write_table(pa.table({"value": [b"b"] * 100000}))
    writer.write_table(pa.table({"value": [b"c"] * 10}))
    assert len(decode_partition(os.path.join(logdir, "t-0"))) == 10
    assert discover_partitions([logdir])[0].end_offset() == 10
    writer.abort()
    assert _listing(logdir) == before
    with pytest.raises(WriteAbortedError):
        writer.write_table(pa.table({"value": [b"d"]}))
    # an exception inside the with-block aborts; a new log dir disappears again
    fresh = logdir + "-fresh"
    with pytest.raises(RuntimeError):
        with SegmentLogWriter(fresh, "t", num_partitions=2) as w:
            w.write_table(pa.table({"value": [b"x"] * 10}))
            raise RuntimeError("boom")
    assert not os.path.exists(fresh)


def test_two_writers_on_one_topic(logdir):
    write_log(logdir, pa.table({"value": [b"a"] * 10}), topic="t", num_partitions=2)
    first = SegmentLogWriter(logdir, "t")
    with pytest.raises(ConcurrentWriteError, match=r"\.segmentlog-lock-t"):
        SegmentLogWriter(logdir, "t")
    # a writer with a topic column learns its topics from the data: it fails at commit
    by_column = SegmentLogWriter(logdir)
    by_column.write_table(pa.table({"topic": ["t"], "value": [b"c"]}))
    with pytest.raises(ConcurrentWriteError, match="being written by another"):
        by_column.commit()
    first.write_table(pa.table({"value": [b"b"] * 5}))
    first.commit()
    # one that started before that commit notices the change and refuses
    late = SegmentLogWriter(logdir)
    late.write_table(pa.table({"topic": ["t"], "value": [b"d"]}))
    write_log(logdir, pa.table({"value": [b"e"]}), topic="t")
    with pytest.raises(ConcurrentWriteError, match="changed while this write ran"):
        late.commit()
    decoded = decode_logdir(logdir)
    assert sum(len(r) for r in decoded.values()) == 16
    assert not [n for n in os.listdir(logdir) if n.startswith(".") and n != PUBLISH_TOKEN]


def test_duplicate_task_attempts_are_written_once(logdir):
    job = WriteJob(logdir, topic="t", options=WriteOptions(num_partitions=2)).start()
    results = []
    for attempt in range(2):  # e.g. a speculative copy of task 0 that also finished
        task = job.task_writer(0, attempt)
        task.write(pa.table({"key": [b"k%d" % i for i in range(100)], "value": [b"v"] * 100}))
        results.append(task.finish())
    other = job.task_writer(1, 0)
    other.write(pa.table({"value": [b"w"] * 7}))
    results.append(other.finish())
    summary = job.commit(results)
    assert summary.records == 107
    assert sum(len(r) for r in decode_logdir(logdir).values()) == 107
    assert sorted(os.listdir(logdir)) == LOG_DIR_FILES + ["t-0", "t-1"]


def test_task_order_decides_offsets(logdir):
    job = WriteJob(logdir, topic="t", options=WriteOptions(num_partitions=1)).start()
    results = {}
    for index in (2, 0, 1):
        task = job.task_writer(index, 0)
        task.write(pa.table({"value": [b"task%d" % index] * 3}))
        results[index] = task.finish()
    job.commit([results[1], results[2], results[0]])
    values = [r[4] for r in decode_partition(os.path.join(logdir, "t-0"))]
    assert values == [b"task0"] * 3 + [b"task1"] * 3 + [b"task2"] * 3


def test_a_job_changes_nothing_on_disk_until_it_starts(logdir):
    write_log(logdir, pa.table({"value": [b"a"]}), topic="t", num_partitions=1)
    before = sorted(os.listdir(logdir))
    job = WriteJob(logdir, topic="t")
    rival = WriteJob(logdir, topic="t")  # checking twice is fine: nothing is locked yet
    assert sorted(os.listdir(logdir)) == before
    with pytest.raises(WriteError, match="has not been started"):
        job.task_writer(0, 0)
    with pytest.raises(WriteError, match="has not been started"):
        job.commit([])
    assert job.start() is job
    assert sorted(n.split("-")[1] for n in os.listdir(logdir) if n.startswith(".") and n != PUBLISH_TOKEN) == \
        ["lock", "staging"]
    with pytest.raises(WriteError, match="already been started"):
        job.start()
    with pytest.raises(ConcurrentWriteError, match=r"\.segmentlog-lock-t"):
        rival.start()
    assert not os.path.exists(rival.staging_dir)
    job.abort()
    assert sorted(os.listdir(logdir)) == before
    # a log dir that does not exist yet is only created by start()
    fresh = logdir + "-fresh"
    WriteJob(fresh, topic="t", options=WriteOptions(num_partitions=1))
    assert not os.path.exists(fresh)


def _tree_bytes(root):
    files = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, root)] = handle.read()
    if PUBLISH_TOKEN in files:  # random by design
        files[PUBLISH_TOKEN] = b"<token>"
    return files


def test_without_fallocate_or_renameat2_the_log_is_the_same(tmp_path, monkeypatch):
    """The fallbacks (writes that allocate as they go; two renames instead of an
    exchange) give the bytes the kernel calls give."""
    from segmentlog_datasource.writer import fsops

    rows = make_rows(2000, seed=4)

    def write(path):
        common = dict(write_time_ms=WRITE_TIME, segment_bytes=60_000, batch_size=4096)
        # (fixed topic ids: a new topic's is random)
        write_log(path, to_table(rows[:1000]), topic="t", num_partitions=3,
                  topic_id="VGhlIHRvcGljIHQgaWQuLg", **common)
        write_log(path, to_table(rows[1000:1500]), topic="t", **common)  # append
        write_log(path, to_table(rows[1500:]), topic="u", num_partitions=2,
                  topic_id="VGhlIHRvcGljIHUgaWQuLg", **common)
        write_log(path, to_table(rows[:300]), topic="u", mode="overwrite", **common)
        return _tree_bytes(path)

    reserved = []
    fallocate, fstatfs = fsops._preallocation_calls()  # Linux

    def counted(fd, mode, position, length):
        reserved.append(length)
        return fallocate(fd, mode, position, length)

    # every staged write and segment reserves its blocks, whatever tmp_path is on
    monkeypatch.setattr(fsops, "PREALLOCATE_MIN", 1)
    monkeypatch.setattr(fsops, "PREALLOCATING_FILESYSTEMS", {_filesystem_of(tmp_path)})
    monkeypatch.setattr(fsops, "_PREALLOCATION_CALLS", [(counted, fstatfs)])
    kernel = write(str(tmp_path / "kernel"))
    assert len(reserved) >= 4 and sum(reserved) > 1500 * 50
    monkeypatch.setattr(fsops, "_PREALLOCATION_CALLS", [None])
    monkeypatch.setattr(fsops, "_RENAMEAT2", [None])
    fallback = write(str(tmp_path / "fallback"))
    assert sorted(fallback) == sorted(kernel)
    assert fallback == kernel
    assert sum(len(records) for records in decode_logdir(str(tmp_path / "fallback")).values()) \
        == 1500 + 300


def _filesystem_of(path) -> int:
    from segmentlog_datasource.writer import fsops

    fd = os.open(path, os.O_RDONLY)
    try:
        return fsops.filesystem_type(fd)
    finally:
        os.close(fd)


def test_preallocate_reserves_the_blocks_and_keeps_the_size(tmp_path, monkeypatch):
    from segmentlog_datasource.writer import fsops

    here = _filesystem_of(tmp_path)
    assert isinstance(here, int)
    fd = os.open(tmp_path / "staged", os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, b"x" * 10)
        monkeypatch.setattr(fsops, "PREALLOCATING_FILESYSTEMS", frozenset())
        fsops.preallocate(fd, 10, 4 << 20)  # not a file system where it pays: nothing
        assert os.fstat(fd).st_blocks * 512 < 1 << 20
        monkeypatch.setattr(fsops, "PREALLOCATING_FILESYSTEMS", {here})
        fsops.preallocate(fd, 10, fsops.PREALLOCATE_MIN - 1)  # small: nothing reserved
        assert os.fstat(fd).st_blocks * 512 < 1 << 20
        fsops.preallocate(fd, 10, 4 << 20)
        stat = os.fstat(fd)
        assert stat.st_size == 10 and stat.st_blocks * 512 >= 4 << 20
    finally:
        os.close(fd)
    assert 0xEF53 in fsops.PREALLOCATING_FILESYSTEMS  # ext4, where it was measured


def test_log_append_time_and_default_timestamps(logdir):
    write_log(logdir, pa.table({"value": [b"a", b"b"],
                                "timestamp": pa.array([T0, None], pa.timestamp("ms"))}),
              topic="c", num_partitions=1, write_time_ms=WRITE_TIME)
    assert [r[1] for r in decode_partition(os.path.join(logdir, "c-0"))] == [T0, WRITE_TIME]
    write_log(logdir, pa.table({"value": [b"a", b"b"],
                                "timestamp": pa.array([T0, T0 + 5], pa.timestamp("ms"))}),
              topic="l", num_partitions=1, timestamp_type="LogAppendTime",
              write_time_ms=WRITE_TIME)
    with open(os.path.join(logdir, "l-0", "00000000000000000000.log"), "rb") as handle:
        batch = MemoryRecords(handle.read()).next_batch()
    assert batch.timestamp_type == 1 and batch.max_timestamp == WRITE_TIME
    assert [r.timestamp for r in batch] == [WRITE_TIME, WRITE_TIME]
    assert batch.first_timestamp == T0  # the records keep their CreateTime, as on a broker


def test_segment_ms_rolls_on_record_time(logdir):
    day = 86_400_000
    ts = [T0 + i * day for i in range(20)]
    write_log(logdir, pa.table({"value": [b"v"] * 20, "timestamp": pa.array(ts, pa.timestamp("ms"))}),
              topic="t", num_partitions=1, batch_size=0)
    assert segments_of(os.path.join(logdir, "t-0")) == [0, 8, 16]  # 7 days per segment


def test_write_rows_and_deterministic_output(tmp_path):
    rows = [{"key": "k", "value": "v", "timestamp": datetime.datetime(2024, 1, 2, 3, 4, 5),
             "headers": [("h", b"1")]},
            {"key": None, "value": b"\x00", "timestamp": T0, "headers": {"a": None}}]
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    # (a fixed topic id: a new topic's is random)
    write_log(a, rows, topic="t", num_partitions=1, write_time_ms=WRITE_TIME,
              topic_id="VGhlIHRvcGljIHQgaWQuLg")
    write_log(b, rows, topic="t", num_partitions=1, write_time_ms=WRITE_TIME,
              topic_id="VGhlIHRvcGljIHQgaWQuLg")
    records = decode_partition(os.path.join(a, "t-0"))
    assert [(r[1], r[3], r[4], r[5]) for r in records] == [
        (1704164645000, b"k", b"v", [("h", b"1")]), (T0, None, b"\x00", [("a", None)])]
    for name in os.listdir(os.path.join(a, "t-0")):
        with open(os.path.join(a, "t-0", name), "rb") as x, open(os.path.join(b, "t-0", name), "rb") as y:
            assert x.read() == y.read()


@pytest.mark.parametrize("table, kwargs, message", [
    (pa.table({"value": [b"v"], "extra": [1]}), {}, "'extra' cannot be written"),
    (pa.table({"key": [b"k"]}), {}, "no 'value' column"),
    (pa.table({"value": [1]}), {}, "column 'value' has type int64"),
    (pa.table({"value": [b"v"], "timestamp": [5]}), {}, "column 'timestamp' has type int64"),
    (pa.table({"value": [b"v"], "partition": ["0"]}), {}, "column 'partition' has type string"),
    (pa.table({"value": [b"v"], "headers": pa.array([[1]])}), {}, "column 'headers'"),
    (pa.table({"value": [b"v"]}), {"topic": None}, "no topic to write to"),
    (pa.table({"value": [b"v"]}), {"topic": "bad/name"}, "characters Kafka does not allow"),
    (pa.table({"value": [b"v"]}), {"topic": ".hidden"}, "starts with '.'"),
    (pa.table({"value": [b"v"]}), {"num_partitions": None}, "set the 'numPartitions' option"),
    (pa.table({"value": [b"v"]}), {"compression": "brotli"}, "'compression.type' must be one of"),
    (pa.table({"value": [b"v"]}), {"batch_size": -1}, "'batch.size' must be between"),
    (pa.table({"value": [b"v"]}), {"options": {"segment.byte": 5}}, "unknown write option 'segment.byte'"),
    (pa.table({"value": [b"v"]}), {"timestamp_type": "Now"}, "CreateTime or LogAppendTime"),
    (pa.table({"value": [b"v"], "timestamp": pa.array([-5], pa.timestamp("ms"))}), {},
     "before 1970"),
    (pa.table({"value": [b"v"], "partition": pa.array([7], pa.int32())}), {},
     "holds 7 for topic 't', which has 3 partitions"),
    (pa.table({"value": [b"v"], "partition": pa.array([-1], pa.int32())}), {}, "holds -1"),
    (pa.table({"topic": pa.array([None], pa.string()), "value": [b"v"]}), {"topic": None},
     "column 'topic' is null"),
])
def test_bad_input_fails_before_anything_is_written(logdir, table, kwargs, message):
    arguments = {"topic": "t", "num_partitions": 3}
    arguments.update(kwargs)
    with pytest.raises((InvalidInputError, InvalidOptionError), match=message):
        write_log(logdir, table, **arguments)
    assert not os.path.exists(logdir)


def test_a_killed_write_leaves_nothing_a_later_write_trips_over(logdir):
    import subprocess
    import sys
    import textwrap

    write_log(logdir, pa.table({"value": [b"kept"] * 3}), topic="t", num_partitions=1)
    script = textwrap.dedent(f"""
        import os, pyarrow as pa
        from segmentlog_datasource.writer import SegmentLogWriter
        w = SegmentLogWriter({logdir!r}, "t")
        w.write_table(pa.table({{"value": [b"lost"] * 1000}}))
        w._task.finish()  # staging file complete, commit never happens
        os._exit(9)       # the driver dies
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    assert subprocess.run([sys.executable, "-c", script], env=env).returncode == 9
    leftovers = sorted(n for n in os.listdir(logdir) if n.startswith(".") and n != PUBLISH_TOKEN)
    assert [n.split("-")[1] for n in leftovers] == ["lock", "staging"]
    # readers do not see the dead write
    assert [r[4] for r in decode_partition(os.path.join(logdir, "t-0"))] == [b"kept"] * 3
    # the next write recognises the dead owner, clears its leftovers and appends
    summary = write_log(logdir, pa.table({"value": [b"new"]}), topic="t")
    assert summary.offsets()[("t", 0)] == (3, 4)
    assert sorted(os.listdir(logdir)) == LOG_DIR_FILES + ["t-0"]
    assert [r[4] for r in decode_partition(os.path.join(logdir, "t-0"))] == [b"kept"] * 3 + [b"new"]


def test_a_partition_directory_is_not_a_log_dir(logdir):
    write_log(logdir, pa.table({"value": [b"v"]}), topic="t", num_partitions=1)
    with pytest.raises(InvalidOptionError, match="it is a partition directory, not a log dir"):
        write_log(os.path.join(logdir, "t-0"), pa.table({"value": [b"v"]}), topic="t")
    assert sorted(os.listdir(os.path.join(logdir, "t-0"))) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex"
    ] + PARTITION_FILES


def test_topic_option_overrides_the_topic_column(logdir):
    write_log(logdir, pa.table({"topic": ["a", "b"], "value": [b"1", b"2"]}), topic="c",
              num_partitions=1)
    assert sorted(decode_logdir(logdir)) == [("c", 0)]


def test_the_engine_has_no_spark_import():
    import ast

    package = str(CHECKOUT / "writer")
    for name in os.listdir(package):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(package, name)) as handle:
            tree = ast.parse(handle.read())
        for node in ast.walk(tree):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [m for m in modules if m.split(".")[0] in ("pyspark", "py4j")], name


def _run_without_spark(script):
    import subprocess
    import sys

    root = str(CHECKOUT)
    blocker = "import sys\nsys.modules['pyspark'] = None\nsys.modules['py4j'] = None\n"
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", blocker + script], env=env,
                          capture_output=True, text=True)


def test_the_engine_runs_where_spark_cannot_be_imported(tmp_path):
    loaded = _run_without_spark("import segmentlog_datasource.format")
    assert loaded.returncode == 0, loaded.stderr
    result = _run_without_spark(
        "import pyarrow as pa\nfrom segmentlog_datasource.writer import write_log\n"
        f"write_log({str(tmp_path / 'log')!r}, pa.table({{'value': [b'v']}}), topic='t', "
        "num_partitions=1)\n")
    assert result.returncode == 0, result.stderr
    assert len(decode_partition(str(tmp_path / "log" / "t-0"))) == 1


def test_chunking_does_not_change_the_log(tmp_path):
    """Input cut into many chunks gives records in the same partitions and order."""
    from segmentlog_datasource.writer import WriteJob
    from segmentlog_datasource.writer.task import TaskWriter

    rows = make_rows(3000, seed=9)
    logs = []
    for name, chunk_bytes in (("one", 1 << 30), ("many", 20_000)):
        path = str(tmp_path / name)
        job = WriteJob(path, topic="t", options=WriteOptions(num_partitions=3, batch_size=2000),
                       write_time_ms=WRITE_TIME).start()
        task = TaskWriter(job.spec, 0, 0, chunk_bytes=chunk_bytes)
        task.write(to_table(rows, False))
        job.commit([task.finish()])
        logs.append(decode_logdir(path))
    assert logs[0] == logs[1]


def test_lz4_levels_compress_as_kafkas_producer(tmp_path):
    """KIP-390: compression.lz4.level 9, Kafka's default, is lz4's fast compressor (the
    bytes of a write without the option); any other level is lz4's high-compression mode
    at that level, in Kafka's frame: smaller batches, the same records for kafka-python."""
    rng = random.Random(25)
    values = [b'{"user":%d,"amount":%d,"currency":"EUR","status":"settled"}'
              % (rng.randrange(10**5), rng.randrange(10**6)) for _ in range(4000)]
    table = pa.table({"value": values,
                      "timestamp": pa.array([T0 + i for i in range(4000)], pa.timestamp("ms"))})
    logs = {}
    for level in (None, 9, 1, 12):
        logdir = str(tmp_path / f"level-{level}")
        options = {} if level is None else {"compression.lz4.level": level}
        write_log(logdir, table, topic="t", num_partitions=1, compression="lz4",
                  batch_size=65536, options=options)
        with open(os.path.join(logdir, "t-0", "%020d.log" % 0), "rb") as handle:
            logs[level] = handle.read()
        records = MemoryRecords(logs[level])
        got = []
        while records.has_next():
            batch = records.next_batch()
            assert batch.validate_crc() and batch.compression_type == 3
            got += [record.value for record in batch]
        assert got == values, level
    assert logs[9] == logs[None]
    assert len(logs[12]) < len(logs[1]) < len(logs[None])


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_many_small_batches_write_the_bytes_of_one_table(tmp_path, codec):
    """Rows handed over as many record batches (as Spark does), whose keys and values the
    encoder reads chunk by chunk in place, give the same segment bytes as one table."""
    table = to_table(make_rows(2000, seed=4), False)
    batches = table.combine_chunks().to_batches(max_chunksize=70)
    assert len(batches) > 20
    written = []
    for name, data in (("whole", table.combine_chunks()), ("batches", batches)):
        path = str(tmp_path / name)
        write_log(path, data, topic="t", num_partitions=3, compression=codec,
                  batch_size=1500, write_time_ms=WRITE_TIME)
        logs = {}
        for partition in range(3):
            directory = os.path.join(path, f"t-{partition}")
            for entry in sorted(os.listdir(directory)):
                if entry.endswith(".log"):
                    with open(os.path.join(directory, entry), "rb") as f:
                        logs[(partition, entry)] = f.read()
        written.append(logs)
    assert written[0] == written[1] and sum(map(len, written[0].values())) > 100_000
