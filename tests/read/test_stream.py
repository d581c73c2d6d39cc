"""The Spark-free core of streaming reads (read.stream): offsets, admission control,
growth, torn tails, transactions and data loss, on real files.

Expected records come from kafka-python's reader (support.kafka_logs) or from the
Kafka-written manifests, never from the code under test.
"""
import logging
import os
import shutil

import pytest

from segmentlog_datasource.errors import InvalidOptionError
from segmentlog_datasource.format.log import PartitionLog
from segmentlog_datasource.format.scan import ScanOptions
from segmentlog_datasource.read.fragments import scan_fragments
from segmentlog_datasource.read.stream import (
    DataLossError, LogStream, TriggerLimits, offsets_from_json, offsets_to_json,
    parse_stream_options,
)
from support.kafka_logs import decode_partition, read_batches
from support.manifest import expected_rows, iter_batches, load_manifest, partition_names
from support.streams import (
    ABORT, COMMIT, append, append_aborted_txn_entry, append_bytes, drop_oldest_segment,
    last_segment, marker_batch,
)


def stream(logdir, warn=None, clock=None, **options):
    kwargs = {"warn": warn}
    if clock is not None:
        kwargs["clock"] = clock
    return LogStream(parse_stream_options({"path": logdir, **options}), **kwargs)


def delivered(s, start, end):
    """(topic, partition, offset) of every row the micro-batch [start, end) yields."""
    rows = []
    for group in s.plan(start, end):
        for batch in scan_fragments(group, ScanOptions()):
            columns = batch.to_pydict()
            rows.extend(zip(columns["topic"], columns["partition"], columns["offset"]))
    return rows


def run_to_end(s, start, limits=None, max_triggers=10_000):
    """Triggers until nothing is left: (end offsets, rows per micro-batch)."""
    batches = []
    for _ in range(max_triggers):
        end = s.latest_offsets(start, limits)
        if end == start:
            return start, batches
        batches.append(delivered(s, start, end))
        start = end
    raise AssertionError("the stream never caught up")


def kafka_offsets(partition_dir):
    """Offsets of the records kafka-python reads from a partition directory."""
    return [r[0] for r in decode_partition(partition_dir)]


def manifest_offsets(logdir, name, isolation="read_uncommitted"):
    return [row["offset"] for row in expected_rows(load_manifest(logdir, name), isolation)]


def by_partition(batches):
    seen = {}
    for rows in batches:
        for t, p, o in rows:
            seen.setdefault((t, p), []).append(o)
    return seen


# ------------------------------------------------------------------------- options
def test_offsets_are_spark_kafka_source_json_both_ways():
    offsets = {("b", 10): 5, ("b", 2): 7, ("a", 0): 0}
    as_json = offsets_to_json(offsets)
    assert list(as_json) == ["a", "b"] and list(as_json["b"]) == ["2", "10"]
    assert as_json == {"a": {"0": 0}, "b": {"2": 7, "10": 5}}
    assert offsets_from_json(as_json) == offsets
    for bad in ([1], {"a": [0]}, {"a": {"x": 1}}, {"a": {"0": -3}}, {"a": {"0": True}}):
        with pytest.raises(Exception, match="is not JSON like"):
            offsets_from_json(bad)


@pytest.mark.parametrize("options, message", [
    ({"endingOffsets": "latest"}, "option 'endingOffsets' is for batch reads"),
    ({"endingTimestamp": "5"}, "option 'endingTimestamp' is for batch reads"),
    ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
    ({"maxBytesPerTrigger": "ten"}, "maxBytesPerTrigger"),
    ({"maxBytesPerTrigger": "5q"}, "maxBytesPerTrigger"),
    ({"maxTriggerDelay": "soon"}, "maxTriggerDelay"),
    ({"minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "10"},
     r"'minOffsetsPerTrigger' \(50\) is greater than 'maxOffsetsPerTrigger' \(10\)"),
    ({"maxOffsetPerTrigger": "10"}, "unknown read option 'maxOffsetPerTrigger'"),
])
def test_bad_stream_options_name_the_option(tmp_path, options, message):
    with pytest.raises(InvalidOptionError, match=message):
        parse_stream_options({"path": str(tmp_path), **options})


def test_stream_option_units():
    parsed = parse_stream_options({"path": "x", "maxTriggerDelay": "2m",
                                   "maxBytesPerTrigger": "64k"})
    assert parsed.max_trigger_delay_ms == 120_000
    assert parsed.max_bytes_per_trigger == 65_536
    parsed = parse_stream_options({"path": "x", "maxTriggerDelay": "250",
                                   "maxBytesPerTrigger": "1000"})
    assert parsed.max_trigger_delay_ms == 250 and parsed.max_bytes_per_trigger == 1000
    assert parse_stream_options({"path": "x"}).max_trigger_delay_ms == 15 * 60 * 1000


# ------------------------------------------------------- the fixtures, trigger by trigger
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_rate_limited_triggers_deliver_every_fixture_record_once_in_order(kafka_logdir, isolation):
    s = stream(kafka_logdir, isolationLevel=isolation)
    start = s.initial_offsets()
    for (topic, partition), offset in start.items():
        assert offset == PartitionLog.open(
            os.path.join(kafka_logdir, f"{topic}-{partition}")).start_offset
    limit = 60
    end, batches = run_to_end(s, start, TriggerLimits(max_offsets=limit))
    assert len(batches) > 10
    for rows in batches:
        # Kafka's split rounds a share below one offset up: at most one more per partition.
        assert len(rows) <= limit + len({(t, p) for t, p, _ in rows})
    seen = by_partition(batches)
    for name in partition_names(kafka_logdir):
        topic, partition = name.rsplit("-", 1)
        assert seen.get((topic, int(partition)), []) == manifest_offsets(
            kafka_logdir, name, isolation), name
    if isolation == "read_committed":
        assert end[("txn", 0)] == 197  # the open transaction of producer 2000
    assert end[("live", 0)] == 155  # one past the last complete batch


def test_a_torn_batch_waits_until_its_write_completes(tmp_path):
    logdir = str(tmp_path)
    append(logdir, "t", 0, 300, batch_size=2048)
    path = last_segment(os.path.join(logdir, "t-0"))
    last = read_batches(path)[-1]
    with open(path, "rb") as handle:
        data = handle.read()
    cut = last["position"] + last["size"] // 2
    with open(path, "r+b") as handle:
        handle.truncate(cut)  # the broker has written half of the last batch
    s = stream(logdir)
    start = s.initial_offsets()
    end = s.latest_offsets(start, None)
    assert end == {("t", 0): last["base_offset"]}
    assert [o for _, _, o in delivered(s, start, end)] == list(range(last["base_offset"]))
    assert s.latest_offsets(end, None) == end
    append_bytes(path, data[cut:])  # ... and now the rest
    after = s.latest_offsets(end, None)
    assert after == {("t", 0): 300}
    assert [o for _, _, o in delivered(s, end, after)] == list(range(last["base_offset"], 300))


def test_max_offsets_are_split_in_proportion_to_each_backlog(tmp_path):
    logdir = str(tmp_path)
    append(logdir, "t", 0, 400, partitions=2)  # 200 each
    append(logdir, "u", 0, 100)
    s = stream(logdir)
    start = s.initial_offsets()
    end = s.latest_offsets(start, TriggerLimits(max_offsets=50))
    # Backlogs 200, 200, 100 of 500: shares of 50 are 20, 20 and 10.
    assert end == {("t", 0): 20, ("t", 1): 20, ("u", 0): 10}
    assert len(delivered(s, start, end)) == 50
    tiny = s.latest_offsets(end, TriggerLimits(max_offsets=2))
    # Shares below one offset round up, as Spark's Kafka source rounds them.
    assert tiny == {("t", 0): 21, ("t", 1): 21, ("u", 0): 11}


def test_compaction_gaps_cost_no_offsets(kafka_logdir):
    # bigoffset-0 holds offsets near 2^33 with gaps of about a billion between batches.
    s = stream(kafka_logdir, subscribe="bigoffset")
    start = s.initial_offsets()
    end, batches = run_to_end(s, start, TriggerLimits(max_offsets=100))
    expected = manifest_offsets(kafka_logdir, "bigoffset-0")
    assert by_partition(batches)[("bigoffset", 0)] == expected
    assert len(batches) <= len(expected) // 100 + 2


def test_max_bytes_per_trigger_holds_in_whole_batches(tmp_path):
    logdir = str(tmp_path)
    append(logdir, "t", 0, 2000, partitions=2, batch_size=1024, segment_bytes=16384)
    sizes = {}
    for p in (0, 1):
        directory = os.path.join(logdir, f"t-{p}")
        for name in sorted(os.listdir(directory)):
            if name.endswith(".log"):
                for b in read_batches(os.path.join(directory, name)):
                    sizes[(p, b["base_offset"], b["last_offset"])] = b["size"]
    largest = max(sizes.values())
    s = stream(logdir)
    start = s.initial_offsets()
    budget = 5000
    end, batches = run_to_end(s, start, TriggerLimits(max_bytes=budget))
    for rows in batches:
        touched = {key for key in sizes for _, p, o in rows if key[0] == p and key[1] <= o <= key[2]}
        assert sum(sizes[key] for key in touched) <= budget
    assert by_partition(batches) == {("t", p): list(range(1000)) for p in (0, 1)}
    # A budget below one batch still moves on, one batch per trigger.
    s = stream(logdir)
    end = s.latest_offsets(start, TriggerLimits(max_bytes=largest // 3))
    moved = [(tp, end[tp] - start[tp]) for tp in end if end[tp] > start[tp]]
    assert len(moved) == 1
    (tp, count), = moved
    assert any(key[0] == tp[1] and key[1] == 0 and key[2] + 1 == count for key in sizes)


def test_min_offsets_wait_for_data_or_max_trigger_delay(tmp_path):
    logdir = str(tmp_path)
    append(logdir, "t", 0, 5)
    now = [1000.0]
    s = stream(logdir, clock=lambda: now[0])
    limits = TriggerLimits(min_offsets=10, max_trigger_delay_ms=60_000)
    start = s.initial_offsets()
    # As Spark's Kafka source: the first micro-batch does not wait.
    first = s.latest_offsets(start, limits)
    assert first == {("t", 0): 5}
    append(logdir, "t", 5, 4)
    now[0] += 10
    assert s.latest_offsets(first, limits) == first  # 4 < 10: wait
    append(logdir, "t", 9, 6)
    now[0] += 1
    second = s.latest_offsets(first, limits)
    assert second == {("t", 0): 15}  # 10 new offsets
    append(logdir, "t", 15, 2)
    now[0] += 59
    assert s.latest_offsets(second, limits) == second
    now[0] += 1.5  # the delay has passed since the last micro-batch
    assert s.latest_offsets(second, limits) == {("t", 0): 17}


def test_available_now_stops_at_what_was_there_when_it_started(tmp_path):
    logdir = str(tmp_path)
    append(logdir, "t", 0, 100, partitions=2)
    s = stream(logdir)
    start = s.initial_offsets()
    s.prepare_available_now()
    append(logdir, "t", 100, 100, partitions=2)
    append(logdir, "late", 0, 10)  # a topic that appears after the start
    end, batches = run_to_end(s, start, TriggerLimits(max_offsets=30, min_offsets=20))
    assert end == {("t", 0): 50, ("t", 1): 50}
    assert by_partition(batches) == {("t", p): list(range(50)) for p in (0, 1)}
    assert s.latest == {("t", 0): 100, ("t", 1): 100, ("late", 0): 10}


def test_new_segments_partitions_and_pattern_topics_are_picked_up(tmp_path):
    logdir = str(tmp_path / "logs")
    append(logdir, "orders", 0, 50, segment_bytes=2048, batch_size=512)
    append(logdir, "audit", 0, 5)
    s = stream(logdir, subscribePattern="ord.*")
    start = s.initial_offsets()
    assert start == {("orders", 0): 0}
    end = s.latest_offsets(start, None)
    assert [o for *_, o in delivered(s, start, end)] == list(range(50))
    append(logdir, "orders", 50, 50, segment_bytes=2048, batch_size=512)  # new segments
    assert len(PartitionLog.open(os.path.join(logdir, "orders-0")).segments) > 3
    # A partition created elsewhere and moved in, as a broker creates one; a new topic.
    other = str(tmp_path / "other")
    append(other, "orders", 0, 14, partitions=2)
    os.rename(os.path.join(other, "orders-1"), os.path.join(logdir, "orders-1"))
    append(logdir, "orders-eu", 0, 3)
    append(logdir, "audit", 5, 5)
    after = s.latest_offsets(end, None)
    assert after == {("orders", 0): 100, ("orders", 1): 7, ("orders-eu", 0): 3}
    assert by_partition([delivered(s, end, after)]) == {
        ("orders", 0): list(range(50, 100)), ("orders", 1): list(range(7)),
        ("orders-eu", 0): [0, 1, 2]}


# ------------------------------------------------------------------- transactions
TXN_OPEN_FIRST, TXN_PRODUCER, TXN_EPOCH, TXN_END = 197, 2000, 5, 204


def _txn_records_after(kafka_logdir, lo, skip_producer=None):
    manifest = load_manifest(kafka_logdir, "txn-0")
    offsets = []
    for _, batch in iter_batches(manifest):
        if batch["is_control"] or batch["producer_id"] == skip_producer:
            continue
        offsets.extend(r["offset"] for r in batch["records"] if r["offset"] >= lo)
    return offsets


@pytest.mark.parametrize("kind", [COMMIT, ABORT])
def test_read_committed_holds_back_an_open_transaction_until_it_ends(
        kafka_logdir, kafka_logdir_copy, kind):
    manifest = load_manifest(kafka_logdir, "txn-0")
    assert manifest["broker_last_stable_offset"] == TXN_OPEN_FIRST
    s = stream(kafka_logdir_copy, subscribe="txn", isolationLevel="read_committed")
    start = s.initial_offsets()
    end = s.latest_offsets(start, None)
    assert end == {("txn", 0): TXN_OPEN_FIRST}
    assert [o for *_, o in delivered(s, start, end)] == manifest_offsets(
        kafka_logdir, "txn-0", "read_committed")
    assert s.latest_offsets(end, None) == end  # still open: nothing more
    directory = os.path.join(kafka_logdir_copy, "txn-0")
    segment = last_segment(directory)
    append_bytes(segment, marker_batch(kind, TXN_END, TXN_PRODUCER, TXN_EPOCH))
    if kind == ABORT:
        append_aborted_txn_entry(segment[:-len(".log")] + ".txnindex", TXN_PRODUCER,
                                 TXN_OPEN_FIRST, TXN_END, TXN_OPEN_FIRST)
    after = s.latest_offsets(end, None)
    assert after == {("txn", 0): TXN_END + 1}
    got = [o for *_, o in delivered(s, end, after)]
    skip = TXN_PRODUCER if kind == ABORT else None
    assert got == _txn_records_after(kafka_logdir, TXN_OPEN_FIRST, skip)
    assert s.latest_offsets(after, None) == after


def test_the_incremental_tail_scan_agrees_with_a_full_scan(kafka_logdir_copy):
    s = stream(kafka_logdir_copy, isolationLevel="read_committed")
    first = {tp: v.available for tp, v in s.partitions_now().items()}
    segment = last_segment(os.path.join(kafka_logdir_copy, "txn-0"))
    append_bytes(segment, marker_batch(COMMIT, TXN_END, TXN_PRODUCER, TXN_EPOCH))
    second = {tp: v.available for tp, v in s.partitions_now().items()}
    assert first[("txn", 0)] == TXN_OPEN_FIRST and second[("txn", 0)] == TXN_END + 1
    for (topic, partition), available in second.items():
        log = PartitionLog.open(os.path.join(kafka_logdir_copy, f"{topic}-{partition}"))
        assert available == log.last_stable_offset(), (topic, partition)


# ----------------------------------------------------------------------- data loss
@pytest.mark.parametrize("fail", [True, False])
def test_retention_before_the_query_read_the_offsets(tmp_path, fail):
    logdir = str(tmp_path)
    append(logdir, "t", 0, 300, segment_bytes=4096, batch_size=1024)
    s_warnings = []
    s = stream(logdir, warn=s_warnings.append, failOnDataLoss=str(fail).lower())
    start = s.initial_offsets()
    end = s.latest_offsets(start, TriggerLimits(max_offsets=10))
    assert end == {("t", 0): 10}
    first_kept = drop_oldest_segment(os.path.join(logdir, "t-0"))
    assert first_kept > 10
    if fail:
        with pytest.raises(DataLossError, match=rf"t-0: offsets \[10, {first_kept}\) can "
                                                r"no longer be read.*failOnDataLoss=false"):
            s.latest_offsets(end, None)
        return
    after = s.latest_offsets(end, None)
    assert after == {("t", 0): 300}
    assert [o for *_, o in delivered(s, end, after)] == list(range(first_kept, 300))
    assert any(f"t-0: offsets [10, {first_kept})" in w and f"continuing from offset "
               f"{first_kept}" in w for w in s_warnings), s_warnings


@pytest.mark.parametrize("fail", [True, False])
def test_a_vanished_partition_directory(tmp_path, fail):
    logdir = str(tmp_path)
    append(logdir, "t", 0, 20, partitions=2)
    s_warnings = []
    s = stream(logdir, warn=s_warnings.append, failOnDataLoss=str(fail).lower())
    start = s.initial_offsets()
    shutil.rmtree(os.path.join(logdir, "t-1"))
    if fail:
        with pytest.raises(DataLossError, match=r"t-1: offsets from 0 on .*partition "
                                                r"directory is gone"):
            s.latest_offsets(start, None)
        return
    end = s.latest_offsets(start, None)
    assert end == {("t", 0): 10}
    assert any("t-1" in w and "no longer read" in w for w in s_warnings), s_warnings


@pytest.mark.parametrize("fail", [True, False])
def test_a_recreated_topic_that_now_ends_before_the_checkpoint(tmp_path, fail):
    logdir = str(tmp_path)
    append(logdir, "t", 0, 50)
    s_warnings = []
    s = stream(logdir, warn=s_warnings.append, failOnDataLoss=str(fail).lower())
    start = s.initial_offsets()
    end = s.latest_offsets(start, None)
    shutil.rmtree(os.path.join(logdir, "t-0"))
    append(logdir, "t", 1000, 8)  # deleted and created again: offsets 0..7
    if fail:
        with pytest.raises(DataLossError, match=r"t-0: .*the log now ends at 8, before "
                                                r"offset 50"):
            s.latest_offsets(end, None)
        return
    after = s.latest_offsets(end, None)
    assert after == {("t", 0): 8}
    assert [o for *_, o in delivered(s, end, after)] == list(range(8))
    assert s.latest_offsets(after, None) == after
    assert any("continuing from offset 0" in w for w in s_warnings), s_warnings


def test_warnings_go_to_the_segmentlog_logger_by_default(tmp_path, caplog):
    logdir = str(tmp_path)
    append(logdir, "t", 0, 20, partitions=2)
    s = LogStream(parse_stream_options({"path": logdir, "failOnDataLoss": "false"}))
    start = s.initial_offsets()
    shutil.rmtree(os.path.join(logdir, "t-0"))
    with caplog.at_level(logging.WARNING, logger="segmentlog_datasource.stream"):
        s.latest_offsets(start, None)
    assert any("data loss in t-0" in r.getMessage() for r in caplog.records)


def test_starting_offsets_of_a_new_query(tmp_path):
    logdir = str(tmp_path)
    append(logdir, "t", 0, 40, partitions=2)
    assert stream(logdir).initial_offsets() == {("t", 0): 0, ("t", 1): 0}
    assert stream(logdir, startingOffsets="latest").initial_offsets() == {
        ("t", 0): 20, ("t", 1): 20}
    assert stream(logdir, startingOffsets='{"t":{"0":5,"1":-1}}').initial_offsets() == {
        ("t", 0): 5, ("t", 1): 20}
    ts = 1_700_000_000_000 + 30  # record ids are timestamps past BASE_TS
    assert stream(logdir, startingTimestamp=str(ts)).initial_offsets() == {
        ("t", 0): 15, ("t", 1): 15}
    with pytest.raises(Exception, match="outside the log"):
        stream(logdir, startingOffsets='{"t":{"0":99,"1":0}}').initial_offsets()
    empty = str(tmp_path / "empty")
    os.mkdir(empty)
    assert stream(empty).initial_offsets() == {}


def test_index_entries_for_data_appended_since_the_listing_are_left_out(tmp_path):
    # A running broker appends to the active segment's .log, then to its .index: a reader
    # that sized the .log a moment earlier finds entries past that size.
    logdir = str(tmp_path)
    append(logdir, "t", 0, 400, batch_size=1024, index_interval_bytes=1024)
    path = last_segment(os.path.join(logdir, "t-0"))
    with open(path, "rb") as handle:
        data = handle.read()
    cut = read_batches(path)[-3]["position"]
    with open(path, "r+b") as handle:
        handle.truncate(cut)
    log = PartitionLog.open(os.path.join(logdir, "t-0"))
    append_bytes(path, data[cut:])
    index = log.segments[-1].offset_index
    assert len(index) > 0 and max(index.positions) < cut
    s = stream(logdir)
    start = s.initial_offsets()
    end = s.latest_offsets(start, None)
    assert [o for *_, o in delivered(s, start, end)] == list(range(400))


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_the_tail_scan_follows_appends_rolls_and_a_rewritten_log(tmp_path, isolation):
    logdir = str(tmp_path)
    s = stream(logdir, isolationLevel=isolation)
    total = 0
    for step in range(6):
        append(logdir, "t", total, 37 + step, partitions=2, segment_bytes=4096, batch_size=512)
        total += 37 + step
        views = s.partitions_now()
        for (topic, partition), view in views.items():
            log = PartitionLog.open(os.path.join(logdir, f"{topic}-{partition}"))
            assert view.end == view.available == log.end_offset() == log.last_stable_offset()
    shutil.rmtree(os.path.join(logdir, "t-1"))
    append(logdir, "u", 0, 3)
    os.rename(os.path.join(logdir, "u-0"), os.path.join(logdir, "t-1"))
    assert s.partitions_now()[("t", 1)].end == 3


def test_planning_a_trigger_reuses_the_tail_scans_end_of_the_active_segment(
        tmp_path, monkeypatch):
    # Finding where the active segment's data ends walks all its headers; each trigger's
    # tail scan has just walked the new ones, so planning must not walk them all again.
    from segmentlog_datasource.format.log import Segment

    logdir = str(tmp_path)
    append(logdir, "t", 0, 2000, batch_size=512, index_interval_bytes=1024)
    s = stream(logdir)
    start = s.initial_offsets()
    walks = []
    original = Segment.valid_end

    def counting(self, verify=False):
        if verify not in self._valid_ends:
            walks.append(self.log_path)
        return original(self, verify)

    monkeypatch.setattr(Segment, "valid_end", counting)
    offsets = []
    for _ in range(3):
        end = s.latest_offsets(start, TriggerLimits(max_offsets=700))
        offsets.extend(o for _, _, o in delivered(s, start, end))
        start = end
    append(logdir, "t", 0, 100, batch_size=512, index_interval_bytes=1024)
    end = s.latest_offsets(start, None)
    offsets.extend(o for _, _, o in delivered(s, start, end))
    assert offsets == list(range(2100))
    assert walks == []
