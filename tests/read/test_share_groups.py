"""Share groups' progress from `__share_group_state` (read.share_groups): the state
batches combined as Kafka's share coordinator combines them, and every share-partition of
Kafka 4.2's share-state partition replayed, checked against a replay of the manifest's
records written here offset by offset."""
import os
import random

import pytest

from segmentlog_datasource.errors import SegmentLogError
from segmentlog_datasource.read.share_groups import (
    combine_state_batches, share_group_state)
from support.fixtures import internal_topics_kafka4_root
from support.share_state import per_offset, replayed_from_manifest

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4
NAMES = {0: "AVAILABLE", 1: "ACQUIRED", 2: "ACKNOWLEDGED", 4: "ARCHIVED"}


@pytest.mark.parametrize("current,new,start,combined", [
    # a later batch in a higher state takes the offsets it overlaps
    ([(0, 10, AVAILABLE, 1)], [(5, 15, ACKNOWLEDGED, 1)], -1,
     [(0, 4, AVAILABLE, 1), (5, 15, ACKNOWLEDGED, 1)]),
    # a higher delivery count wins whatever the state
    ([(0, 10, ARCHIVED, 2)], [(5, 7, ACKNOWLEDGED, 1)], -1, [(0, 10, ARCHIVED, 2)]),
    ([(0, 10, AVAILABLE, 1)], [(3, 4, AVAILABLE, 2)], -1,
     [(0, 2, AVAILABLE, 1), (3, 4, AVAILABLE, 2), (5, 10, AVAILABLE, 1)]),
    # neighbours in one state and count join; the start offset cuts and drops
    ([(0, 4, ACKNOWLEDGED, 1)], [(5, 9, ACKNOWLEDGED, 1)], -1, [(0, 9, ACKNOWLEDGED, 1)]),
    ([(0, 4, ACKNOWLEDGED, 1), (8, 12, AVAILABLE, 1)], [], 10, [(10, 12, AVAILABLE, 1)]),
    ([], [], 5, []),
])
def test_state_batches_combine_as_the_share_coordinator_combines_them(current, new, start,
                                                                       combined):
    assert combine_state_batches(current, new, start) == combined


def test_random_state_batches_combine_offset_by_offset():
    chance = random.Random(932)
    for _ in range(400):
        batches = []
        for _ in range(chance.randint(0, 6)):
            first = chance.randint(0, 40)
            batches.append((first, first + chance.randint(0, 12),
                            chance.choice([AVAILABLE, ACKNOWLEDGED, ARCHIVED]),
                            chance.randint(1, 3)))
        split = chance.randint(0, len(batches))
        start = chance.choice([-1, chance.randint(0, 30)])
        combined = combine_state_batches(batches[:split], batches[split:], start)
        assert per_offset(combined) == per_offset(batches, start), (batches, start)
        for before, after in zip(combined, combined[1:]):
            assert before[1] < after[0]  # in order, never overlapping
            assert not (before[1] + 1 == after[0] and before[2:] == after[2:])  # joined


def test_every_share_partition_replays_as_the_share_coordinator_replays_it():
    expected = replayed_from_manifest()
    got = {(s.group, s.topic_id, s.partition): s
           for s in share_group_state([internal_topics_kafka4_root()])}
    assert sorted(got) == sorted(expected) and len(got) >= 6
    for key, state in expected.items():
        found = got[key]
        assert (found.snapshot_epoch, found.state_epoch, found.leader_epoch,
                found.start_offset, found.delivery_complete_count, found.create_timestamp,
                found.write_timestamp, found.written_at) == \
            (state["snapshotEpoch"], state["stateEpoch"], state["leaderEpoch"],
             state["startOffset"], state["deliveryCompleteCount"], state["createTimestamp"],
             state["writeTimestamp"], state["written_at"]), key
        batches = [(b["firstOffset"], b["lastOffset"],
                    {v: k for k, v in NAMES.items()}[b["deliveryState"]], b["deliveryCount"])
                   for b in found.state_batches]
        if state["offsets"] is None:  # a snapshot's batches stay as written
            assert batches == state["batches"], key
        else:
            assert per_offset(batches) == state["offsets"], key
        assert found.in_flight_records == sum(
            last - first + 1 for first, last, state_id, _ in batches if state_id in (0, 1))
    # the share-partitions' topics are not under the path: no topic name, no lag
    assert all(s.topic is None and s.lag is None for s in got.values())
    one = share_group_state([internal_topics_kafka4_root()], group=sorted(expected)[0][0])
    assert {s.group for s in one} == {sorted(expected)[0][0]}


def test_a_log_dir_without_share_state_is_an_error_naming_the_topic(tmp_path):
    with pytest.raises(SegmentLogError, match="no __share_group_state partition"):
        share_group_state([str(tmp_path)])


def test_lag_is_the_high_watermark_less_the_start_offset_and_completed_deliveries(tmp_path):
    """With the share-partition's topic under the path (its partition.metadata naming the
    topic id), each row has the topic's name, the high watermark and Kafka's lag."""
    import shutil

    import pyarrow as pa

    from segmentlog_datasource.writer import write_log

    expected = replayed_from_manifest()
    (group, topic_id, partition), state = next(
        (key, state) for key, state in sorted(expected.items())
        if state["deliveryCompleteCount"] != -1 and state["startOffset"] != -1)
    logdir = tmp_path / "logdir"
    shutil.copytree(os.path.join(internal_topics_kafka4_root(), "__share_group_state-0"),
                    logdir / "__share_group_state-0")
    end = state["startOffset"] + 500
    write_log(str(logdir), pa.table({
        "value": [b"x"] * end, "partition": pa.array([partition] * end, pa.int32())}),
        topic="orders", num_partitions=partition + 1)
    (logdir / f"orders-{partition}" / "partition.metadata").write_text(
        f"version: 0\ntopic_id: {topic_id}\n")
    rows = {(s.group, s.topic_id, s.partition): s for s in share_group_state([str(logdir)])}
    found = rows[group, topic_id, partition]
    assert (found.topic, found.high_watermark, found.lag) == \
        ("orders", end, end - state["startOffset"] - state["deliveryCompleteCount"])
