"""The columnar twin of json_schema.decode_json: a reader column's mapping (the Node tree
of json_schema.py) compiled into a program that _jsoncolumns.c runs over JSON documents,
filling Arrow column buffers with no Python object per record.

The compiled parser decides only what it can decide exactly as json.loads and the
converters do. A row it does not take (a document that is not JSON, a value that does
not fit its column, NaN or Infinity, an integer literal past int64, a key given twice, a
lone surrogate escape, nesting past 128 levels) comes back as "deferred": this module
decodes it with the row-by-row path (json_schema.decode_json), which gives its value or
its error reason, and puts the value in its place. So the two paths agree on every value
and every error by construction wherever the parser defers, and the twin tests
(tests/decode/test_json_columns.py) hold them to it where it does not. Leaf values its
fast paths leave (dates and date-times in other ISO forms than the common RFC 3339 ones,
base64 that is not canonical, schema-less parts as JSON text) are converted by the
Python converters one value at a time, from within the run.
"""
import datetime as dt
import json
import threading
from typing import Callable, List, Optional, Tuple

import numpy as np
import pyarrow as pa

from ..schemas.json_schema.mapping import NO_DEFAULT, Misfit, Node
from .compiled_columns import ARROW_C as _ARROW_C
from .compiled_columns import arrow_array, import_columns, load_value_decoder

# Column kinds and step kinds: _jsoncolumns.c's enums.
COL_BOOL, COL_I8, COL_I16, COL_I32, COL_I64, COL_F32, COL_F64, COL_BINARY, COL_LIST, \
    COL_STRUCT = range(1, 11)
KINDS = {kind: number for number, kind in enumerate((
    "string", "boolean", "integer", "number", "date", "timestamp", "base64", "connect_days",
    "connect_millis", "text", "enum", "array", "object", "map", "union"), start=1)}
F_Z, F_SPACE, F_MILLIS, F_MICROS, F_OFFSET = 1, 2, 4, 8, 16
_INTEGER_COLUMNS = {pa.int8(): COL_I8, pa.int16(): COL_I16, pa.int32(): COL_I32,
                    pa.int64(): COL_I64}
_RANGES = {COL_I8: 8, COL_I16: 16, COL_I32: 32, COL_I64: 64}


class JsonCompiledUnavailableWarning(RuntimeWarning):
    """The compiled JSON decoder is not built: JSON Schema values decode row by row."""


_extension = None  # the _jsoncolumns module; False once it failed to load


def extension():
    """The built _jsoncolumns module, None when it is not built (warned once a process)."""
    global _extension
    if _extension is None:
        _extension = load_value_decoder(
            "_jsoncolumns", "JSON", "JSON Schema values decode row by row in Python",
            JsonCompiledUnavailableWarning) or False
    return _extension or None


# ------------------------------------------------------------------ Python's parts

# What a slow converter returns to leave the row to the row-by-row path.
DEFER = object()


def _leaf(convert: Callable) -> Callable:
    """A leaf's converter (a date, date-time or base64 string the fast path leaves): its
    value, or None where it does not fit (the row's reason comes from the twin)."""
    def call(value):
        try:
            return convert(value, "")
        except Misfit:
            return None
    return call


def _whole(convert: Callable) -> Callable:
    """The converter of a whole JSON value given as its text (schema-less parts, enums'
    non-string values): json.loads, then `convert`."""
    def call(span: bytes):
        try:
            value = json.loads(span.decode("utf-8"))
        except (ValueError, RecursionError):
            return DEFER  # not expected (the parser checked it): the twin says why
        try:
            return convert(value, "")
        except Misfit:
            return None
    return call


def _fromisoformat_flags() -> int:
    """The date-time forms the compiled fast path may read: those this Python's
    datetime.fromisoformat reads as the fast path does (3.10 refuses a Z, for one)."""
    probes = {F_Z: ("2000-01-02T03:04:05Z", dt.datetime(2000, 1, 2, 3, 4, 5,
                                                        tzinfo=dt.timezone.utc)),
              F_SPACE: ("2000-01-02 03:04:05", dt.datetime(2000, 1, 2, 3, 4, 5)),
              F_MILLIS: ("2000-01-02T03:04:05.678", dt.datetime(2000, 1, 2, 3, 4, 5, 678000)),
              F_MICROS: ("2000-01-02T03:04:05.678901",
                         dt.datetime(2000, 1, 2, 3, 4, 5, 678901)),
              F_OFFSET: ("2000-01-02T03:04:05-01:30", dt.datetime(
                  2000, 1, 2, 3, 4, 5, tzinfo=dt.timezone(-dt.timedelta(hours=1, minutes=30))))}
    flags = 0
    for flag, (text, expected) in probes.items():
        try:
            read = dt.datetime.fromisoformat(text)
        except ValueError:
            continue
        if read == expected and read.utcoffset() == expected.utcoffset():
            flags |= flag
    return flags


# ------------------------------------------------------------------ compiling

class _Compiler:
    def __init__(self):
        # [kind, children, nullable] per column, parents first; nullable: its field's
        self.columns: List[list] = []
        self.types: List[pa.DataType] = []
        self._nullable = True

    def _column(self, kind: int, arrow: pa.DataType, nullable: Optional[bool] = None) -> int:
        self.columns.append([kind, (), self._nullable if nullable is None else nullable])
        self.types.append(arrow)
        return len(self.columns) - 1

    def step(self, node: Node, nullable: bool, field_nullable: Optional[bool] = None
             ) -> tuple:
        """The step reading a value of `node` at a place that takes null or not, into a
        column whose field is nullable as `field_nullable` says (default: `nullable`)."""
        self._nullable = nullable if field_nullable is None else field_nullable
        kind, arrow = node.kind, node.type
        slow, children, extra, low, high = None, (), None, 0, 0
        if kind in ("string", "base64"):
            col = self._column(COL_BINARY, arrow)
            if kind == "base64":
                slow = _leaf(node.convert)
        elif kind in ("text", "enum"):
            col = self._column(COL_BINARY, arrow)
            slow = _whole(node.convert)
        elif kind == "boolean":
            col = self._column(COL_BOOL, arrow)
        elif kind in ("integer", "connect_days", "connect_millis"):
            # a date's days are 32-bit; a timestamp's milliseconds 64-bit (then times 1000)
            column_kind = _INTEGER_COLUMNS[arrow] if kind == "integer" \
                else COL_I32 if kind == "connect_days" else COL_I64
            col = self._column(column_kind, arrow)
            bits = _RANGES[column_kind]
            low, high = -2 ** (bits - 1), 2 ** (bits - 1) - 1
        elif kind == "number":
            col = self._column(COL_F32 if arrow == pa.float32() else COL_F64, arrow)
        elif kind in ("date", "timestamp"):
            col = self._column(COL_I32 if kind == "date" else COL_I64, arrow)
            slow = _leaf(node.convert)
        elif kind == "array":
            col = self._column(COL_LIST, arrow)
            item = self.step(node.element, node.element.nullable)
            self.columns[col][1] = (item[1],)
            children = (item,)
        elif kind == "map":
            col = self._column(COL_LIST, arrow)
            entries = self._column(COL_STRUCT, pa.struct([arrow.key_field, arrow.item_field]),
                                   False)
            keys = self._column(COL_BINARY, arrow.key_type, False)
            values = self.step(node.element, node.element.nullable)
            self.columns[col][1] = (entries,)
            self.columns[entries][1] = (keys, values[1])
            children, extra = (values,), keys
        elif kind == "object":
            col = self._column(COL_STRUCT, arrow)
            fields, properties = [], []
            for name, child, child_nullable, default, required in node.properties:
                fields.append(self.step(child, child_nullable))
                text = None if default is NO_DEFAULT else json.dumps(default).encode()
                properties.append((name.encode("utf-8"), required, text))
            self.columns[col][1] = tuple(field[1] for field in fields)
            children, extra = tuple(fields), tuple(properties)
        elif kind == "union":
            col = self._column(COL_STRUCT, arrow)
            # members never see null: the union's place takes it or refuses it
            members = tuple(self.step(member, False, True) for member in node.members)
            self.columns[col][1] = tuple(member[1] for member in members)
            children = members
        else:
            raise ValueError(f"a column of kind {kind!r} has no compiled step")
        return (KINDS[kind], col, int(nullable), low, high, slow, children, extra)


class Program:
    """A reader column compiled: decode(payloads, fallback) -> (a pa.Array of the column's
    type, one error reason or None per payload as decoded_rows over `fallback` gives, or
    None when every payload decoded)."""

    def __init__(self, module, node: Node):
        compiler = _Compiler()
        root = compiler.step(node, True)  # a document's null is a null row
        self._module = module
        self._columns = [(kind, children) for kind, children, _ in compiler.columns]
        self._compiled = module.compile([tuple(column) for column in compiler.columns], root,
                                        _fromisoformat_flags(), DEFER)
        self._types = compiler.types
        self.arrow_type = node.type
        # a run calls Python converters, during which another thread could start one
        self._lock = threading.Lock()

    def run(self, payloads):
        """The compiled run alone: (the column as decoded, the rows left to Python)."""
        spans = getattr(payloads, "starts", None) is not None
        with self._lock:
            columns, deferred = (
                self._module.run_spans(self._compiled, payloads.data, payloads.starts,
                                       payloads.ends, _ARROW_C)
                if spans else self._module.run(self._compiled, payloads, _ARROW_C))
        if _ARROW_C:
            return import_columns(columns, self.arrow_type), deferred
        return self._array(columns, 0), deferred

    def decode(self, payloads, fallback: Callable
               ) -> Tuple[pa.Array, Optional[List[Optional[str]]]]:
        """`payloads`: a sequence of bytes, or spans of one buffer (value_formats.Payloads).
        `fallback(payload)` decodes one row the parser left, raising ValueError with its
        reason."""
        column, deferred = self.run(payloads)
        if not deferred:  # the common case: no list of a None per row to build and free
            return column, None
        errors: List[Optional[str]] = [None] * len(column)
        placed, values = [], []
        for row in deferred:
            try:
                value = fallback(payloads[row])
            except ValueError as failure:
                errors[row] = str(failure)
                continue
            if value is not None:
                placed.append(row)
                values.append(value)
        if placed:  # rows the twin decoded: their values taken into place
            index = np.arange(len(column), dtype=np.int64)
            index[placed] = np.arange(len(column), len(column) + len(placed))
            column = pa.concat_arrays([column, pa.array(values, self.arrow_type)]).take(
                pa.array(index))
        return column, errors

    def _array(self, columns, index) -> pa.Array:
        return arrow_array(columns, index, self._types, [c[1] for c in self._columns])

def program_for(node: Node) -> Optional[Program]:
    """The compiled program of a reader column's mapping, None when the extension is not
    built."""
    module = extension()
    return None if module is None else Program(module, node)
