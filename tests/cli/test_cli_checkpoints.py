"""The command line on three brokers' log dirs of one cluster (fixtures/broker-disks):
describe and verify of several PATHs read as a consumer of the cluster reads them,
verify of the checkpoint files beside the segments, dump of each checkpoint kind.

Expected values come from the fixture's manifest.json (what Kafka's own classes wrote)
and from the checkpoint files' text, never from the code under test. In-process through
click's CliRunner; damage is done to copies in tmp_path.
"""
import json
import os
import re
import shutil
import struct

import pytest
from click.testing import CliRunner

from segmentlog_datasource.cli import main
from support import broker_disks as disks

BROKERS = disks.BROKERS
V2_CRC_POSITION = 17  # base offset (8), length (4), partition leader epoch (4), magic (1)


@pytest.fixture(scope="module")
def broker_disks():
    """The fixture's directory (support.fixtures: beside $SEGMENTLOG_FIXTURES's set, else
    the copy bundled with the tests)."""
    root = disks.root()
    if not os.path.isfile(os.path.join(root, "manifest.json")):
        pytest.fail(f"the broker-disks fixtures are not at {root}")
    return root


@pytest.fixture(scope="module")
def manifest(broker_disks):
    with open(os.path.join(broker_disks, "manifest.json"), encoding="utf-8") as handle:
        return json.load(handle)


def run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env)


def brokers(root, names=BROKERS):
    return [os.path.join(root, name) for name in names]


def described(*paths):
    result = run("describe", *paths, "--json")
    assert result.exit_code == 0, result.output
    return {f"{p['topic']}-{p['partition']}": p for p in json.loads(result.output)["partitions"]}


def copy_brokers(broker_disks, tmp_path, names=BROKERS):
    for name in names:
        shutil.copytree(os.path.join(broker_disks, name), tmp_path / name)
        for root, dirs, files in os.walk(tmp_path / name):
            os.chmod(root, 0o755)
            for file_name in files:
                os.chmod(os.path.join(root, file_name), 0o644)
    return tmp_path


def broker_of(directory):
    return os.path.basename(os.path.dirname(directory))


def test_describe_of_three_brokers_is_what_a_consumer_of_the_cluster_reads(broker_disks,
                                                                           manifest):
    parts = described(*brokers(broker_disks))
    assert sorted(parts) == sorted(manifest["partitions"])
    for name, expected in manifest["partitions"].items():
        part = parts[name]
        assert part["log_start_offset"] == expected["log_start_offset"], name
        assert part["high_watermark"] == expected["high_watermark"], name
        assert part["last_stable_offset"] == expected["last_stable_offset"], name
        assert part["log_end_offset"] == expected["leader_log_end_offset"], name
        assert part["leader_epochs"] == expected["leader_epochs"], name
        assert part["topic_id"] == expected["topic_id"], name
        assert part["records_visible_read_uncommitted"] == expected["consumer_records_count"]
        assert part["records_visible_read_committed"] == expected["committed_records_count"]
        # The leader's copy serves; where copies hold the same log end and epochs (deleted-0)
        # the files cannot tell the leader's from another, and any of those serves alike.
        states = expected["replica_state"]
        alike = {broker for broker, state in states.items()
                 if state["log_end_offset"] == expected["leader_log_end_offset"]
                 and state["leader_epochs"] == expected["leader_epochs"]}
        leader_broker = expected["leader_dir"].split("/")[0]
        assert leader_broker in alike, name
        if alike == {leader_broker}:
            assert part["directory"].endswith(os.path.join(*expected["leader_dir"].split("/")))
        assert broker_of(part["directory"]) in alike, name
        rows = {broker_of(row["directory"]): row for row in part["replicas"]}
        assert sorted(rows) == sorted(states), name
        assert [row["leader"] for row in part["replicas"]] == [True] + [False] * (len(rows) - 1)
        assert rows[broker_of(part["directory"])]["leader"], name
        for broker, state in states.items():
            row = rows[broker]
            assert (row["log_end_offset"], row["high_watermark_checkpoint"],
                    row["log_start_offset"], row["last_epoch"]) == \
                (state["log_end_offset"], state["hw_checkpoint"], state["log_start_offset"],
                 state["leader_epochs"][-1][0]), (name, broker)
            if not row["leader"]:
                assert row["diverges_at"] == state["diverges_at"], (name, broker)
    broker_2 = {broker_of(row["directory"]): row for row in parts["diverged-0"]["replicas"]}
    assert broker_2["broker-2"]["diverges_at"] == 155


@pytest.mark.parametrize("broker", BROKERS)
def test_describe_of_one_broker_is_what_its_files_serve(broker_disks, manifest, broker):
    parts = described(os.path.join(broker_disks, broker))
    held = {name: p for name, p in manifest["partitions"].items() if broker in p["replica_state"]}
    assert sorted(parts) == sorted(held)
    for name, expected in held.items():
        state = expected["replica_state"][broker]
        part = parts[name]
        assert (part["log_start_offset"], part["high_watermark"], part["log_end_offset"],
                part["leader_epochs"]) == \
            (state["log_start_offset"], state["hw_checkpoint"], state["log_end_offset"],
             state["leader_epochs"]), name
        served = [r for r in expected["consumer_records"]
                  if state["log_start_offset"] <= r["offset"] < state["hw_checkpoint"]]
        assert part["records_visible_read_uncommitted"] == len(served), name
        assert [row["leader"] for row in part["replicas"]] == [True]


def test_describe_table_says_who_leads_and_where_a_copy_diverges(broker_disks):
    result = run("describe", *brokers(broker_disks))
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines()
            if line.startswith("│ diverged-0") and "broker-2" in line]
    assert len(rows) == 1 and "diverges at 155" in rows[0]
    assert "0@0 1@119 2@155" in result.output


def _numeric_tokens(text):
    """Every run of characters that holds a digit: a number cropped or folded across
    lines gives other tokens than the number whole (a set: a table split in two at 80
    columns repeats its partition column)."""
    return {token for token in re.findall(r"[\w.,:@/-]+", text) if re.search(r"\d", token)}


def _table_rows(output, title):
    """The body rows (cells stripped) of the table under `title`, first of its parts."""
    lines = output.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(title))
    rows = []
    for line in lines[start:]:
        if line.startswith("└"):
            break
        if line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
    return rows


def test_describe_without_a_high_watermark_checkpoint_shows_a_dash(kafka_logdir):
    # The Kafka-written fixtures are partition directories without a log dir's checkpoints.
    parts = described(os.path.join(kafka_logdir, "plain-0"))
    assert parts["plain-0"]["high_watermark"] is None
    result = run("describe", os.path.join(kafka_logdir, "plain-0"))
    (row,) = _table_rows(result.output, "as a consumer reads it")
    assert row[:3] == ["plain-0", "0", "-"]


def test_describe_at_80_columns_crops_no_number(broker_disks, manifest, monkeypatch):
    monkeypatch.chdir(broker_disks)  # short paths in the title
    narrow = run("describe", *BROKERS, env={"COLUMNS": "80"})
    wide = run("describe", *BROKERS, env={"COLUMNS": "400"})
    assert narrow.exit_code == wide.exit_code == 0
    assert max(len(line) for line in narrow.output.splitlines()) <= 80
    assert "…" not in narrow.output
    assert _numeric_tokens(narrow.output) == _numeric_tokens(wide.output)
    rows = {row[0]: row for row in _table_rows(narrow.output, "as a consumer reads it")
            if row[0]}
    copies = [row for row in _table_rows(narrow.output, "copies") if row[0]]
    for name, expected in manifest["partitions"].items():
        assert rows[name][1:7] == [str(expected[key]) for key in (
            "log_start_offset", "high_watermark", "last_stable_offset", "leader_log_end_offset",
            "consumer_records_count", "committed_records_count")], name
        for broker, state in expected["replica_state"].items():
            assert [str(state[key]) for key in ("log_start_offset", "log_end_offset",
                                                "hw_checkpoint")] in \
                [row[3:6] for row in copies if row[:2] == [name, broker]], (name, broker)


def test_verify_of_three_brokers_exits_0_and_notes_the_diverged_copy(broker_disks):
    result = run("verify", *brokers(broker_disks), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["valid"] and report["damage"] == 0
    assert sorted(os.path.basename(d["path"]) for d in report["log_dirs"]) == list(BROKERS)
    notes = [(part["directory"], f) for part in report["partitions"] for f in part["findings"]]
    assert [f["kind"] for _, f in notes] == ["note"]
    (directory, note), = notes
    assert directory.endswith(os.path.join("broker-2", "diverged-0"))
    assert "offset 155" in note["message"]


def test_verify_finds_a_count_mismatch_in_the_high_watermark_checkpoint(broker_disks, tmp_path):
    root = copy_brokers(broker_disks, tmp_path, ["broker-0"])
    path = root / "broker-0" / "replication-offset-checkpoint"
    lines = path.read_text().splitlines()
    lines[1] = str(int(lines[1]) + 1)  # the count line
    path.write_text("\n".join(lines) + "\n")
    result = run("verify", root / "broker-0")
    assert result.exit_code == 1
    assert f"{path} line 2: the count line says {len(lines) - 1} entries" in result.output
    assert "move the file aside" in result.output
    # describe and dump read the file too: damage, named with its line
    for command in (["describe", root / "broker-0"], ["dump", path]):
        failed = run(*command)
        assert failed.exit_code == 1
        assert f"{path} line 2:" in failed.output


def test_verify_finds_a_high_watermark_past_the_log_end(broker_disks, manifest, tmp_path):
    root = copy_brokers(broker_disks, tmp_path, ["broker-0"])
    path = root / "broker-0" / "replication-offset-checkpoint"
    lines = path.read_text().splitlines()
    line = lines.index("orders 0 439") + 1
    lines[line - 1] = "orders 0 900"
    path.write_text("\n".join(lines) + "\n")
    log_end = manifest["partitions"]["orders-0"]["replica_state"]["broker-0"]["log_end_offset"]
    result = run("verify", root / "broker-0")
    assert result.exit_code == 1
    assert (f"{path} line {line}: high watermark 900 of orders-0 is past its log end "
            f"{log_end}") in result.output


def test_verify_checks_the_log_start_offset_against_the_log(broker_disks, manifest, tmp_path):
    root = copy_brokers(broker_disks, tmp_path, ["broker-0"])
    path = root / "broker-0" / "log-start-offset-checkpoint"
    assert path.read_text() == "0\n1\ndeleted 0 197\n"
    state = manifest["partitions"]["deleted-0"]["replica_state"]["broker-0"]
    first_base, log_end = state["segments"][0], state["log_end_offset"]
    # Below the first segment: retention deleted segments after the checkpoint was
    # written, and Kafka starts the log at the first segment. A note, not damage.
    path.write_text(f"0\n1\ndeleted 0 {first_base - 10}\n")
    result = run("verify", root / "broker-0" / "deleted-0", "--json")
    assert result.exit_code == 0, result.output
    (note,) = [f for part in json.loads(result.output)["partitions"] for f in part["findings"]]
    assert (note["kind"], note["file"], note["line"]) == ("note", str(path), 3)
    path.write_text(f"0\n1\ndeleted 0 {log_end + 1}\n")
    result = run("verify", root / "broker-0" / "deleted-0")
    assert result.exit_code == 1
    assert (f"{path} line 3: log start offset {log_end + 1} of deleted-0 is past its log end "
            f"{log_end}") in result.output


def test_verify_finds_leader_epochs_going_down(broker_disks, manifest, tmp_path):
    root = copy_brokers(broker_disks, tmp_path, ["broker-0"])
    path = root / "broker-0" / "orders-0" / "leader-epoch-checkpoint"
    epochs = manifest["partitions"]["orders-0"]["replica_state"]["broker-0"]["leader_epochs"]
    assert epochs == [[0, 0], [1, 168]]
    path.write_text("0\n2\n1 0\n0 168\n")
    result = run("verify", root / "broker-0" / "orders-0", "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    (finding,) = [f for part in report["partitions"] for f in part["findings"]]
    assert (finding["kind"], finding["file"], finding["line"]) == ("damage", str(path), 4)
    assert "epoch 0 follows epoch 1" in finding["message"]


def test_verify_finds_copies_that_disagree_below_the_high_watermark(broker_disks, manifest,
                                                                    tmp_path):
    root = copy_brokers(broker_disks, tmp_path, ["broker-0", "broker-1"])
    expected = manifest["partitions"]["orders-0"]
    assert expected["leader_dir"] == "broker-0/orders-0"
    assert 201 in expected["replica_state"]["broker-1"]["segments"]
    assert 201 < expected["high_watermark"]
    follower = root / "broker-1" / "orders-0" / "00000000000000000201.log"
    leader = root / "broker-0" / "orders-0" / "00000000000000000201.log"
    with open(follower, "r+b") as handle:
        assert struct.unpack(">q", handle.read(8))[0] == 201  # the first batch, at byte 0
        handle.seek(V2_CRC_POSITION)
        byte = handle.read(1)
        handle.seek(V2_CRC_POSITION)
        handle.write(bytes([byte[0] ^ 0xFF]))
    result = run("verify", root / "broker-0" / "orders-0", root / "broker-1" / "orders-0")
    assert result.exit_code == 1
    (disagreement,) = [line for line in result.output.splitlines() if "disagree" in line]
    assert f"{follower} at byte 0" in disagreement and str(leader) in disagreement
    assert f"{follower} at byte 0: checksum mismatch" in result.output


def test_verify_ignores_checkpoint_entries_of_partitions_not_there(broker_disks, tmp_path):
    root = copy_brokers(broker_disks, tmp_path, ["broker-2"])
    path = root / "broker-2" / "replication-offset-checkpoint"
    lines = path.read_text().splitlines()
    entries = lines[2:] + ["gone 7 12345"]
    path.write_text("\n".join(["0", str(len(entries))] + entries) + "\n")
    assert run("verify", root / "broker-2").exit_code == 0


def dumped(path):
    result = run("dump", path, "--json")
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


@pytest.mark.parametrize("file_name, key", [
    ("replication-offset-checkpoint", "hw_checkpoint"),
    ("recovery-point-offset-checkpoint", "recovery_point"),
])
def test_dump_offset_checkpoints(broker_disks, manifest, file_name, key):
    path = os.path.join(broker_disks, "broker-2", file_name)
    items = dumped(path)
    entries = [i for i in items if i["kind"] == "offset_checkpoint_entry"]
    expected = sorted((p["topic"], p["partition"], p["replica_state"]["broker-2"][key])
                      for p in manifest["partitions"].values()
                      if "broker-2" in p["replica_state"])
    assert sorted((e["topic"], e["partition"], e["offset"]) for e in entries) == expected
    assert [e["line"] for e in entries] == list(range(3, 3 + len(expected)))
    text = run("dump", path).output
    assert "topic: diverged partition: 0 offset: 155" in text if key == "hw_checkpoint" else \
        "topic: diverged partition: 0 offset: 153" in text


def test_dump_log_start_and_empty_cleaner_checkpoints(broker_disks, manifest):
    deleted = manifest["partitions"]["deleted-0"]["replica_state"]["broker-0"]
    assert deleted["log_start_offset"] > deleted["segments"][0]  # why it has an entry
    items = dumped(os.path.join(broker_disks, "broker-0", "log-start-offset-checkpoint"))
    assert [(i["topic"], i["partition"], i["offset"], i["line"]) for i in items
            if i["kind"] == "offset_checkpoint_entry"] == [("deleted", 0, 197, 3)]
    items = dumped(os.path.join(broker_disks, "broker-0", "cleaner-offset-checkpoint"))
    assert [i["kind"] for i in items] == ["file", "checkpoint"] and items[1]["entries"] == 0


def test_dump_leader_epochs_and_partition_metadata(broker_disks, manifest):
    expected = manifest["partitions"]["diverged-0"]
    folder = os.path.join(broker_disks, "broker-2", "diverged-0")
    items = dumped(os.path.join(folder, "leader-epoch-checkpoint"))
    assert [[i["epoch"], i["start_offset"]] for i in items if i["kind"] == "leader_epoch_entry"] \
        == expected["replica_state"]["broker-2"]["leader_epochs"] == [[0, 0], [1, 119]]
    text = run("dump", os.path.join(folder, "leader-epoch-checkpoint")).output
    assert "epoch: 1 startOffset: 119 (line 4)" in text
    metadata = os.path.join(folder, "partition.metadata")
    assert dumped(metadata)[-1]["topic_id"] == expected["topic_id"] == "tIiOA_BpC2eq_AMBUokc9w"
    assert f"version: 0 topicId: {expected['topic_id']}" in run("dump", metadata).output


def test_dump_of_several_brokers_dumps_each_partition_from_the_leader(broker_disks, manifest):
    result = run("dump", *brokers(broker_disks), "--json")
    assert result.exit_code == 0, result.output
    dumped_from = {}
    for item in map(json.loads, result.output.splitlines()):
        if item["kind"] == "segment":
            dumped_from.setdefault(f"{item['topic']}-{item['partition']}", set()).add(
                broker_of(os.path.dirname(item["file"])))
    for name in ("diverged-0", "orders-0", "orders-1", "orders-2", "txn-0"):
        leader_broker = manifest["partitions"][name]["leader_dir"].split("/")[0]
        assert dumped_from[name] == {leader_broker}, name
