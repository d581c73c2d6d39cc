"""A writer process killed (SIGKILL) after each rename of its publish (#9): the next write
finishes the interrupted publish from its journal, so every partition then holds all of
the killed job's records or none, the job as a whole all or none, and that write works.

The kill comes from the test hook SEGMENTLOG_TEST_KILL_AT_STEP=N (writer/publish.py): the
process kills itself right after its Nth publishing rename. Those writers are forked from a
server that has imported the writer (support/children.py), so a sweep of dozens of kills
costs their work, not dozens of interpreter starts. At the end of the file, the
same writes are killed from outside after random delays instead, over the whole life of
the process (starting Python, imports, staging, segment writing, publishing).
"""
import os
import pickle
import random
import re
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from segmentlog_datasource.format.pending import PUBLISH_TOKEN
from segmentlog_datasource.writer import WriteOptions, write_log
from segmentlog_datasource.writer.lockfiles import read_lock
from segmentlog_datasource.writer.logdir import LOCK_PREFIX
from segmentlog_datasource.writer.publish import JOURNAL, KILL_HOOK
from segmentlog_datasource.writer.stream import StreamSink

from support.children import run_script
from support.kafka_logs import decode_logdir
from support.reading import read_values
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
    return pa.concat_tables([rows("job", 12, [0, 1, 2], topic="t"),
                             rows("job", 12, [0, 1], topic="n")])
"""
exec(ROWS)


def run_child(script, logdir, step):
    """Run `script` in a process of its own with the kill hook at `step`; True if it was
    killed."""
    done = run_script(textwrap.dedent(script), [logdir], env={KILL_HOOK: str(step)})
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
        # until the killed publish is settled, readers see the log as it was (#22), even
        # past the high watermark (both bounds: tests/read/test_publish_visibility.py)
        assert read_values(logdir, readUpTo="logEnd") == {k: v for k, v in before.items() if v}, \
            step
        extra = next_write(logdir)  # settles the killed publish, then appends
        after = values_by_partition(logdir)
        outcomes = killed_job_outcome(before, after, job, extra)
        assert set(outcomes.values()) == {"all"}, (step, outcomes)  # rolled forward
        assert [n for n in os.listdir(logdir) if n.startswith(".") and n != PUBLISH_TOKEN] == []
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
        assert read_values(logdir, readUpTo="logEnd") == before, step  # until settled (#22)
        write_log(logdir, pa.table({"value": [b"next"], "partition": pa.array([0], pa.int32())}),
                  topic="t", **SMALL)
        after = values_by_partition(logdir)
        # rolled forward: the overwrite's two partitions, then the next write's record
        assert after == {("t", 0): job[("t", 0)] + [b"next"], ("t", 1): job[("t", 1)]}, step
        assert [n for n in os.listdir(logdir) if n.startswith(".") and n != PUBLISH_TOKEN] == []
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


@pytest.mark.parametrize("step", [1, 4, 12, 22])
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


# --------------------------------------------------------- kills at random moments

RANDOM_KILL_SEED = 20261123
BIG = {"segment_bytes": 4096, "batch_size": 1024}  # dozens of segments per partition
BIG_ROWS = ROWS + """
def big_append_job():
    # three partitions of t (one of them empty so far) and a new topic n
    return pa.concat_tables([rows("job", 700, [0, 1, 2], topic="t"),
                             rows("job", 700, [0, 1], topic="n")])

def big_overwrite_job():
    return rows("job", 700, [0, 1])
"""
exec(BIG_ROWS)

# The child prints "<phase> <time.time()>" as it goes; an unkilled run gives the phases'
# times, and kills are then spread over each of them.
RANDOM_KILL_CHILD = """
import time
def phase(name):
    print(name, time.time(), flush=True)
phase("python")
""" + BIG_ROWS + """
import sys
from segmentlog_datasource.writer import WriteJob, WriteOptions, write_log
phase("imported")
logdir, how = sys.argv[1], sys.argv[2]
if how == "engine":
    write_log(logdir, big_append_job(), mode="append", segment_bytes=4096, batch_size=1024)
elif how == "tasks":  # a WriteJob with three tasks, as Spark runs one
    table = big_append_job()
    job = WriteJob(logdir, mode="append",
                   options=WriteOptions(segment_bytes=4096, batch_size=1024)).start()
    phase("started")
    results = []
    size = -(-table.num_rows // 3)
    for index in range(3):
        task = job.task_writer(index)
        task.write(table.slice(index * size, size))
        results.append(task.finish())
    phase("staged")
    job.commit(results, before_publish=lambda summary: phase("segments"))
else:
    write_log(logdir, big_overwrite_job(), topic="t", mode="overwrite", num_partitions=2,
              segment_bytes=4096, batch_size=1024)
phase("done")
"""
SEGMENT_FILE = re.compile(r"^\d{20}\.(log|index|timeindex)$")


def spawn_writer(logdir, how):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop(KILL_HOOK, None)
    started = time.time()
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(RANDOM_KILL_CHILD),
                                logdir, how], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    return started, process


def phase_times(logdir, how):
    """[(phase, seconds since the spawn)] of an unkilled run."""
    started, process = spawn_writer(logdir, how)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return [(name, float(at) - started) for name, at in (line.split() for line in out.split("\n")
                                                        if line)]


def kill_after(logdir, how, anchor, delay):
    """Run the write and SIGKILL it `delay` s after it reports phase `anchor` ("spawn":
    after its spawn). Returns where it was: the last phase it reported, "publishing" if it
    left a journal, "finished" if it exited first."""
    started, process = spawn_writer(logdir, how)
    reported = []
    base = started
    if anchor != "spawn":
        for line in process.stdout:
            name, at = line.split()
            reported.append(name)
            if name == anchor:
                base = float(at)
                break
    time.sleep(max(0.0, base + delay - time.time()))
    process.kill()
    out, err = process.communicate(timeout=60)
    reported += [line.split()[0] for line in out.split("\n") if line]
    if process.returncode == 0:
        return "finished"
    assert process.returncode == -9, err
    staging = [n for n in os.listdir(logdir) if n.startswith(".segmentlog-staging-")]
    if any(os.path.exists(os.path.join(logdir, n, JOURNAL)) for n in staging):
        return "publishing"
    return reported[-1] if reported else "spawned"


def killed_job_wanted(where):
    """What the next write must leave of a job killed at `where`: all of it once its
    publish had begun (finished from the journal), none of it before its commit could
    publish, and all or none for a kill in between (a write_log's commit, or after the
    journal was settled)."""
    if where in ("publishing", "finished"):
        return {"all"}
    if where in ("spawned", "python", "started", "staged"):
        return {"none"}
    return {"all", "none"}


def kill_delays(phases, rng, per_phase=2, anywhere=1, first_phases=2):
    """[(anchor, delay)]: `per_phase` kills at random within each of the `first_phases`
    phases (the interpreter's start and imports, which every run must hit), one within
    each later phase (timed from the report that begins it, so that a short phase is hit
    however the run's pace varies), and `anywhere` more at random over the whole run
    (timed from the spawn). Each kill starts an interpreter: the sweeps above cover every
    publishing step."""
    kills = []
    anchor, begins = "spawn", 0.0
    for number, (name, ends) in enumerate(phases):
        count = per_phase if number < first_phases else 1
        kills += [(anchor, rng.uniform(0, ends - begins)) for _ in range(count)]
        anchor, begins = name, ends
    return kills + [("spawn", rng.uniform(0, phases[-1][1])) for _ in range(anywhere)]


# What a write keeps beside the segments (#21): in the log dir, and in each partition
LOG_DIR_FILES = {"log-start-offset-checkpoint", "recovery-point-offset-checkpoint",
                 "replication-offset-checkpoint"}
PARTITION_FILES = {"leader-epoch-checkpoint", "partition.metadata"}


def check_no_leftovers(logdir):
    # A lock's temp file whose writer was killed before its content was whole is left
    # for TORN_LOCK_SECONDS by design: until then it cannot be told from a live writer's
    # in its first microseconds (writer/locks.py). Anything else is a leftover.
    left = [n for n in os.listdir(logdir) if n.startswith(".") and n != PUBLISH_TOKEN
            and not (n.startswith(LOCK_PREFIX) and "~tmp-" in n
                     and read_lock(os.path.join(logdir, n)) == {})]
    assert left == []
    for name in set(os.listdir(logdir)) - LOG_DIR_FILES - {PUBLISH_TOKEN}:
        strays = [f for f in os.listdir(os.path.join(logdir, name))
                  if not SEGMENT_FILE.match(f) and f not in PARTITION_FILES]
        assert strays == [], (name, strays)


@pytest.mark.parametrize("how", ["engine", "tasks"])
def test_an_append_killed_at_random_moments(tmp_path, how):
    rng = random.Random(f"{RANDOM_KILL_SEED}-{how}")
    job = expected_job_values(big_append_job())
    seed_append(str(tmp_path / "calibration"))
    phases = phase_times(str(tmp_path / "calibration"), how)
    assert len(phases) == (6 if how == "tasks" else 3), phases
    seed_append(str(tmp_path / "seeded"))
    before = values_by_partition(str(tmp_path / "seeded"))
    kills = kill_delays(phases, rng)
    landed = []
    publish_time = phases[-1][1] - phases[-2][1]
    while kills:
        anchor, delay = kills.pop(0)
        logdir = str(tmp_path / f"log-{len(landed)}")
        seed_append(logdir)
        where = kill_after(logdir, how, anchor, delay)
        landed.append((anchor, round(delay, 3), where))
        # a reader sees each partition valid: its old records, then whole segments of the
        # killed job's (a prefix of them), nothing else
        now = values_by_partition(logdir)
        for key in set(now) | set(job):
            got, old = now.get(key, []), before.get(key, [])
            assert got[:len(old)] == old and got[len(old):] == job[key][:len(got) - len(old)], \
                (delay, where, key)
        # a read sees the job whole or not at all (#22)
        whole = {key: before.get(key, []) + job.get(key, []) for key in set(before) | set(job)}
        assert read_values(logdir) in ({k: v for k, v in before.items() if v}, whole), \
            (delay, where)
        extra = next_write(logdir)  # settles the killed write, then appends: it works
        outcomes = killed_job_outcome(before, values_by_partition(logdir), job, extra)
        assert len(set(outcomes.values())) == 1, (delay, where, outcomes)  # the job: all or none
        assert set(outcomes.values()) <= killed_job_wanted(where), (delay, where, outcomes)
        check_no_leftovers(logdir)
        if how == "tasks" and not kills and len(landed) < 25 and \
                "publishing" not in {where for _, _, where in landed}:
            # the publish is the shortest phase: aim at it until one kill lands there
            kills.append(("segments", rng.uniform(0, publish_time)))
    wheres = {where for _, _, where in landed}
    assert {"python", "imported"} <= wheres, landed
    if how == "tasks":
        assert {"started", "staged", "segments", "publishing"} & wheres, landed
        assert "publishing" in wheres, landed


def test_an_overwrite_killed_at_random_moments(tmp_path):
    rng = random.Random(f"{RANDOM_KILL_SEED}-overwrite")
    table = big_overwrite_job()
    job = {}
    for partition, value in zip(table.column("partition").to_pylist(),
                                table.column("value").to_pylist()):
        job.setdefault(partition, []).append(value)

    def seed(logdir):
        write_log(logdir, rows("old", 10, [0, 1, 2, 3], topic="t"), num_partitions=4, **SMALL)

    seed(str(tmp_path / "calibration"))
    phases = phase_times(str(tmp_path / "calibration"), "overwrite")
    seed(str(tmp_path / "seeded"))
    before = values_by_partition(str(tmp_path / "seeded"))
    landed = []
    for anchor, delay in kill_delays(phases, rng):
        logdir = str(tmp_path / f"log-{len(landed)}")
        seed(logdir)
        where = kill_after(logdir, "overwrite", anchor, delay)
        landed.append((anchor, round(delay, 3), where))
        for (_, partition), values in values_by_partition(logdir).items():  # old or new, whole
            assert values in (before[("t", partition)], job.get(partition)), (delay, where)
        write_log(logdir, pa.table({"value": [b"next"], "partition": pa.array([0], pa.int32())}),
                  topic="t", **SMALL)
        after = values_by_partition(logdir)
        outcomes = set()
        if after == {("t", 0): job[0] + [b"next"], ("t", 1): job[1]}:
            outcomes.add("all")
        if after == {**before, ("t", 0): before[("t", 0)] + [b"next"]}:
            outcomes.add("none")
        assert len(outcomes) == 1 and outcomes <= killed_job_wanted(where), (delay, where)
        check_no_leftovers(logdir)
    assert {"python", "imported"} <= {where for _, _, where in landed}, landed
