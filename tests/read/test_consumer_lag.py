"""Committed offsets and lag from __consumer_offsets, with no cluster (read.consumer_lag and
`segmentlog lag`): Kafka's own commits in the internal-topics set, and groups built here
that commit, move on and expire beside a topic whose ends are known."""
import json
import os

import pyarrow as pa
import pytest
from click.testing import CliRunner

from segmentlog_datasource.cli.main import main as cli
from segmentlog_datasource.errors import SegmentLogError
from segmentlog_datasource.format.internal.group_records import (
    OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE)
from segmentlog_datasource.format.internal.messages import write_version
from segmentlog_datasource.read.consumer_lag import committed_offsets, consumer_lag
from segmentlog_datasource.writer import write_log
from support.fixtures import internal_topics_kafka4_root, internal_topics_root

T0 = 1_700_000_000_000
ORDERS = {0: 100, 1: 60, 2: 30}  # records per partition, one a second from T0


def commit_key(group, topic, partition):
    return write_version(1) + OFFSET_COMMIT_KEY.encode(
        {"group": group, "topic": topic, "partition": partition}, 0)


def commit_value(offset, at, version=3, expire=None):
    value = {"offset": offset, "leaderEpoch": 0, "metadata": f"at {offset}",
             "commitTimestamp": at}
    if expire is not None:
        value["expireTimestamp"] = expire
    return write_version(version) + OFFSET_COMMIT_VALUE.encode(value, version)


def write_commits(logdir, commits):
    """(group, topic, partition, offset or None for a tombstone, at) appended in order."""
    rows = [(commit_key(g, t, p),
             None if offset is None else commit_value(offset, at, *extra), at)
            for g, t, p, offset, at, *extra in commits]
    write_log(logdir, pa.table({
        "key": [k for k, _, _ in rows], "value": pa.array([v for _, v, _ in rows], pa.binary()),
        "timestamp": pa.array([at for _, _, at in rows], pa.timestamp("ms", tz="UTC"))}),
        topic="__consumer_offsets", num_partitions=1)


@pytest.fixture(scope="module")
def groups(tmp_path_factory):
    logdir = str(tmp_path_factory.mktemp("lag"))
    for partition, count in ORDERS.items():
        write_log(logdir, pa.table({
            "value": [b"order %d" % i for i in range(count)],
            "partition": pa.array([partition] * count, pa.int32()),
            "timestamp": pa.array([T0 + i * 1000 for i in range(count)],
                                  pa.timestamp("ms", tz="UTC"))}),
            topic="orders", num_partitions=3)
    write_commits(logdir, [
        ("billing", "orders", 0, 10, T0 + 10_000),
        ("billing", "orders", 1, 20, T0 + 10_000),
        ("audit", "orders", 2, 5, T0 + 10_000, 1, T0 + 20_000),  # v1, expires later
        ("retired", "gone", 0, 7, T0 + 10_000),  # a topic not in the log dir
    ])
    write_commits(logdir, [
        ("billing", "orders", 0, 90, T0 + 50_000),  # moved on
        ("audit", "orders", 2, None, T0 + 50_000),  # expired: the coordinator's tombstone
    ])
    return logdir


@pytest.mark.parametrize("kafka", ["kafka-3.9", "kafka-4.2"])
def test_kafka_written_commits_are_the_ones_kafka_replays(kafka):
    root = {"kafka-3.9": internal_topics_root, "kafka-4.2": internal_topics_kafka4_root}[kafka]()
    expected = {}
    for name in ("__consumer_offsets-0", "__consumer_offsets-1"):
        with open(os.path.join(root, name + ".manifest.json")) as handle:
            expected.update(json.load(handle)["latest_committed"])
    got = {}
    for (group, topic, partition), commit in committed_offsets([root]).items():
        got.setdefault(group, {}).setdefault(topic, {})[str(partition)] = commit.offset
    assert got == expected
    group = "txn-app" if kafka == "kafka-3.9" else sorted(expected)[0]
    only = committed_offsets([root], group=group)
    assert {key[0] for key in only} == {group}


def test_lag_of_groups_of_every_protocol_on_kafka_42():
    """Kafka 4.2's offsets log: classic groups, KIP-848 consumer groups and a streams
    group commit offsets; each lag row says the group's type, as the group's latest
    metadata record (in the manifest) gives it."""
    root = internal_topics_kafka4_root()
    kinds = {"GroupMetadata": "classic", "ConsumerGroupMetadata": "consumer",
             "StreamsGroupMetadata": "streams", "ShareGroupMetadata": "share"}
    expected_types, committed = {}, {}
    for name in ("__consumer_offsets-0", "__consumer_offsets-1"):
        with open(os.path.join(root, name + ".manifest.json")) as handle:
            manifest = json.load(handle)
        committed.update(manifest["latest_committed"])
        for record in manifest["records"]:
            kind = kinds.get(record["record_type_name"])
            if kind is None:
                continue
            group = record["key"].get("group") or record["key"]["groupId"]
            if record["tombstone"]:
                expected_types.pop(group, None)
            else:
                expected_types[group] = kind
    rows = consumer_lag([root])
    assert {(r.group, r.topic, str(r.partition)): r.committed_offset for r in rows} == {
        (group, topic, partition): offset for group, topics in committed.items()
        for topic, partitions in topics.items() for partition, offset in partitions.items()}
    types = {r.group: r.group_type for r in rows}
    assert types == {group: expected_types.get(group, "classic") for group in committed}
    assert {"classic", "consumer", "streams"} <= set(types.values())


def test_lag_is_the_high_watermark_minus_the_last_commit(groups):
    rows = {(r.group, r.topic, r.partition): r for r in consumer_lag([groups])}
    assert sorted(rows) == [("billing", "orders", 0), ("billing", "orders", 1),
                            ("retired", "gone", 0)]
    moved = rows["billing", "orders", 0]
    assert (moved.committed_offset, moved.log_end_offset, moved.high_watermark, moved.lag,
            moved.metadata, moved.commit_timestamp) == (90, 100, 100, 10, "at 90", T0 + 50_000)
    assert rows["billing", "orders", 1].lag == 60 - 20
    gone = rows["retired", "gone", 0]
    assert gone.committed_offset == 7 and gone.log_end_offset is None and gone.lag is None
    assert [r.group for r in consumer_lag([groups], group="billing")] == ["billing"] * 2


def test_lag_as_of_a_moment_takes_the_commits_and_log_ends_of_then(groups):
    rows = {(r.group, r.topic, r.partition): r
            for r in consumer_lag([groups], as_of=T0 + 29_500)}
    # Then: billing's first commits and audit's commit stood; orders-0 ended at offset 30.
    assert rows["billing", "orders", 0].committed_offset == 10
    assert rows["billing", "orders", 0].high_watermark == 30
    assert rows["billing", "orders", 0].lag == 20
    assert rows["audit", "orders", 2].lag == 30 - 5
    assert ("audit", "orders", 2) not in {(r.group, r.topic, r.partition)
                                          for r in consumer_lag([groups])}


def test_the_lag_command(groups, tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["lag", groups, "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert [(p["group"], p["partition"], p["lag"]) for p in document["partitions"]] == [
        ("billing", 0, 10), ("billing", 1, 40), ("retired", 0, None)]
    text = runner.invoke(cli, ["lag", groups, "--group", "billing"], env={"COLUMNS": "200"})
    assert text.exit_code == 0, text.output
    lines = [line for line in text.output.splitlines() if "orders" in line]
    assert len(lines) == 2 and lines[0].split("│")[1:8] and "90" in lines[0]
    at = runner.invoke(cli, ["lag", groups, "--json", "--at", "2023-11-14T22:13:49.500Z"])
    assert json.loads(at.output)["as_of"] == T0 + 29_500
    assert runner.invoke(cli, ["lag", groups, "--at", "yesterday"]).exit_code == 2
    empty = str(tmp_path / "empty")
    write_log(empty, pa.table({"value": [b"x"]}), topic="orders", num_partitions=1)
    missing = runner.invoke(cli, ["lag", empty])
    assert missing.exit_code == 2 and "no __consumer_offsets partition" in missing.output
    with pytest.raises(SegmentLogError, match="no __consumer_offsets partition"):
        consumer_lag([empty])
