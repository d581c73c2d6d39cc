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
