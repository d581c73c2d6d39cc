"""The decode layer's read options: `decode` (which internal topic's records) and `mode`
(what an undecodable record does, as Spark's from_avro/from_json name it)."""
from dataclasses import dataclass
from typing import Optional

from ..errors import InvalidOptionError
from ..format.internal.topics import InternalTopic, internal_topics
from ..read.options import _get

FAILFAST, PERMISSIVE = "FAILFAST", "PERMISSIVE"
DECODE_OPTIONS = ("decode", "mode")


@dataclass(frozen=True)
class DecodeOptions:
    topic: Optional[InternalTopic] = None  # None: no decoding, the plain read
    permissive: bool = False  # PERMISSIVE: an undecodable record gives nulls and its error

    @property
    def decoding(self) -> bool:
        return self.topic is not None


def parse_decode_options(options) -> DecodeOptions:
    raw = _get(options, "decode")
    mode = _parse_mode(options)
    if raw is None or not str(raw).strip():
        if mode is not None:
            raise InvalidOptionError(
                f"option 'mode' ({mode}) says what an undecodable record does, and applies "
                f"only with option 'decode'", "mode")
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
