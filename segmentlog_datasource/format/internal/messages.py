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
from dataclasses import dataclass
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

    def __post_init__(self):
        object.__setattr__(self, "_plans", {})  # version -> _StructPlan

    @property
    def span(self):
        return versions(self.valid_versions)

    def is_flexible(self, version: int) -> bool:
        return in_range(version, versions(self.flexible_versions))

    def check_version(self, version: int) -> None:
        """What a serde that checks the version before reading (Kafka's coordinators')
        refuses: a version outside the message's."""
        if not in_range(version, self.span):
            low, high = self.span
            raise RecordDecodeError(
                f"{self.name} version {version} is unknown (versions {low} to {high} are "
                f"defined)")

    def decode(self, data, version: int, position: int = 0) -> dict:
        """The message at `position` of `data`, which must end where the message does (as
        Kafka's AbstractApiMessageSerde requires of a metadata record)."""
        value, end = self.decode_prefix(data, version, position)
        if end != len(data):
            raise RecordDecodeError(
                f"{self.name} version {version} ends at byte {end}, but "
                f"{len(data) - end} more bytes follow")
        return value

    def decode_prefix(self, data, version: int, position: int = 0) -> Tuple[dict, int]:
        """The message at `position` and where it ends, read as Kafka's generated reader
        reads it at `version` (see _Reader): the version is not checked first (Kafka's
        serdes do that, or not, themselves); bytes after the message are not looked at."""
        plan = self._plan(version)
        reader = _Reader(memoryview(data), position)
        try:
            value = reader.struct(plan)
        except _Malformed as raised:
            failure = raised
        else:
            return value, reader.position
        what = failure.where()
        if failure.kind == _SHORT:
            raise RecordDecodeError(f"{self.name} version {version} ends early, in {what} "
                                    f"({len(data)} bytes)")
        if failure.kind == _VERSION:
            low, high = self.span
            raise RecordDecodeError(
                f"{self.name} version {version} is unknown (versions {low} to {high} are "
                f"defined): Kafka's reader cannot read its {what} at that version")
        raise RecordDecodeError(f"{self.name} version {version}: {what}: {failure.reason}")

    def _plan(self, version: int) -> "_StructPlan":
        plan = self._plans.get(version)
        if plan is None:
            span = kafka_versions(self.valid_versions)
            plan = _struct_plan(self.name, self.fields, span, span, version,
                                kafka_versions(self.flexible_versions))
            if in_range(version, span):  # a damaged version is planned each time
                self._plans[version] = plan
        return plan

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


# ------------------------------------------------------------------ reading
#
# Kafka's generated readers (the message generator's MessageDataGenerator) decide what to
# read with version checks written for the versions a class can be read at: a check whose
# outcome is certain there is left out, so at a version outside them a field is read or
# not as the remaining comparisons say (VersionConditional). Kafka's serdes read some
# messages at versions outside the message's (a metadata record's version is not checked
# before its message is read), so the plans below make the same comparisons.

_SHORT_MAX = (1 << 15) - 1
_EMPTY = (0, -1)  # Kafka's Versions.NONE


def kafka_versions(text: str) -> Tuple[int, int]:
    """A version range as Kafka's generator holds it: "N+" ends at 32767, "none" is
    (0, -1)."""
    text = text.strip()
    if text == "none":
        return _EMPTY
    if text.endswith("+"):
        return int(text[:-1]), _SHORT_MAX
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def _intersect(first, second):
    low, high = max(first[0], second[0]), min(first[1], second[1])
    return (low, high) if low <= high else _EMPTY


def _subtract(span, other):
    """Kafka's Versions.subtract: None where two ranges would be left."""
    low, high = span
    if other[0] <= low:
        if other[1] >= high:
            return _EMPTY
        return span if other[1] < low else (other[1] + 1, high)
    if other[1] >= high:
        new_high = other[0] - 1
        if new_high < 0 or new_high >= high:
            return span
        return low, new_high
    return None


def generated_member(containing, possible, version: int) -> bool:
    """Whether Kafka's generated code takes the branch for `containing` versions at
    `version`, the generator having known only that the version lies in `possible`."""
    if possible[0] < containing[0]:
        if possible[1] > containing[1]:
            return containing[0] <= version <= containing[1]
        if possible[1] >= containing[0]:
            return version >= containing[0]
        return False
    if possible[1] >= containing[0] and possible[0] <= containing[1]:
        return version <= containing[1] if possible[1] > containing[1] else True
    return False


_SHORT, _VERSION, _BAD = "short", "version", "bad"
_TAGS = "#tags"  # a path's step into a struct's tagged fields (their count, tags, sizes)


class _Malformed(Exception):
    """Bytes Kafka's reader refuses: `path` holds the steps to where, innermost first
    (".name", "[index]", or _TAGS)."""

    def __init__(self, kind: str, reason: str = "", path=None):
        super().__init__(reason)
        self.kind, self.reason = kind, reason
        self.path = path if path is not None else []

    def where(self) -> str:
        """"field a.b[2].c", or "the tagged fields of a.b" ("the message's tagged
        fields")."""
        steps = list(reversed(self.path))
        tags = bool(steps) and steps[-1] == _TAGS
        name = "".join(steps[:-1] if tags else steps).lstrip(".")
        if tags:
            return f"the tagged fields of {name}" if name else "the message's tagged fields"
        return f"field {name}"


class _FieldPlan:
    """How one field is read at one version: `kind` a primitive's name, "array" or
    "struct"; `compact` varint lengths; `nullable` whether a null (negative length, or for
    a struct a presence marker, `presence` "byte" or "varint") is allowed."""

    __slots__ = ("name", "kind", "compact", "nullable", "presence", "element", "struct")

    def __init__(self, name, kind, compact=False, nullable=False, presence=None,
                 element=None, struct=None):
        self.name, self.kind, self.compact, self.nullable = name, kind, compact, nullable
        self.presence, self.element, self.struct = presence, element, struct


class _StructPlan:
    """A struct's fields as read at one version: `readable` False where Kafka's class for
    it refuses the version; `tags` None where no tagged fields follow, else tag -> plan
    (or the reason a tag Kafka knows cannot be read at this version)."""

    __slots__ = ("name", "readable", "fields", "tags", "order")

    def __init__(self, name, readable, fields, tags, order):
        self.name, self.readable, self.fields, self.tags, self.order = \
            name, readable, fields, tags, order


def _struct_plan(name: str, fields: Tuple[Field, ...], parent, own, version: int,
                 flexible) -> _StructPlan:
    """A struct read as Kafka's class for it reads it: `parent` the versions its
    enclosing class can be read at, `own` its versions (a message's, or the field's that
    holds it: the struct declared in place, as in every message read at a version outside
    its own)."""
    readable = generated_member(parent, own, version)
    current = _intersect(parent, own)
    plans = []
    tags = None
    for item in fields:
        span = kafka_versions(item.versions)
        mandatory = _subtract(span, kafka_versions(item.tagged_versions))
        if mandatory is not None and generated_member(mandatory, current, version):
            plans.append(_field_plan(item, _intersect(current, mandatory), current, version,
                                     flexible, tagged=False))
    if generated_member(flexible, current, version):
        current_flexible = _intersect(flexible, current)
        tags = {}
        for item in fields:
            valid = _intersect(kafka_versions(item.versions),
                               kafka_versions(item.tagged_versions))
            if item.tag is None or valid == _EMPTY:
                continue
            if generated_member(valid, current_flexible, version):
                tags[item.tag] = _field_plan(item, _intersect(current_flexible, valid),
                                             current, version, flexible, tagged=True)
            else:
                tags[item.tag] = (item.name, f"is tag {item.tag}, which is not valid for "
                                             f"version {version}")
    return _StructPlan(name, readable, plans, tags, tuple(item.name for item in fields))


def _field_plan(item: Field, possible, current, version: int, flexible,
                tagged: bool) -> _FieldPlan:
    kind = item.type
    nullable_versions = kafka_versions(item.nullable)
    if isinstance(kind, Struct):
        nullable = generated_member(nullable_versions, possible, version)
        return _FieldPlan(item.name, "struct", nullable=nullable,
                          presence=("varint" if tagged else "byte") if nullable else None,
                          struct=_struct_plan(kind.name, kind.fields, current,
                                              kafka_versions(item.versions), version,
                                              flexible))
    if isinstance(kind, Array):
        element = kind.element
        if not tagged and (isinstance(element, Struct) or
                           element in ("string", "bytes", "records")):
            # Kafka reads such an array in two loops, one for flexible versions and one
            # for the others, each generated for its own versions
            if generated_member(flexible, possible, version):
                possible = _intersect(possible, flexible)
            else:
                possible = _subtract(possible, flexible) or possible
        compact = generated_member(flexible, possible, version)
        if isinstance(element, Struct):
            inner = _FieldPlan(item.name, "struct", struct=_struct_plan(
                element.name, element.fields, current, kafka_versions(item.versions),
                version, flexible))
        else:
            inner = _FieldPlan(item.name, element, compact=compact)  # never null
        return _FieldPlan(item.name, "array", compact=compact,
                          nullable=generated_member(nullable_versions, possible, version),
                          element=inner)
    if kind in ("string", "bytes", "records"):
        return _FieldPlan(item.name, kind, compact=generated_member(flexible, possible,
                                                                    version),
                          nullable=generated_member(nullable_versions, possible, version))
    return _FieldPlan(item.name, kind)


_REPLACEMENT = "\ufffd"


def java_utf8(data: bytes) -> str:
    """`data` as Java's new String(data, UTF_8) decodes it, as Kafka's readers decode a
    string field: text that is not UTF-8 is not refused, each malformed sequence becomes
    one U+FFFD as Java delimits them (an encoded surrogate is one malformed sequence of 3
    bytes; a sequence cut short by the end is one, its valid continuation bytes with it)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out = []
    position, end = 0, len(data)
    while position < end:
        first = data[position]
        position += 1
        if first < 0x80:
            out.append(chr(first))
        elif 0xC2 <= first <= 0xDF:
            if position == end:
                out.append(_REPLACEMENT)
                break
            second = data[position]
            if second & 0xC0 != 0x80:
                out.append(_REPLACEMENT)
            else:
                out.append(chr((first & 0x1F) << 6 | second & 0x3F))
                position += 1
        elif 0xE0 <= first <= 0xEF:
            if position + 1 < end:
                second, third = data[position], data[position + 1]
                bad_second = (first == 0xE0 and second & 0xE0 == 0x80) or \
                    second & 0xC0 != 0x80
                if bad_second or third & 0xC0 != 0x80:
                    out.append(_REPLACEMENT)
                    position += 0 if bad_second else 1
                    continue
                position += 2
                code = (first & 0x0F) << 12 | (second & 0x3F) << 6 | third & 0x3F
                out.append(_REPLACEMENT if 0xD800 <= code <= 0xDFFF else chr(code))
                continue
            out.append(_REPLACEMENT)
            if position < end and ((first == 0xE0 and data[position] & 0xE0 == 0x80) or
                                   data[position] & 0xC0 != 0x80):
                continue
            break  # the last byte, a valid continuation, goes with it
        elif 0xF0 <= first <= 0xF7:
            if position + 2 < end:
                second, third, fourth = data[position:position + 3]
                code = (first & 0x07) << 18 | (second & 0x3F) << 12 | \
                    (third & 0x3F) << 6 | fourth & 0x3F
                if second & 0xC0 == third & 0xC0 == fourth & 0xC0 == 0x80 and \
                        0x10000 <= code <= 0x10FFFF:
                    out.append(chr(code))
                    position += 3
                    continue
                out.append(_REPLACEMENT)
                if first > 0xF4 or _bad_second_of_four(first, second):
                    continue
                position += 1 if third & 0xC0 != 0x80 else 2
                continue
            out.append(_REPLACEMENT)
            if first > 0xF4 or position < end and _bad_second_of_four(first, data[position]):
                continue
            position += 1
            if position < end and data[position] & 0xC0 != 0x80:
                continue
            break
        else:
            out.append(_REPLACEMENT)
    return "".join(out)


def _bad_second_of_four(first: int, second: int) -> bool:
    return (first == 0xF0 and not 0x90 <= second <= 0xBF) or \
        (first == 0xF4 and second & 0xF0 != 0x80) or second & 0xC0 != 0x80


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


class _Reader:
    """Kafka's ByteBufferAccessor and generated read() over a buffer: lengths, counts and
    varints as Java's ints, a negative length null only where the field is nullable, a
    string no longer than 32767 bytes (its bytes decoded as Java decodes them: what is
    not UTF-8 becomes U+FFFD, see java_utf8), an array count no larger than the bytes left, a tagged
    field's size read but, for a tag the struct knows, not checked against what its value
    takes (Kafka's reader does not check it), a tag it does not know skipped by its size."""

    def __init__(self, view: memoryview, position: int):
        self.view = view
        self.position = position

    def fixed(self, kind: str):
        unpack = _STRUCTS[kind]
        value = unpack.unpack_from(self.view, self.position)[0]
        self.position += unpack.size
        return value

    def uvarint(self) -> int:
        """ByteUtils.readUnsignedVarint: at most 5 bytes, the value a Java int."""
        view = self.view
        result = 0
        for shift in (0, 7, 14, 21):
            byte = view[self.position]
            self.position += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
        byte = view[self.position]
        self.position += 1
        if byte >= 0x80:
            raise _Malformed(_BAD, "a varint longer than 5 bytes")
        return _int32(result | byte << 28)

    def take(self, length: int) -> bytes:
        if self.position + length > len(self.view):
            raise IndexError(length)
        data = bytes(self.view[self.position:self.position + length])
        self.position += length
        return data

    def length(self, plan: _FieldPlan, wide: bool) -> int:
        if plan.compact:
            return _int32(self.uvarint() - 1)
        return self.fixed("int32" if wide else "int16")

    def struct(self, plan: _StructPlan) -> dict:
        if not plan.readable:
            raise _Malformed(_VERSION)
        result = {}
        for item in plan.fields:
            result[item.name] = self.field(item)
        tags = plan.tags
        if tags is not None:
            for _ in range(self._tagged(self.uvarint)):  # a negative count reads none
                tag = self._tagged(self.uvarint)
                size = self._tagged(self.uvarint)
                item = tags.get(tag)
                if item is None:  # a tag Kafka does not know: kept raw, unshown here
                    if size < 0:
                        raise _Malformed(_BAD, f"unknown tag {tag} has a negative size "
                                               f"({size})", [_TAGS])
                    self._tagged(self.take, size)
                elif isinstance(item, tuple):  # (its name, why it cannot be read)
                    raise _Malformed(_BAD, item[1], ["." + item[0]])
                else:
                    result[item.name] = self.field(item)
            result = {name: result[name] for name in plan.order if name in result}
        return result

    @staticmethod
    def _tagged(read, *args):
        """A read of a tagged-field count, tag, size or unknown tag's bytes."""
        try:
            return read(*args)
        except (IndexError, struct.error):
            raise _Malformed(_SHORT, path=[_TAGS]) from None
        except _Malformed as failure:
            failure.path.append(_TAGS)
            raise

    def field(self, plan: _FieldPlan):
        try:
            return self._value(plan)
        except _Malformed as failure:
            failure.path.append("." + plan.name)
            raise
        except (IndexError, struct.error):
            raise _Malformed(_SHORT, path=["." + plan.name]) from None

    def _value(self, plan: _FieldPlan):
        kind = plan.kind
        if kind == "struct":
            presence = plan.presence
            if presence == "byte" and self.fixed("int8") < 0:
                return None
            if presence == "varint" and self.uvarint() <= 0:
                return None
            return self.struct(plan.struct)
        if kind in _STRUCTS:
            return self.fixed(kind)
        if kind == "uuid":
            return uuid_text(self.take(16))
        wide = kind != "string"
        length = self.length(plan, wide)
        if length < 0:
            if plan.nullable:
                return None
            raise _Malformed(_BAD, f"not nullable, but serialized as null (length "
                                   f"{length})")
        if kind == "string":
            if length > _SHORT_MAX:
                raise _Malformed(_BAD, f"a string of {length} bytes (Kafka's limit is "
                                       f"{_SHORT_MAX})")
            return java_utf8(self.take(length))
        if kind in ("bytes", "records"):
            return self.take(length)
        if kind != "array":
            raise _Malformed(_BAD, f"of unknown type {kind!r}")
        left = len(self.view) - self.position
        if length > left:
            raise _Malformed(_BAD, f"a count of {length} elements runs past the end "
                                   f"(only {left} bytes left)")
        element = plan.element
        values = []
        for index in range(length):
            try:
                values.append(self._value(element))
            except _Malformed as failure:
                failure.path.append(f"[{index}]")
                raise
            except (IndexError, struct.error):
                raise _Malformed(_SHORT, path=[f"[{index}]"]) from None
        return values


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
