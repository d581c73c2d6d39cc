"""spark.readStream.format("segmentlog"): real streaming queries over growing logs.

Every query collects what each micro-batch got (foreachBatch), and the checks are per
topic-partition: every offset exactly once, in order, against the Kafka-written manifests
or against what the test appended.
"""
import json
import os
import shutil
import threading
import time

import pytest

from support.kafka_logs import read_batches
from support.manifest import expected_rows, load_manifest, partition_names
from support.streams import (
    COMMIT, append, append_bytes, drop_oldest_segment, last_segment, marker_batch,
    offsets_by_partition,
)


class Collected:
    """What a foreachBatch sink received: [(batch_id, [(topic, partition, offset)])]."""

    def __init__(self):
        self.batches = []
        self.lock = threading.Lock()

    def __call__(self, frame, batch_id):
        rows = [tuple(r) for r in frame.select("topic", "partition", "offset").collect()]
        with self.lock:
            self.batches.append((batch_id, rows))

    def rows(self):
        with self.lock:
            return [row for _, rows in self.batches for row in rows]

    def by_partition(self):
        return offsets_by_partition(self.rows())


def start_query(spark, path, checkpoint, sink, trigger=None, **options):
    reader = spark.readStream.format("segmentlog")
    for name, value in options.items():
        reader = reader.option(name, value)
    writer = reader.load(path).writeStream.foreachBatch(sink).option(
        "checkpointLocation", checkpoint)
    if trigger is not None:
        writer = writer.trigger(**trigger)
    return writer.start()


def run_available_now(spark, path, checkpoint, sink, **options):
    query = start_query(spark, path, checkpoint, sink, trigger={"availableNow": True}, **options)
    assert query.awaitTermination(300), "the AvailableNow query did not stop"
    if query.exception() is not None:
        raise query.exception()
    return query


def test_available_now_rate_limited_over_the_fixtures_delivers_every_record_once(
        spark, kafka_logdir, tmp_path):
    # A limit that cuts the fixtures' 5,065 records into a few micro-batches (each costs a
    # Spark job and a planning round trip; 400 made 13 of them for the same check).
    limit = 1000
    sink = Collected()
    query = run_available_now(spark, kafka_logdir, str(tmp_path / "cp"), sink,
                              maxOffsetsPerTrigger=str(limit))
    assert len(sink.batches) >= 5
    assert [b for b, _ in sink.batches] == list(range(len(sink.batches)))
    for _, rows in sink.batches:
        assert len(rows) <= limit + len({(t, p) for t, p, _ in rows})
    got = sink.by_partition()
    for name in partition_names(kafka_logdir):
        topic, partition = name.rsplit("-", 1)
        expected = [r["offset"] for r in expected_rows(load_manifest(kafka_logdir, name))]
        assert sorted(got.get((topic, int(partition)), [])) == expected, name
        assert len(set(got.get((topic, int(partition)), []))) == len(expected), name
    # The progress shows Spark Kafka source JSON offsets, and the latest available.
    source = query.lastProgress["sources"][0]
    end = json.loads(source["endOffset"])
    assert end["live"] == {"0": 155} and end["plain"].keys() == {"0", "1", "2"}
    assert json.loads(source["latestOffset"]) == end


def test_processing_time_trigger_while_another_thread_appends(spark, tmp_path):
    logdir = str(tmp_path / "logs")
    append(logdir, "t", 0, 10, partitions=2)
    sink = Collected()
    query = start_query(spark, logdir, str(tmp_path / "cp"), sink,
                        trigger={"processingTime": "200 milliseconds"})
    appends = 25

    def producer():
        for i in range(appends):
            append(logdir, "t", 10 + i * 20, 20, partitions=2)
            time.sleep(0.05)

    deadline = time.time() + 180
    while len(sink.rows()) < 10 and time.time() < deadline:
        time.sleep(0.1)  # the query has delivered what was there before the appends
    thread = threading.Thread(target=producer)
    thread.start()
    thread.join()
    total = 10 + appends * 20
    while len(sink.rows()) < total and time.time() < deadline:
        time.sleep(0.5)
    query.stop()
    assert len(sink.batches) > 1
    # Each batch continues where the previous stopped: in order, no gap, no repeat.
    got = sink.by_partition()
    assert got == {("t", p): list(range(total // 2)) for p in (0, 1)}


def test_max_bytes_per_trigger_bounds_each_micro_batch(spark, tmp_path):
    logdir = str(tmp_path / "logs")
    append(logdir, "t", 0, 3000, partitions=2, batch_size=2048)
    sizes = {}
    for p in (0, 1):
        for batch in read_batches(last_segment(os.path.join(logdir, f"t-{p}"))):
            sizes[(p, batch["base_offset"], batch["last_offset"])] = batch["size"]
    budget = 60_000  # a third of the log: a few micro-batches, each of many record batches
    sink = Collected()
    run_available_now(spark, logdir, str(tmp_path / "cp"), sink,
                      maxBytesPerTrigger=str(budget))
    assert len(sink.batches) >= sum(sizes.values()) // budget
    for _, rows in sink.batches:
        touched = {key for key in sizes for _, p, o in rows
                   if key[0] == p and key[1] <= o <= key[2]}
        assert sum(sizes[key] for key in touched) <= budget
    assert sink.by_partition() == {("t", p): list(range(1500)) for p in (0, 1)}


def test_a_torn_tail_is_delivered_once_it_is_complete(spark, tmp_path):
    logdir = str(tmp_path / "logs")
    append(logdir, "t", 0, 500, batch_size=1024)
    path = last_segment(os.path.join(logdir, "t-0"))
    last = read_batches(path)[-1]
    with open(path, "rb") as handle:
        data = handle.read()
    cut = last["position"] + 20
    with open(path, "r+b") as handle:
        handle.truncate(cut)
    sink = Collected()
    query = start_query(spark, logdir, str(tmp_path / "cp"), sink)
    query.processAllAvailable()
    assert sink.by_partition() == {("t", 0): list(range(last["base_offset"]))}
    append_bytes(path, data[cut:])
    query.processAllAvailable()
    query.stop()
    assert sink.by_partition() == {("t", 0): list(range(500))}


def test_new_partitions_and_topics_matching_the_pattern_are_picked_up(spark, tmp_path):
    logdir = str(tmp_path / "logs")
    append(logdir, "orders", 0, 40)
    append(logdir, "audit", 0, 5)
    sink = Collected()
    query = start_query(spark, logdir, str(tmp_path / "cp"), sink, subscribePattern="orders.*")
    query.processAllAvailable()
    other = str(tmp_path / "other")
    append(other, "orders", 0, 10, partitions=2)
    os.rename(os.path.join(other, "orders-1"), os.path.join(logdir, "orders-1"))
    append(logdir, "orders-eu", 0, 6)
    query.processAllAvailable()
    query.stop()
    assert sink.by_partition() == {("orders", 0): list(range(40)), ("orders", 1): list(range(5)),
                                   ("orders-eu", 0): list(range(6))}


def test_data_loss_fails_the_query_or_continues_from_the_earliest(spark, tmp_path):
    """One checkpoint, three queries: a first run, then (retention having removed offsets
    it had not read) a run with failOnDataLoss=true that fails naming the loss and delivers
    nothing, then one with failOnDataLoss=false from the same checkpoint that continues
    from the earliest offset kept."""
    logdir = str(tmp_path / "logs")
    append(logdir, "t", 0, 300, segment_bytes=4096, batch_size=1024)
    checkpoint = str(tmp_path / "cp")
    sink = Collected()
    # Several micro-batches, not thirty: the loss is found where the next one would start.
    run_available_now(spark, logdir, checkpoint, sink, maxOffsetsPerTrigger="100",
                      failOnDataLoss="false")
    assert len(sink.rows()) == 300 and len(sink.batches) > 1
    # Retention removes offsets the query has not read yet; then the query runs again.
    append(logdir, "t", 300, 300, segment_bytes=4096, batch_size=1024)
    directory = os.path.join(logdir, "t-0")
    first_kept = 0
    while first_kept <= 300:
        first_kept = drop_oldest_segment(directory)
    failed = Collected()
    query = start_query(spark, logdir, checkpoint, failed, trigger={"availableNow": True},
                        failOnDataLoss="true")
    with pytest.raises(Exception) as error:
        query.awaitTermination(300)
    assert f"data loss in t-0: offsets [300, {first_kept}) can no longer be read" in str(
        error.value), "failOnDataLoss=true: the query did not fail naming the lost offsets"
    assert "failOnDataLoss=false" in str(error.value)
    assert failed.rows() == [], "failOnDataLoss=true: rows delivered past the loss"
    later = Collected()
    query = start_query(spark, logdir, checkpoint, later, trigger={"availableNow": True},
                        failOnDataLoss="false")
    assert query.awaitTermination(300)
    assert query.exception() is None, "failOnDataLoss=false: the query failed"
    assert later.by_partition() == {("t", 0): list(range(first_kept, 600))}, \
        "failOnDataLoss=false: not continued from the earliest offset kept"


def test_read_committed_waits_for_an_open_transaction(spark, kafka_logdir, kafka_logdir_copy,
                                                      tmp_path):
    sink = Collected()
    query = start_query(spark, kafka_logdir_copy, str(tmp_path / "cp"), sink,
                        subscribe="txn", isolationLevel="read_committed")
    query.processAllAvailable()
    manifest = load_manifest(kafka_logdir, "txn-0")
    committed = [r["offset"] for r in expected_rows(manifest, "read_committed")]
    assert sink.by_partition() == {("txn", 0): committed}
    assert max(committed) < 197
    append_bytes(last_segment(os.path.join(kafka_logdir_copy, "txn-0")),
                 marker_batch(COMMIT, 204, 2000, 5))
    query.processAllAvailable()
    query.stop()
    # Now the transaction of producer 2000 is committed: everything from 197 on is data.
    later = [r["offset"] for r in expected_rows(manifest, "read_uncommitted") if r["offset"] >= 197]
    assert sink.by_partition() == {("txn", 0): committed + later}
    assert len(sink.batches) == 2


def test_min_offsets_per_trigger_holds_small_appends_back(spark, tmp_path):
    logdir = str(tmp_path / "logs")
    append(logdir, "t", 0, 20)
    sink = Collected()
    query = start_query(spark, logdir, str(tmp_path / "cp"), sink,
                        minOffsetsPerTrigger="100", maxTriggerDelay="1h")
    query.processAllAvailable()  # the first micro-batch does not wait
    append(logdir, "t", 20, 30)
    query.processAllAvailable()
    assert sink.by_partition() == {("t", 0): list(range(20))}
    append(logdir, "t", 50, 70)
    query.processAllAvailable()
    query.stop()
    assert sink.by_partition() == {("t", 0): list(range(120))}
    assert [len(rows) for _, rows in sink.batches] == [20, 100]


def test_stream_options_errors_name_the_option(spark, tmp_path):
    logdir = str(tmp_path / "logs")
    append(logdir, "t", 0, 5)
    sink = Collected()
    # A batch-only option (endingOffsets) refused by a stream: test_spark_releases.py's
    # test_a_stream_with_a_refused_option_fails_with_that_error_on_one_line.
    missing = str(tmp_path / "missing")
    query = start_query(spark, missing, str(tmp_path / "cp2"), sink)
    with pytest.raises(Exception, match=f"{missing}: no such directory"):
        query.processAllAvailable()
    query.stop()
    shutil.rmtree(logdir)
