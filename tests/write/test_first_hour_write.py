"""What a new user meets first when writing, without Spark: a codec whose package is
missing fails before anything is written, with the command that installs it; a misspelled
write option names the near miss; the columns a read gives can be written back."""
import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from segmentlog_datasource.errors import InvalidOptionError
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.format import ScanOptions
from segmentlog_datasource.writer import SegmentLogWriter, write_log

# Makes the codec packages named on the command line unimportable, as on a machine where
# they were never installed.
BLOCKER = textwrap.dedent("""
    import importlib.abc, os, sys

    BLOCKED = set(os.environ["BLOCK_MODULES"].split(","))

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
""")

WRITE = textwrap.dedent("""
    import sys
    import pyarrow as pa
    from segmentlog_datasource.errors import InvalidOptionError
    from segmentlog_datasource.writer import write_log

    try:
        write_log(sys.argv[1], pa.table({"value": [b"v1", b"v2"]}), topic="orders",
                  num_partitions=1, compression=sys.argv[2])
    except InvalidOptionError as exc:
        print(exc)
        sys.exit(3)
""")


@pytest.fixture
def without_modules(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)

    def run(blocked, *args):
        env = dict(os.environ, PYTHONPATH=str(site), BLOCK_MODULES=",".join(blocked))
        return subprocess.run([sys.executable, "-c", WRITE, *args], capture_output=True,
                              text=True, timeout=300, cwd=str(tmp_path), env=env)

    return run


@pytest.mark.parametrize("codec, module, command", [
    ("zstd", "zstandard", 'pip install "segmentlog[zstd]"'),
    ("snappy", "cramjam", 'pip install "segmentlog[snappy]"'),
])
def test_a_missing_codec_fails_before_anything_is_written(without_modules, tmp_path, codec,
                                                          module, command):
    logdir = tmp_path / "logdir"
    result = without_modules([module], str(logdir), codec)
    assert result.returncode == 3, result.stderr[-3000:]
    message = result.stdout.strip()
    assert message.startswith(f"option 'compression.type': {codec} compression needs the "
                              f"{module!r} package"), message
    assert message.endswith(command), message
    assert not logdir.exists()  # no lock, no staging directory, no topic


def test_the_same_write_runs_where_the_codec_is_installed(without_modules, tmp_path):
    result = without_modules(["cramjam"], str(tmp_path / "logdir"), "zstd")
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert os.path.isdir(tmp_path / "logdir" / "orders-0")


@pytest.mark.parametrize("options, suggestion", [
    ({"compresion.type": "lz4"}, "'compression.type'"),
    ({"segment.byte": 1 << 20}, "'segment.bytes'"),
    ({"numPartition": 2}, "'numpartitions'"),
    ({"store.regoin": "eu-west-1"}, "'store.region'"),
])
def test_a_misspelled_write_option_names_the_near_miss(tmp_path, options, suggestion):
    with pytest.raises(InvalidOptionError) as caught:
        write_log(str(tmp_path / "logdir"), pa.table({"value": [b"v"]}), topic="t",
                  options=options)
    name = next(iter(options))
    assert str(caught.value).startswith(f"unknown write option {name!r} "
                                        f"(did you mean {suggestion}")
    assert not (tmp_path / "logdir").exists()


def test_the_columns_a_read_gives_write_back_as_the_same_records(kafka_logdir, tmp_path):
    options = parse_read_options({"path": kafka_logdir, "subscribe": "plain"})
    fragments = plan_fragments(options, Constraints())
    read = pa.Table.from_batches(
        [b for f in fragments for b in f.scan(ScanOptions(include_headers=True))])
    assert {"offset", "timestampType", "partition"} <= set(read.column_names)
    copy = str(tmp_path / "copy")
    write_log(copy, read, topic="plain-copy", num_partitions=3)
    copied = pa.Table.from_batches([
        b for f in plan_fragments(parse_read_options({"path": copy}), Constraints())
        for b in f.scan(ScanOptions(include_headers=True))])

    def records(table):
        rows = table.select(["partition", "offset", "key", "value", "timestamp",
                             "headers"]).to_pylist()
        return sorted((r["partition"], r["offset"], r["key"], r["value"], r["timestamp"],
                       r["headers"]) for r in rows)

    assert records(copied) == records(read)
    assert set(copied.column("topic").to_pylist()) == {"plain-copy"}


# Kafka allows topic names of up to 249 characters (the partition directory
# `<topic>-<partition>` then still fits a file name's 255 bytes).
def long_topic(length):
    topic = ("orders." * 40)[: length - 3] + "_-9"
    assert len(topic) == length
    return topic


def read_values(logdir):
    fragments = plan_fragments(parse_read_options({"path": logdir}), Constraints())
    return {(f.topic, row["partition"], row["offset"]): row["value"]
            for f in fragments for batch in f.scan(ScanOptions()) for row in batch.to_pylist()}


@pytest.mark.parametrize("length", [230, 249])
def test_every_legal_topic_name_writes_and_reads_back(tmp_path, length):
    from segmentlog_datasource.writer.errors import ConcurrentWriteError
    from segmentlog_datasource.writer.lockfiles import TORN_LOCK_SECONDS
    from segmentlog_datasource.writer.locks import lock_path

    logdir = str(tmp_path / "logdir")
    topic = long_topic(length)
    write_log(logdir, pa.table({"value": [b"a", b"b"], "partition": [0, 1]}), topic=topic,
              num_partitions=12)
    write_log(logdir, pa.table({"value": [b"c"], "partition": [11]}), topic=topic)
    assert read_values(logdir) == {(topic, 0, 0): b"a", (topic, 1, 0): b"b",
                                   (topic, 11, 0): b"c"}
    # An overwrite swaps each partition directory and moves the old one aside.
    write_log(logdir, pa.table({"value": [b"x", b"y"], "partition": [0, 1]}), topic=topic,
              num_partitions=2, mode="overwrite")
    assert read_values(logdir) == {(topic, 0, 0): b"x", (topic, 1, 0): b"y"}
    # The lock is found by its topic: a second writer is refused while the first holds it.
    with SegmentLogWriter(logdir, topic) as first:
        with pytest.raises(ConcurrentWriteError) as caught:
            SegmentLogWriter(logdir, topic)
        assert lock_path(logdir, topic) in str(caught.value)
        assert repr(topic) in str(caught.value)
        first.write_rows([{"value": b"z", "partition": 0}])
    # A torn lock left by a killed writer is still taken over once it is old.
    torn = lock_path(logdir, topic)
    open(torn, "wb").close()
    old = os.stat(torn).st_mtime - TORN_LOCK_SECONDS - 5
    os.utime(torn, (old, old))
    write_log(logdir, pa.table({"value": [b"w"], "partition": [1]}), topic=topic)
    assert read_values(logdir) == {(topic, 0, 0): b"x", (topic, 0, 1): b"z",
                                   (topic, 1, 0): b"y", (topic, 1, 1): b"w"}
    assert not [name for name in os.listdir(logdir) if name.startswith(".segmentlog-lock-")]


@pytest.mark.parametrize("other", [["_SUCCESS", "part-00000-5b1c.snappy.parquet"],
                                   ["photos/cat.jpg", "notes.txt"]], ids=["parquet", "photos"])
def test_a_write_into_a_directory_of_other_data_is_refused_naming_it(tmp_path, other):
    target = tmp_path / "output"
    for name in other:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_bytes(b"\xff")
    before = sorted(os.listdir(target))
    with pytest.raises(InvalidOptionError) as caught:
        write_log(str(target), pa.table({"value": [b"v"]}), topic="t1", num_partitions=1)
    shown = ", ".join(repr(name) for name in before)
    assert str(caught.value) == (
        f"{target} is not a Kafka log dir: it holds {shown} and no <topic>-<partition> "
        f"directory, and a read of it fails. Write into a new or empty directory, or into a "
        f"log dir")
    assert sorted(os.listdir(target)) == before  # no t1-0/, no lock, no staging area


def test_a_log_dir_with_other_files_beside_its_partitions_is_written(tmp_path):
    # A read takes it (it skips the other files), so a write does too.
    logdir = tmp_path / "logdir"
    write_log(str(logdir), pa.table({"value": [b"a"]}), topic="t", num_partitions=1)
    (logdir / "README.txt").write_text("kept beside the partitions\n")
    write_log(str(logdir), pa.table({"value": [b"b"]}), topic="u", num_partitions=1)
    assert set(read_values(str(logdir)).values()) == {b"a", b"b"}
