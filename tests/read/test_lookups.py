"""The lookup option helpers write Spark Kafka source JSON and refuse bad values."""
import datetime as dt

import pytest

from segmentlog_datasource import offset_range, offset_ranges, time_range


def test_lookup_helpers_write_spark_kafka_source_json():
    assert offset_range("orders", 3, 10, 20) == {
        "assign": '{"orders": [3]}',
        "startingOffsets": '{"orders": {"3": 10}}',
        "endingOffsets": '{"orders": {"3": 20}}',
    }
    assert offset_range("orders", 0, 7)["endingOffsets"] == '{"orders": {"0": -1}}'
    assert time_range(5, 9, ["a", "b"]) == {
        "startingTimestamp": "5", "endingTimestamp": "9", "subscribe": "a,b"}
    aware = dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc)
    assert time_range(start=aware) == {"startingTimestamp": "1700000000000"}


@pytest.mark.parametrize("call, message", [
    (lambda: offset_range("t", 0, -1, 5), "t-0 start: -1 is not an offset >= 0"),
    (lambda: offset_range("t", 0, 9, 5), "t-0: end 5 is before start 9"),
    (lambda: offset_range("t", -2, 0, 5), "t--2: the partition must be an integer >= 0"),
    (lambda: offset_range("t", 0, 0, "earliest"), 'is not an offset >= 0 or "latest"'),
    (lambda: offset_ranges({"t": {}}), "topic 't': name at least one partition"),
    (lambda: time_range(dt.datetime(2023, 1, 1)), "has no time zone"),
    (lambda: time_range(9, 5), "end 5 is before start 9"),
    (lambda: time_range("yesterday"), "neither epoch milliseconds"),
    (lambda: time_range(topics=[""]), "is not a list of topic names"),
])
def test_lookup_helpers_reject_bad_values(call, message):
    with pytest.raises(ValueError, match=message.replace("(", "\\(").replace(")", "\\)")):
        call()
