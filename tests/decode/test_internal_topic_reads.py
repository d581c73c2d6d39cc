"""decode=consumerOffsets | transactionState | clusterMetadata: reads of Kafka's internal
topics with typed columns, through the read path Spark's reader takes (plan, scan,
decode), equal to Kafka's own decoding in the internal-topics manifests."""
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
from segmentlog_datasource.format.internal.messages import AS_TEXT
from segmentlog_datasource.format.internal.topics import internal_topics
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.writer import write_log
from support.reading import decoded_rows
from support.fixtures import internal_topics_root

DECODED = {"__consumer_offsets": "consumerOffsets", "__transaction_state": "transactionState",
           "__cluster_metadata": "clusterMetadata"}
PARTITIONS = ["__consumer_offsets-0", "__consumer_offsets-1", "__transaction_state-0",
              "__cluster_metadata-0"]


def manifest(name):
    with open(os.path.join(internal_topics_root(), name + ".manifest.json")) as handle:
        return json.load(handle)


def kafka_json(value, shape):
    """A decoded column value in Kafka's JSON form: bytes as base64, absent fields (null
    in the struct) left out, fields held as text parsed back."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(shape, pa.StructType):
        out = {}
        for field in shape:
            if value.get(field.name) is not None:
                out[field.name] = kafka_json(value[field.name], field.type)
        return out
    if isinstance(shape, pa.ListType):
        return [kafka_json(v, shape.value_type) for v in value]
    return value


def without_nulls(value):
    """Kafka's JSON with its null fields left out (a struct column holds null for them)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


@pytest.mark.parametrize("name", PARTITIONS)
def test_every_record_reads_as_kafka_decoded_it(name):
    expected = manifest(name)
    topic = name.rsplit("-", 1)[0]
    path = os.path.join(internal_topics_root(), name)
    options = {"path": path, "decode": DECODED[topic]}
    rows = decoded_rows(options)
    schema = read_schema(options)
    key_type = schema.field("keyDecoded").type
    value_type = schema.field("valueDecoded").type
    assert [r["offset"] for r in rows] == [r["offset"] for r in expected["records"]]
    for row, record in zip(rows, expected["records"]):
        where = f"{name} offset {record['offset']}"
        assert row["topic"] == topic and row["deleted"] == record["tombstone"], where
        assert row["recordType"] == (record.get("record_type_name") or "TransactionLog"), where
        assert row["keyVersion"] == record.get("key_version"), where
        assert row["valueVersion"] == record["value_version"], where
        key, value = kafka_json(row["keyDecoded"], key_type), \
            kafka_json(row["valueDecoded"], value_type)
        assert key == without_nulls(record.get("key")), where
        if record["value"] is None:
            assert value is None, where
            continue
        wanted = without_nulls(record["value"])
        if "state" in record:  # the transaction's state, by name
            wanted["state"] = record["state"]
        members = record.get("members_decoded")
        for member, decoded in zip(wanted.get("members", []), members or []):
            member["subscriptionDecoded"] = without_nulls(
                dict(decoded["subscription"], version=decoded["subscription_version"]))
            member["assignmentDecoded"] = without_nulls(
                dict(decoded["assignment"], version=decoded["assignment_version"]))
        shape = ("struct", dict(internal_topics()[DECODED[topic]].value_fields()))
        assert value == without_nulls(as_columns_hold(wanted, shape)), where


def as_columns_hold(value, shape):
    """Kafka's JSON of a value with its fields that clash between record types (shape
    AS_TEXT) as text, as the README says: a string as it is, anything else as JSON."""
    if value is None:
        return None
    if shape == AS_TEXT:
        return value if isinstance(value, str) else json.dumps(value)
    if isinstance(shape, tuple) and shape[0] == "struct":
        return {k: as_columns_hold(v, shape[1].get(k)) for k, v in value.items()}
    if isinstance(shape, tuple) and shape[0] == "array":
        return [as_columns_hold(v, shape[1]) for v in value]
    return value


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
    assert rows[0]["valueDecoded"]["offset"] == good["value"]["offset"]


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
    assert [(r["recordType"], r["valueDecoded"]["name"]) for r in from_snapshot] == \
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
