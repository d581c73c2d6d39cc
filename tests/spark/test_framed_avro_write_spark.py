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


def test_nested_timestamps_write_and_read_back_in_any_session_time_zone(spark, tmp_path):
    """A struct with timestamps in a struct, an array and a map (and a date): written in
    sessions zoned east and west of UTC, each language's values are the same bytes, and a
    read in another zone gives back the same instants."""
    zone_before = spark.conf.get("spark.sql.session.timeZone")
    logdir = str(tmp_path / "logdir")
    columns = ("TIMESTAMP'2024-03-31 00:59:59.123456 UTC' AS at, "
               "named_struct('when', TIMESTAMP'2024-11-03 06:30:00 UTC', "
               "'day', DATE'2024-11-03') AS inner, "
               "array(TIMESTAMP'1969-12-31 23:59:59.999999 UTC') AS history, "
               "map('first', TIMESTAMP'2024-01-01 00:00:00 UTC') AS by_name")
    try:
        written = {}
        for zone in ("Europe/Berlin", "America/New_York"):
            spark.conf.set("spark.sql.session.timeZone", zone)
            for language in ("avro", "json", "protobuf"):
                selected = columns if language != "protobuf" else \
                    columns.replace(", 'day', DATE'2024-11-03'", "")  # no Protobuf date
                topic = f"{language}-{zone.replace('/', '-')}"
                spark.sql(f"SELECT struct(*) AS value FROM (SELECT {selected})").write \
                    .format("segmentlog").option("topic", topic).option("numPartitions", 1) \
                    .option("valueFormat", language).mode("append").save(logdir)
                written[(language, zone)] = read_values(logdir, subscribe=topic)[(topic, 0)]
        spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
        for language in ("avro", "json", "protobuf"):
            assert written[(language, "Europe/Berlin")] == \
                written[(language, "America/New_York")], language
            topic = f"{language}-Europe-Berlin"
            (row,) = spark.read.format("segmentlog").option("subscribe", topic) \
                .option("valueFormat", language).load(logdir) \
                .selectExpr("unix_micros(valueDecoded.at) AS at",
                            "unix_micros(valueDecoded.inner.when) AS inner_when",
                            "unix_micros(valueDecoded.history[0]) AS history",
                            "unix_micros(valueDecoded.by_name['first']) AS first").collect()
            assert tuple(row) == (1711846799123456, 1730615400000000, -1,
                                  1704067200000000), language
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone_before)
