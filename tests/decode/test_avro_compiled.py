"""The compiled Avro decoder (decode/avro_program.py, _avrocolumns.c) against its twin, the
fastavro path of decode_payloads: random schemas within the compiled scope, random values
written by fastavro, evolved reader schemas, and truncated or garbled payloads."""
import copy
import io
import json
import os
import sys

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segmentlog_datasource.decode import avro
from segmentlog_datasource.decode.avro_program import extension, program_for
from segmentlog_datasource.decode.value_formats import Payloads
from segmentlog_datasource.schemas import avro as avro_schemas

# A pure-Python install (no C compiler) decodes through fastavro, so these tests skip
# without the build; CI sets SEGMENTLOG_REQUIRE_FAST=1, and then a missing build fails.
pytestmark = pytest.mark.skipif(
    extension() is None and not os.environ.get("SEGMENTLOG_REQUIRE_FAST"),
    reason="the compiled Avro decoder is not built here (a pure-Python install); build "
           "it with: python setup.py build_ext --inplace")


def test_the_compiled_decoder_is_built_where_ci_requires_it():
    assert extension() is not None, "_avrocolumns did not build"

PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "string", "bytes"]
# What each type may become in an evolved reader schema (Avro's promotions).
PROMOTIONS = {"int": ["long", "float", "double"], "long": ["float", "double"],
              "float": ["double"], "string": ["bytes"], "bytes": ["string"]}
# The stricter checks of the compiled decoder (avro_program.py's docstring): the only
# reasons it may fail a row fastavro reads.
# A skipped writer field is not read as fastavro skips it: past the payload's end,
# unchecked (the truncated row then reads); see readable_as_writer.
STRICTER = ("a varint longer than 10 bytes", "a negative length", "enum index -", "union index -",
            "out of the 32-bit range", "past the range of microseconds")
# A sweep by hand: AVRO_COMPILED_EXAMPLES=3000 (random, not derandomized).
SWEEP = int(os.environ.get("AVRO_COMPILED_EXAMPLES", "0"))
FAST = settings(max_examples=SWEEP or 15, deadline=None, derandomize=not SWEEP,
                suppress_health_check=list(HealthCheck))


# ------------------------------------------------------------------ schemas and values

@st.composite
def types(draw, depth=0, names=None):
    names = names if names is not None else [0]

    def fresh(prefix):
        names[0] += 1
        return f"{prefix}{names[0]}"

    choices = ["prim"] * 6 + ["enum", "fixed", "nullable"]
    choices += ["array", "record"] if depth < 2 else []
    choice = draw(st.sampled_from(choices))
    if choice == "prim":
        return draw(st.sampled_from(PRIMITIVES))
    if choice == "enum":
        count = draw(st.integers(1, 4))
        return {"type": "enum", "name": fresh("E"), "symbols": [f"S{i}" for i in range(count)]}
    if choice == "fixed":
        return {"type": "fixed", "name": fresh("F"), "size": draw(st.integers(1, 4))}
    if choice == "nullable":
        inner = draw(types(depth + 1, names).filter(
            lambda t: t != "null" and not isinstance(t, list)))  # a union holds no union
        return ["null", inner] if draw(st.booleans()) else [inner, "null"]
    if choice == "array":
        inner = draw(types(depth + 1, names).filter(lambda t: t != "null"))
        return {"type": "array", "items": inner}
    return record(draw, depth + 1, names, fresh("R"))


def record(draw, depth, names, name):
    count = draw(st.integers(1, 4))
    return {"type": "record", "name": name,
            "fields": [{"name": f"f{i}", "type": draw(types(depth, names))} for i in range(count)]}


@st.composite
def values(draw, schema):
    if isinstance(schema, list):
        inner = [branch for branch in schema if branch != "null"][0]
        return None if draw(st.booleans()) else draw(values(inner))
    kind = schema if isinstance(schema, str) else schema["type"]
    if kind == "null":
        return None
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "int":
        return draw(st.integers(-2 ** 31, 2 ** 31 - 1))
    if kind == "long":
        return draw(st.integers(-2 ** 50, 2 ** 50))  # timestamp-millis * 1000 still fits
    if kind in ("float", "double"):
        return draw(st.floats(allow_nan=False, width=32 if kind == "float" else 64))
    if kind == "string":
        return draw(st.text(max_size=6))
    if kind == "bytes":
        return draw(st.binary(max_size=6))
    if kind == "enum":
        return draw(st.sampled_from(schema["symbols"]))
    if kind == "fixed":
        return draw(st.binary(min_size=schema["size"], max_size=schema["size"]))
    if kind == "array":
        return draw(st.lists(values(schema["items"]), max_size=3))
    return {field["name"]: draw(values(field["type"])) for field in schema["fields"]}


def evolve(draw, schema):
    """A reader schema `schema`'s data resolves to: fields dropped, added with defaults,
    promoted, made nullable, given logical types."""
    if isinstance(schema, list):
        inner = [branch for branch in schema if branch != "null"][0]
        evolved = evolve(draw, inner)
        return ["null", evolved] if schema[0] == "null" else [evolved, "null"]
    kind = schema if isinstance(schema, str) else schema["type"]
    if kind in PROMOTIONS and draw(st.booleans()):
        return draw(st.sampled_from(PROMOTIONS[kind]))
    if kind == "long" and draw(st.booleans()):
        return {"type": "long", "logicalType": draw(st.sampled_from(
            ["timestamp-millis", "timestamp-micros", "local-timestamp-millis"]))}
    if kind == "int" and draw(st.integers(0, 3)) == 0:
        return {"type": "int", "logicalType": "date"}
    if kind == "array":
        return {"type": "array", "items": evolve(draw, schema["items"])}
    if kind == "enum" and draw(st.booleans()):  # symbols reordered, one added
        return {**schema, "symbols": list(reversed(schema["symbols"])) + ["ADDED"]}
    if kind == "record":
        fields = []
        for field in schema["fields"]:
            action = draw(st.sampled_from(["keep", "keep", "drop", "nullable"]))
            if action == "drop":
                continue
            evolved = evolve(draw, field["type"])
            if action == "nullable" and not isinstance(evolved, list) and evolved != "null":
                evolved = ["null", evolved]
            if draw(st.integers(0, 4)) == 0:  # renamed, the old name an alias
                fields.append({"name": "renamed_" + field["name"], "type": evolved,
                               "aliases": [field["name"]]})
            else:
                fields.append({"name": field["name"], "type": evolved})
        if draw(st.booleans()):
            kind, default = draw(st.sampled_from([
                ("long", 7), ("string", "dflt"), ("double", 0.5), ("boolean", True),
                (["null", "int"], None), ("int", -3)]))
            fields.append({"name": "added", "type": kind, "default": default})
        if draw(st.booleans()):
            fields.reverse()
        return {**schema, "fields": fields}
    return schema


@st.composite
def cases(draw, evolved: bool):
    writer = record(draw, 0, [0], "Top")
    reader = evolve(draw, copy.deepcopy(writer)) if evolved else writer
    data = draw(st.lists(values(writer), min_size=1, max_size=6))
    return writer, reader, data


# ------------------------------------------------------------------ the twins

def encode(schema, datum) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(copy.deepcopy(schema)), datum)
    return out.getvalue()


def twins(writer, reader, payloads):
    """(the pure path's values as the Arrow type takes them, its errors), (the compiled
    path's), and the compiled program (None: out of scope)."""
    named = {}
    typed = fastavro.parse_schema(copy.deepcopy(reader), named_schemas=named)
    writer_parsed = fastavro.parse_schema(
        avro_schemas.without_logical_types(copy.deepcopy(writer)))
    reader_parsed = fastavro.parse_schema(
        avro_schemas.without_logical_types(copy.deepcopy(reader)))
    arrow_type = avro_schemas.spark_type(typed, named, "the reader schema")
    convert = avro.converter(typed, named) or (lambda value: value)
    pure = avro.decode_payloads(payloads, writer_parsed, reader_parsed, convert,
                                reader_typed=(typed, named), compiled=False)
    compiled = avro.decode_payloads(payloads, writer_parsed, reader_parsed, convert,
                                    reader_typed=(typed, named), compiled=True)
    # the same payloads as spans of one buffer, as a read hands them over: read in place
    in_place = avro.decode_payloads(as_spans(payloads), writer_parsed, reader_parsed,
                                    convert, reader_typed=(typed, named), compiled=True)
    assert in_place[1] == compiled[1]
    if isinstance(compiled[0], pa.Array):
        assert in_place[0].equals(compiled[0])
    return pure, compiled, program_for(writer_parsed, (typed, named)), arrow_type


def as_spans(payloads) -> Payloads:
    """`payloads` laid end to end in one buffer, behind a few bytes that belong to none."""
    data = b"\xee" * 3 + b"".join(payloads)
    ends = 3 + np.cumsum([len(p) for p in payloads], dtype=np.int64)
    return Payloads(data, ends - np.array([len(p) for p in payloads], np.int64), ends)


def test_spans_outside_the_buffer_are_refused():
    program = program_for(fastavro.parse_schema(copy.deepcopy(ORDER)),
                          (fastavro.parse_schema(copy.deepcopy(ORDER), named_schemas={}), {}))
    with pytest.raises(ValueError, match=r"payload 1 spans \[2, 9\), outside the 4 bytes"):
        program.decode(Payloads(b"abcd", np.array([0, 2]), np.array([1, 9])))


def storage(arrow_type):
    """`arrow_type` with dates and timestamps as the integers they hold."""
    if pa.types.is_date32(arrow_type):
        return pa.int32()
    if pa.types.is_timestamp(arrow_type):
        return pa.int64()
    if pa.types.is_list(arrow_type):
        return pa.list_(pa.field("element", storage(arrow_type.value_type)))
    if pa.types.is_struct(arrow_type):
        return pa.struct([pa.field(field.name, storage(field.type)) for field in arrow_type])
    return arrow_type


def plain(array: pa.Array) -> list:
    """`array`'s values, its dates and timestamps as integers (any date reads back, and
    Python's stop at year 9999), walked by hand (Arrow's cast of a struct holding a
    null-typed field loses rows)."""
    kind = array.type
    if pa.types.is_date32(kind) or pa.types.is_timestamp(kind):
        return array.cast(storage(kind)).to_pylist()
    if pa.types.is_struct(kind):
        names = [field.name for field in kind]
        children = [plain(array.field(index)) for index in range(len(names))]
        return [dict(zip(names, row)) if valid else None
                for valid, *row in zip(array.is_valid().to_pylist(), *children)]
    if pa.types.is_list(kind):
        items, rows, start = plain(array.flatten()), [], 0
        for length in array.value_lengths().to_pylist():
            rows.append(None if length is None else items[start:start + length])
            start += length or 0
        return rows
    return array.to_pylist()


def readable_as_writer(writer, payload) -> bool:
    """Whether fastavro reads `payload` as `writer`, no field skipped."""
    parsed = fastavro.parse_schema(avro_schemas.without_logical_types(copy.deepcopy(writer)))
    return avro.decode_payloads([payload], parsed, None, lambda value: value,
                                compiled=False)[1] == [None]


def takes_bytes(schema) -> bool:
    """Whether every array in `schema` has items that take a byte at least."""
    def least(schema):
        kind = schema if isinstance(schema, str) else "union" if isinstance(
            schema, list) else schema["type"]
        if kind == "null":
            return 0
        if kind == "record":
            return sum(least(field["type"]) for field in schema["fields"])
        return 1

    def arrays(schema):
        if isinstance(schema, list):
            return all(arrays(branch) for branch in schema)
        if isinstance(schema, dict) and schema["type"] == "array":
            return least(schema["items"]) > 0 and arrays(schema["items"])
        if isinstance(schema, dict) and schema["type"] == "record":
            return all(arrays(field["type"]) for field in schema["fields"])
        return True
    return arrays(schema)


def as_rows(values, arrow_type):
    """Each row's value as Arrow gives it back (repr: NaN equals NaN); a value Arrow
    refuses (a garbled int past 32 bits) as the string 'refused'."""
    if isinstance(values, pa.Array):
        assert values.type == arrow_type
        return [repr(value) for value in plain(values)]
    rows = []
    for value in values:
        try:
            array = pa.array([value], arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
            rows.append("refused")
        else:
            rows.append(repr(plain(array)[0]))
    return rows


def assert_same(writer, reader, payloads):
    (pure_values, pure_errors), (values, errors), program, arrow_type = twins(
        writer, reader, payloads)
    if program is None:  # an array of items that take no bytes: left to fastavro
        assert not takes_bytes(writer)
        return
    assert isinstance(values, pa.Array)
    values.validate(full=True)
    assert errors == pure_errors
    assert as_rows(values, arrow_type) == as_rows(pure_values, arrow_type)


@FAST
@given(cases(evolved=False))
def test_same_schema_reads_as_the_pure_path(case):
    writer, reader, data = case
    assert_same(writer, reader, [encode(writer, datum) for datum in data])


@FAST
@given(cases(evolved=True))
def test_evolved_reader_reads_as_the_pure_path(case):
    writer, reader, data = case
    assert_same(writer, reader, [encode(writer, datum) for datum in data])


@FAST
@given(cases(evolved=True), st.data())
def test_truncated_and_garbled_payloads_fail_their_rows_alone(case, data):
    writer, reader, records = case
    payloads = []
    for datum in records:
        payload = bytearray(encode(writer, datum))
        damage = data.draw(st.sampled_from(["truncate", "flip", "insert", "none"]))
        if damage == "truncate" and payload:
            del payload[data.draw(st.integers(0, len(payload) - 1)):]
        elif damage == "flip" and payload:
            payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
        elif damage == "insert":
            payload.insert(data.draw(st.integers(0, len(payload))), data.draw(st.integers(0, 255)))
        payloads.append(bytes(payload))
    (pure_values, pure_errors), (values, errors), program, arrow_type = twins(
        writer, reader, payloads)
    if program is None:
        assert not takes_bytes(writer)
        return
    values.validate(full=True)
    compiled_rows, pure_rows = as_rows(values, arrow_type), as_rows(pure_values, arrow_type)
    for row, payload in enumerate(payloads):
        if pure_errors[row] is not None or pure_rows[row] == "refused":
            assert errors[row] is not None, (payload, pure_errors[row])
            assert compiled_rows[row] == "None"
        elif errors[row] is not None:
            # Stricter by design, or a value fastavro reads only by skipping (without
            # checking) past the end: one it fails to read as the writer schema itself.
            assert any(reason in errors[row] for reason in STRICTER) \
                or not readable_as_writer(writer, payload), (payload, errors[row])
        else:
            assert compiled_rows[row] == pure_rows[row], payload


ORDER = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"]},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}}]}


@pytest.mark.parametrize("payload, reason", [
    (b"\xff" * 11 + b"\x01\x00\x00\x00", "varint longer than 10 bytes"),
    (b"\x02\x02\x01", "a negative length (-1)"),
    (b"\x02\x00\x00\x01", "enum index -1 out of range"),
    (b"\x02\x02\x02\xff\x00\x00", "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff"),
    (b"\x02\x04", "union index 2 out of range"),
    (b"\x02\x00\xfe\xff\xff\xff\x0f", "truncated payload"),  # an array count past the bytes
    (b"\x02\x00\x00\x00\x00", "1 bytes left over"),
])
def test_malformed_payloads_name_their_fault(payload, reason):
    _, (values, errors), program, _ = twins(ORDER, ORDER, [encode(ORDER, {
        "id": 1, "note": None, "tags": ["t"], "kind": "B"}), payload, b""])
    assert program is not None
    assert errors[0] is None and errors[2].startswith("truncated payload")
    assert reason in errors[1]
    assert values.to_pylist()[1] is None
    assert values.to_pylist()[0] == {"id": 1, "note": None, "tags": ["t"], "kind": "B"}


BASKET = {"type": "record", "name": "Basket", "fields": [
    {"name": "id", "type": "long"},
    {"name": "lines", "type": {"type": "array", "items": {
        "type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"}, {"name": "note", "type": ["null", "string"]}]}}}]}


def test_a_failed_row_is_undone_in_every_column_it_reached():
    """A row failing deep in an array of records, after bringing the first null its
    column saw: the rows around it read as the pure path reads them, and that null goes
    with the row (the column is left with no validity bitmap)."""
    good = encode(BASKET, {"id": 1, "lines": [{"sku": "a", "note": "x"}]})
    failing = encode(BASKET, {"id": 2, "lines": [{"sku": "b", "note": None},
                                                 {"sku": "c", "note": "y"}]})[:-2]
    payloads = [good, failing, good, good]
    assert_same(BASKET, BASKET, payloads)
    _, (values, errors), program, _ = twins(BASKET, BASKET, payloads)
    assert program is not None
    assert errors[1].startswith("truncated payload") and errors.count(None) == 3
    assert values.to_pylist() == [{"id": 1, "lines": [{"sku": "a", "note": "x"}]}, None,
                                  {"id": 1, "lines": [{"sku": "a", "note": "x"}]},
                                  {"id": 1, "lines": [{"sku": "a", "note": "x"}]}]
    notes = values.field("lines").values.field("note")
    assert len(notes) == 3 and notes.null_count == 0 and notes.buffers()[0] is None


def test_runs_of_any_size_after_one_another():
    """Each run reserves its buffers from the last run's bytes per row: a run of large
    values, then of small ones, then more large ones, then none, all read whole."""
    schema = {"type": "record", "name": "Note", "fields": [{"name": "text", "type": "string"}]}
    big, small = "x" * (1 << 20), [str(n) for n in range(2000)]
    _, _, program, _ = twins(schema, schema, [encode(schema, {"text": "warm"})])
    for texts in ([big], small, [big] * 3, small[:1], []):
        values, errors = program.decode([encode(schema, {"text": text}) for text in texts])
        values.validate(full=True)
        assert errors == [None] * len(texts)
        assert values.to_pylist() == [{"text": text} for text in texts]


def one_field(kind, name="Order"):
    return {"type": "record", "name": name, "fields": [{"name": "id", "type": kind}]}


DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}


@pytest.mark.parametrize("writer, reader, datum", [
    (one_field({"type": "map", "values": "long"}),) * 2 + ({"id": {"a": 1}},),
    (one_field(["null", "long", "string"]),) * 2 + ({"id": "s"},),
    (one_field(DECIMAL),) * 2 + ({"id": b"\x01"},),
    (one_field("long"), one_field("long", "Other"), {"id": 5}),  # names differ
    (one_field("long"), one_field("int"), {"id": 5}),  # no promotion long -> int
    (one_field(["null", "long"]), one_field("long"), {"id": 5}),  # a null the reader refuses
])
def test_out_of_scope_pairs_take_the_pure_path(writer, reader, datum):
    payloads = [encode(writer, datum)]
    (pure_values, pure_errors), (values, errors), program, _ = twins(writer, reader, payloads)
    assert program is None
    assert isinstance(values, list)
    assert (values, errors) == (pure_values, pure_errors)


def test_the_switch_forces_the_pure_path(monkeypatch):
    payloads = [encode(ORDER, {"id": 1, "note": "n", "tags": [], "kind": "A"})]
    named = {}
    typed = fastavro.parse_schema(copy.deepcopy(ORDER), named_schemas=named)
    convert = avro.converter(typed, named) or (lambda value: value)
    args = (payloads, fastavro.parse_schema(copy.deepcopy(ORDER)), None, convert)
    assert isinstance(avro.decode_payloads(*args, reader_typed=(typed, named))[0], pa.Array)
    monkeypatch.setattr(avro, "USE_COMPILED", False)
    assert avro.decode_payloads(*args, reader_typed=(typed, named))[0] == [
        {"id": 1, "note": "n", "tags": [], "kind": "A"}]


def apache_encode(schema, datum) -> bytes:
    """`datum` in Avro binary by Apache's avro package: an encoder independent of both
    twins."""
    import avro.io
    import avro.schema

    buffer = io.BytesIO()
    avro.io.DatumWriter(avro.schema.parse(json.dumps(schema))).write(
        datum, avro.io.BinaryEncoder(buffer))
    return buffer.getvalue()


def test_apache_encoded_values_across_versions():
    v1 = {"type": "record", "name": "Sale", "namespace": "shop", "fields": [
        {"name": "id", "type": "int"}, {"name": "legacy", "type": "string"},
        {"name": "price", "type": "float"}, {"name": "note", "type": "string"},
        {"name": "at", "type": "long"},
        {"name": "lines", "type": {"type": "array", "items": {
            "type": "record", "name": "Line", "fields": [{"name": "sku", "type": "string"}]}}}]}
    v3 = {"type": "record", "name": "Sale", "namespace": "shop", "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "id", "type": "long"}, {"name": "price", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "qty", "type": "int", "default": 1},
        {"name": "lines", "type": {"type": "array", "items": {
            "type": "record", "name": "Line", "fields": [
                {"name": "sku", "type": "bytes"},
                {"name": "gift", "type": "boolean", "default": False}]}}}]}
    datum = {"id": 7, "legacy": "x", "price": 2.5, "note": "n", "at": 1_700_000_000_123,
             "lines": [{"sku": "a"}, {"sku": "é"}]}
    payloads = [apache_encode(v1, datum), apache_encode(v1, {**datum, "lines": []})]
    (pure_values, pure_errors), (values, errors), program, arrow_type = twins(v1, v3, payloads)
    assert program is not None and errors == pure_errors == [None, None]
    assert values.equals(pa.array(pure_values, arrow_type))
    assert plain(values)[0] == {
        "at": 1_700_000_000_123_000, "id": 7, "price": 2.5, "note": "n", "qty": 1,
        "lines": [{"sku": b"a", "gift": False}, {"sku": "é".encode(), "gift": False}]}
    assert values.to_pylist()[1]["lines"] == []


def test_without_the_extension_the_pure_path_reads_and_says_so(monkeypatch):
    from segmentlog_datasource.decode import avro_program

    monkeypatch.setattr(avro_program, "_extension", None)  # not imported yet
    monkeypatch.setattr(avro_program, "_programs", {})
    monkeypatch.setitem(sys.modules, "segmentlog_datasource.decode._avrocolumns", None)
    monkeypatch.delattr(sys.modules["segmentlog_datasource.decode"], "_avrocolumns",
                        raising=False)
    payloads = [encode(ORDER, {"id": 1, "note": "n", "tags": ["t"], "kind": "B"}), b""]
    with pytest.warns(avro_program.AvroCompiledUnavailableWarning, match="build_ext --inplace"):
        (pure_values, pure_errors), (values, errors), program, _ = twins(ORDER, ORDER, payloads)
    assert program is None
    assert (values, errors) == (pure_values, pure_errors)
    assert values[0] == {"id": 1, "note": "n", "tags": ["t"], "kind": "B"}


def test_the_avro_reader_decodes_through_the_compiled_twin(tmp_path, monkeypatch):
    import pickle

    from segmentlog_datasource.decode.registry import registry_from_export

    v2 = {**ORDER, "fields": ORDER["fields"][:2] + [
        {"name": "qty", "type": "int", "default": 1}]}
    export = tmp_path / "schemas.json"
    export.write_text(json.dumps([
        {"id": 1, "subject": "orders-value", "version": 1, "schema": json.dumps(ORDER)},
        {"id": 2, "subject": "orders-value", "version": 2, "schema": json.dumps(v2)}]))
    registry = registry_from_export(str(export))
    reader = pickle.loads(pickle.dumps(avro.AVRO.reader(registry.by_id(2), registry)))
    payloads = [encode(ORDER, {"id": 3, "note": None, "tags": ["a"], "kind": "A"}), b"\x02"]
    values, errors = reader.decode(registry.by_id(1), registry, payloads)
    assert isinstance(values, pa.Array) and values.type == reader.arrow_type
    assert values.to_pylist() == [{"id": 3, "note": None, "qty": 1}, None]
    monkeypatch.setattr(avro, "USE_COMPILED", False)
    assert reader.decode(registry.by_id(1), registry, payloads) == (values.to_pylist(), errors)


@pytest.mark.parametrize("columns, step, reason", [
    ([(2, 0, ())], (3, 0, 0, 0, 0, None, ((1, -1, 2, 0, 0, None, ()),)), "another kind"),
    ([(8, 0, (1,)), (2, 0, ())], (2, 0, 0, 0, 0, ((1, 0.5),), ()), "a float default"),
    ([(7, 0, ())], (1, 0, 0, 0, 0, None, ()), "a list column has one child"),
    ([(8, 0, (0,))], (2, 0, 0, 0, 0, None, ()), "child column"),
    ([(2, 0, ())], (1, 3, 2, 0, 0, None, ()), "names column 3"),
])
def test_the_extension_refuses_malformed_programs(columns, step, reason):
    with pytest.raises(ValueError, match=reason):
        extension().compile(columns, step)
