"""Every Spark with the Python Data Source API: 4.0 to 4.3, classic or Spark Connect (#45).

The tests marked `compat` (these, and a representative few of the other Spark tests) are
the subset `.ci/compat` runs on each release in a virtualenv of its own, classic and on
Spark Connect, and `.ci/run` on 4.0 beside the whole suite on 4.3. What a release does
differently (segmentlog_datasource/spark/compat.py) is asserted for the release that
runs: no filter pushdown on 4.0, and on 4.0 and 4.1 a stream source's limits kept through
the end offset it reports (they have no admission control for Python sources).
"""
import collections
import datetime as dt
import os
import re

import pyspark
import pytest
from pyspark.sql import functions as F

import segmentlog_datasource
from segmentlog_datasource import offset_range, time_range
from segmentlog_datasource.errors import SparkReleaseError
from support.manifest import expected_rows, load_manifest
from support.releases import batch_rows, is_connect, spark_release
from support.streams import append

pytestmark = pytest.mark.compat

UTC = dt.timezone.utc


def offsets(rows):
    """{(topic, partition): sorted offsets} of (topic, partition, offset) rows, with each
    offset as many times as it came."""
    found = collections.defaultdict(list)
    for topic, partition, offset in rows:
        found[(topic, partition)].append(offset)
    return {tp: sorted(found[tp]) for tp in found}


def test_the_session_is_the_kind_the_run_asked_for(spark):
    """A Connect run (.ci/compat, SEGMENTLOG_TEST_REMOTE) runs on a Connect session, not on
    a classic one started instead."""
    assert is_connect(spark) == bool(os.environ.get("SEGMENTLOG_TEST_REMOTE"))
    assert spark.version == pyspark.__version__


# ------------------------------------------------------------------ register, pushdown

def test_register_keeps_pushdown_off_and_refuses_it_where_spark_has_none(spark, pushdown):
    pushdown(False)
    # Twice: Spark 4.0 refuses to register a name it discovered, and keeps this source.
    assert segmentlog_datasource.register(spark) is False
    assert segmentlog_datasource.register(spark) is False
    if spark_release(spark) < (4, 1):
        with pytest.raises(SparkReleaseError) as caught:
            segmentlog_datasource.register(spark, enable_filter_pushdown=True)
        assert str(caught.value) == (
            f"register(spark, enable_filter_pushdown=True): filter pushdown needs Spark 4.1 "
            f"or later, and this Spark is {spark.version}")
    else:  # 4.1 to 4.3 have it, and reuse a pushed-down read (docs/reading.md): on request
        with pytest.warns(RuntimeWarning, match="reuses a pushed-down read"):
            assert segmentlog_datasource.register(spark, enable_filter_pushdown=True)


def test_a_filter_is_pushed_down_where_the_release_has_pushdown(spark, pushdown, kafka_logdir,
                                                                 capsys):
    pushdown(True)  # on 4.0 a setting nothing reads
    df = spark.read.format("segmentlog").load(kafka_logdir).where(
        "topic = 'plain' AND offset < 5")
    df.explain()
    plan = capsys.readouterr().out
    filtered_by_spark = re.search(r"topic#\d+ = plain", plan) is not None
    assert filtered_by_spark == (spark_release(spark) < (4, 1)), plan
    expected = [(m["topic"], m["partition"], r["offset"])
                for m in (load_manifest(kafka_logdir, f"plain-{p}") for p in range(3))
                for r in expected_rows(m) if r["offset"] < 5]
    assert offsets(tuple(r) for r in df.select("topic", "partition", "offset").collect()) == \
        offsets(expected)


# The logappend fixture's records: broker times from 1,700,000,000,000 ms on.
BASE_TS_LOGAPPEND = (1_700_000_003_000, 1_700_000_010_000)


def test_lookups_read_their_ranges(spark, kafka_logdir):
    rows = spark.read.format("segmentlog").options(**offset_range("plain", 1, 200, 210)) \
        .load(kafka_logdir).select("partition", "offset").collect()
    assert sorted(tuple(r) for r in rows) == [(1, o) for o in range(200, 210)]
    start, end = BASE_TS_LOGAPPEND
    timed = spark.read.format("segmentlog").options(
        **time_range(start, end, topics=["logappend"])).load(kafka_logdir)
    times = [r[0] for r in timed.select(F.expr("unix_millis(timestamp)")).collect()]
    assert times and all(start <= t < end for t in times)


# ------------------------------------------------------------------------- writes

def test_a_write_reads_back_with_its_timestamps_and_headers(spark, tmp_path):
    moments = [dt.datetime(2024, 3, 31, 1, 30, tzinfo=UTC), dt.datetime(1999, 12, 31, 23, 59,
                                                                        59, 999000, tzinfo=UTC)]
    rows = [("k%d" % i, b"v%d" % i, moments[i % 2], [("h", b"x%d" % i)]) for i in range(40)]
    df = spark.createDataFrame(rows, "key string, value binary, timestamp timestamp, "
                                     "headers array<struct<key:string,value:binary>>")
    path = str(tmp_path / "log")
    df.write.format("segmentlog").mode("append").option("topic", "t") \
        .option("numPartitions", "2").save(path)
    back = spark.read.format("segmentlog").option("includeHeaders", "true").load(path)

    def comparable(frame):
        return sorted((bytes(r[0]), bytes(r[1]), r[2], [(h[0], bytes(h[1])) for h in r[3]])
                      for r in frame.select(F.col("key").cast("binary"), "value",
                                            F.expr("unix_micros(timestamp)"),
                                            "headers").collect())

    assert comparable(back) == comparable(df) and len(comparable(back)) == 40


def test_a_column_with_no_arrow_type_is_named(spark, tmp_path):
    df = spark.sql("SELECT X'6b' AS key, INTERVAL '1' YEAR AS value")
    with pytest.raises(Exception) as caught:
        df.write.format("segmentlog").mode("append").option("topic", "t") \
            .option("numPartitions", "1").save(str(tmp_path / "log"))
    assert "column 'value' has type interval year, which a segmentlog write cannot take" in \
        str(caught.value)
    assert not (tmp_path / "log" / "t-0").exists()


# ---------------------------------------------------------------------- streams in

def start_query(spark, path, checkpoint, out, trigger=None, **options):
    """A query from the log at `path` into Parquet files at `out` (a file sink: it takes
    up again from its checkpoint, and every session reads what it wrote)."""
    reader = spark.readStream.format("segmentlog")
    for option, value in options.items():
        reader = reader.option(option, value)
    writer = reader.load(path).select("topic", "partition", "offset").writeStream \
        .format("parquet").option("path", out).option("checkpointLocation", checkpoint)
    if trigger is not None:
        writer = writer.trigger(**trigger)
    return writer.start()


def delivered(spark, out):
    return offsets(tuple(r) for r in spark.read.parquet(out).collect())


def committed_batches(checkpoint):
    """The micro-batches Spark recorded as committed in a query's checkpoint."""
    commits = os.path.join(checkpoint, "commits")
    return sorted(int(n) for n in os.listdir(commits) if n.isdigit())


def test_max_offsets_per_trigger_bounds_every_micro_batch_across_a_restart(spark, tmp_path):
    """Also the restart from a checkpoint: its batch ids go on from the first run's, and
    startingOffsets is ignored there (the checkpoint decides)."""
    logdir, checkpoint, out = str(tmp_path / "logs"), str(tmp_path / "cp"), str(tmp_path / "out")
    append(logdir, "t", 0, 300, partitions=3)
    query = start_query(spark, logdir, checkpoint, out, maxOffsetsPerTrigger="100")
    try:
        query.processAllAvailable()
        append(logdir, "t", 300, 150, partitions=3)
        query.processAllAvailable()
    finally:
        query.stop()
    first = [n for n in batch_rows(query.recentProgress) if n]
    first_commits = committed_batches(checkpoint)
    append(logdir, "t", 450, 60, partitions=3)  # while no query runs
    query = start_query(spark, logdir, checkpoint, out, maxOffsetsPerTrigger="100",
                        startingOffsets="latest")  # ignored: the checkpoint decides
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    again = [n for n in batch_rows(query.recentProgress) if n]
    commits = committed_batches(checkpoint)
    assert commits == list(range(len(commits))) and len(commits) > len(first_commits) and \
        commits[:len(first_commits)] == first_commits, \
        f"the restart's batch ids do not go on from the first run's: {first_commits} {commits}"
    # Every micro-batch within the limit (give or take one offset a partition, as Spark's
    # Kafka source prorates it), and every record once, across the restart.
    assert len(first) >= 5 and all(n <= 100 + 3 for n in first + again), (first, again)
    assert sum(first) == 450 and sum(again) == 60
    assert delivered(spark, out) == {("t", p): list(range(170)) for p in range(3)}


def test_available_now_with_max_offsets_per_trigger(spark, tmp_path):
    logdir, checkpoint, out = str(tmp_path / "logs"), str(tmp_path / "cp"), str(tmp_path / "out")
    append(logdir, "t", 0, 300, partitions=3)
    runs = []
    while sum(map(sum, runs)) < 300 and len(runs) < 8:
        query = start_query(spark, logdir, checkpoint, out, trigger={"availableNow": True},
                            maxOffsetsPerTrigger="100")
        assert query.awaitTermination(300), "the AvailableNow query did not stop"
        assert query.exception() is None
        runs.append([n for n in batch_rows(query.recentProgress) if n])
    assert all(n <= 100 + 3 for batches in runs for n in batches), runs
    if spark_release(spark) >= (4, 2):
        # Admission control: one run reads all that is there, in micro-batches within
        # the limit.
        assert len(runs) == 1 and len(runs[0]) >= 3, runs
    else:
        # No admission control: Spark asks the source once per AvailableNow run for its
        # latest offset, which segmentlog caps; so each run reads one micro-batch.
        assert len(runs) >= 3 and all(len(batches) == 1 for batches in runs), runs
    assert delivered(spark, out) == {("t", p): list(range(100)) for p in range(3)}


def test_a_stream_with_a_refused_option_fails_with_that_error_on_one_line(spark, tmp_path):
    logdir = str(tmp_path / "logs")
    append(logdir, "t", 0, 5)
    with pytest.raises(Exception) as caught:
        query = start_query(spark, logdir, str(tmp_path / "cp"), str(tmp_path / "out"),
                            endingOffsets="latest")
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    # (a Spark Connect client's error adds the JVM's stack, where Spark repeats it)
    text = str(caught.value).split("\nJVM stacktrace:")[0]
    lines = [line for line in text.splitlines()
             if "segmentlog_datasource.errors.InvalidOptionError: " in line]
    assert len(lines) == 1 and "option 'endingOffsets' is for batch reads" in lines[0], text
    # Spark's stream source runner stops a reader it failed to make, in a `finally`: that
    # failure is not what the query reports (spark/stream_read.py, RefusedStreamReader).
    assert "UnboundLocalError" not in text and "Traceback" not in text, text


# --------------------------------------------------------------------- streams out

def test_a_stream_into_a_log_dir_writes_each_record_once(spark, tmp_path):
    source, sink = str(tmp_path / "in"), str(tmp_path / "out")
    checkpoint = str(tmp_path / "cp")
    append(source, "t", 0, 90, partitions=3)

    def run():
        query = (spark.readStream.format("segmentlog")
                 .load(source).select("key", "value", "timestamp", "partition")
                 .writeStream.format("segmentlog").option("topic", "copy")
                 .option("numPartitions", "3").option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start(sink))
        assert query.awaitTermination(300), "the AvailableNow query did not stop"
        assert query.exception() is None

    def records(path):
        return sorted(tuple(r) for r in spark.read.format("segmentlog").load(path).select(
            "partition", "key", "value", F.expr("unix_micros(timestamp)")).collect())

    run()
    append(source, "t", 90, 30, partitions=3)
    run()
    assert records(sink) == records(source) and len(records(sink)) == 120
