"""Protobuf for framed writes: a column's values encoded by the protobuf runtime as the
message schemas/protobuf/mapping.py derives from the column's type, or that an option
gives; the message indexes Confluent's serializer writes after the schema id; the
SchemaFormat the framed write calls. The language's facts (the .proto text and its
canonical form, the derivation, compatibility) are schemas/protobuf/'s.

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
import functools
from typing import Callable, Dict, List, Optional, Tuple

import pyarrow as pa

from ..errors import InvalidOptionError
from ..format.varint import write_varint
from ..schemas.protobuf.descriptors import (
    WELL_KNOWN, LoadedProto, is_map, is_repeated, kind_name, load_text,
)
from ..schemas.protobuf.mapping import (
    DURATION_MESSAGE, TIMESTAMP_MESSAGE, WRAPPERS, derive_message_schema, is_list_type,
    unwrap_dictionary,
)
from ..schemas.protobuf.text import (
    FILE_NAME, INT_RANGES, TYPE_BOOL, TYPE_BYTES, TYPE_DOUBLE, TYPE_ENUM, TYPE_FLOAT,
    TYPE_INT32, TYPE_MESSAGE, TYPE_NAMES, TYPE_STRING, ProtobufSchemaError, canonical_text,
    read_proto,
)
from .errors import InvalidInputError
from .schema_format import PayloadMisfit, SchemaFormat

_NANOS = {"s": 10 ** 9, "ms": 10 ** 6, "us": 10 ** 3, "ns": 1}  # an Arrow unit in nanoseconds


# -- choosing the message -----------------------------------------------------------

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
    if is_list_type(t):
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
        t = unwrap_dictionary(arrow_type)
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
            if not is_list_type(t):
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
        if is_list_type(t):
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
        t = unwrap_dictionary(arrow_type)
        target = fd.message_type
        full = target.full_name
        if full in (TIMESTAMP_MESSAGE, DURATION_MESSAGE):
            wanted = pa.types.is_timestamp if full == TIMESTAMP_MESSAGE else pa.types.is_duration
            if not wanted(t):
                raise _Mismatch(f"field {where} is a {full} in the message and {t} in the "
                                f"column")
            factor = _NANOS[t.unit]
            if full == TIMESTAMP_MESSAGE:
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
        if full in WRAPPERS:
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
        t = unwrap_dictionary(arrow_type)
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


@functools.lru_cache(maxsize=64)
def _encoder(text: str, message: Optional[str], struct: pa.DataType
             ) -> Tuple[type, Callable]:
    """The message class and the filler of a (schema text, message, column type), built
    once a process."""
    from google.protobuf import message_factory

    descriptor = _message(load_text(text), message)
    return message_factory.GetMessageClass(descriptor), _Encoders().message(struct, descriptor, "")


def encode_values(column: pa.Array, text: str, message: Optional[str] = None
                  ) -> List[Optional[bytes]]:
    """The Protobuf binary of each value of a struct column (None for a null value);
    PayloadMisfit for the first value that does not fit."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks else \
            pa.array([], column.type)
    struct = unwrap_dictionary(column.type)
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
        struct = unwrap_dictionary(column_type)
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
        from ..schemas.protobuf.compatibility import compatibility_problem

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
