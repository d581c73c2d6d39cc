"""The compiled twin of avro.decode_payloads: a (writer schema, reader schema) pair compiled
into a program that _avrocolumns.c runs over the payloads, filling Arrow column buffers.

`program_for` is the one place that decides whether a pair is in the compiled decoder's
scope; None sends the payloads down the fastavro path (decode_payloads). In scope:
records, arrays, enums (read as strings), fixed, null, boolean, int, long, float, double,
string, bytes and ["null", T] unions of them, date and timestamp logical types, with
Avro's resolution as fastavro applies it: fields matched by name (or a reader field's
alias), writer fields the reader lacks skipped, reader fields the writer lacks given
their (primitive) default, and the promotions int -> long/float/double, long ->
float/double, float -> double, string <-> bytes. Anything else (maps, other unions,
decimals, defaults that are not primitive, names that differ) is left to fastavro, whose
outcome (values or per-row errors) is then the answer.

The compiled decoder is stricter than fastavro where fastavro returns a value of bytes
that are not Avro; each is an error of its row: a varint longer than 10 bytes (fastavro
reads garbage), a negative length, a negative enum or union index (fastavro indexes the
symbols or branches from the end), a skipped writer field that runs past the payload's
end (fastavro's skip does not check); and an int outside 32 bits (fastavro returns it,
and the whole batch then fails to become an int32 column).
"""
from typing import Dict, List, Optional, Tuple

import pyarrow as pa

from ..schemas.avro import spark_type
from .compiled_columns import arrow_array, load_value_decoder

# Column kinds, step operations, writer kinds and conversions: _avrocolumns.c's enums.
COL_NULL, COL_BOOL, COL_I32, COL_I64, COL_F32, COL_F64, COL_BINARY, COL_LIST, COL_STRUCT = range(9)
OP_READ, OP_RECORD, OP_ARRAY, OP_UNION = 1, 2, 3, 4
W_NULL, W_BOOL, W_INT, W_LONG, W_FLOAT, W_DOUBLE, W_BYTES, W_STRING, W_FIXED, W_ENUM = range(10)
CONV_NONE, CONV_MILLIS_TO_MICROS = 0, 1

_PRIMITIVE_KINDS = {"null": W_NULL, "boolean": W_BOOL, "int": W_INT, "long": W_LONG,
                    "float": W_FLOAT, "double": W_DOUBLE, "bytes": W_BYTES, "string": W_STRING}
_PROMOTIONS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
               ("long", "double"), ("float", "double"), ("string", "bytes"),
               ("bytes", "string")}
_TIMESTAMPS = {"timestamp-millis", "timestamp-micros", "local-timestamp-millis",
               "local-timestamp-micros"}
_MILLIS = {"timestamp-millis", "local-timestamp-millis"}
_NAMED = ("record", "error", "enum", "fixed")


class AvroCompiledUnavailableWarning(RuntimeWarning):
    """The compiled Avro decoder is not built: Avro values decode through fastavro alone."""


class OutOfScope(Exception):
    """The schema pair is not one the compiled decoder handles."""


_extension = None  # the _avrocolumns module; False once it failed to load


def extension():
    """The built _avrocolumns module, None when it is not built (warned once a process)."""
    global _extension
    if _extension is None:
        _extension = load_value_decoder(
            "_avrocolumns", "Avro", "Avro values decode through fastavro alone",
            AvroCompiledUnavailableWarning) or False
    return _extension or None


class Program:
    """A compiled (writer, reader) pair: decode(payloads) -> (a pa.Array of the reader's
    Spark type, one error reason or None per payload), as decode_payloads gives."""

    def __init__(self, module, columns, root, arrow_type: pa.DataType, column_types):
        self._module = module
        self._compiled = module.compile(columns, root)
        self._kinds = [kind for kind, _, _ in columns]
        self._children = [children for _, _, children in columns]
        self.arrow_type = arrow_type
        self._types = column_types  # the Arrow type of each column

    def decode(self, payloads) -> Tuple[pa.Array, List[Optional[str]]]:
        """`payloads`: a sequence of bytes, or spans of one buffer (value_formats.Payloads:
        `data`, `starts`, `ends`), which are read in place."""
        spans = getattr(payloads, "starts", None) is not None
        columns, errors = (
            self._module.run_spans(self._compiled, payloads.data, payloads.starts,
                                   payloads.ends)
            if spans else self._module.run(self._compiled, payloads))
        return self._array(columns, 0), errors

    def _array(self, columns, index) -> pa.Array:
        return arrow_array(columns, index, self._types, self._children)

# ----------------------------------------------------------------------- compiling

class _Compiler:
    def __init__(self, writer, reader, reader_named: Dict[str, dict]):
        self.writer_named = writer.get("__named_schemas", {}) if isinstance(writer, dict) else {}
        self.reader_named = dict(reader_named)
        if isinstance(reader, dict):
            self.reader_named.update(reader.get("__named_schemas", {}))
        self.columns: List = []
        self.types: List[pa.DataType] = []
        self.conversions: List[int] = []

    # -- the reader's columns
    def _deref(self, schema, named, stack=()):
        if isinstance(schema, str) and schema not in _PRIMITIVE_KINDS:
            if schema not in named or schema in stack:
                raise OutOfScope(f"named type {schema} not found, or recursive")
            return named[schema]
        if isinstance(schema, dict) and schema.get("type") not in (
                *_PRIMITIVE_KINDS, "record", "error", "enum", "fixed", "array", "map"):
            return self._deref(schema["type"], named, stack)
        return schema

    @staticmethod
    def _kind(schema) -> str:
        if isinstance(schema, list):
            return "union"
        return schema if isinstance(schema, str) else schema["type"]

    def _nullable_branch(self, union):
        """T of a ["null", T] or [T, "null"] union."""
        others = [branch for branch in union if branch != "null"]
        if len(union) != 2 or len(others) != 1:
            raise OutOfScope("a union other than [null, T]")
        return others[0]

    def column(self, reader, stack=()) -> int:
        """Allocates the column (and its children) of a reader schema."""
        reader = self._deref(reader, self.reader_named)
        if isinstance(reader, list):
            reader = self._deref(self._nullable_branch(reader), self.reader_named)
        index = len(self.columns)
        self.columns.append(None)
        self.types.append(None)
        self.conversions.append(CONV_NONE)
        kind = self._kind(reader)
        logical = reader.get("logicalType") if isinstance(reader, dict) else None
        utf8, children = 0, ()
        if kind == "null":
            column, arrow = COL_NULL, pa.null()
        elif kind == "boolean":
            column, arrow = COL_BOOL, pa.bool_()
        elif kind == "int":
            column, arrow = COL_I32, pa.date32() if logical == "date" else pa.int32()
        elif kind == "long":
            column, arrow = COL_I64, pa.int64()
            if logical in _TIMESTAMPS:
                arrow = pa.timestamp("us", tz=None if logical.startswith("local") else "UTC")
                if logical in _MILLIS:
                    self.conversions[index] = CONV_MILLIS_TO_MICROS
        elif kind == "float":
            column, arrow = COL_F32, pa.float32()
        elif kind == "double":
            column, arrow = COL_F64, pa.float64()
        elif kind in ("string", "enum"):
            column, arrow, utf8 = COL_BINARY, pa.string(), 1
        elif kind in ("bytes", "fixed"):
            if logical == "decimal":
                raise OutOfScope("decimal")
            column, arrow = COL_BINARY, pa.binary()
        elif kind == "array":
            child = self.column(reader["items"], stack)
            column, children = COL_LIST, (child,)
            arrow = pa.list_(pa.field("element", self.types[child]))
        elif kind in ("record", "error"):
            if reader["name"] in stack:
                raise OutOfScope("recursive record")
            inner = stack + (reader["name"],)
            children = tuple(self.column(field["type"], inner) for field in reader["fields"])
            column = COL_STRUCT
            arrow = pa.struct([pa.field(field["name"], self.types[child])
                               for field, child in zip(reader["fields"], children)])
        else:
            raise OutOfScope(f"reader type {kind}")
        self.columns[index] = (column, utf8, children)
        self.types[index] = arrow
        return index

    # -- the steps
    @staticmethod
    def _step(op, col, wkind=0, conv=0, size=0, extra=None, children=()):
        return (op, col, wkind, conv, size, extra, tuple(children))

    def _min_size(self, writer, stack=()) -> int:
        """The fewest bytes a writer value takes."""
        writer = self._deref(writer, self.writer_named)
        kind = self._kind(writer)
        if kind == "union":
            return 1
        if kind in ("null",):
            return 0
        if kind == "fixed":
            return writer["size"]
        if kind in ("float",):
            return 4
        if kind in ("double",):
            return 8
        if kind in ("record", "error"):
            if writer["name"] in stack:
                raise OutOfScope("recursive record")
            return sum(self._min_size(field["type"], stack + (writer["name"],))
                       for field in writer["fields"])
        return 1

    def skip(self, writer, stack=()):
        """The step that reads a writer value and drops it."""
        writer = self._deref(writer, self.writer_named)
        kind = self._kind(writer)
        if kind == "union":
            return self._step(OP_UNION, -1, children=[
                None if branch == "null" else self.skip(branch, stack) for branch in writer])
        if kind in _PRIMITIVE_KINDS:
            return self._step(OP_READ, -1, _PRIMITIVE_KINDS[kind])
        if kind == "enum":
            return self._step(OP_READ, -1, W_ENUM)
        if kind == "fixed":
            return self._step(OP_READ, -1, W_FIXED, size=writer["size"])
        if kind == "array":
            if self._min_size(writer["items"]) < 1:
                raise OutOfScope("an array of items that take no bytes")
            return self._step(OP_ARRAY, -1, children=[self.skip(writer["items"], stack)])
        if kind in ("record", "error"):
            if writer["name"] in stack:
                raise OutOfScope("recursive record")
            inner = stack + (writer["name"],)
            return self._step(OP_RECORD, -1, children=[
                self.skip(field["type"], inner) for field in writer["fields"]])
        raise OutOfScope(f"writer type {kind}")

    @staticmethod
    def _short(name: str) -> str:
        return name.split(".")[-1]

    def resolve(self, writer, reader, col: int):
        """The step that reads a writer value into column `col`, of the reader schema."""
        writer = self._deref(writer, self.writer_named)
        reader = self._deref(reader, self.reader_named)
        if isinstance(writer, list):
            reader_nullable = isinstance(reader, list)
            inner = self._nullable_branch(reader) if reader_nullable else reader
            branches = []
            for branch in writer:
                if self._kind(self._deref(branch, self.writer_named)) == "null":
                    if not reader_nullable and self._kind(inner) != "null":
                        raise OutOfScope("a null written for a reader that takes none")
                    branches.append(None)
                else:
                    branches.append(self.resolve(branch, inner, col))
            return self._step(OP_UNION, col, children=branches)
        if isinstance(reader, list):
            if self._kind(writer) == "null":
                return self._step(OP_READ, col, W_NULL)
            return self.resolve(writer, self._nullable_branch(reader), col)
        wkind, rkind = self._kind(writer), self._kind(reader)
        if wkind in _PRIMITIVE_KINDS and rkind in _PRIMITIVE_KINDS:
            if wkind != rkind and (wkind, rkind) not in _PROMOTIONS:
                raise OutOfScope(f"{wkind} read as {rkind}")
            return self._step(OP_READ, col, _PRIMITIVE_KINDS[wkind], self.conversions[col])
        if wkind != rkind and {wkind, rkind} != {"record", "error"}:
            raise OutOfScope(f"{wkind} read as {rkind}")
        if wkind in _NAMED and self._short(writer["name"]) != self._short(reader["name"]):
            raise OutOfScope("named types of different names")
        if wkind == "enum":
            symbols = []
            for symbol in writer["symbols"]:
                if symbol not in reader["symbols"]:
                    symbol = reader.get("default")
                    if not symbol:
                        raise OutOfScope("a writer symbol the reader lacks")
                symbols.append(symbol.encode())
            return self._step(OP_READ, col, W_ENUM, extra=tuple(symbols))
        if wkind == "fixed":
            if writer["size"] != reader["size"]:
                raise OutOfScope("fixed of different sizes")
            return self._step(OP_READ, col, W_FIXED, size=writer["size"])
        if wkind == "array":
            if self._min_size(writer["items"]) < 1:
                raise OutOfScope("an array of items that take no bytes")
            item_col = self.columns[col][2][0]
            return self._step(OP_ARRAY, col, children=[
                self.resolve(writer["items"], reader["items"], item_col)])
        if wkind in ("record", "error"):
            return self._record(writer, reader, col)
        raise OutOfScope(f"writer type {wkind}")

    def _record(self, writer, reader, col):
        children = self.columns[col][2]
        by_name, by_alias = {}, {}
        for field, child in zip(reader["fields"], children):
            by_name[field["name"]] = (field, child)
            for alias in field.get("aliases", []):
                by_alias[alias] = (field, child)
        steps, filled = [], set()
        for field in writer["fields"]:
            match = by_name.get(field["name"], by_alias.get(field["name"]))
            if match is None:
                steps.append(self.skip(field["type"]))
                continue
            reader_field, child = match
            if reader_field["name"] in filled:
                raise OutOfScope("two writer fields for one reader field")
            filled.add(reader_field["name"])
            steps.append(self.resolve(field["type"], reader_field["type"], child))
        defaults = []
        for field, child in zip(reader["fields"], children):
            if field["name"] not in filled:
                if "default" not in field:
                    raise OutOfScope(f"no default for reader field {field['name']}")
                defaults.append((child, self._default(field["type"], field["default"])))
        return self._step(OP_RECORD, col, extra=tuple(defaults), children=steps)

    def _default(self, reader, value):
        """A reader field's default as the compiled decoder's constant."""
        reader = self._deref(reader, self.reader_named)
        if isinstance(reader, list):
            reader = self._deref(reader[0], self.reader_named)  # a union's default is its first
        kind = self._kind(reader)
        if isinstance(reader, dict) and reader.get("logicalType"):
            raise OutOfScope("a default of a logical type")
        if kind == "null" and value is None:
            return None
        if kind == "boolean" and isinstance(value, bool):
            return int(value)
        if kind in ("int", "long") and isinstance(value, int) and not isinstance(value, bool):
            limit = 2 ** 31 if kind == "int" else 2 ** 63
            if -limit <= value < limit:
                return value
        if kind in ("float", "double") and isinstance(value, (int, float)) \
                and not isinstance(value, bool):
            return float(value)
        if kind == "string" and isinstance(value, str):
            return value.encode()
        if kind == "enum" and isinstance(value, str) and value in reader["symbols"]:
            return value.encode()
        raise OutOfScope(f"a default {value!r} of {kind}")


_programs: Dict[Tuple[int, int], tuple] = {}


def program_for(writer_schema, reader_typed) -> Optional[Program]:
    """The compiled program reading `writer_schema` (fastavro-parsed, logical types left
    out) as `reader_typed` ((the reader schema parsed with its logical types, its named
    types)), or None when the pair is out of scope or the extension is not built."""
    reader, reader_named = reader_typed
    key = (id(writer_schema), id(reader))
    cached = _programs.get(key)
    if cached is not None and cached[0] is writer_schema and cached[1] is reader:
        return cached[2]
    program = compile_program(writer_schema, reader, reader_named)
    if len(_programs) > 256:
        _programs.clear()
    _programs[key] = (writer_schema, reader, program)  # the schemas held: their ids stay theirs
    return program


def compile_program(writer_schema, reader, reader_named) -> Optional[Program]:
    module = extension()
    if module is None:
        return None
    compiler = _Compiler(writer_schema, reader, reader_named)
    try:
        root = compiler.column(reader)
        step = compiler.resolve(writer_schema, reader, root)
    except (OutOfScope, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if compiler.types[root] != spark_type(reader, reader_named, "the reader schema"):
        return None  # a mapping this module does not mirror: fastavro's path decides
    return Program(module, compiler.columns, step, compiler.types[root], compiler.types)
