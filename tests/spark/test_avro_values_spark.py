"""valueFormat=avro through Spark, batch and streaming: Schema Registry framed Avro values
(encoded by Apache's avro package) decoded with the schemas of the log's own `_schemas`
topic, into a struct column typed as spark-avro types it."""
import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest

from decode.test_avro_values import EXPORT, avro_encode, framed, order, order_schema
from segmentlog_datasource.writer import write_log

WRITTEN = [(1, 1), (2, 4), (3, 5), (4, 8)]  # (schema version, order number)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """A log dir with Schema Registry's `_schemas` topic and a topic of framed orders."""
    logdir = str(tmp_path_factory.mktemp("avro_spark"))
    keys = [json.dumps({"keytype": "SCHEMA", "subject": item["subject"],
                        "version": item["version"], "magic": 1}).encode() for item in EXPORT]
    values = [json.dumps(dict(item, deleted=False)).encode() for item in EXPORT]
    write_log(logdir, pa.table({"key": keys, "value": values}), topic="_schemas",
              num_partitions=1)
    orders = [framed(version, avro_encode(order_schema(version), order(version, n)))
              for version, n in WRITTEN] + [b"\x07 not framed"]
    write_log(logdir, pa.table({"value": orders}), topic="orders", num_partitions=1)
    return logdir


def test_avro_values_as_a_struct_column(spark, logdir):
    df = spark.read.format("segmentlog").option("valueFormat", "avro") \
        .option("mode", "PERMISSIVE").load(logdir)
    assert df.columns[-2:] == ["valueDecoded", "valueError"]
    assert df.schema["valueDecoded"].dataType.simpleString().startswith(
        "struct<id:bigint,status:string,price:decimal(9,2),big:decimal(18,4),code:binary,"
        "blob:binary,ok:boolean,ratio:float,score:double,tags:array<string>,"
        "attrs:map<string,bigint>,day:date,at:timestamp,at_us:timestamp,"
        "local:timestamp_ntz,local_us:timestamp_ntz,uid:string,note:string,num:bigint,"
        "choice:struct<member0:int,member1:string,member2:boolean>,"
        "customer:struct<name:string,address:struct<city:string>>,")
    rows = df.select("topic", "offset", "valueDecoded.id", "valueDecoded.price",
                     "valueDecoded.attrs", "valueDecoded.local", "valueDecoded.choice.member2",
                     "valueDecoded.customer.address.city", "valueDecoded.qty",
                     "valueError").orderBy("offset").collect()
    assert [tuple(row) for row in rows[:4]] == [
        ("orders", 0, 1, Decimal("12.34"), {"a": 1, "b": -1},
         dt.datetime(2024, 5, 6, 7, 8, 9, 10000), None, "Oslo", 1, None),
        ("orders", 1, 4, Decimal("49.36"), {}, dt.datetime(2024, 5, 6, 7, 8, 9, 10000),
         None, None, 40, None),
        ("orders", 2, 5, Decimal("61.70"), {"a": 5, "b": -5},
         dt.datetime(2024, 5, 6, 7, 8, 9, 10000), None, "Oslo", 50, None),
        ("orders", 3, 8, Decimal("98.72"), {}, dt.datetime(2024, 5, 6, 7, 8, 9, 10000),
         True, None, 80, None)]
    assert rows[4].id is None and "orders-0 offset 4: value: bad magic byte 0x07" in \
        rows[4].valueError


def test_avro_values_stream(spark, logdir, tmp_path):
    query = (spark.readStream.format("segmentlog").option("valueFormat", "avro")
             .option("subscribe", "orders")
             .option("maxOffsetsPerTrigger", "2").load(logdir)
             .where("offset < 4")
             .select("offset", "valueDecoded.id", "valueDecoded.at", "valueDecoded.uid")
             .writeStream.format("memory").queryName("avro_orders")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    with pytest.raises(Exception, match="orders-0 offset 4: value: bad magic byte 0x07"):
        query.awaitTermination()  # FAILFAST: the unframed value stops the query
    rows = spark.sql("SELECT * FROM avro_orders ORDER BY offset").collect()
    at = dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.timezone.utc)
    assert [(r.offset, r.id, r.at.astimezone(dt.timezone.utc), r.uid) for r in rows] == [
        (offset, n, at, f"00000000-0000-0000-0000-{n:012x}")
        for offset, (_, n) in enumerate(WRITTEN)]
