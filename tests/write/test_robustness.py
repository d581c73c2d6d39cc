"""The writer against a full disk, torn locks, huge partition numbers and URIs (#9)."""
import os
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from segmentlog_datasource.writer import (
    ConcurrentWriteError, SegmentLogWriter, WriteJob, write_log,
)
from segmentlog_datasource.writer.locks import TORN_LOCK_SECONDS, acquire_lock, lock_path

from support.kafka_logs import decode_logdir, decode_partition


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
    return found


# ------------------------------------------------------------------ full disk

def _write_with_file_size_limit(logdir, limit_bytes, rows):
    """Run a write in a process whose files cannot grow past `limit_bytes`
    (RLIMIT_FSIZE: a write past it fails with EFBIG, as on a full disk)."""
    script = textwrap.dedent(f"""
        import resource, signal, pyarrow as pa
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail with EFBIG instead of dying
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit_bytes}, {limit_bytes}))
        from segmentlog_datasource.writer import write_log
        try:
            write_log({logdir!r}, pa.table({{"value": [b"x" * 100] * {rows}}}), topic="t")
        except OSError as exc:
            print("OSError", exc.errno)
        else:
            print("written")
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("limit", [0, 2048])
def test_a_full_disk_leaves_the_log_as_it_was_and_the_next_write_works(logdir, limit):
    import errno
    write_log(logdir, pa.table({"value": [b"kept"] * 3}), topic="t", num_partitions=1)
    before = _snapshot(logdir)
    # 0: not even the lock's content fits; 2048: the lock does, the segment does not
    assert _write_with_file_size_limit(logdir, limit, rows=200) == f"OSError {errno.EFBIG}"
    assert _snapshot(logdir) == before
    assert sorted(os.listdir(logdir)) == ["t-0"]  # no lock, temp file or staging left
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
    assert sorted(os.listdir(logdir)) == ["t-0"]


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
    assert sorted(os.listdir(logdir)) == ["t-0"]


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
    assert sorted(os.listdir(logdir)) == [os.path.basename(fresh), "t-0"]
