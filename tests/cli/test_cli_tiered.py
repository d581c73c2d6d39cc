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
