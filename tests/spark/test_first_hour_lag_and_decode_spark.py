"""What a new user meets first with internal topics in Spark (issue #45's first-hour
list): `option("decode", ...)` on a log dir without that topic, which must name the option
given. On the Kafka-written plain topic."""
import shutil

import pytest


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
