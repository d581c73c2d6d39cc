"""A write on a real full filesystem (#9): a small tmpfs holds the log dir, a filler takes
all but k of its free bytes (or inodes), and for every k from 0 up the write either
succeeds completely or fails with OutOfSpaceError naming the file it could not write,
leaving the log byte for byte as it was and nothing of its own behind; once the filler
is gone, a write succeeds and reads back.

Sweeping k a page (an inode) at a time makes the write fail at each of its allocations in
turn: the lock file, its owner file, the staged batches, each segment's .index,
.timeindex and .log, the publish journal (and, for inodes, the lock's hard link and the
publish directories), then, after the renames, the log dir's checkpoint lock and the
temporary copy of a checkpoint file it replaces (#21), which undoes the publish. On tmpfs a rename needs neither a page nor an inode, so the
renames that publish are swept on a small ext4 image instead, where moving a file into a
full directory block needs a new block: there the publish fails half way and is undone.

The tmpfs is mounted directly when this process may (root), else inside a user and mount
namespace that a holder process keeps alive (`unshare -rm`; its files are reached
through /proc/<holder>/root). Only where neither works does the sweep fall back to a
per-file size limit (RLIMIT_FSIZE), which fails the same calls with EFBIG. The ext4
image needs a loop mount (root); without one that sweep is skipped, saying why.
"""
import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from typing import Optional

import pytest

from segmentlog_datasource.format.pending import PUBLISH_TOKEN
from segmentlog_datasource.writer import write_log

from support.kafka_logs import decode_logdir

PAGE = 4096
TMPFS_BYTES = 1 << 20
TMPFS_INODES = 200
TESTS_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What a write leaves beside the partition directories (#21)
LOG_DIR_FILES = [".segmentlog-publishing", "log-start-offset-checkpoint", "recovery-point-offset-checkpoint",
                 "replication-offset-checkpoint"]
# two segments per partition, each with index entries; a few pages of staged batches
JOB_OPTIONS = {"segment_bytes": 3000, "batch_size": 1000, "index_interval_bytes": 500}

ROWS = """
import pyarrow as pa

def rows(tag, per_partition, partitions=(0, 1)):
    values, parts = [], []
    for partition in partitions:
        for i in range(per_partition):
            values.append(b"%s-p%d-%03d-" % (tag.encode(), partition, i) + b"x" * 80)
            parts.append(partition)
    return pa.table({"value": values, "partition": pa.array(parts, pa.int32())})

def job_rows():
    return rows("job", 50)
"""
exec(ROWS)


# ------------------------------------------------------------------ the filesystem

@dataclass
class SmallFilesystem:
    root: str  # where this process (and any other) reaches the filesystem
    kind: str  # "tmpfs", "namespace" (a tmpfs in a user+mount namespace), "rlimit" or "ext4"

    @property
    def filler(self):
        return os.path.join(self.root, "filler")

    def fill_bytes(self, leave: int) -> None:
        """Take every free byte but `leave` (a multiple of the page size)."""
        self.free_filler()
        if self.kind == "rlimit":
            return
        st = os.statvfs(self.root)
        size = st.f_bavail * st.f_frsize - leave
        assert size > 0, "the filesystem is too small for this test"
        fd = os.open(self.filler, os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            if self.kind != "ext4":
                os.posix_fallocate(fd, 0, size)
            else:  # the filler's own extent blocks count too: fill up, then give back
                size -= 64 << 10
                os.posix_fallocate(fd, 0, size)
                while True:
                    try:
                        os.posix_fallocate(fd, size, st.f_frsize)
                    except OSError as exc:
                        assert exc.errno == errno.ENOSPC
                        break
                    size += st.f_frsize
                os.ftruncate(fd, size - leave)
        finally:
            os.close(fd)
        st = os.statvfs(self.root)
        assert st.f_bavail * st.f_frsize == leave

    def fill_inodes(self, leave: int) -> None:
        """Take every free inode but `leave`, with empty files."""
        self.free_filler()
        os.mkdir(self.filler)
        count = os.statvfs(self.root).f_favail - leave
        for i in range(count):
            os.close(os.open(os.path.join(self.filler, str(i)), os.O_CREAT | os.O_WRONLY, 0o644))
        assert os.statvfs(self.root).f_favail == leave

    def free_filler(self) -> None:
        if os.path.isdir(self.filler):
            shutil.rmtree(self.filler)
        elif os.path.exists(self.filler):
            os.unlink(self.filler)


def _mount_here(mountpoint: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES},nr_inodes={TMPFS_INODES},mode=0755",
         "segmentlog-test", mountpoint], capture_output=True, text=True)
    return done.returncode == 0


def _mount_in_namespace(mountpoint: str) -> Optional[subprocess.Popen]:
    """A process holding a tmpfs in a user+mount namespace of its own, or None."""
    if shutil.which("unshare") is None:
        return None
    holder = subprocess.Popen(
        ["unshare", "-rm", "sh", "-c",
         f'mount -t tmpfs -o size={TMPFS_BYTES},nr_inodes={TMPFS_INODES} segmentlog-test "$1" '
         f'&& echo mounted && exec sleep 3600', "sh", mountpoint],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if holder.stdout.readline().strip() == "mounted":
        return holder
    holder.kill()
    holder.wait()
    return None


@pytest.fixture
def small_fs(tmp_path):
    mountpoint = str(tmp_path / "fs")
    os.mkdir(mountpoint)
    if _mount_here(mountpoint):
        try:
            yield SmallFilesystem(mountpoint, "tmpfs")
        finally:
            if subprocess.run(["umount", mountpoint]).returncode != 0:
                subprocess.run(["umount", "-l", mountpoint], check=True)
        return
    holder = _mount_in_namespace(mountpoint)
    if holder is not None:
        try:
            yield SmallFilesystem(f"/proc/{holder.pid}/root{mountpoint}", "namespace")
        finally:  # the namespace, and its tmpfs, go with the holder
            holder.kill()
            holder.wait()
        return
    yield SmallFilesystem(mountpoint, "rlimit")


# ------------------------------------------------------------------------ writes

WORKER = ROWS + """
import json, resource, signal, sys, traceback
from segmentlog_datasource.writer import WriteOptions, write_log
from segmentlog_datasource.writer.stream import StreamSink

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past RLIMIT_FSIZE: EFBIG, not death
hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
for line in sys.stdin:
    request = json.loads(line)
    limit = request["file_size_limit"]
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard if limit is None else limit, hard))
    try:
        if request.get("stream"):  # micro-batch 0 of query q1, staged and committed
            sink = StreamSink(request["logdir"], "q1", topic="t",
                              options=WriteOptions(**request["options"]))
            outcome = sink.commit(0, [sink.stage(0, [job_rows()])])
            reply = {"ok": True, "status": outcome.status}
        else:
            summary = write_log(request["logdir"], job_rows(), topic="t", **request["options"])
            reply = {"ok": True, "records": summary.records}
    except Exception as exc:
        reply = {"ok": False, "type": type(exc).__name__, "oserror": isinstance(exc, OSError),
                 "errno": getattr(exc, "errno", None), "filename": getattr(exc, "filename", None),
                 "message": str(exc), "cause": type(exc.__cause__).__name__,
                 "where": traceback.format_exception(exc.__cause__ or exc)[-2:]}
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    print(json.dumps(reply), flush=True)
"""


class WriterProcess:
    """A Python process that runs the job's write_log on request, as often as asked."""

    def __init__(self):
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
                   PYTHONPATH=TESTS_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(WORKER)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env=env, text=True)

    def write(self, logdir: str, file_size_limit: Optional[int] = None,
              options: Optional[dict] = None, stream: bool = False) -> dict:
        request = {"logdir": logdir, "file_size_limit": file_size_limit,
                   "options": options or JOB_OPTIONS, "stream": stream}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the writer process died (exit status {self.process.wait()})"
        return json.loads(line)

    def close(self):
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0


@pytest.fixture
def writer_process():
    process = WriterProcess()
    try:
        yield process
    finally:
        process.close()


def snapshot(root):
    """Every file and directory under `root`, files with their bytes."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(directory, name), root) + "/"] = None
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, root)] = handle.read()
    if PUBLISH_TOKEN in found:  # replaced as each publish begins (readers' hint), not data
        found[PUBLISH_TOKEN] = b"<token>"
    return found


def values_by_partition(logdir):
    return {key: [r[4] for r in records] for key, records in decode_logdir(logdir).items()}


def job_values(table, topic="t"):
    found = {}
    for partition, value in zip(table.column("partition").to_pylist(),
                                table.column("value").to_pylist()):
        found.setdefault((topic, partition), []).append(value)
    return found


OLD = rows("old", 3)


def seed(logdir):
    if os.path.exists(logdir):
        shutil.rmtree(logdir)
    write_log(logdir, OLD, topic="t", num_partitions=2, **JOB_OPTIONS)


def expected_after_job(extra=()):
    """The seed's values, then the job's (then those of `extra` jobs), per partition."""
    expected = {key: list(values) for key, values in job_values(OLD).items()}
    for table in (job_rows(),) + tuple(extra):
        for key, values in job_values(table).items():
            expected[key] += values
    return expected


def stage_of(reply, logdir):
    """Which allocation failed, from the file the error names."""
    name = reply["filename"]
    if reply["type"] == "WriteError":
        return "renames, then undoing them"
    if reply["message"].split(" while ")[1].startswith("publishing into "):
        return "renames"  # undone: the message says the log dir was left as it was
    if reply["message"].split(" while ")[1].startswith("creating "):
        if os.path.dirname(name) == logdir:
            return "staging directory"  # .segmentlog-staging-<job>
        return "publish directories"  # its publish/ and publish/<topic>-<partition>
    if os.path.basename(name).startswith(PUBLISH_TOKEN):
        return "publish token"
    for suffix, stage in ((".segmentlog-lock-t", "lock"), ("owner.json", "owner"),
                          (".segmentlog-lock-.checkpoints", "checkpoint lock"),
                          ("-checkpoint", "checkpoints"),
                          (".batches", "staged batches"), (".timeindex", "timeindex"),
                          (".index", "index"), (".log", "log"),
                          ("publish-journal.json", "journal")):
        if name.endswith(suffix):
            return stage
    raise AssertionError(f"unexpected file in {reply}")


def check_failed_cleanly(reply, logdir, before, expected_errno):
    """The write failed with the writer's out-of-space error and left no trace."""
    if reply["type"] == "WriteError" and "undoing the renames done so far failed too" in \
            reply["message"]:
        # on ext4, moving a file back can need a directory block too: the error says so,
        # and the write's abort (which write_log runs before raising) undid the rest
        assert "No space left on device" in reply["message"], reply
        assert snapshot(logdir) == before
        assert sorted(os.listdir(logdir)) == LOG_DIR_FILES + ["t-0", "t-1"]
        return
    assert reply["type"] == "OutOfSpaceError" and reply["oserror"], reply
    assert reply["errno"] == expected_errno and reply["cause"] in ("OSError", "BlockingIOError",
                                                                   "FileNotFoundError"), reply
    assert reply["filename"] == logdir or reply["filename"].startswith(logdir + os.sep), reply
    reason = os.strerror(expected_errno).lower()
    message = reply["message"]
    assert message.startswith(tuple(f"{reason} while {action} " for action in
                                    ("writing", "creating", "publishing into"))), message
    assert reply["filename"] in message and "\n" not in message
    assert "the log dir was left as it was" in message
    assert "free space" in message and "retry" in message
    assert snapshot(logdir) == before
    assert sorted(os.listdir(logdir)) == LOG_DIR_FILES + ["t-0", "t-1"]  # no lock, staging or temp file


def run_sweep(small_fs, writer_process, fill, step, limit_of=None, options=None):
    """For k = 0, step, 2*step, ...: fill, write, check; until a write succeeds.
    Returns {stage: [k...]} of the failures."""
    logdir = os.path.join(small_fs.root, "log")
    expected_errno = errno.EFBIG if small_fs.kind == "rlimit" else errno.ENOSPC
    stages = {}
    k = 0
    while True:
        small_fs.free_filler()
        seed(logdir)
        before = snapshot(logdir)
        fill(k)
        reply = writer_process.write(logdir, limit_of(k) if limit_of else None, options)
        if reply["ok"]:
            assert reply["records"] == job_rows().num_rows
            assert values_by_partition(logdir) == expected_after_job()
            assert sorted(os.listdir(logdir)) == LOG_DIR_FILES + ["t-0", "t-1"]
            return stages
        check_failed_cleanly(reply, logdir, before, expected_errno)
        stages.setdefault(stage_of(reply, logdir), []).append(k)
        small_fs.free_filler()  # room again: the same write now works
        reply = writer_process.write(logdir, None, options)
        assert reply["ok"], (k, reply["message"])
        assert values_by_partition(logdir) == expected_after_job()
        assert sorted(os.listdir(logdir)) == LOG_DIR_FILES + ["t-0", "t-1"]
        k += step
        assert k < 300 * step, stages


def test_a_write_fails_cleanly_whichever_byte_the_disk_runs_out_at(small_fs, writer_process):
    if small_fs.kind == "rlimit":  # each file may hold k bytes: not a disk, but the same calls
        stages = run_sweep(small_fs, writer_process, small_fs.fill_bytes, 1024, lambda k: k)
        assert {"lock", "staged batches"} <= set(stages), stages
        return
    stages = run_sweep(small_fs, writer_process, small_fs.fill_bytes, PAGE)
    # one page each for the lock and the owner file, then the staged batches, then each
    # segment file in turn, the journal, the publish token's new copy; after the renames
    # a checkpoint file's temporary copy (the checkpoint lock takes the page the token's
    # old copy gave back)
    assert stages["lock"] == [0] and stages["owner"] == [PAGE], stages
    assert set(stages) == {"lock", "owner", "staged batches", "index", "timeindex", "log",
                           "journal", "publish token", "checkpoints"}, stages
    assert len(stages["index"]) == len(stages["timeindex"]) == 4  # 2 segments x 2 partitions
    assert _last_stages(stages, 3) == ["journal", "publish token", "checkpoints"], stages


def _last_stages(stages, count):
    """The stages of the `count` largest k, in order."""
    return [stage for _, stage in sorted((k, stage) for stage, ks in stages.items()
                                         for k in ks)[-count:]]


def test_a_write_fails_cleanly_whichever_inode_runs_out(small_fs, writer_process):
    if small_fs.kind == "rlimit":
        pytest.fail("no tmpfs could be mounted here (neither directly nor in a user "
                    "namespace): inode exhaustion has no per-process equivalent")
    stages = run_sweep(small_fs, writer_process, small_fs.fill_inodes, 1)
    # the lock's temp file, then its hard link (tmpfs counts links; the inode the link
    # takes comes back when the temp name goes, and the staging directory takes it), the
    # owner file, the staged batches (a file per partition), publish/ and a directory per
    # partition, each segment
    # file, the journal's temp file, the publish token's new copy; after the renames the
    # checkpoint lock's temp file and
    # link (a checkpoint file's temporary copy then takes the inode the lock's temp name
    # gave back)
    assert stages["lock"] == [0, 1] and stages["owner"] == [2], stages
    assert stages["staged batches"] == [3, 4] and len(stages["publish directories"]) == 3
    assert len(stages["index"]) == len(stages["timeindex"]) == len(stages["log"]) == 4
    assert _last_stages(stages, 3) == ["journal", "publish token", "checkpoint lock"], stages
    assert set(stages) == {"lock", "owner", "staged batches", "publish directories", "index",
                           "timeindex", "log", "journal", "publish token",
                           "checkpoint lock"}, stages


def test_a_large_staged_write_reserves_its_blocks_before_writing(small_fs, monkeypatch):
    """Staged batches of PREALLOCATE_MIN bytes and more have their blocks reserved first
    (fsops.preallocate, on ext4; here on the tmpfs too): on a full disk the reservation is
    what fails, before a byte of them is written, with the same OutOfSpaceError, and the
    log dir stays as it was."""
    import traceback

    from segmentlog_datasource.writer import OutOfSpaceError, fsops
    from segmentlog_datasource.writer.fsops import PREALLOCATE_MIN

    if small_fs.kind == "rlimit":
        pytest.fail("no tmpfs could be mounted here (neither directly nor in a user "
                    "namespace)")
    fd = os.open(small_fs.root, os.O_RDONLY)
    try:
        monkeypatch.setattr(fsops, "PREALLOCATING_FILESYSTEMS", {fsops.filesystem_type(fd)})
    finally:
        os.close(fd)
    logdir = os.path.join(small_fs.root, "log")
    seed(logdir)
    before = snapshot(logdir)
    small_fs.fill_bytes(PREALLOCATE_MIN // 2)  # room for the lock, not for the batches
    large = pa.table({"value": [b"v" * 1000] * (PREALLOCATE_MIN // 1000 + 100),
                      "partition": pa.array([0] * (PREALLOCATE_MIN // 1000 + 100), pa.int32())})
    with pytest.raises(OutOfSpaceError) as caught:
        write_log(logdir, large, topic="t")
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename.startswith(logdir + os.sep)
    assert caught.value.filename.endswith(".batches"), caught.value
    assert traceback.extract_tb(caught.value.__cause__.__traceback__)[-1].name == "preallocate"
    assert snapshot(logdir) == before
    small_fs.free_filler()
    write_log(logdir, large, topic="t")
    assert values_by_partition(logdir)[("t", 0)] == job_values(OLD)[("t", 0)] + \
        large.column("value").to_pylist()


# ---------------------------------------------------------------- streaming sink

def test_a_full_disk_never_loses_or_doubles_a_micro_batch(small_fs, writer_process):
    """A streaming sink's micro-batch against every k: committed, or failed with
    OutOfSpaceError saying whether it was published; then, with room again, the query
    commits the batch again and the log holds it exactly once.

    (Recording the batch as committed, after publishing, needs no more room than the
    journal it follows just freed, so on tmpfs every failure comes before publishing.)"""
    from support.stream_sink import leftovers, sink_records, tree_bytes

    if small_fs.kind == "rlimit":
        pytest.fail("no tmpfs could be mounted here (neither directly nor in a user "
                    "namespace)")
    logdir = os.path.join(small_fs.root, "log")
    published_at, abandoned_at = [], []
    k = 0
    while True:
        small_fs.free_filler()
        seed(logdir)
        before = tree_bytes(logdir)  # the partitions (dot-names aside)
        small_fs.fill_bytes(k)
        reply = writer_process.write(logdir, stream=True)
        if reply["ok"]:
            assert reply["status"] == "committed"
            assert values_by_partition(logdir) == expected_after_job()
            break
        assert reply["type"] == "OutOfSpaceError" and reply["errno"] == errno.ENOSPC, \
            (reply["message"], reply["where"])
        assert reply["filename"].startswith(logdir + os.sep), reply
        assert "\n" not in reply["message"] and "free space" in reply["message"]
        if "was published, but the sink's record still has it pending" in reply["message"]:
            published_at.append(k)
            assert reply["filename"] == os.path.join(logdir, ".segmentlog-sink-q1.json")
            assert values_by_partition(logdir) == expected_after_job()
        else:
            abandoned_at.append(k)
            assert "the log dir was left as it was" in reply["message"], reply
            assert tree_bytes(logdir) == before
        small_fs.free_filler()
        reply = writer_process.write(logdir, stream=True)  # the query runs the batch again
        assert reply["ok"] and reply["status"] == ("replay" if published_at[-1:] == [k]
                                                   else "committed"), (k, reply)
        assert values_by_partition(logdir) == expected_after_job()  # exactly once
        record = sink_records(logdir)["q1"]
        assert record["committed_batch"] == 0 and record["pending"] is None
        assert leftovers(logdir) == []
        k += PAGE
        assert k < 300 * PAGE
    assert len(abandoned_at) > 10, (abandoned_at, published_at)
    assert not published_at or max(abandoned_at) < min(published_at)


# ------------------------------------------------------------------- the renames

@pytest.fixture
def small_ext4(tmp_path):
    image, mountpoint = str(tmp_path / "ext4.img"), str(tmp_path / "ext4")
    os.mkdir(mountpoint)
    with open(image, "wb") as handle:
        handle.truncate(4 << 20)
    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None:
        pytest.skip("the renames' sweep needs root and mkfs.ext4 for a loop-mounted image")
    # a fixed directory hash seed: the same directory blocks split on every run
    subprocess.run(["mkfs.ext4", "-q", "-F", "-b", "1024", "-m", "0", "-O", "^has_journal",
                    "-U", "5e9a1e7c-0000-4000-8000-000000000009",
                    "-E", "hash_seed=5e9a1e7c-0000-4000-8000-000000000009", image],
                   check=True, capture_output=True)
    done = subprocess.run(["mount", "-o", "loop", image, mountpoint], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"no loop mount here for the renames' sweep: {done.stderr.strip()}")
    try:
        yield SmallFilesystem(mountpoint, "ext4")
    finally:
        if subprocess.run(["umount", mountpoint]).returncode != 0:
            subprocess.run(["umount", "-l", mountpoint], check=True)


def test_a_write_whose_publishing_renames_run_out_of_space_is_undone(small_ext4,
                                                                     writer_process):
    """Segments small enough that the partition directories outgrow their first block."""
    options = {"segment_bytes": 600, "batch_size": 250, "index_interval_bytes": 200}
    stages = run_sweep(small_ext4, writer_process, small_ext4.fill_bytes, 1024,
                       options=options)
    # after the journal, only the renames need room
    renames = stages.get("renames", []) + stages.get("renames, then undoing them", [])
    assert renames and min(renames) > max(stages["journal"]), stages
    assert {"lock", "owner", "staged batches", "index", "timeindex", "log", "journal"} <= \
        set(stages), stages


# ------------------------------------------------------------------------ Spark

def test_a_full_disk_under_spark_names_the_path_and_leaves_the_log(spark, small_fs):
    from pyspark.sql import functions as F

    if small_fs.kind == "rlimit":
        pytest.fail("no tmpfs could be mounted here: a file size limit cannot reach "
                    "Spark's Python workers")
    logdir = os.path.join(small_fs.root, "log")
    seed(logdir)
    before = snapshot(logdir)
    df = spark.range(0, 3000, numPartitions=2).select(
        F.concat(F.lit("spark-"), F.col("id").cast("string"), F.lit("-" + "y" * 60))
        .cast("binary").alias("value"))
    # the driver's lock and owner file fit, the tasks' staged batches do not
    small_fs.fill_bytes(2 * PAGE)
    with pytest.raises(Exception) as info:
        df.write.format("segmentlog").mode("append").option("topic", "t").save(logdir)
    message = str(info.value)
    assert "OutOfSpaceError: no space left on device while writing " + logdir in message
    assert "the log dir was left as it was" in message
    assert snapshot(logdir) == before
    assert sorted(os.listdir(logdir)) == LOG_DIR_FILES + ["t-0", "t-1"]
    small_fs.free_filler()
    df.write.format("segmentlog").mode("append").option("topic", "t").save(logdir)
    got = values_by_partition(logdir)
    assert sorted(v for values in got.values() for v in values if v.startswith(b"spark-")) == \
        sorted(b"spark-%d-" % i + b"y" * 60 for i in range(3000))
    for key, values in job_values(OLD).items():
        assert got[key][:len(values)] == values
