"""valueFormat=json: Schema Registry framed JSON Schema values decoded into the column of
the subject's latest schema. Values are encoded here with the standard library's json and
the Confluent frame (magic byte 0, 4-byte big-endian schema id, JSON text)."""
import datetime as dt
import json
import pickle

import pyarrow as pa
import pytest

from segmentlog_datasource.decode.json_schema import (
    JSON_SCHEMA, JsonSchemaColumn, JsonSchemaMappingError, JsonSchemaValues, SchemaDocument)
from segmentlog_datasource.decode.registry import (RegisteredSchema, SchemaReference,
                                                   SchemaRegistry)
from segmentlog_datasource.decode.value_formats import IncompatibleSchemaError
from segmentlog_datasource.errors import RecordDecodeError, UnsupportedFormatError

UTC = dt.timezone.utc


def framed(schema_id: int, value) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + json.dumps(value).encode("utf-8")


def document(schema_id, version, schema, subject="orders-value", references=None):
    return SchemaDocument(json.dumps(schema), subject, version, schema_id, references or {})


def values_of(*documents):
    """A decoder reading into the last document's column, with writers by schema id."""
    columns = {d.id: JsonSchemaColumn(d) for d in documents}

    def writer_of(schema_id):
        return columns[schema_id]  # KeyError (a LookupError): unknown schema id

    return JsonSchemaValues(columns[documents[-1].id], writer_of)


# Four versions of one subject: a field added with a default, one removed, an integer
# widened to a number, a nullable field added.
V1 = {"type": "object", "required": ["id", "amount"], "properties": {
    "id": {"type": "integer"}, "amount": {"type": "integer"}, "legacy": {"type": "string"}}}
V2 = {"type": "object", "required": ["id", "amount"], "properties": {
    "id": {"type": "integer"}, "amount": {"type": "integer"},
    "currency": {"type": "string", "default": "EUR"}}}
V3 = {"type": "object", "required": ["id", "amount"], "properties": {
    "id": {"type": "integer"}, "amount": {"type": "number"},
    "currency": {"type": "string", "default": "EUR"}}}
V4 = {"type": "object", "required": ["id", "amount"], "properties": {
    "id": {"type": "integer"}, "amount": {"type": "number"},
    "currency": {"type": "string", "default": "EUR"},
    "note": {"type": ["string", "null"]}}}


def orders():
    return values_of(document(1, 1, V1), document(2, 2, V2), document(3, 3, V3),
                     document(4, 4, V4))


def test_versions_of_a_subject_read_into_the_latest_column():
    decoder = orders()
    assert decoder.type == pa.struct([
        pa.field("id", pa.int64(), nullable=False), pa.field("amount", pa.float64(), False),
        pa.field("currency", pa.string()), pa.field("note", pa.string())])
    column, errors = decoder.decode([
        framed(1, {"id": 1, "amount": 10, "legacy": "dropped"}),
        framed(2, {"id": 2, "amount": 20, "currency": "USD"}),
        framed(3, {"id": 3, "amount": 2.5}),
        framed(4, {"id": 4, "amount": 7, "currency": "GBP", "note": None}),
        framed(4, {"id": 5, "amount": 1e3, "note": "fragile"}),
        None,
    ])
    assert errors == [None] * 6
    assert column.to_pylist() == [
        {"id": 1, "amount": 10.0, "currency": "EUR", "note": None},
        {"id": 2, "amount": 20.0, "currency": "USD", "note": None},
        {"id": 3, "amount": 2.5, "currency": "EUR", "note": None},
        {"id": 4, "amount": 7.0, "currency": "GBP", "note": None},
        {"id": 5, "amount": 1000.0, "currency": "EUR", "note": "fragile"},
        None,
    ]


ADDRESS = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
           "required": ["city"],
           "properties": {"city": {"type": "string"}, "zip": {"$ref": "#/definitions/zip"}},
           "definitions": {"zip": {"type": "string"}}}

EVERYTHING = {
    "type": "object",
    "required": ["name", "count", "shipping"],
    "properties": {
        "name": {"type": "string"},
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "paid": {"type": "boolean"},
        "sizes": {"type": "array", "items": {"type": "integer"}},
        "lines": {"type": "array", "items": {"$ref": "#/definitions/line"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "shipping": {"$ref": "address.json"},
        "billing": {"oneOf": [{"type": "null"}, {"$ref": "address.json"}]},
        "coupon": {"anyOf": [{"$ref": "#/$defs/coupon"}, {"type": "null"}]},
        "key": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "status": {"enum": ["NEW", "PAID", "SHIPPED"]},
        "comment": {"type": ["string", "null"]},
        "extra": {},
        "blob": {"type": "string", "contentEncoding": "base64"},
        "inner": {"type": "object", "properties": {
            "deep": {"type": "object", "properties": {"flag": {"type": "boolean"}}}}},
    },
    "definitions": {"line": {"type": "object", "required": ["sku"], "properties": {
        "sku": {"type": "string"}, "qty": {"type": "integer", "default": 1}}}},
    "$defs": {"coupon": {"type": "object", "properties": {"code": {"type": "string"}}}},
}

ADDRESS_TYPE = pa.struct([pa.field("city", pa.string(), nullable=False),
                          pa.field("zip", pa.string())])
EVERYTHING_TYPE = pa.struct([
    pa.field("name", pa.string(), nullable=False),
    pa.field("day", pa.date32()),
    pa.field("at", pa.timestamp("us", tz="UTC")),
    pa.field("count", pa.int64(), nullable=False),
    pa.field("ratio", pa.float64()),
    pa.field("paid", pa.bool_()),
    pa.field("sizes", pa.list_(pa.field("element", pa.int64(), nullable=False))),
    pa.field("lines", pa.list_(pa.field("element", pa.struct([
        pa.field("sku", pa.string(), nullable=False), pa.field("qty", pa.int64())]),
        nullable=False))),
    pa.field("labels", pa.map_(pa.string(), pa.field("value", pa.string(), nullable=False))),
    pa.field("shipping", ADDRESS_TYPE, nullable=False),
    pa.field("billing", ADDRESS_TYPE),
    pa.field("coupon", pa.struct([pa.field("code", pa.string())])),
    pa.field("key", pa.struct([pa.field("member0", pa.string()),
                               pa.field("member1", pa.int64())])),
    pa.field("status", pa.string()),
    pa.field("comment", pa.string()),
    pa.field("extra", pa.string()),
    pa.field("blob", pa.binary()),
    pa.field("inner", pa.struct([pa.field("deep", pa.struct([pa.field("flag", pa.bool_())]))])),
])


def everything():
    address = document(10, 1, ADDRESS, subject="address")
    return values_of(document(11, 1, EVERYTHING, references={"address.json": address}))


def test_every_type_maps_field_by_field_and_decodes():
    decoder = everything()
    assert decoder.type == EVERYTHING_TYPE
    full = {
        "name": "n", "day": "2024-02-29", "at": "2024-02-29T10:20:30.123456+02:00",
        "count": 3, "ratio": 0.5, "paid": True, "sizes": [1, 2], "lines": [
            {"sku": "a", "qty": 2}, {"sku": "b"}],
        "labels": {"x": "1", "y": "2"}, "shipping": {"city": "Oslo", "zip": "0150"},
        "billing": {"city": "Bergen"}, "coupon": {"code": "C1"}, "key": 7,
        "status": "PAID", "comment": "c", "extra": {"any": [1, "two", None]},
        "blob": "AAEC", "inner": {"deep": {"flag": False}}, "unknown": "dropped"}
    sparse = {"name": "m", "count": 0, "sizes": [], "lines": [], "labels": {},
              "shipping": {"city": "Rome"}, "billing": None, "coupon": None, "key": "k",
              "comment": None, "extra": "text", "inner": {}}
    column, errors = decoder.decode(pa.array([framed(11, full), framed(11, sparse)],
                                             pa.binary()))
    assert errors == [None, None]
    column.validate(full=True)
    assert column.to_pylist() == [
        {"name": "n", "day": dt.date(2024, 2, 29),
         "at": dt.datetime(2024, 2, 29, 8, 20, 30, 123456, tzinfo=UTC),
         "count": 3, "ratio": 0.5, "paid": True, "sizes": [1, 2],
         "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 1}],
         "labels": [("x", "1"), ("y", "2")], "shipping": {"city": "Oslo", "zip": "0150"},
         "billing": {"city": "Bergen", "zip": None}, "coupon": {"code": "C1"},
         "key": {"member0": None, "member1": 7}, "status": "PAID", "comment": "c",
         "extra": '{"any":[1,"two",null]}', "blob": b"\x00\x01\x02",
         "inner": {"deep": {"flag": False}}},
        {"name": "m", "day": None, "at": None, "count": 0, "ratio": None, "paid": None,
         "sizes": [], "lines": [], "labels": [], "shipping": {"city": "Rome", "zip": None},
         "billing": None, "coupon": None, "key": {"member0": "k", "member1": None},
         "status": None, "comment": None, "extra": '"text"', "blob": None,
         "inner": {"deep": None}},
    ]


@pytest.mark.parametrize("payload, reason", [
    (b"\x01" + (4).to_bytes(4, "big") + b"{}", "bad magic byte"),
    (b"\x00\x00\x00", "truncated payload: 3 bytes"),
    (b"\x00" + (4).to_bytes(4, "big") + b'{"id": 1,', "invalid JSON after the schema id"),
    (b"\x00" + (4).to_bytes(4, "big") + b"\xff", "not UTF-8 (byte 5 of the value)"),
    (framed(99, {"id": 1, "amount": 1}), "unknown schema id 99"),
    (framed(4, {"id": "one", "amount": 1}), "field id: expected an integer, got the string"),
    (framed(4, {"id": 1}), "field amount: absent, and the column's schema requires it"),
    (framed(4, {"id": 1, "amount": None}), "field amount: null, and the column's schema"),
    (framed(4, {"id": 2 ** 63, "amount": 1}), "out of the range of a 64-bit integer"),
    (framed(4, [1, 2]), "field <value>: expected an object, got an array of 2"),
])
def test_undecodable_values_are_errors_naming_why(payload, reason):
    column, errors = orders().decode([payload])
    assert column.to_pylist() == [None]
    assert reason in errors[0]


def test_errors_name_the_field_path():
    decoder = everything()
    good = {"name": "n", "count": 1, "shipping": {"city": "c"}}
    bad_line = dict(good, lines=[{"sku": "a"}, {"sku": "b", "qty": "two"}])
    bad_city = dict(good, billing={"city": 5})
    bad_date = dict(good, at="yesterday")
    bad_key = dict(good, key=1.5)
    column, errors = decoder.decode([framed(11, good), framed(11, bad_line),
                                     framed(11, bad_city), framed(11, bad_date),
                                     framed(11, bad_key)])
    assert column.to_pylist()[1:] == [None] * 4
    assert errors[0] is None
    assert errors[1] == "field lines[1].qty: expected an integer, got the string 'two'"
    assert errors[2] == "field billing.city: expected a string, got the number 5"
    assert errors[3].startswith("field at: expected a date-time")
    assert errors[4] == ("field key: the number 1.5 fits none of the union's members (member0: "
                         "expected a string, got the number 1.5; member1: expected an "
                         "integer, got the number 1.5)")


def test_a_writer_schema_the_column_cannot_read_fails_its_rows():
    old = {"type": "object", "properties": {"id": {"type": "string"}}}
    decoder = values_of(document(7, 1, old), document(4, 4, V4))
    _, errors = decoder.decode([framed(7, {"id": "x"}), framed(4, {"id": 1, "amount": 2})])
    assert errors[1] is None
    assert errors[0] == (
        "incompatible writer schema: subject 'orders-value' version 1 (schema id 7) cannot "
        "be read into the column of subject 'orders-value' version 4 (schema id 4): field id "
        "is a string in the writer's schema and an integer in the column's")


@pytest.mark.parametrize("schema, references, reason", [
    ({"type": "object", "properties": {"next": {"$ref": "#"}}}, {},
     "refers to '#' recursively"),
    ({"$ref": "#/definitions/node", "definitions": {"node": {"type": "object", "properties": {
        "children": {"type": "array", "items": {"$ref": "#/definitions/node"}}}}}}, {},
     "refers to '#/definitions/node' recursively"),
    ({"type": "object", "properties": {"a": {"$ref": "other.json"}}}, {},
     "refers to 'other.json', which is not among the schema's references (references: none)"),
    ({"type": "object", "properties": {"a": {"$ref": "#/definitions/gone"}}}, {},
     "refers to '#/definitions/gone', which does not exist"),
    ({"type": "object", "properties": {"t": {"type": "array", "items": [{"type": "string"}]}}},
     {}, "is a tuple"),
    ({"type": "object", "properties": {"n": {"type": "null"}}}, {}, "null type alone"),
    ({"type": "object", "properties": {"c": {"type": "integer", "default": "x"}}}, {},
     "has a default that does not fit its column"),
])
def test_schemas_without_a_spark_type_fail_naming_subject_and_version(schema, references,
                                                                       reason):
    with pytest.raises(UnsupportedFormatError) as failure:
        JsonSchemaColumn(document(5, 3, schema, references=references))
    assert isinstance(failure.value, JsonSchemaMappingError)
    assert str(failure.value).startswith("subject 'orders-value' version 3 (schema id 5): "
                                         "the JSON Schema at #")
    assert reason in str(failure.value)


def test_a_recursive_referenced_schema_names_both_schemas():
    node = {"type": "object", "properties": {"next": {"$ref": "node.json"}}}
    shared = {}
    shared["node.json"] = SchemaDocument(json.dumps(node), "node", 2, 20, shared)
    root = document(21, 1, {"type": "object", "properties": {"head": {"$ref": "node.json"}}},
                    references=shared)
    with pytest.raises(JsonSchemaMappingError) as failure:
        JsonSchemaColumn(root)
    assert str(failure.value) == (
        "subject 'orders-value' version 1 (schema id 21): the JSON Schema at #/properties/next "
        "of referenced schema subject 'node' version 2 (schema id 20) refers to 'node.json' "
        "recursively: a recursive schema has no Spark type")


def registered(schema_id, subject, version, schema, references=()):
    return RegisteredSchema(schema_id, subject, version, "JSON", json.dumps(schema),
                            tuple(references))


def test_the_value_format_reader_resolves_references_pickles_and_rejects_writers():
    registry = SchemaRegistry("the test's registry")
    registry.register(registered(10, "address", 1, ADDRESS))
    latest = registered(11, "orders-value", 1, EVERYTHING,
                        [SchemaReference("address.json", "address", 1)])
    registry.register(latest)
    reader = pickle.loads(pickle.dumps(JSON_SCHEMA.reader(latest, registry)))
    assert reader.arrow_type == EVERYTHING_TYPE
    body = {"name": "n", "count": 1, "shipping": {"city": "Oslo", "zip": "0150"}, "key": 2}
    values, errors = reader.decode(latest, registry, [
        json.dumps(body).encode(), b"{", b'{"name": "n", "count": true}'])
    assert values[0]["shipping"] == {"city": "Oslo", "zip": "0150"}
    assert values[0]["key"] == {"member1": 2}  # pa.array nulls member0
    assert values[1:] == [None, None]
    assert errors[0] is None and errors[1].startswith("invalid JSON after the schema id")
    assert errors[2] == "field count: expected an integer, got the boolean true"
    old = registered(7, "orders-value", 0, {"type": "object", "properties": {
        "count": {"type": "array", "items": {"type": "integer"}}}})
    with pytest.raises(IncompatibleSchemaError, match="field count is an array in the "
                                                      "writer's schema and an integer"):
        reader.decode(old, registry, [b"{}"])


def orders_log(root):
    """(log dir, registry export) under `root`: topic orders, framed JSON Schema values of
    v1 and of the latest version (which references the subject address), a null, one
    value missing a required field and one of an unknown schema id (offsets 3 and 4)."""
    from segmentlog_datasource.writer import write_log

    latest = dict(V4, properties=dict(V4["properties"], ship={"$ref": "address.json"}))
    export = root / "registry.json"
    export.write_text(json.dumps([
        {"id": 1, "subject": "orders-value", "version": 1, "schemaType": "JSON",
         "schema": json.dumps(V1)},
        {"id": 3, "subject": "address", "version": 1, "schemaType": "JSON",
         "schema": json.dumps(ADDRESS)},
        {"id": 4, "subject": "orders-value", "version": 2, "schemaType": "JSON",
         "schema": json.dumps(latest),
         "references": [{"name": "address.json", "subject": "address", "version": 1}]},
    ]))
    logdir = str(root / "logs")
    write_log(logdir, pa.table({"value": [
        framed(1, {"id": 1, "amount": 5}), None,
        framed(4, {"id": 2, "amount": 1.5, "ship": {"city": "Oslo", "zip": "0150"}}),
        framed(4, {"id": 3, "amount": 1, "ship": {"zip": "0150"}}),
        framed(9, {"id": 4, "amount": 1})]}), topic="orders", num_partitions=1)
    return logdir, str(export)


def test_a_read_with_value_format_json_decodes_the_topic_with_an_exported_registry(tmp_path):
    """The engine's read path (DecodedRead plans and scans, as Spark's reader does): a
    log written by segmentlog's writer, schemas from a registry export with a reference."""
    from segmentlog_datasource.decode import DecodedRead
    from segmentlog_datasource.decode.reads import read_schema
    from segmentlog_datasource.format.scan import ScanOptions
    from segmentlog_datasource.read.options import parse_read_options
    from segmentlog_datasource.read.planning import Constraints

    logdir, export = orders_log(tmp_path)

    def read(mode):
        options = {"path": logdir, "valueFormat": "json", "schemas": export, "mode": mode}
        decoded = DecodedRead(options)
        plan = decoded.plan(decoded.read_options(parse_read_options(options)), Constraints())
        table = pa.Table.from_batches(list(decoded.scan(plan, ScanOptions())),
                                      read_schema(options))
        return table.select(["offset", "valueDecoded", "valueError"]).to_pylist()

    no_ship = {"id": 1, "amount": 5.0, "currency": "EUR", "note": None, "ship": None}
    rows = read("PERMISSIVE")
    assert rows[4]["valueDecoded"] is None
    assert rows[4]["valueError"].startswith("orders-0 offset 4: value: unknown schema id")
    assert "schema id 9 " in rows[4]["valueError"]
    assert rows[:4] == [
        {"offset": 0, "valueDecoded": no_ship, "valueError": None},
        {"offset": 1, "valueDecoded": None, "valueError": None},
        {"offset": 2, "valueDecoded": {"id": 2, "amount": 1.5, "currency": "EUR", "note": None,
                                       "ship": {"city": "Oslo", "zip": "0150"}},
         "valueError": None},
        {"offset": 3, "valueDecoded": None, "valueError":
            "orders-0 offset 3: value: schema id 4 (orders-value version 2): field ship.city: "
            "absent, and the column's schema requires it (with no default)"},
    ]
    with pytest.raises(RecordDecodeError, match="orders-0 offset 3: value: schema id 4 "
                                                r"\(orders-value version 2\): field ship.city"):
        read("FAILFAST")


def test_all_of_type_lists_and_connect_conventions():
    schema = {"type": "object", "properties": {
        "both": {"allOf": [{"$ref": "#/definitions/named"},
                           {"type": "object", "required": ["age"],
                            "properties": {"age": {"type": "integer"}}}]},
        "either": {"type": ["integer", "string", "null"]},
        "anything_but": {"not": {"type": "string"}},
        "small": {"type": "integer", "connect.type": "int16"},
        "day": {"type": "integer", "title": "org.apache.kafka.connect.data.Date"},
        "at": {"type": "integer", "title": "org.apache.kafka.connect.data.Timestamp"}},
        "definitions": {"named": {"type": "object", "properties": {"name": {"type": "string"}}}}}
    decoder = values_of(document(30, 1, schema))
    assert decoder.type == pa.struct([
        pa.field("both", pa.struct([pa.field("name", pa.string()),
                                    pa.field("age", pa.int64(), nullable=False)])),
        pa.field("either", pa.struct([pa.field("member0", pa.int64()),
                                      pa.field("member1", pa.string())])),
        pa.field("anything_but", pa.string()), pa.field("small", pa.int16()),
        pa.field("day", pa.date32()), pa.field("at", pa.timestamp("us", tz="UTC"))])
    column, errors = decoder.decode([
        framed(30, {"both": {"name": "x", "age": 3}, "either": "s", "anything_but": [1],
                    "small": 2, "day": 19000, "at": 1700000000123}),
        framed(30, {"small": 40000})])
    assert column.to_pylist()[0] == {
        "both": {"name": "x", "age": 3}, "either": {"member0": None, "member1": "s"},
        "anything_but": "[1]", "small": 2, "day": dt.date(2022, 1, 8),
        "at": dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)}
    assert errors == [None, "field small: 40000 is out of the range of a 16-bit integer"]
