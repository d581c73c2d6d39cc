"""`segmentlog dump --remote-log-metadata-decoder` (kafka-dump-log's flag, or `--decoder
remoteLogMetadata`): the records of `__remote_log_metadata` decoded (docs/cli.md,
"Internal topics").

The ground truth is the tiered-cluster set's manifest, which holds every record as Kafka
decoded it; a record that does not decode is written here by hand.
"""
import json
import os

import pyarrow as pa
from click.testing import CliRunner

from segmentlog_datasource.cli.main import main
from segmentlog_datasource.writer import write_log
from support.fixtures import tiered_cluster_root
from support.kafka_json import assert_same
from support.reading import read_values

TOPIC = "__remote_log_metadata"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def records(result):
    return [item for item in map(json.loads, result.stdout.splitlines())
            if item["kind"] == "record"]


def manifest_records(partition):
    with open(os.path.join(tiered_cluster_root(), "manifest.json")) as handle:
        return json.load(handle)["partitions"][f"{TOPIC}-{partition}"]["decoded_records"]


def test_every_record_is_dumped_as_kafka_decoded_it():
    path = os.path.join(tiered_cluster_root(), "broker-2", f"{TOPIC}-2")
    result = run("dump", path, "--remote-log-metadata-decoder", "--json")
    assert result.exit_code == 0, result.output
    expected = manifest_records(2)
    items = records(result)
    assert [i["offset"] for i in items] == [r["offset"] for r in expected]
    for item, record in zip(items, expected):
        where = f"offset {record['offset']}"
        assert (item["decoder"], item["recordType"], item["keyVersion"], item["valueVersion"],
                item["key"], item["deleted"], item["known"], item["decodeError"]) == \
            ("remoteLogMetadata", record["type"], None, 0, None, False, True, None), where
        assert_same(item["value"], record["record"], where)
    assert run("dump", path, "--decoder", "remoteLogMetadata", "--json").stdout == result.stdout
    # kafka-dump-log's line: the payload after the record's metadata
    lines = [line for line in run("dump", path, "--remote-log-metadata-decoder").stdout
             .splitlines() if line.startswith("| offset:")]
    assert len(lines) == len(expected)
    for line, record in zip(lines, expected):
        payload = {"type": record["type"], "version": 0, "data": record["record"]}
        assert "keySize: -1 " in line, line
        assert line.endswith(" headerKeys: [] payload: "
                             + json.dumps(payload, separators=(",", ":"))), line


def test_a_log_dir_dumps_the_metadata_partitions_alone():
    broker = os.path.join(tiered_cluster_root(), "broker-1")
    items = records(run("dump", broker, "--remote-log-metadata-decoder", "--json"))
    files = {os.path.basename(os.path.dirname(i["file"])) for i in
             map(json.loads, run("dump", broker, "--remote-log-metadata-decoder", "--json")
                 .stdout.splitlines()) if "file" in i}
    assert files == {f"{TOPIC}-{p}" for p in range(5)}
    assert len(items) == sum(len(manifest_records(p)) for p in range(5))
    assert "--remote-log-metadata-decoder" in run("dump", "--help").output
    clicks = os.path.join(broker, "clicks-0")
    result = run("dump", clicks, "--remote-log-metadata-decoder")
    assert result.exit_code == 2 and "--remote-log-metadata-decoder decodes the records of " \
        f"{TOPIC}" in " ".join(result.output.split())


def test_a_record_that_does_not_decode_is_shown_and_the_dump_goes_on(tmp_path):
    values = read_values(os.path.join(tiered_cluster_root(), "broker-0"),
                         assign=json.dumps({TOPIC: [0]}))[(TOPIC, 0)][:2]
    future = b"\x01\x01\x05" + values[1][3:]  # an update record in version 5
    unknown = b"\x01\x09\x00" + values[1][3:]  # api key 9
    write_log(str(tmp_path), pa.table({"key": pa.array([None] * 4, pa.binary()),
                                       "value": [values[0], future, unknown, values[1]]}),
              topic=TOPIC, num_partitions=1)
    partition = os.path.join(str(tmp_path), f"{TOPIC}-0")
    result = run("dump", partition, "--remote-log-metadata-decoder")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith("| offset:")]
    segment = os.path.join(partition, "00000000000000000000.log")
    assert '"type":"REMOTE_LOG_SEGMENT_METADATA_RECORD"' in lines[0]
    assert f"undecodable: {segment} batch at byte " in lines[1]
    assert ", offset 1 (record type REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD (api key 1), " \
           "value version 5): remote log metadata record " \
           "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD (api key 1) version 5: " \
           "RemoteLogSegmentMetadataUpdateRecord version 5 is unknown" in lines[1]
    assert "offset 2 (record type UNKNOWN_9 (api key 9), value version 0): remote log " \
           "metadata record has api key 9, which is no record type of " \
           f"{TOPIC}" in lines[2]
    assert '"type":"REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD"' in lines[3]
    assert "2 records could not be decoded with --remote-log-metadata-decoder" in result.stderr
