"""Kafka's consumer protocol: the subscription and assignment bytes that a classic group
whose protocol type is "consumer" keeps for each member in its GroupMetadata record.

Each is an int16 version and then the message (ConsumerProtocolSubscription and
ConsumerProtocolAssignment, versions 0 to 3, never flexible). As Kafka's ConsumerProtocol
reads them: a version above the highest known is read with the highest known layout (later
versions only add fields at the end), bytes after the message are not looked at, and a
negative version is an error.
"""
import struct
from typing import Optional

from ...errors import RecordDecodeError
from .messages import Array, Field, Message, Struct

PROTOCOL_TYPE = "consumer"

_OWNED_PARTITION = Struct("TopicPartition", (
    Field("topic", "string", "1+"),
    Field("partitions", Array("int32"), "1+"),
))

SUBSCRIPTION = Message("ConsumerProtocolSubscription", "0-3", "none", (
    Field("topics", Array("string")),
    Field("userData", "bytes", nullable="0+"),
    Field("ownedPartitions", Array(_OWNED_PARTITION), "1+"),
    Field("generationId", "int32", "2+", default=-1),
    Field("rackId", "string", "3+", nullable="3+"),
))

ASSIGNMENT = Message("ConsumerProtocolAssignment", "0-3", "none", (
    Field("assignedPartitions", Array(Struct("TopicPartition", (
        Field("topic", "string"),
        Field("partitions", Array("int32")),
    )))),
    Field("userData", "bytes", nullable="0+"),
))


def decode(message: Message, data: Optional[bytes]) -> dict:
    """{"version": the bytes' version, then the message's fields}. Raises
    RecordDecodeError for bytes Kafka's ConsumerProtocol cannot read either."""
    if data is None or len(data) < 2:
        raise RecordDecodeError(f"{message.name} is {0 if data is None else len(data)} bytes "
                                f"long, too short for its version")
    version = struct.unpack_from(">h", data, 0)[0]
    if version < 0:
        raise RecordDecodeError(f"{message.name} version {version} is unknown")
    layout = min(version, message.span[1])
    value, _ = message.decode_prefix(data, layout, 2)
    return {"version": version, **value}


def decode_or_none(message: Message, data: Optional[bytes]) -> Optional[dict]:
    """decode(), or None where Kafka's group coordinator would not know the member's
    subscription or assignment either: no bytes (a member between rebalances has an empty
    assignment) or bytes that do not parse (the coordinator logs a warning and goes on)."""
    if not data:
        return None
    try:
        return decode(message, data)
    except RecordDecodeError:
        return None


def encode(message: Message, value: dict, version: int) -> bytes:
    """The version-prefixed bytes of `value` (its "version" key is ignored)."""
    fields = {name: item for name, item in value.items() if name != "version"}
    return struct.pack(">h", version) + message.encode(fields, min(version, message.span[1]))


def shape_fields(message: Message):
    """The decoded struct's fields, for column types: the version and every field."""
    return (Field("version", "int16"),) + message.fields
