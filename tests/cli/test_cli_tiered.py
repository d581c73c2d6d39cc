"""The command line on a tiered-storage cluster (fixtures/tiered-cluster): describe, verify
and dump of the brokers' dirs with the remote store read it as a consumer of the cluster
does, and say which remote segments count and why the others do not. Expected values come
from the fixture's manifest. docs/cli.md, "Tiered storage"."""
import json

from click.testing import CliRunner

from segmentlog_datasource.cli import main
from support.tiered_cluster import BROKERS, MANIFEST, METADATA, STORE, TIERED_PARTITIONS

PATHS = BROKERS + [STORE]


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def by_name(partitions):
    return {f"{p['topic']}-{p['partition']}": p for p in partitions}


def test_describe_counts_what_a_consumer_reads_and_lists_the_remote_segments():
    result = run("describe", "--json", *PATHS)
    assert result.exit_code == 0, result.output
    described = by_name(json.loads(result.output)["partitions"])
    for name, partition in MANIFEST["partitions"].items():
        part = described[name]
        assert (part["log_start_offset"], part["high_watermark"], part["last_stable_offset"],
                part["records_visible_read_uncommitted"], part["records_visible_read_committed"]) \
            == (partition["log_start_offset"], partition["high_watermark"],
                partition["last_stable_offset"], partition["consumer_records_count"],
                partition["committed_records_count"]), name
    for name in TIERED_PARTITIONS:
        rows = {row["segment_id"]: row for row in described[name]["remote_segments"]}
        for segment in MANIFEST["partitions"][name]["remote_segments"]:
            row = rows[segment["remote_segment_id"]]
            assert (row["valid"], row["serves"], row["state"]) == \
                (segment["valid"], segment["serves"], segment["state"]), segment
        served = [s for s in described[name]["segments"] if "segment_id" in s]
        assert [s["serves"] for s in served] == [
            [r["fetch_offset"], nxt["fetch_offset"] - 1 if nxt else r["end_offset"]]
            for r, nxt in zip(MANIFEST["partitions"][name]["remote_reads"],
                              MANIFEST["partitions"][name]["remote_reads"][1:] + [None])]


def test_describe_of_the_store_and_the_metadata_alone():
    result = run("describe", "--json", *METADATA, STORE)
    assert result.exit_code == 0, result.output
    described = by_name(json.loads(result.output)["partitions"])
    for name in TIERED_PARTITIONS:
        partition = MANIFEST["partitions"][name]
        assert described[name]["log_start_offset"] == partition["log_start_offset"]
        assert described[name]["log_end_offset"] == \
            partition["highest_offset_in_remote_storage"] + 1


def test_verify_checks_every_remote_segment_and_says_which_count():
    result = run("verify", "--json", *PATHS)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["valid"]
    remote = {f"{p['topic']}-{p['partition']}": p for p in report["partitions"]
              if p.get("remote")}
    assert sorted(remote) == sorted(TIERED_PARTITIONS)
    for name in TIERED_PARTITIONS:
        rows = {row["segment_id"]: row for row in remote[name]["remote_segments"]}
        for segment in MANIFEST["partitions"][name]["remote_segments"]:
            assert rows[segment["remote_segment_id"]]["valid"] == segment["valid"]


def test_verify_of_the_store_alone_notes_what_the_layout_cannot_tell():
    result = run("verify", "--json", STORE)
    assert result.exit_code == 0, result.output
    notes = {f"{p['topic']}-{p['partition']}": [f["message"] for f in p["findings"]]
             for p in json.loads(result.output)["partitions"]}
    # ledger-0's store holds two uploads from offset 286 (a diverged leader's and the
    # new leader's): only the metadata can choose
    assert any("2 segments start at offset 286" in note and "__remote_log_metadata" in note
               for note in notes["ledger-0"])
    assert not notes["payments-0"]


def test_dump_reads_each_batch_once_naming_the_remote_segment_that_serves_it():
    result = run("dump", "--json", *PATHS)
    assert result.exit_code == 0, result.output
    items = [json.loads(line) for line in result.stdout.splitlines()]
    for name in TIERED_PARTITIONS:
        topic, _, partition = name.rpartition("-")
        segments = [i for i in items if i["kind"] == "segment" and "segment_id" in i
                    and (i["topic"], i["partition"]) == (topic, int(partition))]
        assert [s["segment_id"] for s in segments] == [
            r["remote_segment_id"] for r in MANIFEST["partitions"][name]["remote_reads"]]
    # overlapping remote segments: the batches they share are shown once
    shown, partition = {}, None
    for item in items:
        if item["kind"] == "segment":
            partition = (item["topic"], item["partition"])
        elif item["kind"] == "batch":
            shown.setdefault(partition, []).append(item["base_offset"])
    for key, offsets in shown.items():
        assert offsets == sorted(set(offsets)), key
