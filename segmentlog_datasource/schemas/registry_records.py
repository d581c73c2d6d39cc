"""The records of Confluent Schema Registry's `_schemas` topic: JSON keys and values.

Schema Registry (storage/SchemaRegistrySerializer with Jackson) writes every key as a JSON
object with a `keytype` and a `magic`: SCHEMA keys `{"keytype":"SCHEMA","subject":s,
"version":v,"magic":1}`, CONFIG, MODE, DELETE_SUBJECT and CLEAR_SUBJECT keys
`{"keytype":...,"subject":s,"magic":0}` (a global CONFIG or MODE has no subject: registries
since 2021 leave it out, older ones wrote `"subject":null`), and `{"keytype":"NOOP",
"magic":0}`, which the registry writes to find the topic's end. A SCHEMA value is
`{"subject","version","id",["schemaType"],["references"],"schema","deleted"}`, with no
schemaType for Avro and no references when there are none. A null value is a tombstone.

decode_record() gives typed keys and values; encode_key()/encode_value() write the bytes
the registry writes. What the records mean when replayed is registry.py's business.
"""
import json
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple, Union

from ..errors import RecordDecodeError

SCHEMA, CONFIG, MODE, NOOP = "SCHEMA", "CONFIG", "MODE", "NOOP"
DELETE_SUBJECT, CLEAR_SUBJECT, CONTEXT, ASSOC = \
    "DELETE_SUBJECT", "CLEAR_SUBJECT", "CONTEXT", "ASSOC"
# Every keytype Schema Registry knows (SchemaRegistryKeyType); another stops its reader.
KEY_TYPES = (ASSOC, CONFIG, SCHEMA, MODE, NOOP, DELETE_SUBJECT, CLEAR_SUBJECT, CONTEXT)
SUBJECT_KEY_TYPES = (CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT)
AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"


@dataclass(frozen=True)
class SchemaReference:
    """A schema's use of another subject's version: `name` is how the schema refers to it
    (an Avro full name, a Protobuf import path, a JSON Schema $ref URL); version -1 means
    the subject's latest."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegistryKey:
    key_type: str
    subject: Optional[str] = None  # None: global (CONFIG, MODE) or a key without one
    version: Optional[int] = None  # SCHEMA keys only
    magic: int = 0
    other: Tuple[Tuple[str, Any], ...] = ()  # CONTEXT and ASSOC keys' own fields

    def __str__(self):
        if self.key_type == SCHEMA:
            return f"SCHEMA {self.subject!r} version {self.version}"
        if self.key_type in SUBJECT_KEY_TYPES:
            return f"{self.key_type} " + (repr(self.subject) if self.subject is not None
                                           else "(global)")
        return self.key_type


def schema_key(subject: str, version: int) -> RegistryKey:
    return RegistryKey(SCHEMA, subject, version, 1)


def subject_key(key_type: str, subject: Optional[str]) -> RegistryKey:
    """A CONFIG, MODE, DELETE_SUBJECT or CLEAR_SUBJECT key (subject None: global)."""
    return RegistryKey(key_type, subject, None, 0)


NOOP_KEY = RegistryKey(NOOP)


@dataclass(frozen=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO
    references: Tuple[SchemaReference, ...] = ()
    deleted: bool = False
    md5: Optional[str] = None
    # fields kept as read and written back (metadata, ruleSet): not needed to decode
    other: Tuple[Tuple[str, Any], ...] = ()

    def key(self) -> RegistryKey:
        return schema_key(self.subject, self.version)


@dataclass(frozen=True)
class ConfigValue:
    subject: Optional[str]
    compatibility_level: Optional[str] = None  # BACKWARD, FULL_TRANSITIVE, NONE, ...
    other: Tuple[Tuple[str, Any], ...] = ()  # normalize, alias, validateFields, ...

    def key(self) -> RegistryKey:
        return subject_key(CONFIG, self.subject)


@dataclass(frozen=True)
class ModeValue:
    subject: Optional[str]
    mode: Optional[str]  # READWRITE, READONLY, READONLY_OVERRIDE, IMPORT, FORWARD

    def key(self) -> RegistryKey:
        return subject_key(MODE, self.subject)


@dataclass(frozen=True)
class DeleteSubjectValue:
    subject: str
    version: int  # every version up to this one is deleted

    def key(self) -> RegistryKey:
        return subject_key(DELETE_SUBJECT, self.subject)


@dataclass(frozen=True)
class ClearSubjectValue:
    subject: str

    def key(self) -> RegistryKey:
        return subject_key(CLEAR_SUBJECT, self.subject)


@dataclass(frozen=True)
class OtherValue:
    """A CONTEXT or ASSOC value, kept as read: it means nothing to decoding."""

    fields: Tuple[Tuple[str, Any], ...] = ()


RegistryValue = Union[SchemaValue, ConfigValue, ModeValue, DeleteSubjectValue,
                      ClearSubjectValue, OtherValue]


@dataclass(frozen=True)
class RegistryRecord:
    key: RegistryKey
    value: Optional[RegistryValue]  # None: a tombstone (or a NOOP's empty value)


class StopsTheReader(RecordDecodeError):
    """A `_schemas` record on which Schema Registry's reader thread stops, where it skips
    one it cannot deserialize (KafkaStoreReaderThread catches only the serializer's
    SerializationException): a null key, a JSON null key, a key whose keytype is missing,
    not text, or none the registry knows (SchemaRegistryKeyType.forName throws)."""


def _object(data, what: str, null_stops: bool = False) -> Dict[str, Any]:
    """The JSON object `data` holds; `null_stops`: JSON null stops the registry's reader
    (a key: Jackson reads it as a null map, which the reader then fails on)."""
    if data is None:
        raise RecordDecodeError(f"the {what} is null")
    try:
        text = bytes(data).decode("utf-8")
        parsed = json.loads(text)
    except UnicodeDecodeError as exc:
        raise RecordDecodeError(f"the {what} is not UTF-8 text ({exc})") from None
    except json.JSONDecodeError as exc:
        raise RecordDecodeError(f"the {what} is not JSON ({exc}): {_preview(data)}") from None
    if parsed is None and null_stops:
        raise StopsTheReader(f"the {what} is JSON null: {_preview(data)}")
    if not isinstance(parsed, dict):
        raise RecordDecodeError(f"the {what} is JSON but not an object: {_preview(data)}")
    return parsed



def _preview(data) -> str:
    text = bytes(data)[:80].decode("utf-8", "replace")
    return repr(text) + ("..." if len(data) > 80 else "")


def _string(obj: dict, name: str, what: str, required: bool = True) -> Optional[str]:
    value = obj.get(name)
    if value is None:
        if required:
            raise RecordDecodeError(f"the {what} has no {name!r}: {json.dumps(obj)[:200]}")
        return None
    if not isinstance(value, str):
        raise RecordDecodeError(f"the {what}'s {name!r} is {value!r}, not a string")
    return value


def _int(obj: dict, name: str, what: str, required: bool = True, minimum: int = None
         ) -> Optional[int]:
    value = obj.get(name)
    if value is None:
        if required:
            raise RecordDecodeError(f"the {what} has no {name!r}: {json.dumps(obj)[:200]}")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordDecodeError(f"the {what}'s {name!r} is {value!r}, not an integer")
    if minimum is not None and value < minimum:
        raise RecordDecodeError(f"the {what}'s {name!r} is {value}, below {minimum}")
    return value


def _others(obj: dict, known) -> Tuple[Tuple[str, Any], ...]:
    return tuple((name, value) for name, value in obj.items() if name not in known)


def decode_key(data) -> RegistryKey:
    """The key of a `_schemas` record. Raises RecordDecodeError for a key that is not a
    JSON object or lacks a field its keytype needs, StopsTheReader for one whose keytype
    Schema Registry does not know."""
    obj = _object(data, "_schemas record's key", null_stops=True)
    key_type = obj.get("keytype")
    if key_type not in KEY_TYPES:
        raise StopsTheReader(
            f"the _schemas record's key has keytype {key_type!r}; Schema Registry knows "
            f"{', '.join(KEY_TYPES)}: {_preview(data)}")
    what = f"{key_type} key"
    magic = _int(obj, "magic", what, required=False, minimum=0)
    if key_type == SCHEMA:
        # As SchemaRegistrySerializer.validateMagicByte: 1, or 0 from old registries.
        magic = 1 if magic is None else magic
        if magic not in (0, 1):
            raise RecordDecodeError(f"the SCHEMA key has magic {magic}; Schema Registry "
                                    f"reads SCHEMA keys of magic 0 and 1")
        return RegistryKey(SCHEMA, _string(obj, "subject", what),
                           _int(obj, "version", what, minimum=1), magic)
    magic = 0 if magic is None else magic
    if key_type in (DELETE_SUBJECT, CLEAR_SUBJECT):
        return RegistryKey(key_type, _string(obj, "subject", what), None, magic)
    if key_type in (CONFIG, MODE):
        return RegistryKey(key_type, _string(obj, "subject", what, required=False), None,
                           magic)
    return RegistryKey(key_type, None, None, magic,
                       _others(obj, ("keytype", "magic")))


def _references(obj: dict, what: str) -> Tuple[SchemaReference, ...]:
    raw = obj.get("references")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RecordDecodeError(f"the {what}'s 'references' is {raw!r}, not a list")
    references = []
    for number, item in enumerate(raw):
        where = f"{what}'s reference {number}"
        if not isinstance(item, dict):
            raise RecordDecodeError(f"the {where} is {item!r}, not an object")
        references.append(SchemaReference(
            _string(item, "name", where), _string(item, "subject", where),
            _int(item, "version", where, minimum=-1)))
    return tuple(references)


def decode_schema_value(obj: dict, key: Optional[RegistryKey], what: str) -> SchemaValue:
    """A SCHEMA value (or an export's entry) from its JSON object; subject and version
    come from the key when there is one, as the registry stores the value under it."""
    subject = key.subject if key is not None else _string(obj, "subject", what)
    version = key.version if key is not None else _int(obj, "version", what, minimum=1)
    deleted = obj.get("deleted", False)
    if deleted is None:
        deleted = False
    if not isinstance(deleted, bool):
        raise RecordDecodeError(f"the {what}'s 'deleted' is {deleted!r}, not true or false")
    schema_type = _string(obj, "schemaType", what, required=False) or AVRO
    return SchemaValue(
        subject=subject, version=version, id=_int(obj, "id", what, minimum=0),
        schema=_string(obj, "schema", what), schema_type=schema_type,
        references=_references(obj, what), deleted=deleted,
        md5=_string(obj, "md5", what, required=False),
        other=_others(obj, ("subject", "version", "id", "md5", "schemaType", "references",
                            "schema", "deleted")))


def decode_value(key: RegistryKey, data) -> Optional[RegistryValue]:
    """The value of a `_schemas` record with this key; None for a null value (a tombstone,
    or a NOOP's). Raises RecordDecodeError for one that its keytype cannot be read from."""
    if data is None or key.key_type == NOOP:
        return None  # the reader never looks at a NOOP's value
    what = f"value of {key}"
    obj = _object(data, what)
    if key.key_type == SCHEMA:
        return decode_schema_value(obj, key, what)
    # Legacy CONFIG and MODE values have no subject: the registry takes the key's.
    subject = _string(obj, "subject", what, required=False)
    if subject is None:
        subject = key.subject
    if key.key_type == CONFIG:
        return ConfigValue(subject, _string(obj, "compatibilityLevel", what, required=False),
                           _others(obj, ("subject", "compatibilityLevel")))
    if key.key_type == MODE:
        return ModeValue(subject, _string(obj, "mode", what, required=False))
    if key.key_type == DELETE_SUBJECT:
        if subject is None:
            raise RecordDecodeError(f"the {what} has no 'subject'")
        return DeleteSubjectValue(subject, _int(obj, "version", what, minimum=0))
    if key.key_type == CLEAR_SUBJECT:
        if subject is None:
            raise RecordDecodeError(f"the {what} has no 'subject'")
        return ClearSubjectValue(subject)
    return OtherValue(tuple(obj.items()))


def decode_record(key, value) -> RegistryRecord:
    """A `_schemas` record from its key and value bytes (value None: a tombstone)."""
    if key is None:
        raise StopsTheReader("the _schemas record has no key; every record of the topic "
                             "has a JSON key")
    decoded = decode_key(key)
    return RegistryRecord(decoded, decode_value(decoded, value))


def _dumps(obj: dict) -> bytes:
    # As Jackson writes it: compact, UTF-8 text, '/' not escaped.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def encode_key(key: RegistryKey) -> bytes:
    """The key's bytes as Schema Registry writes them (field order included: the key is
    what compaction keeps one record of)."""
    obj: Dict[str, Any] = {"keytype": key.key_type}
    if key.key_type == SCHEMA:
        obj.update(subject=key.subject, version=key.version)
    elif key.key_type in SUBJECT_KEY_TYPES:
        if key.subject is not None:
            obj["subject"] = key.subject
    else:
        obj.update(key.other)
    obj["magic"] = key.magic
    return _dumps(obj)


def schema_value_object(value: SchemaValue) -> Dict[str, Any]:
    obj: Dict[str, Any] = {"subject": value.subject, "version": value.version,
                           "id": value.id}
    if value.md5 is not None:
        obj["md5"] = value.md5
    if value.schema_type != AVRO:
        obj["schemaType"] = value.schema_type
    if value.references:
        obj["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                             for r in value.references]
    obj.update(value.other)
    obj["schema"] = value.schema
    obj["deleted"] = value.deleted
    return obj


def encode_value(value: Optional[RegistryValue]) -> Optional[bytes]:
    """The value's bytes as Schema Registry writes them; None (a tombstone) for None."""
    if value is None:
        return None
    if isinstance(value, SchemaValue):
        return _dumps(schema_value_object(value))
    if isinstance(value, OtherValue):
        return _dumps(dict(value.fields))
    obj: Dict[str, Any] = {}
    if value.subject is not None:
        obj["subject"] = value.subject
    if isinstance(value, ConfigValue):
        obj.update(value.other)
        if value.compatibility_level is not None:
            obj["compatibilityLevel"] = value.compatibility_level
    elif isinstance(value, ModeValue):
        if value.mode is not None:
            obj["mode"] = value.mode
    elif isinstance(value, DeleteSubjectValue):
        obj["version"] = value.version
    return _dumps(obj)


def encode_record(record: Union[RegistryRecord, RegistryValue, RegistryKey]
                  ) -> Tuple[bytes, Optional[bytes]]:
    """(key bytes, value bytes) of a record; a value alone is written under its own key,
    a key alone as a tombstone (or a NOOP)."""
    if isinstance(record, RegistryRecord):
        return encode_key(record.key), encode_value(record.value)
    if isinstance(record, RegistryKey):
        return encode_key(record), None
    return encode_key(record.key()), encode_value(record)
