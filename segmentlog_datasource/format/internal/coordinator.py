"""The topics Kafka's coordinators keep their state in: `__consumer_offsets`,
`__share_group_state` and `__transaction_state`, all framed alike (Kafka 4.x's
CoordinatorRecordSerde).

A key is an int16 record type then the key message (version 0); a value an int16 version
then the value message; a null value deletes the key (a tombstone). As Kafka's
coordinators load their topics: a record type they do not know is skipped, not an error
(here: a record of type "UNKNOWN_<n>" with nothing decoded), while a value version they do
not know is an error. The messages are read as Kafka's generated readers read them
(messages.py), and bytes left after a key's or a value's message are not looked at:
Kafka's CoordinatorRecordSerde (and 3.9's loaders before it) never checks that a buffer
was read to its end.
"""
from dataclasses import replace
from typing import Dict, List, Optional, Tuple

from .messages import Message, read_version
from .topics import DecodedRecord, InternalTopic, RecordShape, shape_of

# record type -> (Kafka's name for it, key message, value message)
RecordTable = Dict[int, Tuple[str, Message, Message]]


def unknown_type_name(record_type: int) -> str:
    return f"UNKNOWN_{record_type}"


def key_message(name: str, *fields) -> Message:
    """A key message: version 0 alone, each field of version 0 (as Kafka's key definitions
    declare them)."""
    return Message(name, "0", "none", tuple(replace(item, versions="0") for item in fields))


class CoordinatorTopic(InternalTopic):
    """An internal topic of coordinator records, decoded by `records` (its table)."""

    records: RecordTable = {}
    # record type name -> (a message of the fields complete() adds, its version)
    added_fields: Dict[str, Tuple[Message, int]] = {}

    def complete(self, name: str, value: dict, version: int) -> None:
        """Adds derived fields to a decoded value, or raises RecordDecodeError for a value
        Kafka's loader refuses though it parses."""

    def decode(self, key: Optional[bytes], value: Optional[bytes]) -> DecodedRecord:
        record_type, start = read_version(key, f"the {self.topic} record's key")
        known = self.records.get(record_type)
        if known is None:
            return DecodedRecord(unknown_type_name(record_type), record_type, None, None,
                                 None, deleted=value is None, known=False)
        name, key_type, value_type = known
        # errors name the record type by its key or value message (OffsetCommitValue)
        decoded_key, _ = key_type.decode_prefix(key, 0, start)
        if value is None:
            return DecodedRecord(name, record_type, None, decoded_key, None, deleted=True)
        value_version, start = read_version(value, f"the {value_type.name}")
        value_type.check_version(value_version)
        decoded_value, _ = value_type.decode_prefix(value, value_version, start)
        self.complete(name, decoded_value, value_version)
        return DecodedRecord(name, record_type, value_version, decoded_key, decoded_value)

    def record_shapes(self) -> List[RecordShape]:
        shapes = []
        for name, key, value in self.records.values():
            added = self.added_fields.get(name)
            shapes.append(RecordShape(name, shape_of(key),
                                      shape_of(value, extra=(added,) if added else ())))
        return shapes
