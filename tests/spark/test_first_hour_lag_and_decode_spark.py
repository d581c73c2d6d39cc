"""What a new user meets first with consumer lag and internal topics in Spark (issue #45's
first-hour list): `consumer_lag(spark, path, at=...)` with the ISO 8601 text the README and
`segmentlog lag --at` take, and `option("decode", ...)` on a log dir without that topic,
which must name the option given. On the Kafka 4.2 internal-topics fixture and the
Kafka-written plain topic."""
import shutil

import pytest

import segmentlog_datasource
from segmentlog_datasource.errors import InvalidOptionError
from support.fixtures import internal_topics_kafka4_root

# A commit of the fixture's middle: as of then, some groups' latest commits are not written
# yet (the committed offsets differ from the latest ones).
MOMENT_MILLIS = 1760000106488
MOMENT = "2025-10-09T08:55:06.488Z"


def committed(frame):
    return sorted((r.group, r.topic, r.partition, r.committedOffset) for r in frame.collect())


def test_consumer_lag_at_an_iso_8601_moment_as_the_command_line_takes_it(spark):
    path = internal_topics_kafka4_root()
    by_millis = committed(segmentlog_datasource.consumer_lag(spark, path, at=MOMENT_MILLIS))
    assert by_millis != committed(segmentlog_datasource.consumer_lag(spark, path))
    # Z, an offset, and no zone at all (UTC, as `segmentlog lag --at` reads it)
    for at in (MOMENT, "2025-10-09T10:55:06.488+02:00", "2025-10-09T08:55:06.488"):
        assert committed(segmentlog_datasource.consumer_lag(spark, path, at=at)) == by_millis, at


@pytest.mark.parametrize("at, says", [
    ("yesterday", "at: 'yesterday' is neither epoch milliseconds nor an ISO 8601 time such "
                  "as 2026-11-25T03:00:00Z or 2026-11-25T03:00:00+01:00 (without Z or an "
                  "offset, a time is UTC)"),
    (1.5, "at: 1.5 (a float) is not a moment: give epoch milliseconds, an ISO 8601 time "
          "such as 2026-11-25T03:00:00Z, or a datetime"),
    ("1969-12-31T23:59:59Z", "at: '1969-12-31T23:59:59Z' is before 1970"),
])
def test_consumer_lag_names_at_for_a_moment_it_cannot_take(spark, at, says):
    with pytest.raises(InvalidOptionError) as caught:
        segmentlog_datasource.consumer_lag(spark, internal_topics_kafka4_root(), at=at)
    assert str(caught.value) == says and caught.value.option == "at"


def test_decode_on_a_log_dir_without_its_topic_names_the_decode_option(spark, kafka_logdir,
                                                                       tmp_path):
    logdir = tmp_path / "logdir"
    shutil.copytree(f"{kafka_logdir}/plain-0", logdir / "plain-0")
    with pytest.raises(Exception) as caught:
        spark.read.format("segmentlog").option("decode", "consumerOffsets") \
            .load(str(logdir)).count()
    assert "subscribe" not in str(caught.value)
    assert (f"option 'decode' (consumerOffsets) reads the records of __consumer_offsets: no "
            f"partition directories for topic(s) '__consumer_offsets' under {logdir} (its "
            f"topics: plain)") in str(caught.value)
