"""What a new user meets first, without Spark: internal topics left out unless named, and
option names checked (a Kafka consumer setting that does not exist, a near miss)."""
import pyarrow as pa
import pytest

from segmentlog_datasource.errors import InvalidOptionError, SegmentLogError
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.read.stream import LogStream, parse_stream_options
from segmentlog_datasource.writer import write_log

INTERNAL = ("__consumer_offsets", "__transaction_state")


@pytest.fixture(scope="module")
def logdir_with_internal_topics(tmp_path_factory):
    """`orders` (2 partitions) beside a broker's internal topics, as a log dir holds them."""
    logdir = str(tmp_path_factory.mktemp("with-internal"))
    for topic in ("orders", *INTERNAL):
        table = pa.table({"key": [f"{topic}-{i}".encode() for i in range(4)],
                          "value": [b"v%d" % i for i in range(4)]})
        write_log(logdir, table, topic=topic, num_partitions=2)
    return logdir


def topics_read(logdir, **options):
    fragments = plan_fragments(parse_read_options({"path": logdir, **options}), Constraints())
    return {fragment.topic for fragment in fragments}


def topics_streamed(logdir, **options):
    stream = LogStream(parse_stream_options({"path": logdir, **options}))
    return {topic for topic, _ in stream.partitions_now()}


@pytest.mark.parametrize("read", [topics_read, topics_streamed], ids=["batch", "stream"])
def test_internal_topics_are_left_out_unless_named(logdir_with_internal_topics, read):
    logdir = logdir_with_internal_topics
    assert read(logdir) == {"orders"}
    assert read(logdir, subscribePattern=".*") == {"orders"}
    # Named, they are read, as a Kafka consumer reads an explicitly subscribed internal topic.
    assert read(logdir, subscribe="__consumer_offsets,orders") == {"__consumer_offsets", "orders"}
    assert read(logdir, assign='{"__transaction_state":[1]}') == {"__transaction_state"}
    # Asked for with the consumer's own setting.
    assert read(logdir, **{"kafka.exclude.internal.topics": "false"}) == {"orders", *INTERNAL}
    assert read(logdir, subscribePattern="__.*",
                **{"kafka.exclude.internal.topics": "false"}) == set(INTERNAL)


def test_a_selection_of_internal_topics_alone_says_how_to_read_them(logdir_with_internal_topics):
    with pytest.raises(SegmentLogError) as caught:
        topics_read(logdir_with_internal_topics, subscribePattern="__.*")
    message = str(caught.value)
    assert "__consumer_offsets, __transaction_state" in message
    assert "kafka.exclude.internal.topics=false" in message and "'subscribe'" in message


def test_exclude_internal_topics_takes_true_or_false(logdir_with_internal_topics):
    with pytest.raises(InvalidOptionError, match="kafka.exclude.internal.topics.*true or false"):
        topics_read(logdir_with_internal_topics, **{"kafka.exclude.internal.topics": "no"})


@pytest.mark.parametrize("name", [
    "kafka.bootstrap.servers", "kafka.group.id", "kafka.max.poll.records",
    "kafka.security.protocol", "kafka.ssl.truststore.location", "kafka.sasl.jaas.config",
    "KAFKA.Client.Id",
    # a setting of the SSL and SASL families newer than the list is not refused
    "kafka.sasl.oauthbearer.assertion.file",
])
def test_kafka_consumer_settings_are_accepted(kafka_logdir, name):
    parse_read_options({"path": kafka_logdir, name: "x"})


@pytest.mark.parametrize("name, suggestion", [
    ("kafka.bootstrap.server", "'kafka.bootstrap.servers'"),
    ("kafka.isolation.levle", "'kafka.isolation.level'"),
    ("kafka.ssl.truststore.locaton", "'kafka.ssl.truststore.location'"),
    ("kafka.exclude.internal.topic", "'kafka.exclude.internal.topics'"),
])
def test_a_misspelled_kafka_setting_is_refused_with_the_near_miss(kafka_logdir, name, suggestion):
    with pytest.raises(InvalidOptionError) as caught:
        parse_read_options({"path": kafka_logdir, name: "x"})
    message = str(caught.value)
    assert message.startswith(f"unknown read option {name!r}")
    assert "not a Kafka consumer setting" in message
    assert f"did you mean {suggestion}" in message


def test_a_kafka_setting_with_no_near_miss_is_refused(kafka_logdir):
    with pytest.raises(InvalidOptionError, match="'colour' is not a Kafka consumer setting; "):
        parse_read_options({"path": kafka_logdir, "kafka.colour": "blue"})


@pytest.mark.parametrize("parse, name, suggestion", [
    (parse_read_options, "startingoffset", "'startingOffsets'"),
    (parse_read_options, "includeHeader", "'includeHeaders'"),
    (parse_read_options, "store.regoin", "'store.region'"),
    (parse_read_options, "groupIdPrefx", "'groupIdPrefix'"),
    (parse_stream_options, "maxOffsetsPerTriger", "'maxOffsetsPerTrigger'"),
    (parse_stream_options, "maxBytesPerTrigge", "'maxBytesPerTrigger'"),
])
def test_an_unknown_option_names_the_near_miss(kafka_logdir, parse, name, suggestion):
    with pytest.raises(InvalidOptionError) as caught:
        parse({"path": kafka_logdir, name: "1"})
    assert str(caught.value).startswith(f"unknown read option {name!r} (did you mean {suggestion}")
