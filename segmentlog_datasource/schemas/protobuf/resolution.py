"""Protobuf's schema resolution: how a value written with one message (the writer's) reads
as another (the reader's, whose Spark type is the column's: mapping.py), as Protobuf itself
reads a message written with another version of its schema.

Fields are matched by number (a renamed field keeps its values; a field renumbered is
another field): fields the reader lacks are dropped, fields the writer lacks read as
absent ones do, integers widen (and narrow where the value fits), integers and floats
widen to floats and doubles, strings and bytes read as each other (UTF-8 checked), a
singular field reads into a repeated one, enums and integers read as each other, a
wrapper reads as its value and its value as it, Timestamp and Duration as microseconds.
Other changes of a field's type make the writer's messages incompatible (Incompatible,
saying which field and why).

Absent fields: a field without presence (a proto3 scalar without `optional`) reads as its
default (0, "", false, the first enum value), as Protobuf's own readers give it and
spark-protobuf's emit.default.values renders it; a field with presence (messages,
wrappers, oneof members, `optional` and proto2 fields without an explicit default) reads
as null; repeated and map fields as empty.

Both decoders follow these rules: decode/protobuf.py turns the runtime's messages into
values with them, decode/protobuf_program.py compiles them into its programs.
"""
from typing import Any, List, NamedTuple, Optional, Tuple

from .descriptors import is_map, is_repeated, kind_name
from .mapping import WRAPPERS, column_fields, is_duration, is_timestamp
from .text import (
    INT_RANGES, TYPE_BOOL, TYPE_BYTES, TYPE_DOUBLE, TYPE_ENUM, TYPE_FLOAT, TYPE_MESSAGE,
    TYPE_STRING,
)


class Incompatible(Exception):
    """A writer field whose type the reader's field cannot read; the message says why."""


# How a reader field reads its writer field (FieldRead.shape)
MAP, REPEATED, SINGULAR_TO_REPEATED, SINGULAR = "map", "repeated", "singular to repeated", \
    "singular"
# How one value reads (ValueRead.how): a Timestamp or Duration as microseconds, a message
# field by field, a wrapper's value as a scalar (or as the reader's wrapper), a scalar
MICROS, MESSAGE, WRAPPED, LEAF = "micros", "message", "wrapped", "leaf"
# How one scalar reads (LeafRead.how): an enum's name (of an enum or integer), an integer
# (range-checked where the column's is narrower), a float or double, a bool, text (UTF-8
# checked), bytes
ENUM, INT, FLOAT, BOOL, TEXT, BYTES = "enum", "int", "float", "bool", "text", "bytes"
# What a reader field the writer lacks reads as (absent_read)
EMPTY, NULL, DEFAULT = "empty", "null", "default"


class LeafRead(NamedTuple):
    """A scalar of `writer`'s type read as one of `reader`'s (each a scalar or enum field:
    a wrapper's value field where the value is wrapped)."""

    how: str
    writer: Any
    reader: Any


class ValueRead(NamedTuple):
    """One value of field `writer` (an element of a repeated field, a map's key or value)
    read as one of field `reader`: `how` is MICROS, MESSAGE (writer.message_type read as
    reader.message_type, field by field), WRAPPED (the writer's wrapper, its value read by
    `leaf`) or LEAF (`leaf`)."""

    how: str
    writer: Any
    reader: Any
    leaf: Optional[LeafRead] = None


class FieldRead(NamedTuple):
    """Field `writer` read as field `reader`: `shape` is MAP (each entry's `key` and
    `value` read as the reader's), REPEATED (each element by `element`), SINGULAR_TO_REPEATED
    (a value the message holds becomes a one-element list, else an empty one) or SINGULAR."""

    shape: str
    element: Optional[ValueRead] = None
    key: Optional[ValueRead] = None
    value: Optional[ValueRead] = None


def _incompatible(writer, reader) -> Incompatible:
    return Incompatible(f"field {reader.name} is {kind_name(writer)} in the writer's message "
                        f"and {kind_name(reader)} in the column's")


def matched_fields(writer, reader) -> List[Tuple[Any, Optional[Any]]]:
    """(reader field, the writer's field of its number or None) of each field of message
    `reader` its column holds, in order."""
    return [(field, writer.fields_by_number.get(field.number))
            for field in column_fields(reader)]


def field_read(writer, reader) -> FieldRead:
    """How field `writer` of the writer's message reads as field `reader` of the
    reader's; Incompatible saying why it does not. A MESSAGE value's own fields are
    matched in turn (matched_fields, field_read)."""
    if is_map(reader):
        if not is_map(writer):
            raise _incompatible(writer, reader)
        wkey, wvalue = (writer.message_type.fields_by_name[n] for n in ("key", "value"))
        rkey, rvalue = (reader.message_type.fields_by_name[n] for n in ("key", "value"))
        return FieldRead(MAP, key=value_read(wkey, rkey), value=value_read(wvalue, rvalue))
    if is_map(writer):
        raise _incompatible(writer, reader)
    element = value_read(writer, reader)
    if is_repeated(reader):
        return FieldRead(REPEATED if is_repeated(writer) else SINGULAR_TO_REPEATED, element)
    if is_repeated(writer):
        raise Incompatible(f"field {reader.name} is repeated in the writer's message and "
                           f"singular in the column's")
    return FieldRead(SINGULAR, element)


def value_read(writer, reader) -> ValueRead:
    """How one value of `writer`'s type reads as one of `reader`'s; Incompatible."""
    if reader.type == TYPE_MESSAGE:
        target = reader.message_type
        if is_timestamp(target) or is_duration(target):
            if writer.type == TYPE_MESSAGE and (
                    is_timestamp(writer.message_type) == is_timestamp(target)
                    and is_duration(writer.message_type) == is_duration(target)):
                return ValueRead(MICROS, writer, reader)
        elif target.full_name in WRAPPERS:
            inner = target.fields_by_name["value"]
            if writer.type == TYPE_MESSAGE and writer.message_type.full_name in WRAPPERS:
                return ValueRead(WRAPPED, writer, reader, leaf_read(
                    writer.message_type.fields_by_name["value"], inner))
            if writer.type != TYPE_MESSAGE:
                return ValueRead(LEAF, writer, reader, leaf_read(writer, inner))
        elif writer.type == TYPE_MESSAGE and not is_map(writer) \
                and writer.message_type.full_name not in WRAPPERS:
            return ValueRead(MESSAGE, writer, reader)
        raise _incompatible(writer, reader)
    if writer.type == TYPE_MESSAGE and writer.message_type.full_name in WRAPPERS:
        return ValueRead(WRAPPED, writer, reader, leaf_read(
            writer.message_type.fields_by_name["value"], reader))
    return ValueRead(LEAF, writer, reader, leaf_read(writer, reader))


def leaf_read(writer, reader) -> LeafRead:
    """How a scalar or enum of `writer`'s type reads as one of `reader`'s; Incompatible."""
    wtype, rtype = writer.type, reader.type
    if rtype == TYPE_ENUM and (wtype == TYPE_ENUM or wtype in INT_RANGES):
        how = ENUM
    elif rtype in INT_RANGES and wtype in INT_RANGES:
        how = INT
    elif rtype in (TYPE_FLOAT, TYPE_DOUBLE) \
            and (wtype in (TYPE_FLOAT, TYPE_DOUBLE) or wtype in INT_RANGES):
        how = FLOAT
    elif rtype == TYPE_BOOL and wtype == TYPE_BOOL:
        how = BOOL
    elif rtype == TYPE_STRING and wtype in (TYPE_STRING, TYPE_BYTES):
        how = TEXT
    elif rtype == TYPE_BYTES and wtype in (TYPE_BYTES, TYPE_STRING):
        how = BYTES
    else:
        raise _incompatible(writer, reader)
    return LeafRead(how, writer, reader)


def null_when_absent(field) -> bool:
    """Whether a message without the field reads it as null: a field with presence and no
    explicit default (any other reads as its default)."""
    return field.has_presence and not field.has_default_value


def absent_read(field) -> str:
    """What a reader field the writer lacks reads as: EMPTY (repeated and map fields), NULL
    (null_when_absent) or DEFAULT (the field's default, read as the field's own type)."""
    if is_repeated(field):
        return EMPTY
    if null_when_absent(field):
        return NULL
    return DEFAULT
