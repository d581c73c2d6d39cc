"""Framed writes in every schema language through the engine (no Spark): a struct value
and key written as Confluent-framed Avro, JSON Schema or Protobuf, the schemas registered
in `_schemas` with their schemaType, read back equal through the decode layer; payloads
checked by an independent reader of each language (Apache's avro, json, the protobuf
runtime with a hand-built descriptor); evolution across versions; the record strategies."""
import io
import json

import pyarrow as pa
import pytest

from segmentlog_datasource.errors import InvalidOptionError
from segmentlog_datasource.writer import write_log
from segmentlog_datasource.writer.framed import SchemaRegistrationError
from support.reading import decoded_rows, read_values

V1 = pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string()),
                pa.field("tags", pa.list_(pa.field("item", pa.string(), False)))])
ROWS = [{"id": 1, "name": "a", "tags": ["x", "y"]}, {"id": 2, "name": None, "tags": []},
        None]
KEY = pa.struct([pa.field("k", pa.string(), False)])
KEYS = [{"k": "a"}, {"k": "b"}, {"k": "c"}]
SCHEMA_TYPES = {"avro": None, "json": "JSON", "protobuf": "PROTOBUF"}  # AVRO is left out
LANGUAGES = tuple(SCHEMA_TYPES)


def registered(logdir):
    return [json.loads(v) for v in read_values(logdir, subscribe="_schemas")
            .get(("_schemas", 0), [])]


def independent_reader(language, schema_text):
    """Payload (after the 5-byte frame) -> value, by another implementation than ours."""
    if language == "avro":
        import avro.io
        import avro.schema

        reader = avro.io.DatumReader(avro.schema.parse(schema_text))
        return lambda payload: reader.read(avro.io.BinaryDecoder(io.BytesIO(payload)))
    if language == "json":
        return lambda payload: json.loads(payload.decode("utf-8"))
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    # what the derived message must be, built by hand: id = 1, optional name = 2,
    # repeated tags = 3
    file = descriptor_pb2.FileDescriptorProto(name="hand.proto", syntax="proto3")
    message = file.message_type.add(name="topLevelRecord")
    F = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    message.field.add(name="name", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL,
                      proto3_optional=True, oneof_index=0)
    message.oneof_decl.add(name="_name")
    message.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("topLevelRecord"))

    def parse(payload):
        assert payload[:1] == b"\x00"  # message indexes: the first message
        parsed = cls.FromString(payload[1:])
        return {"id": parsed.id, "name": parsed.name if parsed.HasField("name") else None,
                "tags": list(parsed.tags)}
    return parse


@pytest.mark.parametrize("language", LANGUAGES)
def test_round_trip_with_a_key_and_an_independent_reader(tmp_path, language):
    logdir = str(tmp_path)
    table = pa.table({"key": pa.array(KEYS, KEY), "value": pa.array(ROWS, V1)})
    write_log(logdir, table, topic="orders", num_partitions=1,
              options={"valueFormat": language, "keyFormat": language})
    schemas = registered(logdir)
    assert [(s["subject"], s["version"], s["id"], s.get("schemaType")) for s in schemas] == \
        [("orders-key", 1, 1, SCHEMA_TYPES[language]),
         ("orders-value", 1, 2, SCHEMA_TYPES[language])]
    got = decoded_rows({"path": logdir, "subscribe": "orders", "valueFormat": language,
                        "keyFormat": language})
    assert [row["valueDecoded"] for row in got] == ROWS
    assert [row["keyDecoded"] for row in got] == KEYS

    values = read_values(logdir, subscribe="orders")[("orders", 0)]
    assert values[2] is None  # a null struct: a null Kafka value
    for value in values[:2]:
        assert value[:5] == b"\x00" + (2).to_bytes(4, "big")
    read = independent_reader(language, schemas[1]["schema"])
    assert [read(value[5:]) for value in values[:2]] == ROWS[:2]


# A second version each language's derived schemas accept at BACKWARD: Avro's derived
# fields have no defaults, so a field may go but not come; JSON Schema's derived objects
# are closed (additionalProperties false), so an optional property may come but not go;
# Protobuf takes both.
V2 = {
    "avro": (pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string())]),
             [{"id": 3, "name": "c"}]),
    "json": (pa.struct([*V1, pa.field("note", pa.string())]),
             [{"id": 3, "name": "c", "tags": ["z"], "note": "n"}]),
    "protobuf": (pa.struct([*V1, pa.field("note", pa.string())]),
                 [{"id": 3, "name": "c", "tags": ["z"], "note": "n"}]),
}


@pytest.mark.parametrize("language", LANGUAGES)
def test_three_versions_then_an_incompatible_one(tmp_path, language):
    """v1, then a compatible v2, then v2 again (its id kept, nothing registered), then a
    field's type changed: refused, nothing written; every record reads back into the
    latest schema."""
    logdir = str(tmp_path)
    v2, v2_rows = V2[language]
    write_log(logdir, pa.table({"value": pa.array(ROWS[:2], V1)}), topic="orders",
              num_partitions=1, options={"valueFormat": language})
    for rows in (v2_rows, v2_rows):
        write_log(logdir, pa.table({"value": pa.array(rows, v2)}), topic="orders",
                  options={"valueFormat": language})
    assert [(s["version"], s["id"]) for s in registered(logdir)] == [(1, 1), (2, 2)]
    before = read_values(logdir)
    v3 = pa.struct([pa.field("id", pa.string(), False), *list(v2)[1:]])
    with pytest.raises(SchemaRegistrationError, match=r"incompatible with subject "
                       r"'orders-value' version 2 .*BACKWARD \(it would have been version 3\)"
                       r".*id"):
        write_log(logdir, pa.table({"value": pa.array([{"id": "5"}], v3)}),
                  topic="orders", options={"valueFormat": language})
    assert read_values(logdir) == before
    got = decoded_rows({"path": logdir, "subscribe": "orders", "valueFormat": language})
    latest = [field.name for field in v2]
    want = [{name: row.get(name, [] if name == "tags" and language == "protobuf" else None)
             for name in latest} for row in ROWS[:2] + v2_rows + v2_rows]
    assert [row["valueDecoded"] for row in got] == want


@pytest.mark.parametrize("language", LANGUAGES)
def test_record_name_strategy_across_topics(tmp_path, language):
    """RecordNameStrategy: two topics writing one record share its subject and its id."""
    logdir = str(tmp_path)
    options = {"valueFormat": language, "valueRecordName": "shop.Order",
               "subjectNameStrategy": "RecordNameStrategy"}
    for topic in ("orders", "returns"):
        write_log(logdir, pa.table({"value": pa.array(ROWS[:1], V1)}), topic=topic,
                  num_partitions=1, options=options)
    assert [(s["subject"], s["id"]) for s in registered(logdir)] == [("shop.Order", 1)]
    for topic in ("orders", "returns"):
        got = decoded_rows({"path": logdir, "subscribe": topic, "valueFormat": language,
                            "subjectNameStrategy": "RecordNameStrategy",
                            "valueRecordName": "shop.Order"})
        assert [row["valueDecoded"] for row in got] == ROWS[:1]


def test_a_given_proto_file_writes_the_message_the_record_name_picks(tmp_path):
    """valueProtobufSchema with two messages and valueRecordName naming the second: the
    frame carries its message indexes ([1]), the subject is named after it under
    RecordNameStrategy, and the reader picks it by the same name."""
    logdir = str(tmp_path)
    proto = ('syntax = "proto3";\npackage shop;\n'
             'message Order { int64 id = 1; }\n'
             'message Refund { int64 id = 1; optional string reason = 2; }\n')
    refund = pa.struct([pa.field("id", pa.int64(), False), pa.field("reason", pa.string())])
    rows = [{"id": 9, "reason": "late"}, {"id": 10, "reason": None}]
    options = {"valueFormat": "protobuf", "valueProtobufSchema": proto,
               "valueRecordName": "shop.Refund", "subjectNameStrategy": "RecordNameStrategy"}
    write_log(logdir, pa.table({"value": pa.array(rows, refund)}), topic="refunds",
              num_partitions=1, options=options)
    assert [(s["subject"], s["id"]) for s in registered(logdir)] == [("shop.Refund", 1)]
    values = read_values(logdir, subscribe="refunds")[("refunds", 0)]
    # the frame, then the message indexes as zig-zag varints: a count of 1, index 1
    assert [value[:7] for value in values] == [b"\x00\x00\x00\x00\x01\x02\x02"] * 2
    got = decoded_rows({"path": logdir, "subscribe": "refunds", "valueFormat": "protobuf",
                        "subjectNameStrategy": "RecordNameStrategy",
                        "valueRecordName": "shop.Refund"})
    assert [row["valueDecoded"] for row in got] == rows
    with pytest.raises(InvalidOptionError, match="option .valueProtobufSchema. has no message "
                       "'shop.Nothing' \\(its top-level messages: shop.Order, shop.Refund\\)"):
        write_log(logdir, pa.table({"value": pa.array(rows, refund)}), topic="refunds",
                  options={**options, "valueRecordName": "shop.Nothing"})
