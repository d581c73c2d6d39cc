"""The Protobuf schema language's text: .proto source parsed into FileDescriptorProtos,
and printed again as Schema Registry stores it.

The protobuf runtime parses only compiled descriptors, so this module parses the .proto
subset registry schemas use (proto2/proto3; package, import, message with nested
messages, enums, scalar/repeated/optional/required fields, map<K, V>, oneof; options,
reserved ranges, extensions, services and comments are read past). Type names are left
as written: the DescriptorPool resolves them in scope, as protoc does (descriptors.py
loads a parsed file with the files it imports).

canonical_text prints a parsed file again as Schema Registry stores a Protobuf schema
(ProtobufSchema.canonicalString), for the files whose every statement the
FileDescriptorProto keeps.
"""
import re
from typing import Any, List, NamedTuple, Optional, Tuple

from ...errors import UnsupportedFormatError

# The file name a schema text is parsed and loaded as, unless another is given
FILE_NAME = "schema.proto"
# FieldDescriptorProto.Type numbers and labels
TYPE_DOUBLE, TYPE_FLOAT, TYPE_INT64, TYPE_UINT64, TYPE_INT32, TYPE_FIXED64, TYPE_FIXED32, \
    TYPE_BOOL, TYPE_STRING, TYPE_GROUP, TYPE_MESSAGE, TYPE_BYTES, TYPE_UINT32, TYPE_ENUM, \
    TYPE_SFIXED32, TYPE_SFIXED64, TYPE_SINT32, TYPE_SINT64 = range(1, 19)
LABEL_OPTIONAL, LABEL_REQUIRED, LABEL_REPEATED = 1, 2, 3
SCALARS = {
    "double": TYPE_DOUBLE, "float": TYPE_FLOAT, "int64": TYPE_INT64, "uint64": TYPE_UINT64,
    "int32": TYPE_INT32, "fixed64": TYPE_FIXED64, "fixed32": TYPE_FIXED32, "bool": TYPE_BOOL,
    "string": TYPE_STRING, "bytes": TYPE_BYTES, "uint32": TYPE_UINT32,
    "sfixed32": TYPE_SFIXED32, "sfixed64": TYPE_SFIXED64, "sint32": TYPE_SINT32,
    "sint64": TYPE_SINT64,
}
TYPE_NAMES = {number: name for name, number in SCALARS.items()}
MAP_KEYS = {"int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
            "sfixed32", "sfixed64", "bool", "string"}
# Integer types: (low, high) of their values
INT_RANGES = {
    TYPE_INT32: (-2 ** 31, 2 ** 31 - 1), TYPE_SINT32: (-2 ** 31, 2 ** 31 - 1),
    TYPE_SFIXED32: (-2 ** 31, 2 ** 31 - 1), TYPE_INT64: (-2 ** 63, 2 ** 63 - 1),
    TYPE_SINT64: (-2 ** 63, 2 ** 63 - 1), TYPE_SFIXED64: (-2 ** 63, 2 ** 63 - 1),
    TYPE_UINT32: (0, 2 ** 32 - 1), TYPE_FIXED32: (0, 2 ** 32 - 1),
    TYPE_UINT64: (0, 2 ** 64 - 1), TYPE_FIXED64: (0, 2 ** 64 - 1),
}

class ProtobufSchemaError(UnsupportedFormatError):
    """A .proto schema that cannot be parsed or loaded (decoding raises it too for one
    that has no Spark type)."""


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


def camel(name: str) -> str:
    """A field name in CamelCase, as protoc names a map field's entry message after it
    (`<Camel>Entry`); the writer's derivation names nested messages so too."""
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
        self.declared_syntax: Optional[str] = None
        # what a FileDescriptorProto does not keep (options, reserved ranges, services...):
        # the tokens of each such statement
        self.skipped: List[str] = []

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
        start = self.index
        try:
            self._skip_statement()
        finally:
            self.note_skipped(start)

    def note_skipped(self, start: int):
        self.skipped.append(" ".join(t.text for t in self.tokens[start:self.index]))

    def _skip_statement(self):
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
                self.syntax = self.declared_syntax = self.string().decode()
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
                if self.take("weak"):
                    self.note_skipped(self.index - 1)
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
        if type_name in SCALARS:
            field.type = SCALARS[type_name]
        else:
            field.type_name = type_name
        field.label = LABEL_REPEATED if label == "repeated" else \
            LABEL_REQUIRED if label == "required" else LABEL_OPTIONAL
        if label == "optional" and self.syntax == "proto3":
            field.proto3_optional = True
        self.field_options(field)
        self.expect(";")

    def field_options(self, field):
        if not self.at("["):
            return
        start = self.index
        self.next()
        try:
            self._field_options(field)
        finally:
            self.note_skipped(start)

    def _field_options(self, field):
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
        if field.type in INT_RANGES:
            negative = value.startswith("-")
            digits = value.lstrip("-")
            try:
                number = int(digits, 16) if digits.lower().startswith("0x") else \
                    int(digits, 8) if len(digits) > 1 and digits.startswith("0") else \
                    int(digits)
            except ValueError:
                self.fail(f"default {value!r} is not an integer", token)
            return str(-number if negative else number)
        if field.type == TYPE_BYTES:
            from google.protobuf import text_encoding

            return text_encoding.CEscape(value.encode("utf-8"), as_utf8=False)
        return value

    def map_field(self, message):
        start = self.next()
        self.expect("<")
        key_type = self.name("a map key type")
        if key_type not in MAP_KEYS:
            self.fail(f"map keys are integral types, bool or string, not {key_type}", start)
        self.expect(",")
        value_type = self.name("a map value type")
        self.expect(">")
        field = message.field.add()
        field.name = self.name("a field name")
        self.expect("=")
        field.number = self.integer()
        field.label = LABEL_REPEATED
        entry_name = camel(field.name) + "Entry"
        field.type_name = entry_name
        entry = message.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, label=LABEL_OPTIONAL, type=SCALARS[key_type])
        value = entry.field.add(name="value", number=2, label=LABEL_OPTIONAL)
        if value_type in SCALARS:
            value.type = SCALARS[value_type]
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
                self.skipped.append(f"option {name} = {value}")
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


class ParsedProto(NamedTuple):
    """A .proto text parsed: its FileDescriptorProto (type names as written), the syntax
    it declares (None when it declares none), and what the descriptor does not keep (the
    tokens of each option, reserved range, extension range, service and extend, in
    order)."""

    file: Any
    declared_syntax: Optional[str]
    skipped: Tuple[str, ...]


def read_proto(text: str, file_name: str = FILE_NAME, where: str = "a schema"
               ) -> ParsedProto:
    """The ParsedProto of .proto source text; ProtobufSchemaError naming `where`, the
    line and the column of what cannot be read."""
    parser = _ProtoParser(text, file_name, where)
    file = parser.parse()
    return ParsedProto(file, parser.declared_syntax, tuple(parser.skipped))


def parse_proto(text: str, file_name: str = FILE_NAME, where: str = "a schema"):
    """The FileDescriptorProto of .proto source text; ProtobufSchemaError naming `where`,
    the line and the column of what cannot be read."""
    return _ProtoParser(text, file_name, where).parse()


# The registry's text of a schema ---------------------------------------------------------


def canonical_text(parsed: ParsedProto) -> Optional[str]:
    """The text Schema Registry stores for a .proto schema (ProtobufSchema's
    canonicalString: no comments; syntax, package, imports, then the messages and after
    them the enums, each body as fields, oneofs, nested messages, nested enums, indented
    by two spaces, blocks apart by an empty line). None for a text with what the
    FileDescriptorProto does not keep (`parsed.skipped`): it cannot be printed again."""
    if parsed.skipped:
        return None
    file = parsed.file
    out = []
    if parsed.declared_syntax is not None:
        out.append(f'syntax = "{parsed.declared_syntax}";\n')
    if file.package:
        out.append(f"package {file.package};\n")
    if file.dependency:
        out.append("\n")
        public = set(file.public_dependency)
        out.extend(f'import "{name}";\n' for i, name in enumerate(file.dependency)
                   if i not in public)
        out.extend(f'import public "{name}";\n' for i, name in enumerate(file.dependency)
                   if i in public)
    proto3 = parsed.declared_syntax == "proto3"
    if file.message_type or file.enum_type:
        out.append("\n")
        out.extend(_message_text(m, proto3) for m in file.message_type)
        out.extend(_enum_text(e) for e in file.enum_type)
    return "".join(out)


def _indented(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.split("\n")[:-1])


def _field_type(field, message) -> str:
    if field.type_name:
        return field.type_name
    return TYPE_NAMES[field.type]


def _field_text(field, message, proto3: bool, in_oneof: bool) -> str:
    entry = _map_entry(field, message)
    if entry is not None:
        key, value = entry.field
        kind = f"map<{_field_type(key, entry)}, {_field_type(value, entry)}>"
        label = ""
    else:
        kind = _field_type(field, message)
        label = "" if in_oneof else "repeated " if field.label == LABEL_REPEATED else \
            "required " if field.label == LABEL_REQUIRED else \
            "optional " if field.proto3_optional or not proto3 else ""
    return f"{label}{kind} {field.name} = {field.number};\n"


def _map_entry(field, message):
    """The entry message of a map field (as parsed: type_name the entry's own name)."""
    if field.label != LABEL_REPEATED or not field.type_name:
        return None
    for nested in message.nested_type:
        if nested.name == field.type_name and nested.options.map_entry:
            return nested
    return None


def _message_text(message, proto3: bool) -> str:
    out = [f"message {message.name} {{"]
    real_oneof = [f.HasField("oneof_index") and not f.proto3_optional for f in message.field]
    plain = [f for f, in_oneof in zip(message.field, real_oneof) if not in_oneof]
    if plain:
        out.append("\n")
        out.extend(_indented(_field_text(f, message, proto3, False)) for f in plain)
    oneofs = [(i, decl) for i, decl in enumerate(message.oneof_decl)
              if any(f.oneof_index == i for f, real in zip(message.field, real_oneof) if real)]
    if oneofs:
        out.append("\n")
        for index, decl in oneofs:
            members = "".join(_field_text(f, message, proto3, True)
                              for f, real in zip(message.field, real_oneof)
                              if real and f.oneof_index == index)
            out.append(_indented(f"oneof {decl.name} {{\n{_indented(members)}}}\n"))
    nested = [m for m in message.nested_type if not m.options.map_entry]
    if nested or message.enum_type:
        out.append("\n")
        out.extend(_indented(_message_text(m, proto3)) for m in nested)
        out.extend(_indented(_enum_text(e)) for e in message.enum_type)
    out.append("}\n")
    return "".join(out)


def _enum_text(enum) -> str:
    values = "".join(f"{v.name} = {v.number};\n" for v in enum.value)
    return f"enum {enum.name} {{\n{_indented(values)}}}\n" if values else \
        f"enum {enum.name} {{}}\n"
