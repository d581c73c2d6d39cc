"""What decoding an internal topic's record gives, and the topics that can be decoded.

Each internal topic's module defines an `InternalTopic` and registers it under the name
the `decode` read option takes (consumerOffsets, transactionState, clusterMetadata).
"""
import abc
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple


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
    def key_fields(self) -> List[Tuple[str, object]]:
        """messages.field_tree of every key this topic's records can have."""

    @abc.abstractmethod
    def value_fields(self) -> List[Tuple[str, object]]:
        """messages.field_tree of every value (with fields added by decode(), such as
        decoded consumer-protocol bytes or a transaction's state name)."""


INTERNAL_TOPICS: Dict[str, InternalTopic] = {}


def register(topic: InternalTopic) -> InternalTopic:
    INTERNAL_TOPICS[topic.option_value] = topic
    return topic


def internal_topics() -> Dict[str, InternalTopic]:
    """Every decodable internal topic by its `decode` option value."""
    from . import group_records, metadata_records, transaction_records  # noqa: F401 (register)

    return INTERNAL_TOPICS
