"""A writer process killed (SIGKILL) after each rename of its publish (#9): the next write
finishes the interrupted publish from its journal, so every partition then holds all of
the killed job's records or none, the job as a whole all or none, and that write works.

The kill comes from the test hook SEGMENTLOG_TEST_KILL_AT_STEP=N (writer/publish.py): the
process kills itself right after its Nth publishing rename.
"""
import os
import pickle
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from segmentlog_datasource.writer import WriteOptions, write_log
from segmentlog_datasource.writer.publish import JOURNAL, KILL_HOOK
from segmentlog_datasource.writer.stream import StreamSink

from support.kafka_logs import decode_logdir
from support.stream_sink import leftovers, sink_records

SMALL = {"segment_bytes": 1024, "batch_size": 256}  # several segments per partition
TESTS_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# shared with the child processes, which build the same rows
ROWS = """
import pyarrow as pa

def rows(tag, per_partition, partitions, topic=None):
    \"\"\"Rows placed by an explicit partition, values naming their tag and partition.\"\"\"
    values, parts = [], []
    for partition in partitions:
        for i in range(per_partition):
            values.append(b"%s-p%d-%03d-" % (tag.encode(), partition, i) + b"x" * 60)
            parts.append(partition)
    columns = {"value": values, "partition": pa.array(parts, pa.int32())}
    if topic is not None:
        columns["topic"] = [topic] * len(values)
    return pa.table(columns)

def append_job():
    # three partitions of t (one of them empty so far) and a new topic n
    return pa.concat_tables([rows("job", 25, [0, 1, 2], topic="t"),
                             rows("job", 25, [0, 1], topic="n")])
"""
exec(ROWS)


def run_child(script, logdir, step):
    """Run `script` with the kill hook at `step`; True if it was killed."""
    env = dict(os.environ, PYTHONPATH=TESTS_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONDONTWRITEBYTECODE="1")
    env[KILL_HOOK] = str(step)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), logdir], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, -9), done.stderr
    return done.returncode == -9


def values_by_partition(logdir):
    return {key: [r[4] for r in records] for key, records in decode_logdir(logdir).items()}


def killed_job_outcome(before, after, job, extra):
    """Per partition "all" or "none" of the killed job's records (anything else fails),
    given the values before the job, the killed job's and the next write's."""
    outcomes = {}
    for key in sorted(set(after) | set(job)):
        got, old = after.get(key, []), before.get(key, [])
        new, tail = job.get(key, []), extra.get(key, [])
        assert len(set(got)) == len(got), f"{key}: duplicated records"
        if new and got == old + new + tail:
            outcomes[key] = "all"
        elif got == old + tail:
            outcomes[key] = "none"
        else:
            raise AssertionError(f"{key} holds part of the killed job: {len(got)} records")
    return outcomes


# ----------------------------------------------------------------- batch writes

APPEND_AND_CREATE = ROWS + """
import sys
from segmentlog_datasource.writer import write_log
write_log(sys.argv[1], append_job(), mode="append", segment_bytes=1024, batch_size=256)
"""


def seed_append(logdir):
    # t-2 stays empty: the append moves its empty segment 0 aside
    write_log(logdir, rows("old", 20, [0, 1], topic="t"), num_partitions=3, **SMALL)


def expected_job_values(table):
    found = {}
    for topic, partition, value in zip(table.column("topic").to_pylist(),
                                       table.column("partition").to_pylist(),
                                       table.column("value").to_pylist()):
        found.setdefault((topic, partition), []).append(value)
    return found


def next_write(logdir):
    table = pa.concat_tables([rows("next", 2, [0, 1, 2], topic="t"),
                              rows("next", 2, [0, 1], topic="n")])
    write_log(logdir, table, mode="append", num_partitions=None, **SMALL)
    return expected_job_values(table)


def test_append_and_create_killed_after_every_rename(tmp_path):
    script = APPEND_AND_CREATE
    job = expected_job_values(append_job())
    step, kills = 1, 0
    while True:
        logdir = str(tmp_path / f"log-{step}")
        seed_append(logdir)
        before = values_by_partition(logdir)
        if not run_child(script, logdir, step):
            break  # the job published before its Nth rename: every step was covered
        kills += 1
        assert any(n.startswith(".segmentlog-staging-") for n in os.listdir(logdir))
        extra = next_write(logdir)  # settles the killed publish, then appends
        after = values_by_partition(logdir)
        outcomes = killed_job_outcome(before, after, job, extra)
        assert set(outcomes.values()) == {"all"}, (step, outcomes)  # rolled forward
        assert [n for n in os.listdir(logdir) if n.startswith(".")] == []
        step += 1
    # 3 partitions x several segments x 3 files, plus the empty segment moved aside
    # and 2 new partition directories
    assert kills > 20
    outcomes = killed_job_outcome(before, values_by_partition(logdir), job, {})
    assert set(outcomes.values()) == {"all"}


OVERWRITE = """
import sys, pyarrow as pa
from segmentlog_datasource.writer import write_log
values = [b"job-p%d-%03d" % (p, i) for p in range(2) for i in range(30)]
parts = pa.array([p for p in range(2) for i in range(30)], pa.int32())
write_log(sys.argv[1], pa.table({"value": values, "partition": parts}), topic="t",
          mode="overwrite", num_partitions=2, segment_bytes=1024, batch_size=256)
"""


def test_overwrite_killed_after_every_rename(tmp_path):
    job = {("t", p): [b"job-p%d-%03d" % (p, i) for i in range(30)] for p in range(2)}
    step = 1
    while True:
        logdir = str(tmp_path / f"log-{step}")
        write_log(logdir, rows("old", 10, [0, 1, 2, 3], topic="t"), num_partitions=4, **SMALL)
        before = values_by_partition(logdir)
        if not run_child(OVERWRITE, logdir, step):
            break
        write_log(logdir, pa.table({"value": [b"next"], "partition": pa.array([0], pa.int32())}),
                  topic="t", **SMALL)
        after = values_by_partition(logdir)
        # rolled forward: the overwrite's two partitions, then the next write's record
        assert after == {("t", 0): job[("t", 0)] + [b"next"], ("t", 1): job[("t", 1)]}, step
        assert [n for n in os.listdir(logdir) if n.startswith(".")] == []
        step += 1
    assert step > 3  # two exchanges (or moves) and two removed partitions


def test_a_write_from_another_machine_is_finished_once_its_lock_is_deleted(tmp_path):
    import json
    logdir = str(tmp_path / "log")
    seed_append(logdir)
    before = values_by_partition(logdir)
    assert run_child(APPEND_AND_CREATE, logdir, 7)
    (staging,) = [n for n in os.listdir(logdir) if n.startswith(".segmentlog-staging-")]
    owner = os.path.join(logdir, staging, "owner.json")
    with open(owner) as handle:
        info = json.load(handle)
    with open(owner, "w") as handle:
        json.dump(dict(info, host="elsewhere"), handle)
    for name in os.listdir(logdir):
        if name.startswith(".segmentlog-lock-"):
            with open(os.path.join(logdir, name)) as handle:
                lock = json.load(handle)
            with open(os.path.join(logdir, name), "w") as handle:
                json.dump(dict(lock, host="elsewhere"), handle)
    with pytest.raises(Exception, match="being written by another"):
        next_write(logdir)  # the owner's machine cannot be asked
    for name in os.listdir(logdir):
        if name.startswith(".segmentlog-lock-"):
            os.unlink(os.path.join(logdir, name))  # as the error says
    extra = next_write(logdir)
    outcomes = killed_job_outcome(before, values_by_partition(logdir),
                                  expected_job_values(append_job()), extra)
    assert set(outcomes.values()) == {"all"}


KILLED_COMMIT_OF_A_LIVE_JOB = ROWS + """
import pickle, sys
from segmentlog_datasource.writer import WriteJob, WriteOptions
job = WriteJob(sys.argv[1], mode="append", options=WriteOptions(segment_bytes=1024,
               batch_size=256)).start()
task = job.task_writer(0)
task.write(append_job())
result = task.finish()
with open(sys.argv[1] + ".job", "wb") as handle:
    pickle.dump(job, handle)
job.commit([result])
"""


@pytest.mark.parametrize("step", [1, 4, 17, 40])
def test_the_jobs_own_abort_rolls_a_killed_commit_back(tmp_path, step):
    """Spark runs commit and abort in different Python workers: when the committing one
    is killed, the driver (alive, so its write is not dead) aborts, which undoes it."""
    logdir = str(tmp_path / "log")
    seed_append(logdir)
    before = values_by_partition(logdir)
    assert run_child(KILLED_COMMIT_OF_A_LIVE_JOB, logdir, step)
    with open(logdir + ".job", "rb") as handle:
        job = pickle.load(handle)
    assert os.path.exists(os.path.join(job.staging_dir, JOURNAL))
    job.abort()
    assert values_by_partition(logdir) == before
    assert not os.path.exists(job.staging_dir)


# ------------------------------------------------------------------- streaming

KILLED_STREAM_COMMIT = """
import sys, pyarrow as pa
from segmentlog_datasource.writer import WriteOptions
from segmentlog_datasource.writer.stream import StreamSink
sink = StreamSink(sys.argv[1], "q1", topic="t",
                  options=WriteOptions(num_partitions=3, segment_bytes=1024, batch_size=256))
values = [b"b1-p%d-%03d-" % (p, i) + b"x" * 60 for p in range(3) for i in range(20)]
parts = pa.array([p for p in range(3) for i in range(20)], pa.int32())
sink.commit(1, [sink.stage(1, [pa.table({"value": values, "partition": parts})])])
"""


def test_a_stream_commit_killed_while_publishing_settles_as_committed(tmp_path):
    options = WriteOptions(num_partitions=3, segment_bytes=1024, batch_size=256)
    first = pa.table({"value": [b"b0-%d" % i for i in range(6)],
                      "partition": pa.array([0, 1, 2] * 2, pa.int32())})
    step = 1
    while True:
        logdir = str(tmp_path / f"log-{step}")
        sink = StreamSink(logdir, "q1", topic="t", options=options)
        assert sink.commit(0, [sink.stage(0, [first])]).status == "committed"
        if not run_child(KILLED_STREAM_COMMIT, logdir, step):
            break
        assert sink_records(logdir)["q1"]["pending"]["batch"] == 1
        again = StreamSink(logdir, "q1", topic="t", options=options)
        # the publish is finished before the intent is settled: committed, so a replay
        assert again.commit(1, []).status == "replay"
        record = sink_records(logdir)["q1"]
        assert record["committed_batch"] == 1 and record["pending"] is None
        for (_, partition), values in values_by_partition(logdir).items():
            assert values == [b"b0-%d" % i for i in (partition, partition + 3)] + \
                [b"b1-p%d-%03d-" % (partition, i) + b"x" * 60 for i in range(20)]
        assert leftovers(logdir) == []
        step += 1
    assert step > 6
