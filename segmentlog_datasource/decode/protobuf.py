"""valueFormat=protobuf: Schema Registry framed Protobuf values as typed Arrow columns.

The wire format is Confluent's KafkaProtobufSerializer's: a zero magic byte, the schema id
(4 bytes, big-endian), the message indexes, then the Protobuf binary. The message indexes
say which message of the registered .proto file the value is: a zig-zag varint count, then
that many zig-zag varint indexes (the first into the file's top-level messages, each next
one into the nested messages of the one before); a lone 0 (a count of zero) means [0], the
file's first message.

Schemas are registered as .proto text, importing other subjects by reference name. The
protobuf runtime parses only compiled descriptors, so this module parses the .proto subset
registry schemas use (proto2/proto3; package, import, message with nested messages, enums,
scalar/repeated/optional/required fields, map<K, V>, oneof; options, reserved ranges,
extensions, services and comments are read past) into FileDescriptorProtos, loads them in a
DescriptorPool (references first; google/protobuf/*.proto from the runtime's own well-known
types) and parses payloads with the runtime's message classes.

The column's type is the reader message's (by default the first message of the subject's
latest schema), field by field as spark-protobuf's SchemaConverters maps them: int32, sint32,
sfixed32 -> int; int64, sint64, sfixed64 -> bigint; uint32, fixed32 -> bigint and uint64,
fixed64 -> decimal(20,0) (spark-protobuf's upcast.unsigned.ints: no value wraps negative);
float, double, bool, string; bytes -> binary; enum -> string (the value's name); message ->
struct (a message with no fields is left out, as Spark drops it); repeated -> array; map ->
map; oneof -> its fields, each nullable; google.protobuf.Timestamp -> timestamp, Duration ->
interval day to second; wrappers (Int32Value, StringValue, ...) -> their nullable scalar
(spark-protobuf's unwrap.primitive.wrapper.types). A recursive message fails the read naming
the subject, version and field.

Absent fields: a field without presence (a proto3 scalar without `optional`) reads as its
default (0, "", false, the first enum value), as Protobuf's own readers give it and
spark-protobuf's emit.default.values renders it; a field with presence (messages, wrappers,
oneof members, `optional` and proto2 fields without an explicit default) reads as null;
repeated and map fields as empty.

Values written with older schemas are decoded with their own message and taken into the
reader's by field name: fields the reader lacks are dropped, fields the writer lacks read as
absent ones do, integers widen (and narrow where the value fits), integers and floats widen
to floats and doubles, strings and bytes read as each other (UTF-8 checked), a singular
field reads into a repeated one. Other changes of a field's type make the writer's messages
incompatible. A value whose message indexes name another message than the reader's is an
error naming both.
"""
import re
from decimal import Decimal
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa

from ..errors import InvalidOptionError, RecordDecodeError, UnsupportedFormatError
from .value_formats import FormatReader, IncompatibleSchemaError, ValueFormat, decoded_rows

TIMESTAMP = pa.timestamp("us", tz="UTC")  # Spark's TimestampType
DURATION = pa.duration("us")  # Spark's DayTimeIntervalType
UNSIGNED_64 = pa.decimal128(20, 0)

# FieldDescriptorProto.Type numbers and labels
_DOUBLE, _FLOAT, _INT64, _UINT64, _INT32, _FIXED64, _FIXED32, _BOOL, _STRING, _GROUP, \
    _MESSAGE, _BYTES, _UINT32, _ENUM, _SFIXED32, _SFIXED64, _SINT32, _SINT64 = range(1, 19)
_OPTIONAL, _REQUIRED, _REPEATED = 1, 2, 3
_SCALARS = {
    "double": _DOUBLE, "float": _FLOAT, "int64": _INT64, "uint64": _UINT64, "int32": _INT32,
    "fixed64": _FIXED64, "fixed32": _FIXED32, "bool": _BOOL, "string": _STRING,
    "bytes": _BYTES, "uint32": _UINT32, "sfixed32": _SFIXED32, "sfixed64": _SFIXED64,
    "sint32": _SINT32, "sint64": _SINT64,
}
_TYPE_NAMES = {number: name for name, number in _SCALARS.items()}
_MAP_KEYS = {"int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
             "sfixed32", "sfixed64", "bool", "string"}
# Integer types: (low, high) of their values
_INT_RANGES = {
    _INT32: (-2 ** 31, 2 ** 31 - 1), _SINT32: (-2 ** 31, 2 ** 31 - 1),
    _SFIXED32: (-2 ** 31, 2 ** 31 - 1), _INT64: (-2 ** 63, 2 ** 63 - 1),
    _SINT64: (-2 ** 63, 2 ** 63 - 1), _SFIXED64: (-2 ** 63, 2 ** 63 - 1),
    _UINT32: (0, 2 ** 32 - 1), _FIXED32: (0, 2 ** 32 - 1),
    _UINT64: (0, 2 ** 64 - 1), _FIXED64: (0, 2 ** 64 - 1),
}
_ARROW_INT = {_INT32: pa.int32(), _SINT32: pa.int32(), _SFIXED32: pa.int32(),
              _INT64: pa.int64(), _SINT64: pa.int64(), _SFIXED64: pa.int64(),
              _UINT32: pa.int64(), _FIXED32: pa.int64(),
              _UINT64: UNSIGNED_64, _FIXED64: UNSIGNED_64}
_COLUMN_RANGES = {pa.int32(): (-2 ** 31, 2 ** 31 - 1), pa.int64(): (-2 ** 63, 2 ** 63 - 1),
                  UNSIGNED_64: (0, 2 ** 64 - 1)}
_WRAPPERS = {
    "google.protobuf.DoubleValue": _DOUBLE, "google.protobuf.FloatValue": _FLOAT,
    "google.protobuf.Int64Value": _INT64, "google.protobuf.UInt64Value": _UINT64,
    "google.protobuf.Int32Value": _INT32, "google.protobuf.UInt32Value": _UINT32,
    "google.protobuf.BoolValue": _BOOL, "google.protobuf.StringValue": _STRING,
    "google.protobuf.BytesValue": _BYTES,
}
# The runtime modules holding the well-known .proto files a schema may import.
_WELL_KNOWN = {
    "google/protobuf/any.proto": "any_pb2", "google/protobuf/api.proto": "api_pb2",
    "google/protobuf/descriptor.proto": "descriptor_pb2",
    "google/protobuf/duration.proto": "duration_pb2", "google/protobuf/empty.proto": "empty_pb2",
    "google/protobuf/field_mask.proto": "field_mask_pb2",
    "google/protobuf/source_context.proto": "source_context_pb2",
    "google/protobuf/struct.proto": "struct_pb2",
    "google/protobuf/timestamp.proto": "timestamp_pb2", "google/protobuf/type.proto": "type_pb2",
    "google/protobuf/wrappers.proto": "wrappers_pb2",
}


class ProtobufSchemaError(UnsupportedFormatError):
    """A registered .proto schema that cannot be parsed, loaded or given a Spark type."""


def describe(schema) -> str:
    return f"subject {schema.subject!r} version {schema.version} (schema id {schema.id})"


# The .proto parser -------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>(?:0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)[fF]?)
  | (?P<name>\.?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<symbol>[{}\[\]()<>;,=:\-+./])
""", re.VERBOSE | re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
            "\\": "\\", "'": "'", '"': '"', "?": "?"}


class _Token:
    __slots__ = ("kind", "text", "line", "column")

    def __init__(self, kind, text, line, column):
        self.kind, self.text, self.line, self.column = kind, text, line, column


def _tokens(text: str, fail) -> List[_Token]:
    tokens, position, line, line_start = [], 0, 1, 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            if text.startswith("/*", position):
                fail(line, position - line_start + 1, "a comment that is never closed")
            fail(line, position - line_start + 1, f"unexpected character {text[position]!r}")
        kind, value = match.lastgroup, match.group()
        if kind not in ("space", "comment"):
            tokens.append(_Token(kind, value, line, position - line_start + 1))
        newlines = value.count("\n") if kind in ("space", "comment") else 0
        if newlines:
            line += newlines
            line_start = match.start() + match.group().rindex("\n") + 1
        position = match.end()
    tokens.append(_Token("end", "", line, position - line_start + 1))
    return tokens


def _unquote(literal: str) -> bytes:
    """A .proto string literal's bytes (C escapes: octal, hex, \\u)."""
    body, out, i = literal[1:-1], bytearray(), 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out += char.encode("utf-8")
            i += 1
            continue
        code = body[i + 1]
        if code in _ESCAPES:
            out += _ESCAPES[code].encode()
            i += 2
        elif code in "xX" and re.match(r"[0-9a-fA-F]", body[i + 2:i + 3]):
            digits = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:]).group()
            out.append(int(digits, 16))
            i += 2 + len(digits)
        elif code in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1:]).group()
            out.append(int(digits, 8) & 0xFF)
            i += 1 + len(digits)
        elif code in "uU":
            width = 4 if code == "u" else 8
            out += chr(int(body[i + 2:i + 2 + width], 16)).encode("utf-8")
            i += 2 + width
        else:
            out += code.encode()
            i += 2
    return bytes(out)


def _camel(name: str) -> str:
    """protoc's name of a map field's entry message: the field name in CamelCase."""
    parts = name.split("_")
    return "".join(part[:1].upper() + part[1:] for part in parts if part)


class _ProtoParser:
    """Parses .proto text into a FileDescriptorProto. Type names are left as written:
    the DescriptorPool resolves them in scope, as protoc does."""

    def __init__(self, text: str, file_name: str, where: str):
        from google.protobuf import descriptor_pb2

        self.pb2 = descriptor_pb2
        self.where = where
        self.tokens = _tokens(text, self.fail_at)
        self.index = 0
        self.file = descriptor_pb2.FileDescriptorProto(name=file_name)
        self.syntax = "proto2"

    # -- tokens
    def fail_at(self, line, column, reason):
        raise ProtobufSchemaError(f"{self.where}: the .proto text at line {line} column "
                                  f"{column}: {reason}")

    def fail(self, reason, token=None):
        token = token or self.peek()
        self.fail_at(token.line, token.column, reason)

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def next(self) -> _Token:
        token = self.peek()
        self.index += 1
        return token

    def at(self, text: str) -> bool:
        return self.peek().text == text and self.peek().kind in ("symbol", "name")

    def take(self, text: str) -> bool:
        if self.at(text):
            self.index += 1
            return True
        return False

    def expect(self, text: str) -> _Token:
        if not self.at(text):
            found = self.peek().text or "the end of the text"
            self.fail(f"expected {text!r}, found {found!r}")
        return self.next()

    def name(self, what: str) -> str:
        token = self.peek()
        if token.kind != "name":
            self.fail(f"expected {what}, found {token.text or 'the end of the text'!r}")
        self.index += 1
        return token.text

    def string(self) -> bytes:
        token = self.peek()
        if token.kind != "string":
            self.fail(f"expected a string, found {token.text or 'the end of the text'!r}")
        value = b""
        while self.peek().kind == "string":  # adjacent literals concatenate
            value += _unquote(self.next().text)
        return value

    def integer(self) -> int:
        negative = self.take("-")
        token = self.next()
        text = token.text
        try:
            value = int(text, 16) if text.lower().startswith("0x") else \
                int(text, 8) if len(text) > 1 and text.startswith("0") else int(text)
        except ValueError:
            self.fail(f"expected an integer, found {text!r}", token)
        return -value if negative else value

    def skip_statement(self):
        """Reads past a statement to its ';', or past a block's '{ ... }'."""
        depth = 0
        while True:
            token = self.next()
            if token.kind == "end":
                self.fail("the text ends inside a statement", token)
            if token.kind == "symbol" and token.text in "{[(":
                depth += 1
            elif token.kind == "symbol" and token.text in "}])":
                depth -= 1
                if depth == 0 and token.text == "}":
                    self.take(";")
                    return
            elif token.kind == "symbol" and token.text == ";" and depth == 0:
                return

    def constant(self) -> str:
        """An option's value as text: a string's text, else the token(s) as written."""
        token = self.peek()
        if token.kind == "string":
            return self.string().decode("utf-8", "backslashreplace")
        if token.text == "{":
            self.skip_statement()  # an aggregate value, text format: not needed here
            return ""
        sign = "-" if self.take("-") else ("" if not self.take("+") else "")
        return sign + self.next().text

    # -- the file
    def parse(self):
        while self.peek().kind != "end":
            if self.take(";"):
                continue
            keyword = self.peek().text
            if keyword == "syntax":
                self.next()
                self.expect("=")
                self.syntax = self.string().decode()
                if self.syntax not in ("proto2", "proto3"):
                    self.fail(f"syntax {self.syntax!r}: proto2 and proto3 are read")
                self.expect(";")
                if self.syntax == "proto3":
                    self.file.syntax = "proto3"
            elif keyword == "edition":
                self.fail("Protobuf editions are not read (proto2 and proto3 are)")
            elif keyword == "package":
                self.next()
                self.file.package = self.name("a package name").lstrip(".")
                self.expect(";")
            elif keyword == "import":
                self.next()
                public = self.take("public")
                self.take("weak")
                dependency = self.string().decode()
                if public:
                    self.file.public_dependency.append(len(self.file.dependency))
                self.file.dependency.append(dependency)
                self.expect(";")
            elif keyword == "option":
                self.skip_statement()
            elif keyword == "message":
                self.next()
                self.message(self.file.message_type.add())
            elif keyword == "enum":
                self.next()
                self.enum(self.file.enum_type.add())
            elif keyword in ("service", "extend"):
                self.skip_statement()
            else:
                self.fail(f"expected syntax, package, import, option, message, enum, service "
                          f"or extend, found {keyword or 'the end of the text'!r}")
        return self.file

    def message(self, message):
        message.name = self.name("a message name")
        self.expect("{")
        while not self.take("}"):
            if self.peek().kind == "end":
                self.fail(f"message {message.name} is never closed ('}}' missing)")
            if self.take(";"):
                continue
            keyword = self.peek().text
            if keyword == "message" and self.peek(1).kind == "name":
                self.next()
                self.message(message.nested_type.add())
            elif keyword == "enum" and self.peek(1).kind == "name":
                self.next()
                self.enum(message.enum_type.add())
            elif keyword in ("option", "reserved", "extensions") \
                    and self.peek(1).text != "=":
                self.skip_statement()
            elif keyword == "extend" and self.peek(1).kind == "name":
                self.skip_statement()
            elif keyword == "oneof" and self.peek(1).kind == "name":
                self.next()
                self.oneof(message)
            elif keyword == "map" and self.peek(1).text == "<":
                self.map_field(message)
            else:
                self.field(message, message.field.add())
        # proto3 optional fields' synthetic oneofs come after the declared ones
        for field in message.field:
            if field.proto3_optional:
                field.oneof_index = len(message.oneof_decl)
                message.oneof_decl.add(name=self.synthetic_oneof(message, field.name))

    @staticmethod
    def synthetic_oneof(message, field_name):
        taken = {o.name for o in message.oneof_decl} | {f.name for f in message.field}
        name = "_" + field_name
        while name in taken:
            name = "X" + name
        return name

    def field(self, message, field, in_oneof: bool = False):
        label = None
        if self.peek().text in ("optional", "required", "repeated") \
                and self.peek(1).kind == "name" and self.peek(2).text != "=":
            label = self.next().text
            if in_oneof:
                self.fail(f"a oneof's fields take no label ({label})")
        type_token = self.peek()
        type_name = self.name("a field type")
        if type_name == "group":
            self.fail("proto2 groups are not read", type_token)
        field.name = self.name("a field name")
        self.expect("=")
        field.number = self.integer()
        if type_name in _SCALARS:
            field.type = _SCALARS[type_name]
        else:
            field.type_name = type_name
        field.label = _REPEATED if label == "repeated" else \
            _REQUIRED if label == "required" else _OPTIONAL
        if label == "optional" and self.syntax == "proto3":
            field.proto3_optional = True
        self.field_options(field)
        self.expect(";")

    def field_options(self, field):
        if not self.take("["):
            return
        while True:
            if self.take("("):  # a custom option: (name).sub = value
                depth = 1
                while depth:
                    token = self.next()
                    depth += {"(": 1, ")": -1}.get(token.text, 0) if token.kind == "symbol" \
                        else 0
                    if token.kind == "end":
                        self.fail("the text ends inside field options", token)
                key = None
                while self.peek().kind == "name" and self.peek().text.startswith("."):
                    self.next()
            else:
                key = self.name("an option name")
            self.expect("=")
            token = self.peek()
            value = self.constant()
            if key == "default":
                field.default_value = self.default_text(field, value, token)
            if self.take("]"):
                return
            self.expect(",")

    def default_text(self, field, value: str, token: _Token) -> str:
        """A default as FieldDescriptorProto keeps it (integers in decimal, bytes
        C-escaped, strings as is)."""
        if field.type in _INT_RANGES:
            negative = value.startswith("-")
            digits = value.lstrip("-")
            try:
                number = int(digits, 16) if digits.lower().startswith("0x") else \
                    int(digits, 8) if len(digits) > 1 and digits.startswith("0") else \
                    int(digits)
            except ValueError:
                self.fail(f"default {value!r} is not an integer", token)
            return str(-number if negative else number)
        if field.type == _BYTES:
            from google.protobuf import text_encoding

            return text_encoding.CEscape(value.encode("utf-8"), as_utf8=False)
        return value

    def map_field(self, message):
        start = self.next()
        self.expect("<")
        key_type = self.name("a map key type")
        if key_type not in _MAP_KEYS:
            self.fail(f"map keys are integral types, bool or string, not {key_type}", start)
        self.expect(",")
        value_type = self.name("a map value type")
        self.expect(">")
        field = message.field.add()
        field.name = self.name("a field name")
        self.expect("=")
        field.number = self.integer()
        field.label = _REPEATED
        entry_name = _camel(field.name) + "Entry"
        field.type_name = entry_name
        entry = message.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, label=_OPTIONAL, type=_SCALARS[key_type])
        value = entry.field.add(name="value", number=2, label=_OPTIONAL)
        if value_type in _SCALARS:
            value.type = _SCALARS[value_type]
        else:
            # resolved from the entry's scope: one level deeper than the field's
            # resolved from the entry's scope, one deeper than the field's: the same type
            value.type_name = value_type
        self.field_options(field)
        self.expect(";")

    def oneof(self, message):
        index = len(message.oneof_decl)
        message.oneof_decl.add(name=self.name("a oneof name"))
        self.expect("{")
        while not self.take("}"):
            if self.peek().kind == "end":
                self.fail("a oneof is never closed ('}' missing)")
            if self.take(";"):
                continue
            if self.at("option"):
                self.skip_statement()
                continue
            field = message.field.add()
            self.field(message, field, in_oneof=True)
            field.oneof_index = index

    def enum(self, enum):
        enum.name = self.name("an enum name")
        self.expect("{")
        while not self.take("}"):
            if self.peek().kind == "end":
                self.fail(f"enum {enum.name} is never closed ('}}' missing)")
            if self.take(";"):
                continue
            if self.at("option") and self.peek(1).text != "=":
                self.next()
                name = self.name("an option name")
                self.expect("=")
                value = self.constant()
                if name == "allow_alias":
                    enum.options.allow_alias = value == "true"
                self.expect(";")
                continue
            if self.at("reserved") and self.peek(1).text != "=":
                self.skip_statement()
                continue
            value = enum.value.add(name=self.name("an enum value name"))
            self.expect("=")
            value.number = self.integer()
            if self.at("["):
                self.skip_statement()  # its options, and the ';'
            else:
                self.expect(";")


def parse_proto(text: str, file_name: str = "schema.proto", where: str = "a schema"):
    """The FileDescriptorProto of .proto source text; ProtobufSchemaError naming `where`,
    the line and the column of what cannot be read."""
    return _ProtoParser(text, file_name, where).parse()


# Loading a registered schema ----------------------------------------------------------


def _runtime_file(name: str):
    """The FileDescriptorProto of a well-known .proto the protobuf runtime ships."""
    import importlib

    from google.protobuf import descriptor_pb2

    module = importlib.import_module("google.protobuf." + _WELL_KNOWN[name])
    return descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)


class LoadedSchema:
    """A registered Protobuf schema loaded in its own DescriptorPool, with the files it
    references (by reference name) and the well-known ones it imports."""

    def __init__(self, registered, references: Dict[str, Any]):
        from google.protobuf import descriptor_pool

        self.registered = registered
        self.where = describe(registered)
        self.pool = descriptor_pool.DescriptorPool()
        self._files: Dict[str, Any] = {}  # file name -> FileDescriptorProto, as added
        self._references = references
        self._pending: List[str] = []
        self.file = self._load(self._own_name(), registered.schema, self.where)

    def _own_name(self) -> str:
        name = f"{self.registered.subject}.proto"
        return name if name not in self._references else f"{name}.{self.registered.id}"

    def _load(self, name: str, text: str, where: str):
        if name in self._files:
            return self._files[name]
        if name in self._pending:
            raise ProtobufSchemaError(f"{self.where}: {name!r} imports itself (through "
                                      f"{' -> '.join(self._pending)})")
        self._pending.append(name)
        proto = parse_proto(text, name, where)
        kept = []
        for dependency in proto.dependency:
            if dependency in self._references:
                schema = self._references[dependency]
                self._load(dependency, schema.schema, f"{where}: referenced schema "
                                                      f"{describe(schema)}")
            elif dependency in _WELL_KNOWN:
                self._add_runtime(dependency)
            else:
                continue  # not registered: its types fail to resolve, naming it below
            kept.append(dependency)
        missing = [d for d in proto.dependency if d not in kept]
        if missing:
            del proto.dependency[:]
            proto.dependency.extend(kept)
            del proto.public_dependency[:]
        try:
            self.pool.Add(proto)
        except Exception as failure:  # the runtime's TypeError, from C or Python
            unresolved = f" (imports {', '.join(map(repr, missing))} are not among its " \
                         f"references)" if missing else ""
            raise ProtobufSchemaError(f"{where}: the .proto file does not load{unresolved}: "
                                      f"{failure}") from None
        self._pending.pop()
        self._files[name] = proto
        return proto

    def _add_runtime(self, name: str):
        if name in self._files:
            return
        proto = _runtime_file(name)
        for dependency in proto.dependency:
            self._add_runtime(dependency)
        self.pool.Add(proto)
        self._files[name] = proto

    def message_names(self) -> List[str]:
        """The full names of the file's top-level messages, in order."""
        prefix = f"{self.file.package}." if self.file.package else ""
        return [prefix + message.name for message in self.file.message_type]

    def by_indexes(self, indexes: Sequence[int]):
        """The message descriptor the message indexes name; ValueError saying why none."""
        messages, path = list(self.file.message_type), self.file.package
        for depth, index in enumerate(indexes):
            if not 0 <= index < len(messages):
                where = f"message {path}" if depth else "the file"
                raise ValueError(f"bad message indexes {list(indexes)}: {where} has "
                                 f"{len(messages)} message(s) at index {depth}, and "
                                 f"{index} is not one")
            path = f"{path}.{messages[index].name}" if path else messages[index].name
            # the messages the text declares: a map field's entry is not one (Confluent
            # counts the parsed source's nested messages)
            messages = [m for m in messages[index].nested_type if not m.options.map_entry]
        return self.pool.FindMessageTypeByName(path)

    def by_name(self, name: str):
        """The message named `name`, fully or without the file's package."""
        candidates = [name.lstrip(".")]
        if self.file.package:
            candidates.append(f"{self.file.package}.{name.lstrip('.')}")
        for candidate in candidates:
            try:
                return self.pool.FindMessageTypeByName(candidate)
            except KeyError:
                continue
        return None


def load_registered(registered, registry) -> LoadedSchema:
    references = registry.named_references(registered) \
        if registry is not None and registered.references else {}
    return LoadedSchema(registered, references)


# Arrow types of messages ------------------------------------------------------------


def _is_timestamp(message) -> bool:
    return _seconds_nanos(message, "Timestamp")


def _is_duration(message) -> bool:
    return _seconds_nanos(message, "Duration")


def _seconds_nanos(message, name) -> bool:
    """spark-protobuf's test: a message named so, whose fields are seconds and nanos."""
    return message.name == name and [f.name for f in message.fields] == ["seconds", "nanos"]


def _scalar_arrow(kind: int) -> pa.DataType:
    if kind in _ARROW_INT:
        return _ARROW_INT[kind]
    return {_DOUBLE: pa.float64(), _FLOAT: pa.float32(), _BOOL: pa.bool_(),
            _STRING: pa.string(), _BYTES: pa.binary(), _ENUM: pa.string()}[kind]


def _is_map(field) -> bool:
    return field.type == _MESSAGE and field.message_type.GetOptions().map_entry


def _is_repeated(field) -> bool:
    try:
        return field.is_repeated  # protobuf 5.28+; `label` is gone from 7
    except AttributeError:
        return field.label == _REPEATED


def _is_required(field) -> bool:
    try:
        return field.is_required
    except AttributeError:
        return field.label == _REQUIRED


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
            if _is_map(field):
                fields.append(pa.field(field.name, arrow))
            elif _is_repeated(field):
                fields.append(pa.field(field.name, pa.list_(pa.field("element", arrow,
                                                                     nullable=False))))
            else:
                fields.append(pa.field(field.name, arrow, nullable=not _is_required(field)))
        return pa.struct(fields) if fields else None

    def field(self, field, active) -> Optional[pa.DataType]:
        if field.type == _GROUP:
            raise ProtobufSchemaError(f"{self.where}: field {field.full_name} is a proto2 "
                                      f"group, which is not read")
        if field.type != _MESSAGE:
            return _scalar_arrow(field.type)
        message = field.message_type
        if _is_map(field):
            key = self.field(message.fields_by_name["key"], active)
            value = self.field(message.fields_by_name["value"], active)
            if value is None:
                return None
            value_field = message.fields_by_name["value"]
            if _is_repeated(value_field):
                value = pa.list_(pa.field("element", value, nullable=False))
            return pa.map_(key, pa.field("value", value, nullable=False))
        if _is_timestamp(message):
            return TIMESTAMP
        if _is_duration(message):
            return DURATION
        if message.full_name in _WRAPPERS:
            return _scalar_arrow(_WRAPPERS[message.full_name])
        if message.full_name in active:
            raise ProtobufSchemaError(
                f"{self.where}: field {field.full_name} is a {message.full_name} inside "
                f"{message.full_name}: a recursive message has no Spark type")
        return self.message(message, active)


# Writer message -> reader column -----------------------------------------------------


class _Misfit(ValueError):
    """A value that does not fit its column (one row's error)."""


class _Incompatible(Exception):
    """A writer field whose type cannot be read as the reader's."""


def _kind_name(field) -> str:
    if field.type == _MESSAGE:
        if _is_map(field):
            return "a map"
        return f"message {field.message_type.full_name}"
    if field.type == _ENUM:
        return f"enum {field.enum_type.full_name}"
    return _TYPE_NAMES.get(field.type, str(field.type))


def _micros(value) -> int:
    return value.seconds * 1_000_000 + value.nanos // 1000


def _enum_names(enum) -> Dict[int, str]:
    names: Dict[int, str] = {}
    for value in enum.values:
        names.setdefault(value.number, value.name)  # an alias: the first name
    return names


class _Converters:
    """Builds functions turning messages of a writer's descriptors into values of the
    reader's column, by field name."""

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
        for field in reader.fields:
            if _TypeMapper("").field(field, ()) is None:
                continue  # dropped from the column: a message without fields
            written = writer.fields_by_name.get(field.name)
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
        if _is_repeated(field):
            return lambda value, path: []
        if field.has_presence and not field.has_default_value:
            return lambda value, path: None
        constant = _Converters.leaf(field, field)(field.default_value, field.name)
        return lambda value, path: constant

    def field(self, writer, reader) -> Callable:
        name = reader.name
        if _is_map(reader):
            if not _is_map(writer):
                raise _Incompatible(f"field {name} is {_kind_name(writer)} in the writer's "
                                    f"message and a map in the column's")
            wkey, wvalue = (writer.message_type.fields_by_name[n] for n in ("key", "value"))
            rkey, rvalue = (reader.message_type.fields_by_name[n] for n in ("key", "value"))
            key, item = self.single(wkey, rkey), self.single(wvalue, rvalue)

            def get_map(value, path):
                inner = f"{path}.{name}" if path else name
                entries = getattr(value, name)
                return [(key(k, inner), item(entries[k], f"{inner}[{k!r}]"))
                        for k in sorted(entries)]

            return get_map
        if _is_map(writer):
            raise _Incompatible(f"field {name} is a map in the writer's message and "
                                f"{_kind_name(reader)} in the column's")
        element = self.single(writer, reader)
        if _is_repeated(reader):
            if _is_repeated(writer):
                return lambda value, path: [
                    element(item, f"{path}.{name}" if path else name)
                    for item in getattr(value, name)]
            has = self.presence(writer)
            return lambda value, path: [element(getattr(value, name),
                                                f"{path}.{name}" if path else name)] \
                if has(value) else []
        if _is_repeated(writer):
            raise _Incompatible(f"field {name} is repeated in the writer's message and "
                                f"singular in the column's")
        has = self.presence(writer)

        def get_field(value, path):
            if not has(value):
                return None
            return element(getattr(value, name), f"{path}.{name}" if path else name)

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
        if reader.type == _MESSAGE:
            target = reader.message_type
            if _is_timestamp(target) or _is_duration(target):
                if writer.type == _MESSAGE and (
                        _is_timestamp(writer.message_type) == _is_timestamp(target)
                        and _is_duration(writer.message_type) == _is_duration(target)):
                    return lambda value, path: _micros(value)
            elif target.full_name in _WRAPPERS:
                inner = target.fields_by_name["value"]
                if writer.type == _MESSAGE and writer.message_type.full_name in _WRAPPERS:
                    unwrap = self.leaf(writer.message_type.fields_by_name["value"], inner)
                    return lambda value, path: unwrap(value.value, path)
                if writer.type != _MESSAGE:
                    return self.leaf(writer, inner)
            elif writer.type == _MESSAGE and not _is_map(writer) \
                    and writer.message_type.full_name not in _WRAPPERS:
                return self.message(writer.message_type, target)
            raise _Incompatible(f"field {reader.name} is {_kind_name(writer)} in the "
                                f"writer's message and {_kind_name(reader)} in the column's")
        if writer.type == _MESSAGE and writer.message_type.full_name in _WRAPPERS:
            unwrap = self.leaf(writer.message_type.fields_by_name["value"], reader)
            return lambda value, path: unwrap(value.value, path)
        return self.leaf(writer, reader)

    @staticmethod
    def leaf(writer, reader) -> Callable:
        """A scalar or enum of `writer`'s type as `reader`'s."""
        wtype, rtype = writer.type, reader.type
        problem = _Incompatible(f"field {reader.name} is {_kind_name(writer)} in the writer's "
                                f"message and {_kind_name(reader)} in the column's")
        if rtype == _ENUM:
            names = _enum_names(reader.enum_type)
            enum_name = reader.enum_type.name
            if wtype == _ENUM:
                return lambda value, path: names.get(value) or \
                    f"UNKNOWN_ENUM_VALUE_{enum_name}_{value}"
            if wtype in _INT_RANGES:
                return lambda value, path: names.get(value) or \
                    f"UNKNOWN_ENUM_VALUE_{enum_name}_{value}"
            raise problem
        if rtype in _INT_RANGES:
            if wtype not in _INT_RANGES:
                raise problem
            column = _ARROW_INT[rtype]
            low, high = _COLUMN_RANGES[column]
            unsigned = column == UNSIGNED_64
            wlow, whigh = _INT_RANGES[wtype]
            checked = wlow < low or whigh > high

            def convert_int(value, path):
                value = int(value)
                if checked and not low <= value <= high:
                    raise _Misfit(f"field {path or reader.name}: {value} is out of the range "
                                  f"of the column's {column}")
                return Decimal(value) if unsigned else value

            return convert_int
        if rtype in (_FLOAT, _DOUBLE):
            if wtype in (_FLOAT, _DOUBLE) or wtype in _INT_RANGES:
                return lambda value, path: float(value)
            raise problem
        if rtype == _BOOL:
            if wtype != _BOOL:
                raise problem
            return lambda value, path: bool(value) if not isinstance(value, str) \
                else value == "true"
        if rtype == _STRING:
            if wtype == _STRING:
                return lambda value, path: value
            if wtype == _BYTES:
                def utf8(value, path):
                    try:
                        return bytes(value).decode("utf-8")
                    except UnicodeDecodeError:
                        raise _Misfit(f"field {path or reader.name}: bytes that are not "
                                      f"UTF-8, and the column's field is a string") from None
                return utf8
            raise problem
        if rtype == _BYTES:
            if wtype == _BYTES:
                return lambda value, path: bytes(value)
            if wtype == _STRING:
                return lambda value, path: value.encode("utf-8")
            raise problem
        raise problem


# Payloads -----------------------------------------------------------------------------


def _zigzag_varint(data: bytes, position: int) -> Tuple[int, int]:
    """Kafka's ByteUtils.readVarint: a zig-zag varint of at most 5 bytes."""
    result, shift = 0, 0
    while True:
        if position >= len(data):
            raise ValueError("truncated message indexes: the payload ends inside a varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 28:
            raise ValueError("bad message indexes: a varint longer than 5 bytes")
    return (result >> 1) ^ -(result & 1), position


def message_indexes(body: bytes) -> Tuple[Tuple[int, ...], int]:
    """The message indexes at the start of a payload (after the schema id) and where the
    Protobuf binary starts; ValueError saying what is wrong."""
    count, position = _zigzag_varint(body, 0)
    if count == 0:
        return (0,), position
    if count < 0 or count > len(body):
        raise ValueError(f"bad message indexes: a count of {count}")
    indexes = []
    for _ in range(count):
        index, position = _zigzag_varint(body, position)
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
        arrow = _TypeMapper(where).message(descriptor)
        if arrow is None:
            raise ProtobufSchemaError(f"{where}: message {descriptor.full_name} has no field, "
                                      f"and a Spark struct needs one")
        self.arrow_type = arrow
        self._writers: Dict[int, LoadedSchema] = {}
        self._converters: Dict[Tuple[int, Tuple[int, ...]], Any] = {}
        # by writer schema id: converters are kept by message names, which each
        # writer's descriptors reuse
        self._builders: Dict[int, _Converters] = {}

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

    def decode(self, writer, registry, payloads: Sequence[bytes]):
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

        return decoded_rows(decode_one, payloads)


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
