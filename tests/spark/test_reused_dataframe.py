"""One DataFrame, many queries: exact answers in any order, and lookups through options.

Spark 4.3 keeps one planned read per loaded relation and lets a pushed-down read replace
it, so with filter pushdown on, a later unfiltered query on the same DataFrame returns the
earlier filter's rows. The session the README recommends (`register(spark)`) leaves
pushdown off on such a Spark; these tests run query sequences there and compare every
answer with a fresh DataFrame's, pin today's Spark behaviour, and check the lookup
option helpers against a full scan.
"""
import datetime as dt
import os
import warnings

import pyarrow as pa
import pyspark
import pytest

import segmentlog_datasource
from segmentlog_datasource import offset_range, offset_ranges, time_range
from segmentlog_datasource.spark.pushdown_check import probe_pushed_read_leak, pushed_reads_leak
from segmentlog_datasource.writer import write_log

# Whether a pushed-down read leaks into later queries, per Spark release series, as
# checked by hand. A series missing here is probed and reported (see the pin test).
KNOWN_LEAK = {"4.1": True, "4.2": True, "4.3": True}  # 4.0: no pushdown

# Each kind of action, unfiltered right after a filtered one (what a leaked pushed-down
# read would answer wrongly) and filtered after unfiltered. Every query costs a Spark job
# and a planning worker (about 0.8 s), so the list is short: a point lookup, a range, a
# time bound and an empty filter, each action once filtered and once not.
QUERIES = [
    ("count", None),
    ("collect", "topic IN ('plain', 'txn') AND offset BETWEEN 150 AND 170"),
    ("count", None),
    ("count", "partition = 1 AND offset = 200"),
    ("collect", None),
    ("sum", "timestamp >= timestamp'2023-11-14 22:13:30'"),
    ("sum", None),
    ("count", "topic = 'nothing-here'"),
    ("count", None),
]


def answer(df, action, condition):
    if condition is not None:
        df = df.where(condition)
    if action == "count":
        return df.count()
    if action == "sum":
        return tuple(df.selectExpr("count(*)", "sum(offset)", "sum(length(value))").first())
    return sorted((r.topic, r.partition, r.offset, r.key, r.value, r.timestamp)
                  for r in df.collect())


@pytest.fixture
def utc(spark):
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    yield spark
    spark.conf.set("spark.sql.session.timeZone", previous)


def series(version: str) -> str:
    return ".".join(version.split(".")[:2])


def test_register_turns_pushdown_on_only_where_spark_does_not_leak(spark, pushdown):
    pushdown(False)
    enabled = segmentlog_datasource.register(spark)
    assert enabled == (not pushed_reads_leak(spark))
    assert spark.conf.get(segmentlog_datasource.PUSHDOWN_CONF) == ("true" if enabled else "false")


def test_spark_pushdown_leak_is_pinned(spark):
    """Fails (or warns, for an unknown series) the day Spark's behaviour changes."""
    leaks = probe_pushed_read_leak(spark)
    known = KNOWN_LEAK.get(series(spark.version))
    if known is None:
        warnings.warn(f"Spark {spark.version}: pushed-down reads {'do' if leaks else 'do not'} "
                      "leak into later queries; add its series to KNOWN_LEAK", UserWarning)
    else:
        assert leaks == known, (
            f"Spark {spark.version} changed: pushed-down reads now "
            f"{'leak' if leaks else 'no longer leak'}; update KNOWN_LEAK and the README")
    assert pyspark.__version__ == spark.version


@pytest.mark.parametrize("options", [{}, {"subscribe": "plain,txn,compacted",
                                          "includeHeaders": "true"}],
                         ids=["all", "subscribe-headers"])
def test_one_dataframe_answers_like_fresh_dataframes(utc, kafka_logdir, options):
    """The README's session: every query on one DataFrame, in this order, is exact."""
    segmentlog_datasource.register(utc)

    def load():
        return utc.read.format("segmentlog").options(**options).load(kafka_logdir)

    # A fresh DataFrame's answer to a query is the same each time (the log does not
    # change): asked once per query, then compared with every answer of the reused one.
    expected = {query: answer(load(), *query) for query in QUERIES}
    reused = load()
    # Each query after every other (QUERIES alternate unfiltered and filtered ones).
    for action, condition in QUERIES:
        assert answer(reused, action, condition) == expected[action, condition], \
            (action, condition)


def test_with_pushdown_forced_on_spark_43_reuses_the_pushed_read(spark, pushdown, kafka_logdir):
    """What the README warns of, pinned: a filter, then an unfiltered query, same DataFrame."""
    if not pushed_reads_leak(spark):
        pytest.skip(f"Spark {spark.version} does not leak pushed-down reads")
    pushdown(True)
    df = spark.read.format("segmentlog").load(kafka_logdir)
    total = df.count()
    assert df.where("topic = 'plain' AND partition = 1 AND offset = 200").count() == 1
    assert df.count() == 1 != total  # the earlier filter's rows: Spark's bug, not ours
    fresh = spark.read.format("segmentlog").load(kafka_logdir)
    assert fresh.where("topic = 'plain' AND partition = 1 AND offset = 200").count() == 1
    # Two scans of one DataFrame in one query: both read the pushed-down plan.
    again = spark.read.format("segmentlog").load(kafka_logdir)
    assert again.union(again.where("topic = 'plain' AND partition = 1 AND offset = 200")) \
        .count() == 2
    assert spark.read.format("segmentlog").load(kafka_logdir).count() == total


def test_forcing_pushdown_on_a_leaking_spark_warns(spark, pushdown):
    pushdown(False)
    if not pushed_reads_leak(spark):
        pytest.skip(f"Spark {spark.version} does not leak pushed-down reads")
    with pytest.warns(RuntimeWarning, match="load\\(\\) a new DataFrame for every filtered"):
        assert segmentlog_datasource.register(spark, enable_filter_pushdown=True)
    assert not segmentlog_datasource.register(spark, enable_filter_pushdown=False)


def test_a_dataframe_keeps_the_splits_it_planned_while_the_log_grows(spark, tmp_path):
    logdir = str(tmp_path / "growing")
    first = pa.table({"value": pa.array([b"a%d" % i for i in range(300)], pa.binary())})
    write_log(logdir, first, topic="grows", num_partitions=1, segment_bytes=4096, batch_size=64)
    df = spark.read.format("segmentlog").load(logdir)
    assert df.count() == 300
    more = pa.table({"value": pa.array([b"b%d" % i for i in range(200)], pa.binary())})
    write_log(logdir, more, topic="grows", segment_bytes=4096, batch_size=64)
    assert df.count() == 300  # planned once per loaded DataFrame, as Spark's file sources
    assert df.where("offset >= 250").count() == 50
    assert spark.read.format("segmentlog").load(logdir).count() == 500


# Lookups through options: exact, per DataFrame, whatever the pushdown setting.

def _rows(df):
    return sorted((r.topic, r.partition, r.offset, r.value) for r in df.collect())


def _scan(spark, logdir, condition):
    return _rows(spark.read.format("segmentlog").load(logdir).where(condition))


@pytest.mark.parametrize("pushdown_on", [False, True], ids=["plain", "pushdown"])
def test_offset_lookups_equal_a_filtered_scan(spark, pushdown, kafka_logdir, pushdown_on):
    pushdown(pushdown_on)
    read = spark.read.format("segmentlog")
    df = read.options(**offset_range("plain", 1, 200, 201)).load(kafka_logdir)
    assert _rows(df) == _scan(spark, kafka_logdir, "topic = 'plain' AND partition = 1 "
                                                   "AND offset = 200")
    assert len(_rows(df)) == 1 and df.count() == 1
    df = read.options(**offset_range("compacted", 0, 150, 400)).load(kafka_logdir)
    assert _rows(df) == _scan(spark, kafka_logdir, "topic = 'compacted' AND offset >= 150 "
                                                   "AND offset < 400")
    df = read.options(**offset_range("bigoffset", 0, 8589938900)).load(kafka_logdir)
    assert _rows(df) == _scan(spark, kafka_logdir, "topic = 'bigoffset' "
                                                   "AND offset >= 8589938900")
    df = read.options(**offset_ranges({"plain": {0: (10, 20), 2: (200, "latest")},
                                       "txn": {0: (0, 5)}})).load(kafka_logdir)
    assert _rows(df) == _scan(
        spark, kafka_logdir,
        "(topic = 'plain' AND partition = 0 AND offset >= 10 AND offset < 20) OR "
        "(topic = 'plain' AND partition = 2 AND offset >= 200) OR "
        "(topic = 'txn' AND offset < 5)")


def test_time_range_lookup_equals_kafka_offsets_for_times(spark, utc, kafka_logdir):
    start = dt.datetime.fromtimestamp(1_700_000_003, dt.timezone.utc)
    end = dt.datetime.fromtimestamp(1_700_000_010, dt.timezone.utc)
    df = spark.read.format("segmentlog").options(
        **time_range(start, end, topics=["logappend"])).load(kafka_logdir)
    # offsetsForTimes: the first offset with a timestamp at or after each bound.
    offsets = [(r.offset, r.timestamp) for r in
               spark.read.format("segmentlog").load(os.path.join(kafka_logdir, "logappend-0"))
               .orderBy("offset").collect()]
    start_naive, end_naive = start.replace(tzinfo=None), end.replace(tzinfo=None)
    first = next(o for o, t in offsets if t >= start_naive)
    stop = next(o for o, t in offsets if t >= end_naive)
    got = [r.offset for r in df.orderBy("offset").collect()]
    assert got == [o for o, _ in offsets if first <= o < stop] and got
    same = spark.read.format("segmentlog").options(
        **time_range(1_700_000_003_000, 1_700_000_010_000, "logappend")).load(kafka_logdir)
    assert [r.offset for r in same.orderBy("offset").collect()] == got
