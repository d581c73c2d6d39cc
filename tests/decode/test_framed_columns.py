"""value_formats.FramedColumn: frames read from a binary column's buffers at once. Rows
of several schema ids interleaved, nulls, rows taken as null (control records), payloads
that are not framed, a column sliced out of a larger one (a non-zero Arrow offset); each
checked against the frames read byte by byte here. Avro payloads are encoded by Apache's
avro package."""
import json

import pyarrow as pa
import pytest

from decode.test_avro_values import avro_encode, framed
from segmentlog_datasource.decode.avro import AVRO
from segmentlog_datasource.decode.registry import RegisteredSchema, SchemaRegistry
from segmentlog_datasource.decode.value_formats import FramedColumn, SchemaSource
from segmentlog_datasource.errors import RecordDecodeError

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
V2 = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""}]}


class Schemas(SchemaSource):
    """A SchemaSource over a registry held in memory (nothing to reload)."""

    def __init__(self, registry):
        self.option, self.read, self.registry, self._reloaded = None, None, registry, True


def column(permissive=True):
    registry = SchemaRegistry("the test's registry")
    for schema_id, version, schema in ((1, 1, V1), (2, 2, V2)):
        registry.register(RegisteredSchema(schema_id, "orders-value", version, "AVRO",
                                           json.dumps(schema), ()))
    latest = registry.latest("orders-value")
    return FramedColumn("value", "avro", "AVRO", AVRO.reader(latest, registry),
                        Schemas(registry), permissive)


PAYLOADS = [
    framed(1, avro_encode(V1, {"id": 1})),
    None,
    framed(2, avro_encode(V2, {"id": 2, "note": "n"})),
    b"\x00\x00\x00",  # shorter than a frame
    framed(1, avro_encode(V1, {"id": 3})),
    b"\x07" + bytes(8),  # not framed
    framed(2, avro_encode(V2, {"id": 4, "note": "skipped"})),  # taken as null (skip)
    b"\xff\xff\xff\xff\xfe" + b"\x00",  # 0xff: a bad magic byte, not schema id -2
    b"\x00\xff\xff\xff\xfe" + b"\x00",  # schema id -2, as Java's signed int reads it
    framed(2, b"\x08"),  # a truncated body
]
SKIP = [False] * 6 + [True] + [False] * 3


def test_frames_read_at_once_place_each_row():
    # the same rows inside a larger column, sliced out (offset 2)
    whole = pa.array([b"x", None] + PAYLOADS + [b"y"], pa.binary())
    sliced = whole.slice(2, len(PAYLOADS))
    rows = len(PAYLOADS)
    topics = pa.array(["orders"] * rows)
    partitions, offsets = pa.array([0] * rows), pa.array(range(100, 100 + rows))
    for given in (pa.array(PAYLOADS, pa.binary()), sliced):
        values, errors = column().decode(given, topics, partitions, offsets,
                                         skip=pa.array(SKIP).to_numpy(zero_copy_only=False))
        assert values.type == pa.struct([("id", pa.int64()), ("note", pa.string())])
        assert values.to_pylist() == [
            {"id": 1, "note": ""}, None, {"id": 2, "note": "n"}, None, {"id": 3, "note": ""},
            None, None, None, None, None]
        assert [e is None for e in errors] == [True, True, True, False, True, False, True,
                                               False, False, False]
        assert errors[3].startswith("orders-0 offset 103: value: truncated payload: 3 bytes")
        assert errors[5].startswith("orders-0 offset 105: value: bad magic byte 0x07")
        assert errors[7].startswith("orders-0 offset 107: value: bad magic byte 0xff")
        assert errors[8].startswith("orders-0 offset 108: value: unknown schema id: schema "
                                    "id -2 is not in")
        assert errors[9].startswith("orders-0 offset 109: value: schema id 2 (orders-value "
                                    "version 2): truncated payload")


def test_one_schema_id_every_row_and_failfast_names_the_first_bad_row():
    rows = [framed(2, avro_encode(V2, {"id": n, "note": str(n)})) for n in range(5)]
    topics, partitions = pa.array(["orders"] * 6), pa.array([3] * 6)
    values, errors = column().decode(pa.array(rows, pa.binary()), topics[:5], partitions[:5],
                                     pa.array(range(5)))
    assert errors is None
    assert values.to_pylist() == [{"id": n, "note": str(n)} for n in range(5)]
    bad = rows[:2] + [b"plain"] + rows[2:4] + [b"\x01"]
    with pytest.raises(RecordDecodeError, match="orders-3 offset 12: value: bad magic byte"):
        column(permissive=False).decode(pa.array(bad, pa.binary()), topics, partitions,
                                        pa.array(range(10, 16)))
    values, errors = column().decode(pa.nulls(3, pa.binary()), topics[:3], partitions[:3],
                                     pa.array(range(3)))
    assert values.to_pylist() == [None] * 3 and errors is None


def test_every_row_a_frame_long_and_one_not_framed():
    """Every row present and at least a frame long (read without taking rows out of the
    arrays), one with a bad magic byte: that row alone fails, the others keep their
    places."""
    rows = [framed(1, avro_encode(V1, {"id": n})) for n in range(4)]
    rows[2] = b"\x05" + rows[2][1:]
    values, errors = column().decode(pa.array(rows, pa.binary()), pa.array(["orders"] * 4),
                                     pa.array([0] * 4), pa.array(range(4)))
    assert values.to_pylist() == [{"id": 0, "note": ""}, {"id": 1, "note": ""}, None,
                                  {"id": 3, "note": ""}]
    assert [e is None for e in errors] == [True, True, False, True]
    assert "bad magic byte 0x05" in errors[2]
