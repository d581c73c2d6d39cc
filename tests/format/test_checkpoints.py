"""Kafka's checkpoint files as a codec (format.checkpoints): the files Kafka wrote in the
broker-disks fixtures parse to what their text says; what the codec writes is that text."""
import os

import pytest

from segmentlog_datasource.errors import CheckpointError
from segmentlog_datasource.format import checkpoints
from support import broker_disks as disks


def fixture_bytes(*parts):
    with open(os.path.join(disks.root(), *parts), "rb") as handle:
        return handle.read()


def test_kafkas_offset_checkpoints_parse_and_format_back_byte_for_byte():
    data = fixture_bytes("broker-0", "replication-offset-checkpoint")
    parsed = checkpoints.parse_offset_checkpoint(data, "hw")
    assert {tp: entry.offset for tp, entry in parsed.items()} == {
        ("deleted", 0): 474, ("diverged", 0): 244, ("orders", 0): 439, ("orders", 1): 459,
        ("orders", 2): 501, ("txn", 0): 1754}
    assert parsed[("deleted", 0)].line == 3
    assert checkpoints.format_offset_checkpoint(
        {tp: entry.offset for tp, entry in parsed.items()}) == data
    start = fixture_bytes("broker-1", "log-start-offset-checkpoint")
    assert checkpoints.format_offset_checkpoint({("deleted", 0): 197}) == start
    assert checkpoints.parse_offset_checkpoint(fixture_bytes("broker-0", "cleaner-offset-checkpoint"),
                                               "cleaner") == {}


def test_kafkas_leader_epochs_and_partition_metadata_parse_and_format_back():
    data = fixture_bytes("broker-1", "diverged-0", "leader-epoch-checkpoint")
    entries = checkpoints.parse_leader_epochs(data, "epochs")
    assert [(e.epoch, e.start_offset) for e in entries] == [(0, 0), (1, 119), (2, 155)]
    assert checkpoints.format_leader_epochs([(0, 0), (1, 119), (2, 155)]) == data
    assert checkpoints.leader_epoch_faults(entries) == []
    metadata = fixture_bytes("broker-0", "orders-0", "partition.metadata")
    assert checkpoints.parse_partition_metadata(metadata, "pm") == "DLCYhCwcCgBj_dVDLvHVWg"
    assert checkpoints.format_partition_metadata("DLCYhCwcCgBj_dVDLvHVWg") == metadata


def test_epochs_that_do_not_grow_with_their_offsets_are_faults_with_their_lines():
    entries = checkpoints.parse_leader_epochs(b"0\n4\n0 0\n3 100\n2 150\n5 90\n", "e")
    assert checkpoints.leader_epoch_faults(entries) == [
        (5, "epoch 2 follows epoch 3: epochs must increase"),
        (6, "epoch 5 starts at offset 90, below epoch 2's start 150")]


@pytest.mark.parametrize("data,line,what", [
    (b"0\n1\n7\n", 3, "has 2 fields"),
    (b"1\n0\n", 1, "version 1"),
    (b"0\n1\n1 2\n3 4\n", 2, "says 1 entries"),
    (b"0\n1\n1 99999999999999999999\n", 3, "does not fit"),
    (b"0\n\xff\n", 2, "not text"),
])
def test_a_bad_leader_epoch_file_names_its_line(data, line, what):
    with pytest.raises(CheckpointError) as caught:
        checkpoints.parse_leader_epochs(data, "/x/t-0/leader-epoch-checkpoint")
    assert f"/x/t-0/leader-epoch-checkpoint line {line}:" in str(caught.value)
    assert what in str(caught.value) and "move the file aside" in str(caught.value)


@pytest.mark.parametrize("data,what", [
    (b"version: 1\ntopic_id: DLCYhCwcCgBj_dVDLvHVWg", "version 1"),
    (b"version: 0\ntopic: DLCYhCwcCgBj_dVDLvHVWg", "malformed line"),
    (b"version: 0\ntopic_id: not-an-id", "not a base64 UUID"),
    (b"version: 0\n", "topic_id line is missing"),
])
def test_a_bad_partition_metadata_file_is_refused(data, what):
    with pytest.raises(CheckpointError, match=what):
        checkpoints.parse_partition_metadata(data, "partition.metadata")


def test_new_topic_ids_are_22_character_base64_uuids_kafka_accepts():
    ids = {checkpoints.new_topic_id() for _ in range(200)}
    assert len(ids) == 200
    for topic_id in ids:
        assert len(checkpoints.parse_topic_id(topic_id)) == 16 and not topic_id.startswith("-")
