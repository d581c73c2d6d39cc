"""Kafka's generated-message encoding, driven by field tables.

The keys and values of Kafka's internal topics, and KRaft's metadata records, are
messages as Kafka's message definitions describe them: fields present in ranges of
versions; big-endian numbers; in a message's flexible versions, compact (varint) lengths
and tagged fields at the end of every struct. A `Message` is such a definition written
as a table of `Field`s; it decodes to, and encodes from, Kafka's JSON form of the message
(a dict of the fields the version holds, tagged fields only where not at their default,
uuids as Kafka prints them, bytes as bytes).
"""
import base64
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

from ...errors import RecordDecodeError

NO_VERSIONS = (1, 0)


def versions(text: str) -> Tuple[int, int]:
    """A version range as Kafka writes it: "0+", "3", "1-4", "none": (low, high)."""
    text = text.strip()
    if text == "none":
        return NO_VERSIONS
    if text.endswith("+"):
        return int(text[:-1]), 1 << 15
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def in_range(version: int, span: Tuple[int, int]) -> bool:
    return span[0] <= version <= span[1]


PRIMITIVES = ("bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
              "string", "bytes", "uuid", "records")
_FIXED = {"bool": ">?", "int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i",
          "uint32": ">I", "int64": ">q", "float64": ">d"}
_STRUCTS = {name: struct.Struct(code) for name, code in _FIXED.items()}


@dataclass(frozen=True)
class Array:
    """An array of a primitive type's name or of a Struct."""
    element: Union[str, "Struct"]


@dataclass(frozen=True)
class Struct:
    """A nested structure (an array's element, or a field of its own)."""
    name: str
    fields: Tuple["Field", ...]


FieldType = Union[str, Array, Struct]


@dataclass(frozen=True)
class Field:
    name: str
    type: FieldType
    versions: str = "0+"
    nullable: str = "none"
    tag: Optional[int] = None
    tagged_versions: str = "none"
    default: object = None  # Kafka's default; None means the type's own

    @property
    def span(self):
        return versions(self.versions)

    def default_value(self):
        if self.default is not None:
            return self.default
        if self.nullable != "none" and self.type in ("string", "bytes", "records") or \
                self.nullable != "none" and not isinstance(self.type, str):
            return None
        if isinstance(self.type, Array):
            return []
        if isinstance(self.type, Struct):
            return None
        if self.type in ("string",):
            return ""
        if self.type in ("bytes", "records"):
            return b""
        if self.type == "bool":
            return False
        if self.type == "float64":
            return 0.0
        if self.type == "uuid":
            return ZERO_UUID
        return 0


@dataclass(frozen=True)
class Message:
    name: str
    valid_versions: str
    flexible_versions: str
    fields: Tuple[Field, ...]

    @property
    def span(self):
        return versions(self.valid_versions)

    def is_flexible(self, version: int) -> bool:
        return in_range(version, versions(self.flexible_versions))

    def check_version(self, version: int) -> None:
        if not in_range(version, self.span):
            low, high = self.span
            raise RecordDecodeError(
                f"{self.name} version {version} is unknown (versions {low} to {high} are "
                f"defined)")

    def decode(self, data, version: int, position: int = 0) -> dict:
        """The message at `position` of `data`, which must end where the message does."""
        value, end = self.decode_prefix(data, version, position)
        if end != len(data):
            raise RecordDecodeError(
                f"{self.name} version {version} ends at byte {end}, but "
                f"{len(data) - end} more bytes follow")
        return value

    def decode_prefix(self, data, version: int, position: int = 0) -> Tuple[dict, int]:
        """The message at `position` and where it ends."""
        self.check_version(version)
        reader = _Reader(memoryview(data), position, self.name, version)
        try:
            value = reader.fields(self.fields, self.is_flexible(version))
        except (struct.error, IndexError, UnicodeDecodeError, ValueError) as error:
            raise RecordDecodeError(
                f"{self.name} version {version} ends early or is malformed at byte "
                f"{reader.position} of {len(data)} ({error})") from None
        return value, reader.position

    def encode(self, value: dict, version: int) -> bytes:
        self.check_version(version)
        out = bytearray()
        _write_fields(out, self.fields, value, version, self.is_flexible(version), self.name)
        return bytes(out)


ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def uuid_text(raw: bytes) -> str:
    """A uuid as Kafka's Uuid.toString gives it: URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def uuid_bytes(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class _Reader:
    def __init__(self, view: memoryview, position: int, message: str, version: int):
        self.view = view
        self.position = position
        self.message = message
        self.version = version

    def fixed(self, kind: str):
        unpack = _STRUCTS[kind]
        value = unpack.unpack_from(self.view, self.position)[0]
        self.position += unpack.size
        return value

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self.view[self.position]
            self.position += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7
            if shift > 35:
                raise ValueError("unsigned varint is longer than 5 bytes")

    def take(self, length: int) -> bytes:
        if length < 0 or self.position + length > len(self.view):
            raise ValueError(f"a length of {length} runs past the end")
        data = bytes(self.view[self.position:self.position + length])
        self.position += length
        return data

    def length(self, flexible: bool, wide: bool) -> int:
        """A length or count, -1 for null."""
        if flexible:
            return self.uvarint() - 1
        return self.fixed("int32" if wide else "int16")

    def value(self, kind: FieldType, flexible: bool, name: str):
        if isinstance(kind, Struct):
            return self.fields(kind.fields, flexible)
        if isinstance(kind, Array):
            count = self.length(flexible, wide=True)
            if count < 0:
                return None
            if count > len(self.view) - self.position:
                raise ValueError(f"array {name!r} claims {count} elements")
            return [self.value(kind.element, flexible, name) for _ in range(count)]
        if kind in _STRUCTS:
            return self.fixed(kind)
        if kind == "uuid":
            return uuid_text(self.take(16))
        if kind == "string":
            length = self.length(flexible, wide=False)
            return None if length < 0 else self.take(length).decode("utf-8")
        if kind in ("bytes", "records"):
            length = self.length(flexible, wide=True)
            return None if length < 0 else self.take(length)
        raise ValueError(f"unknown field type {kind!r}")

    def field_value(self, item: Field, flexible: bool, tagged: bool):
        if _nullable_struct(item, self.version):
            # Kafka marks a nullable struct's presence: a varint (0 null) in a tagged
            # field's body, an int8 (-1 null) elsewhere
            present = self.uvarint() > 0 if tagged else self.fixed("int8") >= 0
            if not present:
                return None
        return self.value(item.type, flexible, item.name)

    def fields(self, fields: Tuple[Field, ...], flexible: bool) -> dict:
        version = self.version
        result = {}
        tagged: Dict[int, Field] = {}
        for item in fields:
            if item.tag is not None:
                if flexible and in_range(version, versions(item.tagged_versions)):
                    tagged[item.tag] = item
                continue
            if not in_range(version, item.span):
                continue
            result[item.name] = self.field_value(item, flexible, tagged=False)
        if flexible:
            for _ in range(self.uvarint()):
                tag, size = self.uvarint(), self.uvarint()
                end = self.position + size
                item = tagged.get(tag)
                if item is None:
                    self.take(size)  # a tag this version does not know: kept by Kafka, unshown
                    continue
                result[item.name] = self.field_value(item, flexible, tagged=True)
                if self.position != end:
                    raise ValueError(f"tagged field {item.name!r} is {size} bytes long but "
                                     f"its value takes {self.position - end + size}")
            ordered = {}
            for item in fields:  # tagged fields in their declared place, as Kafka's JSON
                if item.name in result:
                    ordered[item.name] = result[item.name]
            result = ordered
        return result


def _nullable_struct(item: Field, version: int) -> bool:
    return isinstance(item.type, Struct) and in_range(version, versions(item.nullable))


def _write_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _write_length(out: bytearray, length: int, flexible: bool, wide: bool) -> None:
    if flexible:
        _write_uvarint(out, length + 1)
    else:
        out += struct.pack(">i" if wide else ">h", length)


def _write_value(out: bytearray, kind: FieldType, value, version: int, flexible: bool,
                 name: str) -> None:
    if isinstance(kind, Struct):
        _write_fields(out, kind.fields, value or {}, version, flexible, name)
    elif isinstance(kind, Array):
        if value is None:
            _write_length(out, -1, flexible, wide=True)
            return
        _write_length(out, len(value), flexible, wide=True)
        for element in value:
            _write_value(out, kind.element, element, version, flexible, name)
    elif kind in _STRUCTS:
        out += _STRUCTS[kind].pack(value)
    elif kind == "uuid":
        out += uuid_bytes(value)
    elif kind == "string":
        if value is None:
            _write_length(out, -1, flexible, wide=False)
        else:
            data = value.encode("utf-8")
            _write_length(out, len(data), flexible, wide=False)
            out += data
    elif kind in ("bytes", "records"):
        if value is None:
            _write_length(out, -1, flexible, wide=True)
        else:
            _write_length(out, len(value), flexible, wide=True)
            out += value
    else:
        raise ValueError(f"{name}: unknown field type {kind!r}")


def _write_fields(out: bytearray, fields: Tuple[Field, ...], value: dict, version: int,
                  flexible: bool, name: str) -> None:
    tagged = []
    for item in fields:
        if item.tag is not None:
            if flexible and in_range(version, versions(item.tagged_versions)) and \
                    item.name in value and value[item.name] != item.default_value():
                tagged.append(item)
            continue
        if not in_range(version, item.span):
            continue
        given = value.get(item.name, item.default_value())
        if _nullable_struct(item, version):
            out += struct.pack(">b", -1 if given is None else 1)
            if given is None:
                continue
        _write_value(out, item.type, given, version, flexible, f"{name}.{item.name}")
    if flexible:
        _write_uvarint(out, len(tagged))
        for item in sorted(tagged, key=lambda f: f.tag):
            body = bytearray()
            if _nullable_struct(item, version):
                _write_uvarint(body, 1)  # present (a null one is the default: not written)
            _write_value(body, item.type, value[item.name], version, flexible,
                         f"{name}.{item.name}")
            _write_uvarint(out, item.tag)
            _write_uvarint(out, len(body))
            out += body


def read_version(data, what: str) -> Tuple[int, int]:
    """The int16 version that leads a key or value of Kafka's coordinators' topics, and
    where the message after it starts."""
    if data is None or len(data) < 2:
        raise RecordDecodeError(f"{what} is {0 if data is None else len(data)} bytes long, "
                                f"too short for its version")
    return struct.unpack_from(">h", data, 0)[0], 2


def write_version(version: int) -> bytes:
    return struct.pack(">h", version)


def field_tree(messages: List[Tuple[Message, List[int]]]) -> List[Tuple[str, object]]:
    """The union of the fields of `messages` (each with the versions that count) as
    (name, type) pairs in declared order: the shape of a column that holds them all.

    A type is a primitive's name, ("array", element type) or ("struct", {name: type}).
    Structs and arrays of structs by one name merge field by field; a name given two
    other types is a mistake in the tables (one record type's versions never do that)."""
    merged: Dict[str, object] = {}
    for message, message_versions in messages:
        modes = [(version, message.is_flexible(version)) for version in message_versions]
        _merge_into(merged, message.fields, modes, message.name)
    return list(merged.items())


def _field_shape(kind: FieldType, modes, where: str):
    if isinstance(kind, Struct):
        inner: Dict[str, object] = {}
        _merge_into(inner, kind.fields, modes, where)
        return ("struct", inner)
    if isinstance(kind, Array):
        return ("array", _field_shape(kind.element, modes, where))
    return "string" if kind == "uuid" else kind


def _present(item: Field, version: int, flexible: bool) -> bool:
    if item.tag is not None:
        return flexible and in_range(version, versions(item.tagged_versions))
    return in_range(version, item.span)


def _merge_into(merged: Dict[str, object], fields: Tuple[Field, ...], modes,
                where: str) -> None:
    for item in fields:
        present = [(v, flexible) for v, flexible in modes if _present(item, v, flexible)]
        if not present:
            continue
        shape = _field_shape(item.type, present, f"{where}.{item.name}")
        if item.name in merged:
            merged[item.name] = merge_shapes(merged[item.name], shape,
                                             f"{where}.{item.name}")
        else:
            merged[item.name] = shape


def merge_shapes(first, second, where: str):
    """One shape holding both (see field_tree)."""
    if first == second:
        return first
    if isinstance(first, tuple) and isinstance(second, tuple) and first[0] == second[0]:
        if first[0] == "array":
            return ("array", merge_shapes(first[1], second[1], where))
        inner = dict(first[1])
        for name, shape in second[1].items():
            inner[name] = merge_shapes(inner[name], shape, f"{where}.{name}") \
                if name in inner else shape
        return ("struct", inner)
    raise ValueError(f"{where} is {first} in one message and {second} in another: one "
                     f"column cannot hold both")
