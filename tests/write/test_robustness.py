"""The writer against a full disk, torn locks, huge partition numbers and URIs (#9)."""
import os
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from segmentlog_datasource.format.pending import PUBLISH_TOKEN
from segmentlog_datasource.writer import (
    ConcurrentWriteError, SegmentLogWriter, WriteJob, write_log,
)
from segmentlog_datasource.writer.lockfiles import TORN_LOCK_SECONDS
from segmentlog_datasource.writer.locks import acquire_lock, lock_path

from support.kafka_logs import decode_logdir, decode_partition


# What a write leaves beside the partition directories (#21)
LOG_DIR_FILES = [".segmentlog-publishing", "log-start-offset-checkpoint", "recovery-point-offset-checkpoint",
                 "replication-offset-checkpoint"]


@pytest.fixture
def logdir(tmp_path):
    return str(tmp_path / "logdir")


def _snapshot(logdir):
    """Every file under the log dir with its bytes."""
    found = {}
    for directory, _, files in os.walk(logdir):
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, logdir)] = handle.read()
    if PUBLISH_TOKEN in found:  # replaced as each publish begins (readers' hint), not data
        found[PUBLISH_TOKEN] = b"<token>"
    return found


# ------------------------------------------------------------------ full disk

def _write_with_file_size_limit(logdir, limit_bytes, rows):
    """Run a write in a process whose files cannot grow past `limit_bytes`
    (RLIMIT_FSIZE: a write past it fails with EFBIG, as on a full disk)."""
    script = textwrap.dedent(f"""
        import resource, signal, pyarrow as pa
        from segmentlog_datasource.writer import write_log  # imported before the limit
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail with EFBIG instead of dying
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit_bytes}, {limit_bytes}))
        try:
            write_log({logdir!r}, pa.table({{"value": [b"x" * 100] * {rows}}}), topic="t")
        except OSError as exc:
            print(type(exc).__name__, exc.errno, type(exc.__cause__).__name__)
            print(exc.filename)
            print(exc)
        else:
            print("written")
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("limit", [0, 2048])
def test_a_file_size_limit_leaves_the_log_as_it_was_and_the_next_write_works(logdir, limit):
    """RLIMIT_FSIZE: one file cannot grow past the limit. A real full disk is in
    test_full_disk.py."""
    import errno
    write_log(logdir, pa.table({"value": [b"kept"] * 3}), topic="t", num_partitions=1)
    before = _snapshot(logdir)
    kind, filename, message = _write_with_file_size_limit(logdir, limit, rows=200).split("\n")
    # the writer's error, still an OSError with the errno, the original as its cause
    assert kind == f"OutOfSpaceError {errno.EFBIG} OSError"
    # 0: not even the lock's content fits; 2048: the lock does, the staged batches do not
    if limit == 0:
        assert filename == os.path.join(logdir, ".segmentlog-lock-t")
    else:
        assert filename.startswith(os.path.join(logdir, ".segmentlog-staging-"))
        assert filename.endswith(".batches")
    assert message.startswith(f"file too large while writing {filename}: ")
    assert "log dir was left as it was" in message and "retry" in message
    assert _snapshot(logdir) == before
    assert sorted(os.listdir(logdir)) == LOG_DIR_FILES + ["t-0"]  # no lock, temp file or staging left
    summary = write_log(logdir, pa.table({"value": [b"new"]}), topic="t")
    assert summary.offsets()[("t", 0)] == (3, 4)
    assert [r[4] for r in decode_partition(os.path.join(logdir, "t-0"))] == \
        [b"kept"] * 3 + [b"new"]


# ---------------------------------------------------------------- torn locks

def _torn_lock(logdir, content=b"", age=0.0):
    path = lock_path(logdir, "t")
    with open(path, "wb") as handle:
        handle.write(content)
    if age:
        then = time.time() - age
        os.utime(path, (then, then))
    return path


@pytest.mark.parametrize("content", [b"", b'{"host": "a', b"[]", b"{}"])
def test_an_old_torn_lock_is_taken_over(logdir, content):
    write_log(logdir, pa.table({"value": [b"a"]}), topic="t", num_partitions=1)
    _torn_lock(logdir, content, age=TORN_LOCK_SECONDS + 5)
    summary = write_log(logdir, pa.table({"value": [b"b"]}), topic="t")
    assert summary.offsets()[("t", 0)] == (1, 2)
    assert sorted(os.listdir(logdir)) == LOG_DIR_FILES + ["t-0"]


def test_a_fresh_torn_lock_blocks_with_an_explanation(logdir):
    write_log(logdir, pa.table({"value": [b"a"]}), topic="t", num_partitions=1)
    path = _torn_lock(logdir)
    with pytest.raises(ConcurrentWriteError) as info:
        write_log(logdir, pa.table({"value": [b"b"]}), topic="t")
    assert path in str(info.value) and "no readable owner" in str(info.value)
    assert os.path.exists(path)  # not someone else's to remove
    assert sum(len(r) for r in decode_logdir(logdir).values()) == 1


def test_a_torn_lock_is_cleared_for_a_write_that_learns_its_topics_from_the_data(logdir):
    write_log(logdir, pa.table({"value": [b"a"]}), topic="t", num_partitions=1)
    _torn_lock(logdir, age=TORN_LOCK_SECONDS + 5)
    write_log(logdir, pa.table({"topic": ["t"], "value": [b"b"]}))
    assert sum(len(r) for r in decode_logdir(logdir).values()) == 2


def test_two_live_writers_still_exclude_each_other(logdir):
    write_log(logdir, pa.table({"value": [b"a"]}), topic="t", num_partitions=1)
    first = SegmentLogWriter(logdir, "t")
    # however old its lock file looks, a live owner keeps it
    old = time.time() - 10 * TORN_LOCK_SECONDS
    os.utime(lock_path(logdir, "t"), (old, old))
    with pytest.raises(ConcurrentWriteError, match="being written by another"):
        SegmentLogWriter(logdir, "t")
    with pytest.raises(ConcurrentWriteError):
        acquire_lock(logdir, "t", "another-job", "append")
    first.write_table(pa.table({"value": [b"b"]}))
    first.commit()
    assert sorted(os.listdir(logdir)) == LOG_DIR_FILES + ["t-0"]


def test_a_killed_writers_unlinked_lock_content_is_cleared(logdir):
    write_log(logdir, pa.table({"value": [b"a"]}), topic="t", num_partitions=1)
    # a writer that died while writing its lock's content, before linking it into place
    leftover = lock_path(logdir, "t") + "~tmp-99999999-abcdef01"
    with open(leftover, "w") as handle:
        handle.write('{"host": ')
    fresh = lock_path(logdir, "u") + "~tmp-99999999-abcdef02"
    with open(fresh, "w") as handle:
        handle.write('{"host": ')
    old = time.time() - 2 * TORN_LOCK_SECONDS
    os.utime(leftover, (old, old))
    write_log(logdir, pa.table({"value": [b"b"]}), topic="t")
    # the old one is gone; the fresh one may belong to a write in progress
    assert sorted(os.listdir(logdir)) == sorted([os.path.basename(fresh)] + LOG_DIR_FILES + ["t-0"])


def test_a_staging_directory_whose_deletion_was_cut_short_is_cleared(logdir):
    """A writer killed while deleting its staging directory (after publishing, its owner
    file perhaps already gone) leaves it renamed aside; the next write deletes it."""
    from segmentlog_datasource.writer.fsops import REMOVING_MARK

    write_log(logdir, pa.table({"value": [b"a"]}), topic="t", num_partitions=1)
    aside = os.path.join(logdir, ".segmentlog-staging-20260101000000-0123456789ab" +
                         REMOVING_MARK + "deadbeef")
    os.makedirs(os.path.join(aside, "publish", "t-0"))
    with open(os.path.join(aside, "task-00000-attempt-0-0badf00d.batches"), "wb") as handle:
        handle.write(b"x" * 100)
    write_log(logdir, pa.table({"value": [b"b"]}), topic="t")
    assert sorted(os.listdir(logdir)) == LOG_DIR_FILES + ["t-0"]
    assert [r[4] for r in decode_partition(os.path.join(logdir, "t-0"))] == [b"a", b"b"]


def test_a_staging_directory_without_an_owner_is_cleared_once_old(logdir):
    """A writer killed between creating its staging directory and putting its owner file
    in (written whole, so it is there or not) leaves a directory nobody can judge: it goes
    once it is as old as a torn lock may be."""
    write_log(logdir, pa.table({"value": [b"a"]}), topic="t", num_partitions=1)
    old = os.path.join(logdir, ".segmentlog-staging-20260101000000-0123456789ab")
    fresh = os.path.join(logdir, ".segmentlog-staging-20260101000001-0123456789ac")
    os.mkdir(old)
    os.mkdir(fresh)
    then = time.time() - TORN_LOCK_SECONDS - 5
    os.utime(old, (then, then))
    write_log(logdir, pa.table({"value": [b"b"]}), topic="t")
    # the fresh one may belong to a write starting right now
    assert sorted(os.listdir(logdir)) == sorted([os.path.basename(fresh)] + LOG_DIR_FILES + ["t-0"])


# ------------------------------------------------------- partition numbers

def _rows(topic, partitions):
    return pa.table({"topic": [topic] * len(partitions),
                     "partition": pa.array(partitions, pa.int32()),
                     "value": [b"v%d" % i for i in range(len(partitions))]})


def test_a_huge_partition_for_a_new_topic_fails_before_any_directory(logdir):
    from segmentlog_datasource.writer import InvalidInputError
    from segmentlog_datasource.writer.task import MAX_INFERRED_PARTITIONS

    write_log(logdir, pa.table({"value": [b"a"]}), topic="kept", num_partitions=1)
    before = _snapshot(logdir)
    started = time.monotonic()
    with pytest.raises(InvalidInputError) as info:
        write_log(logdir, _rows("fresh", [0, 2**31 - 1]))
    assert time.monotonic() - started < 10
    message = str(info.value)
    assert "2147483647" in message and str(MAX_INFERRED_PARTITIONS) in message
    assert "numPartitions" in message
    assert _snapshot(logdir) == before and sorted(os.listdir(logdir)) == sorted(["kept-0"] + LOG_DIR_FILES)
    with pytest.raises(InvalidInputError, match=str(MAX_INFERRED_PARTITIONS)):
        write_log(logdir, _rows("fresh", [MAX_INFERRED_PARTITIONS]))
    assert sorted(os.listdir(logdir)) == sorted(["kept-0"] + LOG_DIR_FILES)
    # a count the data alone gives within the limit is fine
    summary = write_log(logdir, _rows("small", [4, 0]))
    assert sorted(summary.offsets()) == [("small", p) for p in range(5)]
    # with numPartitions, the values are checked against it
    with pytest.raises(InvalidInputError, match="which has 4 partitions"):
        write_log(logdir, _rows("counted", [0, 2**31 - 1]), num_partitions=4)
    assert not [n for n in os.listdir(logdir) if n.startswith("counted")]


def test_the_commit_checks_the_inferred_count_too(logdir):
    """A task's result that reached the driver with a huge partition (e.g. from an older
    task) is refused before any directory is made."""
    from segmentlog_datasource.writer import InvalidInputError
    from segmentlog_datasource.writer.task import TaskResult

    job = WriteJob(logdir).start()
    result = TaskResult(job.job_id, 0, 0, None, max_partition={"fresh": 2**31 - 1},
                        topic_counts={"fresh": None})
    with pytest.raises(InvalidInputError, match="2147483647"):
        job.commit([result])
    job.abort()
    assert not os.path.exists(logdir) or os.listdir(logdir) == []


def test_partition_beyond_an_existing_topics_count_is_refused(logdir):
    from segmentlog_datasource.writer import InvalidInputError

    write_log(logdir, pa.table({"value": [b"a"]}), topic="t", num_partitions=3)
    before = _snapshot(logdir)
    with pytest.raises(InvalidInputError, match=r"which has 3 partitions \(0\.\.2\)"):
        write_log(logdir, pa.table({"partition": pa.array([3], pa.int32()), "value": [b"b"]}),
                  topic="t")
    assert _snapshot(logdir) == before


# ------------------------------------------------------------------- URIs

@pytest.mark.parametrize("uri", ["hdfs://nn:8020/logs", "abfss://c@a.dfs/x",
                                 "gs://b/x", "file://otherhost/tmp/x", "logs:2024"])
def test_a_uri_the_writer_cannot_write_is_refused(tmp_path, monkeypatch, uri):
    from segmentlog_datasource.errors import InvalidOptionError
    from segmentlog_datasource.writer.stream import StreamSink

    monkeypatch.chdir(tmp_path)  # where a local "s3:" directory would appear
    with pytest.raises(InvalidOptionError) as info:
        write_log(uri, pa.table({"value": [b"a"]}), topic="t", num_partitions=1)
    assert uri in str(info.value) and info.value.option == "path"
    with pytest.raises(InvalidOptionError, match="file: URI|local"):
        WriteJob(uri, topic="t")
    with pytest.raises(InvalidOptionError):
        StreamSink(uri, "query-1", topic="t")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("form", ["file:{}", "file://{}", "file://localhost{}"])
def test_file_uris_are_written_as_paths(tmp_path, form):
    logdir = str(tmp_path / "with space")
    uri = form.format(logdir.replace(" ", "%20"))
    summary = write_log(uri, pa.table({"value": [b"a"]}), topic="t", num_partitions=1)
    assert summary.logdir == logdir
    assert sorted(os.listdir(logdir)) == LOG_DIR_FILES + ["t-0"]
