"""valueFormat=avro / keyFormat=avro: Schema Registry framed Avro decoded into columns,
through the read path Spark's reader takes (DecodedRead plans and scans). The values are
encoded by Apache's `avro` package (an implementation independent of the fastavro the
reader decodes with), across four versions of a subject; every expected row is written
out by hand."""
import datetime as dt
import io
import json
import struct
import uuid
import warnings
from decimal import Decimal

import avro.errors
import avro.io
import avro.schema
import pyarrow as pa
import pytest

from segmentlog_datasource.decode import DecodedRead
from segmentlog_datasource.decode.reads import read_schema
from segmentlog_datasource.errors import (InvalidOptionError, RecordDecodeError,
                                          UnsupportedFormatError)
from segmentlog_datasource.writer import write_log
from support.reading import decoded_rows

UTC = dt.timezone.utc
ADDRESS = {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}
CUSTOMER = {"type": "record", "name": "Customer", "namespace": "shop", "fields": [
    {"name": "name", "type": "string"},
    {"name": "address", "type": ["null", ADDRESS], "default": None}]}


def order_schema(version):
    """The subject orders-value, version by version: v2 adds `qty` (default 1) and drops
    `legacy`, v3 promotes `id` from int to long, v4 widens the union `choice`."""
    fields = [
        {"name": "id", "type": "long" if version >= 3 else "int"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                   "scale": 2}},
        {"name": "big", "type": {"type": "fixed", "name": "Big", "size": 8,
                                 "logicalType": "decimal", "precision": 18, "scale": 4}},
        {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 4}},
        {"name": "blob", "type": "bytes"},
        {"name": "ok", "type": "boolean"},
        {"name": "ratio", "type": "float"},
        {"name": "score", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "local_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "num", "type": ["int", "long"]},
        {"name": "choice", "type": ["int", "string", "boolean"] if version >= 4
         else ["int", "string"]},
        {"name": "customer", "type": CUSTOMER},
        {"name": "nothing", "type": "null"},
    ]
    if version == 1:
        fields.insert(1, {"name": "legacy", "type": "string"})
    else:
        fields.append({"name": "qty", "type": "int", "default": 1})
    return {"type": "record", "name": "Order", "namespace": "shop", "fields": fields}


def entry(schema_id, subject, version, schema, schema_type=None, references=None):
    value = {"id": schema_id, "subject": subject, "version": version,
             "schema": json.dumps(schema)}
    if schema_type:
        value["schemaType"] = schema_type
    if references:
        value["references"] = references
    return value


# Order written by a schema under another subject: `status` as a string, which the reader's
# enum cannot take.
INCOMPATIBLE = dict(order_schema(4), fields=[
    dict(f, type="string") if f["name"] == "status" else f for f in order_schema(4)["fields"]])
EXPORT = [entry(1, "orders-value", 1, order_schema(1)),
          entry(2, "orders-value", 2, order_schema(2)),
          entry(3, "orders-value", 3, order_schema(3)),
          entry(4, "orders-value", 4, order_schema(4)),
          entry(5, "other-value", 1, INCOMPATIBLE),
          entry(6, "orders-key", 1, "string"),
          entry(7, "json-value", 1, {"type": "object"}, "JSON")]


def avro_encode(schema, datum) -> bytes:
    """`datum` in Avro binary, by Apache's avro package."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # it knows no local-timestamp types, and says so
        warnings.simplefilter("ignore", avro.errors.IgnoredLogicalType)
        parsed = avro.schema.parse(json.dumps(schema))
    avro.io.DatumWriter(parsed).write(datum, avro.io.BinaryEncoder(buffer))
    return buffer.getvalue()


def framed(schema_id, payload) -> bytes:
    return b"\x00" + struct.pack(">i", schema_id) + payload


def order(version, n):
    """The datum of order n written with version `version`."""
    datum = {
        "id": n, "status": "PAID" if n % 2 else "NEW", "price": Decimal("12.34") * n,
        "big": Decimal("-123456789.0001"), "code": b"AB\x00" + bytes([n]), "blob": b"",
        "ok": n % 2 == 0, "ratio": 0.5, "score": -1.25 * n,
        "tags": [f"t{i}" for i in range(n % 3)], "attrs": {"a": n, "b": -n} if n % 2 else {},
        "day": dt.date(2024, 2, 29), "at": dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=UTC),
        "at_us": dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        # Apache's avro package knows no local-timestamp types: their longs, by hand
        "local": 1714979289010,  # 2024-05-06T07:08:09.010
        "local_us": 946684800000001,  # 2000-01-01T00:00:00.000001
        "uid": str(uuid.UUID(int=n)), "note": None if n % 2 else f"note {n}",
        "num": 2 ** 40 + n, "choice": n if n % 2 else f"c{n}",
        "customer": {"name": f"cust{n}", "address": {"city": "Oslo"} if n % 2 else None},
        "nothing": None,
    }
    if version == 1:
        datum["legacy"] = "dropped"
    elif version >= 4 and n == 8:
        datum["choice"] = True
    if version >= 2:
        datum["qty"] = n * 10
    return datum


def expected(version, n):
    """Order n as the latest schema (v4) reads it: by hand."""
    return {
        "id": n, "status": "PAID" if n % 2 else "NEW", "price": Decimal("12.34") * n,
        "big": Decimal("-123456789.0001"), "code": b"AB\x00" + bytes([n]), "blob": b"",
        "ok": n % 2 == 0, "ratio": 0.5, "score": -1.25 * n,
        "tags": [f"t{i}" for i in range(n % 3)],
        "attrs": [("a", n), ("b", -n)] if n % 2 else [],
        "day": dt.date(2024, 2, 29), "at": dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=UTC),
        "at_us": dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        "local": dt.datetime(2024, 5, 6, 7, 8, 9, 10000),
        "local_us": dt.datetime(2000, 1, 1, 0, 0, 0, 1),
        "uid": f"00000000-0000-0000-0000-{n:012x}", "note": None if n % 2 else f"note {n}",
        "num": 2 ** 40 + n,
        "choice": {"member0": n, "member1": None, "member2": None} if n % 2 else
        {"member0": None, "member1": None, "member2": True} if version >= 4 and n == 8 else
        {"member0": None, "member1": f"c{n}", "member2": None},
        "customer": {"name": f"cust{n}", "address": {"city": "Oslo"} if n % 2 else None},
        "nothing": None,
        "qty": 1 if version == 1 else n * 10,  # v1 lacks it: the default
    }


# Rows: (version the value is written with, n); n 0 a null value.
WRITTEN = [(1, 1), (1, 2), (2, 3), (2, 4), (3, 5), (3, 6), (4, 7), (4, 8)]


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("avro")
    export = root / "registry.json"
    export.write_text(json.dumps(EXPORT))
    logdir = root / "logs"
    values = [framed(version, avro_encode(order_schema(version), order(version, n)))
              for version, n in WRITTEN] + [None]
    keys = [framed(6, avro_encode("string", f"k{n}")) for _, n in WRITTEN] + [None]
    write_log(str(logdir), pa.table({"key": keys, "value": values}), topic="orders",
              num_partitions=1)
    write_log(str(logdir), pa.table({"value": [b"plain"]}), topic="raw", num_partitions=1)
    return {"logdir": str(logdir), "export": str(export), "root": root}


def test_every_version_and_type_reads_as_the_latest_schema(logdir):
    options = {"path": logdir["logdir"], "subscribe": "orders", "valueFormat": "avro",
               "keyFormat": "avro", "schemas": logdir["export"]}
    schema = read_schema(options)
    assert schema.names[-2:] == ["keyDecoded", "valueDecoded"]
    value_type = schema.field("valueDecoded").type
    assert value_type.field("id").type == pa.int64()
    assert value_type.field("status").type == pa.string()
    assert value_type.field("price").type == pa.decimal128(9, 2)
    assert value_type.field("big").type == pa.decimal128(18, 4)
    assert value_type.field("code").type == pa.binary()
    assert value_type.field("ratio").type == pa.float32()
    assert value_type.field("attrs").type == pa.map_(pa.string(), pa.int64())
    assert value_type.field("day").type == pa.date32()
    assert value_type.field("at").type == pa.timestamp("us", tz="UTC")
    assert value_type.field("local").type == pa.timestamp("us")
    assert value_type.field("uid").type == pa.string()
    assert value_type.field("num").type == pa.int64()
    assert value_type.field("choice").type == pa.struct(
        [("member0", pa.int32()), ("member1", pa.string()), ("member2", pa.bool_())])
    assert value_type.field("nothing").type == pa.null()
    assert "legacy" not in value_type.names
    got = decoded_rows(options)
    assert [row["valueDecoded"] for row in got] == \
        [expected(version, n) for version, n in WRITTEN] + [None]
    assert [row["keyDecoded"] for row in got] == [f"k{n}" for _, n in WRITTEN] + [None]
    assert got[0]["value"].startswith(b"\x00\x00\x00\x00\x01")  # the raw value kept


def test_registry_from_the_schemas_topic(logdir, tmp_path):
    """With no `schemas` option the registry is the log's own _schemas topic."""
    keys, values = [], []
    for item in EXPORT:
        keys.append(json.dumps({"keytype": "SCHEMA", "subject": item["subject"],
                                "version": item["version"], "magic": 1}).encode())
        values.append(json.dumps(dict(item, deleted=False)).encode())
    logs = str(tmp_path)
    write_log(logs, pa.table({"key": keys, "value": values}), topic="_schemas",
              num_partitions=1)
    value = framed(2, avro_encode(order_schema(2), order(2, 3)))
    write_log(logs, pa.table({"value": [value]}), topic="orders", num_partitions=1)
    got = decoded_rows({"path": logs, "valueFormat": "avro"})  # _schemas is passed over
    assert [(row["topic"], row["valueDecoded"]) for row in got] == [("orders", expected(2, 3))]


def bad_payloads():
    good = avro_encode(order_schema(4), order(4, 7))
    return [
        ("bad magic byte 0x01", b"\x01" + framed(4, good)[1:]),
        ("unknown schema id: schema id 99 is not in", framed(99, good)),
        ("truncated payload", framed(4, good[:-3])),
        ("truncated payload: 3 bytes", b"\x00\x00\x00"),
        ("incompatible writer schema", framed(5, avro_encode(INCOMPATIBLE, order(4, 7)))),
        ("is a JSON schema", framed(7, b"{}")),
        ("bytes left over", framed(4, good + b"\x00")),
    ]


@pytest.fixture(scope="module")
def bad_logdir(logdir):
    path = str(logdir["root"] / "bad")
    values = [framed(4, avro_encode(order_schema(4), order(4, 7)))] + \
        [payload for _, payload in bad_payloads()]
    write_log(path, pa.table({"value": values}), topic="orders", num_partitions=1)
    return path


@pytest.mark.parametrize("row", range(1, len(bad_payloads()) + 1))
def test_failfast_names_topic_partition_offset_and_reason(logdir, bad_logdir, row):
    reason = bad_payloads()[row - 1][0]
    options = {"path": bad_logdir, "valueFormat": "avro", "schemas": logdir["export"],
               "assign": '{"orders":[0]}', "startingOffsets": json.dumps({"orders": {"0": row}}),
               "endingOffsets": json.dumps({"orders": {"0": row + 1}})}
    with pytest.raises(RecordDecodeError) as failure:
        decoded_rows(options)
    assert failure.value.offset == row
    assert f"orders-0 offset {row}: value: " in str(failure.value)
    assert reason in str(failure.value)


def test_permissive_gives_nulls_and_the_reasons(logdir, bad_logdir):
    got = decoded_rows({"path": bad_logdir, "valueFormat": "avro", "schemas": logdir["export"],
                "mode": "PERMISSIVE"})
    assert got[0]["valueDecoded"] == expected(4, 7) and got[0]["valueError"] is None
    for row, (reason, _) in zip(got[1:], bad_payloads()):
        assert row["valueDecoded"] is None
        assert f"orders-0 offset {row['offset']}: value: " in row["valueError"]
        assert reason in row["valueError"]


def test_option_errors(logdir):
    base = {"path": logdir["logdir"], "schemas": logdir["export"]}
    with pytest.raises(InvalidOptionError, match="option 'decode'.*valueFormat=avro"):
        DecodedRead(dict(base, valueFormat="avro", decode="consumerOffsets"))
    with pytest.raises(InvalidOptionError, match="'valueFormat': invalid value 'xml'"):
        DecodedRead(dict(base, valueFormat="xml"))
    with pytest.raises(InvalidOptionError, match="topic 'raw' has no schema under subject "
                                                 "'raw-value'"):
        DecodedRead(dict(base, valueFormat="avro"))  # every topic but _schemas
    with pytest.raises(InvalidOptionError, match="option 'valueRecordName'"):
        DecodedRead(dict(base, valueFormat="avro", subscribe="orders",
                         subjectNameStrategy="RecordNameStrategy"))
    with pytest.raises(InvalidOptionError, match="option 'schemas'.*only with"):
        DecodedRead(dict(base, subscribe="orders"))


def test_record_name_strategy_and_several_topics(logdir, tmp_path):
    export = tmp_path / "registry.json"
    export.write_text(json.dumps(EXPORT + [entry(8, "shop.Order", 1, order_schema(4)),
                                           entry(9, "other-value", 2, order_schema(3))]))
    logs = str(tmp_path / "logs")
    for topic in ("a", "b"):
        write_log(logs, pa.table({"value": [framed(8, avro_encode(order_schema(4),
                                                                   order(4, 7)))]}),
                  topic=topic, num_partitions=1)
    got = decoded_rows({"path": logs, "valueFormat": "avro", "schemas": str(export),
                "subjectNameStrategy": "io.confluent.kafka.serializers.subject."
                                       "RecordNameStrategy", "valueRecordName": "shop.Order"})
    assert [(r["topic"], r["valueDecoded"]) for r in got] == \
        [("a", expected(4, 7)), ("b", expected(4, 7))]
    with pytest.raises(InvalidOptionError, match="different latest schemas"):
        DecodedRead({"path": logdir["logdir"], "valueFormat": "avro", "schemas": str(export),
                     "subscribe": "orders,other"})


def test_recursive_schema_names_subject_and_version(tmp_path):
    node = {"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"], "default": None}]}
    export = tmp_path / "registry.json"
    export.write_text(json.dumps([entry(1, "list-value", 3, node)]))
    logs = str(tmp_path / "logs")
    write_log(logs, pa.table({"value": [b"x"]}), topic="list", num_partitions=1)
    with pytest.raises(UnsupportedFormatError,
                       match="subject 'list-value' version 3.*recursive schema: Node"):
        read_schema({"path": logs, "valueFormat": "avro", "schemas": str(export)})


def test_without_fastavro_the_error_names_the_extra(logdir, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "fastavro", None)  # as if not installed
    with pytest.raises(InvalidOptionError, match=r'pip install "segmentlog\[avro\]"'):
        DecodedRead({"path": logdir["logdir"], "schemas": logdir["export"],
                     "subscribe": "orders", "valueFormat": "avro"})
