"""Write options, named after the Kafka broker and producer settings they mirror.

The write options are tabled in docs/writing.md, "Options".
"""
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from ..errors import InvalidOptionError, UnsupportedFormatError, did_you_mean
from ..format import compression
from ..format.checkpoints import parse_topic_id
from ..schemas.registry import parse_subject_strategy
from ..format.layout import CREATE_TIME, INT32_MAX, INT64_MAX, LOG_APPEND_TIME, TIMESTAMP_TYPE_NAMES

# A topic's message.timestamp.type is one of these two (NoTimestampType is magic 0 only).
TIMESTAMP_TYPES = {TIMESTAMP_TYPE_NAMES[t].lower(): t for t in (CREATE_TIME, LOG_APPEND_TIME)}
LEVEL_RANGES = {  # what Kafka accepts for compression.<codec>.level
    compression.GZIP: (1, 9),
    compression.LZ4: (1, 17),
    compression.ZSTD: (-131072, 22),
}

# option name (lower case) -> (attribute, minimum, maximum)
_INT_OPTIONS = {
    "batch.size": ("batch_size", 0, INT32_MAX),
    "segment.bytes": ("segment_bytes", 14, INT32_MAX),
    "segment.ms": ("segment_ms", 1, INT64_MAX),
    "segment.index.bytes": ("segment_index_bytes", 4, INT32_MAX),
    "index.interval.bytes": ("index_interval_bytes", 0, INT32_MAX),
    "max.message.bytes": ("max_message_bytes", 0, INT32_MAX),
    "numpartitions": ("num_partitions", 1, INT32_MAX),
    "leaderepoch": ("leader_epoch", 0, INT32_MAX),
    "tasksegmentbytes": ("task_segment_bytes", 0, INT64_MAX),
}
# A task's batches of one partition from this size on start a segment of their own,
# renamed into place at commit: joining the segment before them would copy them there
# (on the driver, one task after another) and then delete them. Smaller ones join it.
TASK_SEGMENT_BYTES = 8 << 20
_LEVEL_OPTIONS = {
    "compression.gzip.level": compression.GZIP,
    "compression.lz4.level": compression.LZ4,
    "compression.zstd.level": compression.ZSTD,
}
# Options the caller (Spark adapter or engine) consumes itself.
PASSTHROUGH_OPTIONS = {"path", "topic"}
# Framed values (writer/framed.py): the read options' names, per side.
FRAMED_FORMATS = ("raw", "avro", "json", "protobuf")
SCHEMA_OPTION_SUFFIX = {"avro": "AvroSchema", "json": "JsonSchema", "protobuf": "ProtobufSchema"}
_FRAMED_OPTIONS = {
    "valueformat": ("value_format", "valueFormat"), "keyformat": ("key_format", "keyFormat"),
    "valuerecordname": ("value_record_name", "valueRecordName"),
    "keyrecordname": ("key_record_name", "keyRecordName"),
    "subjectnamestrategy": ("subject_name_strategy", "subjectNameStrategy"),
}
# valueAvroSchema, keyJsonSchema, ...: (side, format)
_GIVEN_SCHEMA_OPTIONS = {f"{side}{suffix}".lower(): (side, fmt, f"{side}{suffix}")
                         for side in ("value", "key") for fmt, suffix in SCHEMA_OPTION_SUFFIX.items()}
KNOWN_OPTIONS = sorted(
    ["compression.type", "message.timestamp.type", "topicid", *_INT_OPTIONS, *_LEVEL_OPTIONS,
     *PASSTHROUGH_OPTIONS, *_FRAMED_OPTIONS, *_GIVEN_SCHEMA_OPTIONS]
)


def unknown_option(name, also_known=()) -> InvalidOptionError:
    """The error for an option name the writer does not take, naming the closest ones
    (among `also_known` too: the options the caller takes beside the write options)."""
    return InvalidOptionError(
        f"unknown write option {name!r}{did_you_mean(name, [*KNOWN_OPTIONS, *also_known])}; "
        f"the segmentlog writer takes {', '.join(KNOWN_OPTIONS)}", str(name))


def check_option_names(options: Mapping[str, Any], also_known=()) -> None:
    """Refuse an option name that is neither a write option nor one of `also_known`."""
    known = {name.lower() for name in [*KNOWN_OPTIONS, *also_known]}
    for name in options:
        if str(name).lower() not in known:
            raise unknown_option(name, also_known)


@dataclass(frozen=True)
class WriteOptions:
    compression: int = compression.NONE
    compression_levels: Dict[int, int] = field(default_factory=dict)
    batch_size: int = 16384
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    timestamp_type: int = CREATE_TIME
    max_message_bytes: int = 1048588
    num_partitions: Optional[int] = None
    # the partitions' leader epoch (None: each partition's current one, 0 when new)
    leader_epoch: Optional[int] = None
    topic_id: Optional[str] = None  # None: the topic's own id, or a new one
    task_segment_bytes: int = TASK_SEGMENT_BYTES
    # framed values and keys (writer/framed.py)
    value_format: str = "raw"
    key_format: str = "raw"
    # (side, format, option name, schema text) of the schemas given as options
    given_schemas: Tuple[Tuple[str, str, str, str], ...] = ()
    # the derived record's full name; with a given .proto, the message written
    value_record_name: Optional[str] = None
    key_record_name: Optional[str] = None
    subject_name_strategy: Optional[str] = None  # None: TopicNameStrategy

    @property
    def framed_sides(self):
        """The columns ("key", "value") written Confluent-framed."""
        return tuple(side for side, fmt in (("key", self.key_format),
                                            ("value", self.value_format)) if fmt != "raw")

    def framed_format(self, side: str) -> str:
        return self.key_format if side == "key" else self.value_format

    def record_name(self, side: str) -> Optional[str]:
        return self.key_record_name if side == "key" else self.value_record_name

    def given_schema(self, side: str) -> Optional[Tuple[str, str]]:
        """(option name, schema text) of the schema an option gives this side; None: the
        schema is derived from the column."""
        return next(((option, text) for s, _, option, text in self.given_schemas
                     if s == side), None)

    @property
    def compression_level(self) -> Optional[int]:
        return self.compression_levels.get(self.compression)

    @property
    def max_batch_bytes(self) -> int:
        """Largest batch a broker with these settings takes (max.message.bytes and the
        segment size both bound it)."""
        return min(self.max_message_bytes, self.segment_bytes)

    @classmethod
    def from_mapping(cls, options: Optional[Mapping[str, Any]]) -> "WriteOptions":
        """Parse Kafka-named options (keys case-insensitive; values strings or numbers)."""
        values: Dict[str, Any] = {}
        levels: Dict[int, int] = {}
        given = []
        for raw_key, raw_value in (options or {}).items():
            key = str(raw_key).lower()
            if key in PASSTHROUGH_OPTIONS:
                continue
            if raw_value is None:
                continue
            if key == "compression.type":
                values["compression"] = parse_compression(raw_value)
            elif key == "message.timestamp.type":
                values["timestamp_type"] = parse_timestamp_type(raw_value)
            elif key == "topicid":
                values["topic_id"] = parse_topic_id_option(raw_key, raw_value)
            elif key in _GIVEN_SCHEMA_OPTIONS:
                side, fmt, name = _GIVEN_SCHEMA_OPTIONS[key]
                given.append((side, fmt, name, parse_framed_option(name, raw_value)))
            elif key in _FRAMED_OPTIONS:
                attribute, name = _FRAMED_OPTIONS[key]
                values[attribute] = parse_framed_option(name, raw_value)
            elif key in _INT_OPTIONS:
                attribute, low, high = _INT_OPTIONS[key]
                values[attribute] = parse_int(raw_key, raw_value, low, high)
            elif key in _LEVEL_OPTIONS:
                codec = _LEVEL_OPTIONS[key]
                low, high = LEVEL_RANGES[codec]
                levels[codec] = parse_int(raw_key, raw_value, low, high)
            else:
                raise unknown_option(raw_key)
        if levels:
            values["compression_levels"] = levels
        _check_given_schemas(given, values)
        values["given_schemas"] = tuple(given)
        return cls(**values)


def parse_framed_option(name: str, value):
    if name.endswith("Format"):
        text = str(value).strip().lower()
        if text not in FRAMED_FORMATS:
            raise InvalidOptionError.for_value(name, value, "raw (default), avro, json or "
                                                            "protobuf")
        return text
    if name == "subjectNameStrategy":
        return parse_subject_strategy(value, name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidOptionError(f"option {name!r} must be a non-empty string, got {value!r}",
                                 name)
    return value.strip()


def _check_given_schemas(given, values) -> None:
    """A given schema is in the language its side is written in, and one per side."""
    for side, fmt, name, _ in given:
        side_format = values.get(f"{side}_format", "raw")
        if side_format != fmt:
            raise InvalidOptionError(
                f"option {name!r} gives a {fmt} schema, and option '{side}Format' is "
                f"{side_format}: give '{side}Format' = {fmt}, or "
                f"'{side}{SCHEMA_OPTION_SUFFIX.get(side_format, 'AvroSchema')}' instead", name)
        if values.get(f"{side}_record_name") is not None and fmt != "protobuf":
            raise InvalidOptionError(
                f"options '{side}RecordName' and {name!r} are both given; the schema names "
                f"its record itself", f"{side}RecordName")


def parse_int(name, value, low, high) -> int:
    if isinstance(value, bool):
        raise InvalidOptionError(f"option {name!r} must be an integer, got {value!r}")
    try:
        number = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise InvalidOptionError(f"option {name!r} must be an integer, got {value!r}") from None
    if not low <= number <= high:
        raise InvalidOptionError(
            f"option {name!r} must be between {low} and {high}, got {number}"
        )
    return number


ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's "no topic id"


def parse_topic_id_option(name, value) -> str:
    """A topic id as Kafka prints one: 22 characters of URL-safe base64, not all zeros."""
    text = str(value).strip() if isinstance(value, str) else value
    if not isinstance(text, str) or parse_topic_id(text) is None:
        raise InvalidOptionError(
            f"option {name!r} must be a topic id as Kafka prints one (22 characters of "
            f"URL-safe base64: letters, digits, '-' and '_', e.g. 'XGBQv5S8Qx2DwdJ1M0g0vA'), "
            f"got {value!r}", "topicId")
    if text == ZERO_TOPIC_ID:
        raise InvalidOptionError(
            f"option {name!r} is {text}, the all-zero id Kafka keeps for 'no topic id'",
            "topicId")
    return text


def parse_compression(value) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value in compression.CODEC_NAMES:
        check_codec(value)
        return value
    name = str(value).strip().lower()
    if name == "uncompressed":
        name = "none"
    if name not in compression.CODEC_IDS:
        raise InvalidOptionError(
            f"option 'compression.type' must be one of none, gzip, snappy, lz4, zstd; "
            f"got {value!r}"
        )
    codec = compression.CODEC_IDS[name]
    check_codec(codec)
    return codec


def check_codec(codec: int) -> None:
    """A codec whose package is missing fails here, where the options are read (on the
    driver, before any task runs), with the command that installs it."""
    try:
        compression.check_codec_available(codec)
    except UnsupportedFormatError as exc:
        raise InvalidOptionError(f"option 'compression.type': {exc}", "compression.type") from None


def parse_timestamp_type(value) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value in TIMESTAMP_TYPES.values():
        return value
    name = str(value).strip().lower()
    if name not in TIMESTAMP_TYPES:
        raise InvalidOptionError(
            f"option 'message.timestamp.type' must be CreateTime or LogAppendTime, got {value!r}"
        )
    return TIMESTAMP_TYPES[name]
