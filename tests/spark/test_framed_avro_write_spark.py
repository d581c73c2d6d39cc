"""valueFormat=avro on df.write: a struct column written Confluent-framed, its schema
registered in the log dir's `_schemas`, read back by the same source equal."""
import json
from decimal import Decimal

from support.reading import read_values


def test_a_struct_value_written_as_framed_avro_reads_back(spark, tmp_path):
    logdir = str(tmp_path / "logdir")
    df = spark.createDataFrame(
        [(1, "a", Decimal("1.50"), ["x"], {"k": 1}), (2, None, None, [], {})],
        "id bigint, name string, price decimal(9,2), tags array<string>, "
        "attrs map<string,int>").selectExpr("struct(*) AS value")
    df.write.format("segmentlog").option("topic", "orders").option("numPartitions", 1) \
        .option("valueFormat", "avro").mode("append").save(logdir)
    back = spark.read.format("segmentlog").option("valueFormat", "avro").load(logdir)
    assert back.schema["valueDecoded"].dataType.simpleString() == \
        "struct<id:bigint,name:string,price:decimal(9,2),tags:array<string>," \
        "attrs:map<string,int>>"
    assert sorted(tuple(r.valueDecoded) for r in back.select("valueDecoded").collect()) == \
        sorted(tuple(r.value) for r in df.collect())
    (value,) = read_values(logdir, subscribe="_schemas")[("_schemas", 0)]
    registered = json.loads(value)
    assert (registered["subject"], registered["version"], registered["id"]) == \
        ("orders-value", 1, 1)
    assert json.loads(registered["schema"])["fields"][0] == {"name": "id", "type": ["long", "null"]}


def test_json_schema_and_protobuf_values_written_by_spark_read_back(spark, tmp_path):
    """valueFormat=json and protobuf on df.write: one log dir, a topic each, both subjects
    registered in its `_schemas`; a read gives the rows back with the column's types."""
    logdir = str(tmp_path / "logdir")
    df = spark.createDataFrame(
        [(1, "a", 0.5, ["x"]), (2, None, None, [])],
        "id bigint, name string, score double, tags array<string>") \
        .selectExpr("struct(*) AS value")
    for language in ("json", "protobuf"):
        df.write.format("segmentlog").option("topic", language).option("numPartitions", 1) \
            .option("valueFormat", language).mode("append").save(logdir)
    for language in ("json", "protobuf"):
        back = spark.read.format("segmentlog").option("subscribe", language) \
            .option("valueFormat", language).load(logdir)
        assert back.schema["valueDecoded"].dataType.simpleString() == \
            "struct<id:bigint,name:string,score:double,tags:array<string>>", language
        assert sorted(tuple(r.valueDecoded) for r in back.select("valueDecoded").collect()) \
            == sorted(tuple(r.value) for r in df.collect()), language
    registered = [json.loads(v) for v in read_values(logdir, subscribe="_schemas")
                  [("_schemas", 0)]]
    assert [(r["subject"], r["id"], r["schemaType"]) for r in registered] == \
        [("json-value", 1, "JSON"), ("protobuf-value", 2, "PROTOBUF")]
