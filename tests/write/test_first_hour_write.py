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
from segmentlog_datasource.writer import write_log

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
