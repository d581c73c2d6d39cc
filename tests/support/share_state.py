"""An independent replay of Kafka 4.2's share-state manifest, offset by offset: the oracle
that read.share_groups is checked against."""
import json
import os

from support.fixtures import internal_topics_kafka4_root


def per_offset(batches, start_offset=-1):
    """{offset: (count, state)}: each offset's winner, the batch with the higher delivery
    count, then state; nothing below the start offset."""
    offsets = {}
    for first, last, state, count in batches:
        for offset in range(first, last + 1):
            if start_offset != -1 and offset < start_offset:
                continue
            offsets[offset] = max(offsets.get(offset, (count, state)), (count, state))
    return offsets


def as_batches(batches):
    return [(b["firstOffset"], b["lastOffset"], b["deliveryState"], b["deliveryCount"])
            for b in batches]


def replayed_from_manifest():
    """Each share-partition's state, replayed from the manifest's JSON: a snapshot as it is,
    an update as the share coordinator applies it, its batches offset by offset."""
    with open(os.path.join(internal_topics_kafka4_root(),
                           "__share_group_state-0.manifest.json")) as handle:
        records = json.load(handle)["records"]
    states = {}
    for record in records:
        key = (record["key"]["groupId"], record["key"]["topicId"], record["key"]["partition"])
        value = record["value"]
        if record["tombstone"]:
            states.pop(key, None)
        elif record["record_type_name"] == "ShareSnapshot":
            states[key] = dict(value, deliveryCompleteCount=value.get(
                "deliveryCompleteCount", -1), batches=as_batches(value["stateBatches"]),
                offsets=None, written_at=record["offset"])
        else:
            state = states[key]  # every update in the set follows its snapshot
            if value["startOffset"] != -1:
                state["startOffset"] = value["startOffset"]
            if value["leaderEpoch"] != -1:
                state["leaderEpoch"] = value["leaderEpoch"]
            state["deliveryCompleteCount"] = value.get("deliveryCompleteCount", -1)
            state["offsets"] = per_offset(state["batches"] + as_batches(value["stateBatches"]),
                                          state["startOffset"])
            state["batches"] = sorted(
                (offset, offset, state_id, count)
                for offset, (count, state_id) in state["offsets"].items())
            state["written_at"] = record["offset"]
    return states
