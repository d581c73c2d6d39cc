"""The schema registry read offline: Schema Registry's `_schemas` records (their JSON as
the registry writes it), replayed as the registry replays them, from a log written with
the project's writer or from a JSON export; the `schemas` option; subject naming.

Expected results are written by hand from Schema Registry's behaviour
(confluentinc/schema-registry: KafkaStoreReaderThread, KafkaStoreMessageHandler,
InMemoryCache, IncrementalIdGenerator), not computed by the code under test."""
import json
import os
import pickle
import shutil
import struct

import pyarrow as pa
import pytest

from segmentlog_datasource.decode.registry import (
    RegisteredSchema, SchemaReference, UnreadableSchemasRecordWarning, load_registry,
    parse_subject_strategy, registry_from_export, registry_from_log, registry_from_records,
    subject_for)
from segmentlog_datasource.errors import (InvalidOptionError, RecordDecodeError,
                                          SchemaNotFoundError, SegmentLogError)
from segmentlog_datasource.schemas import registry_records as records
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.writer import write_log
from support.reading import decoded_rows

ADDRESS = json.dumps({"type": "record", "name": "Address", "namespace": "com.acme",
                      "fields": [{"name": "city", "type": "string"}]})
CUSTOMER = json.dumps({"type": "record", "name": "Customer", "namespace": "com.acme",
                       "fields": [{"name": "name", "type": "string"},
                                  {"name": "address", "type": "com.acme.Address"}]})
ORDER_V1 = '{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}'
ORDER_V2 = ('{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},'
            '{"name":"amount","type":"double","default":0}]}')
ORDER_V3 = ('{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},'
            '{"name":"amount","type":"double","default":0},'
            '{"name":"customer","type":["null","com.acme.Customer"],"default":null}]}')
ORDER_V4 = '{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}'
PAYMENT = [json.dumps({"type": "object", "properties": {f"f{n}": {"type": "string"}
                                                         for n in range(v)}})
           for v in range(1, 5)]
EVENT = [f'syntax = "proto3";\nmessage Event {{\n  int64 id = 1;\n  string v{v} = 2;\n}}\n'
         for v in range(1, 5)]


def schema(subject, version, schema_id, text, schema_type="AVRO", references=(),
           deleted=False):
    return records.SchemaValue(subject, version, schema_id, text, schema_type,
                               tuple(references), deleted)


def key(text):
    return text.encode()


# The `_schemas` topic as a registry that lived through these operations writes it.
# Raw JSON where the form matters: a legacy global CONFIG key with "subject":null (before
# 2021) and one without subject (since), a value with an explicit "schemaType":"AVRO".
SCHEMAS_LOG = [
    (key('{"keytype":"NOOP","magic":0}'), None),                                     # 0
    (key('{"keytype":"CONFIG","subject":null,"magic":0}'),
     key('{"compatibilityLevel":"FULL"}')),                                           # 1
    records.ModeValue(None, "READWRITE"),                                             # 2
    schema("Address", 1, 1, ADDRESS),                                                 # 3
    schema("com.acme.Customer", 1, 2, CUSTOMER,
           references=[SchemaReference("com.acme.Address", "Address", 1)]),           # 4
    schema("orders-value", 1, 3, ORDER_V1),                                           # 5
    records.ConfigValue("orders-value", "FULL_TRANSITIVE"),                           # 6
    schema("orders-value", 2, 4, ORDER_V2),                                           # 7
    schema("orders-value", 3, 5, ORDER_V3, references=[
        SchemaReference("com.acme.Customer", "com.acme.Customer", 1)]),               # 8
    schema("orders-value", 4, 6, ORDER_V4),                                           # 9
    schema("orders-value", 4, 6, ORDER_V4, deleted=True),                  # 10 soft delete
    schema("payments-value", 1, 7, PAYMENT[0], "JSON"),                               # 11
    schema("payments-value", 2, 8, PAYMENT[1], "JSON"),                               # 12
    schema("payments-value", 3, 9, PAYMENT[2], "JSON"),                               # 13
    records.ConfigValue("payments-value", "NONE"),                                    # 14
    records.DeleteSubjectValue("payments-value", 3),                                  # 15
    schema("payments-value", 4, 10, PAYMENT[3], "JSON"),                              # 16
    records.subject_key(records.CONFIG, "payments-value"),         # 17 config tombstone
    schema("events-value", 1, 11, EVENT[0], "PROTOBUF"),                              # 18
    schema("events-value", 2, 12, EVENT[1], "PROTOBUF"),                              # 19
    schema("events-value", 3, 13, EVENT[2], "PROTOBUF"),                              # 20
    records.DeleteSubjectValue("events-value", 3),                                    # 21
    schema("events-value", 4, 14, EVENT[3], "PROTOBUF"),                              # 22
    records.ClearSubjectValue("events-value"),                                        # 23
    records.ModeValue("events-value", "READONLY"),                                    # 24
    schema("orders-value", 2, 4, ORDER_V2, deleted=True),                             # 25
    records.schema_key("orders-value", 2),                          # 26 hard delete
    schema("dup-value", 1, 3, '"string"'),                  # 27 id 3 taken: ignored
    schema("orders-copy-value", 1, 3, ORDER_V1),            # 28 same schema, same id
    (key('{"keytype":"SCHEMA","subject":"legacy-value","version":1,"magic":1}'),
     key('{"subject":"legacy-value","version":1,"id":15,"schemaType":"AVRO",'
         '"schema":"\\"bytes\\"","deleted":false}')),                               # 29
    records.DeleteSubjectValue("legacy-value", 1),                                    # 30
    (key('{"keytype":"CONFIG","magic":0}'), key('{"compatibilityLevel":"FORWARD"}')),  # 31
    records.NOOP_KEY,                                                                 # 32
]


def encoded(items):
    return [item if isinstance(item, tuple) else records.encode_record(item)
            for item in items]


def numbered(items):
    """(offset, key bytes, value bytes) of each item, from offset 0."""
    return [(offset, k, v) for offset, (k, v) in enumerate(encoded(items))]


def write_schemas(logdir, items, topic="_schemas", num_partitions=1):
    pairs = encoded(items)
    write_log(str(logdir), pa.table({"key": pa.array([k for k, _ in pairs], pa.binary()),
                                     "value": pa.array([v for _, v in pairs], pa.binary())}),
              topic=topic, num_partitions=num_partitions)
    return str(logdir)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("registry") / "logdir"
    write_schemas(root, SCHEMAS_LOG)
    write_log(str(root), pa.table({"key": [b"k"], "value": [b"\x00\x00\x00\x00\x05"]}),
              topic="orders", num_partitions=1)
    return str(root)


@pytest.fixture(scope="module")
def registry(logdir):
    return load_registry(None, [logdir], parse_read_options({"path": logdir}))


def test_replay_registers_versions_and_soft_deletes(registry):
    orders = registry.latest("orders-value")
    assert orders == RegisteredSchema(5, "orders-value", 3, "AVRO", ORDER_V3, (
        SchemaReference("com.acme.Customer", "com.acme.Customer", 1),))
    assert [s.version for s in registry.versions("orders-value")] == [1, 3]
    assert [(s.version, s.deleted) for s in registry.versions(
        "orders-value", include_deleted=True)] == [(1, False), (3, False), (4, True)]
    # A soft-deleted schema still resolves by id, as the registry serves it.
    assert registry.by_id(6) == RegisteredSchema(6, "orders-value", 4, "AVRO", ORDER_V4,
                                                 deleted=True)
    assert registry.version("orders-value", 4).deleted
    assert registry.version("orders-value", -1).version == 3
    # Planned on the driver, used in the tasks.
    assert pickle.loads(pickle.dumps(registry)).by_id(6) == registry.by_id(6)


def test_hard_delete_and_duplicate_ids(registry):
    with pytest.raises(SchemaNotFoundError, match="schema id 4 is not in the _schemas topic"):
        registry.by_id(4)
    with pytest.raises(SchemaNotFoundError, match="has no version 2: its versions are 1, 3, 4"):
        registry.version("orders-value", 2)
    # Id 3 held by another schema text: Schema Registry logs and skips the record.
    assert "dup-value" not in registry.subjects(include_deleted=True)
    assert [offset for offset, _ in registry.ignored] == [27]
    # The same schema under a second subject keeps its id; by id: the first registered.
    assert registry.by_id(3) == RegisteredSchema(3, "orders-value", 1, "AVRO", ORDER_V1)
    assert registry.latest("orders-copy-value").id == 3


def test_delete_subject_and_clear_subject(registry):
    payments = registry.versions("payments-value", include_deleted=True)
    assert [(s.version, s.id, s.deleted, s.schema_type) for s in payments] == [
        (1, 7, True, "JSON"), (2, 8, True, "JSON"), (3, 9, True, "JSON"),
        (4, 10, False, "JSON")]
    assert registry.latest("payments-value").schema == PAYMENT[3]
    assert registry.by_id(8).deleted
    # CLEAR_SUBJECT drops the soft-deleted versions (1-3) and keeps version 4.
    events = registry.versions("events-value", include_deleted=True)
    assert [(s.version, s.id, s.schema_type, s.schema) for s in events] == [
        (4, 14, "PROTOBUF", EVENT[3])]
    for gone in (11, 12, 13):
        with pytest.raises(SchemaNotFoundError):
            registry.by_id(gone)
    # A subject deleted whole: listed only with deleted ones.
    assert registry.subjects() == ["Address", "com.acme.Customer", "events-value",
                                   "orders-copy-value", "orders-value", "payments-value"]
    assert registry.subjects(include_deleted=True) == [
        "Address", "com.acme.Customer", "events-value", "legacy-value",
        "orders-copy-value", "orders-value", "payments-value"]
    with pytest.raises(SchemaNotFoundError, match="'legacy-value' .* no version that is not "
                                                  r"deleted \(soft-deleted: versions 1\)"):
        registry.latest("legacy-value")
    assert registry.by_id(15) == RegisteredSchema(15, "legacy-value", 1, "AVRO", '"bytes"',
                                                  deleted=True)
    with pytest.raises(SchemaNotFoundError, match="no subject 'order-value' .*did you mean "
                                                  "'orders-value'"):
        registry.latest("order-value")


def test_references_dependencies_first(registry):
    address, customer = registry.latest("Address"), registry.latest("com.acme.Customer")
    order = registry.latest("orders-value")
    assert registry.references_of(order) == [address, customer]
    assert registry.named_references(order) == {"com.acme.Address": address,
                                                "com.acme.Customer": customer}
    assert registry.references_of(address) == []


def test_ids_versions_and_configs_for_the_writer(registry):
    assert registry.next_id() == 16  # the largest id any SCHEMA record held, plus one
    assert registry.next_version("orders-value") == 5  # soft-deleted 4 still counts
    assert registry.next_version("events-value") == 5
    assert registry.next_version("legacy-value") == 2
    assert registry.next_version("new-value") == 1
    assert registry.compatibility("orders-value") == "FULL_TRANSITIVE"
    assert registry.compatibility("payments-value") == "FORWARD"  # its own was removed
    assert registry.compatibility() == "FORWARD"
    assert registry.mode("events-value") == "READONLY"
    assert registry.mode("orders-value") == "READWRITE"


def test_missing_reference_is_named():
    registry = registry_from_records(numbered([
        schema("a-value", 1, 1, '"string"', references=[
            SchemaReference("com.acme.Gone", "gone", 2)])]))
    with pytest.raises(SchemaNotFoundError, match="references 'com.acme.Gone' as subject "
                                                  "'gone' version 2, which is missing"):
        registry.references_of(registry.latest("a-value"))


# The bytes Schema Registry writes (Jackson, field order of the key classes'
# @JsonPropertyOrder and SchemaValue's @JsonCreator), as `kafka-console-consumer
# --property print.key=true` dumps of `_schemas` show them.
CONFLUENT_RECORDS = [
    (b'{"keytype":"SCHEMA","subject":"Kafka-key","version":1,"magic":1}',
     b'{"subject":"Kafka-key","version":1,"id":1,"schema":"\\"string\\"","deleted":false}'),
    (b'{"keytype":"CONFIG","subject":"MySchema","magic":0}',
     b'{"subject":"MySchema","compatibilityLevel":"FULL"}'),
    (b'{"keytype":"DELETE_SUBJECT","subject":"subject_0","magic":0}',
     b'{"subject":"subject_0","version":2}'),
    (b'{"keytype":"CLEAR_SUBJECT","subject":"subject_0","magic":0}',
     b'{"subject":"subject_0"}'),
    (b'{"keytype":"MODE","subject":"subject_0","magic":0}',
     b'{"subject":"subject_0","mode":"READONLY"}'),
    (b'{"keytype":"NOOP","magic":0}', None),
    (b'{"keytype":"SCHEMA","subject":"p-value","version":2,"magic":1}',
     b'{"subject":"p-value","version":2,"id":7,"schemaType":"PROTOBUF","references":'
     b'[{"name":"other.proto","subject":"other","version":1}],"schema":"syntax = '
     b'\\"proto3\\";","deleted":true}'),
]


@pytest.mark.parametrize("key_bytes, value_bytes", CONFLUENT_RECORDS)
def test_records_encode_as_schema_registry_writes_them(key_bytes, value_bytes):
    record = records.decode_record(key_bytes, value_bytes)
    assert records.encode_record(record) == (key_bytes, value_bytes)


def test_record_fields_as_decoded():
    key_bytes, value_bytes = CONFLUENT_RECORDS[-1]
    assert records.decode_record(key_bytes, value_bytes) == records.RegistryRecord(
        records.RegistryKey("SCHEMA", "p-value", 2, 1),
        records.SchemaValue("p-value", 2, 7, 'syntax = "proto3";', "PROTOBUF",
                            (SchemaReference("other.proto", "other", 1),), True))
    # A legacy CONFIG value has no subject: the key's is taken, as the registry does.
    legacy = records.decode_record(b'{"keytype":"CONFIG","subject":"MySchema","magic":0}',
                                   b'{"compatibilityLevel":"FULL"}')
    assert legacy.value == records.ConfigValue("MySchema", "FULL")
    assert records.decode_key(b'{"keytype":"CONFIG","subject":null,"magic":0}') == \
        records.decode_key(b'{"keytype":"CONFIG","magic":0}') == \
        records.RegistryKey("CONFIG", None, None, 0)
    assert records.encode_key(records.subject_key("CONFIG", None)) == \
        b'{"keytype":"CONFIG","magic":0}'


# Records Schema Registry's serializer cannot deserialize: SchemaRegistrySerializer
# throws SerializationException (Jackson cannot read the key or the value, or a SCHEMA
# key's magic byte is not 0 or 1), and KafkaStoreReaderThread logs it and goes on.
UNREADABLE = [
    (b"not json", None, "the _schemas record's key is not JSON"),
    (b'["SCHEMA"]', None, "key is JSON but not an object"),
    (b'{"keytype":"SCHEMA","subject":"s","magic":1}', b"{}", "SCHEMA key has no 'version'"),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":2}', None, "magic 2"),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
     b'{"subject":"s","version":1,"schema":"\\"int\\""}',
     "value of SCHEMA 's' version 1 has no 'id'"),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
     b'{"id":1,"schema":{"type":"int"}}', "'schema' is {'type': 'int'}, not a string"),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
     b'{"id":1,"schema":"\\"int\\"","references":[{"name":"n","subject":"x"}]}',
     "reference 0 has no 'version'"),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"id":9,"sch',
     "value of SCHEMA 's' version 1 is not JSON"),
    (b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}', b'{"subject":"s"}',
     "has no 'version'"),
]


@pytest.mark.parametrize("key_bytes, value_bytes, reason", UNREADABLE)
def test_a_record_schema_registry_cannot_read_is_skipped_and_named(key_bytes, value_bytes,
                                                                   reason):
    rows = numbered([schema("a-value", 1, 1, '"int"')])
    rows.append((1, key_bytes, value_bytes))
    rows.append((2,) + records.encode_record(schema("b-value", 1, 2, '"long"')))
    with pytest.warns(UnreadableSchemasRecordWarning) as warned:
        registry = registry_from_records(rows)
    assert [(offset, reason in why) for offset, why in registry.skipped] == [(1, True)]
    (warning,) = warned
    message = str(warning.message)
    assert message.startswith("the _schemas topic: Schema Registry's reader cannot "
                              "deserialize the record at offset 1 of _schemas-0, and skips "
                              "it; so does this replay")
    assert reason in message
    # the replay went on past it
    assert (registry.by_id(1).subject, registry.by_id(2).subject) == ("a-value", "b-value")
    with pytest.raises(SchemaNotFoundError, match="schema id 9 is not in the _schemas topic: "
                                                  "it holds ids 1, 2; the record at offset 1 "
                                                  "that Schema Registry cannot read was "
                                                  "skipped, as it skips them"):
        registry.by_id(9)


@pytest.mark.parametrize("key_bytes, reason", [
    (b'{"keytype":"WAT","magic":0}', "keytype 'WAT'; Schema Registry knows"),
    (b'{"magic":0}', "keytype None"),
    (b'{"keytype":3,"magic":0}', "keytype 3"),
    (b"null", "key is JSON null"),
    (None, "has no key"),
])
def test_a_record_schema_registrys_reader_stops_on_is_an_error_at_its_offset(key_bytes,
                                                                           reason):
    """SchemaRegistryKeyType.forName throws IllegalArgumentException for a keytype it does
    not know (or none), a keytype that is no string fails its cast, a null key Jackson's
    readValue: none of them the SerializationException the reader skips on."""
    rows = numbered([schema("a-value", 1, 1, '"int"')]) + [(1, key_bytes, b"{}")]
    with pytest.raises(RecordDecodeError) as failure:
        registry_from_records(rows)
    assert str(failure.value).startswith("_schemas-0 offset 1: ")
    assert reason in str(failure.value)


def test_a_skipped_value_leaves_what_its_key_held():
    """The reader skips the record before its store is touched: the version an earlier
    record stored under the key stays, as it was."""
    rows = numbered([schema("s-value", 1, 1, '"int"'), schema("s-value", 2, 2, '"long"')])
    rows.append((2, records.encode_key(records.schema_key("s-value", 2)),
                 b'{"subject":"s-value","version":2,"id":2,"schema":"\\"long\\"","del'))
    with pytest.warns(UnreadableSchemasRecordWarning, match="offset 2: the value of SCHEMA "
                                                            "'s-value' version 2 is not JSON"):
        registry = registry_from_records(rows)
    assert (registry.latest("s-value").version, registry.latest("s-value").deleted) == \
        (2, False)


def test_read_from_the_log_stops_at_the_high_watermark(tmp_path):
    root = write_schemas(tmp_path / "logdir", [
        schema("s-value", 1, 1, '"int"'), schema("s-value", 2, 2, '"long"')])
    with open(os.path.join(root, "replication-offset-checkpoint"), "w") as handle:
        handle.write("0\n1\n_schemas 0 1\n")  # only offset 0 is committed
    assert registry_from_log([root]).latest("s-value").version == 1
    read = parse_read_options({"path": root, "readUpTo": "logEnd"})
    assert registry_from_log([root], read).latest("s-value").version == 2
    # A record the registry cannot read in the log is skipped, named at its offset.
    bad = write_schemas(tmp_path / "bad", [schema("s-value", 1, 1, '"int"'),
                                           (b'{"keytype":"SCHEMA"}', b"{}")])
    with pytest.warns(UnreadableSchemasRecordWarning,
                      match=r"the _schemas topic under .*bad: Schema Registry's reader cannot "
                            r"deserialize the record at offset 1 of _schemas-0.*offset 1: the "
                            r"SCHEMA key has no 'subject'"):
        assert registry_from_log([bad]).latest("s-value").version == 1
    # and one it stops on fails the load
    stops = write_schemas(tmp_path / "stops", [schema("s-value", 1, 1, '"int"'),
                                               (b'{"keytype":"WAT"}', b"{}")])
    with pytest.raises(RecordDecodeError, match=r"_schemas-0 offset 1: the _schemas record's "
                                                r"key has keytype 'WAT'"):
        registry_from_log([stops])


EXPORT = [
    {"subject": "Address", "version": 1, "id": 1, "schema": ADDRESS},
    {"subject": "orders-value", "version": 1, "id": 2, "schema": ORDER_V3, "references": [
        {"name": "com.acme.Address", "subject": "Address", "version": 1}]},
    {"subject": "orders-value", "version": 2, "id": 3, "schema": ORDER_V4, "deleted": True},
    {"subject": "payments-value", "version": 1, "id": 4, "schemaType": "JSON",
     "schema": PAYMENT[0]},
]


def test_export(tmp_path):
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(EXPORT))
    registry = registry_from_export(str(path))
    assert registry.latest("orders-value") == RegisteredSchema(
        2, "orders-value", 1, "AVRO", ORDER_V3,
        (SchemaReference("com.acme.Address", "Address", 1),))
    assert registry.by_id(3).deleted and registry.by_id(4).schema_type == "JSON"
    assert registry.references_of(registry.by_id(2)) == [registry.by_id(1)]
    assert registry.next_id() == 5 and registry.next_version("orders-value") == 3


@pytest.mark.parametrize("content, reason", [
    ("{}", "a JSON list of schemas, not a dict"),
    ("[1", "not a JSON export"),
    ('[{"subject": "a", "version": 1, "schema": "\\"int\\""}]', "entry 0: the entry has no 'id'"),
    ('[{"subject": "a", "version": 1, "id": 1, "schema": "\\"int\\""},'
     ' {"subject": "a", "version": 1, "id": 2, "schema": "\\"long\\""}]',
     "entry 1: subject 'a' version 1 is entry 0 too"),
    ('[{"subject": "a", "version": 1, "id": 1, "schema": "\\"int\\""},'
     ' {"subject": "b", "version": 1, "id": 1, "schema": "\\"long\\""}]',
     "entry 1: subject 'b' version 1 (id 1) has the id of subject 'a' version 1"),
])
def test_bad_exports(tmp_path, content, reason):
    path = tmp_path / "registry.json"
    path.write_text(content)
    with pytest.raises(SegmentLogError) as failure:
        registry_from_export(str(path))
    assert str(path) in str(failure.value) and reason in str(failure.value)


def test_schemas_option_forms(logdir, tmp_path):
    read = parse_read_options({"path": logdir})
    by_logdir = load_registry(logdir, ["/elsewhere"], read)
    by_partition = load_registry(os.path.join(logdir, "_schemas-0"), ["/elsewhere"], read)
    # A registry topic under another name, given as its own directory.
    renamed = tmp_path / "copy"
    shutil.copytree(os.path.join(logdir, "_schemas-0"), renamed / "registry-backup-0")
    by_copy = load_registry(str(renamed / "registry-backup-0"), [logdir], read)
    for registry in (by_logdir, by_partition, by_copy):
        assert registry.latest("orders-value").id == 5 and registry.next_id() == 16
    export = tmp_path / "export.JSON"
    export.write_text(json.dumps(EXPORT))
    assert load_registry(f" {export} ", [logdir], read).latest("payments-value").id == 4


def test_schemas_option_errors(logdir, tmp_path):
    other = tmp_path / "other"
    write_log(str(other), pa.table({"key": [b"k"], "value": [b"v"]}), topic="orders",
              num_partitions=1)
    write_log(str(other), pa.table({"key": [b"k"], "value": [b"v"]}), topic="users",
              num_partitions=1)
    with pytest.raises(SegmentLogError, match=f"no _schemas topic under {other} .*"
                                              "give option 'schemas'"):
        load_registry(None, [str(other)])
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    for value, reason in [(str(tmp_path / "missing"), "no such directory or file"),
                          (str(text), "a file that is not a .json export"),
                          (str(other), "no _schemas topic under"),
                          (42, "invalid value 42")]:
        with pytest.raises(InvalidOptionError, match=reason) as failure:
            load_registry(value, [logdir])
        assert failure.value.option == "schemas"
    with pytest.raises(InvalidOptionError, match="option 'schemas': no file"):
        load_registry(str(tmp_path / "missing.json"), [logdir])
    two = write_schemas(tmp_path / "two", [schema("a-value", 1, 1, '"int"')] * 2,
                        num_partitions=2)
    with pytest.raises(SegmentLogError, match="has partitions 0, 1; Schema Registry keeps"):
        load_registry(None, [two])


def test_subject_name_strategies():
    assert subject_for(None, "orders", False) == "orders-value"
    assert subject_for("TopicNameStrategy", "orders", True) == "orders-key"
    assert subject_for("io.confluent.kafka.serializers.subject.RecordNameStrategy",
                       "orders", False, "com.acme.Order") == "com.acme.Order"
    assert subject_for("topicrecordnamestrategy", "orders", True,
                       "com.acme.OrderKey") == "orders-com.acme.OrderKey"
    assert parse_subject_strategy(
        "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy") == \
        "TopicRecordNameStrategy"
    with pytest.raises(InvalidOptionError, match="option 'valueSubjectNameStrategy'.*"
                                                 "'TopicStrategy'; accepted: TopicName"):
        parse_subject_strategy("TopicStrategy", "valueSubjectNameStrategy")
    with pytest.raises(InvalidOptionError, match="RecordNameStrategy names the subject"):
        subject_for("RecordNameStrategy", "orders", False)


# ------------------------------------------------------------------ a damaged _schemas log

def _damage_copy(source, destination, needle, replacement):
    """A copy of the log dir `source` with the bytes `needle` of its `_schemas` segment
    written over (same length) and their batch's checksum computed again, so that the
    damage reaches the registry's reader as a broker would deliver it."""
    from segmentlog_datasource.format.crc import crc32c
    from segmentlog_datasource.format.layout import V2_CRC, V2_CRC_START

    shutil.copytree(source, destination)
    segment = os.path.join(destination, "_schemas-0", "00000000000000000000.log")
    with open(segment, "rb") as handle:
        data = bytearray(handle.read())
    at = data.index(needle)
    assert len(replacement) == len(needle) and data.count(needle) == 1
    data[at:at + len(needle)] = replacement
    start = 0
    while True:  # the batch holding the damage
        end = start + 12 + int.from_bytes(data[start + 8:start + 12], "big")
        if start <= at < end:
            break
        start = end
    data[start + V2_CRC:start + V2_CRC + 4] = \
        crc32c(bytes(data[start + V2_CRC_START:end])).to_bytes(4, "big")
    with open(segment, "wb") as handle:
        handle.write(bytes(data))
    return str(destination)


def _framed(schema_id, payload):
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


@pytest.fixture
def damaged_schemas(tmp_path):
    """orders-value versions 1 (id 1) and 2 (id 2) and an orders topic with a value of
    each; in the copy, version 1's SCHEMA value is no longer JSON."""
    good = str(tmp_path / "good")
    pairs = encoded([schema("orders-value", 1, 1, ORDER_V1),
                     schema("orders-value", 2, 2, ORDER_V2)])
    write_log(good, pa.table({"key": pa.array([k for k, _ in pairs], pa.binary()),
                              "value": pa.array([v for _, v in pairs], pa.binary())}),
              topic="_schemas", num_partitions=1, compression="none")
    # Avro by hand: id 7 as a zigzag long (14); id 8 (16) and amount 2.5 as a double
    write_log(good, pa.table({"value": [_framed(1, b"\x0e"),
                                        _framed(2, b"\x10" + struct.pack("<d", 2.5))]}),
              topic="orders", num_partitions=1)
    needle = b'{"subject":"orders-value","version":1,'
    assert pairs[0][1].startswith(needle)
    return good, _damage_copy(good, tmp_path / "damaged", needle, b"#" * len(needle))


def test_values_of_a_schema_only_an_unreadable_record_held_fail_as_unknown_ids(
        damaged_schemas):
    good, damaged = damaged_schemas
    options = {"path": good, "subscribe": "orders", "valueFormat": "avro"}
    assert [row["valueDecoded"] for row in decoded_rows(options)] == \
        [{"id": 7, "amount": 0.0}, {"id": 8, "amount": 2.5}]
    options["path"] = damaged
    with pytest.warns(UnreadableSchemasRecordWarning, match="offset 0: the value of SCHEMA "
                                                            "'orders-value' version 1 is not "
                                                            "JSON"):
        with pytest.raises(RecordDecodeError) as failure:
            decoded_rows(options)
    assert str(failure.value).startswith("orders-0 offset 0: value: unknown schema id: schema "
                                         "id 1 is not in the _schemas topic under ")
    assert str(failure.value).endswith("it holds ids 2; the record at offset 0 that Schema "
                                       "Registry cannot read was skipped, as it skips them")
    with pytest.warns(UnreadableSchemasRecordWarning):
        rows = decoded_rows(dict(options, mode="PERMISSIVE"))
    assert rows[0]["valueDecoded"] is None and rows[0]["valueError"] == str(failure.value)
    assert (rows[1]["valueDecoded"], rows[1]["valueError"]) == \
        ({"id": 8, "amount": 2.5}, None)


def test_the_command_line_warns_of_a_skipped_record_when_it_loads_the_registry(
        damaged_schemas):
    import subprocess
    import sys

    _, damaged = damaged_schemas
    result = subprocess.run(
        [sys.executable, "-m", "segmentlog_datasource", "dump",
         os.path.join(damaged, "orders-0"), "--print-data", "--decoder", "avro"],
        capture_output=True, text=True, timeout=300,  # Python's own warning filters
        env={name: value for name, value in os.environ.items() if name != "PYTHONWARNINGS"})
    assert result.returncode == 0, result.stderr
    assert "UnreadableSchemasRecordWarning: the _schemas topic under " in result.stderr
    assert "cannot deserialize the record at offset 0 of _schemas-0" in result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("| offset")]
    assert lines[0].endswith("payload: undecodable: schema id 1 is not in the _schemas topic "
                             f"under {damaged}: it holds ids 2; the record at offset 0 that "
                             "Schema Registry cannot read was skipped, as it skips them")
    assert lines[1].endswith('payload: {"id": 8, "amount": 2.5}')
