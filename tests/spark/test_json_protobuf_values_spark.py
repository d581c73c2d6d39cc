"""valueFormat=json and valueFormat=protobuf through Spark's batch reader (the logs of the
decode tests: JSON encoded by the standard library, Protobuf serialized by the runtime from
hand-built descriptors), and a streaming query whose subject gets new versions while it
runs: the reader schema stays the one fixed when the query started."""
import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa

from decode.test_avro_values import avro_encode, framed
from segmentlog_datasource.writer import write_log

UTC = dt.timezone.utc


def read_permissive(spark, logdir, value_format, export):
    return (spark.read.format("segmentlog").option("valueFormat", value_format)
            .option("schemas", export).option("mode", "PERMISSIVE").load(logdir))


def test_json_schema_values_as_a_struct_column(spark, tmp_path):
    from decode.test_json_schema_values import orders_log

    logdir, export = orders_log(tmp_path)
    df = read_permissive(spark, logdir, "json", export)
    decoded = df.schema["valueDecoded"].dataType
    assert decoded.simpleString() == ("struct<id:bigint,amount:double,currency:string,"
                                      "note:string,ship:struct<city:string,zip:string>>")
    # required properties are not nullable
    assert [(f.name, f.nullable) for f in decoded.fields][:3] == [
        ("id", False), ("amount", False), ("currency", True)]
    rows = sorted((row.asDict(recursive=True) for row in
                   df.select("offset", "valueDecoded", "valueError").collect()),
                  key=lambda row: row["offset"])  # sorted here: an orderBy is a second job
    assert rows[:3] == [
        {"offset": 0, "valueError": None, "valueDecoded": {
            "id": 1, "amount": 5.0, "currency": "EUR", "note": None, "ship": None}},
        {"offset": 1, "valueDecoded": None, "valueError": None},
        {"offset": 2, "valueError": None, "valueDecoded": {
            "id": 2, "amount": 1.5, "currency": "EUR", "note": None,
            "ship": {"city": "Oslo", "zip": "0150"}}}]
    assert rows[3]["valueDecoded"] is None and rows[3]["valueError"] == (
        "orders-0 offset 3: value: schema id 4 (orders-value version 2): field ship.city: "
        "absent, and the column's schema requires it (with no default)")
    assert rows[4]["valueDecoded"] is None
    assert rows[4]["valueError"].startswith("orders-0 offset 4: value: unknown schema id: "
                                            "schema id 9 is not in")


def test_protobuf_values_as_a_struct_column(spark, tmp_path):
    from decode.test_protobuf_values import orders_log

    logdir, export = orders_log(tmp_path)
    df = read_permissive(spark, logdir, "protobuf", export)
    line = "struct<sku:string,count:int>"
    assert df.schema["valueDecoded"].dataType.simpleString() == (
        "struct<id:int,quantity:bigint,note:string,delta:int,small_count:bigint,"
        "big_count:decimal(20,0),checksum:decimal(20,0),offset:int,price:double,ratio:float,"
        f"paid:boolean,blob:binary,status:string,lines:array<{line}>,tags:array<string>,"
        f"counters:map<string,bigint>,lines_by_number:map<int,{line}>,card:string,"
        "voucher:bigint,placed_at:timestamp,discount:int,coupon:string,"
        "ship_to:struct<city:string,zip:string>,gift_message:string>")
    rows = df.select("offset", "valueDecoded.id", "valueDecoded.quantity",
                     "valueDecoded.big_count", "valueDecoded.status", "valueDecoded.tags",
                     "valueDecoded.counters", "valueDecoded.placed_at",
                     "valueDecoded.ship_to", "valueDecoded.discount",
                     "valueError").collect()
    rows.sort(key=lambda row: row.offset)
    at = dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=UTC)
    got = [tuple(row) for row in rows]
    # v1 (id, legacy, quantity) read into the latest: proto3 defaults, nulls for presence
    assert got[0] == (0, 1, 3, Decimal(0), "STATUS_UNKNOWN", [], {}, None, None, None, None)
    assert got[1] == (1,) + (None,) * 10  # a null value
    assert got[2][:7] == (2, 2, 2 ** 40, Decimal(2 ** 64 - 1), "SHIPPED", ["a", "b"],
                          {"x": 7})
    assert got[2][7].astimezone(UTC) == at
    assert tuple(got[2][8]) == ("Oslo", "") and got[2][9:] == (None, None)
    assert [row.valueError.split(": value: ")[1].split(" ")[:3] for row in rows[3:]] == [
        ["bad", "magic", "byte"], ["unknown", "schema", "id:"], ["truncated", "payload:", "2"]]
    assert all(row.id is None for row in rows[3:])


def order_schema(version):
    """orders-value, version by version: v2 adds qty with a default (it resolves to v1), v3
    makes item an int (an int does not resolve to v1's string)."""
    fields = [{"name": "id", "type": "long"},
              {"name": "item", "type": "int" if version == 3 else "string"}]
    if version >= 2:
        fields.append({"name": "qty", "type": "int", "default": 1})
    return {"type": "record", "name": "Order", "namespace": "shop", "fields": fields}


def register(logdir, version):
    """orders-value `version` (schema id `version`) appended to `_schemas`, as Schema
    Registry writes it."""
    key = {"keytype": "SCHEMA", "subject": "orders-value", "version": version, "magic": 1}
    value = {"subject": "orders-value", "version": version, "id": version,
             "schema": json.dumps(order_schema(version)), "deleted": False}
    write_log(logdir, pa.table({"key": [json.dumps(key).encode()],
                                "value": [json.dumps(value).encode()]}),
              topic="_schemas", num_partitions=1)


def produce(logdir, version, orders):
    write_log(logdir, pa.table({"value": [
        framed(version, avro_encode(order_schema(version), order)) for order in orders]}),
        topic="orders", num_partitions=1)


def test_a_stream_reads_later_versions_into_the_schema_fixed_when_it_started(spark, tmp_path):
    logdir = str(tmp_path / "logs")
    register(logdir, 1)
    produce(logdir, 1, [{"id": 1, "item": "tea"}])
    query = (spark.readStream.format("segmentlog").option("valueFormat", "avro")
             .option("subscribe", "orders").option("mode", "PERMISSIVE").load(logdir)
             .select("offset", "valueDecoded", "valueError")
             .writeStream.format("memory").queryName("orders_reloaded")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        query.processAllAvailable()
        # While it runs: version 2 is registered and used, then an incompatible version 3.
        register(logdir, 2)
        produce(logdir, 2, [{"id": 2, "item": "cup", "qty": 3}])
        query.processAllAvailable()
        register(logdir, 3)
        produce(logdir, 3, [{"id": 3, "item": 7, "qty": 1}])
        query.processAllAvailable()
    finally:
        query.stop()
    table = spark.table("orders_reloaded")
    assert table.schema["valueDecoded"].dataType.simpleString() == \
        "struct<id:bigint,item:string>"  # v1's, as when the query started: no qty
    rows = sorted(tuple(row) for row in table.collect())
    assert [tuple(row[1]) if row[1] else None for row in rows] == [(1, "tea"), (2, "cup"),
                                                                    None]
    assert rows[0][2] is None and rows[1][2] is None
    assert rows[2][2].startswith(
        "orders-0 offset 2: value: schema id 3 (orders-value version 3): incompatible writer "
        "schema: it does not resolve to the reader schema, subject 'orders-value' version 1 "
        "(schema id 1): ")
