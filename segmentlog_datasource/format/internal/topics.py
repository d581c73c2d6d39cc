"""What decoding an internal topic's record gives, and the topics that can be decoded.

Each internal topic's module defines an `InternalTopic`; registry.py gathers them under
the names the `decode` read option takes.
"""
import abc
from dataclasses import dataclass
from typing import List, Optional, Tuple

from .messages import Message, field_tree


@dataclass
class DecodedRecord:
    """One record of an internal topic in Kafka's JSON form.

    `record_type` is the type as Kafka names it (OffsetCommit, GroupMetadata, TOPIC_RECORD,
    ...); for a type this library does not know, the type's own name or number as text
    with `key`/`value` None (the raw bytes stay in the row). `deleted` marks a tombstone:
    a record whose value is null, which removes its key."""

    record_type: Optional[str]
    key_version: Optional[int]
    value_version: Optional[int]
    key: Optional[dict]
    value: Optional[dict]
    deleted: bool = False
    known: bool = True  # False: a record type this library has no definition of


@dataclass(frozen=True)
class RecordShape:
    """The decoded key and value of one record type, as messages.field_tree gives them:
    the struct that `keyDecoded.<name>` and `valueDecoded.<name>` hold."""

    name: str  # the record type as the recordType column holds it
    key: Tuple[Tuple[str, object], ...]
    value: Tuple[Tuple[str, object], ...]


def every_version(message: Message) -> List[int]:
    """Every version of `message` that Kafka defines."""
    low, high = message.span
    return list(range(low, high + 1))


def shape_of(*messages: Message, extra: Tuple[Tuple[Message, int], ...] = ()
             ) -> Tuple[Tuple[str, object], ...]:
    """The fields of `messages` over all their versions, with `extra` (a message holding
    the fields that decode() adds, at one version) merged in."""
    return tuple(field_tree([(message, every_version(message)) for message in messages]
                            + [(message, [version]) for message, version in extra]))


class InternalTopic(abc.ABC):
    """The records of one internal topic: decode() and the shapes of what it gives."""

    option_value = ""  # the `decode` option's value that selects it
    topic = ""  # the topic's name in the log dir
    record_types: Tuple[str, ...] = ()  # every record type it decodes, as Kafka names them
    has_snapshots = False  # whether its partition directories hold snapshot files too

    @abc.abstractmethod
    def decode(self, key: Optional[bytes], value: Optional[bytes]) -> DecodedRecord:
        """Raises RecordDecodeError for a version it does not know or bytes it cannot
        decode (the caller names the topic, partition and offset)."""

    @abc.abstractmethod
    def record_shapes(self) -> List[RecordShape]:
        """Each record type's key and value fields (with the fields decode() adds, such as
        decoded consumer-protocol bytes or a transaction's state name), in the order of
        the record types' ids. One struct per record type: a field name that two record
        types give different types never shares a column."""
