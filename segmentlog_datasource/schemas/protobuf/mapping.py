"""Protobuf's types as Spark's, both ways: the Spark type (an Arrow type) of a message, as
spark-protobuf's SchemaConverters maps it (reading), and the proto3 message of a struct
column's type, the inverse of that mapping (writing), so that reading the values back gives
the column's values.

Reading, field by field: int32, sint32, sfixed32 -> int; int64, sint64, sfixed64 -> bigint;
uint32, fixed32 -> bigint and uint64, fixed64 -> decimal(20,0) (spark-protobuf's
upcast.unsigned.ints: no value wraps negative); float, double, bool, string; bytes ->
binary; enum -> string (the value's name); message -> struct (a message with no fields is
left out, as Spark drops it); repeated -> array; map -> map; oneof -> its fields, each
nullable; google.protobuf.Timestamp -> timestamp, Duration -> interval day to second (any
message so named whose fields are seconds and nanos); wrappers (Int32Value, StringValue,
...) -> their nullable scalar (spark-protobuf's unwrap.primitive.wrapper.types). A
recursive message, or a proto2 group, has no Spark type.

Writing (derive_message_schema), field by field (numbered 1..n in the column's order):
bool; int8, int16, int32, uint8, uint16 -> int32 (all read back as int32); int64; uint32 ->
uint32 (read back as int64); uint64 and decimal(20,0) -> uint64 (read back as
decimal(20,0)); float16, float32 -> float (read back as float32); float64 -> double;
string -> string; binary -> bytes; timestamp -> google.protobuf.Timestamp (read back as
timestamp[us, UTC]: a timestamp without a time zone is taken as UTC; nanoseconds are
written, and read back truncated to microseconds); duration -> google.protobuf.Duration
(read back as duration[us]); struct -> a message nested in the enclosing one, named after
its field in CamelCase (`address` -> `Address`; `Message` appended when that name is
taken); list -> repeated; map -> map<K, V> with integer, string or bool keys, a struct
value's message named `<Field>Value`. A nullable scalar is a proto3 `optional` field (with
presence: a null is left out, and reads back as null); a non-nullable one a plain field;
message fields have presence either way. Refused (InvalidInputError naming the column and
field path): date, other decimals, null, nested lists (list of list, map of list or map:
Protobuf repeats only singular types), maps with other keys, structs without fields (the
decoder drops them, as Spark does) and field names that are not Protobuf identifiers.

The derived message is named by `record_name`: `shop.Order` is message Order in package
shop; None gives `topLevelRecord` without a package (spark-avro's default record name, so
that RecordNameStrategy names a subject alike in both languages).
"""
import re
from typing import Dict, List, Optional, Tuple

import pyarrow as pa

from ...errors import InvalidInputError, InvalidOptionError
from .descriptors import is_map, is_repeated, is_required, load_text
from .text import (
    FILE_NAME, LABEL_OPTIONAL, LABEL_REPEATED, TYPE_BOOL, TYPE_BYTES, TYPE_DOUBLE, TYPE_ENUM,
    TYPE_FIXED32, TYPE_FIXED64, TYPE_FLOAT, TYPE_GROUP, TYPE_INT32, TYPE_INT64, TYPE_MESSAGE,
    TYPE_SFIXED32, TYPE_SFIXED64, TYPE_SINT32, TYPE_SINT64, TYPE_STRING, TYPE_UINT32,
    TYPE_UINT64, ParsedProto, ProtobufSchemaError, camel, canonical_text,
)

# ------------------------------------------------ Protobuf -> Spark (reading)

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")  # Spark's TimestampType
DURATION_TYPE = pa.duration("us")  # Spark's DayTimeIntervalType
UNSIGNED_64 = pa.decimal128(20, 0)

# Integer types' columns, and the values each column holds
INT_COLUMNS = {TYPE_INT32: pa.int32(), TYPE_SINT32: pa.int32(), TYPE_SFIXED32: pa.int32(),
               TYPE_INT64: pa.int64(), TYPE_SINT64: pa.int64(), TYPE_SFIXED64: pa.int64(),
               TYPE_UINT32: pa.int64(), TYPE_FIXED32: pa.int64(),
               TYPE_UINT64: UNSIGNED_64, TYPE_FIXED64: UNSIGNED_64}
COLUMN_RANGES = {pa.int32(): (-2 ** 31, 2 ** 31 - 1), pa.int64(): (-2 ** 63, 2 ** 63 - 1),
                 UNSIGNED_64: (0, 2 ** 64 - 1)}
# The wrappers (spark-protobuf's unwrap.primitive.wrapper.types): full name -> their
# value's type
WRAPPERS = {
    "google.protobuf.DoubleValue": TYPE_DOUBLE, "google.protobuf.FloatValue": TYPE_FLOAT,
    "google.protobuf.Int64Value": TYPE_INT64, "google.protobuf.UInt64Value": TYPE_UINT64,
    "google.protobuf.Int32Value": TYPE_INT32, "google.protobuf.UInt32Value": TYPE_UINT32,
    "google.protobuf.BoolValue": TYPE_BOOL, "google.protobuf.StringValue": TYPE_STRING,
    "google.protobuf.BytesValue": TYPE_BYTES,
}


def is_timestamp(message) -> bool:
    return _seconds_nanos(message, "Timestamp")


def is_duration(message) -> bool:
    return _seconds_nanos(message, "Duration")


def _seconds_nanos(message, name) -> bool:
    """spark-protobuf's test: a message named so, whose fields are seconds and nanos."""
    return message.name == name and [f.name for f in message.fields] == ["seconds", "nanos"]


def enum_names(enum) -> Dict[int, str]:
    """The name each number of an enum reads as (of aliases, the first declared)."""
    names: Dict[int, str] = {}
    for value in enum.values:
        names.setdefault(value.number, value.name)
    return names


def _scalar_arrow(kind: int) -> pa.DataType:
    if kind in INT_COLUMNS:
        return INT_COLUMNS[kind]
    return {TYPE_DOUBLE: pa.float64(), TYPE_FLOAT: pa.float32(), TYPE_BOOL: pa.bool_(),
            TYPE_STRING: pa.string(), TYPE_BYTES: pa.binary(), TYPE_ENUM: pa.string()}[kind]


class _TypeMapper:
    def __init__(self, where: str):
        self.where = where

    def message(self, message, active: Tuple[str, ...] = ()) -> Optional[pa.DataType]:
        """The struct of `message`; None for a message with no fields left (dropped)."""
        active = active + (message.full_name,)
        fields = []
        for field in message.fields:
            arrow = self.field(field, active)
            if arrow is None:
                continue
            if is_map(field):
                fields.append(pa.field(field.name, arrow))
            elif is_repeated(field):
                fields.append(pa.field(field.name, pa.list_(pa.field("element", arrow,
                                                                     nullable=False))))
            else:
                fields.append(pa.field(field.name, arrow, nullable=not is_required(field)))
        return pa.struct(fields) if fields else None

    def field(self, field, active) -> Optional[pa.DataType]:
        if field.type == TYPE_GROUP:
            raise ProtobufSchemaError(f"{self.where}: field {field.full_name} is a proto2 "
                                      f"group, which is not read")
        if field.type != TYPE_MESSAGE:
            return _scalar_arrow(field.type)
        message = field.message_type
        if is_map(field):
            key = self.field(message.fields_by_name["key"], active)
            value = self.field(message.fields_by_name["value"], active)
            if value is None:
                return None
            value_field = message.fields_by_name["value"]
            if is_repeated(value_field):
                value = pa.list_(pa.field("element", value, nullable=False))
            return pa.map_(key, pa.field("value", value, nullable=False))
        if is_timestamp(message):
            return TIMESTAMP_TYPE
        if is_duration(message):
            return DURATION_TYPE
        if message.full_name in WRAPPERS:
            return _scalar_arrow(WRAPPERS[message.full_name])
        if message.full_name in active:
            raise ProtobufSchemaError(
                f"{self.where}: field {field.full_name} is a {message.full_name} inside "
                f"{message.full_name}: a recursive message has no Spark type")
        return self.message(message, active)


def message_type(message, where: str) -> Optional[pa.DataType]:
    """The Spark type (an Arrow struct) of a message, as spark-protobuf's SchemaConverters
    maps it; None for a message with no field left (Spark drops it). ProtobufSchemaError
    naming `where` for a message without one (a recursive message, a proto2 group)."""
    return _TypeMapper(where).message(message)


def column_fields(message) -> list:
    """The fields of a message its struct holds, in order: all but those whose message
    has no field left."""
    return [field for field in message.fields if _TypeMapper("").field(field, ()) is not None]


# ------------------------------------------------ Spark -> Protobuf (writing)

DEFAULT_MESSAGE_NAME = "topLevelRecord"
TIMESTAMP_MESSAGE = "google.protobuf.Timestamp"
DURATION_MESSAGE = "google.protobuf.Duration"
_IMPORTS = {TIMESTAMP_MESSAGE: "google/protobuf/timestamp.proto",
            DURATION_MESSAGE: "google/protobuf/duration.proto"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def unwrap_dictionary(t: pa.DataType) -> pa.DataType:
    """A dictionary type's value type (a column of it is written as its values)."""
    while pa.types.is_dictionary(t):
        t = t.value_type
    return t


def is_list_type(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


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
        t = unwrap_dictionary(t)
        if pa.types.is_struct(t):
            for f in t:
                self.google_shadowed |= f.name == "google"
                self.scan_names(f.type)
        elif is_list_type(t):
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
            if pa.types.is_map(unwrap_dictionary(f.type)):
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
        t = unwrap_dictionary(arrow_field.type)
        field = proto.field.add(name=arrow_field.name, number=number, label=LABEL_OPTIONAL)
        if is_list_type(t):
            item = unwrap_dictionary(t.value_type)
            if is_list_type(item) or pa.types.is_map(item):
                self.fail(path, f"is a list of {item}; Protobuf repeats only singular types "
                                f"(wrap the inner one in a struct)")
            field.label = LABEL_REPEATED
            self.element(proto, field, item, camel(arrow_field.name), taken, f"{path}[]")
        elif pa.types.is_map(t):
            key, value = unwrap_dictionary(t.key_type), unwrap_dictionary(t.item_type)
            key_type = _scalar_type(key)
            if key_type not in _MAP_KEY_TYPES:
                self.fail(path, f"is a map with {key} keys; Protobuf map keys are integers, "
                                f"strings or bools")
            if is_list_type(value) or pa.types.is_map(value):
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
            name = TIMESTAMP_MESSAGE if pa.types.is_timestamp(t) else DURATION_MESSAGE
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
    struct = unwrap_dictionary(struct)
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
