"""Which directories are partitions, and what a path that is not a Kafka log gives (#9)."""
import os
import shutil

import pytest

from segmentlog_datasource.errors import CorruptLogError, SegmentLogError
from segmentlog_datasource.format import PartitionLog, discover_partitions
from segmentlog_datasource.format.log import parse_partition_dir_name
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.read.stream import LogStream, parse_stream_options
from segmentlog_datasource.writer import write_log


def _write(logdir, topic="events", partitions=2, rows=6):
    import pyarrow as pa
    table = pa.table({"key": [b"k%d" % i for i in range(rows)],
                      "value": [b"v%d" % i for i in range(rows)]})
    write_log(str(logdir), table, topic, num_partitions=partitions)


def _summary(logs):
    return [(log.topic, log.partition, len(log.segments)) for log in logs]


@pytest.mark.parametrize("name", [
    "date=2023-01-01", "my photos-1", "back\\slash-1", "caf\u00e9-0",
    "a" * 250 + "-0", "..-0", "t@x-3",
])
def test_names_that_are_not_legal_topics_are_not_partitions(name):
    assert parse_partition_dir_name(name) is None


@pytest.mark.parametrize("name,expected", [
    ("a" * 249 + "-0", ("a" * 249, 0)), ("x-1-2", ("x-1", 2)), ("_-.-9", ("_-.", 9)),
])
def test_legal_topic_names_are_partitions(name, expected):
    assert parse_partition_dir_name(name) == expected


def test_parquet_table_is_an_error_naming_the_path(tmp_path):
    table = tmp_path / "table"
    for day in ("date=2023-01-01", "date=2023-01-02"):
        (table / day).mkdir(parents=True)
        (table / day / "part-00000.parquet").write_bytes(b"PAR1....PAR1")
    (table / "_SUCCESS").write_bytes(b"")
    with pytest.raises(SegmentLogError) as info:
        discover_partitions([str(table)])
    message = str(info.value)
    assert str(table) in message and "not a Kafka log dir" in message
    assert "'_SUCCESS'" in message
    # and through read planning, which a batch read runs
    with pytest.raises(SegmentLogError, match="not a Kafka log dir"):
        list(plan_fragments(parse_read_options({"path": str(table)}), Constraints()))


def test_photos_dir_with_a_partition_like_name_is_not_a_partition(tmp_path):
    photos = tmp_path / "photos-1"
    photos.mkdir()
    (photos / "IMG_0001.jpg").write_bytes(b"\xff\xd8\xff\xe0 jpeg")
    for path in (tmp_path, photos):  # as a log dir's child, and given directly
        with pytest.raises(SegmentLogError) as info:
            discover_partitions([str(path)])
        assert str(path) in str(info.value)


def test_non_partitions_beside_real_partitions_are_skipped(tmp_path):
    _write(tmp_path)
    photos = tmp_path / "photos-1"
    photos.mkdir()
    (photos / "IMG_0001.jpg").write_bytes(b"jpeg")
    (tmp_path / "date=2023-01-01").mkdir()
    (tmp_path / "notes.txt").write_text("hello")
    assert _summary(discover_partitions([str(tmp_path)])) == [("events", 0, 1), ("events", 1, 1)]


def test_kafka_bookkeeping_alone_is_an_empty_log_dir(tmp_path):
    for name in ("meta.properties", "recovery-point-offset-checkpoint",
                 "log-start-offset-checkpoint", "replication-offset-checkpoint.tmp",
                 "bootstrap.checkpoint", ".lock"):
        (tmp_path / name).write_text("0\n")
    (tmp_path / "gone-3.0a1b2c3d4e5f60718293a4b5c6d7e8f9-delete").mkdir()
    assert discover_partitions([str(tmp_path)]) == []


def test_partition_without_segments_but_with_kafka_files_is_a_partition(tmp_path):
    directory = tmp_path / "t-0"
    directory.mkdir()
    (directory / "leader-epoch-checkpoint").write_text("0\n0\n")
    (directory / "partition.metadata").write_text("version: 0\n")
    assert _summary(discover_partitions([str(tmp_path)])) == [("t", 0, 0)]
    assert _summary(discover_partitions([str(directory)])) == [("t", 0, 0)]


def test_empty_dir_reads_nothing_in_a_stream_and_fails_a_batch_read(tmp_path):
    empty = tmp_path / "logs"
    empty.mkdir()
    assert discover_partitions([str(empty)]) == []
    stream = LogStream(parse_stream_options({"path": str(empty)}))
    assert stream.initial_offsets() == {}
    with pytest.raises(SegmentLogError, match="no <topic>-<partition> directories"):
        list(plan_fragments(parse_read_options({"path": str(empty)}), Constraints()))
    _write(empty, partitions=1)  # a writer fills it later: the stream sees it
    assert stream.initial_offsets() == {("events", 0): 0}


def test_stream_over_a_dir_of_other_files_is_an_error(tmp_path):
    (tmp_path / "report.csv").write_text("a,b\n")
    stream = LogStream(parse_stream_options({"path": str(tmp_path)}))
    with pytest.raises(SegmentLogError, match="not a Kafka log dir"):
        stream.initial_offsets()


@pytest.mark.parametrize("suffix", [".log", ".index"])
def test_segment_file_that_is_a_directory_is_named(tmp_path, suffix):
    _write(tmp_path, partitions=1)
    directory = tmp_path / "events-0"
    bad = directory / ("00000000000000000000" + suffix)
    os.unlink(bad)
    bad.mkdir()
    with pytest.raises(CorruptLogError) as info:
        PartitionLog.open(str(directory))
    assert str(bad) in str(info.value) and "is a directory" in str(info.value)
    with pytest.raises(CorruptLogError, match="is a directory"):
        discover_partitions([str(tmp_path)])
    shutil.rmtree(bad)


@pytest.mark.parametrize("uri, complaint", [
    ("s3://key:secret-value@bucket/logs", "must not carry credentials"),
    ("s3://bucket/logs?endpoint_override=x", r"takes no \?query"),
    ("s3:///logs", "must name its bucket"),
    ("file://otherhost/logs", "not on host"),
])
def test_a_store_uri_that_cannot_be_read_as_given_is_refused(uri, complaint):
    from segmentlog_datasource.errors import InvalidOptionError

    for options in ({"path": uri}, {"paths": '["/tmp", "%s"]' % uri}):
        with pytest.raises(InvalidOptionError, match=complaint) as info:
            parse_read_options(options)
        assert "secret-value" not in str(info.value)
        with pytest.raises(InvalidOptionError, match=complaint):
            parse_stream_options(options)


@pytest.mark.parametrize("uri, expected", [
    ("s3://bucket/logs/", "s3://bucket/logs"),
    ("s3a://bucket/logs", "s3://bucket/logs"),
    ("gs://bucket/a/b", "gs://bucket/a/b"),
])
def test_a_store_uri_is_taken_as_a_store_path(uri, expected):
    read = parse_read_options({"path": uri})
    assert read.paths == [expected]


def test_a_file_uri_reads_its_path(tmp_path):
    _write(tmp_path / "logs", partitions=1)
    for uri in ("file:%s/logs" % tmp_path, "file://%s/logs" % tmp_path):
        fragments = list(plan_fragments(parse_read_options({"path": uri}), Constraints()))
        assert {f.topic for f in fragments} == {"events"}


def test_a_segment_file_given_as_the_path_names_the_directory_to_give(kafka_logdir):
    segment = os.path.join(kafka_logdir, "plain-0", "00000000000000000000.log")
    for options in ({"path": segment}, {"path": "file://" + segment}):
        with pytest.raises(SegmentLogError) as info:
            plan_fragments(parse_read_options(options), Constraints())
        message = str(info.value)
        assert message.startswith(f"{segment}: is a file; give the partition directory")
        assert os.path.join(kafka_logdir, "plain-0") in message and "log dir" in message
