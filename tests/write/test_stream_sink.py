"""The streaming sink engine without Spark: micro-batches committed once, replays ignored,
a commit stopped at any step settled by the next one, aborts and dead attempts cleaned."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from segmentlog_datasource.format import (
    ScanOptions, SegmentRange, discover_partitions, scan_segment,
)
from segmentlog_datasource.writer import (
    InvalidOptionError, WriteError, WriteOptions, write_log,
)
from segmentlog_datasource.writer.errors import SinkStateError
from segmentlog_datasource.writer.lockfiles import owner_alive, owner_info
from segmentlog_datasource.writer.stream import StreamSink, read_query_id

from support.kafka_logs import decode_logdir, kafka_partition
from support.stream_sink import leftovers, sink_records, tree_bytes

QUERY = "5f0c7d2e-0c1e-4a57-9a43-1d2f6b0e8c11"


@pytest.fixture
def logdir(tmp_path):
    return str(tmp_path / "logdir")


def make_sink(logdir, query=QUERY, topic="t", partitions=3, **options):
    options = dict(options)
    if partitions is not None:
        options["numPartitions"] = partitions
    return StreamSink(logdir, query, topic=topic, options=WriteOptions.from_mapping(options))


def batch_rows(batch, n, keyless_every=5):
    """Rows whose values say which batch and row they are; every fifth is keyless."""
    return [(None if i % keyless_every == 0 else f"key-{i % 11}".encode(),
             f"b{batch}-r{i}".encode()) for i in range(n)]


def stage(sink, batch, rows, tasks=2, attempt=0):
    """Split rows over `tasks` tasks (in order) and stage each."""
    step = -(-len(rows) // tasks)
    staged = []
    for index in range(tasks):
        part = rows[index * step:(index + 1) * step]
        table = pa.table({"key": pa.array([k for k, _ in part], pa.binary()),
                          "value": pa.array([v for _, v in part], pa.binary())})
        staged.append(sink.stage(batch, [table], index, attempt))
    return staged


def read_with_segmentlog(logdir):
    """{(topic, partition): [(offset, key, value)]} through segmentlog's own reader."""
    found = {}
    for log in discover_partitions([logdir]):
        got = []
        for segment in log.segments:
            for batch in scan_segment(SegmentRange(
                    log.topic, log.partition, segment.log_path, segment.size, 0, segment.size, 0,
                    2**62, False), ScanOptions()):
                got.extend(zip(batch.column("offset").to_pylist(), batch.column("key").to_pylist(),
                               batch.column("value").to_pylist()))
        found[(log.topic, log.partition)] = got
    return found


def check_log(logdir, batches, topic="t", partitions=3):
    """The log holds every row of `batches` ([(batch id, rows)], in commit order) once:
    keyed rows in Kafka's partition for their key, each partition in batch order and,
    within a batch, in row order; kafka-python and segmentlog's reader agree."""
    decoded = decode_logdir(logdir)
    assert sorted(decoded) == [(topic, p) for p in range(partitions)]
    ours = read_with_segmentlog(logdir)
    assert sorted(ours) == sorted(decoded)
    for key in decoded:
        assert [(r[0], r[3], r[4]) for r in decoded[key]] == ours[key]
    written = [v for records in decoded.values() for (_, _, _, _, v, _) in records]
    expected = [v for _, rows in batches for _, v in rows]
    assert sorted(written) == sorted(expected)  # each once
    order = {v: n for n, v in enumerate(expected)}
    for (_, partition), records in decoded.items():
        values = [r[4] for r in records]
        assert values == sorted(values, key=order.__getitem__)
        for _, _, _, k, v, _ in records:
            if k is not None:
                assert kafka_partition(k, partitions) == partition
    return decoded


def test_batches_commit_in_order_and_read_back(logdir):
    sink = make_sink(logdir)
    batches = []
    for batch in range(3):
        rows = batch_rows(batch, 200 + 50 * batch)
        outcome = sink.commit(batch, stage(sink, batch, rows))
        assert outcome.status == "committed" and outcome.summary.records == len(rows)
        batches.append((batch, rows))
        assert leftovers(logdir) == []  # no staging area, no lock
    check_log(logdir, batches)
    record = sink_records(logdir)[QUERY]
    assert record["committed_batch"] == 2 and record["pending"] is None
    last = outcome.summary.offsets()
    assert {(t, int(p)): tuple(r) for t, ps in record["last_commit"]["partitions"].items()
            for p, r in ps.items()} == last
    # the record is a plain dot-file: readers and the writer's topic listing skip it, and
    # the log dir holds nothing else a broker would trip over (its checkpoint files are
    # those a broker keeps)
    assert sorted(os.listdir(logdir)) == sorted([f".segmentlog-sink-{QUERY}.json",
                                                 ".segmentlog-publishing",
                                                 "t-0", "t-1", "t-2",
                                                 "log-start-offset-checkpoint",
                                                 "recovery-point-offset-checkpoint",
                                                 "replication-offset-checkpoint"])
    assert os.path.isfile(os.path.join(logdir, f".segmentlog-sink-{QUERY}.json"))
    assert [(log.topic, log.partition) for log in discover_partitions([logdir])] == \
        [("t", 0), ("t", 1), ("t", 2)]
    assert make_sink(logdir).committed_batch() == 2


def test_a_replayed_batch_is_not_appended_again(logdir):
    sink = make_sink(logdir)
    batches = [(b, batch_rows(b, 120)) for b in range(2)]
    for batch, rows in batches:
        sink.commit(batch, stage(sink, batch, rows))
    before = tree_bytes(logdir)
    # a restarted query: a new sink (another run) replays batch 1, then batch 0
    restarted = make_sink(logdir)
    for batch in (1, 0):
        staged = stage(restarted, batch, batch_rows(batch, 120))
        assert any(n.startswith(".segmentlog-staging-") for n in os.listdir(logdir))
        assert restarted.commit(batch, staged).status == "replay"
        assert tree_bytes(logdir) == before
        assert leftovers(logdir) == []
    rows = batch_rows(2, 30)
    assert restarted.commit(2, stage(restarted, 2, rows)).status == "committed"
    check_log(logdir, batches + [(2, rows)])


class Stop(Exception):
    """Raised from a commit hook: the commit stops there."""


def stop(summary):
    raise Stop("stopped")


def test_a_commit_stopped_after_publishing_counts_as_committed(logdir):
    sink = make_sink(logdir)
    first = batch_rows(0, 100)
    sink.commit(0, stage(sink, 0, first))
    second = batch_rows(1, 100)
    with pytest.raises(Stop):
        sink.commit(1, stage(sink, 1, second), after_publish=stop)
    record = sink_records(logdir)[QUERY]
    assert record["committed_batch"] == 0 and record["pending"]["batch"] == 1
    assert leftovers(logdir) == []
    check_log(logdir, [(0, first), (1, second)])  # published
    ends = {p: r[1] for p, r in record["pending"]["partitions"]["t"].items()}
    assert ends == {str(p): len(decode_logdir(logdir)[("t", p)]) for p in range(3)}
    # Spark replays batch 1 (its rows need not be the same): the pending batch is settled
    # as committed and the replay discarded
    outcome = make_sink(logdir).commit(1, stage(sink, 1, batch_rows(1, 50, keyless_every=2)))
    assert outcome.status == "replay"
    record = sink_records(logdir)[QUERY]
    assert record["committed_batch"] == 1 and record["pending"] is None
    check_log(logdir, [(0, first), (1, second)])
    assert leftovers(logdir) == []


def test_a_commit_stopped_before_publishing_is_written_again(logdir):
    sink = make_sink(logdir, topic="fresh", partitions=2)  # a topic the batch creates
    rows = batch_rows(0, 80)
    with pytest.raises(Stop):
        sink.commit(0, stage(sink, 0, rows), before_publish=stop)
    record = sink_records(logdir)[QUERY]
    assert record["committed_batch"] == -1
    offsets = record["pending"]["partitions"]["fresh"]
    assert sorted(offsets) == ["0", "1"] and all(before is None for before, _ in offsets.values())
    assert sum(after for _, after in offsets.values()) == len(rows)
    assert os.listdir(logdir) == [f".segmentlog-sink-{QUERY}.json"]  # nothing visible
    outcome = make_sink(logdir, topic="fresh", partitions=2).commit(0, stage(sink, 0, rows))
    assert outcome.status == "committed"
    check_log(logdir, [(0, rows)], topic="fresh", partitions=2)
    assert sink_records(logdir)[QUERY]["pending"] is None


def test_a_pending_batch_the_log_does_not_match_is_an_error(logdir):
    sink = make_sink(logdir)
    sink.commit(0, stage(sink, 0, batch_rows(0, 60)))
    with pytest.raises(Stop):
        sink.commit(1, stage(sink, 1, batch_rows(1, 60)), after_publish=stop)
    # another writer appends to partition 1 before the query comes back
    write_log(logdir, pa.table({"value": [b"other"], "partition": pa.array([1], pa.int32())}),
              topic="t")
    before = open(os.path.join(logdir, f".segmentlog-sink-{QUERY}.json")).read()
    with pytest.raises(SinkStateError) as caught:
        sink.commit(1, stage(sink, 1, batch_rows(1, 60)))
    message = str(caught.value)
    pending = json.loads(before)["pending"]["partitions"]["t"]
    assert f"Neither: t-1: log end offset {pending['1'][1] + 1}" in message
    assert f"At their 'after' offset: t-0: log end offset {pending['0'][1]}" in message
    assert "micro-batch 1" in message and "remove 'pending'" in message
    assert open(os.path.join(logdir, f".segmentlog-sink-{QUERY}.json")).read() == before
    assert leftovers(logdir) == []


KILLED_COMMIT = """
import os, signal, sys
import pyarrow as pa
from segmentlog_datasource.writer import WriteOptions
from segmentlog_datasource.writer.stream import StreamSink

logdir, query, step = sys.argv[1:4]
sink = StreamSink(logdir, query, topic="t", options=WriteOptions(num_partitions=3))
rows = [(f"key-{i % 11}".encode(), f"b1-r{i}".encode()) for i in range(100)]
table = pa.table({"key": [k for k, _ in rows], "value": [v for _, v in rows]})
kill = lambda summary: os.kill(os.getpid(), signal.SIGKILL)
StreamSink(logdir, "another-query", topic="t").stage(0, [table])  # its driver dies too
sink.commit(1, [sink.stage(1, [table])], **{step: kill})
"""


@pytest.mark.parametrize("step, status", [("before_publish", "committed"),
                                          ("after_publish", "replay")])
def test_a_killed_commit_is_settled_by_the_next(logdir, step, status):
    sink = make_sink(logdir)
    first = batch_rows(0, 50)
    sink.commit(0, stage(sink, 0, first))
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(KILLED_COMMIT), logdir,
                             QUERY, step])
    assert result.returncode == -9
    # the dead commit left its lock, its staging area and its intent
    names = leftovers(logdir)
    assert f".segmentlog-lock-.sink-{QUERY}" in names and ".segmentlog-lock-t" in names
    assert any(n.startswith(f".segmentlog-staging-stream-{QUERY}-1-") for n in names)
    assert any(n.startswith(".segmentlog-staging-stream-another-query-0-") for n in names)
    assert sink_records(logdir)[QUERY]["pending"]["batch"] == 1
    second = [(f"key-{i % 11}".encode(), f"b1-r{i}".encode()) for i in range(100)]
    assert make_sink(logdir).commit(1, stage(sink, 1, second, tasks=1)).status == status
    check_log(logdir, [(0, first), (1, second)])
    assert leftovers(logdir) == []
    record = sink_records(logdir)[QUERY]
    assert record["committed_batch"] == 1 and record["pending"] is None


def test_a_killed_owner_not_yet_reaped_counts_as_dead():
    child = subprocess.Popen(
        [sys.executable, "-c", "import json; from segmentlog_datasource.writer.lockfiles import "
         "owner_info; print(json.dumps(owner_info()), flush=True)"], stdout=subprocess.PIPE)
    info = json.loads(child.stdout.readline())
    child.stdout.read()

    def state():
        return open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[0]

    deadline = time.monotonic() + 30
    while state() != "Z" and time.monotonic() < deadline:  # exited, not reaped until wait()
        time.sleep(0.01)
    assert state() == "Z"
    assert owner_alive(info) is False
    child.wait()
    assert owner_alive(info) is False
    assert owner_alive(owner_info()) is True


def test_abort_and_dead_attempts_leave_nothing(logdir):
    sink = make_sink(logdir)
    first = batch_rows(0, 40)
    sink.commit(0, stage(sink, 0, first))
    before = tree_bytes(logdir)
    record_before = sink_records(logdir)
    # a failed micro-batch: one task finished, one attempt died without reporting
    stage(sink, 1, batch_rows(1, 40), tasks=1)
    stage(sink, 1, batch_rows(1, 40), tasks=1, attempt=1)
    sink.abort(1)
    assert leftovers(logdir) == [] and tree_bytes(logdir) == before
    assert sink_records(logdir) == record_before
    # batch 1 again: attempt 0 of its task died, attempt 1 reported; a straggler of
    # batch 0 staged late, and another query is in the middle of a batch
    stage(sink, 0, batch_rows(0, 10), tasks=1)
    other = make_sink(logdir, query="other-query")
    other_staged = stage(other, 4, batch_rows(4, 10), tasks=1)
    stage(sink, 1, batch_rows(1, 40), tasks=1, attempt=0)
    second = batch_rows(1, 40, keyless_every=3)
    assert sink.commit(1, stage(sink, 1, second, tasks=1, attempt=1)).status == "committed"
    assert [n.startswith(".segmentlog-staging-stream-other-query-4-")
            for n in leftovers(logdir)] == [True]
    check_log(logdir, [(0, first), (1, second)])
    other.commit(4, other_staged)
    assert leftovers(logdir) == []
    assert sorted(sink_records(logdir)) == sorted([QUERY, "other-query"])


def test_empty_batches_and_queries_kept_apart(logdir):
    sink = make_sink(logdir)
    assert sink.commit(0, stage(sink, 0, [])).status == "empty"
    assert sink.commit(1, []).status == "empty"
    assert os.listdir(logdir) == [f".segmentlog-sink-{QUERY}.json"]
    assert sink_records(logdir)[QUERY]["committed_batch"] == 1
    rows = batch_rows(2, 30)
    sink.commit(2, stage(sink, 2, rows))
    # another query's batch 0 is its own: appended, not taken for a replay
    other = make_sink(logdir, query="q2")
    more = batch_rows(0, 30)
    assert other.commit(0, stage(other, 0, more)).status == "committed"
    check_log(logdir, [(2, rows), (0, more)])
    assert sink.commit(2, stage(sink, 2, rows)).status == "replay"


def test_a_second_commit_of_the_query_at_once_is_refused(logdir):
    sink = make_sink(logdir)
    sink.commit(0, stage(sink, 0, batch_rows(0, 20)))
    inner = make_sink(logdir)

    def commit_meanwhile(summary):
        inner.commit(2, stage(inner, 2, batch_rows(2, 20)))

    from segmentlog_datasource.writer import ConcurrentWriteError

    with pytest.raises(ConcurrentWriteError, match="another commit of streaming query"):
        sink.commit(1, stage(sink, 1, batch_rows(1, 20)), before_publish=commit_meanwhile)


def test_bad_input_is_named(logdir, tmp_path):
    with pytest.raises(InvalidOptionError, match="numPartitions"):
        make_sink(logdir, partitions=None)
    with pytest.raises(InvalidOptionError, match="query id '../x'"):
        make_sink(logdir, query="../x")
    sink = make_sink(logdir)
    with pytest.raises(WriteError, match="micro-batch 1 .* task of micro-batch 0"):
        sink.commit(1, stage(sink, 0, batch_rows(0, 5)))
    assert not os.path.exists(os.path.join(logdir, "t-0"))
    with pytest.raises(InvalidOptionError, match="unknown write option 'linger.ms'"):
        make_sink(logdir, **{"linger.ms": 5})


def test_query_id_from_the_checkpoint(tmp_path, monkeypatch):
    checkpoint = tmp_path / "check point"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text(json.dumps({"id": QUERY}) + "\n")
    assert read_query_id(str(checkpoint)) == QUERY
    assert read_query_id("file://" + str(checkpoint).replace(" ", "%20")) == QUERY
    monkeypatch.chdir(tmp_path)
    assert read_query_id("check point") == QUERY
    with pytest.raises(InvalidOptionError, match="needs option 'checkpointLocation'"):
        read_query_id(None)
    with pytest.raises(InvalidOptionError, match="'hdfs://nn/cp'.*only local paths"):
        read_query_id("hdfs://nn/cp")
    with pytest.raises(SinkStateError, match=r"cannot read the query id from .*missing/metadata"):
        read_query_id(str(tmp_path / "missing"))
    (checkpoint / "metadata").write_text("not json")
    with pytest.raises(SinkStateError, match="does not hold a streaming query id"):
        read_query_id(str(checkpoint))
