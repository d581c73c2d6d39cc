"""What a write leaves beside its segments, as a broker keeps them (#21): each partition's
leader-epoch-checkpoint and partition.metadata, and the log dir's offset checkpoints,
which readers take their high watermark from. The expected bytes are written out here,
not made with the code under test."""
import os
import textwrap

import pyarrow as pa
import pytest

from segmentlog_datasource.errors import InvalidOptionError
from segmentlog_datasource.format import ScanOptions
from segmentlog_datasource.format.log import PartitionLog
from segmentlog_datasource.read.fragments import scan_fragments
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.read.replicas import consumer_partitions
from segmentlog_datasource.writer import write_log
from segmentlog_datasource.writer.publish import KILL_HOOK
from segmentlog_datasource.writer.stream import StreamSink

from segmentlog_datasource.format.pending import PUBLISH_TOKEN
from support.children import run_script
from support.kafka_logs import decode_logdir

T_ID = "VGhlIHRvcGljIHQgaWQuLg"  # b"The topic t id.."
OTHER_ID = "QW5vdGhlciB0b3BpYyBpZA"  # b"Another topic id"
SMALL = {"segment_bytes": 1024, "batch_size": 256}


def rows(tag, counts, topic=None):
    """`counts[p]` rows for partition p, each value naming its tag, partition and index."""
    values, parts = [], []
    for partition, count in enumerate(counts):
        values += [b"%s-p%d-%02d" % (tag.encode(), partition, i) for i in range(count)]
        parts += [partition] * count
    columns = {"value": values, "partition": pa.array(parts, pa.int32())}
    if topic is not None:
        columns["topic"] = [topic] * len(values)
    return pa.table(columns)


def file_bytes(*parts):
    with open(os.path.join(*parts), "rb") as handle:
        return handle.read()


def put(path, data):
    with open(path, "wb") as handle:
        handle.write(data)


def snapshot(root):
    found = {}
    for directory, _, names in os.walk(root):
        for name in names:
            found[os.path.relpath(os.path.join(directory, name), root)] = \
                file_bytes(directory, name)
    if PUBLISH_TOKEN in found:  # replaced as each publish begins (readers' hint), not data
        found[PUBLISH_TOKEN] = b"<token>"
    return found


def read_values(logdir):
    """{(topic, partition): [(offset, value)]} as a batch read returns them (it stops at the
    high watermark of replication-offset-checkpoint)."""
    found = {}
    fragments = plan_fragments(parse_read_options({"path": logdir}), Constraints())
    for batch in scan_fragments(fragments, ScanOptions()):
        columns = [batch.column(name).to_pylist()
                   for name in ("topic", "partition", "offset", "value")]
        for topic, partition, offset, value in zip(*columns):
            found.setdefault((topic, partition), []).append((offset, value))
    return found


def epochs_of_batches(logdir, topic, partition):
    """[(base offset, partitionLeaderEpoch)] of every batch of the partition."""
    log = PartitionLog.open(os.path.join(logdir, f"{topic}-{partition}"))
    return [(header.base_offset, header.partition_leader_epoch)
            for segment in log.segments for header in segment.iter_headers()]


def offset_entries(logdir, name):
    """{(topic, partition): offset} of an offset checkpoint file, parsed here."""
    lines = file_bytes(logdir, name).decode().split("\n")
    assert lines[0] == "0" and lines[-1] == "" and int(lines[1]) == len(lines) - 3
    return {(topic, int(partition)): int(offset)
            for topic, partition, offset in (line.split(" ") for line in lines[2:-1])}


# ------------------------------------------------------------------- new topic

def test_a_new_topic_gets_kafkas_files_and_reads_back_whole(tmp_path):
    logdir = str(tmp_path / "log")
    write_log(logdir, rows("a", [3, 2, 0]), topic="t", num_partitions=3, topic_id=T_ID)
    assert sorted(os.listdir(logdir)) == [
        PUBLISH_TOKEN, "log-start-offset-checkpoint", "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint", "t-0", "t-1", "t-2"]
    assert file_bytes(logdir, "log-start-offset-checkpoint") == b"0\n0\n"
    # No recovery point: segments are not fsynced, so no flush is claimed.
    assert file_bytes(logdir, "recovery-point-offset-checkpoint") == b"0\n0\n"
    assert file_bytes(logdir, "replication-offset-checkpoint") == b"0\n3\nt 0 3\nt 1 2\nt 2 0\n"
    for partition in range(3):
        assert file_bytes(logdir, f"t-{partition}", "leader-epoch-checkpoint") == b"0\n1\n0 0\n"
        assert file_bytes(logdir, f"t-{partition}", "partition.metadata") == \
            b"version: 0\ntopic_id: VGhlIHRvcGljIHQgaWQuLg"
    logs = {log.topic_partition: log for log in consumer_partitions([logdir])}
    assert sorted(logs) == [("t", 0), ("t", 1), ("t", 2)]
    for log in logs.values():
        assert log.high_watermark == log.end_offset()
        assert log.topic_id() == T_ID and [(e.epoch, e.start_offset)
                                           for e in log.leader_epochs()] == [(0, 0)]
    assert [epoch for _, epoch in epochs_of_batches(logdir, "t", 0)] == [0]  # one batch
    assert read_values(logdir) == {
        ("t", 0): [(i, b"a-p0-%02d" % i) for i in range(3)],
        ("t", 1): [(i, b"a-p1-%02d" % i) for i in range(2)]}


def test_a_new_topic_without_topic_id_gets_one_id_for_every_partition(tmp_path):
    logdir = str(tmp_path / "log")
    write_log(logdir, rows("a", [1, 1]), topic="t", num_partitions=4)
    contents = {file_bytes(logdir, f"t-{p}", "partition.metadata") for p in range(4)}
    assert len(contents) == 1
    (content,) = contents
    assert content.startswith(b"version: 0\ntopic_id: ") and not content.endswith(b"\n")
    topic_id = content.split(b": ")[-1].decode()
    assert len(topic_id) == 22 and topic_id != "A" * 22
    # a second topic gets an id of its own
    write_log(logdir, rows("b", [1]), topic="u", num_partitions=1)
    assert file_bytes(logdir, "u-0", "partition.metadata") != content


# ---------------------------------------------------------------------- append

FOREIGN = {"log-start-offset-checkpoint": b"0\n1\nother 0 10\n",
           "recovery-point-offset-checkpoint": b"0\n2\nother 0 40\nzz 3 7\n",
           "replication-offset-checkpoint": b"0\n2\nother 0 42\nzz 3 7\n",
           "cleaner-offset-checkpoint": b"0\n1\nother 0 5\n"}


def test_an_append_moves_its_own_entries_and_keeps_everyone_elses(tmp_path):
    logdir = str(tmp_path / "log")
    os.makedirs(logdir)
    for name, data in FOREIGN.items():  # a broker's log dir, its other topics elsewhere
        put(os.path.join(logdir, name), data)
    write_log(logdir, rows("a", [3, 2]), topic="t", num_partitions=2, **SMALL)
    assert file_bytes(logdir, "replication-offset-checkpoint") == \
        b"0\n4\nother 0 42\nt 0 3\nt 1 2\nzz 3 7\n"
    write_log(logdir, rows("u", [4]), topic="u", num_partitions=1, **SMALL)
    write_log(logdir, rows("b", [5]), topic="t", **SMALL)  # partition 0 only
    assert file_bytes(logdir, "recovery-point-offset-checkpoint") == FOREIGN[
        "recovery-point-offset-checkpoint"]
    assert file_bytes(logdir, "replication-offset-checkpoint") == \
        b"0\n5\nother 0 42\nt 0 8\nt 1 2\nu 0 4\nzz 3 7\n"
    assert file_bytes(logdir, "log-start-offset-checkpoint") == b"0\n1\nother 0 10\n"
    assert file_bytes(logdir, "cleaner-offset-checkpoint") == b"0\n1\nother 0 5\n"
    # the epoch did not change: the partition's file stays as it was
    assert file_bytes(logdir, "t-0", "leader-epoch-checkpoint") == b"0\n1\n0 0\n"
    for log in consumer_partitions([logdir]):
        assert log.high_watermark == log.end_offset()
    assert [value for _, value in read_values(logdir)[("t", 0)]] == \
        [b"a-p0-%02d" % i for i in range(3)] + [b"b-p0-%02d" % i for i in range(5)]


def test_an_append_lifts_a_stale_high_watermark(tmp_path):
    """A broker's checkpoint may lag its log: once the write is done, all of it is read."""
    logdir = str(tmp_path / "log")
    write_log(logdir, rows("a", [4]), topic="t", num_partitions=1)
    put(os.path.join(logdir, "replication-offset-checkpoint"), b"0\n1\nt 0 1\n")
    assert len(read_values(logdir)[("t", 0)]) == 1
    write_log(logdir, rows("b", [2]), topic="t")
    assert file_bytes(logdir, "replication-offset-checkpoint") == b"0\n1\nt 0 6\n"
    assert len(read_values(logdir)[("t", 0)]) == 6


def test_leader_epochs_grow_and_are_stamped_on_the_batches(tmp_path):
    logdir = str(tmp_path / "log")
    write_log(logdir, rows("a", [3, 1]), topic="t", num_partitions=2, batch_size=0)
    write_log(logdir, rows("b", [2]), topic="t", leader_epoch=3, batch_size=0)
    assert file_bytes(logdir, "t-0", "leader-epoch-checkpoint") == b"0\n2\n0 0\n3 3\n"
    assert file_bytes(logdir, "t-1", "leader-epoch-checkpoint") == b"0\n1\n0 0\n"  # not written
    assert epochs_of_batches(logdir, "t", 0) == [(0, 0), (1, 0), (2, 0), (3, 3), (4, 3)]
    # without the option a partition stays at its epoch: no new entry
    write_log(logdir, rows("c", [1]), topic="t", batch_size=0)
    assert epochs_of_batches(logdir, "t", 0)[-1] == (5, 3)
    assert file_bytes(logdir, "t-0", "leader-epoch-checkpoint") == b"0\n2\n0 0\n3 3\n"
    # given as a Kafka-named option too (a string, as Spark passes it)
    write_log(logdir, rows("d", [1]), topic="t", options={"leaderEpoch": "7"}, batch_size=0)
    assert file_bytes(logdir, "t-0", "leader-epoch-checkpoint") == b"0\n3\n0 0\n3 3\n7 6\n"
    # lower than the partition's current epoch: refused, nothing written
    before = snapshot(logdir)
    with pytest.raises(InvalidOptionError, match=r"'leaderEpoch' is 6, below the current "
                                                 r"leader epoch 7 of .*t-0") as info:
        write_log(logdir, rows("e", [1]), topic="t", leader_epoch=6)
    assert info.value.option == "leaderEpoch"
    assert snapshot(logdir) == before
    with pytest.raises(InvalidOptionError, match="'leaderEpoch' must be between 0"):
        write_log(logdir, rows("e", [1]), topic="t", leader_epoch=-1)
    # an overwrite rewrites the partitions, and goes on from their epoch
    write_log(logdir, rows("f", [1, 1]), topic="t", mode="overwrite")
    assert file_bytes(logdir, "t-0", "leader-epoch-checkpoint") == b"0\n1\n7 0\n"
    assert file_bytes(logdir, "t-1", "leader-epoch-checkpoint") == b"0\n1\n0 0\n"
    assert epochs_of_batches(logdir, "t", 0) == [(0, 7)]


def test_a_partition_without_an_epoch_file_gets_one_from_its_batches(tmp_path):
    """A partition written before these files (or by a broker that lost them): its batches'
    epochs become its entries, as a broker rebuilds them."""
    logdir = str(tmp_path / "log")
    write_log(logdir, rows("a", [2]), topic="t", num_partitions=1, batch_size=0)
    write_log(logdir, rows("b", [2]), topic="t", leader_epoch=4, batch_size=0)
    for name in ("leader-epoch-checkpoint", "partition.metadata"):
        os.unlink(os.path.join(logdir, "t-0", name))
    write_log(logdir, rows("c", [1]), topic="t", topic_id=T_ID, batch_size=0)
    assert file_bytes(logdir, "t-0", "leader-epoch-checkpoint") == b"0\n2\n0 0\n4 2\n"
    assert file_bytes(logdir, "t-0", "partition.metadata") == \
        b"version: 0\ntopic_id: VGhlIHRvcGljIHQgaWQuLg"
    assert epochs_of_batches(logdir, "t", 0)[-1] == (4, 4)


def test_a_topic_keeps_its_id(tmp_path):
    logdir = str(tmp_path / "log")
    write_log(logdir, rows("a", [1, 1]), topic="t", num_partitions=2, topic_id=T_ID)
    os.unlink(os.path.join(logdir, "t-1", "partition.metadata"))
    write_log(logdir, rows("b", [1, 1]), topic="t")  # the id t-0 has goes to t-1 too
    write_log(logdir, rows("c", [1]), topic="t", topic_id=T_ID)  # the same id: fine
    for partition in range(2):
        assert file_bytes(logdir, f"t-{partition}", "partition.metadata") == \
            b"version: 0\ntopic_id: VGhlIHRvcGljIHQgaWQuLg"
    before = snapshot(logdir)
    with pytest.raises(InvalidOptionError, match=f"'topicId' is {OTHER_ID}, but topic 't' .* "
                                                 f"already has topic id {T_ID}") as info:
        write_log(logdir, rows("d", [1]), topic="t", topic_id=OTHER_ID)
    assert info.value.option == "topicId"
    with pytest.raises(InvalidOptionError, match=f"topic id {T_ID}"):
        write_log(logdir, rows("d", [1]), topic="t", mode="overwrite", topic_id=OTHER_ID)
    for malformed in ("not-an-id", T_ID + "A", "VGhlIHRvcGljIHQgaWQuL=", "A" * 22):
        with pytest.raises(InvalidOptionError, match="'topicId'") as info:
            write_log(logdir, rows("d", [1]), topic="t", options={"topicId": malformed})
        assert info.value.option == "topicId"
    # one id cannot name two topics
    with pytest.raises(InvalidOptionError, match="'topicId' gives one topic's id"):
        write_log(logdir, pa.concat_tables([rows("d", [1], topic="t"),
                                            rows("d", [1], topic="u")]),
                  num_partitions=None, topic_id=T_ID)
    assert snapshot(logdir) == before
    # an overwrite keeps the id
    write_log(logdir, rows("e", [1]), topic="t", mode="overwrite", num_partitions=1)
    assert file_bytes(logdir, "t-0", "partition.metadata") == \
        b"version: 0\ntopic_id: VGhlIHRvcGljIHQgaWQuLg"


def test_an_overwrite_drops_the_entries_of_what_it_replaces(tmp_path):
    logdir = str(tmp_path / "log")
    write_log(logdir, rows("a", [3, 3, 3]), topic="t", num_partitions=3)
    put(os.path.join(logdir, "log-start-offset-checkpoint"),
        b"0\n3\nother 0 10\nt 0 1\nt 2 2\n")
    put(os.path.join(logdir, "cleaner-offset-checkpoint"), b"0\n2\nother 0 5\nt 1 3\n")
    write_log(logdir, rows("b", [2, 1]), topic="t", mode="overwrite", num_partitions=2)
    assert sorted(n for n in os.listdir(logdir) if n.startswith("t-")) == ["t-0", "t-1"]
    assert file_bytes(logdir, "log-start-offset-checkpoint") == b"0\n1\nother 0 10\n"
    assert file_bytes(logdir, "cleaner-offset-checkpoint") == b"0\n1\nother 0 5\n"
    assert file_bytes(logdir, "recovery-point-offset-checkpoint") == b"0\n0\n"
    assert file_bytes(logdir, "replication-offset-checkpoint") == b"0\n2\nt 0 2\nt 1 1\n"
    assert {key: len(values) for key, values in read_values(logdir).items()} == \
        {("t", 0): 2, ("t", 1): 1}


def test_a_stream_sinks_micro_batches_move_the_high_watermark(tmp_path):
    from segmentlog_datasource.writer import WriteOptions

    logdir = str(tmp_path / "log")
    sink = StreamSink(logdir, "q1", topic="t", options=WriteOptions(num_partitions=2))
    for batch in range(3):
        assert sink.commit(batch, [sink.stage(batch, [rows(f"s{batch}", [2, 1])])]).status \
            == "committed"
        assert file_bytes(logdir, "replication-offset-checkpoint") == \
            b"0\n2\nt 0 %d\nt 1 %d\n" % (2 * (batch + 1), batch + 1)
        assert {key: len(values) for key, values in read_values(logdir).items()} == \
            {("t", 0): 2 * (batch + 1), ("t", 1): batch + 1}
    assert file_bytes(logdir, "recovery-point-offset-checkpoint") == b"0\n0\n"


# ------------------------------------------------------------------------ kills

KILLED_APPEND = """
import sys, pyarrow as pa
from segmentlog_datasource.writer import write_log
values = [b"killed-%03d" % i for i in range(30)]  # one new segment: 3 renames
write_log(sys.argv[1], pa.table({"value": values, "partition": pa.array([0] * 30, pa.int32())}),
          topic="t", leader_epoch=2, segment_bytes=1024, batch_size=256)
"""


def check_checkpoints_within_the_files(logdir):
    """No checkpoint claims an offset that the partition's files (as a broker finds them,
    an unfinished publish's included) do not hold."""
    held = decode_logdir(logdir)
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        for key, offset in offset_entries(logdir, name).items():
            records = held.get(key, [])
            assert offset <= (records[-1][0] + 1 if records else 0), (name, key, offset)
    for log in consumer_partitions([logdir]):
        assert all(entry.start_offset <= log.end_offset() for entry in log.leader_epochs())


# Killed after its segment's three renames (no checkpoint changed yet), and after its
# leader-epoch-checkpoint and high watermark: the high watermark of t-0 then.
@pytest.mark.parametrize("step, high_watermark", [(3, 3), (5, 33)])
def test_a_killed_publish_never_claims_more_and_the_next_write_completes_it(
        tmp_path, step, high_watermark):
    logdir = str(tmp_path / "log")
    write_log(logdir, rows("a", [3, 2]), topic="t", num_partitions=2, **SMALL)
    done = run_script(textwrap.dedent(KILLED_APPEND), [logdir], env={KILL_HOOK: str(step)})
    assert done.returncode == -9, done.stderr
    assert any(name.startswith(".segmentlog-staging-") for name in os.listdir(logdir))
    assert offset_entries(logdir, "replication-offset-checkpoint")[("t", 0)] == high_watermark
    assert offset_entries(logdir, "recovery-point-offset-checkpoint") == {}
    check_checkpoints_within_the_files(logdir)
    # until the publish is settled, readers see the log as it was before it (#22)
    assert len(read_values(logdir)[("t", 0)]) == 3
    # the next write finishes the killed publish (checkpoints included), then appends
    write_log(logdir, rows("b", [1, 1]), topic="t", **SMALL)
    assert [n for n in os.listdir(logdir) if n.startswith(".") and n != PUBLISH_TOKEN] == []
    logs = {log.topic_partition: log for log in consumer_partitions([logdir])}
    assert {key: log.end_offset() for key, log in logs.items()} == {("t", 0): 34, ("t", 1): 3}
    assert offset_entries(logdir, "replication-offset-checkpoint") == {("t", 0): 34, ("t", 1): 3}
    assert offset_entries(logdir, "recovery-point-offset-checkpoint") == {}
    assert file_bytes(logdir, "t-0", "leader-epoch-checkpoint") == b"0\n2\n0 0\n2 3\n"
    assert [value[:6] for _, value in read_values(logdir)[("t", 0)]] == \
        [b"a-p0-0"] * 3 + [b"killed"] * 30 + [b"b-p0-0"]


KILLED_COMMIT_OF_A_LIVE_JOB = """
import pickle, sys, pyarrow as pa
from segmentlog_datasource.writer import WriteJob, WriteOptions
job = WriteJob(sys.argv[1], mode="append", topic="t", options=WriteOptions(
    leader_epoch=2, segment_bytes=1024, batch_size=256)).start()
task = job.task_writer(0)
task.write(pa.table({"value": [b"killed-%03d" % i for i in range(30)],
                     "partition": pa.array([0] * 30, pa.int32())}))
result = task.finish()
with open(sys.argv[1] + ".job", "wb") as handle:
    pickle.dump(job, handle)
job.commit([result])
"""


def test_a_killed_publish_rolled_back_puts_the_checkpoints_back(tmp_path):
    """Spark's abort of a job whose committing worker died undoes the publish: the
    checkpoints it had changed go back first, byte for byte."""
    import pickle

    logdir = str(tmp_path / "log")
    write_log(logdir, rows("a", [3, 2]), topic="t", num_partitions=2, **SMALL)
    before = snapshot(logdir)
    done = run_script(textwrap.dedent(KILLED_COMMIT_OF_A_LIVE_JOB), [logdir],
                      env={KILL_HOOK: "5"})  # its epoch file and high watermark moved
    assert done.returncode == -9, done.stderr
    assert offset_entries(logdir, "replication-offset-checkpoint")[("t", 0)] == 33
    with open(logdir + ".job", "rb") as handle:
        job = pickle.load(handle)
    job.abort()
    assert snapshot(logdir) == before  # no lock, staging or temporary file left either


def test_writes_to_other_topics_publishing_at_once_keep_each_others_entries(tmp_path):
    """Each publish changes its own entries of the shared files under the log dir's
    checkpoint lock, so none overwrites another's."""
    import threading

    logdir = str(tmp_path / "log")
    topics = ["a", "b", "c"]
    for topic in topics:
        write_log(logdir, rows(topic, [1, 1]), topic=topic, num_partitions=2)
    errors = []

    def appends(topic):
        try:
            for round_ in range(6):
                write_log(logdir, rows(f"{topic}{round_}", [1, 2]), topic=topic)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=appends, args=(topic,)) for topic in topics]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    wanted = {(topic, partition): 1 + 6 * (partition + 1) for topic in topics
              for partition in range(2)}
    assert offset_entries(logdir, "replication-offset-checkpoint") == wanted
    assert offset_entries(logdir, "recovery-point-offset-checkpoint") == {}
    assert [n for n in os.listdir(logdir) if n.startswith(".") and n != PUBLISH_TOKEN or n.endswith(".tmp")] == []
