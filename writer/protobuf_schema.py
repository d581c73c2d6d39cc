"""Protobuf schemas for framed writes: a proto3 message derived from an Arrow struct type as
the inverse of the decoder's mapping (decode/protobuf.py), so that reading the values back
gives the column's values; the text as Schema Registry stores a Protobuf schema
(ProtobufSchema.canonicalString, schemas/protobuf/text.canonical_text); the message
indexes Confluent's serializer writes after the schema id; payloads serialized by the
protobuf runtime; compatibility as Schema Registry checks it (protobuf_compatibility.py).

Derived, field by field (numbered 1..n in the column's order): bool; int8, int16, int32,
uint8, uint16 -> int32 (all read back as int32); int64; uint32 -> uint32 (read back as
int64); uint64 and decimal(20,0) -> uint64 (read back as decimal(20,0)); float16, float32
-> float (read back as float32); float64 -> double; string -> string; binary ->
bytes; timestamp -> google.protobuf.Timestamp (read back as timestamp[us, UTC]: a
timestamp without a time zone is taken as UTC; nanoseconds are written, and read back
truncated to microseconds); duration -> google.protobuf.Duration (read back as
duration[us]); struct -> a message nested in the enclosing one, named after
its field in CamelCase (`address` -> `Address`; `Message` appended when that name is
taken); list -> repeated; map -> map<K, V> with integer, string or bool keys, a struct
value's message named `<Field>Value`. A nullable scalar is a proto3 `optional` field (with
presence: a null is left out, and reads back as null); a non-nullable one a plain field;
message fields have presence either way. Refused (InvalidInputError naming the column and
field path): date, other decimals, null, nested lists (list of list, map of list or map:
Protobuf repeats only singular types), maps with other keys, structs without fields (the
decoder drops them, as Spark does) and field names that are not Protobuf identifiers.

The message is named by `record_name`: `shop.Order` is message Order in package shop;
None gives `topLevelRecord` without a package (spark-avro's default record name, so that
RecordNameStrategy names a subject alike in both languages).

A given schema (the valueProtobufSchema / keyProtobufSchema option) is .proto text with
a message whose fields hold the column's (a column field the message lacks, or of a type
its field cannot hold, is refused); which message: the file's first, as Confluent's
deserializers read by default, or the one the optional `message` argument of the methods
below names (framed.py passes none). It may import only google/protobuf/*.proto (a write
registers no schema references). Registered as canonicalString prints it, unless it has
what the parser reads past (options, reserved ranges, services...): then as given.

Values: a null struct writes no payload (a null Kafka value). A null scalar leaves a
field with presence out; in a field without presence (proto3 without `optional`) it is a
misfit, not a silent 0. A null list or map is written empty (Protobuf has no null
repeated field; it reads back empty); a null item or map value is a misfit. Integers are
range-checked against the field's type; strings and bytes fill each other's fields
(UTF-8 checked); an enum field takes the value's name (as the decoder gives it) or its
number. Two non-null members of one oneof are a misfit.
"""
import re
from typing import Callable, Dict, List, Optional, Tuple

import pyarrow as pa

from ..errors import InvalidOptionError
from ..format.varint import write_varint
from ..schemas.protobuf.descriptors import (
    WELL_KNOWN, LoadedProto, is_map, is_repeated, kind_name, load_text,
)
from ..schemas.protobuf.text import (
    FILE_NAME, INT_RANGES, LABEL_OPTIONAL, LABEL_REPEATED, TYPE_BOOL, TYPE_BYTES, TYPE_DOUBLE,
    TYPE_ENUM, TYPE_FLOAT, TYPE_INT32, TYPE_INT64, TYPE_MESSAGE, TYPE_NAMES, TYPE_STRING,
    TYPE_UINT32, TYPE_UINT64, ParsedProto, ProtobufSchemaError, camel, canonical_text,
    read_proto,
)
from .errors import InvalidInputError
from .schema_format import PayloadMisfit, SchemaFormat

DEFAULT_MESSAGE_NAME = "topLevelRecord"
TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"
_IMPORTS = {TIMESTAMP: "google/protobuf/timestamp.proto",
            DURATION: "google/protobuf/duration.proto"}
_WRAPPERS = {"google.protobuf.DoubleValue", "google.protobuf.FloatValue",
             "google.protobuf.Int64Value", "google.protobuf.UInt64Value",
             "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
             "google.protobuf.BoolValue", "google.protobuf.StringValue",
             "google.protobuf.BytesValue"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NANOS = {"s": 10 ** 9, "ms": 10 ** 6, "us": 10 ** 3, "ns": 1}  # an Arrow unit in nanoseconds


def _unwrap(t: pa.DataType) -> pa.DataType:
    while pa.types.is_dictionary(t):
        t = t.value_type
    return t


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


# -- deriving a schema from an Arrow type -------------------------------------------


def _scalar_type(t: pa.DataType) -> Optional[int]:
    """The Protobuf scalar type of an Arrow scalar type, None for another type."""
    if pa.types.is_boolean(t):
        return TYPE_BOOL
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) \
            or pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return TYPE_INT32
    if pa.types.is_int64(t):
        return TYPE_INT64
    if pa.types.is_uint32(t):
        return TYPE_UINT32
    if pa.types.is_uint64(t) or (pa.types.is_decimal(t) and t.precision == 20
                                 and t.scale == 0):
        return TYPE_UINT64
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return TYPE_FLOAT
    if pa.types.is_float64(t):
        return TYPE_DOUBLE
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return TYPE_STRING
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) \
            or pa.types.is_fixed_size_binary(t):
        return TYPE_BYTES
    return None


_MAP_KEY_TYPES = (TYPE_INT32, TYPE_INT64, TYPE_UINT32, TYPE_UINT64, TYPE_STRING, TYPE_BOOL)


class _Deriver:
    """Builds the FileDescriptorProto of a struct column's message, type names as a
    .proto text writes them (nested messages by their own name)."""

    def __init__(self, column: str, package: str):
        from google.protobuf import descriptor_pb2

        self.pb2 = descriptor_pb2
        self.column = column
        self.imports: List[str] = []
        self.package = package
        self.google_shadowed = False  # a scope named `google` hides google.protobuf

    def fail(self, path: str, reason: str):
        raise InvalidInputError(f"column {self.column!r} field {path} {reason}")

    def scan_names(self, t: pa.DataType):
        t = _unwrap(t)
        if pa.types.is_struct(t):
            for f in t:
                self.google_shadowed |= f.name == "google"
                self.scan_names(f.type)
        elif _is_list(t):
            self.scan_names(t.value_type)
        elif pa.types.is_map(t):
            self.scan_names(t.item_type)

    def message(self, proto, struct: pa.DataType, path: str):
        if struct.num_fields == 0:
            where = f"column {self.column!r}" + (f" field {path}" if path else "")
            raise InvalidInputError(f"{where} is a struct without fields; a message without "
                                    f"fields reads back as nothing (the decoder drops it, "
                                    f"as Spark does)")
        taken = set()
        for f in struct:
            inner = f"{path}.{f.name}" if path else f.name
            if not _IDENTIFIER.match(f.name):
                self.fail(inner, "is not a Protobuf field name (letters, digits and _, "
                                 "not starting with a digit); rename it")
            if f.name in taken:
                self.fail(inner, "appears twice in its struct; Protobuf field names are "
                                 "unique")
            taken.add(f.name)
        for f in struct:
            if pa.types.is_map(_unwrap(f.type)):
                taken.add(camel(f.name) + "Entry")  # protoc's name of its entry message
        for number, f in enumerate(struct, 1):
            self.field(proto, f, number, taken, f"{path}.{f.name}" if path else f.name)

    def nested_name(self, base: str, taken: set) -> str:
        name = base or "Message"
        if name in taken:
            name += "Message"
        candidate, n = name, 2
        while candidate in taken:
            candidate, n = f"{name}{n}", n + 1
        taken.add(candidate)
        return candidate

    def field(self, proto, arrow_field: pa.Field, number: int, taken: set, path: str):
        t = _unwrap(arrow_field.type)
        field = proto.field.add(name=arrow_field.name, number=number, label=LABEL_OPTIONAL)
        if _is_list(t):
            item = _unwrap(t.value_type)
            if _is_list(item) or pa.types.is_map(item):
                self.fail(path, f"is a list of {item}; Protobuf repeats only singular types "
                                f"(wrap the inner one in a struct)")
            field.label = LABEL_REPEATED
            self.element(proto, field, item, camel(arrow_field.name), taken, f"{path}[]")
        elif pa.types.is_map(t):
            key, value = _unwrap(t.key_type), _unwrap(t.item_type)
            key_type = _scalar_type(key)
            if key_type not in _MAP_KEY_TYPES:
                self.fail(path, f"is a map with {key} keys; Protobuf map keys are integers, "
                                f"strings or bools")
            if _is_list(value) or pa.types.is_map(value):
                self.fail(path, f"is a map of {value}; a Protobuf map's values are singular "
                                f"(wrap them in a struct)")
            entry = proto.nested_type.add(name=camel(arrow_field.name) + "Entry")
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, label=LABEL_OPTIONAL, type=key_type)
            entry_value = entry.field.add(name="value", number=2, label=LABEL_OPTIONAL)
            self.element(proto, entry_value, value, camel(arrow_field.name) + "Value", taken,
                         f"{path}{{}}")
            field.label = LABEL_REPEATED
            field.type_name = entry.name
        else:
            self.element(proto, field, t, camel(arrow_field.name), taken, path)
            if arrow_field.nullable and field.type != TYPE_MESSAGE:
                field.proto3_optional = True
                field.oneof_index = len(proto.oneof_decl)
                proto.oneof_decl.add(name="_" + arrow_field.name)

    def element(self, proto, field, t: pa.DataType, name_base: str, taken: set, path: str):
        """Sets `field`'s type to `t`'s (a nested message added to `proto` for a struct)."""
        scalar = _scalar_type(t)
        if scalar is not None:
            field.type = scalar
        elif pa.types.is_timestamp(t) or pa.types.is_duration(t):
            name = TIMESTAMP if pa.types.is_timestamp(t) else DURATION
            field.type = TYPE_MESSAGE
            field.type_name = ("." + name) if self.google_shadowed else name
            if _IMPORTS[name] not in self.imports:
                self.imports.append(_IMPORTS[name])
        elif pa.types.is_struct(t):
            nested = proto.nested_type.add(name=self.nested_name(name_base, taken))
            self.message(nested, t, path.rstrip("[]{}"))
            field.type = TYPE_MESSAGE
            field.type_name = nested.name
        else:
            hint = " (cast it to a string, or to a double)" if pa.types.is_decimal(t) else \
                " (cast it to a timestamp, a string or its days as int32)" \
                if pa.types.is_date(t) else ""
            self.fail(path, f"has type {t}, which has no Protobuf type here{hint}; the "
                            f"mapping writes booleans, integers, floats, strings, binary, "
                            f"timestamps, durations, decimal(20,0), lists, maps and structs")


def derive_message_schema(struct: pa.DataType, full_name: Optional[str], column: str) -> str:
    """The proto3 text (as Schema Registry stores it) of a struct column's message, named
    `full_name` (`package.Message`; default topLevelRecord)."""
    struct = _unwrap(struct)
    if not pa.types.is_struct(struct):
        raise InvalidInputError(f"column {column!r} has type {struct}; a Protobuf-framed "
                                f"write needs a struct there")
    name = full_name or DEFAULT_MESSAGE_NAME
    parts = name.lstrip(".").split(".")
    if not all(_IDENTIFIER.match(part) for part in parts):
        option = f"{column}RecordName"
        raise InvalidOptionError(f"option {option!r}: {name!r} is not a Protobuf message "
                                 f"name (package.Message, each part letters, digits and _)",
                                 option)
    package, message = ".".join(parts[:-1]), parts[-1]
    deriver = _Deriver(column, package)
    deriver.google_shadowed = "google" in parts
    deriver.scan_names(struct)
    file = deriver.pb2.FileDescriptorProto(name=FILE_NAME, syntax="proto3")
    if package:
        file.package = package
    top = file.message_type.add(name=message)
    deriver.message(top, struct, "")
    file.dependency.extend(deriver.imports)
    text = canonical_text(ParsedProto(file, "proto3", ()))
    try:
        load_text(text)
    except ProtobufSchemaError as failure:  # a name clash the mapping did not foresee
        raise InvalidInputError(f"column {column!r}: the message derived from its type does "
                                f"not load: {failure}") from None
    return text


# -- loading, choosing the message ---------------------------------------------------

def _message(loaded: LoadedProto, message: Optional[str], option: Optional[str] = None):
    """The descriptor of the message `message` names (full, or without the package), or of
    the file's first; InvalidOptionError naming `option` when the file declares none (a
    message of a file it imports has no message indexes in it)."""
    where = f"option {option!r}" if option else "the schema"
    if message is None:
        if not loaded.file.message_type:
            raise InvalidOptionError(f"{where} declares no message", option)
        return loaded.by_indexes((0,))
    found = loaded.by_name(message)
    if found is None or loaded.indexes_of(found.full_name) is None:
        names = ", ".join(loaded.message_names()) or "none"
        raise InvalidOptionError(f"{where} has no message {message!r} (its top-level "
                                 f"messages: {names})", option)
    return found


# -- encoding values -----------------------------------------------------------------


class _Misfit(Exception):
    """A value that does not fit; `path` grows as the error leaves nested fields."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail
        self.path: List[str] = []

    def within(self, segment: str) -> "_Misfit":
        self.path.insert(0, segment)
        return self

    def reason(self) -> str:
        path = "".join(self.path).lstrip(".")
        return f"field {path}: {self.detail}" if path else self.detail


class _Mismatch(Exception):
    """A column field whose type the message's field cannot hold (found when planning)."""


def _plain_type(t: pa.DataType) -> pa.DataType:
    """The type whose to_pylist() the encoders take: dictionaries decoded, timestamps and
    durations as int64 counts of their unit."""
    if pa.types.is_dictionary(t):
        return _plain_type(t.value_type)
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return pa.int64()
    if _is_list(t):
        item = t.value_field
        plain = pa.field(item.name, _plain_type(item.type), item.nullable)
        return pa.large_list(plain) if pa.types.is_large_list(t) else pa.list_(plain)
    if pa.types.is_map(t):
        return pa.map_(pa.field(t.key_field.name, _plain_type(t.key_type), False),
                       pa.field(t.item_field.name, _plain_type(t.item_type),
                                t.item_field.nullable))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain_type(f.type), f.nullable) for f in t])
    return t


class _Encoders:
    """Builds the functions that fill a message of a descriptor from a column's values
    (as to_pylist gives them, of _plain_type); _Mismatch for a column that does not fit
    the message's shape."""

    def message(self, struct: pa.DataType, descriptor, path: str) -> Callable:
        setters = []
        oneofs: Dict[str, List[str]] = {}
        for arrow_field in struct:
            where = f"{path}.{arrow_field.name}" if path else arrow_field.name
            fd = descriptor.fields_by_name.get(arrow_field.name)
            if fd is None:
                raise _Mismatch(f"field {where} is not in message {descriptor.full_name}")
            setters.append((arrow_field.name, self.field(arrow_field.type, fd, where)))
            if fd.containing_oneof is not None:
                oneofs.setdefault(fd.containing_oneof.name, []).append(fd.name)
        exclusive = [(name, members) for name, members in oneofs.items() if len(members) > 1]

        def fill(msg, value):
            for name, setter in setters:
                setter(msg, value[name])
            for oneof, members in exclusive:
                given = [m for m in members if value[m] is not None]
                if len(given) > 1:
                    raise _Misfit(f"fields {', '.join(given)} are all set, and they are "
                                  f"members of oneof {oneof}, which holds one")

        return fill

    def field(self, arrow_type: pa.DataType, fd, where: str) -> Callable:
        t = _unwrap(arrow_type)
        name = fd.name
        segment = "." + name
        if is_map(fd):
            if not pa.types.is_map(t):
                raise _Mismatch(f"field {where} is a map in the message and {t} in the column")
            entry = fd.message_type
            key = self.scalar(t.key_type, entry.fields_by_name["key"], f"{where} key")
            value_fd = entry.fields_by_name["value"]
            if value_fd.type == TYPE_MESSAGE:
                fill_value = self.message_value(t.item_type, value_fd, f"{where}{{}}")

                def set_message_map(msg, value):
                    if value is None:
                        return
                    container = getattr(msg, name)
                    for k, item in value:
                        try:
                            if item is None:
                                raise _Misfit("a null map value; a Protobuf map holds none")
                            fill_value(container.get_or_create(key(k)), item)
                        except _Misfit as misfit:
                            raise misfit.within(f"{{{k!r}}}").within(segment) from None

                return set_message_map
            convert = self.scalar(t.item_type, value_fd, f"{where}{{}}")

            def set_map(msg, value):
                if value is None:
                    return
                container = getattr(msg, name)
                for k, item in value:
                    try:
                        if item is None:
                            raise _Misfit("a null map value; a Protobuf map holds none")
                        container[key(k)] = convert(item)
                    except _Misfit as misfit:
                        raise misfit.within(f"{{{k!r}}}").within(segment) from None

            return set_map
        if pa.types.is_map(t):
            raise _Mismatch(f"field {where} is a map in the column and {kind_name(fd)} in "
                            f"the message")
        if is_repeated(fd):
            if not _is_list(t):
                raise _Mismatch(f"field {where} is repeated in the message and {t} in the "
                                f"column (a list is written there)")
            if fd.type == TYPE_MESSAGE:
                fill_item = self.message_value(t.value_type, fd, f"{where}[]")

                def set_messages(msg, value):
                    if value is None:
                        return
                    container = getattr(msg, name)
                    for i, item in enumerate(value):
                        try:
                            if item is None:
                                raise _Misfit("a null item; a repeated field holds none")
                            fill_item(container.add(), item)
                        except _Misfit as misfit:
                            raise misfit.within(f"[{i}]").within(segment) from None

                return set_messages
            convert = self.scalar(t.value_type, fd, f"{where}[]")

            def set_repeated(msg, value):
                if value is None:
                    return
                items = []
                for i, item in enumerate(value):
                    try:
                        if item is None:
                            raise _Misfit("a null item; a repeated field holds none")
                        items.append(convert(item))
                    except _Misfit as misfit:
                        raise misfit.within(f"[{i}]").within(segment) from None
                getattr(msg, name).extend(items)

            return set_repeated
        if _is_list(t):
            raise _Mismatch(f"field {where} is a list in the column and a singular "
                            f"{kind_name(fd)} in the message")
        if fd.type == TYPE_MESSAGE:
            fill_message = self.message_value(t, fd, where)

            def set_message(msg, value):
                if value is None:
                    return
                try:
                    fill_message(getattr(msg, name), value)
                except _Misfit as misfit:
                    raise misfit.within(segment) from None

            return set_message
        convert = self.scalar(t, fd, where)
        if fd.has_presence:
            def set_optional(msg, value):
                if value is None:
                    return
                try:
                    setattr(msg, name, convert(value))
                except _Misfit as misfit:
                    raise misfit.within(segment) from None

            return set_optional

        def set_plain(msg, value):
            try:
                if value is None:
                    raise _Misfit("a null, and the field has no presence in the schema (a "
                                  "proto3 field without `optional` cannot tell a null from "
                                  "its default)")
                setattr(msg, name, convert(value))
            except _Misfit as misfit:
                raise misfit.within(segment) from None

        return set_plain

    def message_value(self, arrow_type: pa.DataType, fd, where: str) -> Callable:
        """fill(sub-message, value) of a message-typed field (or repeated item, map value)."""
        t = _unwrap(arrow_type)
        target = fd.message_type
        full = target.full_name
        if full in (TIMESTAMP, DURATION):
            wanted = pa.types.is_timestamp if full == TIMESTAMP else pa.types.is_duration
            if not wanted(t):
                raise _Mismatch(f"field {where} is a {full} in the message and {t} in the "
                                f"column")
            factor = _NANOS[t.unit]
            if full == TIMESTAMP:
                def fill_timestamp(sub, value):
                    sub.SetInParent()  # the epoch (0, 0) is still a value
                    sub.seconds, sub.nanos = divmod(value * factor, 10 ** 9)

                return fill_timestamp

            def fill_duration(sub, value):
                nanos = value * factor
                seconds, rest = divmod(abs(nanos), 10 ** 9)
                sign = -1 if nanos < 0 else 1
                sub.SetInParent()
                sub.seconds, sub.nanos = sign * seconds, sign * rest

            return fill_duration
        if full in _WRAPPERS:
            convert = self.scalar(t, target.fields_by_name["value"], where)

            def fill_wrapper(sub, value):
                sub.SetInParent()
                sub.value = convert(value)

            return fill_wrapper
        if not pa.types.is_struct(t):
            raise _Mismatch(f"field {where} is message {full} in the message and {t} in the "
                            f"column (a struct is written there)")
        fill = self.message(t, target, where)

        def fill_struct(sub, value):
            sub.SetInParent()
            fill(sub, value)

        return fill_struct

    @staticmethod
    def scalar(arrow_type: pa.DataType, fd, where: str) -> Callable:
        """convert(value) -> the Python value the runtime sets, or _Misfit."""
        t = _unwrap(arrow_type)
        kind = fd.type
        integer = pa.types.is_integer(t) or (pa.types.is_decimal(t) and t.scale == 0)
        if kind in INT_RANGES and integer:
            low, high = INT_RANGES[kind]
            type_name = TYPE_NAMES[kind]

            def convert_int(value):
                value = int(value)
                if not low <= value <= high:
                    raise _Misfit(f"{value} is out of the range of {type_name} "
                                  f"({low}..{high})")
                return value

            return convert_int
        if kind == TYPE_ENUM and (pa.types.is_string(t) or pa.types.is_large_string(t)):
            numbers = {v.name: v.number for v in fd.enum_type.values}
            enum_name = fd.enum_type.full_name

            def convert_name(value):
                if value not in numbers:
                    raise _Misfit(f"{value!r} is not a value of enum {enum_name}")
                return numbers[value]

            return convert_name
        if kind == TYPE_ENUM and integer:
            low, high = INT_RANGES[TYPE_INT32]

            def convert_number(value):
                value = int(value)
                if not low <= value <= high:
                    raise _Misfit(f"{value} is out of the range of an enum (int32)")
                return value

            return convert_number
        if kind in (TYPE_FLOAT, TYPE_DOUBLE) and (pa.types.is_floating(t) or integer):
            return float
        if kind == TYPE_BOOL and pa.types.is_boolean(t):
            return bool
        text = pa.types.is_string(t) or pa.types.is_large_string(t)
        binary = pa.types.is_binary(t) or pa.types.is_large_binary(t) \
            or pa.types.is_fixed_size_binary(t)
        if kind == TYPE_STRING and text:
            return str
        if kind == TYPE_STRING and binary:
            def convert_utf8(value):
                try:
                    return bytes(value).decode("utf-8")
                except UnicodeDecodeError:
                    raise _Misfit("bytes that are not UTF-8, and the field is a "
                                  "string") from None

            return convert_utf8
        if kind == TYPE_BYTES and binary:
            return bytes
        if kind == TYPE_BYTES and text:
            return lambda value: value.encode("utf-8")
        raise _Mismatch(f"field {where} is {kind_name(fd)} in the message and {t} in the "
                        f"column")


_ENCODERS: Dict[Tuple[str, Optional[str], pa.DataType], Tuple[type, Callable]] = {}


def _encoder(text: str, message: Optional[str], struct: pa.DataType):
    key = (text, message, struct)
    found = _ENCODERS.get(key)
    if found is None:
        from google.protobuf import message_factory

        descriptor = _message(load_text(text), message)
        fill = _Encoders().message(struct, descriptor, "")
        if len(_ENCODERS) > 64:
            _ENCODERS.clear()
        found = _ENCODERS[key] = (message_factory.GetMessageClass(descriptor), fill)
    return found


def encode_values(column: pa.Array, text: str, message: Optional[str] = None
                  ) -> List[Optional[bytes]]:
    """The Protobuf binary of each value of a struct column (None for a null value);
    PayloadMisfit for the first value that does not fit."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks else \
            pa.array([], column.type)
    struct = _unwrap(column.type)
    if not pa.types.is_struct(struct):
        raise InvalidInputError(f"a column of type {column.type}; a Protobuf-framed write "
                                f"needs a struct")
    try:
        message_class, fill = _encoder(text, message, struct)
    except _Mismatch as mismatch:
        raise InvalidInputError(f"the column does not fit the schema: {mismatch}") from None
    plain = _plain_type(column.type)
    values = (column.cast(plain) if plain != column.type else column).to_pylist()
    out: List[Optional[bytes]] = []
    for row, value in enumerate(values):
        if value is None:
            out.append(None)
            continue
        built = message_class()
        try:
            fill(built, value)
            out.append(built.SerializeToString())
        except _Misfit as misfit:
            raise PayloadMisfit(row, misfit.reason()) from None
        except Exception as failure:  # the runtime's TypeError, ValueError, EncodeError
            raise PayloadMisfit(row, f"the protobuf runtime refuses it: {failure}") from None
    return out


# -- the SchemaFormat --------------------------------------------------------------


class ProtobufFormat(SchemaFormat):
    """valueFormat / keyFormat = protobuf. `message` (optional, on the methods that take a
    schema text): the message of the file a column's values are, by name (full, or
    without the package); None: the file's first."""

    name = "protobuf"
    schema_type = "PROTOBUF"
    schema_option = "ProtobufSchema"
    picks_message = True

    def derive_schema(self, column_type: pa.DataType, record_name: Optional[str],
                      column: str) -> str:
        return derive_message_schema(column_type, record_name, column)

    def given_schema(self, text, option: str, column_type: pa.DataType, column: str,
                     message: Optional[str] = None) -> str:
        if not isinstance(text, str) or not text.strip():
            raise InvalidOptionError(f"option {option!r} must be the text of a .proto file",
                                     option)
        try:
            parsed = read_proto(text, FILE_NAME, f"option {option!r}")
            others = [d for d in parsed.file.dependency if d not in WELL_KNOWN]
            if others:
                raise InvalidOptionError(
                    f"option {option!r} imports {', '.join(map(repr, others))}; a framed "
                    f"write registers no schema references, so only google/protobuf/*.proto "
                    f"may be imported (put the imported messages in the file)", option)
            loaded = load_text(text, f"option {option!r}")
        except ProtobufSchemaError as failure:
            raise InvalidOptionError(f"option {option!r} is not a .proto schema: {failure}",
                                     option) from None
        descriptor = _message(loaded, message, option)
        struct = _unwrap(column_type)
        if not pa.types.is_struct(struct):
            raise InvalidInputError(f"column {column!r} has type {column_type}; a "
                                    f"Protobuf-framed write needs a struct there")
        try:
            _Encoders().message(struct, descriptor, "")
        except _Mismatch as mismatch:
            raise InvalidInputError(f"column {column!r} does not fit message "
                                    f"{descriptor.full_name} of option {option!r}: "
                                    f"{mismatch}") from None
        return canonical_text(parsed) or text

    def same_schema(self, a: str, b: str) -> bool:
        """Whether the two texts print as one canonical text (comments, layout and the
        order of a message's fields among its oneofs, nested messages and enums aside);
        for texts with what the parser reads past, whether they parse alike, that part
        token by token."""
        if a == b:
            return True
        try:
            parsed_a, parsed_b = read_proto(a, FILE_NAME), read_proto(b, FILE_NAME)
        except ProtobufSchemaError:
            return False
        if parsed_a.skipped or parsed_b.skipped:
            return parsed_a == parsed_b
        return canonical_text(parsed_a) == canonical_text(parsed_b)

    def compatibility_problem(self, level: str, new_text: str,
                              previous: List[Tuple[int, str]]) -> Optional[Tuple[int, str]]:
        from .protobuf_compatibility import compatibility_problem

        return compatibility_problem(level, new_text, previous)

    def record_name(self, text: str, message: Optional[str] = None) -> str:
        """The message's full name (Confluent's serializer names the schema after the
        message it writes; by default, the file's first)."""
        return _message(load_text(text), message).full_name

    def message_indexes(self, text: str, message: Optional[str] = None) -> bytes:
        """Confluent's message indexes: a single 0 for the file's first message, else
        their count and the indexes, as zig-zag varints."""
        if message is None:
            return b"\x00"
        loaded = load_text(text)
        indexes = loaded.indexes_of(_message(loaded, message).full_name)
        if indexes == (0,):
            return b"\x00"
        out = bytearray()
        for value in (len(indexes), *indexes):
            write_varint(value, out)
        return bytes(out)

    def encode_payloads(self, column: pa.Array, text: str, message: Optional[str] = None
                        ) -> List[Optional[bytes]]:
        return encode_values(column, text, message)
