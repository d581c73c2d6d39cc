"""decode=consumerOffsets | shareGroupState | transactionState | clusterMetadata: reads of
Kafka's internal topics with typed columns, through the read path Spark's reader takes
(plan, scan, decode), equal to Kafka's own decoding in the manifests of the internal-topics
(Kafka 3.9) and internal-topics-kafka4 (Kafka 4.2) sets, every field at every depth, JSON
types included."""
import base64
import json
import os
import shutil

import pyarrow as pa
import pytest

from segmentlog_datasource.decode import DecodedRead
from segmentlog_datasource.decode.reads import read_schema
from segmentlog_datasource.errors import CorruptLogError, InvalidOptionError, RecordDecodeError
from segmentlog_datasource.format.internal.snapshots import write_snapshot
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.writer import write_log
from support.reading import decoded_rows
from support.fixtures import internal_topics_kafka4_root, internal_topics_root
from support.kafka_json import assert_column_holds

DECODED = {"__consumer_offsets": "consumerOffsets", "__transaction_state": "transactionState",
           "__cluster_metadata": "clusterMetadata", "__share_group_state": "shareGroupState"}
PARTITIONS = ["__consumer_offsets-0", "__consumer_offsets-1", "__transaction_state-0",
              "__cluster_metadata-0", "__share_group_state-0"]
SETS = {"kafka-3.9": internal_topics_root, "kafka-4.2": internal_topics_kafka4_root}
CASES = [(kafka, name) for kafka, root in SETS.items() for name in PARTITIONS
         if os.path.isfile(os.path.join(root(), name + ".manifest.json"))]


def manifest(name, kafka="kafka-3.9"):
    with open(os.path.join(SETS[kafka](), name + ".manifest.json")) as handle:
        return json.load(handle)


def expected_value(record):
    """Kafka's JSON of a record's value with the fields decode() adds: a transaction's
    state by name, a classic consumer group's members' protocol bytes decoded."""
    if record["value"] is None:
        return None
    wanted = dict(record["value"])
    if "state" in record:
        wanted["state"] = record["state"]
    members = record.get("members_decoded")
    if members is not None:
        wanted["members"] = [
            dict(member,
                 subscriptionDecoded=dict(decoded["subscription"],
                                          version=decoded["subscription_version"]),
                 assignmentDecoded=dict(decoded["assignment"],
                                        version=decoded["assignment_version"]))
            for member, decoded in zip(wanted["members"], members)]
    return wanted


@pytest.mark.parametrize("kafka,name", CASES)
def test_every_record_reads_as_kafka_decoded_it(kafka, name):
    expected = manifest(name, kafka)
    topic = name.rsplit("-", 1)[0]
    path = os.path.join(SETS[kafka](), name)
    options = {"path": path, "decode": DECODED[topic]}
    rows = decoded_rows(options)
    schema = read_schema(options)
    key_type = schema.field("keyDecoded").type
    value_type = schema.field("valueDecoded").type
    # the log's records, after those of its snapshot files (a whole read of the metadata)
    snapshots = {snapshot["file"]: snapshot["records"]
                 for snapshot in expected.get("snapshots", []) if snapshot["records"]}
    wanted = [(file, record) for file, records in snapshots.items() for record in records]
    wanted += [(None, record) for record in expected["records"]]
    if snapshots:
        assert {row["snapshot"] for row in rows} == {None, *snapshots}
    assert [(row.get("snapshot"), row["offset"]) for row in rows] == \
        [(file, record["offset"]) for file, record in wanted]
    members = {field.name for field in value_type}
    record_types = {r["record_type_name"] for _, r in wanted if r.get("record_type_name")}
    assert record_types <= members
    for row, (file, record) in zip(rows, wanted):
        where = f"{kafka} {file or name} offset {record['offset']}"
        record_type = record.get("record_type_name") or "TransactionLog"
        assert row["topic"] == topic and row["deleted"] is record["tombstone"], where
        assert row["recordType"] == record_type, where
        assert row["keyVersion"] == record.get("key_version"), where
        assert row["valueVersion"] == record["value_version"], where
        assert_column_holds(row["keyDecoded"], key_type,
                            None if "key" not in record else {record_type: record["key"]},
                            where + " keyDecoded")
        value = expected_value(record)
        assert_column_holds(row["valueDecoded"], value_type,
                            None if value is None else {record_type: value},
                            where + " valueDecoded")


def test_a_field_name_with_two_types_keeps_each_type():
    """`fenced` is a boolean in broker registrations and `topics` an array of structs in
    one record type and of strings in another: each record type's struct holds its own."""
    schema = read_schema({"path": internal_topics_kafka4_root(), "decode": "clusterMetadata"})
    value = schema.field("valueDecoded").type
    assert value.field("REGISTER_BROKER_RECORD").type.field("fenced").type == pa.bool_()
    assert value.field("BROKER_REGISTRATION_CHANGE_RECORD").type.field("fenced").type == \
        pa.int8()
    offsets = read_schema({"path": internal_topics_kafka4_root(),
                           "decode": "consumerOffsets"}).field("valueDecoded").type
    partition_metadata = offsets.field("ConsumerGroupPartitionMetadata").type
    assert pa.types.is_struct(partition_metadata.field("topics").type.value_type)
    assert offsets.field("ConsumerGroupRegularExpression").type.field("topics").type == \
        pa.list_(pa.field("element", pa.string()))
    rows = decoded_rows({"path": os.path.join(internal_topics_kafka4_root(),
                                              "__cluster_metadata-0"),
                         "decode": "clusterMetadata"})
    fenced = [row["valueDecoded"]["REGISTER_BROKER_RECORD"]["fenced"] for row in rows
              if row["recordType"] == "REGISTER_BROKER_RECORD"]
    assert fenced and all(isinstance(flag, bool) for flag in fenced)


def test_an_internal_topic_is_read_without_being_subscribed_and_others_are_refused(tmp_path):
    root = internal_topics_root()
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    for name in ("__consumer_offsets-0", "__transaction_state-0"):
        shutil.copytree(os.path.join(root, name), logdir / name)
    write_log(str(logdir), pa.table({"value": [b"x"]}), topic="orders", num_partitions=1)
    rows = decoded_rows({"path": str(logdir), "decode": "transactionState"})
    assert {r["topic"] for r in rows} == {"__transaction_state"} and len(rows) == 255
    for option, value in [("subscribe", "orders"), ("assign", '{"orders":[0]}'),
                          ("subscribePattern", "ord.*")]:
        with pytest.raises(InvalidOptionError, match=f"option '{option}' selects .*"
                                                     "decode=transactionState"):
            DecodedRead({"decode": "transactionState"}).read_options(parse_read_options(
                {"path": str(logdir), option: value}))
    with pytest.raises(InvalidOptionError, match="'decode'.*consumerOffsets"):
        DecodedRead({"decode": "offsets"})
    with pytest.raises(InvalidOptionError, match="'mode'.*PERMISSIVE"):
        DecodedRead({"decode": "consumerOffsets", "mode": "lenient"})
    with pytest.raises(InvalidOptionError, match="applies only with option 'decode'"):
        DecodedRead({"mode": "PERMISSIVE"})


def test_an_unknown_value_version_fails_naming_the_record_or_is_kept_when_permissive(tmp_path):
    logdir = str(tmp_path)
    good = manifest("__consumer_offsets-1")["records"][3]
    key = base64.b64decode(good["key_b64"])
    value = base64.b64decode(good["value_b64"])
    future = b"\x00\x63" + value[2:]  # value version 99
    write_log(logdir, pa.table({"key": [key, key, key], "value": [value, future, None]}),
              topic="__consumer_offsets", num_partitions=1)
    options = {"path": logdir, "decode": "consumerOffsets"}
    with pytest.raises(RecordDecodeError) as failure:
        decoded_rows(options)
    assert failure.value.offset == 1 and "__consumer_offsets-0 offset 1" in str(failure.value)
    assert "OffsetCommitValue version 99 is unknown" in str(failure.value)
    rows = decoded_rows(dict(options, mode="PERMISSIVE"))
    assert [r["recordType"] for r in rows] == ["OffsetCommit", None, "OffsetCommit"]
    assert rows[1]["valueDecoded"] is None and rows[1]["value"] == future
    assert "offset 1: OffsetCommitValue version 99" in rows[1]["decodeError"]
    assert rows[0]["decodeError"] is None and rows[2]["deleted"] is True
    assert rows[0]["valueDecoded"]["OffsetCommit"]["offset"] == good["value"]["offset"]


def test_a_whole_metadata_read_starts_with_the_snapshots(tmp_path):
    directory = tmp_path / "__cluster_metadata-0"
    shutil.copytree(os.path.join(internal_topics_root(), "__cluster_metadata-0"), directory)
    records = manifest("__cluster_metadata-0")["records"]
    covered = [(r["record_type_name"], r["value_version"], r["value"]) for r in records
               if r["record_type_name"] in ("TOPIC_RECORD", "FEATURE_LEVEL_RECORD")]
    write_snapshot(str(directory), 12, 1, covered)
    options = {"path": str(directory), "decode": "clusterMetadata"}
    rows = decoded_rows(options)
    name = "00000000000000000012-0000000001.checkpoint"
    from_snapshot = [r for r in rows if r["snapshot"] is not None]
    assert {r["snapshot"] for r in from_snapshot} == {name}
    assert rows[:len(covered)] == from_snapshot  # first, in their own offset order
    assert [(r["recordType"], r["valueDecoded"][r["recordType"]]["name"])
            for r in from_snapshot] == \
        [(record_type, value["name"]) for record_type, _, value in covered]
    assert [r["offset"] for r in rows[len(covered):]] == [r["offset"] for r in records]
    # A read of an offset range is the log's alone.
    ranged = decoded_rows(dict(options, startingOffsets='{"__cluster_metadata":{"0":5}}'))
    assert [r["offset"] for r in ranged] == [r["offset"] for r in records if r["offset"] >= 5]
    assert all(r["snapshot"] is None for r in ranged)
    # A snapshot that was never completed is refused, naming it.
    path = directory / name
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(CorruptLogError, match=name):
        decoded_rows(options)
