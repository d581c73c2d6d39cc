"""The decode layer's read options: `decode` (which internal topic's records),
`valueFormat` / `keyFormat` (Schema Registry framed values and keys: raw, avro, json) with
`schemas`, `subjectNameStrategy`, `valueRecordName` / `keyRecordName`, and `mode` (what an
undecodable record does, as Spark's from_avro/from_json name it)."""
from dataclasses import dataclass
from typing import Optional

from ..errors import InvalidOptionError
from ..format.internal.registry import internal_topics
from ..format.internal.topics import InternalTopic
from ..read.options import _get

FAILFAST, PERMISSIVE = "FAILFAST", "PERMISSIVE"
RAW = "raw"
TOPIC_NAME_STRATEGY = "TopicNameStrategy"  # decode/registry.py's strategies' names
FORMAT_TITLES = {"avro": "Avro", "json": "JSON Schema", "protobuf": "Protobuf"}
FORMAT_OPTIONS = ("valueFormat", "keyFormat")
SCHEMA_OPTIONS = ("schemas", "subjectNameStrategy", "valueRecordName", "keyRecordName")
DECODE_OPTIONS = ("decode", "mode") + FORMAT_OPTIONS + SCHEMA_OPTIONS


@dataclass(frozen=True)
class DecodeOptions:
    topic: Optional[InternalTopic] = None  # None: no decoding, the plain read
    permissive: bool = False  # PERMISSIVE: an undecodable record gives nulls and its error
    value_format: str = RAW  # valueFormat
    key_format: str = RAW  # keyFormat
    schemas: Optional[str] = None  # where schemas come from; None: the _schemas topic
    subject_strategy: str = TOPIC_NAME_STRATEGY
    value_record_name: Optional[str] = None  # with the record name strategies
    key_record_name: Optional[str] = None

    @property
    def decoding(self) -> bool:
        """Whether an internal topic is decoded (option `decode`)."""
        return self.topic is not None

    @property
    def framed(self) -> bool:
        """Whether keys or values are Schema Registry framed (valueFormat / keyFormat)."""
        return self.value_format != RAW or self.key_format != RAW

    def record_name(self, side: str) -> Optional[str]:
        return self.key_record_name if side == "key" else self.value_record_name


def parse_decode_options(options) -> DecodeOptions:
    raw = _get(options, "decode")
    mode = _parse_mode(options)
    formats = _parse_formats(options)
    if raw is not None and str(raw).strip() and (formats["value"] != RAW
                                                 or formats["key"] != RAW):
        given = [f"{side}Format={name}" for side, name in formats.items() if name != RAW]
        raise InvalidOptionError(
            f"option 'decode' ({raw}) decodes Kafka's internal topics, and "
            f"{' and '.join(given)} Schema Registry framed records: give one of them",
            "decode")
    if formats["value"] != RAW or formats["key"] != RAW:
        return _framed_options(options, formats, mode == PERMISSIVE)
    for name in SCHEMA_OPTIONS:
        if _get(options, name) is not None:
            raise InvalidOptionError(
                f"option {name!r} says how Schema Registry framed records decode, and applies "
                f"only with option 'valueFormat' or 'keyFormat' (avro, json, protobuf)", name)
    if raw is None or not str(raw).strip():
        if mode is not None:
            raise InvalidOptionError(
                f"option 'mode' ({mode}) says what an undecodable record does, and applies "
                f"only with option 'decode', 'valueFormat' or 'keyFormat'", "mode")
        return DecodeOptions()
    topics = internal_topics()
    wanted = str(raw).strip().lower()
    for name, topic in topics.items():
        if name.lower() == wanted:
            return DecodeOptions(topic, mode == PERMISSIVE)
    accepted = ", ".join(f"{name} (the records of {topic.topic})"
                         for name, topic in topics.items())
    raise InvalidOptionError.for_value("decode", raw, accepted)


def _parse_mode(options) -> Optional[str]:
    raw = _get(options, "mode")
    if raw is None:
        return None
    text = str(raw).strip().upper()
    if text not in (FAILFAST, PERMISSIVE):
        raise InvalidOptionError.for_value(
            "mode", raw, "FAILFAST (an undecodable record fails the read, naming it; the "
                         "default) or PERMISSIVE (its decoded columns are null, and "
                         "keyError/valueError say why)")
    return text


def _parse_formats(options) -> dict:
    from .value_formats import FORMATS

    formats = {}
    for side in ("value", "key"):
        name = f"{side}Format"
        raw = _get(options, name)
        if raw is None or not str(raw).strip():
            formats[side] = RAW
            continue
        wanted = str(raw).strip().lower()
        if wanted != RAW and wanted not in FORMATS:
            raise InvalidOptionError.for_value(
                name, raw, f"{RAW} (the {side}'s bytes, the default), "
                + ", ".join(f"{f} (Schema Registry framed {FORMAT_TITLES.get(f, f)})"
                            for f in FORMATS))
        formats[side] = wanted
    return formats


def _framed_options(options, formats: dict, permissive: bool) -> DecodeOptions:
    from .registry import parse_subject_strategy

    strategy = parse_subject_strategy(_get(options, "subjectNameStrategy"))
    names = {}
    for side in ("value", "key"):
        option = f"{side}RecordName"
        given = _get(options, option)
        given = str(given).strip() if given is not None and str(given).strip() else None
        if given is not None and (strategy == TOPIC_NAME_STRATEGY or formats[side] == RAW):
            why = (f"{side}Format is {RAW}" if formats[side] == RAW
                   else "subjectNameStrategy is TopicNameStrategy, whose subject is "
                        f"<topic>-{side}")
            raise InvalidOptionError(
                f"option {option!r} ({given}) names the record whose subject gives the "
                f"{side}s' schema with subjectNameStrategy=RecordNameStrategy or "
                f"TopicRecordNameStrategy, and {why}", option)
        if given is None and strategy != TOPIC_NAME_STRATEGY and formats[side] != RAW:
            raise InvalidOptionError(
                f"subjectNameStrategy={strategy} names subjects after the record's full name, "
                f"which the log does not say before a record is read: give the record whose "
                f"latest schema is the {side}s' reader schema with option {option!r} (e.g. "
                f"com.example.Order)", option)
        names[side] = given
    schemas = _get(options, "schemas")
    schemas = str(schemas).strip() if schemas is not None and str(schemas).strip() else None
    return DecodeOptions(None, permissive, formats["value"], formats["key"], schemas, strategy,
                         names["value"], names["key"])
