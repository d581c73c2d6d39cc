"""valueFormat=json on write, the language alone (no Spark, no registration): schemas
derived from Arrow types and read back by the decode layer into the same types, payloads
checked by the standard library's json and the jsonschema package, given schemas as
Schema Registry stores them, and compatibility by Schema Registry's JSON Schema rules."""
import datetime as dt
import json
import re

import jsonschema
import pyarrow as pa
import pytest

from segmentlog_datasource.decode.json_schema import JsonSchemaColumn, SchemaDocument
from segmentlog_datasource.errors import InvalidOptionError
from segmentlog_datasource.writer import write_log
from segmentlog_datasource.writer.errors import InvalidInputError
from segmentlog_datasource.writer.json_schema import JsonSchemaFormat
from segmentlog_datasource.writer.schema_format import PayloadMisfit, schema_format
from support.reading import decoded_rows

UTC = dt.timezone.utc
FORMAT = JsonSchemaFormat()
NULL = {"type": "null"}

ORDER = pa.struct([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("tiny", pa.int8()),
    pa.field("small", pa.int16()),
    pa.field("qty", pa.int32(), nullable=False),
    pa.field("ratio", pa.float32()),
    pa.field("score", pa.float64()),
    pa.field("ok", pa.bool_()),
    pa.field("name", pa.string()),
    pa.field("blob", pa.binary()),
    pa.field("day", pa.date32()),
    pa.field("at", pa.timestamp("us", tz="UTC")),
    pa.field("tags", pa.list_(pa.string())),
    pa.field("attrs", pa.map_(pa.string(), pa.int64())),
    pa.field("address", pa.struct([pa.field("city", pa.string(), nullable=False),
                                   pa.field("zip", pa.int32())])),
])
ROWS = [
    {"id": 1, "tiny": -128, "small": 32767, "qty": 3, "ratio": 0.1, "score": -2.5e-300,
     "ok": True, "name": "ä \"q\" \n", "blob": b"\x00\xff\x10", "day": dt.date(2024, 2, 29),
     "at": dt.datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=UTC), "tags": ["x", None, ""],
     "attrs": [("a", 1), ("b", -(2 ** 63))], "address": {"city": "Oslo", "zip": None}},
    None,  # a null value: a null Kafka value
    {"id": 2, "tiny": None, "small": None, "qty": 0, "ratio": None, "score": None,
     "ok": None, "name": None, "blob": None, "day": None, "at": None, "tags": [],
     "attrs": [], "address": None},
    {"id": -3, "tiny": 0, "small": 0, "qty": -1, "ratio": 3.4e38, "score": 1e300,
     "ok": False, "name": "", "blob": b"", "day": dt.date(1, 1, 1),
     "at": dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC), "tags": None,
     "attrs": None, "address": {"city": "", "zip": 7}},
]


def column(rows=ROWS, type_=ORDER):
    return pa.array(rows, type_)


def decoded_type(text):
    """The column type the decode layer reads a schema into."""
    return JsonSchemaColumn(SchemaDocument(text)).type


def decode(text, payload):
    """A payload as the decode layer reads it into its schema's column."""
    reader = JsonSchemaColumn(SchemaDocument(text))
    return pa.array([reader.convert(json.loads(payload))], reader.type).to_pylist()[0]


# -- derived schemas -------------------------------------------------------------------

@pytest.mark.parametrize("arrow, expected", [
    (pa.bool_(), {"type": "boolean"}),
    (pa.int8(), {"type": "integer", "connect.type": "int8"}),
    (pa.int16(), {"type": "integer", "connect.type": "int16"}),
    (pa.int32(), {"type": "integer", "connect.type": "int32"}),
    (pa.int64(), {"type": "integer"}),
    (pa.float32(), {"type": "number", "connect.type": "float32"}),
    (pa.float64(), {"type": "number"}),
    (pa.string(), {"type": "string"}),
    (pa.binary(), {"type": "string", "contentEncoding": "base64"}),
    (pa.date32(), {"type": "string", "format": "date"}),
    (pa.timestamp("us", tz="UTC"), {"type": "string", "format": "date-time"}),
    (pa.list_(pa.field("element", pa.int64(), nullable=False)),
     {"type": "array", "items": {"type": "integer"}}),
    (pa.list_(pa.string()),
     {"type": "array", "items": {"oneOf": [NULL, {"type": "string"}]}}),
    (pa.map_(pa.string(), pa.field("value", pa.bool_(), nullable=False)),
     {"type": "object", "additionalProperties": {"type": "boolean"}}),
    (pa.map_(pa.string(), pa.float64()),
     {"type": "object", "additionalProperties": {"oneOf": [NULL, {"type": "number"}]}}),
    (pa.struct([pa.field("a", pa.string(), nullable=False), pa.field("b", pa.int64())]),
     {"type": "object", "properties": {"a": {"type": "string"},
                                       "b": {"oneOf": [NULL, {"type": "integer"}]}},
      "required": ["a"], "additionalProperties": False}),
])
def test_each_type_is_derived_and_read_back_as_itself(arrow, expected):
    struct = pa.struct([pa.field("f", arrow, nullable=False), pa.field("g", arrow)])
    text = FORMAT.derive_schema(struct, "shop.Order", "value")
    assert json.loads(text) == {
        "title": "shop.Order", "type": "object",
        "properties": {"f": expected, "g": {"oneOf": [NULL, expected]}},
        "required": ["f"], "additionalProperties": False}
    assert decoded_type(text) == struct


def test_derived_schema_text_is_compact_and_titled_top_level_record_by_default():
    text = FORMAT.derive_schema(pa.struct([pa.field("id", pa.int64(), nullable=False)]),
                                None, "value")
    assert text == ('{"title":"topLevelRecord","type":"object","properties":{"id":'
                    '{"type":"integer"}},"required":["id"],"additionalProperties":false}')
    assert FORMAT.record_name(text) == "topLevelRecord"
    assert FORMAT.derive_schema(ORDER, None, "value") == \
        FORMAT.given_schema(FORMAT.derive_schema(ORDER, None, "value"), "valueJsonSchema",
                            ORDER, "value")


@pytest.mark.parametrize("arrow, field, words", [
    (pa.decimal128(9, 2), "price", "cast it to double or to string"),
    (pa.map_(pa.int32(), pa.string()), "price", "int32 keys"),
    (pa.time64("us"), "price", "time64"),
    (pa.struct([pa.field("inner", pa.list_(pa.decimal128(5, 1)))]), "price.inner[]",
     "decimal"),
    (pa.struct([]), "price", "without fields"),
])
def test_types_without_json_schema_are_refused_naming_the_field(arrow, field, words):
    struct = pa.struct([pa.field("id", pa.int64()), pa.field("price", arrow)])
    with pytest.raises(InvalidInputError) as refused:
        FORMAT.derive_schema(struct, None, "value")
    assert f"column 'value'.{field} " in str(refused.value)
    assert words in str(refused.value)


def test_a_column_that_is_not_a_struct_is_refused():
    with pytest.raises(InvalidInputError, match="column 'key' has type int64"):
        FORMAT.derive_schema(pa.int64(), None, "key")


def test_the_format_is_registered_under_json():
    found = schema_format("json")
    assert isinstance(found, JsonSchemaFormat)
    assert (found.name, found.schema_type, found.schema_option) == \
        ("json", "JSON", "JsonSchema")


# -- payloads --------------------------------------------------------------------------

def test_written_values_read_back_through_a_log(tmp_path):
    text = FORMAT.derive_schema(ORDER, "shop.Order", "value")
    payloads = FORMAT.encode_payloads(column(), text)
    framed = [None if p is None else b"\x00" + (7).to_bytes(4, "big") + p for p in payloads]
    export = tmp_path / "schemas.json"
    export.write_text(json.dumps([{"id": 7, "subject": "orders-value", "version": 1,
                                   "schemaType": "JSON", "schema": text, "references": []}]))
    logdir = str(tmp_path / "log")
    write_log(logdir, pa.table({"value": pa.array(framed, pa.binary())}), topic="orders",
              num_partitions=1)
    rows = decoded_rows({"path": logdir, "subscribe": "orders", "valueFormat": "json",
                         "schemas": str(export)})
    assert [row["valueDecoded"] for row in rows] == column().to_pylist()


def test_payloads_are_json_the_derived_schema_validates():
    text = FORMAT.derive_schema(ORDER, None, "value")
    validator = jsonschema.Draft7Validator(json.loads(text),
                                           format_checker=jsonschema.FormatChecker())
    payloads = FORMAT.encode_payloads(column(), text)
    assert payloads[1] is None
    first = json.loads(payloads[0].decode("utf-8"))
    for payload in payloads:
        if payload is not None:
            validator.validate(json.loads(payload))
    assert first["ratio"] == 0.1  # float32 as its shortest decimal, as Java writes a Float
    assert first["blob"] == "AP8Q"
    assert first["day"] == "2024-02-29"
    assert first["at"] == "2024-05-06T07:08:09.000010Z"
    assert first["attrs"] == {"a": 1, "b": -(2 ** 63)}
    assert first["address"] == {"city": "Oslo", "zip": None}
    assert json.loads(payloads[3])["at"] == "1969-12-31T23:59:59Z"
    assert "\\u00e4" not in payloads[0].decode("utf-8")  # UTF-8, not escaped, as Jackson


def test_timestamps_in_other_zones_and_units_are_written_in_utc():
    struct = pa.struct([pa.field("at", pa.timestamp("ms", tz="Asia/Tokyo"))])
    values = pa.array([{"at": dt.datetime(2024, 1, 1, 9, 0, 0, 123000, tzinfo=UTC)}], struct)
    text = FORMAT.derive_schema(struct, None, "value")
    assert json.loads(FORMAT.encode_payloads(values, text)[0]) == \
        {"at": "2024-01-01T09:00:00.123000Z"}


GIVEN = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "shop.Order",
    "type": "object",
    "definitions": {"money": {"type": "number", "minimum": 0}},
    "properties": {
        "id": {"type": "integer"},
        "qty": {"type": "integer", "connect.type": "int8"},
        "price": {"$ref": "#/definitions/money"},
        "status": {"enum": ["open", "closed", None]},
        "note": {"type": ["string", "null"]},
        "day": {"type": "integer", "title": "org.apache.kafka.connect.data.Date"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {},
    },
    "required": ["id", "tags"],
}
GIVEN_TYPE = pa.struct([
    pa.field("id", pa.int32()), pa.field("qty", pa.int64()), pa.field("price", pa.float64()),
    pa.field("status", pa.string()), pa.field("note", pa.string()),
    pa.field("day", pa.date32()), pa.field("tags", pa.list_(pa.string())),
    pa.field("extra", pa.struct([pa.field("x", pa.binary())])),
])


def test_values_follow_a_given_schema():
    text = FORMAT.given_schema(json.dumps(GIVEN), "valueJsonSchema", GIVEN_TYPE, "value")
    rows = [{"id": 1, "qty": 5, "price": 2.5, "status": "open", "note": None,
             "day": dt.date(1970, 1, 11), "tags": ["a"], "extra": {"x": b"\x01"}},
            {"id": 2, "qty": None, "price": None, "status": None, "note": "n",
             "day": None, "tags": [], "extra": None}]
    payloads = FORMAT.encode_payloads(column(rows, GIVEN_TYPE), text)
    validator = jsonschema.Draft7Validator(GIVEN)
    for payload in payloads:
        validator.validate(json.loads(payload))
    # an optional property that takes no null is left out; one that takes null is null
    assert json.loads(payloads[1]) == {"id": 2, "status": None, "note": "n", "tags": [],
                                       "extra": None}
    assert json.loads(payloads[0])["day"] == 10  # Connect's Date: days since the epoch
    assert json.loads(payloads[0])["extra"] == {"x": "AQ=="}
    assert decode(text, payloads[0])["qty"] == 5
    assert decode(text, payloads[0])["day"] == dt.date(1970, 1, 11)


@pytest.mark.parametrize("schema, arrow, rows, row, reason", [
    ({"properties": {"a": {"type": "string"}}, "required": ["a"]}, pa.string(),
     [{"a": "x"}, {"a": None}], 1, "field a: null, and the schema requires a value"),
    ({"properties": {"a": {"type": "integer", "connect.type": "int8"}}}, pa.int64(),
     [{"a": 127}, None, {"a": 128}], 2, "field a: 128 is out of the range of the "
                                        "schema's 8-bit integer"),
    ({"properties": {"a": {"type": "string"}}}, pa.int64(), [{"a": None}, {"a": 1}], 1,
     "field a: the column's int64 does not fit the schema's type string"),
    ({"properties": {"a": {"enum": ["x", "y"]}}}, pa.string(), [{"a": "z"}], 0,
     "field a: \"z\" is not among the schema's enum"),
    ({"properties": {"a": {"type": "array", "items": {"type": "string",
                                                      "format": "date"}}}},
     pa.list_(pa.string()), [{"a": ["2024-01-01", "2024-13-01"]}], 0,
     "field a[1]: '2024-13-01' is not a date"),
    ({"properties": {"a": {"type": "array", "items": {"type": "number"}}}},
     pa.list_(pa.float64()), [{"a": [1.0, None]}], 0,
     "field a[1]: null, and the array's items take no null"),
    ({"properties": {"a": {"type": "number"}}}, pa.float64(), [{"a": float("nan")}], 0,
     "field a: nan is not a JSON number"),
    ({"properties": {"a": {"type": "object", "additionalProperties": {"type": "integer"}}}},
     pa.map_(pa.string(), pa.float64()), [{"a": [("k", 1.0), ("j", 1.5)]}], 0,
     "field a['j']: 1.5 is not an integer"),
    ({"properties": {"a": {"type": "object", "properties": {
        "b": {"type": "string", "contentEncoding": "base64"}}}}},
     pa.struct([pa.field("b", pa.string())]), [{"a": {"b": "%%"}}], 0,
     "field a.b: '%%' is not base64 text"),
])
def test_a_value_that_does_not_fit_is_a_misfit_naming_row_and_field(schema, arrow, rows,
                                                                     row, reason):
    struct = pa.struct([pa.field("a", arrow)])
    text = FORMAT.given_schema(json.dumps(schema), "valueJsonSchema", struct, "value")
    with pytest.raises(PayloadMisfit) as misfit:
        FORMAT.encode_payloads(pa.array(rows, struct), text)
    assert misfit.value.row == row
    assert misfit.value.reason.startswith(reason), misfit.value.reason


# -- given schemas ---------------------------------------------------------------------

def test_a_given_schema_is_stored_as_jackson_writes_it():
    text = ('{ "type" : "object", "title": "t\\u001f\\/",\n "properties" : {"a": '
            '{"type": "number", "maximum": 1.50, "minimum": 1e2, "multipleOf": 0.00000025,'
            ' "description": "é"}}}')
    stored = FORMAT.given_schema(text, "valueJsonSchema",
                                 pa.struct([pa.field("a", pa.float64())]), "value")
    assert stored == ('{"type":"object","title":"t\\u001F/","properties":{"a":'
                      '{"type":"number","maximum":1.50,"minimum":1E+2,"multipleOf":2.5E-7,'
                      '"description":"é"}}}')


def test_same_schema_is_the_same_stored_text():
    a = '{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}'
    assert FORMAT.same_schema(a, json.dumps(json.loads(a), indent=2))
    assert not FORMAT.same_schema(
        a, '{"properties":{"a":{"type":"string"},"b":{"type":"integer"}},"type":"object"}')
    assert not FORMAT.same_schema(a, a.replace("integer", "number"))


@pytest.mark.parametrize("text, words", [
    ("{not json", "option 'valueJsonSchema' is not JSON"),
    ('{"type": "array", "items": {}}', "must be the JSON Schema of an object"),
    ("[1]", "must be a JSON Schema object"),
    ('{"properties": {"a": {"$ref": "other.json#/a"}}}', "refers to 'other.json#/a'"),
    ('{"properties": {"a": {"type": "text"}}}', "at #/properties/a has type 'text'"),
    ('{"properties": {"a": {"$ref": "#/definitions/none"}}}', "which does not exist"),
])
def test_a_given_schema_that_is_not_one_is_an_option_error(text, words):
    with pytest.raises(InvalidOptionError) as refused:
        FORMAT.given_schema(text, "valueJsonSchema", pa.struct([pa.field("a", pa.string())]),
                            "value")
    assert refused.value.option == "valueJsonSchema"
    assert words in str(refused.value)


@pytest.mark.parametrize("schema, words", [
    ({"properties": {"a": {"type": "string"}}}, "field(s) 'b'"),
    ({"properties": {"a": {"type": "string"}, "b": {"type": "object", "properties": {}}},
      "additionalProperties": False}, "field(s) 'b.c'"),
    ({"properties": {"a": {"type": "string"}, "b": {}, "d": {"type": "string"}},
      "required": ["d"]}, "lacks field(s) 'd' that option 'valueJsonSchema' requires"),
])
def test_column_fields_the_given_schema_lacks_are_refused(schema, words):
    struct = pa.struct([pa.field("a", pa.string()),
                        pa.field("b", pa.struct([pa.field("c", pa.int64())]))])
    with pytest.raises(InvalidInputError) as refused:
        FORMAT.given_schema(json.dumps(schema), "valueJsonSchema", struct, "value")
    assert "column 'value'" in str(refused.value) and words in str(refused.value)


def test_record_name_is_the_title_as_the_registry_reads_it():
    assert FORMAT.record_name('{"title": "shop.Order", "type": "object"}') == "shop.Order"
    assert FORMAT.record_name('{"title": 5}') == "5"
    assert FORMAT.record_name('{"type": "object"}') is None


# -- compatibility ---------------------------------------------------------------------

def derived(*fields):
    return FORMAT.derive_schema(pa.struct(list(fields)), None, "value")


def obj(properties, required=(), closed=None, **more):
    schema = {"type": "object", "properties": properties, **more}
    if required:
        schema["required"] = list(required)
    if closed is not None:
        schema["additionalProperties"] = not closed
    return json.dumps(schema)


ID = pa.field("id", pa.int64(), nullable=False)
NAME = pa.field("name", pa.string())
S, I, N = {"type": "string"}, {"type": "integer"}, {"type": "number"}
V1 = derived(ID)
V2 = derived(ID, NAME)
CASES = [
    # (level, [earlier versions, oldest first], new, None or (version, rule, field path))
    ("BACKWARD", [V1], V2, None),  # a nullable column added to a closed model
    ("BACKWARD", [V1], derived(ID, pa.field("qty", pa.int32(), nullable=False)),
     (1, "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "field qty")),
    ("BACKWARD", [V2], V1, (1, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "field name")),
    ("FORWARD", [V2], V1, None),
    ("FORWARD", [V1], V2, (1, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "field name")),
    ("FULL", [V1], V2, (1, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "field name")),
    ("NONE", [V1], derived(pa.field("id", pa.string())), None),
    ("BACKWARD", [obj({"a": S})], obj({"a": S, "b": S}),
     (1, "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "field b")),
    ("BACKWARD", [obj({"a": S, "b": S})], obj({"a": S}), None),
    ("BACKWARD", [obj({"a": S}, closed=True)], obj({"a": S, "b": S}, closed=True), None),
    ("BACKWARD", [obj({"a": S}, closed=False)], obj({"a": S, "b": S}, closed=True),
     (1, "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "field b")),
    ("BACKWARD", [obj({"a": S})], obj({"a": S}, closed=True),
     (1, "ADDITIONAL_PROPERTIES_REMOVED", "#/additionalProperties")),
    ("BACKWARD", [obj({"a": S}, closed=True)], obj({"a": S}), None),
    ("BACKWARD", [obj({"a": S}, closed=True)],
     obj({"a": S, "b": {"type": "string", "default": "x"}}, ["b"], closed=True), None),
    ("BACKWARD", [obj({"a": I})], obj({"a": N}), None),
    ("BACKWARD", [obj({"a": N})], obj({"a": I}), (1, "TYPE_NARROWED", "field a")),
    ("FORWARD", [obj({"a": N})], obj({"a": I}), None),
    ("BACKWARD", [obj({"a": S})], obj({"a": I}), (1, "TYPE_CHANGED", "field a")),
    ("BACKWARD", [obj({"a": S})], obj({"a": {"oneOf": [NULL, S]}}), None),
    ("BACKWARD", [obj({"a": {"oneOf": [NULL, S]}})], obj({"a": S}),
     (1, "TYPE_CHANGED", "field a")),
    # a type list is an anyOf: oneOf -> anyOf widens, anyOf -> oneOf changes the combination
    ("BACKWARD", [obj({"a": {"oneOf": [NULL, S]}})], obj({"a": {"type": ["string", "null"]}}),
     None),
    ("BACKWARD", [obj({"a": {"type": ["string", "null"]}})], obj({"a": {"oneOf": [NULL, S]}}),
     (1, "COMBINED_TYPE_CHANGED", "field a")),
    ("BACKWARD", [obj({"a": {"oneOf": [S, I]}})], obj({"a": {"oneOf": [S]}}),
     (1, "SUM_TYPE_NARROWED", "field a")),
    ("BACKWARD", [obj({"a": S})], obj({"a": S}, ["a"]),
     (1, "REQUIRED_ATTRIBUTE_ADDED", "field a")),
    ("BACKWARD", [obj({"a": S})], obj({"a": {"type": "string", "default": ""}}, ["a"]), None),
    ("BACKWARD", [obj({"a": S}, ["a"])], obj({"a": S}), None),
    ("BACKWARD", [obj({"a": {"enum": ["x", "y"]}})], obj({"a": {"enum": ["x", "y", "z"]}}),
     None),
    ("BACKWARD", [obj({"a": {"enum": ["x", "y"]}})], obj({"a": {"enum": ["x"]}}),
     (1, "ENUM_ARRAY_NARROWED", "field a")),
    ("FORWARD", [obj({"a": {"enum": ["x", "y"]}})], obj({"a": {"enum": ["x", "y", "z"]}}),
     (1, "ENUM_ARRAY_NARROWED", "field a")),
    ("BACKWARD", [obj({"a": {"type": "string", "format": "date"}})],
     obj({"a": {"type": "string", "format": "date-time"}}), None),  # formats not compared
    ("BACKWARD", [obj({"a": S})], obj({"a": {"type": "string", "maxLength": 5}}),
     (1, "MAX_LENGTH_ADDED", "field a")),
    ("BACKWARD", [obj({"a": {"type": "array", "items": S}})],
     obj({"a": {"type": "array", "items": I}}), (1, "TYPE_CHANGED", "field a[]")),
    ("BACKWARD", [obj({"a": {"type": "array", "items": S}})],
     obj({"a": {"type": "array", "items": S, "minItems": 1}}),
     (1, "MIN_ITEMS_ADDED", "field a")),
    ("BACKWARD", [obj({"a": S, "b": S})], obj({"a": S, "b": S}, dependencies={"a": ["b"]}),
     (1, "DEPENDENCY_ARRAY_ADDED", "#/dependencies/a")),
    ("BACKWARD", [obj({"a": {"type": "object", "additionalProperties": I}})],
     obj({"a": {"type": "object", "additionalProperties": S}}),
     (1, "TYPE_CHANGED", "field a{}")),
    ("BACKWARD", [derived(pa.field("address", pa.struct([pa.field("zip", pa.int32())])))],
     derived(pa.field("address", pa.struct([pa.field("zip", pa.string())]))),
     (1, "COMBINED_TYPE_SUBSCHEMAS_CHANGED", "field address")),
    ("BACKWARD", [obj({"a": {"type": "object", "properties": {"b": S}}})],
     obj({"a": {"type": "object", "properties": {"b": I}}}), (1, "TYPE_CHANGED", "field a.b")),
    ("BACKWARD", [obj({"a": {"$ref": "#/definitions/d"}}, definitions={"d": S})],
     obj({"a": I}), (1, "TYPE_CHANGED", "field a")),
    ("BACKWARD", [obj({"a": S}, title="x")], obj({"a": S}, title="y", description="d"), None),
    # transitive levels check every version, newest first; the others only the latest
    ("BACKWARD", [obj({"a": S}), obj({"a": N}), obj({"a": I})], obj({"a": N}), None),
    ("BACKWARD_TRANSITIVE", [obj({"a": S}), obj({"a": N}), obj({"a": I})], obj({"a": N}),
     (1, "TYPE_CHANGED", "field a")),
    ("FORWARD", [obj({"a": I}), obj({"a": N})], obj({"a": N}), None),
    ("FORWARD_TRANSITIVE", [obj({"a": I}), obj({"a": N})], obj({"a": N}),
     (1, "TYPE_NARROWED", "field a")),
    ("FULL_TRANSITIVE", [V1, V1], V2,
     (2, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "field name")),
]


@pytest.mark.parametrize("level, earlier, new, expected", CASES)
def test_compatibility_as_schema_registry_checks_it(level, earlier, new, expected):
    problem = FORMAT.compatibility_problem(level, new, list(enumerate(earlier, 1)))
    if expected is None:
        assert problem is None
        return
    version, rule, where = expected
    assert problem is not None, f"expected {rule}"
    assert problem[0] == version
    assert f"{where} " in problem[1] or f"{where}:" in problem[1], problem[1]
    assert f": {rule}" in problem[1], problem[1]
    direction = "the new schema cannot read data written with it" \
        if level.startswith("BACKWARD") or (level.startswith("FULL") and
                                             "cannot read data written with it" in problem[1]) \
        else "it cannot read data written with the new schema"
    assert problem[1].startswith(direction)


def test_a_nested_union_mismatch_names_the_inner_field():
    before = derived(pa.field("address", pa.struct([pa.field("zip", pa.int32())])))
    after = derived(pa.field("address", pa.struct([pa.field("zip", pa.string())])))
    _, reason = FORMAT.compatibility_problem("BACKWARD", after, [(3, before)])
    assert re.search(r"#/properties/address/oneOf/1/properties/zip\S*: TYPE_CHANGED", reason)


def test_an_unknown_level_is_an_option_error():
    with pytest.raises(InvalidOptionError, match="'SIDEWAYS'"):
        FORMAT.compatibility_problem("sideways", V1, [(1, V1)])


PERCENT = {"type": "object", "title": "x",
           "definitions": {"a b": {"type": "string", "maxLength": 3},
                           "c/d": {"type": "integer"}},
           "properties": {"name": {"$ref": "#/definitions/a%20b"},
                          "count": {"$ref": "#/definitions/c~1d"}}}


def test_a_percent_encoded_ref_is_followed_on_write_in_compatibility_and_in_decoding():
    """`#/definitions/a%20b` names the definition "a b" (a JSON pointer in a URI fragment is
    percent-decoded), in the one resolver every side uses: a write encodes by it, the
    compatibility check compares what it names, and a read decodes by it."""
    arrow = pa.struct([pa.field("name", pa.string()), pa.field("count", pa.int64())])
    text = FORMAT.given_schema(json.dumps(PERCENT), "valueJsonSchema", arrow, "value")
    payloads = FORMAT.encode_payloads(column([{"name": "abc", "count": 7}], arrow), text)
    assert json.loads(payloads[0]) == {"name": "abc", "count": 7}
    # the referenced types are the values' types: a number is no string
    with pytest.raises(PayloadMisfit, match="field name"):
        FORMAT.encode_payloads(column([{"name": 5, "count": 1}], pa.struct(
            [pa.field("name", pa.int64()), pa.field("count", pa.int64())])), text)
    assert decode(text, payloads[0]) == {"name": "abc", "count": 7}
    narrowed = json.loads(json.dumps(PERCENT))
    narrowed["definitions"]["a b"]["maxLength"] = 2
    problem = FORMAT.compatibility_problem("BACKWARD", json.dumps(narrowed),
                                           [(1, json.dumps(PERCENT))])
    assert problem is not None and "MAX_LENGTH_DECREASED" in problem[1], problem
    assert FORMAT.compatibility_problem("BACKWARD", json.dumps(PERCENT),
                                        [(1, json.dumps(PERCENT))]) is None
