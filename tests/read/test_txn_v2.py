"""Transactional partitions as a transaction-version-2 (Kafka 4.x) cluster writes them:
markers carrying the bumped epoch, producer ids rolled over when an epoch runs out, an open
transaction holding the last stable offset back. Every record, marker and bound is
compared with the txn-v2 manifests (what Kafka's consumer reads)."""
import base64
import json
import os

import pytest

from segmentlog_datasource.format import discover_partitions
from support.fixtures import txn_v2_root
from support.reading import decoded_rows

PARTITIONS = ["txv2-0", "txv2-1"]


def manifest(name):
    with open(os.path.join(txn_v2_root(), name + ".manifest.json")) as handle:
        return json.load(handle)


def b64(text):
    return None if text is None else base64.b64decode(text)


def expected_row(record):
    return {
        "offset": record["offset"], "key": b64(record["key_b64"]),
        "value": b64(record["value_b64"]),
        "headers": [{"key": key, "value": b64(value)} for key, value in record["headers"]],
        "producerId": record["producer_id"], "producerEpoch": record["producer_epoch"],
        "sequence": record["sequence"], "leaderEpoch": record["partition_leader_epoch"],
        "isTransactional": record["is_transactional"], "compression": record["compression"],
        "batchOffset": record["batch_base_offset"], "segment": record["segment"],
        "position": record["position"],
        "timestamp": record["timestamp"],
    }


def got_row(row):
    picked = {name: row[name] for name in (
        "offset", "key", "value", "headers", "producerId", "producerEpoch", "sequence",
        "leaderEpoch", "isTransactional", "compression", "batchOffset", "segment",
        "position")}
    picked["timestamp"] = int(row["timestamp"].timestamp() * 1000)
    return picked


@pytest.mark.parametrize("name", PARTITIONS)
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_every_record_reads_as_a_kafka_consumer_reads_it(name, isolation):
    expected = manifest(name)
    rows = decoded_rows({"path": os.path.join(txn_v2_root(), name), "includeHeaders": "true",
                         "includeMetadata": "true", "isolationLevel": isolation})
    visible = set(expected[f"{isolation}_offsets"])
    assert [row["offset"] for row in rows] == sorted(visible)
    by_offset = {record["offset"]: record for record in expected["records"]}
    assert [got_row(row) for row in rows] == [expected_row(by_offset[row["offset"]])
                                              for row in rows]
    assert not visible & set(expected["aborted_offsets"]) or isolation == "read_uncommitted"


@pytest.mark.parametrize("name", PARTITIONS)
def test_markers_carry_the_bumped_epoch_and_the_rolled_over_producer(name):
    expected = manifest(name)
    rows = decoded_rows({"path": os.path.join(txn_v2_root(), name),
                         "includeControlRecords": "true", "includeMetadata": "true"})
    markers = [(row["offset"], row["controlType"], row["producerId"], row["producerEpoch"],
                row["coordinatorEpoch"]) for row in rows if row["controlType"] is not None]
    assert markers == [(m["offset"], m["type"], m["producer_id"], m["producer_epoch"],
                        expected["coordinator_epoch"]) for m in expected["markers"]]
    # transaction version 2: each marker's epoch is its data's plus one (an empty
    # transaction's marker has no data)
    with_data = [m for m in expected["markers"] if m["data_epoch"] is not None]
    assert with_data and all(m["producer_epoch"] == m["data_epoch"] + 1 for m in with_data)
    by_offset = {row["offset"]: row for row in rows}
    for rollover in expected["epoch_rollovers"]:
        marker = by_offset[rollover["marker_offset"]]
        assert (marker["producerId"], marker["producerEpoch"]) == \
            (rollover["producer_id"], rollover["marker_epoch"]) == \
            (rollover["producer_id"], 32767)
        later = [row for row in rows if row["offset"] > rollover["marker_offset"]
                 and row["producerId"] == rollover["next_producer_id"]]
        assert later and later[0]["producerEpoch"] == rollover["next_epoch"]


@pytest.mark.parametrize("name", PARTITIONS)
def test_the_last_stable_offset_and_the_aborted_transactions_are_kafkas(name):
    expected = manifest(name)
    (log,) = discover_partitions([os.path.join(txn_v2_root(), name)])
    assert log.end_offset(verify=True) == expected["log_end_offset"]
    assert log.last_stable_offset(verify=True) == expected["last_stable_offset"]
    assert sorted((t.producer_id, t.first_offset, t.last_offset)
                  for t in log.aborted_transactions()) == \
        sorted((t["producer_id"], t["first_offset"], t["last_offset"])
               for t in expected["aborted_txns"])
    # a read_committed read of the open transaction's partition stops at the stable offset
    committed = decoded_rows({"path": log.directory, "isolationLevel": "read_committed"})
    assert all(row["offset"] < expected["last_stable_offset"] for row in committed)


def test_one_partition_holds_an_open_transaction():
    assert not manifest("txv2-0")["open_transactions"]
    open_one = manifest("txv2-1")
    assert open_one["open_transactions"] and \
        open_one["last_stable_offset"] < open_one["high_watermark"]
