"""`segmentlog dump` with the internal topics' decoders (kafka-dump-log's --offsets-decoder,
--transaction-log-decoder, --cluster-metadata-decoder, --share-group-state-decoder).

The ground truth is the internal-topics fixtures (Kafka 3.9) and internal-topics-kafka4
(Kafka 4.2): partitions Kafka's own serializers wrote, with manifests holding every record
as Kafka's generated JSON converters decoded it. Every record's decoded key and value must
equal Kafka's JSON, JSON types included (support.kafka_json.assert_same).
"""
import base64
import json
import os
import shutil
import struct

import pyarrow as pa
import pytest
from click.testing import CliRunner

from segmentlog_datasource.cli.main import main
from segmentlog_datasource.format.internal.registry import internal_topics
from support.fixtures import internal_topics_kafka4_root, internal_topics_root
from support.kafka_json import assert_same

FLAGS = {"consumerOffsets": "--offsets-decoder",
         "transactionState": "--transaction-log-decoder",
         "clusterMetadata": "--cluster-metadata-decoder",
         "shareGroupState": "--share-group-state-decoder"}
PARTITIONS = [  # (fixture set, partition, decoder)
    ("3.9", "__consumer_offsets-0", "consumerOffsets"),
    ("3.9", "__consumer_offsets-1", "consumerOffsets"),
    ("3.9", "__transaction_state-0", "transactionState"),
    ("3.9", "__cluster_metadata-0", "clusterMetadata"),
    ("4.2", "__consumer_offsets-0", "consumerOffsets"),
    ("4.2", "__consumer_offsets-1", "consumerOffsets"),
    ("4.2", "__transaction_state-0", "transactionState"),
    ("4.2", "__cluster_metadata-0", "clusterMetadata"),
    ("4.2", "__share_group_state-0", "shareGroupState"),
]
ROOTS = {"3.9": internal_topics_root, "4.2": internal_topics_kafka4_root}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def json_items(result):
    return [json.loads(line) for line in result.stdout.splitlines()]


def load_manifest(root, name):
    with open(os.path.join(root, name + ".manifest.json")) as handle:
        return json.load(handle)


def kafka_dump_value(expected):
    """The value as kafka-dump-log prints it: a classic group's consumer-protocol
    subscription and assignment decoded in place (the manifest keeps Kafka's decoding of
    them in members_decoded)."""
    value = expected["value"]
    decoded = expected.get("members_decoded")
    if value is None or not decoded:
        return value
    by_member = {member["member_id"]: member for member in decoded}
    members = []
    for member in value["members"]:
        member = dict(member)
        found = by_member.get(member["memberId"])
        for field in ("subscription", "assignment"):
            if found is not None and found[field] is not None:
                member[field] = found[field]
        members.append(member)
    return dict(value, members=members)


def compare_records(got, expected, where, failures):
    """Each dumped data record against the manifest's records (Kafka's decoding)."""
    assert [r["offset"] for r in got] == [r["offset"] for r in expected], where
    for item, record in zip(got, expected):
        at = f"{where} offset {record['offset']}"
        try:
            assert item["decodeError"] is None, f"{at}: {item['decodeError']}"
            assert item["known"], f"{at}: record type {item['recordType']} is not known"
            assert item["recordType"] == record.get("record_type_name", "TransactionLog"), at
            assert item["keyVersion"] == record.get("key_version"), at
            assert item["valueVersion"] == record["value_version"], at
            assert item["deleted"] is record["tombstone"], at
            assert_same(item["key"], record.get("key"), f"{at} key")
            assert_same(item["value"], kafka_dump_value(record), f"{at} value")
            if "state" in record and not record["tombstone"]:
                assert item["state"] == record["state"], at
        except AssertionError as failure:
            failures.append(f"{record.get('record_type_name', '?')}: {failure}")


def compare_control_records(got, expected, where, failures):
    assert [r["offset"] for r in got] == [r["offset"] for r in expected], where
    for item, record in zip(got, expected):
        at = f"{where} control record at offset {record['offset']}"
        try:
            assert item["decodeError"] is None, f"{at}: {item['decodeError']}"
            assert item["recordType"] == record["control_type"], at
            assert item["control"]["type"] == record["control_type"], at
            if "value" in record:
                assert item["valueVersion"] == record["value_version"], at
                assert_same(item["value"], record["value"], f"{at} value")
            if "coordinator_epoch" in record:
                assert item["value"]["coordinatorEpoch"] == record["coordinator_epoch"], at
        except AssertionError as failure:
            failures.append(f"{record['control_type']}: {failure}")


@pytest.mark.parametrize("kafka, partition, decoder", PARTITIONS,
                         ids=[f"{k}-{p}" for k, p, _ in PARTITIONS])
def test_dump_json_decodes_every_record_as_kafka_does(kafka, partition, decoder):
    root = ROOTS[kafka]()
    manifest = load_manifest(root, partition)
    result = run("dump", os.path.join(root, partition), FLAGS[decoder], "--json")
    assert result.exit_code == 0, result.output
    records = [i for i in json_items(result) if i["kind"] == "record"]
    assert all(i["decoder"] == decoder for i in records)
    in_log = [i for i in records if i["segment"].endswith(".log")]
    failures = []
    compare_records([i for i in in_log if "control" not in i], manifest["records"],
                    f"{kafka} {partition}", failures)
    compare_control_records([i for i in in_log if "control" in i],
                            manifest["control_records"], f"{kafka} {partition}", failures)
    snapshots = manifest.get("snapshots", [])
    assert sorted({i["segment"] for i in records if not i["segment"].endswith(".log")}) == \
        sorted(s["file"] for s in snapshots)
    for snapshot in snapshots:
        taken = [i for i in records if i["segment"] == snapshot["file"]]
        where = f"{kafka} {partition} snapshot {snapshot['file']}"
        compare_records([i for i in taken if "control" not in i], snapshot["records"],
                        where, failures)
        compare_control_records([i for i in taken if "control" in i],
                                snapshot["control_records"], where, failures)
    by_type = {}
    for failure in failures:
        name = failure.split(":", 1)[0]
        by_type[name] = by_type.get(name, 0) + 1
    assert not failures, \
        f"{len(failures)} records differ from Kafka's decoding (" + \
        ", ".join(f"{name} {count}" for name, count in sorted(by_type.items())) + "):\n" + \
        "\n".join(failures[:40])


def test_dump_text_is_kafka_dump_logs():
    root = internal_topics_root()
    manifest = load_manifest(root, "__transaction_state-0")
    result = run("dump", os.path.join(root, "__transaction_state-0"),
                 "--transaction-log-decoder")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    first = manifest["records"][0]
    value = json.dumps({"version": "0", "data": first["value"]}, separators=(",", ":"))
    assert f"| offset: 0 CreateTime: {first['timestamp']} keySize: 18 valueSize: 37 " \
           f"sequence: -1 headerKeys: [] key: " \
           f'{{"type":"0","data":{{"transactionalId":"txn-producer-1"}}}} ' \
           f"payload: {value}" in lines
    assert "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 " in lines[2]
    tombstone = next(r for r in manifest["records"] if r["tombstone"])
    line = next(l for l in lines if l.startswith(f"| offset: {tombstone['offset']} "))
    assert line.endswith(f'key: {{"type":"0","data":{{"transactionalId":'
                         f'"{tombstone["key"]["transactionalId"]}"}}}} payload: <DELETE>')
    # Metadata records: no key, the type by name, the version a number; KRaft's control
    # records by kafka-dump-log's names.
    output = run("dump", os.path.join(root, "__cluster_metadata-0"),
                 "--cluster-metadata-decoder").output
    assert 'payload: {"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":' \
           '"metadata.version","featureLevel":21}}' in output
    assert 'LeaderChange: {"version":0,"leaderId":3000,"voters":' in output
    # A classic group's consumer-protocol bytes decoded in place.
    output = run("dump", os.path.join(root, "__consumer_offsets-0"),
                 "--offsets-decoder").output
    assert '"subscription":{"topics":["orders","payments"],"userData":null,' in output
    # A KRaft snapshot: its end offset and epoch, then its records.
    kraft4 = os.path.join(internal_topics_kafka4_root(), "__cluster_metadata-0")
    output = run("dump", os.path.join(kraft4, "00000000000000000174-0000000003.checkpoint"),
                 "--cluster-metadata-decoder").output
    lines = output.splitlines()
    assert lines[1] == "Snapshot end offset: 174, epoch: 3"
    assert lines[3].endswith('SnapshotHeader {"version":0,"lastContainedLogTimestamp":'
                             '1759913855848}')
    assert lines[-1].endswith('SnapshotFooter {"version":0}')
    assert 'payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":' in output


def test_decoder_flags_are_the_decode_values():
    root = internal_topics_root()
    path = os.path.join(root, "__transaction_state-0")
    flag = run("dump", path, "--transaction-log-decoder")
    assert flag.exit_code == 0
    for args in (["--decoder", "transactionState"],
                 ["--decoder", "transactionState", "--print-data", "--records"],
                 ["--transaction-log-decoder", "--decoder", "transactionState"]):
        assert run("dump", path, *args).output == flag.output, args
    # A log dir: the decoder's topic's partitions only.
    items = json_items(run("dump", root, "--decoder", "transactionState", "--json"))
    assert {os.path.basename(os.path.dirname(i["file"])) for i in items if "file" in i} == \
        {"__transaction_state-0"}
    # --help lists every decoder the registry has.
    shown = run("dump", "--help").output
    assert all(name in shown for name in internal_topics())


def test_nonsense_combinations_are_refused(kafka_logdir, tmp_path):
    root = internal_topics_root()
    offsets = os.path.join(root, "__consumer_offsets-0")
    cases = [
        (["--offsets-decoder", "--transaction-log-decoder"],
         "give one decoder, not --offsets-decoder and --transaction-log-decoder"),
        (["--offsets-decoder", "--decoder", "hex"],
         "--offsets-decoder is --decoder consumerOffsets: give one decoder"),
        (["--offsets-decoder", "--schemas", tmp_path / "registry.json"],
         "--schemas is for the decoders of framed values"),
        (["--decoder", "clusterMetadata"],
         "is a partition of __consumer_offsets, and --decoder clusterMetadata decodes the "
         "records of __cluster_metadata"),
    ]
    for args, message in cases:
        result = run("dump", offsets, *args)
        assert result.exit_code == 2 and message in " ".join(result.output.split()), \
            (args, result.output)
    result = run("dump", kafka_logdir, "--offsets-decoder")
    assert result.exit_code == 2 and "no __consumer_offsets partition under" in result.output
    snapshot = os.path.join(internal_topics_kafka4_root(), "__cluster_metadata-0",
                            "00000000000000000000-0000000000.checkpoint")
    result = run("dump", snapshot, "--cluster-metadata-decoder", "--offset", 3)
    assert result.exit_code == 2 and "is a metadata snapshot" in result.output
    if "shareGroupState" not in internal_topics():
        result = run("dump", offsets, "--share-group-state-decoder")
        assert result.exit_code == 2 and "no shareGroupState decoder" in result.output


def _string(text):
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_a_record_that_does_not_decode_is_shown_and_the_dump_goes_on(tmp_path):
    from segmentlog_datasource.writer import write_log

    logdir = str(tmp_path / "logs")
    key = struct.pack(">h", 1) + _string("billing") + _string("orders") + struct.pack(">i", 0)
    good = struct.pack(">hq", 1, 42) + _string("") + struct.pack(">qq", 1700000000000, -1)
    keys = [key, key, struct.pack(">h", 32767) + b"\x00", key]
    values = [good, struct.pack(">h", 99) + b"\x00\x01", b"\x00\x00", None]
    write_log(logdir, pa.table({"key": pa.array(keys, pa.binary()),
                                "value": pa.array(values, pa.binary())}),
              topic="__consumer_offsets", num_partitions=1)
    path = os.path.join(logdir, "__consumer_offsets-0")
    result = run("dump", path, "--offsets-decoder")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[3].endswith('payload: {"version":"1","data":{"offset":42,"metadata":"",'
                             '"commitTimestamp":1700000000000,"expireTimestamp":-1}}')
    segment = os.path.join(path, "00000000000000000000.log")
    assert f"undecodable: {segment} batch at byte 0, offset 1 (record type 1, value " \
           f"version 99): OffsetCommitValue version 99 is unknown" in lines[4]
    assert lines[5].endswith("key: Unknown record type 32767 at offset 2, skipping.")
    assert lines[6].endswith("payload: <DELETE>")
    assert "note: 1 record could not be decoded with --offsets-decoder" in result.stderr
    items = [i for i in json_items(run("dump", path, "--offsets-decoder", "--json"))
             if i["kind"] == "record"]
    assert [(i["recordType"], i["known"], i["deleted"]) for i in items] == [
        ("OffsetCommit", True, False), (None, True, False), ("UNKNOWN_32767", False, False),
        ("OffsetCommit", True, True)]
    assert items[1]["valueVersion"] == 99 and "version 99 is unknown" in items[1]["decodeError"]
    assert items[0]["key"] == {"group": "billing", "topic": "orders", "partition": 0}


def test_snapshots_follow_a_whole_metadata_partition_only():
    kraft = os.path.join(internal_topics_kafka4_root(), "__cluster_metadata-0")
    kinds = [i["kind"] for i in json_items(run("dump", kraft, "--cluster-metadata-decoder",
                                                "--json", "--offset", 170))]
    assert "record" in kinds and "metadata_snapshot" not in kinds
    kinds = [i["kind"] for i in json_items(run("dump", kraft, "--json"))]
    assert "batch" in kinds and "metadata_snapshot" not in kinds  # no decoder: the log


def test_a_snapshot_copied_out_of_its_partition_dumps_alone(tmp_path):
    source = os.path.join(internal_topics_kafka4_root(), "__cluster_metadata-0",
                          "00000000000000000000-0000000000.checkpoint")
    copy = tmp_path / os.path.basename(source)
    shutil.copyfile(source, copy)
    items = json_items(run("dump", copy, "--cluster-metadata-decoder", "--json"))
    assert items[0] == {"kind": "metadata_snapshot", "file": str(copy),
                        "size": os.path.getsize(source), "bootstrap": False,
                        "end_offset": 0, "epoch": 0}
    assert [i["recordType"] for i in items if i["kind"] == "record"] == \
        ["SNAPSHOT_HEADER", "KRAFT_VERSION", "KRAFT_VOTERS", "SNAPSHOT_FOOTER"]
