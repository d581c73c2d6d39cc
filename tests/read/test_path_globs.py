"""Globs of log dirs (storage.globs, read.options): `path` and the entries of `paths` may
be globs of directories, Hadoop's syntax as Spark's file sources take it; batch reads
match them once, a streaming query at every trigger; writes refuse them.

Expected rows come from the broker-disks manifest (Kafka's own reader); expected matches
are the directories the tests make."""
import json
import os
import shutil

import pyarrow as pa
import pytest

from segmentlog_datasource.errors import InvalidOptionError
from segmentlog_datasource.format.scan import ScanOptions
from segmentlog_datasource.read.fragments import scan_fragments
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.read.stream import DataLossError, LogStream, parse_stream_options
from segmentlog_datasource.storage import expand_glob, expand_paths, is_glob
from segmentlog_datasource.writer import write_log
from support import broker_disks as disks

PARTITIONS = disks.manifest()["partitions"]


@pytest.fixture
def tree(tmp_path):
    """Directories (and a file and a dot-directory) to match globs against."""
    for name in ("broker-0", "broker-1", "broker-2", "broker-10", "other", ".trash",
                 "a[1]", "east/kafka", "west/kafka", "west/spare", "broker-0/orders-0",
                 "broker-1/orders-0", "broker-1/orders-1"):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    (tmp_path / "broker-3").write_text("a file, never matched")
    return tmp_path


def names(paths, root):
    return [os.path.relpath(p, root) for p in paths]


# ----------------------------------------------------------------- the glob syntax
def test_a_glob_has_an_unescaped_star_question_mark_bracket_or_brace():
    for glob in ("/x/broker-*", "/x/broker-?", "/x/broker-[012]", "/x/{a,b}", "s3://b/x/*"):
        assert is_glob(glob), glob
    for plain in ("/x/broker-0", "/x/a\\*b", "s3://b/x/y", "/x/a]b", "/x/a}b", ""):
        assert not is_glob(plain), plain


@pytest.mark.parametrize("pattern, expected", [
    ("broker-*", ["broker-0", "broker-1", "broker-10", "broker-2"]),  # sorted; no file
    ("broker-?", ["broker-0", "broker-1", "broker-2"]),
    ("broker-[01]", ["broker-0", "broker-1"]),
    ("broker-[0-1]*", ["broker-0", "broker-1", "broker-10"]),
    ("broker-[!0]", ["broker-1", "broker-2"]),
    ("broker-[^0]", ["broker-1", "broker-2"]),
    ("broker-{0,2}", ["broker-0", "broker-2"]),
    ("broker-{0,1{,0}}", ["broker-0", "broker-1", "broker-10"]),  # nested alternatives
    ("broker-{0,9}", ["broker-0"]),  # an alternative that matches nothing is left out
    ("{broker-0,west/kafka}", ["broker-0", "west/kafka"]),  # alternatives across dirs
    ("*/kafka", ["east/kafka", "west/kafka"]),
    ("broker-?/orders-*", ["broker-0/orders-0", "broker-1/orders-0", "broker-1/orders-1"]),
    ("*", ["a[1]", "broker-0", "broker-1", "broker-10", "broker-2", "east", "other", "west"]),
    (".*", [".trash"]),  # a dot-directory only for a pattern that starts with '.'
    ("a\\[1\\]", ["a[1]"]),  # escaped: literal characters
    ("a[1]", ["a[1]"]),  # matches nothing as a glob, but names a directory as it stands
    ("{broker-0,broker-0,broker-[0]}", ["broker-0"]),  # each match once
])
def test_a_glob_matches_directories_as_sparks_file_sources_do(tree, pattern, expected):
    assert names(expand_glob(str(tree / pattern)), tree) == expected


def test_relative_globs_and_file_uris_are_local_paths(tree, monkeypatch):
    monkeypatch.chdir(tree)
    assert expand_glob("broker-?") == [str(tree / b) for b in ("broker-0", "broker-1",
                                                               "broker-2")]
    # a file: URI as Spark passes a LOCATION: '?' is a glob character, not a query
    assert names(expand_glob(f"file:{tree}/broker-?"), tree) == ["broker-0", "broker-1",
                                                                  "broker-2"]
    assert names(expand_glob(f"file://{tree}/broker-{{1,2}}"), tree) == ["broker-1",
                                                                         "broker-2"]


@pytest.mark.parametrize("given, option", [
    ({"path": "{root}/nothing-*"}, "path"),
    ({"paths": json.dumps(["{root}/broker-0", "{root}/nothing-[0-9]"])}, "paths"),
])
def test_a_glob_that_matches_nothing_is_an_error_naming_it_and_its_option(tree, given, option):
    given = {name: value.replace("{root}", str(tree)) for name, value in given.items()}
    pattern = "nothing-*" if option == "path" else "nothing-[0-9]"
    with pytest.raises(InvalidOptionError) as raised:
        parse_read_options(given)
    assert raised.value.option == option
    assert str(raised.value).startswith(f"option {option!r}: the glob '{tree}/{pattern}' "
                                        f"matches no directory")


@pytest.mark.parametrize("pattern, what", [
    ("broker-[01", "has a '[' without its ']'"),
    ("broker-{0,1", "has a '{' without its '}'"),
    ("broker-0}{", "has a '}' without its '{'"),
])
def test_a_malformed_glob_is_an_error_naming_it(tree, pattern, what):
    with pytest.raises(InvalidOptionError) as raised:
        parse_read_options({"path": str(tree / pattern)})
    assert str(raised.value).startswith(f"option 'path': the glob '{tree / pattern}' {what}")


def test_the_command_lines_paths_keep_plain_ones_and_expand_globs(tree):
    """expand_paths: what the command line's PATH arguments go through."""
    assert expand_paths([str(tree / "other"), str(tree / "broker-[12]"),
                         str(tree / "broker-?")]) == \
        [str(tree / "other")] + [str(tree / b) for b in ("broker-1", "broker-2", "broker-0")]
    with pytest.raises(InvalidOptionError, match=r"^the glob '.*/nothing-\*' matches no "):
        expand_paths([str(tree / "nothing-*")])


def test_a_path_without_glob_characters_is_taken_as_it_is(tree):
    read = parse_read_options({"paths": json.dumps([str(tree / "broker-0"),
                                                    str(tree / "broker-0")])})
    assert read.paths == [str(tree / "broker-0")] * 2  # as before globs: nothing listed


# --------------------------------------------------------------- reads through globs
def read_rows(**options):
    read = parse_read_options({"includeHeaders": "true", **options})
    fragments = plan_fragments(read, Constraints())
    return disks.arrow_rows_by_partition(
        scan_fragments(fragments, ScanOptions(include_headers=True)))


def test_a_glob_of_three_brokers_reads_what_their_list_reads_and_a_consumer_reads():
    listed = parse_read_options({"paths": json.dumps(disks.broker_dirs())})
    for given in ({"path": os.path.join(disks.root(), "broker-*")},
                  {"path": os.path.join(disks.root(), "broker-{0,1,2}")},
                  {"paths": json.dumps([os.path.join(disks.root(), "broker-[01]"),
                                        os.path.join(disks.root(), "broker-?")])}):
        assert parse_read_options(given).paths == listed.paths, given
    got = read_rows(path=os.path.join(disks.root(), "broker-*"),
                    isolationLevel="read_committed")
    assert got == read_rows(paths=json.dumps(disks.broker_dirs()),
                            isolationLevel="read_committed")
    assert sorted(got) == sorted(PARTITIONS)
    for name in PARTITIONS:
        assert got[name] == disks.expected(name, "read_committed"), name


# ------------------------------------------------------------ streams: every trigger
def offsets_seen(s, start, end):
    rows = {}
    for group in s.plan(start, end):
        for batch in scan_fragments(group, ScanOptions()):
            columns = batch.to_pydict()
            for topic, partition, offset in zip(columns["topic"], columns["partition"],
                                                columns["offset"]):
                rows.setdefault((topic, partition), []).append(offset)
    return rows


def test_a_stream_matches_its_glob_again_at_every_trigger(tmp_path):
    write_log(str(tmp_path / "logs-a"), pa.table({"value": [b"a0", b"a1"]}), topic="a",
              num_partitions=1)
    s = LogStream(parse_stream_options({"path": str(tmp_path / "logs-*")}))
    start = s.initial_offsets()
    first = s.latest_offsets(start, None)
    assert first == {("a", 0): 2}
    # a log dir that appears is read from its start at the next trigger, as a new
    # partition in a log dir already read is
    write_log(str(tmp_path / "logs-b"), pa.table({"value": [b"b0", b"b1", b"b2"]}),
              topic="b", num_partitions=1)
    second = s.latest_offsets(first, None)
    assert second == {("a", 0): 2, ("b", 0): 3}
    assert offsets_seen(s, first, second) == {("b", 0): [0, 1, 2]}
    # one that goes takes its partitions with it: data loss, as for a vanished partition
    shutil.rmtree(tmp_path / "logs-b")
    with pytest.raises(DataLossError, match=r"data loss in b-0: .*partition directory is gone"):
        s.latest_offsets(second, None)
    # and when the glob matches nothing any more, the trigger fails naming it
    shutil.rmtree(tmp_path / "logs-a")
    with pytest.raises(InvalidOptionError, match=r"the glob '.*/logs-\*' matches no directory"):
        s.latest_offsets(second, None)


def test_a_stream_of_a_glob_of_three_brokers_reads_what_a_consumer_reads():
    s = LogStream(parse_stream_options({"path": os.path.join(disks.root(), "broker-*")}))
    start = s.initial_offsets()
    end = s.latest_offsets(start, None)
    assert end == {(p["topic"], p["partition"]): p["high_watermark"]
                   for p in PARTITIONS.values()}
    got = offsets_seen(s, start, end)
    for name, p in PARTITIONS.items():
        assert got[(p["topic"], p["partition"])] == [r[0] for r in disks.expected(name)]


# --------------------------------------------------------------------------- writes
@pytest.mark.parametrize("path", ["{tmp}/out-*", "{tmp}/out-{a,b}", "s3://bucket/out-?"])
def test_a_write_refuses_a_glob_naming_the_option(tmp_path, path):
    path = path.replace("{tmp}", str(tmp_path))
    with pytest.raises(InvalidOptionError) as raised:
        write_log(path, pa.table({"value": [b"x"]}), topic="t")
    assert raised.value.option == "path"
    assert str(raised.value).startswith(f"option 'path' is {path!r}: a write goes to one "
                                        f"log dir, and a glob")
    assert os.listdir(tmp_path) == []  # nothing made
