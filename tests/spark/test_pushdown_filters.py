"""Which pushed filters the reader takes, and the constraints they become."""
import datetime as dt

import pytest
from pyspark.sql.datasource import (
    EqualNullSafe, EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNotNull, LessThan,
    LessThanOrEqual, Not, StringStartsWith,
)

from segmentlog_datasource.format.layout import MAX_OFFSET
from segmentlog_datasource.read.planning import Constraints
from segmentlog_datasource.spark.reader import SegmentLogPushdownReader, apply_filter

UTC = dt.timezone.utc


def constraints_of(*filters):
    constraints = Constraints()
    for f in filters:
        assert apply_filter(constraints, f), f
    return constraints


def test_offset_comparisons_become_a_half_open_range():
    c = constraints_of(GreaterThan(("offset",), 10), LessThanOrEqual(("offset",), 20))
    assert (c.offset_low, c.offset_high) == (11, 21)
    c = constraints_of(GreaterThanOrEqual(("offset",), 10), LessThan(("offset",), 20),
                       EqualTo(("offset",), 15))
    assert (c.offset_low, c.offset_high) == (15, 16)
    c = constraints_of(In(("offset",), (5, 9, 7)), In(("offset",), (7, 9, 11)))
    assert c.offset_values == {7, 9} and (c.offset_low, c.offset_high) == (0, MAX_OFFSET)


def test_topic_and_partition_sets_intersect():
    c = constraints_of(In(("topic",), ("a", "b")), EqualTo(("topic",), "b"),
                       In(("partition",), (0, 1, 2)), EqualTo(("partition",), 2))
    assert c.topics == {"b"} and c.partitions == {2}


def test_timestamps_are_microseconds_and_round_up_to_whole_milliseconds():
    moment = dt.datetime(2023, 11, 14, 22, 13, 20, 500, tzinfo=UTC)  # +500 us
    c = constraints_of(GreaterThanOrEqual(("timestamp",), moment))
    assert c.timestamp_low_us == 1_700_000_000_000_500
    assert c.timestamp_low_ms == 1_700_000_000_001  # no whole-ms record below it qualifies
    c = constraints_of(GreaterThan(("timestamp",), moment), LessThan(("timestamp",), moment +
                                                                     dt.timedelta(seconds=1)))
    assert (c.timestamp_low_us, c.timestamp_high_us) == (
        1_700_000_000_000_501, 1_700_000_001_000_500)


def test_naive_timestamps_are_local_time():
    naive = dt.datetime(2023, 11, 14, 22, 13, 20)
    c = constraints_of(EqualTo(("timestamp",), naive))
    expected = int(naive.astimezone().timestamp()) * 1_000_000
    assert (c.timestamp_low_us, c.timestamp_high_us) == (expected, expected + 1)


@pytest.mark.parametrize("f", [
    Not(EqualTo(("offset",), 3)),
    EqualNullSafe(("offset",), 3),
    IsNotNull(("offset",)),
    StringStartsWith(("topic",), "pl"),
    EqualTo(("key",), b"k"),
    EqualTo(("offset",), "3"),
    EqualTo(("partition",), True),
    In(("partition",), (1, "2")),
    GreaterThan(("topic",), "a"),
    EqualTo(("headers", "key"), "x"),
])
def test_other_filters_are_handed_back(f):
    assert not apply_filter(Constraints(), f)


def test_push_filters_returns_exactly_the_filters_it_cannot_apply():
    reader = SegmentLogPushdownReader({"path": "/nonexistent"}, None)
    taken = EqualTo(("offset",), 3)
    left = Not(EqualTo(("offset",), 4))
    assert list(reader.pushFilters([taken, left])) == [left]
    assert (reader.constraints.offset_low, reader.constraints.offset_high) == (3, 4)
