"""Option parsing for the segmentlog source, named as in Spark's Kafka source.

Every value that makes no sense raises InvalidOptionError naming the option and the forms it
accepts.
"""
import json
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..errors import InvalidOptionError, did_you_mean
from ..storage import (
    STORE_OPTIONS, StoreConfig, expand_glob, is_glob, parse_store_config, resolve,
)
from ..format.compression import DEFAULT_MAX_INFLATED_BYTES
from ..format.scan import DEFAULT_MAX_BATCH_ROWS
from .consumer_settings import CONSUMER_SETTINGS, is_consumer_setting

EARLIEST, LATEST = -2, -1
TopicPartition = Tuple[str, int]


def _get(options, name):
    # Spark passes options case-insensitively; be robust to plain dicts too.
    if name in options:
        return options[name]
    lowered = name.lower()
    for key in options:
        if key.lower() == lowered:
            return options[key]
    return None


def parse_bool(options, name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InvalidOptionError.for_value(name, raw, "true or false")


def parse_positive_int(options, name: str, default: Optional[int]) -> Optional[int]:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidOptionError.for_value(name, raw, "a positive integer") from None
    if value <= 0:
        raise InvalidOptionError.for_value(name, raw, "a positive integer")
    return value


def _parse_json_object(name: str, raw: str, accepted: str) -> dict:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise InvalidOptionError.for_value(name, raw, accepted) from None
    if not isinstance(value, dict):
        raise InvalidOptionError.for_value(name, raw, accepted)
    return value


EXCLUDE_INTERNAL_OPTION = "kafka.exclude.internal.topics"


def is_internal_topic(topic: str) -> bool:
    """Kafka's own topics (`__consumer_offsets`, `__transaction_state`, KRaft's
    `__cluster_metadata`, ...): every name Kafka reserves with a leading `__`."""
    return topic.startswith("__")


@dataclass
class TopicSelection:
    """Which topic-partitions to read: subscribe, subscribePattern, assign, or all.

    As a Kafka consumer with `exclude.internal.topics=true` (its default), internal
    topics are read only when subscribed or assigned by name: a pattern, or no selection
    at all, passes over them unless `kafka.exclude.internal.topics=false`."""

    topics: Optional[List[str]] = None
    pattern: Optional["re.Pattern"] = None
    assigned: Optional[List[TopicPartition]] = None
    exclude_internal: bool = True
    # The option that chose `topics`, as its errors name it, when it is not `subscribe`
    # (a decode option's "option 'decode' (consumerOffsets)").
    chosen_by: str = "option 'subscribe'"

    def matches(self, topic: str, partition: int) -> bool:
        if self.topics is not None:
            return topic in self.topics
        if self.assigned is not None:
            return (topic, partition) in self.assigned
        if self.passes_over(topic):
            return False
        return self.pattern is None or self.pattern.fullmatch(topic) is not None

    def passes_over(self, topic: str) -> bool:
        """Whether `topic` is left out only for being internal."""
        return (self.exclude_internal and self.topics is None and self.assigned is None
                and is_internal_topic(topic)
                and (self.pattern is None or self.pattern.fullmatch(topic) is not None))


# `topic` is the write option naming the topic written; a read given it (a SQL view whose
# OPTIONS serve its INSERTs and its SELECTs) reads that topic, as `subscribe` would.
SELECTION_OPTIONS = ("subscribe", "subscribePattern", "assign", "topic")


def parse_topic_selection(options) -> TopicSelection:
    given = [name for name in SELECTION_OPTIONS if _get(options, name)]
    if len(given) > 1:
        raise InvalidOptionError.for_value(
            given[1], _get(options, given[1]),
            "only one of 'subscribe', 'subscribePattern', 'assign' and 'topic' (the topic "
            "a write writes, which a read then reads) (found "
            + ", ".join(repr(g) for g in given) + ")",
        )
    exclude_internal = parse_bool(options, EXCLUDE_INTERNAL_OPTION, True)
    if not given:
        return TopicSelection(exclude_internal=exclude_internal)
    name = given[0]
    raw = _get(options, name)
    if name == "topic":
        return TopicSelection(topics=[str(raw).strip()], chosen_by="option 'topic'")
    if name == "subscribe":
        topics = [t.strip() for t in raw.split(",") if t.strip()]
        if not topics:
            raise InvalidOptionError.for_value(name, raw, "a comma-separated list of topic names")
        return TopicSelection(topics=topics)
    if name == "subscribePattern":
        try:
            return TopicSelection(pattern=re.compile(raw), exclude_internal=exclude_internal)
        except re.error as exc:
            raise InvalidOptionError.for_value(name, raw, f"a regular expression ({exc})") from None
    accepted = 'JSON like {"topicA":[0,1],"topicB":[2,4]}'
    spec = _parse_json_object(name, raw, accepted)
    assigned = []
    for topic, partitions in spec.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise InvalidOptionError.for_value(name, raw, accepted)
        assigned.extend((topic, p) for p in partitions)
    return TopicSelection(assigned=assigned)


@dataclass
class OffsetSpec:
    """A starting or ending position: earliest/latest, per-partition offsets or timestamps."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    offsets: Dict[TopicPartition, int] = field(default_factory=dict)
    timestamp: Optional[int] = None


def _parse_partition_map(name: str, raw: str, accepted: str, allowed_special) -> Dict:
    spec = _parse_json_object(name, raw, accepted)
    result = {}
    for topic, partitions in spec.items():
        if not isinstance(partitions, dict):
            raise InvalidOptionError.for_value(name, raw, accepted)
        for partition, value in partitions.items():
            try:
                partition_number = int(partition)
            except ValueError:
                raise InvalidOptionError.for_value(name, raw, accepted) from None
            if isinstance(value, bool) or not isinstance(value, int) or partition_number < 0:
                raise InvalidOptionError.for_value(name, raw, accepted)
            if value < 0 and value not in allowed_special:
                raise InvalidOptionError.for_value(name, raw, accepted)
            result[(topic, partition_number)] = value
    return result


def _parse_timestamp(name: str, raw) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidOptionError.for_value(name, raw, "a timestamp in epoch milliseconds") from None
    if value < 0:
        raise InvalidOptionError.for_value(name, raw, "a timestamp in epoch milliseconds (>= 0)")
    return value


def parse_offset_spec(options, which: str) -> OffsetSpec:
    """`which` is "starting" or "ending"; precedence follows Spark's Kafka source."""
    default = "earliest" if which == "starting" else "latest"
    global_ts = _get(options, f"{which}Timestamp")
    if global_ts is not None:
        return OffsetSpec("timestamp", timestamp=_parse_timestamp(f"{which}Timestamp", global_ts))
    by_ts = _get(options, f"{which}OffsetsByTimestamp")
    if by_ts is not None:
        name = f"{which}OffsetsByTimestamp"
        accepted = 'JSON like {"topicA":{"0":1700000000000,"1":1700000000000}}'
        return OffsetSpec("timestamps", _parse_partition_map(name, by_ts, accepted, ()))
    raw = _get(options, f"{which}Offsets")
    name = f"{which}Offsets"
    if raw is None:
        return OffsetSpec(default)
    text = raw.strip()
    if which == "starting":
        accepted = ('"earliest", "latest", or JSON like {"topicA":{"0":23,"1":-2}} '
                    "(-2 earliest, -1 latest)")
        special = (EARLIEST, LATEST)
    else:
        accepted = '"latest", or JSON like {"topicA":{"0":50,"1":-1}} (-1 latest)'
        special = (LATEST,)
    if text.lower() == "earliest":
        if which == "ending":
            raise InvalidOptionError.for_value(name, raw, accepted)
        return OffsetSpec("earliest")
    if text.lower() == "latest":
        return OffsetSpec("latest")
    return OffsetSpec("offsets", _parse_partition_map(name, text, accepted, special))


@dataclass
class ReadOptions:
    paths: List[str]
    selection: TopicSelection
    starting: OffsetSpec
    ending: OffsetSpec
    starting_by_timestamp_strategy: str
    include_headers: bool
    read_committed: bool
    verify_checksums: bool
    fail_on_data_loss: bool
    max_partition_bytes: int
    min_partitions: Optional[int]
    max_records_per_partition: Optional[int]
    max_batch_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES
    max_records_per_batch: int = DEFAULT_MAX_BATCH_ROWS  # rows in an Arrow batch
    store: StoreConfig = field(default_factory=StoreConfig)  # store.* options
    read_up_to: str = "highWatermark"  # READ_UP_TO's values
    include_metadata: bool = False  # each record's batch metadata as columns
    include_control_records: bool = False  # control records as rows too
    # (option, text) of each path as given, globs unexpanded: see current_paths
    given_paths: Tuple[Tuple[str, str], ...] = ()

    @property
    def to_high_watermark(self) -> bool:
        return self.read_up_to == HIGH_WATERMARK

    def current_paths(self) -> List[str]:
        """The paths as they are now: `paths`, with every glob among the given paths
        matched again (a streaming query's trigger lists them anew, as it lists the log
        dirs for new partitions); a glob that matches nothing now is an error."""
        if not any(is_glob(text) for _, text in self.given_paths):
            return self.paths
        return expand_given_paths(self.given_paths, self.store)


DEFAULT_MAX_PARTITION_BYTES = 128 << 20
# readUpTo: what a consumer of the cluster sees (to the high watermark of the log dir's
# replication-offset-checkpoint), or every complete batch (to the log end).
HIGH_WATERMARK, LOG_END = "highWatermark", "logEnd"
READ_UP_TO = (HIGH_WATERMARK, LOG_END)

READ_OPTIONS = {
    "path", "paths", "subscribe", "subscribePattern", "assign", "topic",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy", "includeHeaders", "isolationLevel",
    "verifyChecksums", "failOnDataLoss", "maxPartitionBytes", "minPartitions",
    "maxRecordsPerPartition", "maxBatchInflatedBytes", "maxRecordsPerBatch", "readUpTo",
    "includeMetadata", "includeControlRecords",
    "decode", "mode",  # the decode layer's (decode/options.py)
    "valueFormat", "keyFormat", "schemas", "subjectNameStrategy", "valueRecordName",
    "keyRecordName",
} | set(STORE_OPTIONS)
# Admission control of streaming reads (read.stream); a batch read ignores them, as
# Spark's Kafka source does.
STREAM_OPTIONS = {
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "maxBytesPerTrigger",
}
# Spark Kafka source options that mean nothing without a broker: accepted so that a
# format("kafka") query runs unchanged, and ignored.
KAFKA_SOURCE_ONLY_OPTIONS = {
    "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "groupIdPrefix",
}


KAFKA_PREFIX = "kafka."


def check_known_read_options(options) -> None:
    names = READ_OPTIONS | STREAM_OPTIONS | KAFKA_SOURCE_ONLY_OPTIONS
    known = {name.lower() for name in names}
    for name in options:
        lowered = str(name).lower()
        if lowered in known:
            continue
        if lowered.startswith(KAFKA_PREFIX):
            # A Kafka consumer setting, as Spark's Kafka source passes it on: honoured for
            # kafka.isolation.level and kafka.exclude.internal.topics, ignored otherwise.
            if is_consumer_setting(lowered[len(KAFKA_PREFIX):]):
                continue
            settings = [KAFKA_PREFIX + setting for setting in CONSUMER_SETTINGS]
            raise InvalidOptionError(option=name, message=(
                f"unknown read option {name!r}: {name[len(KAFKA_PREFIX):]!r} is not a Kafka "
                f"consumer setting{did_you_mean(name, settings)}; kafka.* options name "
                f"Kafka consumer settings (kafka.bootstrap.servers, kafka.isolation.level, "
                f"...)"))
        accepted = ", ".join(sorted((READ_OPTIONS | STREAM_OPTIONS) - {"paths"}))
        raise InvalidOptionError(option=name, message=(
            f"unknown read option {name!r}{did_you_mean(name, names - {'paths'})} (names are "
            f"case-insensitive); the read options are {accepted}, and Spark Kafka source "
            f"options and kafka.<consumer setting> are accepted too"))


def given_paths(options) -> Tuple[Tuple[str, str], ...]:
    """(option, text) of every path given: the entries of `paths` (a JSON list, as
    `load([...])` passes several), then `path`."""
    given = []
    raw_paths = _get(options, "paths")
    if raw_paths:
        try:
            parsed = json.loads(raw_paths)
        except json.JSONDecodeError:
            parsed = [raw_paths]
        given.extend(("paths", str(p)) for p in (parsed if isinstance(parsed, list) else [parsed]))
    raw_path = _get(options, "path")
    if raw_path:
        given.append(("path", str(raw_path)))
    if not given:
        raise InvalidOptionError.for_value("path", None, "a log dir or partition directory: .load(path)")
    return tuple(given)


def expand_given_paths(given, config: Optional[StoreConfig] = None) -> List[str]:
    """The paths to read: local paths made absolute, file: URIs decoded, store URIs
    checked (see storage), each glob replaced by the directories it matches, sorted (an
    error naming it and its option when it matches none), less those given before it."""
    paths: List[str] = []
    for option, text in given:
        if is_glob(text):
            paths.extend(match for match in expand_glob(text, config, option)
                         if match not in paths)
        else:
            paths.append(resolve(text, config, option)[1])
    return paths


def parse_paths(options, config: Optional[StoreConfig] = None) -> List[str]:
    return expand_given_paths(given_paths(options), config)


def parse_isolation(options) -> bool:
    raw = _get(options, "isolationLevel")
    name = "isolationLevel"
    if raw is None:
        raw = _get(options, "kafka.isolation.level")
        name = "kafka.isolation.level"
    if raw is None:
        return False
    text = str(raw).strip().lower()
    if text not in ("read_uncommitted", "read_committed"):
        raise InvalidOptionError.for_value(name, raw, "read_uncommitted or read_committed")
    return text == "read_committed"


def parse_read_up_to(options) -> str:
    raw = _get(options, "readUpTo")
    if raw is None:
        return HIGH_WATERMARK
    for value in READ_UP_TO:
        if str(raw).strip().lower() == value.lower():
            return value
    raise InvalidOptionError.for_value(
        "readUpTo", raw, "highWatermark (what a consumer of the cluster reads; the default) "
                         "or logEnd (every complete batch, past the high watermark)")


def parse_read_options(options) -> ReadOptions:
    check_known_read_options(options)
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise InvalidOptionError.for_value("startingOffsetsByTimestampStrategy", strategy, "error or latest")
    ending = parse_offset_spec(options, "ending")
    store = parse_store_config(options)
    given = given_paths(options)
    return ReadOptions(
        paths=expand_given_paths(given, store),
        given_paths=given,
        selection=parse_topic_selection(options),
        starting=parse_offset_spec(options, "starting"),
        ending=ending,
        starting_by_timestamp_strategy=strategy,
        include_headers=parse_bool(options, "includeHeaders", False),
        read_committed=parse_isolation(options),
        verify_checksums=parse_bool(options, "verifyChecksums", True),
        fail_on_data_loss=parse_bool(options, "failOnDataLoss", True),
        max_partition_bytes=parse_positive_int(
            options, "maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES),
        min_partitions=parse_positive_int(options, "minPartitions", None),
        max_records_per_partition=parse_positive_int(options, "maxRecordsPerPartition", None),
        max_batch_inflated_bytes=parse_positive_int(
            options, "maxBatchInflatedBytes", DEFAULT_MAX_INFLATED_BYTES),
        max_records_per_batch=parse_positive_int(
            options, "maxRecordsPerBatch", DEFAULT_MAX_BATCH_ROWS),
        store=store,
        read_up_to=parse_read_up_to(options),
        include_metadata=parse_bool(options, "includeMetadata", False),
        include_control_records=parse_bool(options, "includeControlRecords", False),
    )
