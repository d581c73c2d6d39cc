"""`segmentlog dump` with an internal topic's decoder: the records of `__consumer_offsets`,
`__transaction_state`, `__cluster_metadata`, `__share_group_state`, `__remote_log_metadata`
(every topic the `decode` read option decodes: format.internal.registry.internal_topics())
shown as Kafka's kafka-dump-log shows them with its --offsets-decoder,
--transaction-log-decoder, --cluster-metadata-decoder, --share-group-state-decoder and
--remote-log-metadata-decoder.

Per record, the key and the value are decoded (the decoder's own code, the same the reads
use) into Kafka's JSON form of the messages: field names as Kafka's message definitions
give them, bytes as base64, uuids as Kafka prints them. kafka-dump-log prints a
coordinator record (offsets, transactions, share-group state) as
`key: {"type":"<record type>","data":{...}} payload: {"version":"<value version>","data":{...}}`
(`payload: <DELETE>` for a tombstone), a metadata record as
`payload: {"type":"<TYPE_NAME>","version":<version>,"data":{...}}` (a remote log metadata
record so too, where kafka-dump-log prints its Java object's toString), and KRaft's control
records (leader changes, snapshot headers and footers, kraft.version, voters) by name with
their JSON. A classic group's consumer-protocol subscription and assignment bytes are
shown decoded in place, as kafka-dump-log shows them (the bytes stay where they do not
parse).

A record type the decoder does not know is skipped, as Kafka's loaders skip it ("Unknown
record type ..."). A record that does not decode (a value version the decoder does not
know, bytes that end early) does not stop the dump either, as kafka-dump-log goes on: its
line says why, naming the offset, the record type and version as far as they can be read,
the file and the batch's byte position (`decodeError` with --json), and the command notes
on stderr how many records could not be decoded.
"""
import base64
import json
import struct
from typing import Dict, List, Optional, Tuple

from ..errors import InvalidOptionError, RecordDecodeError

# kafka-dump-log's decoder flags and the `decode` option value each is
KAFKA_FLAGS: Tuple[Tuple[str, str], ...] = (
    ("offsets-decoder", "consumerOffsets"),
    ("transaction-log-decoder", "transactionState"),
    ("cluster-metadata-decoder", "clusterMetadata"),
    ("share-group-state-decoder", "shareGroupState"),
    ("remote-log-metadata-decoder", "remoteLogMetadata"),
)
# How kafka-dump-log names the KRaft control records it shows (with their JSON)
CONTROL_NAMES = {
    "LEADER_CHANGE": "LeaderChange:",
    "SNAPSHOT_HEADER": "SnapshotHeader",
    "SNAPSHOT_FOOTER": "SnapshotFooter",
    "KRAFT_VERSION": "KRaftVersion",
    "KRAFT_VOTERS": "KRaftVoters",
}
_INT16 = struct.Struct(">h")


def internal_decoders() -> Dict[str, object]:
    """Every internal topic the decoders know, by its `decode` option value."""
    from ..format.internal.registry import internal_topics

    return internal_topics()


def decoder_names() -> List[str]:
    return list(internal_decoders())


def flag_of(name: str) -> Optional[str]:
    """kafka-dump-log's flag for the decoder `name`, if it has one."""
    return next((f"--{flag}" for flag, value in KAFKA_FLAGS if value == name), None)


class InternalDecoder:
    """Decodes the records of one internal topic for dump (`name`: its `decode` value;
    `shown`: how the command line names it in messages)."""

    def __init__(self, name: str, shown: Optional[str] = None):
        known = internal_decoders()
        if name not in known:
            raise InvalidOptionError(f"{shown or name}: no decoder of an internal topic is "
                                     f"named {name!r} (there are {', '.join(known)})")
        self.name = name
        self.topic = known[name]
        self.shown = shown or f"--decoder {name}"

    def data_fields(self, record, path: str, position: int) -> dict:
        """The record's decoded fields for a dump item: recordType, keyVersion,
        valueVersion, key, value (Kafka's JSON form), deleted, known, decodeError (and for
        a transaction, the name of its `state`)."""
        try:
            decoded = self.topic.decode(record.key, record.value)
        except RecordDecodeError as error:
            record_type, key_version, value_version = _readable_frame(
                record.key, record.value, self.name)
            return self._failed(record, path, position, error.reason, record_type,
                                key_version, value_version)
        key, value, extra = kafka_form(self.name, decoded.key, decoded.value)
        return {"decoder": self.name, "recordType": decoded.record_type,
                "keyVersion": decoded.key_version, "valueVersion": decoded.value_version,
                "key": key, "value": value, "deleted": decoded.deleted,
                "known": decoded.known, "decodeError": None, **extra}

    def control_fields(self, record, path: str, position: int) -> dict:
        """A control record decoded (KRaft's control records, transaction markers)."""
        from ..format.internal.metadata_records import decode_control_record

        try:
            decoded = decode_control_record(record.key, record.value)
        except RecordDecodeError as error:
            return self._failed(record, path, position, error.reason, None, None, None)
        return {"decoder": self.name, "recordType": decoded.record_type,
                "keyVersion": decoded.key_version, "valueVersion": decoded.value_version,
                "key": decoded.key, "value": decoded.value, "deleted": False,
                "known": decoded.known, "decodeError": None}

    def _failed(self, record, path, position, reason, record_type, key_version,
                value_version) -> dict:
        what = []
        if record_type is not None:
            what.append(f"record type {record_type}")
        if value_version is not None:
            what.append(f"value version {value_version}")
        shown = f" ({', '.join(what)})" if what else ""
        return {"decoder": self.name, "recordType": None, "keyVersion": key_version,
                "valueVersion": value_version, "key": None, "value": None,
                "deleted": record.value is None, "known": True,
                "decodeError": f"{path} batch at byte {position}, offset {record.offset}"
                               f"{shown}: {reason}"}


def _readable_frame(key: Optional[bytes], value: Optional[bytes], name: str
                    ) -> Tuple[Optional[object], Optional[int], Optional[int]]:
    """(record type, key version, value version) of a record of the decoder `name`'s
    topic that does not decode, as far as they can be read: a coordinator record's key
    starts with its int16 record type and its value with the int16 version; a metadata or
    remote log metadata record (no key) frames its value with varints (frame version,
    record type, version)."""
    if key is not None:
        record_type = _INT16.unpack_from(key)[0] if len(key) >= 2 else None
        version = _INT16.unpack_from(value)[0] if value is not None and len(value) >= 2 \
            else None
        return record_type, record_type, version
    if value is not None:
        if name == "remoteLogMetadata":  # its api keys name record types of its own
            from ..format.internal import remote_log_metadata as framed
        else:
            from ..format.internal import metadata_records as framed

        try:
            api_key, version, _ = framed.read_frame(value)
        except RecordDecodeError:
            return None, None, None
        return f"{framed.record_type_name(api_key)} (api key {api_key})", None, version
    return None, None, None


def kafka_form(name: str, key: Optional[dict], value: Optional[dict]
               ) -> Tuple[Optional[dict], Optional[dict], dict]:
    """(key, value, extra): the decoded key and value as kafka-dump-log prints their
    messages, and what the decoder adds beside Kafka's fields (a transaction's state
    name, which kafka-dump-log does not print, goes to `extra`). A classic group's
    consumer-protocol subscription and assignment are put in place of their bytes, as
    kafka-dump-log does, where they decode."""
    extra = {}
    if value is None:
        return key, value, extra
    from ..format.internal.group_records import ASSIGNMENT_DECODED, SUBSCRIPTION_DECODED

    value = dict(value)
    if name == "transactionState":
        from ..format.internal.transaction_records import STATE

        if STATE in value:
            extra["state"] = value.pop(STATE)
    members = value.get("members")
    if isinstance(members, list) and any(isinstance(member, dict) and (
            SUBSCRIPTION_DECODED in member or ASSIGNMENT_DECODED in member)
            for member in members):
        value["members"] = [_consumer_protocol_in_place(member, (
            ("subscription", SUBSCRIPTION_DECODED), ("assignment", ASSIGNMENT_DECODED)))
            for member in members]
    return key, value, extra


def _consumer_protocol_in_place(member: dict, fields) -> dict:
    member = dict(member)
    for raw, decoded_name in fields:
        decoded = member.pop(decoded_name, None)
        if decoded is not None:
            # kafka-dump-log writes the message at the version its bytes carry; the
            # version itself is no field of it
            member[raw] = {field: item for field, item in decoded.items() if field != "version"}
    return member


# ------------------------------------------------------------------ text

def as_json(value) -> str:
    """Compact JSON as Kafka's Jackson writes it: bytes as base64, text unescaped."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_base64)


def _base64(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"cannot show {type(value).__name__}")


def _type_number(item: dict) -> str:
    record_type = item["recordType"] or ""
    return record_type[len("UNKNOWN_"):] if record_type.startswith("UNKNOWN_") \
        else record_type


def data_text(item: dict) -> str:
    """What follows a data record's metadata in kafka-dump-log's line."""
    if item["decodeError"] is not None:
        return f" undecodable: {item['decodeError']}"
    keyed = item["keyVersion"] is not None
    if not item["known"]:
        shown = f"Unknown record type {_type_number(item)} at offset {item['offset']}, skipping."
        return f" key: {shown}" if keyed else f" payload: {shown}"
    if keyed:  # a coordinator record
        text = f" key: {as_json({'type': str(item['keyVersion']), 'data': item['key']})}"
        if item["deleted"]:
            return text + " payload: <DELETE>"
        return text + " payload: " + as_json({"version": str(item["valueVersion"]),
                                              "data": item["value"]})
    return " payload: " + as_json({"type": item["recordType"],
                                   "version": item["valueVersion"], "data": item["value"]})


def control_text(item: dict) -> Optional[str]:
    """A KRaft control record as kafka-dump-log shows it (None: not one it names)."""
    if item.get("decodeError") is not None:
        control = item.get("control") or {}
        return (f" controlType: {control.get('type', '-')} "
                f"undecodable: {item['decodeError']}")
    name = CONTROL_NAMES.get(item.get("recordType"))
    if name is None:
        return None
    return f" {name} {as_json(item['value'])}"
