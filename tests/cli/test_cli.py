"""The `segmentlog` command line on the Kafka-written fixtures, run for real.

Fast cases go through click's CliRunner (the same `main` the console script runs); the
installed console script and `python -m segmentlog_datasource` run as subprocesses.
Expected values come from the fixtures' manifests (what Kafka's own reader returned).
"""
import csv
import json
import os
import shutil
import struct
import subprocess
import sys

import pyarrow as pa
import pytest
from click.testing import CliRunner

from segmentlog_datasource.cli import main
from segmentlog_datasource.format import PartitionLog, ScanOptions, SegmentRange, scan_segment
from support.manifest import iter_batches, load_manifest, partition_names

CONSOLE_SCRIPT = os.path.join(os.path.dirname(sys.executable), "segmentlog")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def manifest_batch(batch):
    return {k: v for k, v in batch.items() if k != "records"}


def damage_findings(result, file_name):
    report = json.loads(result.output)
    return [f for part in report["partitions"] for f in part["findings"]
            if f["kind"] == "damage" and os.path.basename(f["file"]) == file_name]


def test_describe_json_equals_every_manifest_summary(kafka_logdir):
    result = run("describe", kafka_logdir, "--json")
    assert result.exit_code == 0, result.output
    described = {f"{p['topic']}-{p['partition']}": p for p in json.loads(result.output)["partitions"]}
    assert sorted(described) == partition_names(kafka_logdir)
    for name, part in described.items():
        summary = load_manifest(kafka_logdir, name)["summary"]
        got = {key: len(part["segments"]) if key == "segments" else part[key] for key in summary}
        assert got == summary, name
        manifest = load_manifest(kafka_logdir, name)
        assert [s["base_offset"] for s in part["segments"]] == \
            [s["base_offset"] for s in manifest["segments"]], name
        codecs = {b["compression"] for _, b in iter_batches(manifest)}
        assert part["codecs"] == sorted(codecs), name


def test_describe_of_a_partition_directory_shows_its_time_index_range(kafka_logdir):
    result = run("describe", os.path.join(kafka_logdir, "txn-0"), "--json")
    assert result.exit_code == 0
    (part,) = json.loads(result.output)["partitions"]
    manifest = load_manifest(kafka_logdir, "txn-0")
    entries = [e for s in manifest["segments"] for e in s["time_index"]["entries"]]
    assert part["time_index_range"] == [min(e[0] for e in entries), max(e[0] for e in entries)]
    assert part["open_transactions"] == [[2000, 197]]


def test_describe_table_names_every_partition(kafka_logdir):
    result = run("describe", kafka_logdir)
    assert result.exit_code == 0
    for name in partition_names(kafka_logdir):
        assert name in result.output
    assert "torn at byte 46375" in result.output


@pytest.mark.parametrize("name", ["plain-0", "txn-0", "legacy-v0-0", "legacy-v1-0",
                                  "compacted-0", "live-0", "bigoffset-0", "codec-zstd-0"])
def test_dump_json_batches_equal_the_manifest(kafka_logdir, name):
    result = run("dump", os.path.join(kafka_logdir, name), "--json")
    assert result.exit_code == 0, result.output
    items = [json.loads(line) for line in result.output.splitlines()]
    batches = [{k: v for k, v in item.items() if k not in ("kind", "file")}
               for item in items if item["kind"] == "batch"]
    assert batches == [manifest_batch(b) for _, b in iter_batches(load_manifest(kafka_logdir, name))]


def test_dump_records_with_data_equal_the_manifest_records(kafka_logdir):
    result = run("dump", os.path.join(kafka_logdir, "codec-gzip-0"), "--json", "--print-data",
                 "--decoder", "hex")
    items = [json.loads(line) for line in result.output.splitlines()]
    records = [i for i in items if i["kind"] == "record"]
    expected = [r for _, b in iter_batches(load_manifest(kafka_logdir, "codec-gzip-0"))
                for r in b["records"]]
    assert [r["offset"] for r in records] == [r["offset"] for r in expected]
    import base64

    def hexed(text):
        return None if text is None else base64.b64decode(text).hex()

    assert [(r["key"], r["value"]) for r in records] == \
        [(hexed(r["key"]), hexed(r["value"])) for r in expected]


def test_dump_from_an_offset_and_a_timestamp_starts_there(kafka_logdir):
    manifest = load_manifest(kafka_logdir, "plain-0")
    path = os.path.join(kafka_logdir, "plain-0")
    result = run("dump", path, "--json", "--records", "--offset", 200)
    records = [json.loads(l) for l in result.output.splitlines() if '"record"' in l]
    assert records[0]["offset"] == 200
    assert [r["offset"] for r in records] == \
        [r["offset"] for _, b in iter_batches(manifest) for r in b["records"] if r["offset"] >= 200]
    target = sorted(r["timestamp"] for _, b in iter_batches(manifest) for r in b["records"])[200]
    result = run("dump", path, "--json", "--timestamp", target)
    first = next(json.loads(l) for l in result.output.splitlines() if '"batch"' in l)
    expected = min(r["offset"] for _, b in iter_batches(manifest) for r in b["records"]
                   if r["timestamp"] >= target)
    assert first["base_offset"] <= expected <= first["last_offset"]


def test_dump_single_files(kafka_logdir):
    segment = load_manifest(kafka_logdir, "txn-0")["segments"][0]
    folder = os.path.join(kafka_logdir, "txn-0")
    result = run("dump", os.path.join(folder, segment["offset_index"]["file"]), "--json")
    entries = [json.loads(l) for l in result.output.splitlines()][1:]
    assert [[e["offset"], e["position"]] for e in entries] == segment["offset_index"]["entries"]
    result = run("dump", os.path.join(folder, segment["time_index"]["file"]), "--json")
    entries = [json.loads(l) for l in result.output.splitlines()][1:]
    assert [[e["timestamp"], e["offset"]] for e in entries] == segment["time_index"]["entries"]
    result = run("dump", os.path.join(folder, segment["txn_index"]["file"]), "--json")
    entries = [json.loads(l) for l in result.output.splitlines()][1:]
    assert [{k: e[k] for k in ("version", "producer_id", "first_offset", "last_offset",
                               "last_stable_offset")} for e in entries] == \
        segment["txn_index"]["entries"]
    result = run("dump", os.path.join(folder, segment["log_file"]), "--json")
    batches = [json.loads(l) for l in result.output.splitlines() if '"batch"' in l]
    assert [b["position"] for b in batches] == [b["position"] for b in segment["batches"]]
    live_index = os.path.join(kafka_logdir, "live-0", "00000000000000000093.index")
    items = [json.loads(l) for l in run("dump", live_index, "--json").output.splitlines()]
    assert items[-1] == {"kind": "zero_padding", "file": live_index, "entries": 1019,
                         "index_position": 40}


def test_dump_producer_snapshots(kafka_logdir):
    folder = os.path.join(kafka_logdir, "txn-0")
    for name in load_manifest(kafka_logdir, "txn-0")["producer_snapshot_files"]:
        result = run("dump", os.path.join(folder, name), "--json")
        assert result.exit_code == 0, result.output
        items = [json.loads(l) for l in result.output.splitlines()]
        (head,) = [i for i in items if i["kind"] == "snapshot"]
        producers = [i for i in items if i["kind"] == "producer"]
        assert head["version"] == 1 and head["crc_valid"] and head["entries"] == len(producers)
        assert {p["producer_id"] for p in producers} <= {1000, 2000, 3000}
    # The clean-shutdown snapshot at the log end holds producer 2000's open transaction.
    items = [json.loads(l) for l in run("dump", os.path.join(folder, "00000000000000000204.snapshot"),
                                        "--json").output.splitlines()]
    assert {i["producer_id"]: i["current_txn_first_offset"] for i in items
            if i["kind"] == "producer"}[2000] == 197
    empty = os.path.join(kafka_logdir, "live-0", "00000000000000000093.snapshot")
    items = [json.loads(l) for l in run("dump", empty, "--json").output.splitlines()]
    assert items[1]["entries"] == 0 and items[1]["crc_valid"]


def test_verify_passes_every_fixture_and_reports_the_torn_tail(kafka_logdir):
    result = run("verify", kafka_logdir, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    findings = [f for part in report["partitions"] for f in part["findings"]]
    assert report["valid"] and [f["kind"] for f in findings] == ["torn tail"]
    (torn,) = findings
    assert torn["file"].endswith(os.path.join("live-0", "00000000000000000093.log"))
    assert torn["position"] == 46375 and "753" in torn["message"]


@pytest.mark.parametrize("name", ["plain-0", "txn-0", "legacy-v0-0", "compacted-0", "live-0"])
def test_verify_each_partition_directory_exits_0(kafka_logdir, name):
    assert run("verify", os.path.join(kafka_logdir, name)).exit_code == 0


def test_verify_finds_a_flipped_byte_inside_a_batch(kafka_logdir_copy):
    segment = load_manifest(kafka_logdir_copy, "plain-1")["segments"][1]
    batch = segment["batches"][3]
    path = os.path.join(kafka_logdir_copy, "plain-1", segment["log_file"])
    with open(path, "r+b") as handle:
        handle.seek(batch["position"] + batch["size_in_bytes"] - 5)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0x40]))
    result = run("verify", kafka_logdir_copy, "--json")
    assert result.exit_code == 1
    (finding,) = damage_findings(result, segment["log_file"])
    assert finding["position"] == batch["position"] and "checksum" in finding["message"]


def test_verify_finds_an_index_entry_off_a_batch_boundary(kafka_logdir_copy):
    segment = load_manifest(kafka_logdir_copy, "plain-0")["segments"][0]
    path = os.path.join(kafka_logdir_copy, "plain-0", segment["offset_index"]["file"])
    with open(path, "r+b") as handle:
        handle.seek(8 + 4)  # the second entry's position
        (position,) = struct.unpack(">i", handle.read(4))
        handle.seek(8 + 4)
        handle.write(struct.pack(">i", position + 3))
    result = run("verify", os.path.join(kafka_logdir_copy, "plain-0"), "--json")
    assert result.exit_code == 1
    (finding,) = damage_findings(result, segment["offset_index"]["file"])
    assert finding["position"] == 8 and "entry boundary" in finding["message"]


def test_verify_finds_a_truncated_middle_segment(kafka_logdir_copy):
    segment = load_manifest(kafka_logdir_copy, "txn-0")["segments"][2]
    batch = segment["batches"][-2]
    path = os.path.join(kafka_logdir_copy, "txn-0", segment["log_file"])
    os.truncate(path, batch["position"] + 30)
    result = run("verify", kafka_logdir_copy, "--json")
    assert result.exit_code == 1
    findings = damage_findings(result, segment["log_file"])
    assert [f["position"] for f in findings] == [batch["position"]]
    assert "truncated" in findings[0]["message"]


def test_verify_finds_a_time_index_going_backwards(kafka_logdir_copy):
    segment = load_manifest(kafka_logdir_copy, "txn-0")["segments"][0]
    entries = segment["time_index"]["entries"]
    assert len(entries) >= 2
    path = os.path.join(kafka_logdir_copy, "txn-0", segment["time_index"]["file"])
    with open(path, "r+b") as handle:
        handle.seek(12)
        handle.write(struct.pack(">q", entries[0][0] - 1000))
    result = run("verify", kafka_logdir_copy, "--json")
    assert result.exit_code == 1
    (finding,) = damage_findings(result, segment["time_index"]["file"])
    assert finding["position"] == 12 and "back in time" in finding["message"]


def test_verify_text_names_file_and_byte(kafka_logdir_copy):
    segment = load_manifest(kafka_logdir_copy, "plain-0")["segments"][1]
    path = os.path.join(kafka_logdir_copy, "plain-0", segment["log_file"])
    position = segment["batches"][2]["position"]
    with open(path, "r+b") as handle:
        handle.seek(position + 40)  # inside the CRC-covered header
        handle.write(b"\xff")
    result = run("verify", kafka_logdir_copy)
    assert result.exit_code == 1
    assert f"{path} at byte {position}" in result.output and "damaged" in result.output


def test_usage_errors_exit_2(kafka_logdir, tmp_path):
    assert run("verify", tmp_path / "missing").exit_code == 2
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    assert run("verify", tmp_path / "photos").exit_code == 2
    assert run("verify").exit_code == 2
    assert run("verify", kafka_logdir, "--no-such-flag").exit_code == 2
    assert run("dump", kafka_logdir, "--decoder", "base32").exit_code == 2
    assert run("dump", kafka_logdir, "--offset", 1, "--timestamp", 1).exit_code == 2


def read_back(logdir, topic):
    rows = {}
    for name in sorted(os.listdir(logdir)):
        if not name.startswith(topic + "-"):
            continue
        log = PartitionLog.open(os.path.join(logdir, name))
        for segment in log.segments:
            whole = SegmentRange(log.topic, log.partition, segment.log_path, segment.size, 0,
                                 segment.size, 0, 1 << 62, log.is_last(segment))
            for batch in scan_segment(whole, ScanOptions()):
                for key, value in zip(batch.column("key").to_pylist(),
                                      batch.column("value").to_pylist()):
                    rows.setdefault(log.partition, []).append((key, value))
    return rows


def test_write_json_lines_reads_back(tmp_path):
    source = tmp_path / "events.jsonl"
    events = [{"user": f"u{i % 7}", "n": i, "tags": ["a", i]} for i in range(300)]
    source.write_text("".join(json.dumps(e) + "\n" for e in events))
    logdir = tmp_path / "logdir"
    result = run("write", logdir, source, "--topic", "events", "--partitions", 3,
                 "--key-field", "user", "--compression", "lz4")
    assert result.exit_code == 0, result.output
    rows = read_back(str(logdir), "events")
    assert sorted(rows) == [0, 1, 2]
    from segmentlog_datasource.writer import partitions_for_keys

    for partition, pairs in rows.items():
        keys = [k for k, _ in pairs]
        assert list(partitions_for_keys(pa.array(keys, pa.binary()), 3)) == [partition] * len(keys)
    written = sorted((k, v) for pairs in rows.values() for k, v in pairs)
    assert written == sorted((e["user"].encode(), json.dumps(e, separators=(",", ":")).encode())
                             for e in events)
    codecs = run("describe", logdir, "--json")
    assert {c for p in json.loads(codecs.output)["partitions"] for c in p["codecs"]} == {"lz4"}


def test_write_csv_reads_back_through_the_console_script(tmp_path):
    source = tmp_path / "prices.csv"
    with open(source, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["sku", "price", "part"])
        for i in range(50):
            out.writerow([f"sku-{i}", f"{i * 1.5}", i % 2])
    logdir = tmp_path / "logdir"
    result = subprocess.run(
        [CONSOLE_SCRIPT, "write", str(logdir), str(source), "--topic", "prices",
         "--partitions", "2", "--key-field", "sku", "--value-field", "price",
         "--partition-field", "part"],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    rows = read_back(str(logdir), "prices")
    assert rows == {p: [(f"sku-{i}".encode(), f"{i * 1.5}".encode()) for i in range(50) if i % 2 == p]
                    for p in (0, 1)}
    verified = subprocess.run([CONSOLE_SCRIPT, "verify", str(logdir)], capture_output=True,
                              text=True, timeout=300)
    assert verified.returncode == 0 and "\x1b[" not in verified.stdout + verified.stderr


def test_console_script_and_module_run_verify_with_exit_statuses(kafka_logdir, kafka_logdir_copy):
    assert shutil.which(CONSOLE_SCRIPT)
    good = subprocess.run([CONSOLE_SCRIPT, "verify", kafka_logdir], capture_output=True,
                          text=True, timeout=300)
    assert good.returncode == 0, good.stderr
    assert "valid" in good.stdout and "\x1b[" not in good.stdout + good.stderr  # piped: plain
    os.truncate(os.path.join(kafka_logdir_copy, "plain-2", "00000000000000000080.log"), 1000)
    damaged = subprocess.run([sys.executable, "-m", "segmentlog_datasource", "verify",
                              kafka_logdir_copy], capture_output=True, text=True, timeout=300)
    assert damaged.returncode == 1, damaged.stdout + damaged.stderr
    assert "00000000000000000080.log at byte" in damaged.stdout
    usage = subprocess.run([sys.executable, "-m", "segmentlog_datasource", "verify"],
                           capture_output=True, text=True, timeout=300)
    assert usage.returncode == 2 and "Usage: segmentlog" in usage.stderr


def test_describe_and_verify_read_a_log_in_s3_as_on_disk(s3_server, kafka_logdir):
    # The command finds the store through the environment, as a user's shell gives it;
    # run in this process (the console script's own start is the test above's): each
    # command is over 500 requests to the store, and a Python start besides.
    s3_server.make_bucket("cli-logs")
    s3_server.upload_tree(kafka_logdir, "cli-logs", "fixtures")
    env = s3_server.env()
    described = {}
    for path in (kafka_logdir, "s3://cli-logs/fixtures"):
        done = CliRunner().invoke(main, ["describe", path, "--json"], env=env,
                                  catch_exceptions=False)
        assert done.exit_code == 0, done.output
        described[path] = json.loads(done.stdout)["partitions"]
    local, remote = described[kafka_logdir], described["s3://cli-logs/fixtures"]
    assert len(remote) == len(partition_names(kafka_logdir))
    def without_location(text):  # the same description but for where the files are
        return json.loads(text.replace(kafka_logdir, "<root>").replace(
            "s3://cli-logs/fixtures", "<root>"))

    assert without_location(json.dumps(local)) == without_location(json.dumps(remote))
    done = CliRunner().invoke(main, ["verify", "s3://cli-logs/fixtures"], env=env,
                              catch_exceptions=False)
    assert done.exit_code == 0, done.output


METADATA_KEYS = ["producerId", "producerEpoch", "sequence", "leaderEpoch", "isTransactional",
                 "compression", "magic", "batchOffset", "segment", "position", "controlType",
                 "coordinatorEpoch"]


@pytest.mark.parametrize("name", ["txn-0", "legacy-v1-0"])
def test_dump_json_records_carry_the_metadata_columns(kafka_logdir, name):
    result = run("dump", os.path.join(kafka_logdir, name), "--json", "--records")
    assert result.exit_code == 0, result.output
    got = {item["offset"]: [item[key] for key in METADATA_KEYS]
           for item in map(json.loads, result.output.splitlines()) if item["kind"] == "record"}
    expected = {}
    for segment, batch in iter_batches(load_manifest(kafka_logdir, name)):
        control = batch.get("control") or {}
        for record in batch["records"]:
            sequence = -1 if batch["base_sequence"] < 0 else \
                batch["base_sequence"] + record["offset"] - batch["base_offset"]
            expected[record["offset"]] = [
                batch["producer_id"], batch["producer_epoch"], sequence,
                batch["partition_leader_epoch"], batch["is_transactional"],
                batch["compression"], batch["magic"], batch["base_offset"],
                segment["log_file"], batch["position"], control.get("type"),
                control.get("coordinator_epoch")]
    assert got == expected


def test_dump_text_shows_last_sequence_and_each_records_sequence(kafka_logdir):
    result = run("dump", os.path.join(kafka_logdir, "txn-0"), "--records")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # txn-0's batch at byte 840: producer 1000, base sequence 0, offsets 5..7.
    at = next(n for n, line in enumerate(lines) if "position: 840 " in line)
    assert "baseSequence: 0 lastSequence: 2 producerId: 1000" in lines[at]
    assert [line.split(" sequence: ")[1].split()[0] for line in lines[at + 1:at + 4]] == \
        ["0", "1", "2"]
    marker = next(line for line in lines if line.startswith("| offset: 14 "))
    assert "sequence: -1 endTxnMarker: COMMIT coordinatorEpoch: 7" in marker
    legacy = run("dump", os.path.join(kafka_logdir, "legacy-v1-0"), "--records").output
    assert "lastSequence: -1" in legacy and " sequence: " not in legacy  # magic 2 only
