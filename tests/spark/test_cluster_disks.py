"""Spark reads of a cluster's disks (three brokers' log dirs): batch and streaming give
what a consumer of that cluster reads, as Kafka's reader wrote it into the manifest,
whether the brokers' dirs are given as a list or as a glob (in load(), `paths` and SQL)."""
import json
import os
import re

import pytest

from support import broker_disks as disks
from support.streams import delivered_offsets, offsets_by_partition

PARTITIONS = disks.manifest()["partitions"]


def rows_by_partition(rows):
    found = {}
    for row in rows:
        found.setdefault(f"{row.topic}-{row.partition}", []).append((
            row.offset, int(row.timestamp.timestamp() * 1000 + 0.5), row.key, row.value,
            [(h.key, h.value) for h in row.headers]))
    return found


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_a_batch_read_of_three_brokers_is_the_clusters_consumer_view(spark, isolation):
    frame = spark.read.format("segmentlog").option("includeHeaders", "true") \
        .option("isolationLevel", isolation).load(disks.broker_dirs())
    got = rows_by_partition(sorted(frame.collect(), key=lambda r: (r.topic, r.partition,
                                                                   r.offset)))
    assert sorted(got) == sorted(PARTITIONS)
    for name in PARTITIONS:
        assert got[name] == disks.expected(name, isolation), name


def glob(pattern):
    return os.path.join(disks.root(), pattern)


def consumer_offsets():
    """{(topic, partition): the offsets a consumer of the cluster reads}, as the manifest
    says."""
    return {(p["topic"], p["partition"]): [r[0] for r in disks.expected(name)]
            for name, p in PARTITIONS.items()}


def offsets_of(frame):
    return offsets_by_partition(sorted(
        tuple(r) for r in frame.select("topic", "partition", "offset").collect()))


# The brokers' dirs as a streaming query is given them: the `paths` list, a glob to
# load() (which takes no list), and a `paths` list that holds a glob.
STREAM_PATHS = {
    "paths list": lambda reader: reader.option("paths", json.dumps(disks.broker_dirs())).load(),
    "glob": lambda reader: reader.load(glob("broker-*")),
    "paths with a glob": lambda reader: reader.option("paths", json.dumps(
        [glob("broker-0"), glob("broker-{1,2}")])).load(),
}


# Streams take their paths through the batch reads' options (spark/tables.py, read_options),
# which the batch tests here check as a list, a glob and in SQL; each streaming query costs
# a source process of its own (about 4 s), so the run streams the form that holds both a
# `paths` list and a glob, and SEGMENTLOG_ALL_STREAM_PATHS=1 streams every form.
STREAM_CASES = (list(STREAM_PATHS) if os.environ.get("SEGMENTLOG_ALL_STREAM_PATHS") == "1"
                else ["paths with a glob"])


@pytest.mark.parametrize("given", STREAM_CASES)
def test_a_stream_of_three_brokers_delivers_each_offset_below_the_high_watermark_once(
        spark, tmp_path, given):
    got, batches = delivered_offsets(STREAM_PATHS[given](
        spark.readStream.format("segmentlog").option("maxOffsetsPerTrigger", 2000)),
        str(tmp_path / "checkpoint"))
    assert batches >= 2
    for name, p in PARTITIONS.items():
        assert got[(p["topic"], p["partition"])] == [r[0] for r in disks.expected(name)], name


@pytest.fixture
def sql_names(spark):
    """Tables and temporary views a test makes, dropped after it."""
    names = []
    yield names
    for name in names:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        spark.catalog.dropTempView(name)


def test_a_glob_of_the_brokers_reads_as_their_list_in_batch_and_in_sql(spark, sql_names):
    listed = offsets_of(spark.read.format("segmentlog").load(disks.broker_dirs()))
    assert listed == consumer_offsets()
    assert offsets_of(spark.read.format("segmentlog").load(glob("broker-*"))) == listed
    sql_names.extend(["brokers_table", "brokers_view", "brokers_at"])
    spark.sql(f"CREATE TABLE brokers_table USING segmentlog OPTIONS (path '{glob('broker-*')}')")
    spark.sql(f"CREATE TEMPORARY VIEW brokers_view USING segmentlog "
              f"OPTIONS (path '{glob('broker-{0,1,2}')}')")
    # Spark passes a LOCATION as a file: URI, '?' and all
    spark.sql(f"CREATE TABLE brokers_at USING segmentlog LOCATION '{glob('broker-?')}'")
    for name in ("brokers_table", "brokers_view", "brokers_at"):
        assert offsets_of(spark.table(name)) == listed, name


def segmentlog_error(caught) -> str:
    """segmentlog's message in Spark's error text (one line: after Spark's header where
    planning failed, on a line of its own where a task did)."""
    lines = [re.split(r"segmentlog_datasource\.errors\.\w+: ", line, maxsplit=1)[1]
             for line in str(caught.value).splitlines()
             if re.search(r"segmentlog_datasource\.errors\.\w+: ", line)]
    assert len(lines) == 1, str(caught.value)
    return lines[0]


def test_a_glob_that_matches_nothing_fails_naming_it_and_a_write_refuses_a_glob(
        spark, sql_names, tmp_path):
    nothing = glob("broker-[3-9]")
    expected = f"option 'path': the glob '{nothing}' matches no directory"
    with pytest.raises(Exception) as caught:
        spark.read.format("segmentlog").load(nothing).collect()
    assert segmentlog_error(caught).startswith(expected)
    with pytest.raises(Exception) as caught:
        spark.readStream.format("segmentlog").load(nothing).writeStream.format("noop") \
            .option("checkpointLocation", str(tmp_path / "checkpoint")).start() \
            .awaitTermination(60)
    assert expected in str(caught.value)
    sql_names.append("no_brokers")
    with pytest.raises(Exception) as caught:
        spark.sql(f"CREATE TABLE no_brokers USING segmentlog OPTIONS (path '{nothing}')")
    # (a table's path reaches the source as a file: URI)
    assert segmentlog_error(caught).startswith(expected.replace("'/", "'file:/"))
    assert not spark.catalog.tableExists("no_brokers")
    target = str(tmp_path / "copy-*")
    with pytest.raises(Exception) as caught:
        spark.range(1).selectExpr("X'76' AS value").write.format("segmentlog") \
            .mode("append").option("topic", "t").save(target)
    assert segmentlog_error(caught).startswith(f"option 'path' is {target!r}: a write goes to "
                                               f"one log dir, and a glob")
    assert not any(name.startswith("copy") for name in os.listdir(tmp_path))
