"""valueFormat=protobuf: Schema Registry framed Protobuf values as typed Arrow columns.

The wire format is Confluent's KafkaProtobufSerializer's: a zero magic byte, the schema id
(4 bytes, big-endian), the message indexes, then the Protobuf binary. The message indexes
say which message of the registered .proto file the value is: a zig-zag varint count, then
that many zig-zag varint indexes (the first into the file's top-level messages, each next
one into the nested messages of the one before); a lone 0 (a count of zero) means [0], the
file's first message.

Schemas are registered as .proto text, importing other subjects by reference name. The text
is parsed and loaded in a DescriptorPool by schemas/protobuf/ (references first;
google/protobuf/*.proto from the runtime's own well-known types), and payloads are parsed
with the runtime's message classes.

The column's type is the reader message's (by default the first message of the subject's
latest schema), as spark-protobuf's SchemaConverters maps it (schemas/protobuf/mapping.py).
A recursive message fails the read naming the subject, version and field.

Absent fields: a field without presence (a proto3 scalar without `optional`) reads as its
default (0, "", false, the first enum value), as Protobuf's own readers give it and
spark-protobuf's emit.default.values renders it; a field with presence (messages, wrappers,
oneof members, `optional` and proto2 fields without an explicit default) reads as null;
repeated and map fields as empty.

Values written with older schemas are decoded with their own message and taken into the
reader's by field number, as Protobuf reads a message of another version (a renamed field
keeps its values; a field renumbered is another field): fields the reader lacks are
dropped, fields the writer lacks read as absent ones do, integers widen (and narrow where the value fits), integers and floats widen
to floats and doubles, strings and bytes read as each other (UTF-8 checked), a singular
field reads into a repeated one. Other changes of a field's type make the writer's messages
incompatible. A value whose message indexes name another message than the reader's is an
error naming both.

A read's column (decode_columns) is decoded by the compiled twin of this path
(protobuf_program.py, _protobufcolumns.c) when the writer's message is in its scope:
straight from the wire format into Arrow buffers, with the same values and the same
errors (a failed row's reason is this path's own). `decode` keeps the row-by-row path:
the runtime's parse, then the conversion below.
"""
from decimal import Decimal
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa

from ..errors import InvalidOptionError, RecordDecodeError
from ..format.varint import read_varint
from ..schemas.protobuf.descriptors import (
    LoadedSchema, is_map, is_repeated, kind_name, load_registered,
)
from ..schemas.protobuf.mapping import (
    COLUMN_RANGES, DURATION_TYPE, INT_COLUMNS, TIMESTAMP_TYPE, UNSIGNED_64, WRAPPERS,
    column_fields, is_duration, is_timestamp, message_type,
)
from ..schemas.protobuf.text import (
    INT_RANGES, TYPE_BOOL, TYPE_BYTES, TYPE_DOUBLE, TYPE_ENUM, TYPE_FLOAT, TYPE_MESSAGE,
    TYPE_STRING, ProtobufSchemaError,
)
from .value_formats import FormatReader, IncompatibleSchemaError, ValueFormat, decoded_rows

# Writer message -> reader column -----------------------------------------------------


class _Misfit(ValueError):
    """A value that does not fit its column (one row's error)."""


class _Incompatible(Exception):
    """A writer field whose type cannot be read as the reader's."""


def _micros(value, path: str, column: pa.DataType) -> int:
    micros = value.seconds * 1_000_000 + value.nanos // 1000
    if not -2 ** 63 <= micros < 2 ** 63:  # past what the column's int64 microseconds hold
        raise _Misfit(f"field {path}: {value.seconds} seconds and {value.nanos} nanoseconds "
                      f"are out of the range of the column's {column}")
    return micros


def _map_order(key):
    """A map key's place: its value, a string by its UTF-8 bytes (code point order, as
    Python sorts strings), so that a proto2 string key that is not UTF-8 (which the
    runtime gives as bytes) sorts among them."""
    return key.encode("utf-8", "surrogatepass") if isinstance(key, str) else key


def _text(value, path: str):
    """A string field's value as text: a proto2 string that is not UTF-8 (the runtime,
    which does not check proto2 strings, gives its bytes) does not fit a string column."""
    if isinstance(value, str):
        return value
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise _Misfit(f"field {path}: bytes that are not UTF-8, and the column's field is a "
                      f"string") from None


def _enum_names(enum) -> Dict[int, str]:
    names: Dict[int, str] = {}
    for value in enum.values:
        names.setdefault(value.number, value.name)  # an alias: the first name
    return names


class _Converters:
    """Builds functions turning messages of a writer's descriptors into values of the
    reader's column, by field number (as Protobuf itself reads a message written with
    another version of its schema: a renamed field keeps its number)."""

    def __init__(self):
        self.messages: Dict[Tuple[str, str], Callable] = {}

    def message(self, writer, reader) -> Callable:
        key = (writer.full_name, reader.full_name)
        if key in self.messages:
            return self.messages[key]
        parts: List[Tuple[str, Callable]] = []
        convert_row = None

        def convert_message(value, path=""):
            return convert_row(value, path)

        self.messages[key] = convert_message  # nested references to it while building
        for field in column_fields(reader):  # not those dropped from the column
            written = writer.fields_by_number.get(field.number)
            if written is None:
                parts.append((field.name, self.absent(field)))
            else:
                parts.append((field.name, self.field(written, field)))

        def convert_row(value, path=""):
            return {name: get(value, path) for name, get in parts}

        return convert_message

    @staticmethod
    def absent(field) -> Callable:
        """The getter of a field the writer lacks: as if absent from the value."""
        if is_repeated(field):
            return lambda value, path: []
        if field.has_presence and not field.has_default_value:
            return lambda value, path: None
        constant = _Converters.leaf(field, field)(field.default_value, field.name)
        return lambda value, path: constant

    def field(self, writer, reader) -> Callable:
        name = reader.name  # the column's field; the writer's may be named otherwise
        wname = writer.name
        if is_map(reader):
            if not is_map(writer):
                raise _Incompatible(f"field {name} is {kind_name(writer)} in the writer's "
                                    f"message and a map in the column's")
            wkey, wvalue = (writer.message_type.fields_by_name[n] for n in ("key", "value"))
            rkey, rvalue = (reader.message_type.fields_by_name[n] for n in ("key", "value"))
            key, item = self.single(wkey, rkey), self.single(wvalue, rvalue)

            def get_map(value, path):
                inner = f"{path}.{name}" if path else name
                entries = getattr(value, wname)
                return [(key(k, inner), item(entries[k], f"{inner}[{k!r}]"))
                        for k in sorted(entries, key=_map_order)]

            return get_map
        if is_map(writer):
            raise _Incompatible(f"field {name} is a map in the writer's message and "
                                f"{kind_name(reader)} in the column's")
        element = self.single(writer, reader)
        if is_repeated(reader):
            if is_repeated(writer):
                return lambda value, path: [
                    element(item, f"{path}.{name}" if path else name)
                    for item in getattr(value, wname)]
            has = self.presence(writer)
            return lambda value, path: [element(getattr(value, wname),
                                                f"{path}.{name}" if path else name)] \
                if has(value) else []
        if is_repeated(writer):
            raise _Incompatible(f"field {name} is repeated in the writer's message and "
                                f"singular in the column's")
        has = self.presence(writer)

        def get_field(value, path):
            if not has(value):
                return None
            return element(getattr(value, wname), f"{path}.{name}" if path else name)

        return get_field

    @staticmethod
    def presence(field) -> Callable:
        """Whether a message holds the field (one without presence always does: its
        default)."""
        if field.has_presence and not field.has_default_value:
            name = field.name
            return lambda value: value.HasField(name)
        return lambda value: True

    def single(self, writer, reader) -> Callable:
        """One value of `writer`'s type as a value of `reader`'s (elements of repeated
        fields, map keys and values)."""
        if reader.type == TYPE_MESSAGE:
            target = reader.message_type
            if is_timestamp(target) or is_duration(target):
                if writer.type == TYPE_MESSAGE and (
                        is_timestamp(writer.message_type) == is_timestamp(target)
                        and is_duration(writer.message_type) == is_duration(target)):
                    column = TIMESTAMP_TYPE if is_timestamp(target) else DURATION_TYPE
                    rname = reader.name
                    return lambda value, path: _micros(value, path or rname, column)
            elif target.full_name in WRAPPERS:
                inner = target.fields_by_name["value"]
                if writer.type == TYPE_MESSAGE and writer.message_type.full_name in WRAPPERS:
                    unwrap = self.leaf(writer.message_type.fields_by_name["value"], inner)
                    return lambda value, path: unwrap(value.value, path)
                if writer.type != TYPE_MESSAGE:
                    return self.leaf(writer, inner)
            elif writer.type == TYPE_MESSAGE and not is_map(writer) \
                    and writer.message_type.full_name not in WRAPPERS:
                return self.message(writer.message_type, target)
            raise _Incompatible(f"field {reader.name} is {kind_name(writer)} in the "
                                f"writer's message and {kind_name(reader)} in the column's")
        if writer.type == TYPE_MESSAGE and writer.message_type.full_name in WRAPPERS:
            unwrap = self.leaf(writer.message_type.fields_by_name["value"], reader)
            return lambda value, path: unwrap(value.value, path)
        return self.leaf(writer, reader)

    @staticmethod
    def leaf(writer, reader) -> Callable:
        """A scalar or enum of `writer`'s type as `reader`'s."""
        wtype, rtype = writer.type, reader.type
        problem = _Incompatible(f"field {reader.name} is {kind_name(writer)} in the writer's "
                                f"message and {kind_name(reader)} in the column's")
        if rtype == TYPE_ENUM:
            names = _enum_names(reader.enum_type)
            enum_name = reader.enum_type.name
            if wtype == TYPE_ENUM:
                return lambda value, path: names.get(value) or \
                    f"UNKNOWN_ENUM_VALUE_{enum_name}_{value}"
            if wtype in INT_RANGES:
                return lambda value, path: names.get(value) or \
                    f"UNKNOWN_ENUM_VALUE_{enum_name}_{value}"
            raise problem
        if rtype in INT_RANGES:
            if wtype not in INT_RANGES:
                raise problem
            column = INT_COLUMNS[rtype]
            low, high = COLUMN_RANGES[column]
            unsigned = column == UNSIGNED_64
            wlow, whigh = INT_RANGES[wtype]
            checked = wlow < low or whigh > high

            def convert_int(value, path):
                value = int(value)
                if checked and not low <= value <= high:
                    raise _Misfit(f"field {path or reader.name}: {value} is out of the range "
                                  f"of the column's {column}")
                return Decimal(value) if unsigned else value

            return convert_int
        if rtype in (TYPE_FLOAT, TYPE_DOUBLE):
            if wtype in (TYPE_FLOAT, TYPE_DOUBLE) or wtype in INT_RANGES:
                return lambda value, path: float(value)
            raise problem
        if rtype == TYPE_BOOL:
            if wtype != TYPE_BOOL:
                raise problem
            return lambda value, path: bool(value) if not isinstance(value, str) \
                else value == "true"
        if rtype == TYPE_STRING:
            if wtype == TYPE_STRING:
                return lambda value, path: _text(value, path or reader.name)
            if wtype == TYPE_BYTES:
                def utf8(value, path):
                    try:
                        return bytes(value).decode("utf-8")
                    except UnicodeDecodeError:
                        raise _Misfit(f"field {path or reader.name}: bytes that are not "
                                      f"UTF-8, and the column's field is a string") from None
                return utf8
            raise problem
        if rtype == TYPE_BYTES:
            if wtype == TYPE_BYTES:
                return lambda value, path: bytes(value)
            if wtype == TYPE_STRING:
                return lambda value, path: value.encode("utf-8") if isinstance(value, str) \
                    else bytes(value)
            raise problem
        raise problem


# Payloads -----------------------------------------------------------------------------


def _index_varint(body: bytes, position: int) -> Tuple[int, int]:
    """A zig-zag varint of the message indexes, as Kafka's ByteUtils.readVarint reads it
    (at most 5 bytes), and where the next starts; ValueError saying what is wrong."""
    window = body[position:position + 5]
    try:
        value, length = read_varint(window, 0)
    except IndexError:  # the window ends inside the varint
        if len(window) == 5:
            raise ValueError("bad message indexes: a varint longer than 5 bytes") from None
        raise ValueError("truncated message indexes: the payload ends inside a varint") \
            from None
    return value, position + length


def message_indexes(body: bytes) -> Tuple[Tuple[int, ...], int]:
    """The message indexes at the start of a payload (after the schema id) and where the
    Protobuf binary starts; ValueError saying what is wrong."""
    count, position = _index_varint(body, 0)
    if count == 0:
        return (0,), position
    if count < 0 or count > len(body):
        raise ValueError(f"bad message indexes: a count of {count}")
    indexes = []
    for _ in range(count):
        index, position = _index_varint(body, position)
        indexes.append(index)
    return tuple(indexes), position


class ProtobufReader(FormatReader):
    """The reader message (of a subject's latest schema when the read was planned), its
    Arrow type, and the decoding of payloads written with any registered schema. Pickles
    as plain data (the registered schemas); descriptors are loaded again where it runs."""

    def __init__(self, schema, registry, message: Optional[str] = None):
        self.schema = schema
        self.references = registry.named_references(schema) \
            if registry is not None and schema.references else {}
        self.message = message
        self._setup()

    def _setup(self):
        self.loaded = LoadedSchema(self.schema, self.references)
        where = self.loaded.where
        if self.message:
            descriptor = self.loaded.by_name(self.message)
            if descriptor is None:
                names = ", ".join(self.loaded.message_names()) or "none"
                raise ProtobufSchemaError(f"{where} has no message {self.message!r} (its "
                                          f"top-level messages: {names})")
        else:
            if not self.loaded.file.message_type:
                raise ProtobufSchemaError(f"{where} declares no message")
            descriptor = self.loaded.by_indexes((0,))
        self.descriptor = descriptor
        arrow = message_type(descriptor, where)
        if arrow is None:
            raise ProtobufSchemaError(f"{where}: message {descriptor.full_name} has no field, "
                                      f"and a Spark struct needs one")
        self.arrow_type = arrow
        self._writers: Dict[int, LoadedSchema] = {}
        self._converters: Dict[Tuple[int, Tuple[int, ...]], Any] = {}
        # by writer schema id: converters are kept by message names, which each
        # writer's descriptors reuse
        self._builders: Dict[int, _Converters] = {}
        # by writer schema id: the compiled program (protobuf_program.py), None when the
        # pair is out of its scope
        self._programs: Dict[int, Any] = {}

    def __getstate__(self):
        return {"schema": self.schema, "references": self.references,
                "message": self.message}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._setup()

    def _writer_schema(self, writer, registry) -> LoadedSchema:
        if writer.id == self.schema.id:
            return self.loaded
        if writer.id not in self._writers:
            try:
                self._writers[writer.id] = load_registered(writer, registry)
            except (ProtobufSchemaError, RecordDecodeError) as failure:
                raise IncompatibleSchemaError(str(failure)) from None
        return self._writers[writer.id]

    def _converter(self, writer_id: int, loaded: LoadedSchema, indexes):
        """(message class, converter) of a writer message, or raises ValueError."""
        key = (writer_id, indexes)
        if key not in self._converters:
            from google.protobuf import message_factory

            try:
                descriptor = loaded.by_indexes(indexes)
            except ValueError as bad:
                self._converters[key] = str(bad)
            else:
                if descriptor.full_name != self.descriptor.full_name:
                    self._converters[key] = (
                        f"the value is message {descriptor.full_name} (message indexes "
                        f"{list(indexes)}), and the column holds message "
                        f"{self.descriptor.full_name}")
                else:
                    try:
                        builder = self._builders.setdefault(writer_id, _Converters())
                        convert = builder.message(descriptor, self.descriptor)
                    except _Incompatible as incompatible:
                        self._converters[key] = (f"incompatible writer message "
                                                 f"{descriptor.full_name}: {incompatible}")
                    else:
                        self._converters[key] = (
                            message_factory.GetMessageClass(descriptor), convert)
        found = self._converters[key]
        if isinstance(found, str):
            raise ValueError(found)
        return found

    def _program(self, writer_id: int, loaded: LoadedSchema):
        """The compiled program of a writer schema's message of the reader's name, None when
        there is none (the pair out of its scope, or the extension not built)."""
        if writer_id not in self._programs:
            from .protobuf_program import compile_program

            program = None
            indexes = loaded.indexes_of(self.descriptor.full_name)
            if indexes is not None:
                try:  # the pure path's resolution first: its refusal is every row's error
                    self._converter(writer_id, loaded, indexes)
                except ValueError:
                    pass
                else:
                    program = compile_program(loaded.by_indexes(indexes), self.descriptor,
                                              indexes, self.arrow_type)
            self._programs[writer_id] = program
        return self._programs[writer_id]

    def decode(self, writer, registry, payloads: Sequence[bytes]):
        """Python values, row by row through the protobuf runtime (the pure twin)."""
        return decoded_rows(self._decode_one(writer, registry), payloads)

    def decode_columns(self, writer, registry, payloads: Sequence[bytes],
                       compiled: Optional[bool] = None):
        """A read's column: a pa.Array from the compiled decoder when the writer's message
        is in its scope (protobuf_program.py), else decode's values. `compiled` (default
        USE_COMPILED): whether the compiled decoder may be used."""
        decode_one = self._decode_one(writer, registry)
        if USE_COMPILED if compiled is None else compiled:
            program = self._program(writer.id, self._writer_schema(writer, registry))
            if program is not None:
                decoded = program.decode(payloads, lambda payload: decoded_rows(
                    decode_one, [payload])[1][0])
                if decoded is not None:
                    return decoded
        return decoded_rows(decode_one, payloads)

    def _decode_one(self, writer, registry):
        """The pure path's decoding of one payload of `writer` (ValueError: why not)."""
        loaded = self._writer_schema(writer, registry)

        def decode_one(payload):
            indexes, start = message_indexes(payload)
            message_class, convert = self._converter(writer.id, loaded, indexes)
            try:
                message = message_class.FromString(bytes(payload[start:]))
            except Exception as failure:  # the runtime's DecodeError
                raise ValueError(f"invalid Protobuf binary for message "
                                 f"{self.descriptor.full_name}: {failure}") from None
            return convert(message)

        return decode_one


# Whether ProtobufReader.decode may use the compiled decoder (protobuf_program.py); tests
# set it (or pass `compiled`) to force either twin.
USE_COMPILED = True


class ProtobufFormat(ValueFormat):
    name = "protobuf"
    schema_type = "PROTOBUF"
    extra = "protobuf"
    selects_message = True

    def require(self, option: str) -> None:
        try:
            import google.protobuf  # noqa: F401
            from google.protobuf import message_factory
        except ImportError:
            raise InvalidOptionError(
                f"option {option!r}: decoding Protobuf needs the protobuf package, which is "
                f"not installed: pip install \"segmentlog[protobuf]\"", option) from None
        if not hasattr(message_factory, "GetMessageClass"):
            raise InvalidOptionError(
                f"option {option!r}: decoding Protobuf needs a newer protobuf package (one "
                f"with message_factory.GetMessageClass): pip install -U "
                f"'segmentlog[protobuf]'", option)

    def reader(self, schema, registry, message: Optional[str] = None) -> ProtobufReader:
        """`message`: the reader message's name (full, or without the package); None: the
        first message of the file, as Confluent's deserializers take by default."""
        return ProtobufReader(schema, registry, message)


PROTOBUF = ProtobufFormat()
