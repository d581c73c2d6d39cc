"""A tiered-storage cluster (../shared/fixtures/tiered-cluster, written by Kafka's own
classes) read as one offset space per partition: the remote segments its
__remote_log_metadata serves, then the leader's local segments; compared with the
manifest of what a consumer reads, every field, in Kafka's LocalTieredStorage layout and
laid out again as Aiven's plugin lays it out. docs/reading.md, "Tiered storage"."""
import base64
import json
import os
import shutil

import pyarrow as pa
import pytest

from support.tiered_cluster import (BROKERS, MANIFEST, METADATA, ROOT, STORE,
                                    TIERED_PARTITIONS, USER_PARTITIONS)
from support.tiered_layout import write_aiven_segment
from segmentlog_datasource import offset_range, time_range
from segmentlog_datasource.errors import CorruptLogError, SegmentLogError
from segmentlog_datasource.format.checkpoints import parse_leader_epochs
from segmentlog_datasource.format.tiered import AmbiguousLayoutError
from segmentlog_datasource.read.fragments import scan_fragments, scan_options
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.read.replicas import consumer_partitions
from segmentlog_datasource.read.tiered import OrphanRemoteUpdateWarning, TieredLog, replay

ISOLATIONS = {"read_uncommitted": "consumer_records", "read_committed": "committed_records"}


def expected(record):
    """A manifest record as the row a read gives with headers and metadata."""
    def raw(text):
        return None if text is None else base64.b64decode(text)
    return {
        "offset": record["offset"], "timestamp": record["timestamp"],
        "key": raw(record["key_b64"]), "value": raw(record["value_b64"]),
        "headers": [(key, raw(value)) for key, value in record["headers"]],
        "producerId": record["producer_id"], "producerEpoch": record["producer_epoch"],
        "sequence": record["sequence"], "leaderEpoch": record["partition_leader_epoch"],
        "isTransactional": record["is_transactional"], "compression": record["compression"],
        "magic": record["magic"], "batchOffset": record["batch_base_offset"],
        "segment": record["segment"], "position": record["position"],
    }


def read_rows(paths, partition_name, isolation="read_uncommitted", **options):
    topic, _, partition = partition_name.rpartition("-")
    read = parse_read_options({
        "paths": json.dumps(paths), "assign": json.dumps({topic: [int(partition)]}),
        "isolationLevel": isolation, "includeHeaders": "true", "includeMetadata": "true",
        **options})
    rows = []
    for batch in scan_fragments(plan_fragments(read, Constraints()), scan_options(read)):
        micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
        for row, timestamp in zip(batch.to_pylist(), micros):
            row = {name: row[name] for name in expected_keys()}
            row["timestamp"] = timestamp // 1000
            row["headers"] = [(h["key"], h["value"]) for h in row["headers"]]
            rows.append(row)
    return rows


def expected_keys():
    return ("offset", "timestamp", "key", "value", "headers", "producerId", "producerEpoch",
            "sequence", "leaderEpoch", "isTransactional", "compression", "magic",
            "batchOffset", "segment", "position")


def logs_of(paths):
    return {f"{log.topic}-{log.partition}": log for log in consumer_partitions(paths)}


@pytest.mark.parametrize("isolation", sorted(ISOLATIONS))
def test_every_partition_reads_as_a_consumer_of_the_cluster_reads_it(isolation):
    for name in USER_PARTITIONS:
        want = [expected(r) for r in MANIFEST["partitions"][name][ISOLATIONS[isolation]]]
        assert read_rows(BROKERS + [STORE], name, isolation) == want, (name, isolation)


def test_the_remote_reads_are_the_fetches_kafka_makes():
    logs = logs_of(BROKERS + [STORE])
    for name in TIERED_PARTITIONS:
        log = logs[name]
        assert isinstance(log, TieredLog)
        reads = [{"fetch_offset": r.fetch_offset, "epoch": r.epoch,
                  "remote_segment_id": r.segment.segment_id,
                  "start_offset": r.segment.start_offset, "end_offset": r.segment.end_offset}
                 for r in log.reads]
        assert reads == MANIFEST["partitions"][name]["remote_reads"], name
        partition = MANIFEST["partitions"][name]
        assert log.start_offset == partition["log_start_offset"]
        assert log.high_watermark == partition["high_watermark"]
        assert log.leader.directory == os.path.join(ROOT, partition["leader_dir"])


def segment_report(name, paths=None):
    log = logs_of(paths or BROKERS + [STORE])[name]
    return {row["segment_id"]: row for row in log.describe_remote()}


@pytest.mark.parametrize("name", TIERED_PARTITIONS)
def test_which_remote_segments_count_and_what_each_serves(name):
    report = segment_report(name)
    for segment in MANIFEST["partitions"][name]["remote_segments"]:
        row = report.pop(segment["remote_segment_id"])
        assert (row["state"], row["valid"], row["serves"], row["within_leader_epochs"],
                row["files_present"]) == (
            segment["state"], segment["valid"], segment["serves"],
            segment["within_leader_epochs"], segment["files_present"]), segment
        assert (row["start_offset"], row["end_offset"], row["leader_epochs"], row["broker"]) \
            == (segment["start_offset"], segment["end_offset"],
                segment["segment_leader_epochs"], segment["broker"])
    assert not report  # the metadata knows no segment the manifest does not list


def hard_case_ids(case):
    """(partition, segment id) of each segment a hard case of the fixture's README names."""
    found = []
    for text in MANIFEST["hard_cases"][case]:
        partition, segment_id = text.split()[:2]
        found.append((partition, segment_id))
    return found


@pytest.mark.parametrize("case,reason", [
    ("upload_never_finished", "upload never finished"),
    ("diverged_upload", "outside the leader's epoch chain"),
    ("retention_delete_started_only", "being deleted"),
])
def test_segments_that_never_serve_say_why(case, reason):
    for partition, segment_id in hard_case_ids(case):
        row = segment_report(partition)[segment_id]
        assert not row["valid"] and not row["serves"]
        if case == "diverged_upload" and row["reason"].startswith("replaced"):
            continue  # replaced at epoch 0 by the new leader's upload before the check
        assert row["reason"].startswith(reason), row


def test_a_segment_uploaded_twice_is_replaced_by_the_upload_that_covers_it():
    (partition, segment_id), = hard_case_ids("uploaded_twice")
    row = segment_report(partition)[segment_id]
    replacement = MANIFEST["hard_cases"]["uploaded_twice"][0].split("[")[1].rstrip("]")
    assert row["reason"] == f"replaced by a later upload of the same offsets ({replacement})"
    assert segment_report(partition)[replacement]["serves"]


def test_a_segment_whose_deletion_finished_is_gone_and_the_log_starts_above_it():
    (partition, segment_id), = hard_case_ids("retention_delete_finished_files_removed")
    row = segment_report(partition)[segment_id]
    assert row["state"] == "DELETE_SEGMENT_FINISHED" and not row["files_present"]
    rows = read_rows(BROKERS + [STORE], partition)
    assert rows[0]["offset"] == MANIFEST["partitions"][partition]["log_start_offset"] == 99


def test_remote_transaction_indexes_hide_aborted_records_from_read_committed():
    name = "payments-0"
    remote_aborts = {segment_id for _, segment_id in hard_case_ids("remote_txnindex_with_aborts")}
    log = logs_of(BROKERS + [STORE])[name]
    served = {segment.segment_id for segment in log.segments if segment.segment_id}
    assert remote_aborts <= served
    committed = read_rows(BROKERS + [STORE], name, "read_committed")
    everything = read_rows(BROKERS + [STORE], name)
    remote_end = log.local_start_offset
    hidden = {row["offset"] for row in everything} - {row["offset"] for row in committed}
    assert any(offset < remote_end for offset in hidden)  # aborts in the remote part count


def test_the_deleted_topic_and_the_topic_without_remote_storage():
    logs = logs_of(BROKERS + [STORE])
    assert "retired-0" not in logs
    assert not isinstance(logs["events-0"], TieredLog)


def test_lookups_by_offset_and_by_time_reach_into_the_remote_segments():
    paths = BROKERS + [STORE]
    for name in ("clicks-1", "ledger-0"):
        records = MANIFEST["partitions"][name]["consumer_records"]
        remote = [r for r in records if r["source"] == "remote"]
        probe = remote[len(remote) // 2]
        topic, _, partition = name.rpartition("-")
        rows = read_rows(paths, name, **offset_range(topic, int(partition), probe["offset"],
                                                     probe["offset"] + 3))
        assert rows == [expected(r) for r in records
                        if probe["offset"] <= r["offset"] < probe["offset"] + 3]
        # by time: the first record at or after a remote record's timestamp
        first = next(r for r in records if r["timestamp"] >= probe["timestamp"])
        rows = read_rows(paths, name, **time_range(probe["timestamp"]))
        assert rows[0]["offset"] == first["offset"]


def test_the_store_with_the_metadata_alone_reads_the_remote_part():
    for name in TIERED_PARTITIONS:
        partition = MANIFEST["partitions"][name]
        upto = partition["highest_offset_in_remote_storage"] + 1
        want = [expected(r) for r in partition["consumer_records"] if r["offset"] < upto]
        got = read_rows(METADATA + [STORE], name, readUpTo="logEnd")
        # The records are the same whichever copy holds them; where the manifest read
        # the leader's local segment, the row names that file.
        strip = [{k: v for k, v in row.items() if k not in ("segment", "position")}
                 for row in got]
        assert strip == [{k: v for k, v in row.items() if k not in ("segment", "position")}
                         for row in want], name


def test_the_store_alone_is_ambiguous_and_says_what_to_add():
    with pytest.raises(AmbiguousLayoutError, match="give the brokers' log dirs"):
        read_rows([STORE], "clicks-1")


def test_an_update_without_its_start_is_ignored_as_kafka_ignores_it_and_named():
    segment_key = {"topicIdPartition": {"name": "t", "id": "WfDcnQ1tYxp0t1HsWb763w",
                                        "partition": 0}, "id": "REq5hVu9Mm9tH7OWIpsOmQ"}
    update = {"remoteLogSegmentId": segment_key, "brokerId": 0, "eventTimestampMs": 1,
              "customMetadata": None, "remoteLogSegmentState": 1}
    with pytest.warns(OrphanRemoteUpdateWarning,
                      match=r"__remote_log_metadata-3 offset 7: COPY_SEGMENT_FINISHED for "
                            r"remote segment REq5hVu9Mm9tH7OWIpsOmQ of t-0"):
        states = replay([(3, 7, "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD", update)])
    assert not states[("WfDcnQ1tYxp0t1HsWb763w", 0)].segments


def test_a_serving_segment_missing_from_the_store_is_named(tmp_path):
    store = shutil.copytree(STORE, tmp_path / "store")
    segment = MANIFEST["partitions"]["clicks-1"]["remote_reads"][1]
    directory = os.path.join(store, os.path.basename(
        MANIFEST["partitions"]["clicks-1"]["remote_storage_dir"]))
    for name in os.listdir(directory):
        if segment["remote_segment_id"] in name:
            os.remove(os.path.join(directory, name))
    with pytest.raises(CorruptLogError, match=segment["remote_segment_id"] + ".*serves offset "
                       + str(segment["fetch_offset"])):
        read_rows(BROKERS + [str(store)], "clicks-1")


@pytest.fixture(scope="module")
def aiven_store(tmp_path_factory):
    """The remote store laid out as Aiven's plugin lays it out (compressed chunks), with a
    manifest for each upload that finished (the plugin uploads it last)."""
    root = str(tmp_path_factory.mktemp("aiven-store"))
    for name in TIERED_PARTITIONS:
        partition = MANIFEST["partitions"][name]
        source = os.path.join(ROOT, partition["remote_storage_dir"])
        prefix = f"{partition['topic']}-{partition['topic_id']}/{partition['partition']}"
        os.makedirs(os.path.join(root, prefix))
        for segment in partition["remote_segments"]:
            if not segment["files_present"]:
                continue
            stem = os.path.join(source, segment["file_stem"])
            files = {suffix: f"{stem}.{suffix}" for suffix in
                     ("log", "index", "timeindex", "txnindex", "snapshot")
                     if os.path.exists(f"{stem}.{suffix}")}
            with open(f"{stem}.leader_epoch_checkpoint", "rb") as handle:
                epochs = {e.epoch: e.start_offset for e in parse_leader_epochs(handle.read(), stem)}
            facts = {"end_offset": segment["end_offset"], "max_timestamp": segment["max_timestamp"],
                     "epochs": epochs}
            written = write_aiven_segment(root, prefix, partition["topic"], partition["topic_id"],
                                          partition["partition"], segment["start_offset"],
                                          segment["remote_segment_id"], files, facts,
                                          compression=True, chunk_size=1024,
                                          event_timestamp_ms=segment["start_offset"])
            if segment["state"] == "COPY_SEGMENT_STARTED":
                os.remove(written + ".rsm-manifest")
    return root


def test_the_same_cluster_in_aivens_layout_reads_the_same(aiven_store):
    for isolation, key in ISOLATIONS.items():
        for name in USER_PARTITIONS:
            want = [expected(r) for r in MANIFEST["partitions"][name][key]]
            got = read_rows(BROKERS + [aiven_store], name, isolation)
            assert [{k: v for k, v in row.items() if k != "position"} for row in got] == \
                [{k: v for k, v in row.items() if k != "position"} for row in want], name


def test_the_metadata_is_required_where_the_brokers_hold_the_partition_too(tmp_path):
    brokers = []
    for broker in BROKERS:
        copy = tmp_path / os.path.basename(broker)
        shutil.copytree(broker, copy, ignore=shutil.ignore_patterns("__remote_log_metadata-*"))
        brokers.append(str(copy))
    with pytest.raises(SegmentLogError, match="no __remote_log_metadata partition"):
        read_rows(brokers + [STORE], "ledger-0")


def test_where_the_store_and_the_leaders_disk_overlap_each_offset_is_read_once_locally():
    logs = logs_of(BROKERS + [STORE])
    for text in MANIFEST["hard_cases"]["remote_local_overlap"]:
        name = text.split()[0]
        partition = MANIFEST["partitions"][name]
        local_start = partition["local_log_start_offset"]
        # the store holds segments past the leader's local log start ...
        assert partition["highest_offset_in_remote_storage"] >= local_start
        report = segment_report(name)
        above = [row for row in report.values() if row["start_offset"] >= local_start
                 and row["state"] == "COPY_SEGMENT_FINISHED"]
        assert above and all(not row["serves"] for row in above), name
        # ... and from there the leader's disk serves, each offset once
        assert logs[name].local_start_offset == local_start
        rows = read_rows(BROKERS + [STORE], name)
        offsets = [row["offset"] for row in rows]
        assert offsets == sorted(set(offsets))
        assert {row["segment"] for row in rows if row["offset"] >= local_start} <= {
            name for name in os.listdir(os.path.join(ROOT, partition["leader_dir"]))}


def test_retention_moved_the_log_start_into_the_store():
    (text,) = MANIFEST["hard_cases"]["log_start_moved_by_retention"]
    name, start = text.split()[0], int(text.split()[-1])
    log = logs_of(BROKERS + [STORE])[name]
    assert log.start_offset == start < log.local_start_offset
    assert read_rows(BROKERS + [STORE], name)[0]["offset"] == start


def test_a_partition_whose_metadata_partition_is_not_given_is_named():
    partition = MANIFEST["partitions"]["ledger-0"]
    metadata = [path for path in METADATA if not path.endswith(
        f"-{partition['remote_log_metadata_partition']}")]
    assert len(metadata) == len(METADATA) - 1
    with pytest.raises(SegmentLogError, match="ledger-0 .*no __remote_log_metadata record "
                                              "read names it"):
        read_rows(metadata + [STORE], "ledger-0")
