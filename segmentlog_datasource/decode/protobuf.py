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

Values written with older schemas are decoded with their own message and taken into the
reader's by field number, by Protobuf's resolution (schemas/protobuf/resolution.py: which
writer fields read as the reader's, and what an absent field reads as); a writer message
it does not read makes that schema's values incompatible. A value whose message indexes
name another message than the reader's is an error naming both.

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
from ..schemas.protobuf.descriptors import LoadedSchema, load_registered
from ..schemas.protobuf.mapping import (
    COLUMN_RANGES, DURATION_TYPE, INT_COLUMNS, TIMESTAMP_TYPE, UNSIGNED_64, enum_names,
    is_timestamp, message_type,
)
from ..schemas.protobuf.resolution import (
    BOOL, EMPTY, ENUM, FLOAT, INT, MAP, MESSAGE, MICROS, NULL, REPEATED, SINGULAR_TO_REPEATED,
    TEXT, WRAPPED, Incompatible, LeafRead, ValueRead, absent_read, field_read, leaf_read,
    matched_fields, null_when_absent,
)
from ..schemas.protobuf.text import INT_RANGES, ProtobufSchemaError
from .value_formats import FormatReader, IncompatibleSchemaError, ValueFormat, decoded_rows

# Writer message -> reader column -----------------------------------------------------


class _Misfit(ValueError):
    """A value that does not fit its column (one row's error)."""


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


class _Converters:
    """Builds functions turning messages of a writer's descriptors into values of the
    reader's column, by schemas/protobuf/resolution.py's rules (Incompatible for a writer
    message they do not read)."""

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
        for field, written in matched_fields(writer, reader):
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
        read = absent_read(field)
        if read == EMPTY:
            return lambda value, path: []
        if read == NULL:
            return lambda value, path: None
        constant = _Converters.leaf(leaf_read(field, field))(field.default_value, field.name)
        return lambda value, path: constant

    def field(self, writer, reader) -> Callable:
        read = field_read(writer, reader)
        name = reader.name  # the column's field; the writer's may be named otherwise
        wname = writer.name
        if read.shape == MAP:
            key, item = self.value(read.key), self.value(read.value)

            def get_map(value, path):
                inner = f"{path}.{name}" if path else name
                entries = getattr(value, wname)
                return [(key(k, inner), item(entries[k], f"{inner}[{k!r}]"))
                        for k in sorted(entries, key=_map_order)]

            return get_map
        element = self.value(read.element)
        if read.shape == REPEATED:
            return lambda value, path: [
                element(item, f"{path}.{name}" if path else name)
                for item in getattr(value, wname)]
        has = self.presence(writer)
        if read.shape == SINGULAR_TO_REPEATED:
            return lambda value, path: [element(getattr(value, wname),
                                                f"{path}.{name}" if path else name)] \
                if has(value) else []

        def get_field(value, path):
            if not has(value):
                return None
            return element(getattr(value, wname), f"{path}.{name}" if path else name)

        return get_field

    @staticmethod
    def presence(field) -> Callable:
        """Whether a message holds the field (one without presence always does: its
        default)."""
        if null_when_absent(field):
            name = field.name
            return lambda value: value.HasField(name)
        return lambda value: True

    def value(self, read: ValueRead) -> Callable:
        """One value (of a field, a repeated field's element, a map's key or value) as
        the column's."""
        if read.how == MICROS:
            column = TIMESTAMP_TYPE if is_timestamp(read.reader.message_type) \
                else DURATION_TYPE
            rname = read.reader.name
            return lambda value, path: _micros(value, path or rname, column)
        if read.how == MESSAGE:
            return self.message(read.writer.message_type, read.reader.message_type)
        convert = self.leaf(read.leaf)
        if read.how == WRAPPED:
            return lambda value, path: convert(value.value, path)
        return convert

    @staticmethod
    def leaf(read: LeafRead) -> Callable:
        """A scalar or enum as the column's."""
        reader = read.reader
        if read.how == ENUM:
            names = enum_names(reader.enum_type)
            enum_name = reader.enum_type.name
            return lambda value, path: names.get(value) or \
                f"UNKNOWN_ENUM_VALUE_{enum_name}_{value}"
        if read.how == INT:
            column = INT_COLUMNS[reader.type]
            low, high = COLUMN_RANGES[column]
            unsigned = column == UNSIGNED_64
            wlow, whigh = INT_RANGES[read.writer.type]
            checked = wlow < low or whigh > high

            def convert_int(value, path):
                value = int(value)
                if checked and not low <= value <= high:
                    raise _Misfit(f"field {path or reader.name}: {value} is out of the range "
                                  f"of the column's {column}")
                return Decimal(value) if unsigned else value

            return convert_int
        if read.how == FLOAT:
            return lambda value, path: float(value)
        if read.how == BOOL:
            return lambda value, path: bool(value) if not isinstance(value, str) \
                else value == "true"
        if read.how == TEXT:  # a string, or bytes (UTF-8 checked)
            return lambda value, path: _text(value, path or reader.name)
        # BYTES: bytes, or a string's UTF-8
        return lambda value, path: value.encode("utf-8") if isinstance(value, str) \
            else bytes(value)


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
                    except Incompatible as incompatible:
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
        is in its scope (protobuf_program.py; its errors are None when every payload
        decoded), else decode's values. `compiled` (default USE_COMPILED): whether the
        compiled decoder may be used."""
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
