"""Damaged records of Kafka's internal topics refused, or read, as Kafka's own decoders
refuse or read them (issue #46; docs/metadata.md, "Kafka's internal topics as tables").

The yardstick is an independent reader (support/kafka_reader.py) of Kafka's message
definitions as support/kafka_messages.py writes them out from Kafka's JSON, doing what
Kafka 4.2's generated readers, serdes and loaders do. It is checked first: against the
manifests' records (Kafka's own decoding of the fixtures) and, for its strings, against
the JDK's UTF-8 decoding (fixtures/java-utf8). Then segmentlog's message tables are
checked against Kafka's definitions, seeded damage of every record type of the fixtures
is decoded by both and compared (support/internal_damage.py; a longer sweep is
tests/fuzz_internal_records.py), and the rules the fuzz rests on are shown one by one
with bytes written here.
"""
import base64
import collections
import json
import os
import shutil
import struct

import pytest

from segmentlog_datasource.errors import RecordDecodeError
from segmentlog_datasource.format.crc import crc32c
from segmentlog_datasource.format.internal import (
    group_records, metadata_records, remote_log_metadata, share_records, transaction_records)
from segmentlog_datasource.format.internal.group_records import CONSUMER_OFFSETS
from segmentlog_datasource.format.internal.messages import Array, Struct, java_utf8
from segmentlog_datasource.format.internal.metadata_records import decode_metadata_record
from segmentlog_datasource.format.internal.transaction_records import TRANSACTION_STATE
from segmentlog_datasource.format.layout import V2_CRC, V2_CRC_START
from support import internal_damage, kafka_messages, kafka_reader
from support.fixtures import FIXTURES_DIR, internal_topics_root
from support.kafka_json import as_kafka_json
from support.reading import decoded_rows

# ------------------------------------------------------------------ the yardstick


def _java_decodings():
    with open(os.path.join(FIXTURES_DIR, "java-utf8", "decodings.txt")) as handle:
        for line in handle:
            text, _, units = line.strip().partition(" ")
            raw = b"".join(bytes.fromhex(unit) for unit in units.split(",") if unit)
            yield bytes.fromhex(text), raw.decode("utf-16-be", "surrogatepass")


def test_strings_decode_as_the_jdk_decodes_them():
    cases = list(_java_decodings())
    assert len(cases) == 640
    assert any("\ufffd" in text for _, text in cases)
    for data, text in cases:
        assert kafka_reader.java_string(data) == text, data.hex()
        assert java_utf8(data) == text, data.hex()
    # an encoded surrogate is one malformed sequence to Java, three bytes to Python
    assert java_utf8(b"\xed\xa0\x80") == "\ufffd"
    assert b"\xed\xa0\x80".decode("utf-8", "replace") == "\ufffd" * 3


@pytest.fixture(scope="module")
def seeds():
    return internal_damage.load_seeds()


def test_the_yardstick_reads_every_fixture_record_as_kafka_decoded_it():
    read = 0
    for _, root in internal_damage.SETS:
        root = root()
        for name in sorted(os.listdir(root)):
            if not name.endswith(".manifest.json"):
                continue
            topic = name[:-len(".manifest.json")].rsplit("-", 1)[0]
            with open(os.path.join(root, name)) as handle:
                manifest = json.load(handle)
            records = manifest["records"] + [
                record for snapshot in manifest.get("snapshots", ())
                for record in snapshot["records"]]
            for record in records:
                where = f"{name} offset {record['offset']}"
                key = None if record["key_b64"] is None else base64.b64decode(record["key_b64"])
                outcome = kafka_reader.read_record(topic, key,
                                                   base64.b64decode(record["value_b64"])
                                                   if record["value_b64"] else None)
                assert outcome.kind == ("tombstone" if record["tombstone"] else "record"), where
                assert outcome.record_type == record.get("record_type_name", "TransactionLog")
                if record.get("key") is not None:
                    assert as_kafka_json(outcome.key) == record["key"], where
                if record["value"] is not None:
                    assert outcome.value_version == record["value_version"], where
                    # Kafka's JSON leaves out a tagged field at its default
                    value = as_kafka_json(outcome.value)
                    assert {name: value[name] for name in record["value"]} == \
                        record["value"], where
                read += 1
    assert read > 2500


# ------------------------------------------------------------------ segmentlog's tables


def _lower_first(name):
    return name[0].lower() + name[1:]


def _compare_fields(where, kafka_fields, fields, common):
    assert [_lower_first(item["name"]) for item in kafka_fields] == \
        [item.name for item in fields], where
    for theirs, ours in zip(kafka_fields, fields):
        here = f"{where}.{ours.name}"
        assert kafka_reader._Versions.parse(theirs["versions"]).__dict__ == \
            kafka_reader._Versions.parse(ours.versions).__dict__, here
        assert kafka_reader._Versions.parse(theirs["nullable"]).__dict__ == \
            kafka_reader._Versions.parse(ours.nullable).__dict__, here + " nullable versions"
        assert theirs["tag"] == ours.tag, here
        assert kafka_reader._Versions.parse(theirs["tagged"]).__dict__ == \
            kafka_reader._Versions.parse(ours.tagged_versions).__dict__, here
        kind = theirs["type"]
        array = kind.startswith("[]")
        assert array == isinstance(ours.type, Array), here
        element = kind[2:] if array else kind
        our_element = ours.type.element if array else ours.type
        if element in kafka_reader._PRIMITIVES or element in kafka_reader._VARIABLE:
            assert our_element == element, here
        else:
            assert isinstance(our_element, Struct), here
            inner = common[element]["fields"] if element in common else theirs["fields"]
            _compare_fields(here, inner, our_element.fields, common)


def _compare_message(name, message, topic):
    spec = kafka_messages.TOPICS[topic][name]
    assert (spec["valid"], spec["flexible"]) == \
        (message.valid_versions, message.flexible_versions), name
    _compare_fields(name, spec["fields"], message.fields, spec["common"])
    return spec["apiKey"]


def test_every_table_is_kafkas_definition_nullable_versions_included():
    compared = collections.Counter()
    for topic, table in (("__consumer_offsets", group_records.RECORD_TYPES),
                         ("__share_group_state", share_records.RECORD_TYPES),
                         ("__transaction_state", {0: ("TransactionLog",
                                                      transaction_records.TRANSACTION_LOG_KEY,
                                                      transaction_records.TRANSACTION_LOG_VALUE)})):
        for record_type, (_, key, value) in table.items():
            assert _compare_message(key.name, key, topic) == record_type
            assert _compare_message(value.name, value, topic) == record_type
            compared[topic] += 2
        # and every record type Kafka 4.2 defines there
        assert {spec["apiKey"] for spec in kafka_messages.TOPICS[topic].values()} == set(table)
    for topic, table in (("__cluster_metadata", metadata_records.RECORD_TYPES),
                         ("__remote_log_metadata", remote_log_metadata.RECORD_TYPES)):
        for api_key, (_, message) in table.items():
            name = "ZkMigrationRecord" if message.name == "ZkMigrationStateRecord" \
                and "ZkMigrationRecord" in kafka_messages.TOPICS[topic] else message.name
            assert _compare_message(name, message, topic) == api_key
            compared[topic] += 1
        assert len(table) == len(kafka_messages.TOPICS[topic])
    assert compared == {"__consumer_offsets": 44, "__share_group_state": 4,
                        "__transaction_state": 2, "__cluster_metadata": 26,
                        "__remote_log_metadata": 4}


# ------------------------------------------------------------------ the fuzz


def test_damaged_records_of_every_type_decode_as_kafka_decodes_them(seeds):
    results = internal_damage.run_cases(46, 600, seeds)
    verdicts = collections.Counter(verdict for verdict, *_ in results)
    failed = [(verdict, case, kafka.reason, ours.reason or ours.value)
              for verdict, case, kafka, ours in results if verdict not in internal_damage.AGREED]
    assert not failed, failed[:5]
    # every record type of the fixtures was damaged, and damage was both read and refused
    assert {case["label"] for _, case, _, _ in results} == set(internal_damage.strata(seeds))
    assert verdicts["both refuse"] > 200 and verdicts["both read alike"] > 100, verdicts
    assert verdicts["both skip"] > 0
    topics = {case["label"].split()[0] for _, case, _, _ in results}
    assert topics == set(kafka_messages.TOPICS)


def test_the_fuzz_would_see_a_reader_that_ignores_nullability(seeds, monkeypatch):
    """The comparison is not blind: the reader's null check taken away (what the issue
    found), damage is read where Kafka refuses it."""
    from segmentlog_datasource.format.internal import messages

    original = messages._field_plan

    def everything_nullable(*args, **kwargs):
        plan = original(*args, **kwargs)
        plan.nullable = True
        return plan

    def forget_plans():  # each message keeps the plans it made per version
        for table in (group_records.RECORD_TYPES, share_records.RECORD_TYPES):
            for _, key, value in table.values():
                key._plans.clear()
                value._plans.clear()

    forget_plans()
    monkeypatch.setattr(messages, "_field_plan", everything_nullable)
    try:
        verdicts = collections.Counter(
            verdict for verdict, *_ in internal_damage.run_cases(46, 600, seeds))
    finally:
        monkeypatch.undo()
        forget_plans()
    assert verdicts["segmentlog reads what Kafka refuses"] > 0, verdicts


# ------------------------------------------------------------------ the rules, one by one

OFFSET_KEY = struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + \
    struct.pack(">i", 0)


def _offset_value_v3(metadata_length, metadata=b""):
    # version 3: offset, leaderEpoch, metadata (int16 length), commitTimestamp
    return struct.pack(">hqih", 3, 42, 7, metadata_length) + metadata + struct.pack(">q", 9)


def test_a_null_in_a_non_nullable_field_is_refused_naming_the_record_type_and_field():
    good = CONSUMER_OFFSETS.decode(OFFSET_KEY, _offset_value_v3(1, b"m"))
    assert good.value == {"offset": 42, "leaderEpoch": 7, "metadata": "m",
                          "commitTimestamp": 9}
    damaged = _offset_value_v3(-1)
    assert kafka_reader.read_record("__consumer_offsets", OFFSET_KEY, damaged).reason == \
        "non-nullable field metadata was serialized as null"
    with pytest.raises(RecordDecodeError) as failure:
        CONSUMER_OFFSETS.decode(OFFSET_KEY, damaged)
    assert str(failure.value) == ("OffsetCommitValue version 3: field "
                                  "metadata: not nullable, but serialized as null (length -1)")
    # a key's strings are not nullable either
    with pytest.raises(RecordDecodeError, match="OffsetCommitKey version 0: field group: "
                                                "not nullable"):
        CONSUMER_OFFSETS.decode(struct.pack(">hh", 1, -1) + OFFSET_KEY[5:],
                                _offset_value_v3(0))


def test_a_null_where_kafka_allows_one_is_read_as_null():
    # GroupMetadataValue version 0: protocolType, generation, protocol (nullable),
    # leader (nullable), members
    value = struct.pack(">hh", 0, 8) + b"consumer" + struct.pack(">ihhi", 3, -1, -1, 0)
    key = struct.pack(">hh", 2, 1) + b"g"
    decoded = CONSUMER_OFFSETS.decode(key, value)
    assert decoded.value == {"protocolType": "consumer", "generation": 3, "protocol": None,
                             "leader": None, "members": []}
    # but not an array element, nor a member's id
    member = struct.pack(">h", -1)
    with pytest.raises(RecordDecodeError, match=r"field members\[0\]\.memberId: not "
                                                r"nullable"):
        CONSUMER_OFFSETS.decode(key, value[:-4] + struct.pack(">i", 1) + member + b"\x00" * 30)


def test_bytes_after_a_coordinator_record_are_not_looked_at_as_kafka_does_not():
    decoded = CONSUMER_OFFSETS.decode(OFFSET_KEY + b"\x01\x02", _offset_value_v3(0) + b"\xff")
    assert (decoded.key, decoded.value["commitTimestamp"]) == \
        ({"group": "g", "topic": "t", "partition": 0}, 9)
    assert kafka_reader.read_record("__consumer_offsets", OFFSET_KEY + b"\x01\x02",
                                    _offset_value_v3(0) + b"\xff").kind == "record"


def test_bytes_after_a_metadata_record_are_refused():
    topic = b"\x01\x02\x00" + b"\x02t" + bytes(16) + b"\x00"  # TopicRecord v0, no tags
    assert decode_metadata_record(topic).value == {"name": "t",
                                                   "topicId": "AAAAAAAAAAAAAAAAAAAAAA"}
    with pytest.raises(RecordDecodeError, match="TopicRecord version 0 ends at byte 22, but 1 "
                                                "more bytes follow"):
        decode_metadata_record(topic + b"\x00")


def test_a_metadata_record_of_a_version_past_kafkas_reads_as_kafkas_reader_reads_it():
    """MetadataRecordSerde does not check a record's version: TopicRecord version 7 reads
    as version 0 (its fields are of versions 0+); a RegisterBrokerRecord past version 3
    fails only where its class for an endpoint refuses the version."""
    topic = b"\x01\x02\x07" + b"\x02t" + bytes(16) + b"\x00"
    decoded = decode_metadata_record(topic)
    assert (decoded.value_version, decoded.value["name"]) == (7, "t")
    broker = metadata_records.encode_metadata_record("REGISTER_BROKER_RECORD", 3, {
        "brokerId": 1, "incarnationId": "AAAAAAAAAAAAAAAAAAAAAA", "brokerEpoch": 2,
        "endPoints": [], "features": [], "rack": None})
    assert decode_metadata_record(broker[:2] + b"\x04" + broker[3:]).value["brokerId"] == 1
    with_endpoint = metadata_records.encode_metadata_record("REGISTER_BROKER_RECORD", 3, {
        "brokerId": 1, "incarnationId": "AAAAAAAAAAAAAAAAAAAAAA", "brokerEpoch": 2,
        "endPoints": [{"name": "P", "host": "h", "port": 9, "securityProtocol": 0}],
        "features": [], "rack": None})
    too_new = with_endpoint[:2] + b"\x04" + with_endpoint[3:]
    assert kafka_reader.read_record("__cluster_metadata", None, too_new).reason == \
        "Can't read version 4"
    with pytest.raises(RecordDecodeError, match=r"RegisterBrokerRecord version 4 is unknown "
                                                r"\(versions 0 to 3 are defined\): Kafka's "
                                                r"reader cannot read its field endPoints\[0\]"):
        decode_metadata_record(too_new)


def test_a_tag_kafka_declares_for_other_versions_is_refused_an_unknown_one_skipped():
    # PartitionChangeRecord version 1: tag 6 is EligibleLeaderReplicas, of versions 2+
    head = b"\x01\x05\x01" + struct.pack(">i", 7) + bytes(16)
    with pytest.raises(RecordDecodeError, match="field eligibleLeaderReplicas: is tag 6, "
                                                "which is not valid for version 1"):
        decode_metadata_record(head + b"\x01\x06\x01\x01")
    assert kafka_reader.read_record("__cluster_metadata", None, head + b"\x01\x06\x01\x01") \
        .reason == "Tag 6 is not valid for version 1"
    # tag 40 is none of the record's: skipped by its size
    assert decode_metadata_record(head + b"\x01\x28\x02\xab\xcd").value == \
        {"partitionId": 7, "topicId": "AAAAAAAAAAAAAAAAAAAAAA"}
    with pytest.raises(RecordDecodeError, match="ends early, in the message's tagged fields"):
        decode_metadata_record(head + b"\x01\x28\x05\xab")


def test_a_known_tags_size_is_not_checked_as_kafkas_reader_does_not_check_it():
    # ConsumerGroupMetadataValue: epoch, then tag 0 MetadataHash (int64) said to take 9
    # bytes; Kafka reads the 8 of the int64 and, the value's end not being checked, the
    # byte left over is not looked at
    key = struct.pack(">hh", 3, 1) + b"g"
    value = struct.pack(">hi", 0, 5) + b"\x01\x00\x09" + struct.pack(">q", 77) + b"\x00"
    assert CONSUMER_OFFSETS.decode(key, value).value == {"epoch": 5, "metadataHash": 77}
    assert kafka_reader.read_record("__consumer_offsets", key, value).value == \
        {"epoch": 5, "metadataHash": 77}


def test_lengths_and_varints_as_java_ints():
    key = struct.pack(">hh", 3, 1) + b"g"
    # a tagged-field count whose varint is a negative Java int: Kafka's loop reads none
    negative = struct.pack(">hi", 0, 5) + b"\xff\xff\xff\xff\x0f"
    assert CONSUMER_OFFSETS.decode(key, negative).value == {"epoch": 5}
    # a varint whose 5th byte has its high bit set is refused
    with pytest.raises(RecordDecodeError, match="a varint longer than 5 bytes"):
        CONSUMER_OFFSETS.decode(key, struct.pack(">hi", 0, 5) + b"\xff\xff\xff\xff\xff\x01")
    # a compact string longer than 32767 bytes is refused though the bytes are there
    long_name = b"\x01\x02\x00" + b"\x81\x80\x02" + b"x" * 32768 + bytes(16) + b"\x00"
    assert kafka_reader.read_record("__cluster_metadata", None, long_name).reason == \
        "string field name had invalid length 32768"
    with pytest.raises(RecordDecodeError, match="field name: a string of 32768 bytes"):
        decode_metadata_record(long_name)
    # an array count larger than the bytes left
    with pytest.raises(RecordDecodeError, match=r"field subscribedTopicNames: a count of 100 "
                                                r"elements runs past the end \(only 0 bytes "
                                                r"left\)"):
        CONSUMER_OFFSETS.decode(struct.pack(">hh", 10, 1) + b"g" + struct.pack(">h", 1) + b"m",
                                struct.pack(">h", 0) + b"\x00\x02c\x02h\x65")


def test_text_that_is_not_utf8_is_read_as_java_reads_it():
    value = _offset_value_v3(3, b"\xed\xa0\x80")
    assert CONSUMER_OFFSETS.decode(OFFSET_KEY, value).value["metadata"] == "\ufffd"


def test_a_transaction_kafka_cannot_load_is_refused():
    key = struct.pack(">hh", 0, 1) + b"t"
    ongoing_without_partitions = struct.pack(">hqhibi", 0, 5, 1, 100, 1, -1) + \
        struct.pack(">qq", 3, 2)
    assert kafka_reader.read_record("__transaction_state", key,
                                    ongoing_without_partitions).kind == "refused"
    with pytest.raises(RecordDecodeError, match="null transactionPartitions in state Ongoing"):
        TRANSACTION_STATE.decode(key, ongoing_without_partitions)
    empty = struct.pack(">hqhibi", 0, 5, 1, 100, 0, -1) + struct.pack(">qq", 3, 2)
    assert TRANSACTION_STATE.decode(key, empty).value["state"] == "Empty"


# ------------------------------------------------------------------ through a read


def _uncompressed_offset_commit(manifest):
    for record in manifest["records"]:
        if record.get("record_type_name") == "OffsetCommit" and \
                record["compression"] == "none" and record["value_version"] == 3 and \
                record["value"]["metadata"] == "":
            return record
    raise AssertionError("no uncompressed OffsetCommit version 3 with empty metadata")


def test_a_damaged_record_in_a_log_fails_a_read_or_is_null_with_its_reason(tmp_path):
    """A copy of a partition with one OffsetCommit's metadata length written as -1 and its
    batch's checksum computed again, so that the damage reaches the decoder."""
    name = "__consumer_offsets-0"
    directory = tmp_path / name
    shutil.copytree(os.path.join(internal_topics_root(), name), directory)
    with open(os.path.join(internal_topics_root(), name + ".manifest.json")) as handle:
        manifest = json.load(handle)
    record = _uncompressed_offset_commit(manifest)
    value = base64.b64decode(record["value_b64"])
    segment = directory / record["segment"]
    data = bytearray(segment.read_bytes())
    start = record["position"]
    end = start + 12 + struct.unpack_from(">i", data, start + 8)[0]
    at = data.index(value, start, end)
    assert data[at + 14:at + 16] == b"\x00\x00"  # version, offset, leader epoch: metadata
    data[at + 14:at + 16] = b"\xff\xff"
    data[start + V2_CRC:start + V2_CRC + 4] = \
        crc32c(bytes(data[start + V2_CRC_START:end])).to_bytes(4, "big")
    segment.write_bytes(bytes(data))

    options = {"path": str(tmp_path), "decode": "consumerOffsets"}
    with pytest.raises(RecordDecodeError) as failure:
        decoded_rows(options)
    assert str(failure.value) == (
        f"{name} offset {record['offset']}: OffsetCommitValue version "
        f"3: field metadata: not nullable, but serialized as null (length -1)")
    rows = decoded_rows(dict(options, mode="PERMISSIVE"))
    by_offset = {row["offset"]: row for row in rows}
    damaged = by_offset[record["offset"]]
    assert damaged["valueDecoded"] is None and damaged["recordType"] is None
    assert damaged["decodeError"] == str(failure.value)
    assert [row["offset"] for row in rows if row["decodeError"]] == [record["offset"]]
    for other in manifest["records"]:
        if other["offset"] != record["offset"]:
            assert by_offset[other["offset"]]["recordType"] == other["record_type_name"]
