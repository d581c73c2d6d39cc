"""Damaged records of Kafka's internal topics, decoded by segmentlog and by an independent
reader of what Kafka's own code does with them (kafka_reader.py), and the two compared
(issue #46; docs/metadata.md, "Kafka's internal topics as tables").

The records are every record of the fixtures' internal topics: `__consumer_offsets`,
`__transaction_state` and `__cluster_metadata` (its log and its snapshots) of the
internal-topics (Kafka 3.9) and internal-topics-kafka4 (Kafka 4.2) sets,
`__share_group_state` of the latter, `__remote_log_metadata` of the tiered-cluster set.
A case takes one of them and damages its key or value bytes (never a segment: the bytes
reach the decoders as a batch with a recomputed checksum would deliver them):

- "flip": one byte XORed with a random mask; "set": one byte set to 0x00, 0x7f, 0x80 or
  0xff; "cut": the bytes cut short; "append": 1 to 4 random bytes added after them;
  "insert" / "delete": a byte put in or taken out in the middle;
- "length": a length, array count, tagged-field count, tag or size, version or frame
  field (found by the independent reader) written with another value: -1, 0, one more or
  less, a large one, 0x7fff + 1, or random, in its own encoding (a varint may grow or
  shrink).

The oracle, for each case: both refuse the record, or both read it alike (record type,
key, value version, every field with its value; the fields segmentlog adds to a value, a
transaction's state name and a classic group's decoded protocol bytes, left out), or both
skip it (a coordinator record of a type Kafka's loader does not know). One difference is
segmentlog's on purpose: a metadata record whose api key Kafka 4.2 has no record type for,
which Kafka's serde refuses, is a row of type UNKNOWN_<n> with nothing decoded (a newer
Kafka's record type), counted apart as "unknown type kept".
"""
import base64
import json
import math
import os
import random
import struct
from collections import namedtuple

from segmentlog_datasource.errors import RecordDecodeError
from segmentlog_datasource.format.internal.registry import internal_topics

from . import kafka_reader
from .fixtures import internal_topics_kafka4_root, internal_topics_root, tiered_cluster_root

Seed = namedtuple("Seed", "source topic key value label")

SETS = (("kafka-3.9", internal_topics_root), ("kafka-4.2", internal_topics_kafka4_root))
REMOTE_TOPIC = "__remote_log_metadata"
TIERED_BROKERS = ("broker-0", "broker-1", "broker-2")
MUTATIONS = ("flip", "set", "cut", "append", "insert", "delete", "length")


def _bytes(text):
    return None if text is None else base64.b64decode(text)


def _label(topic, key, value):
    """A seed's stratum: topic, record type and value version (as Kafka reads it)."""
    outcome = kafka_reader.read_record(topic, key, value)
    assert outcome.kind in ("record", "tombstone"), (topic, outcome)
    kind = "tombstone" if outcome.kind == "tombstone" else f"v{outcome.value_version}"
    return f"{topic} {outcome.record_type} {kind}"


def load_seeds():
    """Every record of the fixtures' internal topics, undamaged."""
    seeds = []
    for kafka, root in SETS:
        root = root()
        for name in sorted(os.listdir(root)):
            if not name.endswith(".manifest.json"):
                continue
            topic = name[:-len(".manifest.json")].rsplit("-", 1)[0]
            with open(os.path.join(root, name)) as handle:
                manifest = json.load(handle)
            records = list(manifest["records"])
            for snapshot in manifest.get("snapshots", ()):
                records += snapshot["records"]
            for record in records:
                key, value = _bytes(record["key_b64"]), _bytes(record["value_b64"])
                source = f"{kafka} {name[:-len('.manifest.json')]} offset {record['offset']}"
                seeds.append(Seed(source, topic, key, value, _label(topic, key, value)))
    from .reading import read_values  # reading needs the package only here

    tiered = tiered_cluster_root()
    for broker in TIERED_BROKERS:
        found = read_values(os.path.join(tiered, broker), subscribe=REMOTE_TOPIC)
        for (topic, partition), values in sorted(found.items()):
            for index, value in enumerate(values):
                seeds.append(Seed(f"tiered-cluster {broker} {topic}-{partition} #{index}",
                                  topic, None, value, _label(topic, None, value)))
    return seeds


def strata(seeds):
    """{label: [seeds]}, in label order."""
    found = {}
    for seed in seeds:
        found.setdefault(seed.label, []).append(seed)
    return dict(sorted(found.items()))


# ------------------------------------------------------------------ damage

def _uvarint(value):
    value &= 0xFFFFFFFF
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _rewrite(data, start, end, kind, rng):
    """`data` with the site [start, end) of `kind` holding another value."""
    old = data[start:end]
    if kind in ("int16", "version"):
        current = struct.unpack(">h", old)[0]
    elif kind == "int32":
        current = struct.unpack(">i", old)[0]
    else:
        current = kafka_reader._Buffer(old).read_unsigned_varint()
        if kind == "compact":
            current -= 1
    choice = rng.choice(["null", "zero", "more", "less", "large", "short_max", "random"])
    value = {"null": -1, "zero": 0, "more": current + 1, "less": current - 1,
             "large": rng.choice([1 << 20, (1 << 31) - 1, 1 << 15]),
             "short_max": 0x7FFF + 1, "random": rng.randint(-5, 300)}[choice]
    if kind in ("int16", "version"):
        new = struct.pack(">h", max(-32768, min(32767, value)))
    elif kind == "int32":
        new = struct.pack(">i", max(-(1 << 31), min((1 << 31) - 1, value)))
    elif kind == "compact":
        new = _uvarint(value + 1)
    else:
        new = _uvarint(value)
    return data[:start] + new + data[end:], f"{kind} at {start} {current} -> {value}"


def damage(seed, rng):
    """(key, value, what was done) of `seed` damaged once."""
    parts = {"value": seed.value} if seed.key is None else \
        {"key": seed.key, "value": seed.value}
    if seed.value is None:
        parts.pop("value")
    mutation = rng.choice(MUTATIONS)
    if mutation == "length":
        sites = kafka_reader.length_sites(seed.topic, seed.key, seed.value)
        choices = [(part, site) for part in parts for site in sites.get(part, ())]
        if choices:
            part, (start, end, kind) = rng.choice(choices)
            data, what = _rewrite(parts[part], start, end, kind, rng)
            return _with(seed, part, data, f"{part}: length {what}")
        mutation = "flip"
    part = rng.choice(sorted(parts)) if rng.random() < 0.2 else \
        ("value" if "value" in parts else "key")
    data = parts[part]
    if not data:
        return _with(seed, part, data + bytes([rng.randrange(256)]), f"{part}: append to empty")
    at = rng.randrange(len(data))
    if mutation == "flip":
        mask = rng.randrange(1, 256)
        new = data[:at] + bytes([data[at] ^ mask]) + data[at + 1:]
        what = f"flip byte {at} ^ 0x{mask:02x}"
    elif mutation == "set":
        byte = rng.choice([0x00, 0x7F, 0x80, 0xFF])
        new = data[:at] + bytes([byte]) + data[at + 1:]
        what = f"set byte {at} = 0x{byte:02x}"
    elif mutation == "cut":
        new, what = data[:at], f"cut to {at} of {len(data)} bytes"
    elif mutation == "append":
        extra = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        new, what = data + extra, f"append {extra.hex()}"
    elif mutation == "insert":
        byte = rng.randrange(256)
        new, what = data[:at] + bytes([byte]) + data[at:], f"insert 0x{byte:02x} at {at}"
    else:
        new, what = data[:at] + data[at + 1:], f"delete byte {at}"
    return _with(seed, part, new, f"{part}: {what}")


def _with(seed, part, data, what):
    key = data if part == "key" else seed.key
    value = data if part == "value" else seed.value
    return key, value, what


# ------------------------------------------------------------------ the oracle

_TOPICS = {topic.topic: topic for topic in internal_topics().values()}
DERIVED = {"TransactionLog": ("state",)}  # fields segmentlog adds to a value
MEMBER_DERIVED = ("subscriptionDecoded", "assignmentDecoded")


def segmentlog_outcome(topic, key, value):
    """segmentlog's decoding as an Outcome of kafka_reader's kinds."""
    try:
        record = _TOPICS[topic].decode(key, value)
    except RecordDecodeError as error:
        return kafka_reader.Outcome("refused", None, None, None, None, str(error))
    if not record.known:
        return kafka_reader.Outcome("unknown", record.record_type, None, None, None, None)
    if record.deleted:
        return kafka_reader.Outcome("tombstone", record.record_type, record.key, None, None,
                                    None)
    return kafka_reader.Outcome("record", record.record_type, record.key,
                                record.value_version, _without_derived(record), None)


def _without_derived(record):
    value = {name: item for name, item in record.value.items()
             if name not in DERIVED.get(record.record_type, ())}
    if record.record_type == "GroupMetadata" and value.get("members"):
        value["members"] = [{name: item for name, item in member.items()
                             if name not in MEMBER_DERIVED} for member in value["members"]]
    return value


def _comparable(value):
    """NaN equal to itself: floats by their bits."""
    if isinstance(value, float):
        return ("float", struct.pack(">d", value)) if math.isnan(value) else value
    if isinstance(value, dict):
        return {name: _comparable(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_comparable(item) for item in value]
    return value


def judge(topic, key, value):
    """(verdict, Kafka's outcome, segmentlog's outcome): the verdict is one of AGREED's or
    a failure's name."""
    kafka = kafka_reader.read_record(topic, key, value)
    ours = segmentlog_outcome(topic, key, value)
    if kafka.kind == "unknown-type":  # refused by Kafka's serde
        if ours.kind == "refused":
            verdict = "both refuse"
        elif ours.kind == "unknown" and topic == "__cluster_metadata" and \
                ours.record_type == f"UNKNOWN_{kafka.record_type}":
            verdict = "unknown type kept"
        else:
            verdict = "segmentlog reads what Kafka refuses"
    elif kafka.kind == "refused":
        verdict = "both refuse" if ours.kind == "refused" else \
            "segmentlog reads what Kafka refuses"
    elif ours.kind == "refused":
        verdict = "segmentlog refuses what Kafka reads"
    elif kafka.kind == "skipped":
        verdict = "both skip" if ours.kind == "unknown" else "segmentlog decodes what Kafka skips"
    elif ours.kind != kafka.kind:
        verdict = f"Kafka gives a {kafka.kind}, segmentlog a {ours.kind}"
    elif (ours.record_type, _comparable(ours.key), ours.value_version,
          _comparable(ours.value)) != (kafka.record_type, _comparable(kafka.key),
                                       kafka.value_version, _comparable(kafka.value)):
        verdict = "values differ"
    else:
        verdict = "both read alike"
    return verdict, kafka, ours


AGREED = ("both refuse", "both read alike", "both skip", "unknown type kept")


def run_cases(seed, count, seeds=None):
    """`count` cases from random seed `seed`, the strata taken in turn: a list of
    (verdict, case description, Kafka's outcome, segmentlog's)."""
    by_label = strata(seeds if seeds is not None else load_seeds())
    labels = list(by_label)
    rng = random.Random(seed)
    results = []
    for number in range(count):
        record = rng.choice(by_label[labels[number % len(labels)]])
        key, value, what = damage(record, rng)
        verdict, kafka, ours = judge(record.topic, key, value)
        case = {"record": record.source, "label": record.label, "damage": what,
                "key": None if key is None else key.hex(),
                "value": None if value is None else value.hex()}
        results.append((verdict, case, kafka, ours))
    return results
