"""A cluster's disks read as a consumer of that cluster reads them: log start offsets and
high watermarks from the log dirs' checkpoints, several copies of a partition as one,
Kafka's leftovers never data (read.replicas, format.log, format.checkpoints).

Expected rows come from the broker-disks manifest (Kafka's own reader), or from offsets
the test states; never from the code under test.
"""
import json
import os
import shutil

import pytest

from segmentlog_datasource.errors import CheckpointError, CorruptLogError, SegmentLogError
from segmentlog_datasource.format.scan import ScanOptions
from segmentlog_datasource.read.fragments import scan_fragments
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, offset_ranges, plan_fragments
from segmentlog_datasource.read.replicas import consumer_partitions, replica_report
from segmentlog_datasource.read.stream import DataLossError, LogStream, parse_stream_options
from support import broker_disks as disks
from support.kafka_logs import read_batches

MANIFEST = disks.manifest()
PARTITIONS = MANIFEST["partitions"]


def read_rows(paths, **options):
    read = parse_read_options({"paths": json.dumps([str(p) for p in paths]),
                               "includeHeaders": "true", **options})
    fragments = plan_fragments(read, Constraints())
    return disks.arrow_rows_by_partition(scan_fragments(fragments, ScanOptions(include_headers=True)))


def offsets_of(rows):
    return [row[0] for row in rows]


def write_checkpoint(path, lines):
    with open(path, "w") as handle:
        handle.write("0\n%d\n" % len(lines) + "".join(line + "\n" for line in lines))


# ------------------------------------------------------------- the Kafka-written cluster
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_three_brokers_read_together_give_what_a_consumer_of_the_cluster_reads(isolation):
    got = read_rows(disks.broker_dirs(), isolationLevel=isolation)
    assert sorted(got) == sorted(PARTITIONS)
    for name in PARTITIONS:
        assert got[name] == disks.expected(name, isolation), name


@pytest.mark.parametrize("broker", disks.BROKERS)
def test_each_broker_alone_serves_from_its_own_log_start_to_its_own_high_watermark(broker):
    got = read_rows([os.path.join(disks.root(), broker)])
    held = {name: p["replica_state"][broker] for name, p in PARTITIONS.items()
            if broker in p["replica_state"]}
    assert sorted(got) == sorted(held)  # the -delete and -future dirs are no partitions
    for name, state in held.items():
        assert got[name] == disks.expected(name, lo=state["log_start_offset"],
                                           hi=state["hw_checkpoint"]), (broker, name)


@pytest.mark.parametrize("name", ["deleted-0", "txn-0", "orders-1"])
def test_a_partition_dir_alone_is_read_with_its_log_dirs_checkpoints(name):
    broker = "broker-2" if name != "txn-0" else "broker-1"
    alone = read_rows([os.path.join(disks.root(), broker, name)], isolationLevel="read_committed")
    whole = read_rows([os.path.join(disks.root(), broker)], isolationLevel="read_committed")
    assert alone[name] == whole[name] and alone[name]


def test_read_up_to_log_end_reads_what_the_broker_holds_past_the_high_watermark():
    broker0 = os.path.join(disks.root(), "broker-0")
    got = read_rows([broker0], readUpTo="logEnd", subscribe="orders")
    for name in ("orders-0", "orders-1", "orders-2"):
        state = PARTITIONS[name]["replica_state"]["broker-0"]
        assert offsets_of(got[name]) == list(range(state["log_start_offset"],
                                                   state["log_end_offset"])), name
        below = [row for row in got[name] if row[0] < state["hw_checkpoint"]]
        assert below == disks.expected(name)
    with pytest.raises(SegmentLogError, match="readUpTo"):
        parse_read_options({"path": broker0, "readUpTo": "end"})


def test_earliest_and_latest_are_the_log_start_and_the_high_watermark():
    read = parse_read_options({"paths": json.dumps(disks.broker_dirs()),
                               "startingOffsets": "earliest", "endingOffsets": "latest"})
    logs = consumer_partitions(read.paths)
    ranges = offset_ranges(read, logs)
    for name, p in PARTITIONS.items():
        assert ranges[(p["topic"], p["partition"])] == (p["log_start_offset"], p["high_watermark"])
    latest = parse_read_options({"paths": json.dumps(disks.broker_dirs()),
                                 "startingOffsets": "latest"})
    for (topic, partition), (start, _) in offset_ranges(latest, logs).items():
        assert start == PARTITIONS[f"{topic}-{partition}"]["high_watermark"]


@pytest.mark.parametrize("offset,error", [(150, "outside the log"), (474, None), (475, "outside")])
def test_specific_offsets_outside_the_consumers_view_are_data_loss(offset, error):
    options = {"paths": json.dumps(disks.broker_dirs()), "subscribe": "deleted",
               "startingOffsets": json.dumps({"deleted": {"0": offset}})}
    if error is None:
        assert read_rows(disks.broker_dirs(), **{k: v for k, v in options.items()
                                                 if k != "paths"}) == {}
        return
    with pytest.raises(SegmentLogError, match=error):
        plan_fragments(parse_read_options(options), Constraints())
    clamped = read_rows(disks.broker_dirs(), failOnDataLoss="false",
                        **{k: v for k, v in options.items() if k != "paths"})
    assert offsets_of(clamped.get("deleted-0", [])) == offsets_of(disks.expected(
        "deleted-0", lo=max(offset, 197)))


def test_the_copy_with_the_highest_epoch_then_the_longest_log_serves():
    logs = {f"{log.topic}-{log.partition}": log for log in consumer_partitions(disks.broker_dirs())}
    for name, p in PARTITIONS.items():
        log = logs[name]
        leader = p["leader_dir"].split("/")[0]
        # Copies equal in last epoch and log end (deleted-0's) serve the same: any may.
        equals = [broker for broker, state in p["replica_state"].items()
                  if state["leader_epochs"][-1] == p["replica_state"][leader]["leader_epochs"][-1]
                  and state["log_end_offset"] == p["leader_log_end_offset"]]
        assert os.path.relpath(log.directory, disks.root()).split(os.sep)[0] in equals, name
        assert len(equals) == 1 or name == "deleted-0"
        assert [[e.epoch, e.start_offset] for e in log.leader_epochs()] == p["leader_epochs"]
        assert log.start_offset == p["log_start_offset"]
        assert log.high_watermark == p["high_watermark"]
        assert log.end_offset() == p["leader_log_end_offset"]
        report = {os.path.basename(os.path.dirname(row["directory"])): row
                  for row in replica_report(log)}
        for broker, state in p["replica_state"].items():
            assert report[broker]["log_end_offset"] == state["log_end_offset"]
            assert report[broker]["high_watermark_checkpoint"] == state["hw_checkpoint"]
            assert report[broker]["diverges_at"] == state["diverges_at"], (name, broker)


# ------------------------------------------------------------------------ logs we build
def one_partition(tmp_path, broker="broker-0", name="orders-0", checkpoints=()):
    """A log dir in tmp holding a copy of one fixture partition and the given checkpoints."""
    logdir = tmp_path / f"{broker}-copy"
    logdir.mkdir()
    shutil.copytree(os.path.join(disks.root(), broker, name), logdir / name)
    for file_name, lines in checkpoints:
        write_checkpoint(logdir / file_name, lines)
    return logdir


def test_delete_records_inside_a_batch_starts_the_log_there(tmp_path):
    batches = read_batches(os.path.join(disks.root(), "broker-0", "orders-0",
                                        "00000000000000000201.log"))
    inside = next(b for b in batches if b["last_offset"] > b["base_offset"] + 1)
    start = inside["base_offset"] + 1
    logdir = one_partition(tmp_path, checkpoints=[
        ("log-start-offset-checkpoint", [f"orders 0 {start}"]),
        ("replication-offset-checkpoint", ["orders 0 439"])])
    got = read_rows([logdir])["orders-0"]
    assert got == disks.expected("orders-0", lo=start)
    (log,) = consumer_partitions([str(logdir)])
    assert log.start_offset == start and log.first_segment_offset == 0


def test_a_high_watermark_past_the_log_end_is_clamped_and_one_below_the_start_reads_nothing(tmp_path):
    logdir = one_partition(tmp_path, checkpoints=[
        ("replication-offset-checkpoint", ["orders 0 99999", "gone 3 12"])])
    assert offsets_of(read_rows([logdir])["orders-0"]) == list(range(491))
    write_checkpoint(logdir / "log-start-offset-checkpoint", ["orders 0 300"])
    write_checkpoint(logdir / "replication-offset-checkpoint", ["orders 0 200"])
    assert read_rows([logdir]) == {}
    (log,) = consumer_partitions([str(logdir)])
    assert (log.start_offset, log.high_watermark) == (300, 300)


def test_without_checkpoints_a_partition_reads_to_its_log_end(tmp_path):
    logdir = one_partition(tmp_path, broker="broker-2")
    assert offsets_of(read_rows([logdir])["orders-0"]) == list(range(476))


def copies_without_epochs(tmp_path):
    """orders-0 of broker-0 (log end 491) and broker-1 (455) as two JBOD dirs of one
    broker with no leader-epoch files and no checkpoints."""
    dirs = []
    for number, broker in enumerate(("broker-1", "broker-0")):
        logdir = tmp_path / f"jbod-{number}"
        logdir.mkdir()
        shutil.copytree(os.path.join(disks.root(), broker, "orders-0"), logdir / "orders-0")
        os.remove(logdir / "orders-0" / "leader-epoch-checkpoint")
        dirs.append(logdir)
    return dirs


def test_copies_without_leader_epochs_are_one_partition_when_they_agree(tmp_path):
    dirs = copies_without_epochs(tmp_path)
    got = read_rows(dirs)
    assert offsets_of(got["orders-0"]) == list(range(491))  # the longer copy serves
    assert got["orders-0"][:439] == disks.expected("orders-0")


def flip_crc(segment_path, offset):
    """Change the stored CRC of the batch holding `offset`: a copy that disagrees there."""
    batch = next(b for b in read_batches(segment_path)
                 if b["base_offset"] <= offset <= b["last_offset"])
    with open(segment_path, "r+b") as handle:
        handle.seek(batch["position"] + 17)
        byte = handle.read(1)
        handle.seek(batch["position"] + 17)
        handle.write(bytes([byte[0] ^ 0xFF]))
    return batch["base_offset"]


def test_copies_that_disagree_below_the_end_are_an_error_naming_both_files(tmp_path):
    shorter, longer = copies_without_epochs(tmp_path)
    damaged = str(shorter / "orders-0" / "00000000000000000201.log")
    base = flip_crc(damaged, 250)
    with pytest.raises(CorruptLogError) as caught:
        read_rows([shorter, longer])
    message = str(caught.value)
    assert damaged in message and str(longer / "orders-0" / "00000000000000000201.log") in message
    assert f"offset {base}" in message
    # Reading below the damage plans no check past what it reads.
    assert offsets_of(read_rows([shorter, longer], endingOffsets=json.dumps(
        {"orders": {"0": base}}))["orders-0"]) == list(range(base))


def test_a_follower_that_disagrees_below_the_high_watermark_is_an_error(tmp_path):
    brokers = disks.writable_copy(tmp_path)
    follower = os.path.join(brokers[2], "orders-0", "00000000000000000294.log")
    flip_crc(follower, 300)
    with pytest.raises(CorruptLogError, match="disagree") as caught:
        read_rows(brokers, subscribe="orders")
    assert follower in str(caught.value)


def test_a_follower_that_differs_above_the_high_watermark_is_no_error(tmp_path):
    brokers = disks.writable_copy(tmp_path)
    follower = os.path.join(brokers[1], "orders-0", "00000000000000000404.log")
    flip_crc(follower, 450)  # broker-1 holds up to 455; the high watermark is 439
    assert read_rows(brokers, subscribe="orders")["orders-0"] == disks.expected("orders-0")


def test_a_swap_is_read_in_place_of_the_segments_it_covers(tmp_path):
    logdir = one_partition(tmp_path, broker="broker-2", name="orders-1")
    partition = logdir / "orders-1"
    # A swap that holds only the first batches of segment 0 (as a compaction's output
    # holds fewer records): offsets past them up to segment 157 are no longer there.
    batches = read_batches(str(partition / "00000000000000000000.log"))
    kept = batches[:3]
    with open(partition / "00000000000000000000.log", "rb") as handle:
        prefix = handle.read(kept[-1]["position"] + kept[-1]["size"])
    for name in os.listdir(partition):
        if name.endswith(".swap"):
            os.remove(partition / name)
    with open(partition / "00000000000000000000.log.swap", "wb") as handle:
        handle.write(prefix)
    expected = list(range(kept[-1]["last_offset"] + 1)) + list(range(157, 485))
    assert offsets_of(read_rows([logdir])["orders-1"]) == expected
    # A .cleaned file at or below the swap's offset: the swap belongs to an unfinished
    # cleaning, which recovery deletes; the old segment stays.
    (partition / "00000000000000000000.log.cleaned").write_bytes(prefix)
    assert offsets_of(read_rows([logdir])["orders-1"]) == list(range(485))


def test_kafkas_leftovers_are_never_data(tmp_path):
    logdir = one_partition(tmp_path)
    leftovers = ["orders-0.0123456789abcdef0123456789abcdef-delete",
                 "orders-0.0123456789abcdef0123456789abcdef-future",
                 "orders-7.fedcba9876543210fedcba9876543210-stray"]
    for name in leftovers:
        shutil.copytree(logdir / "orders-0", logdir / name)
    for name in os.listdir(logdir / "orders-0"):
        if name.endswith(".log"):
            shutil.copy(logdir / "orders-0" / name, logdir / "orders-0" / (name + ".deleted"))
            shutil.copy(logdir / "orders-0" / name, logdir / "orders-0" / (name + ".cleaned"))
    got = read_rows([logdir])
    assert list(got) == ["orders-0"] and offsets_of(got["orders-0"]) == list(range(491))


@pytest.mark.parametrize("text,line,what", [
    ("1\n1\norders 0 5\n", 1, "version 1"),
    ("0\n2\norders 0 5\n", 2, "says 2 entries"),
    ("0\n1\norders 0\n", 3, "malformed entry"),
    ("0\n1\norders zero 5\n", 3, "not a number"),
    ("0\nx\n", 2, "not a number"),
])
def test_a_malformed_checkpoint_names_its_file_and_line_and_what_to_do(tmp_path, text, line, what):
    logdir = one_partition(tmp_path)
    path = logdir / "replication-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError) as caught:
        read_rows([logdir])
    message = str(caught.value)
    assert f"{path} line {line}:" in message and what in message
    assert "move the file aside" in message


def test_an_empty_checkpoint_or_one_of_other_partitions_bounds_nothing(tmp_path):
    logdir = one_partition(tmp_path, checkpoints=[("log-start-offset-checkpoint", [])])
    (logdir / "replication-offset-checkpoint").write_text("")
    (logdir / "recovery-point-offset-checkpoint").write_text("0\n")
    assert offsets_of(read_rows([logdir])["orders-0"]) == list(range(491))


# ------------------------------------------------------------------------- streaming
def stream_rows(s, start, end):
    rows = {}
    for group in s.plan(start, end):
        for name, found in disks.arrow_rows_by_partition(
                scan_fragments(group, ScanOptions(include_headers=True))).items():
            rows.setdefault(name, []).extend(found)
    return rows


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_a_stream_over_three_brokers_ends_at_the_high_watermark(isolation):
    s = LogStream(parse_stream_options({"paths": json.dumps(disks.broker_dirs()),
                                        "isolationLevel": isolation}))
    start = s.initial_offsets()
    assert start == {(p["topic"], p["partition"]): p["log_start_offset"]
                     for p in PARTITIONS.values()}
    end = s.latest_offsets(start, None)
    key = "high_watermark" if isolation == "read_uncommitted" else "last_stable_offset"
    assert end == {(p["topic"], p["partition"]): p[key] for p in PARTITIONS.values()}
    got = stream_rows(s, start, end)
    for name in PARTITIONS:
        assert got[name] == disks.expected(name, isolation), name
    assert s.latest_offsets(end, None) == end


def test_a_stream_follows_the_high_watermark_and_reports_a_log_start_past_its_position(tmp_path):
    logdir = one_partition(tmp_path, checkpoints=[
        ("replication-offset-checkpoint", ["orders 0 300"])])
    s = LogStream(parse_stream_options({"path": str(logdir)}))
    start = s.initial_offsets()
    first = s.latest_offsets(start, None)
    assert first == {("orders", 0): 300}
    assert offsets_of(stream_rows(s, start, first)["orders-0"]) == list(range(300))
    write_checkpoint(logdir / "replication-offset-checkpoint", ["orders 0 439"])
    second = s.latest_offsets(first, None)
    assert second == {("orders", 0): 439}
    assert stream_rows(s, first, second)["orders-0"] == disks.expected("orders-0", lo=300)
    write_checkpoint(logdir / "replication-offset-checkpoint", ["orders 0 491"])
    write_checkpoint(logdir / "log-start-offset-checkpoint", ["orders 0 470"])
    with pytest.raises(DataLossError, match=r"offsets \[439, 470\)"):
        s.latest_offsets(second, None)
    warnings = []
    lenient = LogStream(parse_stream_options({"path": str(logdir), "failOnDataLoss": "false"}),
                        warn=warnings.append)
    third = lenient.latest_offsets(second, None)
    assert third == {("orders", 0): 491} and warnings
    assert offsets_of(stream_rows(lenient, second, third)["orders-0"]) == list(range(470, 491))


def test_timestamp_lookups_never_start_below_the_log_start():
    from segmentlog_datasource import time_range

    records = PARTITIONS["deleted-0"]["consumer_records"]
    logs = {f"{log.topic}-{log.partition}": log for log in consumer_partitions(disks.broker_dirs())}
    # A time before every record: Kafka's offsetsForTimes answers the log start, not the
    # first offset of the segment that still holds older records.
    assert logs["deleted-0"].offset_for_timestamp(0) == 197
    got = read_rows(disks.broker_dirs(), subscribe="deleted", startingTimestamp="0")
    assert got["deleted-0"] == disks.expected("deleted-0")
    middle = records[len(records) // 2]
    after_all = max(r["timestamp"] for r in records) + 1
    options = time_range(middle["timestamp"], after_all, topics=["deleted"])
    got = read_rows(disks.broker_dirs(), **options)
    first = next(r["offset"] for r in records if r["timestamp"] >= middle["timestamp"])
    assert got["deleted-0"] == disks.expected("deleted-0", lo=first)
