"""valueFormat=json's columnar decoder (decode/json_program.py, _jsoncolumns.c) against its
twin, the row-by-row path (json.loads, then the converters of decode/json_schema.py): the
same Arrow arrays and the same error reasons, for values encoded by the standard
library's json (and orjson where installed), random documents, and hostile bytes."""
import json

import pyarrow as pa
import pytest

from segmentlog_datasource.decode.json_schema import (JsonSchemaColumn, JsonSchemaValues,
                                                      SchemaDocument)


def framed(schema_id: int, text) -> bytes:
    body = text if isinstance(text, bytes) else json.dumps(text).encode()
    return b"\x00" + schema_id.to_bytes(4, "big") + body


def decoder(schema, schema_id=1):
    column = JsonSchemaColumn(SchemaDocument(json.dumps(schema), "t-value", 1, schema_id))
    return JsonSchemaValues(column, lambda found: column)


# ------------------------------------------------------- what once failed a whole batch

@pytest.mark.parametrize("schema, body, reason", [
    ({"type": "string"}, b'"a\\ud800b"',
     r"field <value>: the string 'a\ud800b' holds a lone surrogate (\ud800 without its "
     r"pair), which UTF-8 text cannot hold"),
    ({"type": "object", "additionalProperties": {"type": "integer"}}, b'{"\\udc01": 1}',
     r"holds a lone surrogate (\udc01 without its pair)"),
    ({"type": "array", "items": {}}, b'[{"k": "\\udbff"}]',
     "field [0]: the string '{\"k\":\"\\udbff\"}' holds a lone surrogate"),
    ({"enum": ["a", "b"]}, b'"\\ud800"', r"holds a lone surrogate (\ud800"),
    ({"type": "integer", "title": "org.apache.kafka.connect.data.Timestamp"},
     b"9223372036854776", "field <value>: 9223372036854776 milliseconds is out of the range "
                          "of a timestamp"),
    ({"type": "number"}, b"1" + b"0" * 400,
     "field <value>: an integer of 401 digits is out of the range of a double"),
    ({"type": "object", "properties": {"a": {"type": "string"}}}, b"[" * 100_000,
     "invalid JSON after the schema id: nested too deeply for Python's json to read it"),
])
def test_values_arrow_cannot_hold_are_errors_of_their_rows(schema, body, reason):
    """A string with a lone surrogate (Arrow's strings are UTF-8), a timestamp past int64
    microseconds, an integer past a double, JSON nested past Python's recursion limit:
    each an error of its row, where they once failed the batch (pa.array raised)."""
    values = decoder(schema)
    column, errors = values.decode([framed(1, b'"x"' if schema.get("type") == "string"
                                           else b"null"), framed(1, body)])
    assert errors[0] is None
    assert reason in errors[1], errors[1]
    assert column.to_pylist()[1] is None


def test_paired_surrogates_and_timestamps_at_the_edges_decode():
    values = decoder({"type": "object", "properties": {
        "s": {"type": "string"},
        "at": {"type": "integer", "title": "org.apache.kafka.connect.data.Timestamp"}}})
    column, errors = values.decode([framed(1, b'{"s": "\\ud83d\\ude00", "at": '
                                              b'9223372036854775}'),
                                    framed(1, b'{"at": -9223372036854775}')])
    assert errors == [None, None]
    assert column.field("s").to_pylist() == ["\U0001F600", None]
    assert column.field("at").cast(pa.int64()).to_pylist() == [9223372036854775000,
                                                               -9223372036854775000]


# ------------------------------------------------------------------ the twin harness

import math  # noqa: E402
import struct  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402

import numpy as np  # noqa: E402

from segmentlog_datasource.decode.json_program import extension  # noqa: E402
from segmentlog_datasource.decode.value_formats import Payloads  # noqa: E402
from support.checkout_copy import (  # noqa: E402
    copy_checkout_source, loaded_extension, run_in_copy)

try:
    import orjson
except ImportError:
    orjson = None

# A pure-Python install (no C compiler) decodes row by row, so the twin tests skip without
# the build; CI sets SEGMENTLOG_REQUIRE_FAST=1, and then a missing build fails.
compiled_only = pytest.mark.skipif(
    extension() is None and not os.environ.get("SEGMENTLOG_REQUIRE_FAST"),
    reason="the compiled JSON decoder is not built here (a pure-Python install); build it "
           "with: python setup.py build_ext --inplace")
# A sweep by hand: JSON_COMPILED_DOCUMENTS=20000 (more random documents per test).
SWEEP = int(os.environ.get("JSON_COMPILED_DOCUMENTS", "0"))


@compiled_only
def test_the_compiled_decoder_is_built_where_ci_requires_it():
    assert extension() is not None, "_jsoncolumns did not build"


def column_of(schema) -> JsonSchemaColumn:
    return JsonSchemaColumn(SchemaDocument(json.dumps(schema), "t-value", 1, 1))


def spans(bodies) -> Payloads:
    lengths = np.fromiter(map(len, bodies), np.int64, len(bodies))
    ends = np.cumsum(lengths)
    # the buffer padded on both sides: the spans must not read past their own bytes
    data = b"{[\"" + b"".join(bodies) + b"\"]}"
    return Payloads(data, ends - lengths + 3, ends + 3)


def exact(value):
    """A Python value with floats told apart as repr tells them (-0.0, nan)."""
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, dict):
        return {key: exact(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [exact(item) for item in value]
    return value


def storage(arrow: pa.DataType) -> pa.DataType:
    """`arrow` with dates and timestamps as their integers (whose Python values may be
    past datetime's years)."""
    if pa.types.is_timestamp(arrow):
        return pa.int64()
    if pa.types.is_date32(arrow):
        return pa.int32()
    if pa.types.is_struct(arrow):
        return pa.struct([field.with_type(storage(field.type)) for field in arrow])
    if pa.types.is_map(arrow):
        return pa.map_(arrow.key_field, arrow.item_field.with_type(storage(arrow.item_type)))
    if pa.types.is_list(arrow):
        return pa.list_(arrow.value_field.with_type(storage(arrow.value_type)))
    return arrow


def same_arrays(left: pa.Array, right: pa.Array):
    """Equal types, values and nulls, children included (also under null parents, as
    pa.array fills them)."""
    assert left.type == right.type
    assert len(left) == len(right)
    assert left.null_count == right.null_count
    plain_type = storage(left.type)
    assert exact(left.cast(plain_type).to_pylist()) == exact(right.cast(plain_type).to_pylist())
    if pa.types.is_struct(left.type):
        for index in range(left.type.num_fields):
            same_arrays(left.field(index), right.field(index))
    elif pa.types.is_list(left.type) or pa.types.is_map(left.type):
        assert left.offsets.equals(right.offsets)
        same_arrays(left.values, right.values)


def twins(column: JsonSchemaColumn, bodies, deferred=None):
    """Decodes `bodies` both ways and checks they agree: the compiled decoder over spans
    of one buffer and over a list of bytes, and the row-by-row path. Returns (the array,
    the errors, the rows the compiled run left to Python)."""
    pure_values, pure_errors = column.decode_bodies(bodies, compiled=False)
    pure = pa.array(pure_values, column.type)
    for given in (spans(bodies), list(bodies)):
        compiled, errors = column.decode_bodies(given, compiled=True)
        assert column._program, "the compiled decoder was not used"
        compiled.validate(full=True)
        if errors is None:  # every document decoded: no list of a None per row
            errors = [None] * len(bodies)
        assert len(errors) == len(pure_errors)
        for row, (mine, theirs) in enumerate(zip(errors, pure_errors)):
            assert mine == theirs, (row, bodies[row])
        try:
            same_arrays(compiled, pure)
        except AssertionError:
            for row in range(len(bodies)):  # the first row that differs, for the report
                plain_type = storage(column.type)
                assert exact(compiled.cast(plain_type)[row].as_py()) == \
                    exact(pure.cast(plain_type)[row].as_py()), (row, bodies[row])
            raise
        # a cast to the column's type holds (FramedColumn casts)
        compiled.cast(column.type)
    left = column._program.run(spans(bodies))[1]
    if deferred is not None:
        assert left == deferred, [bodies[row] for row in left]
    return compiled, errors, left


# ------------------------------------------------------------------ random documents

EVERY = {
    "type": "object", "required": ["id", "name", "tags"],
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "small": {"type": "integer", "connect.type": "int8"},
        "mid": {"type": "integer", "connect.type": "int16"},
        "int": {"type": "integer", "connect.type": "int32"},
        "ratio": {"type": "number"},
        "single": {"type": "number", "connect.type": "float32"},
        "flag": {"type": "boolean"},
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "blob": {"type": "string", "contentEncoding": "base64"},
        "raw": {"type": "string", "connect.type": "bytes"},
        "cday": {"type": "integer", "title": "org.apache.kafka.connect.data.Date"},
        "cat": {"type": "integer", "title": "org.apache.kafka.connect.data.Timestamp"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "maybe": {"type": "array", "items": {"type": ["integer", "null"]}},
        "labels": {"type": "object", "additionalProperties": {"type": "number"}},
        "nested": {"type": "object", "required": ["x"], "properties": {
            "x": {"type": "integer"},
            "y": {"type": ["string", "null"], "default": "why"},
            "z": {"type": "array", "items": {"type": "object", "properties": {
                "k": {"type": "boolean", "default": True}, "s": {"type": "string"}}}}}},
        "key": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "either": {"type": ["integer", "string", "null"]},
        "shape": {"oneOf": [
            {"type": "object", "required": ["r"], "properties": {"r": {"type": "number"}}},
            {"type": "object", "properties": {"w": {"type": "integer"},
                                              "h": {"type": "integer"}}},
            {}]},
        "status": {"enum": ["NEW", "PAID", 3, None]},
        "fixed": {"const": "x"},
        "extra": {},
        "anything": True,
        "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        "count": {"type": "integer", "default": 7},
        "point": {"type": "object", "properties": {"a": {"type": "integer"}},
                  "default": {"a": 5}},
        "stamps": {"type": "array", "items": {"type": "string", "format": "date-time"}},
        "rows": {"type": "object", "additionalProperties": {
            "type": "object", "properties": {"v": {"type": "string"}}}},
    },
}


class Raw(str):
    """A token written as it stands (a number's literal, NaN, a broken piece)."""


class Obj(list):
    """An object as its (key, value) pairs, in order, duplicates allowed."""


INTS = [0, 1, -1, 7, 127, 128, -128, -129, 255, 32767, 32768, -32769, 2 ** 31 - 1, 2 ** 31,
        -2 ** 31 - 1, 2 ** 53, 2 ** 53 + 1, 2 ** 63 - 1, 2 ** 63, -2 ** 63, -2 ** 63 - 1,
        9223372036854775, 9223372036854776, -9223372036854776, 10 ** 19, 10 ** 30,
        1700000000123, 19000, 2932896, 2932897]
INT_LITERALS = ["-0", "1.0", "-1.0", "1e2", "1E+2", "100e-2", "2.5", "1e400", "-1e400",
                "9223372036854775807.0", "9223372036854775808.0", "1e18", "0.0", "-0.0",
                "3.0000000000000000001", "12345678901234567890", "1" + "0" * 25,
                "0e0", "127.00", "1.00000000000000000000000001e2"]
FLOATS = ["0.1", "0.2", "0.3", "1e-7", "2.5e-308", "4.9e-324", "5e-324", "2e-324",
          "2.2250738585072014e-308", "2.2250738585072011e-308", "1.7976931348623157e308",
          "1.7976931348623159e308", "1e308", "1e309", "123456789012345678901234567890",
          "0.000000000000000000000000000001", "9007199254740993", "9007199254740993.0",
          "1.00000000000000011102230246251565404236316680908203125",
          "1.000000000000000111022302462515654042363166809082031250000001",
          "3.4028235e38", "3.4028236e38", "1e39", "1.401298464324817e-45", "7e-46",
          "-0.0", "0e-5", "-0e+5", "1E22", "1e23", "8.589973e9", "0.1e-3", "100.5e-2",
          "123456.7890123456789", "79.99999999999999", "0.30000000000000004"]
DATES = ["2024-02-29", "2023-02-29", "2024-13-01", "2024-00-10", "0001-01-01",
         "9999-12-31", "0000-01-01", "20240229", "2024-W09-4", "2024-060", "2024-1-01",
         "2024-01-01T00:00:00", " 2024-01-01", "2024-01-32", "1970-01-01", "1969-12-31"]
DATE_TIMES = ["2024-02-29T10:20:30", "2024-02-29T10:20:30Z", "2024-02-29t10:20:30z",
              "2024-02-29 10:20:30", "2024-02-29T10:20:30.123", "2024-02-29T10:20:30.123456",
              "2024-02-29T10:20:30.1", "2024-02-29T10:20:30.1234567",
              "2024-02-29T10:20:30+02:00", "2024-02-29T10:20:30-23:59",
              "2024-02-29T10:20:30+24:00", "2024-02-29T10:20:30+0200",
              "2024-02-29T24:00:00", "2024-02-29T23:59:60", "2024-02-29T10:20",
              "2024-02-29T10", "2024-02-29", "20240229T102030", "2024-02-29X10:20:30",
              "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59.999999-01:00",
              "1969-12-31T23:59:59.999999Z", "2024-02-29T10:20:30.123+05:30",
              "2024-02-29T10:20:30,123", "2024-02-29T10:20:30.123Z"]
BASE64S = ["", "AA==", "AAE=", "AAEC", "AB==", "ABC=", "A===", "AB=", "AB", "====",
           "AB==AB==", "AB=A", "ab c", "QUJD\n", "+/+/", "-_-_", "QUJDRA==", "QUJDRA"]
TEXT_CHARS = ("abcXYZ019 _-/\\\"'\n\t\r\b\f\x00\x01\x1f\x7f\u00e9\u00ff\u0100\u20ac"
              "\ud7ff\ue000\uffff\U0001F600\U0010FFFF")


def text(rng, size=None) -> str:
    size = rng.choice([0, 1, 3, 8, 15, 40]) if size is None else size
    chars = [rng.choice(TEXT_CHARS) for _ in range(size)]
    if rng.random() < 0.005:  # a lone surrogate (escaped when written)
        chars.insert(rng.randrange(len(chars) + 1), chr(rng.choice([0xd800, 0xdbff, 0xdc00,
                                                                   0xdfff])))
    return "".join(chars)


def any_value(rng, depth=0):
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice(INTS) * rng.choice([1, -1])
    if kind == 3:
        return Raw(rng.choice(FLOATS + INT_LITERALS + ["NaN", "Infinity", "-Infinity"]))
    if kind in (4, 5):
        return text(rng)
    if kind in (6, 7):
        return [any_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return Obj((text(rng, rng.choice([1, 3])), any_value(rng, depth + 1))
               for _ in range(rng.randrange(4)))


def fitting(schema, rng, depth=0, rough=0.04):
    """A value for `schema` (a part of EVERY), mostly fitting it: values that may not fit
    (any JSON value, edge numbers and forms) `rough` of the time."""
    if rng.random() < rough:
        return any_value(rng, depth)
    if schema is True or schema == {}:
        return any_value(rng, depth)
    if "oneOf" in schema:
        return fitting(rng.choice(schema["oneOf"]), rng, depth, rough)
    if "enum" in schema:
        return rng.choice(schema["enum"] + ["OTHER"])
    if "const" in schema:
        return rng.choice([schema["const"], "y", 1])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "null":
        return None
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "integer":
        if rng.random() < rough * 6:
            return Raw(rng.choice(INT_LITERALS))
        return rng.choice(INTS) * rng.choice([1, 1, -1]) if rng.random() < rough * 12 \
            else rng.randrange(-100, 100)
    if kind == "number":
        if rng.random() < 0.3:
            return Raw(rng.choice(FLOATS + INT_LITERALS if rng.random() < rough * 12
                                  else FLOATS))
        return rng.choice([rng.random() * 10 ** rng.randrange(-5, 25), rng.randrange(-9, 9),
                           rng.uniform(-1, 1)])
    if kind == "string":
        form = schema.get("format")
        if form == "date":
            return rng.choice(DATES) if rng.random() < rough * 12 else \
                f"{rng.randrange(1, 10000):04d}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
        if form == "date-time":
            if rng.random() < rough * 12:
                return rng.choice(DATE_TIMES)
            zone = rng.choice(["", "Z", "+01:00", "-05:30", "+00:00"])
            fraction = rng.choice(["", f".{rng.randrange(1000):03d}",
                                   f".{rng.randrange(10 ** 6):06d}"])
            return (f"{rng.randrange(1, 10000):04d}-{rng.randrange(1, 13):02d}-"
                    f"{rng.randrange(1, 29):02d}{rng.choice('Tt ')}{rng.randrange(24):02d}:"
                    f"{rng.randrange(60):02d}:{rng.randrange(60):02d}{fraction}{zone}")
        if schema.get("contentEncoding") == "base64" or schema.get("connect.type") == "bytes":
            if rng.random() < rough * 10:
                return rng.choice(BASE64S)
            import base64
            return base64.b64encode(bytes(rng.randrange(256) for _ in range(
                rng.randrange(7)))).decode()
        return text(rng)
    if kind == "array":
        return [fitting(schema["items"], rng, depth + 1, rough)
                for _ in range(rng.randrange(4))]
    if kind == "object" and "properties" in schema:
        pairs = Obj()
        for name, part in schema["properties"].items():
            if name in schema.get("required", ()) or rng.random() < 0.8:
                pairs.append((name, fitting(part, rng, depth + 1, rough)))
            if rng.random() < rough / 2:  # a key given twice
                pairs.append((name, fitting(part, rng, depth + 1, rough)))
        if rng.random() < 0.3:  # properties the column lacks
            pairs.append((text(rng, 3), any_value(rng, depth + 1)))
        rng.shuffle(pairs) if rng.random() < 0.2 else None
        if rng.random() < rough / 2 and pairs:
            pairs.pop(rng.randrange(len(pairs)))
        return pairs
    if kind == "object":  # a map
        values = schema["additionalProperties"]
        pairs = Obj((text(rng, rng.choice([1, 2, 5])), fitting(values, rng, depth + 1, rough))
                    for _ in range(rng.randrange(4)))
        if pairs and rng.random() < rough:
            pairs.append((pairs[0][0], fitting(values, rng, depth + 1, rough)))
        return pairs
    return any_value(rng, depth)


def space(rng) -> str:
    return rng.choice(["", "", "", "", " ", "\n", "\t", "\r\n", "  \n "]) if rng.random() < 0.3 \
        else ""


def quoted(value: str, rng) -> str:
    out = ['"']
    for char in value:
        point = ord(char)
        if char == '"' or char == "\\":
            out.append("\\" + char)
        elif point < 0x20 or 0xd800 <= point <= 0xdfff or rng.random() < 0.05:
            if point > 0xffff:  # as a surrogate pair
                point -= 0x10000
                pair = (0xd800 + (point >> 10), 0xdc00 + (point & 0x3ff))
                out.append("".join(f"\\u{unit:04x}" if rng.random() < 0.5 else f"\\u{unit:04X}"
                                   for unit in pair))
            elif char in "\n\t\r\b\f" and rng.random() < 0.5:
                out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}[char])
            else:
                out.append(f"\\u{point:04x}" if rng.random() < 0.5 else f"\\u{point:04X}")
        elif char == "/" and rng.random() < 0.3:
            out.append("\\/")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def written(value, rng) -> str:
    """`value` as JSON text, with random whitespace and escapes."""
    if isinstance(value, Raw):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else json.dumps(value)
    if isinstance(value, str):
        return quoted(value, rng)
    if isinstance(value, Obj):
        return "{" + space(rng) + ("," + space(rng)).join(
            quoted(key, rng) + space(rng) + ":" + space(rng) + written(item, rng) + space(rng)
            for key, item in value) + "}"
    return "[" + space(rng) + ("," + space(rng)).join(
        written(item, rng) + space(rng) for item in value) + "]"


def plain(value):
    """`value` as the Python value json.dumps writes (Raw numbers read, Obj as dicts)."""
    if isinstance(value, Raw):
        return json.loads(value)
    if isinstance(value, Obj):
        return {key: plain(item) for key, item in value}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def documents(rng, count):
    """JSON documents of EVERY's values: written with random whitespace and escapes, or
    by json.dumps (ASCII or not, indented or not), or by orjson."""
    out = []
    for index in range(count):
        value = fitting(EVERY, rng, rough=0.04 if index % 2 else 0.002)
        way = rng.randrange(5)
        if way < 3:
            out.append((space(rng) + written(value, rng) + space(rng)).encode("utf-8",
                                                                               "surrogatepass"))
            continue
        python = plain(value)
        if way == 3:
            out.append(json.dumps(python, ensure_ascii=rng.random() < 0.5,
                                  indent=rng.choice([None, 1, "\t"])).encode("utf-8",
                                                                             "surrogatepass"))
        elif orjson is not None:
            try:
                out.append(orjson.dumps(python))
            except (TypeError, orjson.JSONEncodeError):  # lone surrogates, ints past 64 bits
                out.append(json.dumps(python).encode())
        else:
            out.append(json.dumps(python, separators=(",", ":")).encode())
    return out


@compiled_only
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_documents_decode_alike_both_ways(seed):
    rng = random.Random(seed)
    bodies = documents(rng, SWEEP or 1500)
    column = column_of(EVERY)
    _, errors, deferred = twins(column, bodies)
    # both kinds of rows are there: decoded ones and errors of many kinds
    assert 0.2 < errors.count(None) / len(errors) < 0.98, errors.count(None)
    assert len(set(errors)) > 20
    # and the compiled decoder decodes most rows itself
    assert len(deferred) < 0.8 * len(bodies)


@compiled_only
def test_documents_that_fit_are_decoded_in_c_without_python():
    """Conforming documents (no NaN, no duplicate keys, RFC 3339 date-times, canonical
    base64...) are never left to the row-by-row path: the speed is the compiled one."""
    rng = random.Random(7)
    schema = {key: part for key, part in EVERY["properties"].items()
              if key not in ("extra", "anything", "shape", "status")}
    column = column_of(dict(EVERY, properties=schema))
    import base64
    bodies = []
    for index in range(300):
        value = {
            "id": rng.randrange(-2 ** 63, 2 ** 63), "name": text(rng).replace("\ud800", "")
            .replace("\udbff", "").replace("\udc00", "").replace("\udfff", ""),
            "small": rng.randrange(-128, 128), "mid": rng.randrange(-2 ** 15, 2 ** 15),
            "int": rng.randrange(-2 ** 31, 2 ** 31), "ratio": rng.uniform(-1e6, 1e6),
            "single": rng.random(), "flag": index % 2 == 0, "day": "2024-02-29",
            "at": "2024-02-29T10:20:30.123456+02:00", "blob": base64.b64encode(b"ab").decode(),
            "raw": "", "cday": 19000, "cat": 1700000000123, "tags": ["a", "\u00e9"],
            "maybe": [1, None], "labels": {"a": 1.5, "b": -2}, "nested": {"x": 1, "z": [{}]},
            "key": rng.choice(["k", 5]), "either": rng.choice([1, "s", None]),
            "fixed": "x", "note": None, "rows": {"r": {"v": "w"}}, "stamps": []}
        bodies.append(json.dumps(value, ensure_ascii=index % 3 == 0,
                                 indent=None if index % 2 else 2).encode())
    _, errors, deferred = twins(column, bodies, deferred=[])
    assert errors == [None] * len(bodies)


# ------------------------------------------------------------------ targeted cases

def random_number_literal(rng) -> str:
    sign = rng.choice(["", "", "-"])
    whole = rng.choice(["0", str(rng.randrange(1, 10)), str(rng.randrange(10 ** 15)),
                        str(rng.randrange(10 ** 19, 10 ** 20)), str(rng.randrange(10 ** 30))])
    fraction = rng.choice(["", "." + "".join(rng.choice("0123456789")
                                             for _ in range(rng.randrange(1, 25)))])
    exponent = rng.choice(["", "", f"e{rng.randrange(-30, 30)}", f"E+{rng.randrange(400)}",
                           f"e-{rng.randrange(400)}", "e0", f"e{rng.randrange(-330, -300)}"])
    return sign + whole + fraction + exponent


@compiled_only
@pytest.mark.parametrize("kind", [{"type": "number"},
                                  {"type": "number", "connect.type": "float32"},
                                  {"type": "integer"},
                                  {"type": "integer", "connect.type": "int16"},
                                  {"type": "integer",
                                   "title": "org.apache.kafka.connect.data.Timestamp"}])
def test_numbers_read_as_pythons_float_and_int_read_them(kind):
    """Random literals (up to 40 digits, exponents to 400, subnormals) and floats written
    by repr: the compiled parser's doubles are Python's float() of the literal, bit for
    bit; integral floats fit integers; ints past int64 and NaN are the twin's."""
    rng = random.Random(11)
    literals = [random_number_literal(rng) for _ in range(SWEEP or 3000)]
    literals += [repr(rng.uniform(-1, 1) * 10 ** rng.randrange(-320, 308))
                 for _ in range(SWEEP or 3000)]
    literals += [repr(float(i)) for i in INTS] + [str(i) for i in INTS] + INT_LITERALS + FLOATS
    literals += ["NaN", "-Infinity", "Infinity", "-", "01", "1.", ".5", "1e", "1e+", "+1",
                 "0x10", "1_000", "--1", "1.5.5", "١", "1e5x"]
    column = column_of(kind)
    twins(column, [literal.encode() for literal in literals])
    # wrapped in an object and an array, with and without whitespace
    column = column_of({"type": "object", "properties": {"n": kind, "a": {
        "type": "array", "items": kind}}})
    twins(column, [f'{{"n":{literal},"a":[{literal}, {literal} ]}}'.encode()
                   for literal in literals])


def halfway_literals(rng, count):
    """Decimal literals at, and just off, the halfway points between adjacent doubles (the
    hardest to round), exactly and cut to 17 and 19 significant digits, across the
    exponent range."""
    from decimal import Decimal, localcontext

    literals = []
    with localcontext() as context:
        context.prec = 1200
        while len(literals) < count:
            low = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(63)))[0]
            high = math.nextafter(low, math.inf)
            if not (math.isfinite(low) and math.isfinite(high)) or low == 0:
                continue
            middle = (Decimal(low) + Decimal(high)) / 2
            step = (Decimal(high) - Decimal(low)) / Decimal(10 ** 12)
            for point in (middle, middle + step, middle - step):
                literals += [format(point, "e"), format(point, ".18e"), format(point, ".16e")]
    return literals


def assert_floats_bit_for_bit(literals, in_object=False):
    """The finite ones of `literals` in a number column, or (`in_object`) as an object's
    property in the common shape: each float()'s bits, and none left to the row-by-row
    path."""
    literals = [literal for literal in literals if math.isfinite(float(literal))]
    if in_object:
        column = column_of({"type": "object", "required": ["v", "w"], "properties": {
            "v": {"type": "number"}, "w": {"type": "integer"}}})
        bodies = [b'{"v":%s,"w":1}' % literal.encode() for literal in literals]
    else:
        column = column_of({"type": "number"})
        bodies = [literal.encode() for literal in literals]
    compiled, errors, _ = twins(column, bodies, deferred=[])
    assert errors == [None] * len(literals)
    got = (compiled.field("v") if in_object else compiled).to_numpy(zero_copy_only=False)
    wrong = [(literal, repr(value)) for literal, value in zip(literals, got)
             if struct.pack("<d", value) != struct.pack("<d", float(literal))]
    assert not wrong, wrong[:10]


@compiled_only
def test_doubles_are_pythons_float_bit_for_bit():
    """The compiled parser's double of a literal (a shortcut for w * 10^q with w of 15 or
    fewer digits, then a 64 x 128-bit product with a table power of 5, else CPython's
    strtod) is float()'s, bit for bit: every digit count up to 19 at every exponent of a
    double's range, halfway points and their neighbours, the edges of the normal and
    subnormal ranges, and literals past 19 digits."""
    rng = random.Random(13)
    literals = [f"{rng.randrange(1, 10 ** digits)}e{exponent}"
                for digits in range(1, 20) for exponent in range(-345, 311, 7)]
    literals += [f"{'-' if rng.random() < 0.3 else ''}{rng.randrange(10 ** 19)}."
                 f"{rng.randrange(10 ** 6):06d}e{rng.randrange(-340, 300)}"
                 for _ in range(SWEEP or 4000)]
    literals += halfway_literals(rng, SWEEP or 6000)
    literals += [repr(2.0 ** e) for e in range(-1074, 1024, 3)]
    literals += [repr(math.nextafter(2.0 ** e, 0)) for e in range(-1021, 1024, 5)]
    literals += ["9007199254740992e3", "9007199254740993e3", "9999999999999999999e-342",
                 "1e-342", "2.4703282292062327e-324", "2.4703282292062328e-324",
                 "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308",
                 "2.2250738585072012e-308", "4.9406564584124654e-324", "1e23", "8.5e-1",
                 "123456789012345678e-5", "1234567890123456789e291", "1844674407370955161e1",
                 "5e-1", "0.5000000000000001", "7.450580596923828125e-9"]
    assert_floats_bit_for_bit(literals)


def long_decimals(rng, digits):
    """Random decimals of `digits` significant digits at every exponent of a double's
    range and past it, as w e q and as d.ddd e q, either sign."""
    literals = []
    for exponent in range(-345, 311):
        literals.append(f"{rng.randrange(10 ** (digits - 1), 10 ** digits)}e{exponent}")
        text = str(rng.randrange(10 ** (digits - 1), 10 ** digits))
        literals.append(f"{rng.choice(['', '-'])}{text[0]}.{text[1:]}e{exponent + digits - 1}")
    return literals


@compiled_only
def test_doubles_of_17_and_19_digits_are_pythons_float_bit_for_bit():
    """The product with a power of 5 decides most roundings from its first half (a 64 x
    64-bit product) and the rest from the whole product or CPython's strtod: random 17-
    and 19-digit decimals at every exponent, subnormals, the edges of the normal range,
    values near overflow, and halfway points cut to 17 and 19 digits, each float()'s bit
    for bit, in a number column and in an object of the common shape."""
    rng = random.Random(17)
    literals = long_decimals(rng, 17) + long_decimals(rng, 19)
    literals += [format(rng.uniform(0, 2.2250738585072014e-308), ".16e")
                 for _ in range(SWEEP or 500)]  # subnormals, 17 digits
    literals += [format(rng.uniform(0, 2.2250738585072014e-308), ".18e")
                 for _ in range(SWEEP or 500)]
    literals += [f"2.22507385850720{rng.randrange(10 ** 5):05d}e-308" for _ in range(200)]
    literals += [f"1.79769313486231{rng.randrange(10 ** 5):05d}e308" for _ in range(200)]
    literals += [f"{rng.randrange(10 ** 18, 10 ** 19)}e{rng.choice([289, 290, -307, -308])}"
                 for _ in range(200)]
    literals += halfway_literals(rng, SWEEP or 3000)
    assert_floats_bit_for_bit(literals)
    # the fast path's literals (no exponent): 17 and 19 digits, the point anywhere
    plain = []
    for digits in (17, 19):
        for _ in range(SWEEP or 2000):
            text = str(rng.randrange(10 ** (digits - 1), 10 ** digits))
            point = rng.randrange(-3, digits)
            plain.append(f"{rng.choice(['', '-'])}"
                         + (f"0.{'0' * -point}{text}"[:digits + 2] if point <= 0
                            else f"{text[:point]}.{text[point:]}"))
    assert_floats_bit_for_bit(plain, in_object=True)


@compiled_only
def test_integers_of_every_length_and_keys_in_any_order():
    """The integer fast path (8 digits a step) at every length up to 19 digits and past
    it, signs and bounds; objects whose keys come in the schema's order, out of it,
    spaced, escaped, repeated or unknown; strings ending where the buffer ends."""
    rng = random.Random(14)
    values = [sign * rng.randrange(10 ** (digits - 1), 10 ** digits) for digits in range(1, 20)
              for sign in (1, -1) for _ in range(20)]
    values += [10 ** k for k in range(19)] + [10 ** k - 1 for k in range(1, 20)]
    values += [2 ** 63 - 1, -2 ** 63, 2 ** 63, 10 ** 19, 10 ** 20 + 1]
    bodies = [str(value).encode() for value in values]
    bodies += [str(value).encode() + suffix for value in values[:40]
               for suffix in (b".0", b"e0", b".5", b" ")]
    compiled, errors, _ = twins(column_of({"type": "integer"}), bodies)
    assert compiled.to_pylist()[:len(values)] == [
        value if -2 ** 63 <= value < 2 ** 63 else None for value in values]
    schema = {"type": "object", "properties": {
        "alpha": {"type": "integer"}, "b": {"type": "string"},
        "a_key_longer_than_16_bytes": {"type": "number"}, "c": {"type": "boolean"},
        "t\u00e9": {"type": "string"}}}
    keys = ['"alpha":7', '"b":"x"', '"a_key_longer_than_16_bytes":1.5', '"c":true',
            '"t\\u00e9":"y"']
    documents = []
    for _ in range(300):
        chosen = rng.sample(keys, rng.randrange(len(keys) + 1))
        if rng.random() < 0.2:
            chosen.append('"unknown":[1,{"z":2}]')
        if rng.random() < 0.1 and chosen:
            chosen.append(rng.choice(chosen).replace("7", "8"))  # a key given again
        separator = rng.choice([",", ", ", " ,\n"])
        documents.append(("{" + separator.join(chosen) + "}").encode())
    documents.append(b'{"b":"end"}')  # a short string with no 16 bytes after it
    compiled, errors, _ = twins(column_of(schema), documents)
    assert compiled.to_pylist()[-1]["b"] == "end"


@compiled_only
def test_dates_date_times_and_base64_in_every_form_decode_alike():
    rng = random.Random(12)
    column = column_of({"type": "object", "properties": {
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "blob": {"type": "string", "contentEncoding": "base64"}}})
    bodies = []
    for _ in range(SWEEP or 3000):
        at = list(rng.choice(DATE_TIMES))
        if rng.random() < 0.7:  # one character changed
            at[rng.randrange(len(at))] = rng.choice("0123456789:-+.TtZz ,é")
        day = list(rng.choice(DATES))
        if rng.random() < 0.7 and day:
            day[rng.randrange(len(day))] = rng.choice("0123456789-/ ")
        blob = list(rng.choice(BASE64S) or "AAAA")
        if rng.random() < 0.5:
            blob[rng.randrange(len(blob))] = rng.choice("A=+/-_ \n\u00e9")
        name, value = rng.choice([("day", day), ("at", at), ("blob", blob)])
        bodies.append(json.dumps({name: "".join(value)}).encode())
    bodies += [json.dumps({"at": at}).encode() for at in DATE_TIMES]
    bodies += [json.dumps({"day": day}).encode() for day in DATES]
    bodies += [json.dumps({"blob": blob}).encode() for blob in BASE64S]
    bodies.append(b'{"at": "2024-02-29T10:20:30\\u005a", "day": "2024\\u002d02-29"}')
    _, errors, _ = twins(column, bodies)
    assert 0.1 < errors.count(None) / len(errors) < 0.9


@compiled_only
def test_truncated_and_garbled_documents_decode_alike_and_never_read_past_their_bytes():
    """Documents cut at every length, bytes flipped, dropped and inserted: every row gets
    the twin's value or error (the buffer around the spans is not JSON's end)."""
    rng = random.Random(13)
    column = column_of(EVERY)
    sources = documents(rng, 60)
    bodies = []
    for source in sources:
        bodies += [source[:cut] for cut in range(0, len(source), max(1, len(source) // 40))]
        for _ in range(20):
            garbled = bytearray(source)
            at = rng.randrange(len(garbled))
            change = rng.randrange(3)
            if change == 0:
                garbled[at] = rng.randrange(256)
            elif change == 1:
                del garbled[at]
            else:
                garbled[at:at] = bytes([rng.choice(b'{}[]",:\\ 0e.-nu\xc3\xa9\x80\xff\x00')])
            bodies.append(bytes(garbled))
    bodies += [b"", b" ", b"\xef\xbb\xbf{}", b"{}", b"[]", b"null", b"nul", b"{\"id\":1}x",
               b"{\"id\":1} {}", b"\"\\ud800\"", b"{" * 200 + b"}" * 200,
               b"[" * 5000 + b"]" * 5000, b'{"extra": ' + b"[" * 300 + b"]" * 300 + b"}",
               b'{"id": 1, "name": "n", "tags": [], "extra": ' + b'{"a":' * 150 + b"1"
               + b"}" * 150 + b"}"]
    twins(column, bodies)


@compiled_only
def test_duplicate_keys_take_the_last_value_even_where_the_first_does_not_fit():
    """json.loads keeps the last of duplicate keys: a first value that does not fit must
    not make a union pick another member, nor fail the row."""
    column = column_of({"type": "object", "properties": {
        "u": {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}}, {}]},
        "m": {"oneOf": [{"type": "object", "additionalProperties": {"type": "integer"}},
                        {}]},
        "a": {"type": "integer"}}})
    bodies = [b'{"u": {"a": "x", "a": 1}}', b'{"u": {"a": 1, "a": "x"}}',
              b'{"m": {"k": "x", "k": 2}}', b'{"m": {"k": 2, "k": "x"}}',
              b'{"m": {"k": 2, "j": 3, "k": 4}}', b'{"a": "x", "a": 5}', b'{"a": 5, "a": 6}',
              b'{"u": {"a": "x", "b": 1}}', b'{"m": {"k": "x", "j": 1}}',
              b'{"m": {' + b",".join(b'"k%d": %d' % (k, k) for k in range(40)) + b'}}',
              b'{"m": {' + b",".join(b'"k%d": %d' % (k % 39, k) for k in range(40)) + b'}}']
    compiled, errors, _ = twins(column, bodies)
    assert errors == [None] * len(bodies)
    assert compiled.to_pylist()[0]["u"] == {"member0": {"a": 1}, "member1": None}
    assert compiled.to_pylist()[1]["u"] == {"member0": None, "member1": '{"a":"x"}'}
    assert compiled.to_pylist()[2]["m"] == {"member0": [("k", 2)], "member1": None}


@compiled_only
def test_strings_escapes_and_unicode_decode_alike():
    rng = random.Random(14)
    column = column_of({"type": "object", "properties": {
        "s": {"type": "string"}, "m": {"type": "object", "additionalProperties": {
            "type": "string"}}, "e": {"enum": ["a", "\u00e9"]}}})
    bodies = []
    for _ in range(SWEEP or 2000):
        value = Obj([("s", text(rng, rng.randrange(30))),
                     ("m", Obj((text(rng, 2), text(rng, 4)) for _ in range(rng.randrange(3)))),
                     ("e", rng.choice([text(rng, 1), 1, None, [text(rng, 2)]]))])
        bodies.append(written(value, rng).encode("utf-8", "surrogatepass"))
    bodies += [b'{"s": "\\ud83d\\ude00\\ud83d"}', b'{"s": "\\ud83d\\u0041"}',
               b'{"s": "\\ud83d\\uzzzz"}', b'{"s": "\\u12"}', b'{"s": "\\x41"}',
               b'{"s": "a\x00b"}', b'{"s": "a\x7fb"}', b'{"s": "\xed\xa0\x80"}',
               b'{"s": "\xf4\x90\x80\x80"}', b'{"s": "\xc0\xaf"}', b'{"s": "\xe2\x82"}',
               b'{"\\u0073": "escaped key"}', b'{"s\\u0000": 1}', b'{"s": "\\/\\b\\f"}']
    twins(column, bodies)


def test_without_the_build_values_decode_row_by_row(monkeypatch):
    """decode_bodies with the compiled decoder unavailable: the row-by-row path's lists."""
    from segmentlog_datasource.decode import json_program

    monkeypatch.setattr(json_program, "extension", lambda: None)
    column = column_of({"type": "object", "properties": {"a": {"type": "integer"}}})
    values, errors = column.decode_bodies([b'{"a": 1}', b"{"])
    assert values == [{"a": 1}, None]
    assert errors[0] is None and errors[1].startswith("invalid JSON after the schema id")


@compiled_only
def test_a_read_decodes_columnar_with_the_row_by_row_paths_values_and_errors(tmp_path,
                                                                           monkeypatch):
    """The engine's read path (FramedColumn calls decode_columns): the same table, the
    PERMISSIVE reasons naming topic, partition and offset included, and the same FAILFAST
    error, with the compiled decoder and without it."""
    from segmentlog_datasource.decode import DecodedRead, json_schema
    from segmentlog_datasource.decode.reads import read_schema
    from segmentlog_datasource.errors import RecordDecodeError
    from segmentlog_datasource.format.scan import ScanOptions
    from segmentlog_datasource.read.options import parse_read_options
    from segmentlog_datasource.read.planning import Constraints
    from test_json_schema_values import orders_log

    logdir, export = orders_log(tmp_path)

    def read(mode):
        options = {"path": logdir, "valueFormat": "json", "schemas": export, "mode": mode}
        decoded = DecodedRead(options)
        plan = decoded.plan(decoded.read_options(parse_read_options(options)), Constraints())
        try:
            return pa.Table.from_batches(list(decoded.scan(plan, ScanOptions())),
                                         read_schema(options))
        except RecordDecodeError as failure:  # FAILFAST's, compared below
            return f"{type(failure).__name__}: {failure}"

    compiled = {mode: read(mode) for mode in ("PERMISSIVE", "FAILFAST")}
    monkeypatch.setattr(json_schema, "USE_COMPILED", False)
    pure = {mode: read(mode) for mode in ("PERMISSIVE", "FAILFAST")}
    assert compiled["PERMISSIVE"].equals(pure["PERMISSIVE"])
    assert compiled["PERMISSIVE"].column("valueError").null_count == 3
    assert compiled["FAILFAST"] == pure["FAILFAST"]
    assert compiled["FAILFAST"].startswith("RecordDecodeError: orders-0 offset 3: value: ")


@compiled_only
def test_the_reader_gives_python_values_to_decode_and_a_column_to_decode_columns():
    from segmentlog_datasource.decode.json_schema import JSON_SCHEMA
    from segmentlog_datasource.decode.registry import RegisteredSchema, SchemaRegistry

    schema = {"type": "object", "properties": {"k": {"oneOf": [{"type": "string"},
                                                                {"type": "integer"}]}}}
    registered = RegisteredSchema(1, "t-value", 1, "JSON", json.dumps(schema), ())
    registry = SchemaRegistry("the test's registry")
    registry.register(registered)
    reader = JSON_SCHEMA.reader(registered, registry)
    bodies = [b'{"k": 1}', b'{"k": "s"}', b"{", b"null"]
    values, errors = reader.decode(registered, registry, bodies)
    assert values[:2] == [{"k": {"member1": 1}}, {"k": {"member0": "s"}}]
    column, column_errors = reader.decode_columns(registered, registry, spans(bodies))
    assert isinstance(column, pa.Array) and column_errors == errors
    same_arrays(column, pa.array(values, reader.arrow_type))


@compiled_only
def test_a_run_from_a_checkouts_root_loads_the_build_of_the_same_source(tmp_path):
    """From a checkout's root (its working directory first on sys.path, as Spark's Python
    workers have it), the package imported is the checkout's, which holds no build: the
    installed copy's build loads, as it was built from the same source (SOURCE_SHA256),
    with no fallback warning."""
    copy_checkout_source(tmp_path)
    package, built = loaded_extension(tmp_path, "json_program")
    assert package.startswith(str(tmp_path))  # the checkout's package...
    assert not built.startswith(str(tmp_path))  # ...with the installed build


@pytest.mark.parametrize("changed", ["_jsoncolumns.c", "columns.h"])
def test_a_build_of_other_source_is_not_loaded_and_the_warning_says_so(tmp_path, changed):
    """A checkout whose _jsoncolumns.c, or the columns.h it includes, differs from the
    installed build's: the build is refused (its SOURCE_SHA256 is another),
    JsonCompiledUnavailableWarning says why, and values decode row by row."""
    copy_checkout_source(tmp_path)
    source = tmp_path / "segmentlog_datasource" / "decode" / changed
    source.write_text(source.read_text() + "\n/* changed */\n")
    script = ("import warnings, json\n"
              "from segmentlog_datasource.decode.json_schema import JsonSchemaColumn, "
              "SchemaDocument\n"
              "column = JsonSchemaColumn(SchemaDocument(json.dumps({'type': 'integer'})))\n"
              "with warnings.catch_warnings(record=True) as caught:\n"
              "    warnings.simplefilter('always')\n"
              "    values, errors = column.decode_bodies([b'1', b'x'])\n"
              "print(type(values).__name__, values, errors[1][:26])\n"
              "print([w.category.__name__ for w in caught])\n"
              "print(caught[0].message)\n")
    run = run_in_copy(tmp_path, script)
    assert run.returncode == 0, run.stderr
    decoded, warned, message = run.stdout.splitlines()
    assert decoded == "list [1, None] invalid JSON after the sch"
    assert warned == "['JsonCompiledUnavailableWarning']"
    assert "built from other source" in message or "not built" in message


# ------------------------------------------- objects in the common shape (the fast path)

# _jsoncolumns.c reads an object whose properties all come in the schema's order, compact,
# with a routine per column kind (fast_object); at anything else it rolls the object back
# and reads it again the general way. These documents are that shape and every way out of
# it, checked against the row-by-row path and against json.loads read by hand (FAST_KINDS).
FAST_SHAPE = {
    "type": "object", "additionalProperties": False,
    "required": ["order_id", "customer", "quantity", "created_at", "price", "ratio",
                 "a_key_longer_than_sixteen_bytes", "tags", "scores", "at"],
    "properties": {
        "order_id": {"type": "integer"},
        "customer": {"type": "string"},
        "quantity": {"type": "integer", "connect.type": "int32"},
        "created_at": {"type": "integer"},
        "price": {"type": "number"},
        "ratio": {"type": "number", "connect.type": "float32"},
        "flag": {"type": "boolean"},
        "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        "a_key_longer_than_sixteen_bytes": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "scores": {"type": "array", "items": {"type": ["integer", "null"]}},
        "at": {"type": "integer", "title": "org.apache.kafka.connect.data.Timestamp"},
        "inner": {"type": "object", "required": ["x"], "properties": {
            "x": {"type": "integer"}, "y": {"type": "string"}}},
    },
}
FAST_KINDS = {"order_id": "int64", "customer": "string", "quantity": "int32",
              "created_at": "int64", "price": "double", "ratio": "float", "flag": "bool",
              "note": "string?", "a_key_longer_than_sixteen_bytes": "string",
              "tags": "strings", "scores": "ints?", "at": "millis", "inner": "inner"}
FAST_VARIANTS = {
    "number": ["0", "-0", "7", "-7", "1.0", "-1.5", "1e2", "1E-2", "01", "-01", "-", "1.",
               ".5", "+1", "0.0", "-0.0", "9223372036854775807", "9223372036854775808",
               "-9223372036854775808", "-9223372036854775809", "123456789012345",
               "1234567890123456", "123456789012345678", "12345678901234567890123",
               "0.1234567890123456789", "0.12345678901234567891", "12345678.5",
               "0.000000000000000000000000001", "1e400", "true", "null", '"7"', "[]",
               "2147483647", "2147483648", "-2147483649", "17.000000000000000001",
               "9007199254740993", "9007199254740993.0", "1.7976931348623157e308",
               "3.4e39", "0.30000000000000004"],
    "string": ['"plain"', '""', '"' + "x" * 15 + '"', '"' + "x" * 16 + '"',
               '"' + "y" * 40 + '"', '"with \\"quote\\""', '"caf\\u00e9"', '"caf\u00e9"',
               '"tab\\t"', '"\\ud800"', '"\\ud83d\\ude00"', '"a\x01b"', '"a\x7fb"', "7",
               "null", "true", '"\xff"', '"unterminated'],
    "bool": ["true", "false", "tru", "1", "null", '"true"'],
    "array": ["[]", '["a"]', '["a","b"]', '[ "a"]', '["a" ,"b"]', '["a",]', "[1]", "null",
              '["a"', "[null]", "[1,null,-3]", "[1.0]", '[""]', "[[]]", "{}"],
    "object": ['{"x":1}', '{"x":1,"y":"z"}', '{"y":"z","x":1}', '{ "x":1}', '{"x":1,"x":2}',
               "{}", "null", '{"x":"1"}', '{"x":1,"w":[]}', "[]"],
}
FAST_VARIANT_OF = {"int64": "number", "int32": "number", "double": "number",
                   "float": "number", "millis": "number", "bool": "bool", "string": "string",
                   "string?": "string", "strings": "array", "ints?": "array",
                   "inner": "object"}


class Misfits(Exception):
    pass


def fast_field(kind, value, optional):
    """A property's value as FAST_SHAPE's column holds it, from json.loads's value (an
    independent reading: the mapping's rules written out again). An optional property
    takes null."""
    def integer(v, low, high):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            raise Misfits(kind)
        return v

    def string(v):
        if not isinstance(v, str) or any(0xd800 <= ord(ch) <= 0xdfff for ch in v):
            raise Misfits(kind)
        return v

    def number(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise Misfits(kind)
        try:
            v = float(v)
        except OverflowError:
            raise Misfits(kind) from None
        if math.isinf(v):
            raise Misfits(kind)
        return v

    if value is None and (optional or kind == "string?"):
        return None
    if kind == "int64":
        return integer(value, -2 ** 63, 2 ** 63 - 1)
    if kind == "int32":
        return integer(value, -2 ** 31, 2 ** 31 - 1)
    if kind == "millis":
        return integer(integer(value, -2 ** 63, 2 ** 63 - 1) * 1000, -2 ** 63, 2 ** 63 - 1)
    if kind == "double":
        return number(value)
    if kind == "float":  # as a cast to float32 rounds it (past its range: infinity)
        with np.errstate(over="ignore"):
            return float(np.float32(number(value)))
    if kind == "bool":
        if not isinstance(value, bool):
            raise Misfits(kind)
        return value
    if kind in ("string", "string?"):
        return string(value)
    if not isinstance(value, (list, dict)):
        raise Misfits(kind)
    if kind == "strings":
        if not isinstance(value, list):
            raise Misfits(kind)
        return [string(item) for item in value]
    if kind == "ints?":
        if not isinstance(value, list):
            raise Misfits(kind)
        return [None if item is None else integer(item, -2 ** 63, 2 ** 63 - 1)
                for item in value]
    if not isinstance(value, dict) or "x" not in value:  # inner
        raise Misfits(kind)
    return {"x": integer(value["x"], -2 ** 63, 2 ** 63 - 1),
            "y": None if "y" not in value else string(value["y"])}


def fast_expected(body):
    """The row FAST_SHAPE's column holds for `body`, read by json.loads; Misfits (or
    json's ValueError) where the row is an error."""
    document = json.loads(body)
    if document is None:
        return None
    if not isinstance(document, dict):
        raise Misfits("not an object")
    row = {}
    for name, kind in FAST_KINDS.items():
        if name not in document:
            if name in FAST_SHAPE["required"]:
                raise Misfits(name)
            row[name] = None
            continue
        row[name] = fast_field(kind, document[name], name not in FAST_SHAPE["required"])
    return row


def fast_record(rng) -> list:
    """(key, JSON text of its value) pairs of a FAST_SHAPE record, in the schema's order."""
    tags = [f"t{rng.randrange(100)}" for _ in range(rng.randrange(4))]
    values = {"order_id": rng.randrange(-2 ** 63, 2 ** 63) if rng.random() < 0.3
              else 10_000_000 + rng.randrange(10 ** 6),
              "customer": f"customer-{rng.randrange(10 ** 5)}", "quantity": rng.randrange(100),
              "created_at": 1_700_000_000_000 + rng.randrange(10 ** 6),
              "price": round(rng.uniform(0, 100), rng.randrange(1, 15)),
              "ratio": rng.random(), "flag": rng.random() < 0.5,
              "note": rng.choice([None, "gift wrap", "caf\u00e9"]),
              "a_key_longer_than_sixteen_bytes": "v" * rng.randrange(30), "tags": tags,
              "scores": [rng.choice([None, rng.randrange(-99, 99)])
                         for _ in range(rng.randrange(3))],
              "at": 1_700_000_000_000 + rng.randrange(10 ** 6),
              "inner": rng.choice([None, {"x": 1, "y": "z"}, {"x": -5}])}
    return [(key, json.dumps(value, separators=(",", ":"), ensure_ascii=False))
            for key, value in values.items()]


def rendered(pairs, open_="{", colon=":", comma=",", close="}") -> bytes:
    return (open_ + comma.join(f'"{key}"{colon}{value}' if not key.startswith("\\raw")
                               else key[4:] + colon + value for key, value in pairs)
            + close).encode()


def fast_bodies(rng, pairs) -> list:
    """A record in the common shape, then every way out of it."""
    out = [rendered(pairs)]
    for at in range(len(pairs) - 1):  # two keys in the other order
        swapped = list(pairs)
        swapped[at], swapped[at + 1] = swapped[at + 1], swapped[at]
        out.append(rendered(swapped))
    for space in (" ", "\n", "\t", "\r"):  # whitespace at each place the grammar has one
        out += [rendered(pairs, open_="{" + space), rendered(pairs, colon=space + ":"),
                rendered(pairs, colon=":" + space), rendered(pairs, comma=space + ","),
                rendered(pairs, comma="," + space), rendered(pairs, close=space + "}"),
                space.encode() + rendered(pairs), rendered(pairs) + space.encode()]
        at = rng.randrange(len(pairs))
        out.append(rendered(pairs[:at] + [(pairs[at][0], space + pairs[at][1])]
                            + pairs[at + 1:]))
    for at in range(len(pairs) + 1):
        # an unknown key between known ones; a key left out; a key escaped; one repeated
        out.append(rendered(pairs[:at] + [("zz_unknown", '[1,{"a":2}]')] + pairs[at:]))
        if at < len(pairs):
            key, value = pairs[at]
            out.append(rendered(pairs[:at] + pairs[at + 1:]))
            out.append(rendered(pairs[:at] + [("\\raw" + '"\\u%04x%s"' % (ord(key[0]), key[1:]),
                                               value)] + pairs[at + 1:]))
            out.append(rendered(pairs[:at + 1] + [(key, value)] + pairs[at + 1:]))
            out.append(rendered(pairs + [(key, rng.choice(
                FAST_VARIANTS[FAST_VARIANT_OF[FAST_KINDS[key]]]))]))
            for variant in FAST_VARIANTS[FAST_VARIANT_OF[FAST_KINDS[key]]]:
                out.append(rendered(pairs[:at] + [(key, variant)] + pairs[at + 1:]))
    out += [b"null", b"{}", b"[]", b'{"order_id":1}', rendered(pairs)[:-1] + b",}"]
    return out


@compiled_only
def test_objects_in_the_common_shape_and_every_way_out_of_it_decode_alike():
    rng = random.Random(42)
    column = column_of(FAST_SHAPE)
    records = [fast_record(rng) for _ in range(12)]
    common = [rendered(pairs) for pairs in records]
    bodies = [body for pairs in records for body in fast_bodies(rng, pairs)]
    compiled, errors, _ = twins(column, bodies)
    plain_type = storage(column.type)
    rows = compiled.cast(plain_type).to_pylist()
    for body, row, error in zip(bodies, rows, errors):
        try:
            expected = fast_expected(body)
        except (Misfits, ValueError, UnicodeDecodeError):
            assert error is not None, body
            continue
        assert error is None, (body, error)
        assert exact(row) == exact(expected), body
    # every kind of row is there, and the common shape is read in C, none left to Python
    assert 0.3 < errors.count(None) / len(errors) < 0.9
    _, common_errors, deferred = twins(column, common, deferred=[])
    assert common_errors == [None] * len(common)


@compiled_only
def test_documents_cut_short_in_the_common_shape_read_nothing_past_their_end():
    """Each record cut at every byte, its span in a buffer that holds the whole record
    (what follows the cut is the rest of a valid document): every cut is an error, as
    json.loads says, and the compiled rows are the row-by-row path's."""
    rng = random.Random(43)
    column = column_of(FAST_SHAPE)
    whole = [rendered(fast_record(rng)) for _ in range(6)]
    data = b"".join(whole)
    starts, ends, offset = [], [], 0
    for body in whole:
        for cut in range(len(body) + 1):
            starts.append(offset)
            ends.append(offset + cut)
        offset += len(body)
    payloads = Payloads(data, np.array(starts), np.array(ends))
    bodies = list(payloads)
    compiled, errors = column.decode_bodies(payloads, compiled=True)
    pure_values, pure_errors = column.decode_bodies(bodies, compiled=False)
    assert errors == pure_errors
    same_arrays(compiled, pa.array(pure_values, column.type))
    for body, error in zip(bodies, errors):
        complete = any(body == record for record in whole)
        assert (error is None) == complete, body


@compiled_only
def test_doubles_in_objects_of_the_common_shape_are_pythons_float_bit_for_bit():
    """The fast path's numbers (no exponent, up to 19 digits): shortest reprs, and halfway
    points between adjacent doubles and their neighbours cut to 16 to 19 digits (where the
    product with a power of 5 cannot decide and CPython's strtod does), each float()'s bit
    for bit, and none left to Python."""
    from decimal import Decimal, localcontext

    rng = random.Random(15)
    count = SWEEP or 3000
    literals = []
    for _ in range(count):
        value = rng.uniform(-1e6, 1e6) * 10.0 ** rng.randrange(-6, 9)
        literals.append(format(value, "f") if "e" in repr(value) else repr(value))
    with localcontext() as context:
        context.prec = 200
        while len(literals) < 2 * count:
            low = rng.uniform(1e-3, 1e14)
            high = math.nextafter(low, math.inf)
            middle = (Decimal(low) + Decimal(high)) / 2
            step = (Decimal(high) - Decimal(low)) / Decimal(10 ** 12)
            for point in (middle, middle + step, middle - step):
                whole, fraction = format(point, "f").split(".")
                for digits in (16, 17, 18, 19):
                    literals.append(f"{whole}.{fraction[:max(1, digits - len(whole))]}")
    # halfway points of 19 digits exactly (doubles are 1/8 apart in [2^49, 2^50)): the
    # product cannot decide them, CPython's strtod does
    for _ in range(count // 10):
        sixteenths = 2 ** 53 + 2 * rng.randrange((10 ** 15 - 2 ** 49) * 8) + 1
        literals.append(f"{rng.choice(['', '-'])}{sixteenths // 16}."
                        f"{sixteenths % 16 * 625:04d}")
    assert_floats_bit_for_bit(literals, in_object=True)


@compiled_only
def test_garbled_documents_in_the_common_shape_decode_alike():
    """Records of the common shape with a byte changed, dropped or inserted anywhere: the
    fast path bails at each, or reads it as the general path would."""
    rng = random.Random(44)
    column = column_of(FAST_SHAPE)
    bodies = []
    for _ in range(SWEEP // 100 or 20):
        source = rendered(fast_record(rng))
        for _ in range(100):
            garbled = bytearray(source)
            at = rng.randrange(len(garbled))
            change = rng.randrange(3)
            if change == 0:
                garbled[at] = rng.choice(b'{}[]",:\\ 0159e.-+ntfu\xc3\xa9\x80\xff\x00\x1f')
            elif change == 1:
                del garbled[at]
            else:
                garbled[at:at] = bytes([rng.choice(b'{}[]",:\\ 09e.-n\xc3\x80\x00')])
            bodies.append(bytes(garbled))
    _, errors, _ = twins(column, bodies)
    assert 0.05 < errors.count(None) / len(errors) < 0.95
