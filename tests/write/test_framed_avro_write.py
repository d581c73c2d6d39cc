"""valueFormat=avro on write (engine, no Spark): a struct column written as Confluent-framed
Avro, its schema registered in the log dir's `_schemas` topic as Schema Registry registers
it, read back through the decode layer and by Apache's avro package."""
import datetime as dt
import io
import json
import os
import struct
from decimal import Decimal

import avro.io
import avro.schema
import pyarrow as pa
import pytest

from segmentlog_datasource.errors import InvalidOptionError
from segmentlog_datasource.format import ScanOptions
from segmentlog_datasource.schemas import registry_records as records
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.writer import SegmentLogWriter, write_log
from segmentlog_datasource.writer.errors import ConcurrentWriteError, InvalidInputError
from segmentlog_datasource.writer.framed import SchemaRegistrationError
from segmentlog_datasource.writer.locks import acquire_lock, release_lock
from support.reading import decoded_rows, read_values

UTC = dt.timezone.utc
ORDER = pa.struct([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("qty", pa.int32()),
    pa.field("ok", pa.bool_()),
    pa.field("score", pa.float64()),
    pa.field("blob", pa.binary()),
    pa.field("price", pa.decimal128(9, 2)),
    pa.field("day", pa.date32()),
    pa.field("at", pa.timestamp("us", tz="UTC")),
    pa.field("tags", pa.list_(pa.string())),
    pa.field("attrs", pa.map_(pa.string(), pa.int64())),
    pa.field("address", pa.struct([pa.field("city", pa.string())])),
])
ROWS = [
    {"id": 1, "name": "a", "qty": 3, "ok": True, "score": 0.5, "blob": b"\x00\xff",
     "price": Decimal("12.34"), "day": dt.date(2024, 5, 6),
     "at": dt.datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=UTC), "tags": ["x", None, "y"],
     "attrs": [("a", 1), ("b", -1)], "address": {"city": "Oslo"}},
    {"id": 2, "name": None, "qty": None, "ok": None, "score": None, "blob": None,
     "price": None, "day": None, "at": None, "tags": [], "attrs": [], "address": None},
    None,  # a null value: a null Kafka value, not Avro
]
V1 = ('{"type":"record","name":"topLevelRecord","fields":[{"name":"id","type":"long"},'
      '{"name":"name","type":["string","null"]}]}')


def orders(rows, type_=ORDER):
    return pa.table({"value": pa.array(rows, type_)})


def schema_records(logdir):
    """The (key, value) bytes of the `_schemas` records, in offset order."""
    rows = []
    for fragment in plan_fragments(parse_read_options({"path": logdir,
                                                       "subscribe": "_schemas"}),
                                   Constraints()):
        for batch in fragment.scan(ScanOptions()):
            rows.extend(zip(*(batch.column(name).to_pylist()
                              for name in ("offset", "key", "value"))))
    return [(key, value) for _, key, value in sorted(rows)]


def state(logdir):
    """What a reader sees: every topic-partition's values, and the log dir's names."""
    return read_values(logdir), sorted(os.listdir(logdir))


def test_round_trip_through_the_decode_layer_and_apache_avro(tmp_path):
    logdir = str(tmp_path)
    write_log(logdir, orders(ROWS), topic="orders", num_partitions=1,
              options={"valueFormat": "avro"})
    got = decoded_rows({"path": logdir, "subscribe": "orders", "valueFormat": "avro"})
    assert [row["valueDecoded"] for row in got] == ROWS

    (key, value), = schema_records(logdir)
    schema = json.loads(value)["schema"]
    assert json.loads(schema)["name"] == "topLevelRecord"
    parsed = avro.schema.parse(schema)
    for row, raw in zip(ROWS, [r["value"] for r in got]):
        if row is None:
            assert raw is None
            continue
        assert raw[:5] == b"\x00" + struct.pack(">i", 1)
        datum = avro.io.DatumReader(parsed).read(avro.io.BinaryDecoder(io.BytesIO(raw[5:])))
        wanted = dict(row, attrs=dict(row["attrs"]))
        assert datum == wanted


def test_schemas_records_are_what_schema_registry_writes(tmp_path):
    logdir = str(tmp_path)
    table = orders([{"id": 7, "name": "n"}, {"id": 8, "name": None}],
                   pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string())]))
    write_log(logdir, table, topic="orders", num_partitions=3, compression="gzip",
              options={"valueFormat": "avro"})
    write_log(logdir, table, topic="orders", options={"valueFormat": "avro"})  # same: id kept
    key, value = schema_records(logdir)[0]
    assert len(schema_records(logdir)) == 1
    assert key == b'{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}'
    assert value == (b'{"subject":"orders-value","version":1,"id":1,"schema":'
                     + json.dumps(V1).encode() + b',"deleted":false}')
    assert (key, value) == records.encode_record(
        records.SchemaValue("orders-value", 1, 1, V1))
    # Schema Registry's conventions: one partition, 0, whatever the data topic has
    assert sorted(n for n in os.listdir(logdir) if n.startswith("_schemas")) == ["_schemas-0"]
    got = decoded_rows({"path": logdir, "subscribe": "orders", "valueFormat": "avro"})
    assert sorted(row["valueDecoded"]["id"] for row in got) == [7, 7, 8, 8]


def test_evolution_compatible_then_refused(tmp_path):
    logdir = str(tmp_path)
    v1 = pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string())])
    write_log(logdir, orders([{"id": 1, "name": "a"}], v1), topic="orders",
              num_partitions=1, options={"valueFormat": "avro"})
    # A field added with a default: BACKWARD compatible, version 2, id 2
    v2_schema = json.loads(V1)
    v2_schema["fields"].append({"name": "note", "type": ["null", "string"], "default": None})
    v2 = pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string()),
                    pa.field("note", pa.string())])
    write_log(logdir, orders([{"id": 2, "name": "b", "note": "n"}], v2), topic="orders",
              options={"valueFormat": "avro", "valueAvroSchema": json.dumps(v2_schema)})
    # A field added without a default (spark-avro derives none): refused
    with pytest.raises(SchemaRegistrationError, match=r"subject 'orders-value' version 2 .*"
                       r"BACKWARD \(it would have been version 3\).* note2: a field the "
                       r"reader has and the writer lacks, without a default"):
        write_log(logdir, orders([{"id": 3, "name": "c", "note": None, "note2": "x"}],
                                 pa.struct([*v2, pa.field("note2", pa.string())])),
                  topic="orders", options={"valueFormat": "avro"})
    before = state(logdir)
    # A field's type changed: refused, nothing published, no schema registered
    v3 = pa.struct([pa.field("id", pa.string(), False), pa.field("name", pa.string()),
                    pa.field("note", pa.string())])
    with pytest.raises(SchemaRegistrationError, match=r"subject 'orders-value' version 2 .*"
                       r"id: the reader's string cannot read the writer's long"):
        write_log(logdir, orders([{"id": "3", "name": "c", "note": None}], v3),
                  topic="orders", options={"valueFormat": "avro"})
    assert state(logdir) == before
    ids = [json.loads(v)["id"] for _, v in schema_records(logdir)]
    assert ids == [1, 2]
    got = decoded_rows({"path": logdir, "subscribe": "orders", "valueFormat": "avro"})
    assert [row["valueDecoded"] for row in got] == [
        {"id": 1, "name": "a", "note": None}, {"id": 2, "name": "b", "note": "n"}]
    # NONE at the subject's level (a CONFIG record) lets it through
    write_log(logdir, pa.table({"key": [records.encode_key(records.subject_key(
        records.CONFIG, "orders-value"))], "value": [b'{"compatibilityLevel":"NONE"}']}),
        topic="_schemas")
    write_log(logdir, orders([{"id": "3", "name": "c", "note": None}], v3), topic="orders",
              options={"valueFormat": "avro"})
    assert [json.loads(v).get("version") for _, v in schema_records(logdir)] == [1, 2, None, 3]


def test_a_row_that_does_not_fit_the_given_schema(tmp_path):
    logdir = str(tmp_path)
    table = orders([{"id": 1, "name": None}, {"id": 2, "name": 5}],
                   pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.int64())]))
    with pytest.raises(InvalidInputError, match=r"task 0, row 1: column 'value' does not fit "
                       r"the Avro schema of subject 'orders-value' \(id 1\): .*name"):
        write_log(logdir, table, topic="orders", num_partitions=1,
                  options={"valueFormat": "avro", "valueAvroSchema": V1})
    assert not os.path.exists(logdir) or os.listdir(logdir) == []


def test_the_schemas_lock_and_a_registry_changed_meanwhile(tmp_path):
    logdir = str(tmp_path)
    v1 = pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string())])
    acquire_lock(logdir, "_schemas", "another-write", "append")
    with pytest.raises(ConcurrentWriteError, match="topic '_schemas'"):
        write_log(logdir, orders([{"id": 1, "name": "a"}], v1), topic="orders",
                  num_partitions=1, options={"valueFormat": "avro"})
    release_lock(logdir, "_schemas", "another-write")
    # Framed with id 1 at planning; another write registers id 1 before the commit
    writer = SegmentLogWriter(logdir, "orders", num_partitions=1,
                              options={"valueFormat": "avro"})
    writer.write_table(orders([{"id": 1, "name": "a"}], v1))
    write_log(logdir, orders([{"other": 1}], pa.struct([pa.field("other", pa.int64())])),
              topic="others", num_partitions=1, options={"valueFormat": "avro"})
    with pytest.raises(ConcurrentWriteError, match=r"subject 'orders-value' was framed with "
                       r"id 1 and now gets id 2; nothing was written"):
        writer.commit()
    assert "orders-0" not in os.listdir(logdir)
    assert [json.loads(v)["subject"] for _, v in schema_records(logdir)] == ["others-value"]


def test_option_errors(tmp_path):
    table = orders([{"id": 1, "name": "a"}],
                   pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string())]))
    with pytest.raises(InvalidOptionError, match="option 'valueFormat'.*'xml'.*raw \\(default\\), "
                       "avro, json or protobuf"):
        write_log(str(tmp_path), table, topic="t", num_partitions=1,
                  options={"valueFormat": "xml"})
    with pytest.raises(InvalidOptionError, match="option 'valueJsonSchema' gives a json schema, "
                       "and option 'valueFormat' is avro.*'valueAvroSchema' instead"):
        write_log(str(tmp_path), table, topic="t", num_partitions=1,
                  options={"valueFormat": "avro", "valueJsonSchema": '{"type":"object"}'})
    with pytest.raises(InvalidOptionError, match="'valueRecordName' and 'valueAvroSchema' are "
                       "both given"):
        write_log(str(tmp_path), table, topic="t", num_partitions=1,
                  options={"valueFormat": "avro", "valueAvroSchema": V1,
                           "valueRecordName": "a.B"})
    with pytest.raises(InvalidOptionError, match="subjectNameStrategy"):
        write_log(str(tmp_path), table, topic="t", num_partitions=1,
                  options={"valueFormat": "avro", "subjectNameStrategy": "Bogus"})
    with pytest.raises(InvalidInputError, match="column 'value' has type .*struct"):
        write_log(str(tmp_path), pa.table({"value": [b"x"]}), topic="t", num_partitions=1,
                  options={"valueFormat": "avro"})
    with pytest.raises(InvalidInputError, match="'value' has field\\(s\\) 'extra' that option "
                       "'valueAvroSchema' lacks"):
        write_log(str(tmp_path), orders([{"id": 1, "name": "a", "extra": 1}], pa.struct(
            [*table.schema.field("value").type, pa.field("extra", pa.int64())])),
            topic="t", num_partitions=1, options={"valueFormat": "avro", "valueAvroSchema": V1})
    assert os.listdir(str(tmp_path)) == []


def test_the_streaming_sink_registers_once_with_the_batch_that_publishes(tmp_path):
    from segmentlog_datasource.writer.input import InputLayout
    from segmentlog_datasource.writer.options import WriteOptions
    from segmentlog_datasource.writer.stream import StreamSink

    logdir = str(tmp_path)
    v1 = pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string())])
    options = WriteOptions.from_mapping({"valueFormat": "avro", "numPartitions": 1})
    layout = InputLayout.from_schema(orders([], v1).schema, "orders", ("value",))
    for batch in range(2):  # a sink per micro-batch, as Spark plans them
        sink = StreamSink(logdir, "0f6b1c1e-0000-4000-8000-000000000000", topic="orders",
                          options=options, layout=layout)
        staged = sink.stage(batch, [orders([{"id": batch, "name": "s"}], v1)])
        sink.commit(batch, [staged])
    assert [json.loads(v)["id"] for _, v in schema_records(logdir)] == [1]
    got = decoded_rows({"path": logdir, "subscribe": "orders", "valueFormat": "avro"})
    assert [row["valueDecoded"] for row in got] == [{"id": 0, "name": "s"},
                                                    {"id": 1, "name": "s"}]


def test_a_struct_key_too(tmp_path):
    logdir = str(tmp_path)
    key_type = pa.struct([pa.field("k", pa.string())])
    value_type = pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string())])
    table = pa.table({"key": pa.array([{"k": "a"}, None], key_type),
                      "value": pa.array([{"id": 1, "name": "x"}, {"id": 2, "name": None}],
                                        value_type)})
    write_log(logdir, table, topic="orders", num_partitions=1,
              options={"keyFormat": "avro", "valueFormat": "avro",
                       "keyRecordName": "com.acme.OrderKey"})
    registered = [json.loads(v) for _, v in schema_records(logdir)]
    assert [(r["subject"], r["id"]) for r in registered] == [("orders-key", 1),
                                                           ("orders-value", 2)]
    assert registered[0]["schema"] == ('{"type":"record","name":"OrderKey","namespace":'
                                       '"com.acme","fields":[{"name":"k","type":'
                                       '["string","null"]}]}')
    got = decoded_rows({"path": logdir, "subscribe": "orders", "valueFormat": "avro",
                        "keyFormat": "avro"})
    assert [(r["keyDecoded"], r["valueDecoded"]) for r in got] == \
        list(zip(table.column("key").to_pylist(), table.column("value").to_pylist()))


@pytest.mark.parametrize("strategy, subject", [
    ("RecordNameStrategy", "com.acme.Order"),
    ("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", "orders-com.acme.Order"),
])
def test_record_name_strategies_name_the_subject_after_the_record(tmp_path, strategy, subject):
    logdir = str(tmp_path)
    value_type = pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string())])
    rows = [{"id": 1, "name": "x"}]
    write_log(logdir, orders(rows, value_type), topic="orders", num_partitions=1,
              options={"valueFormat": "avro", "valueRecordName": "com.acme.Order",
                       "subjectNameStrategy": strategy})
    assert [json.loads(v)["subject"] for _, v in schema_records(logdir)] == [subject]
    got = decoded_rows({"path": logdir, "subscribe": "orders", "valueFormat": "avro",
                        "subjectNameStrategy": strategy, "valueRecordName": "com.acme.Order"})
    assert [row["valueDecoded"] for row in got] == rows
