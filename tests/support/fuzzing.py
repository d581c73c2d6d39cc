"""Fuzzing damaged segment logs: the mutation model, the oracle, and a runner that
survives crashes and hangs (issue #9, "Robustness").

A case copies one partition directory of the Kafka-written fixtures (never the fixtures
themselves), damages the copy (bytes of a `.log` written over, biased toward the fields
of batch headers and the records after them; a `.log` cut short, or followed by garbage
or zeros; entries of `.index`, `.timeindex` and `.txnindex` moved off batch boundaries,
out of order, past the log's end, or cut to a size that is not whole entries), and reads
it as Spark's reader does (parse_read_options, plan_fragments, scan_fragments) with
verifyChecksums on, with the compiled and the pure decoder, read_uncommitted or
read_committed, the whole partition or an offset range (startingOffsets/endingOffsets),
or, when only an `.index` or `.timeindex` is damaged, from a startingTimestamp.

The oracle accepts, for each read, only:

a) a SegmentLogError naming an existing file of the damaged partition (or the partition
   directory); a CorruptLogError carries it as `.path`, its message contains it, and for a
   `.log` its `.position` is a byte position within the file;
b) the rows Kafka's reader gives for the undamaged log (the manifest's), in the range;
   for a start by timestamp (the manifests hold no offsetsForTimes answers), the rows the
   reader gives for the undamaged partition;
c) when the damage is in the last (active) segment's `.log`: the rows of the log up to
   the damaged entry, exactly, and only where the README's end rule lets the data end
   there: the entry at that position is short (fewer bytes left than its 17-byte prefix
   or its length), zero-filled, cannot be framed (a length too small for its magic, an
   unknown magic, a negative lastOffsetDelta or record count), or fails its checksum
   while nothing framed follows it. With an explicit offset range, a data-loss error
   ("outside the log") is then right too when the range reaches past the shorter log.

Damage that no reader can detect, because what is left is a valid log, is accepted with
the rows that valid log holds, and only that:

- an entry's offset field (a magic-2 baseOffset, a magic-0/1 message offset) moved to a
  value whose offsets still lie between the entry before and the entry after it (the
  segment's base offset before the first, the next segment's base offset after the
  last, nothing after the last entry of the partition). No CRC covers these bytes, and
  offset gaps are normal (compaction). This includes the known case of the last batch
  of the partition moved forward.
- a segment other than the last cut exactly at an entry boundary: a valid, shorter
  segment, which an offset gap before the next segment cannot tell from compaction.

Bytes outside every checksum that no row shows (partitionLeaderEpoch) give (b). Anything
else (rows that differ, an error of another type or without file and position, a crash
of the process, a read that does not finish) is a failing case, reported with its
reproducer: the case as JSON (partition, edits, reads), which `tests/fuzz_segments.py
--replay` runs again.
"""
import json
import os
import random
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TESTS_DIR not in sys.path:  # the worker process imports support.* by this path
    sys.path.insert(0, TESTS_DIR)

from support.fixtures import fixtures_root  # noqa: E402
from support.manifest import expected_row, load_manifest, partition_names  # noqa: E402

SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")
OFFSET_ENTRY, TIME_ENTRY, TXN_ENTRY = struct.Struct(">ii"), struct.Struct(">qi"), \
    struct.Struct(">hqqqq")
INT_FORMATS = {1: ">b", 2: ">h", 4: ">i", 8: ">q"}
# (name, position, size) of the header fields, from Kafka's RecordBatch and Message.
V2_FIELDS = (("baseOffset", 0, 8), ("batchLength", 8, 4), ("partitionLeaderEpoch", 12, 4),
             ("magic", 16, 1), ("crc", 17, 4), ("attributes", 21, 2),
             ("lastOffsetDelta", 23, 4), ("baseTimestamp", 27, 8), ("maxTimestamp", 35, 8),
             ("producerId", 43, 8), ("producerEpoch", 51, 2), ("baseSequence", 53, 4),
             ("recordCount", 57, 4))
V2_HEADER_SIZE = 61
LEGACY_FIELDS = {0: (("offset", 0, 8), ("messageSize", 8, 4), ("crc", 12, 4), ("magic", 16, 1),
                     ("attributes", 17, 1), ("keyLength", 18, 4)),
                 1: (("offset", 0, 8), ("messageSize", 8, 4), ("crc", 12, 4), ("magic", 16, 1),
                     ("attributes", 17, 1), ("timestamp", 18, 8), ("keyLength", 26, 4))}
LEGACY_HEADER_SIZE = {0: 22, 1: 30}
# The README's end rule: the smallest length each magic can frame (bytes after the length).
MIN_ENTRY_LENGTH = {0: 14, 1: 22, 2: V2_HEADER_SIZE - 12}
RESULT_MARK = "FUZZRESULT "


# ----------------------------------------------------------------- the pristine fixtures
@dataclass
class Batch:
    """A manifest batch with where it lies: `index` in log order, its segment's number."""
    index: int
    segment: int
    info: dict

    @property
    def position(self) -> int:
        return self.info["position"]

    @property
    def end(self) -> int:
        return self.info["position"] + self.info["size_in_bytes"]


@dataclass
class Partition:
    """One fixture partition: its manifest, file bytes and batches in log order."""
    name: str
    directory: str
    manifest: dict
    files: Dict[str, bytes]
    batches: List[Batch]
    aborted: frozenset  # indexes of batches of aborted transactions (by their markers)
    segment_files: List[str] = field(default_factory=list)  # .log names in order

    @property
    def topic(self) -> str:
        return self.manifest["topic"]

    @property
    def partition(self) -> int:
        return self.manifest["partition"]

    @property
    def last_log(self) -> str:
        return self.segment_files[-1]

    def segment_batches(self, segment: int) -> List[Batch]:
        return [b for b in self.batches if b.segment == segment]

    def segment_of(self, file_name: str) -> int:
        base = int(file_name.split(".")[0])
        return [s["base_offset"] for s in self.manifest["segments"]].index(base)


def load_partition(root: str, name: str) -> Partition:
    manifest = load_manifest(root, name)
    directory = os.path.join(root, name)
    files = {}
    for file_name in sorted(os.listdir(directory)):
        if file_name.endswith(SEGMENT_SUFFIXES):
            with open(os.path.join(directory, file_name), "rb") as handle:
                files[file_name] = handle.read()
    batches = []
    for number, segment in enumerate(manifest["segments"]):
        for info in segment["batches"]:
            batches.append(Batch(len(batches), number, info))
    return Partition(name, directory, manifest, files, batches, _aborted_batches(batches),
                     [s["log_file"] for s in manifest["segments"]])


def _aborted_batches(batches: List[Batch]) -> frozenset:
    """Transactional data batches whose producer's next marker is an ABORT (Kafka's rule)."""
    aborted, pending = set(), {}
    for batch in batches:
        info = batch.info
        if not info["is_transactional"]:
            continue
        if info["is_control"]:
            members = pending.pop(info["producer_id"], [])
            if info["control"]["type"] == "ABORT":
                aborted.update(members)
        else:
            pending.setdefault(info["producer_id"], []).append(batch.index)
    return frozenset(aborted)


class Fixtures:
    """The fixture partitions, loaded once each."""

    def __init__(self, root: Optional[str] = None):
        self.root = root or fixtures_root()
        self.names = partition_names(self.root)
        self._loaded: Dict[str, Partition] = {}

    def __getitem__(self, name: str) -> Partition:
        if name not in self._loaded:
            self._loaded[name] = load_partition(self.root, name)
        return self._loaded[name]


# ----------------------------------------------------------------- sources of choices
class RandomChooser:
    """Choices from a seeded random generator (the script's mutation model)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def blob(self, size: int) -> bytes:
        return self.rng.randbytes(size)


class HypothesisChooser:
    """Choices drawn by hypothesis (the CI test), so it can replay and vary them."""

    def __init__(self, data):
        from hypothesis import strategies

        self.data, self.strategies = data, strategies

    def integer(self, low: int, high: int) -> int:
        return self.data.draw(self.strategies.integers(low, high))

    def blob(self, size: int) -> bytes:
        return self.data.draw(self.strategies.binary(min_size=size, max_size=size))


class AtherisChooser:
    """Choices taken from atheris' input bytes (coverage-guided runs)."""

    def __init__(self, provider):
        self.provider = provider

    def integer(self, low: int, high: int) -> int:
        return self.provider.ConsumeIntInRange(low, high)

    def blob(self, size: int) -> bytes:
        return self.provider.ConsumeBytes(size).ljust(size, b"\0")


def pick(chooser, options):
    return options[chooser.integer(0, len(options) - 1)]


def weighted(chooser, pairs):
    total = sum(weight for weight, _ in pairs)
    roll = chooser.integer(0, total - 1)
    for weight, value in pairs:
        if roll < weight:
            return value
        roll -= weight
    raise AssertionError("unreachable")


# ------------------------------------------------------------------ the mutation model
def _write(file_name, position, data: bytes) -> dict:
    return {"file": file_name, "op": "write", "position": position, "data": data.hex()}


def _resize(file_name, size) -> dict:
    return {"file": file_name, "op": "resize", "size": size}


def _append(file_name, data: bytes) -> dict:
    return {"file": file_name, "op": "append", "data": data.hex()}


def _int_values(chooser, old: int, size: int, others: List[int]) -> int:
    """An interesting replacement for an integer field of `size` bytes holding `old`."""
    bits = size * 8
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    value = weighted(chooser, [
        (4, lambda: old ^ (1 << chooser.integer(0, bits - 1))),
        (2, lambda: old + pick(chooser, [1, -1, 2, -2])),
        (2, lambda: old + chooser.integer(-1000, 1000)),
        (2, lambda: pick(chooser, [0, 1, -1, low, high])),
        (2, lambda: pick(chooser, others) if others else old + 1),
        (1, lambda: chooser.integer(low, high)),
    ])()
    return (value - low) % (1 << bits) + low  # wrapped into the field, as bytes hold it


def _field_of(batch_info, data, field_spec) -> int:
    name, offset, size = field_spec
    return struct.unpack_from(INT_FORMATS[size], data, batch_info["position"] + offset)[0]


def mutate_header_field(chooser, part: Partition, file_name: str, batches: List[Batch]):
    batch = pick(chooser, batches)
    magic = batch.info["magic"]
    fields = V2_FIELDS if magic == 2 else LEGACY_FIELDS[magic]
    spec = pick(chooser, fields)
    name, offset, size = spec
    data = part.files[file_name]
    old = _field_of(batch.info, data, spec)
    others = [_field_of(b.info, data, spec) for b in batches if b.info["magic"] == magic]
    new = _int_values(chooser, old, size, others)
    position = batch.position + offset
    return (f"{name} of the entry at byte {batch.position} of {file_name}: {old} -> {new}",
            [_write(file_name, position, struct.pack(INT_FORMATS[size], new))])


def mutate_record_bytes(chooser, part: Partition, file_name: str, batches: List[Batch]):
    batch = pick(chooser, batches)
    header = V2_HEADER_SIZE if batch.info["magic"] == 2 else LEGACY_HEADER_SIZE[batch.info["magic"]]
    if batch.info["size_in_bytes"] <= header:
        return mutate_header_field(chooser, part, file_name, batches)
    position = chooser.integer(batch.position + header, batch.end - 1)
    old = part.files[file_name][position]
    data = weighted(chooser, [
        (4, lambda: bytes([old ^ (1 << chooser.integer(0, 7))])),
        (2, lambda: bytes([pick(chooser, [0x00, 0xFF, 0x7F, 0x80, 0x01])])),
        (2, lambda: chooser.blob(chooser.integer(1, 8))),
        (1, lambda: bytes([(old + pick(chooser, [1, -1])) & 0xFF])),
    ])()
    data = data[:batch.end - position]
    return (f"{len(data)} byte(s) at {position} inside the records of the entry at byte "
            f"{batch.position} of {file_name}", [_write(file_name, position, data)])


def mutate_any_byte(chooser, part: Partition, file_name: str, batches: List[Batch]):
    data = part.files[file_name]
    if not data:
        return mutate_append(chooser, part, file_name, batches)
    position = chooser.integer(0, len(data) - 1)
    new = bytes([data[position] ^ (1 << chooser.integer(0, 7))])
    return (f"bit flip at byte {position} of {file_name}", [_write(file_name, position, new)])


def mutate_truncate(chooser, part: Partition, file_name: str, batches: List[Batch]):
    size = len(part.files[file_name])
    if batches:
        batch = pick(chooser, batches)
        size = weighted(chooser, [
            (3, lambda: batch.position),  # exactly at an entry boundary
            (2, lambda: batch.position + chooser.integer(1, 16)),  # inside its prefix
            (3, lambda: chooser.integer(batch.position, batch.end - 1)),
            (1, lambda: batch.end - 1),
            (1, lambda: chooser.integer(0, max(0, len(part.files[file_name]) - 1))),
        ])()
    else:
        size = chooser.integer(0, max(0, size - 1))
    size = min(size, max(0, len(part.files[file_name]) - 1))
    return f"{file_name} cut to {size} bytes", [_resize(file_name, size)]


def mutate_append(chooser, part: Partition, file_name: str, batches: List[Batch]):
    data = part.files[file_name]
    kind = weighted(chooser, [(3, "zeros"), (3, "garbage"), (2, "old entry"), (2, "torn entry")])
    if kind == "zeros":
        size = len(data) + pick(chooser, [1, 16, 17, 61, chooser.integer(1, 70_000)])
        return f"{file_name} extended with zeros to {size} bytes", [_resize(file_name, size)]
    if kind == "garbage" or not batches:
        garbage = chooser.blob(chooser.integer(1, 96))
        return f"{len(garbage)} random bytes appended to {file_name}", [_append(file_name, garbage)]
    batch = pick(chooser, batches)
    whole = data[batch.position:batch.end]
    if kind == "torn entry":
        whole = whole[:chooser.integer(1, len(whole) - 1)]
    return (f"{len(whole)} bytes of the entry at byte {batch.position} appended to {file_name}",
            [_append(file_name, whole)])


def _index_entries(data: bytes, entry: struct.Struct) -> int:
    """Real entries of an index: the whole entries before the zero-filled tail."""
    count = len(data) // entry.size
    while count and not any(data[(count - 1) * entry.size:count * entry.size]):
        count -= 1
    return count


def mutate_offset_index(chooser, part: Partition, file_name: str, batches: List[Batch]):
    log_name = file_name.replace(".index", ".log")
    data, log_size = part.files[file_name], len(part.files[log_name])
    entries = _index_entries(data, OFFSET_ENTRY)
    base = int(file_name.split(".")[0])
    boundaries = [b.position for b in batches] or [0]

    def off_boundary():
        batch = pick(chooser, batches) if batches else None
        return batch.position + chooser.integer(1, batch.info["size_in_bytes"] - 1) \
            if batch else chooser.integer(1, 100)

    def new_entry():
        batch = pick(chooser, batches) if batches else None
        relative = (batch.info["last_offset"] - base) if batch else chooser.integer(0, 100)
        position = weighted(chooser, [(2, lambda: off_boundary()), (2, lambda: pick(chooser, boundaries)),
                                      (1, lambda: log_size + chooser.integer(0, 5000))])()
        return relative + chooser.integer(-2, 2), position

    if not entries:
        relative, position = new_entry()
        at = 0 if not data else chooser.integer(0, len(data) // 8 - 1) * 8
        return (f"entry ({relative}, {position}) written at byte {at} of {file_name}",
                [_write(file_name, at, OFFSET_ENTRY.pack(relative, position))])
    i = chooser.integer(0, entries - 1)
    at = i * 8
    relative, position = OFFSET_ENTRY.unpack_from(data, at)
    kind = weighted(chooser, [(3, "off boundary"), (2, "other boundary"), (2, "past the end"),
                              (2, "offset"), (2, "swap"), (2, "cut"), (1, "zero"), (1, "append")])
    if kind == "off boundary":
        position = off_boundary()
    elif kind == "other boundary":
        position = pick(chooser, boundaries)
    elif kind == "past the end":
        position = log_size + chooser.integer(0, 5000)
    elif kind == "offset":
        relative = _int_values(chooser, relative, 4, [])
    elif kind == "swap":
        j = (i + chooser.integer(1, entries)) % entries
        if j == i:  # a lone entry: out of order with the log instead
            relative += 1
        else:
            first, second = data[at:at + 8], data[j * 8:j * 8 + 8]
            return (f"entries {i} and {j} of {file_name} swapped",
                    [_write(file_name, at, second), _write(file_name, j * 8, first)])
    elif kind == "cut":
        size = chooser.integer(0, len(data) - 1)
        if size % 8 == 0:
            size += chooser.integer(1, 7) if size + 7 < len(data) else -1
        return f"{file_name} cut to {max(size, 0)} bytes", [_resize(file_name, max(size, 0))]
    elif kind == "zero":
        return f"entry {i} of {file_name} zeroed", [_write(file_name, at, bytes(8))]
    elif kind == "append":
        new = OFFSET_ENTRY.pack(*new_entry())
        tail = new[:chooser.integer(1, 8)]
        return (f"{len(tail)} bytes of an entry appended to {file_name}",
                [_write(file_name, entries * 8, tail)] if entries * 8 < len(data)
                else [_append(file_name, tail)])
    return (f"entry {i} of {file_name} ({kind}) set to ({relative}, {position})",
            [_write(file_name, at, OFFSET_ENTRY.pack(relative, position))])


def mutate_time_index(chooser, part: Partition, file_name: str, batches: List[Batch]):
    data = part.files[file_name]
    entries = _index_entries(data, TIME_ENTRY)
    if not entries:
        entry = TIME_ENTRY.pack(1_700_000_000_000 + chooser.integer(-10**6, 10**7),
                                chooser.integer(-5, 500))
        return (f"an entry written into {file_name}",
                [_write(file_name, 0, entry)] if data else [_append(file_name, entry)])
    i = chooser.integer(0, entries - 1)
    at = i * 12
    timestamp, relative = TIME_ENTRY.unpack_from(data, at)
    kind = weighted(chooser, [(3, "timestamp"), (3, "offset"), (2, "swap"), (2, "cut"),
                              (1, "append")])
    if kind == "timestamp":
        timestamp = _int_values(chooser, timestamp, 8, [])
    elif kind == "offset":
        relative = _int_values(chooser, relative, 4, [])
    elif kind == "swap" and entries == 1:
        relative += 1
    elif kind == "swap":
        j = (i + 1) % entries
        return (f"entries {i} and {j} of {file_name} swapped",
                [_write(file_name, at, data[j * 12:j * 12 + 12]),
                 _write(file_name, j * 12, data[at:at + 12])])
    elif kind == "cut":
        size = chooser.integer(0, len(data) - 1)
        size = size if size % 12 else size + 5
        return f"{file_name} cut to {min(size, len(data) - 1)} bytes", \
            [_resize(file_name, min(size, len(data) - 1))]
    elif kind == "append":
        tail = chooser.blob(chooser.integer(1, 12))
        return f"{len(tail)} bytes appended to {file_name}", [_append(file_name, tail)]
    return (f"entry {i} of {file_name} ({kind}) set to ({timestamp}, {relative})",
            [_write(file_name, at, TIME_ENTRY.pack(timestamp, relative))])


def mutate_txn_index(chooser, part: Partition, file_name: str, batches: List[Batch]):
    data = part.files[file_name]
    entries = len(data) // TXN_ENTRY.size
    i = chooser.integer(0, entries - 1)
    at = i * TXN_ENTRY.size
    fields = list(TXN_ENTRY.unpack_from(data, at))
    kind = weighted(chooser, [(4, "field"), (2, "cut"), (1, "append")])
    if kind == "cut":
        size = chooser.integer(0, len(data) - 1)
        return f"{file_name} cut to {size} bytes", [_resize(file_name, size)]
    if kind == "append":
        tail = data[at:at + chooser.integer(1, TXN_ENTRY.size)]
        return f"{len(tail)} bytes of entry {i} appended to {file_name}", [_append(file_name, tail)]
    names = ("version", "producerId", "firstOffset", "lastOffset", "lastStableOffset")
    which = chooser.integer(0, 4)
    fields[which] = _int_values(chooser, fields[which], 2 if which == 0 else 8,
                                [b.info["producer_id"] for b in batches] if which == 1 else [])
    return (f"{names[which]} of entry {i} of {file_name} set to {fields[which]}",
            [_write(file_name, at, TXN_ENTRY.pack(*fields))])


LOG_MUTATIONS = ((30, mutate_header_field), (20, mutate_record_bytes), (8, mutate_any_byte),
                 (10, mutate_truncate), (8, mutate_append))


def draw_mutation(chooser, part: Partition) -> Tuple[str, List[dict]]:
    segments = len(part.segment_files)
    # The last segment has its own end rule: give it a good share of the damage.
    segment = weighted(chooser, [(2, segments - 1), (3, -1)])
    if segment < 0:
        segment = chooser.integer(0, segments - 1)
    log_name = part.segment_files[segment]
    batches = part.segment_batches(segment)
    stem = log_name[:-len(".log")]
    choices = [(weight, (mutate, log_name)) for weight, mutate in LOG_MUTATIONS]
    if stem + ".index" in part.files:
        choices.append((12, (mutate_offset_index, stem + ".index")))
    if stem + ".timeindex" in part.files:
        choices.append((4, (mutate_time_index, stem + ".timeindex")))
    if part.files.get(stem + ".txnindex"):
        choices.append((6, (mutate_txn_index, stem + ".txnindex")))
    mutate, file_name = weighted(chooser, choices)
    if not batches and mutate in (mutate_header_field, mutate_record_bytes):
        mutate = mutate_append
    return mutate(chooser, part, file_name, batches)


def draw_reads(chooser, part: Partition, edits: List[dict]) -> List[dict]:
    """Both decoders, with one isolation level and sometimes an offset range that starts
    in the damaged segment (so its index is looked up), or, for damaged indexes, a start
    by timestamp (so the time index is looked up too)."""
    isolation = pick(chooser, ["read_uncommitted", "read_committed"])
    offset_range, timestamp = None, None
    segment = part.segment_of(edits[0]["file"])
    batches = part.segment_batches(segment)
    only_indexes = all(e["file"].endswith((".index", ".timeindex")) for e in edits)
    how = chooser.integer(0, 3 if only_indexes else 1)
    if how == 1:
        summary = part.manifest["summary"]
        first, end = summary["first_offset"], summary["log_end_offset"]
        if batches and chooser.integer(0, 2):
            batch = pick(chooser, batches)
            low = chooser.integer(batch.info["base_offset"], batch.info["last_offset"])
        else:
            low = chooser.integer(first, end)
        high = pick(chooser, [-1, min(end, low + chooser.integer(1, 300)), end])
        if high != -1 and high <= low:
            high = -1
        offset_range = [low, high]
    elif how >= 2:
        stamps = [r["timestamp"] for b in (batches or part.batches) for r in b.info["records"]
                  if r["timestamp"] >= 0] or [1_700_000_000_000]  # magic 0 has none
        timestamp = max(0, pick(chooser, stamps)
                        + pick(chooser, [0, 0, 1, -1, chooser.integer(-60_000, 60_000)]))
    fail_on_data_loss = bool(chooser.integer(0, 1))
    return [{"fast": fast, "isolation": isolation, "range": offset_range,
             "failOnDataLoss": fail_on_data_loss, "timestamp": timestamp}
            for fast in (True, False)]


def draw_case(chooser, fixtures: Fixtures) -> dict:
    name = pick(chooser, fixtures.names)
    part = fixtures[name]
    mutation, edits = draw_mutation(chooser, part)
    return {"partition": name, "mutation": mutation, "edits": edits,
            "reads": draw_reads(chooser, part, edits)}


# ------------------------------------------------------------------ damaging a copy
def damaged_copy(part: Partition, edits: List[dict], workdir: str) -> str:
    """A log dir in `workdir` holding a damaged copy of the partition; returns its path."""
    logdir = os.path.join(workdir, "logdir")
    if os.path.exists(logdir):
        shutil.rmtree(logdir)
    target = os.path.join(logdir, part.name)
    os.makedirs(target)
    for file_name in os.listdir(part.directory):
        shutil.copyfile(os.path.join(part.directory, file_name), os.path.join(target, file_name))
    for edit in edits:
        path = os.path.join(target, edit["file"])
        if edit["op"] == "write":
            with open(path, "r+b") as handle:
                handle.seek(edit["position"])
                handle.write(bytes.fromhex(edit["data"]))
        elif edit["op"] == "append":
            with open(path, "ab") as handle:
                handle.write(bytes.fromhex(edit["data"]))
        elif edit["op"] == "resize":
            os.truncate(path, edit["size"])
        else:
            raise ValueError(f"unknown edit {edit!r}")
    return logdir


def read_options(part: Partition, logdir: str, read: dict) -> dict:
    options = {"path": logdir, "includeHeaders": "true", "isolationLevel": read["isolation"],
               "failOnDataLoss": "true" if read["failOnDataLoss"] else "false",
               "assign": json.dumps({part.topic: [part.partition]})}
    if read["range"] is not None:
        low, high = read["range"]
        options["startingOffsets"] = json.dumps({part.topic: {str(part.partition): low}})
        options["endingOffsets"] = json.dumps({part.topic: {str(part.partition): high}})
    if read.get("timestamp") is not None:
        options["startingTimestamp"] = str(read["timestamp"])
        options["startingOffsetsByTimestampStrategy"] = "latest"
    return options


def read_rows(options: dict, use_fast_path: bool):
    """Rows of a batch read, planned and scanned as Spark's reader does."""
    from segmentlog_datasource.format import ScanOptions
    from segmentlog_datasource.read.fragments import scan_fragments
    from segmentlog_datasource.read.options import parse_read_options
    from segmentlog_datasource.read.planning import Constraints, plan_fragments
    from support.manifest import arrow_rows

    read = parse_read_options(options)
    fragments = plan_fragments(read, Constraints())
    return arrow_rows(scan_fragments(fragments, ScanOptions(
        verify_checksums=read.verify_checksums, include_headers=True,
        use_fast_path=use_fast_path, max_batch_inflated_bytes=read.max_batch_inflated_bytes)))


# ------------------------------------------------------------------------- the oracle
def visible_rows(part: Partition, kept: List[Tuple[Batch, int]], isolation: str,
                 offset_range, aborted: Optional[frozenset] = None) -> Tuple[List[dict], int]:
    """Rows Kafka's reader gives for a log of the `kept` batches (each with a shift of its
    offsets), and that log's end offset. read_committed hides control batches, aborted
    transactions (`aborted`, default the markers' ones) and everything at or past the
    last stable offset of that log."""
    aborted = part.aborted if aborted is None else aborted
    open_since: Dict[int, int] = {}
    end = part.manifest["segments"][0]["base_offset"]
    for batch, shift in kept:
        info = batch.info
        if info["is_transactional"]:
            if info["is_control"]:
                open_since.pop(info["producer_id"], None)
            else:
                open_since.setdefault(info["producer_id"], info["base_offset"] + shift)
        end = info["last_offset"] + shift + 1
    last_stable = min(open_since.values(), default=end)
    low, high = (None, None) if offset_range is None else offset_range
    rows = []
    for batch, shift in kept:
        if batch.info["is_control"]:
            continue
        for record in batch.info["records"]:
            offset = record["offset"] + shift
            if isolation == "read_committed" and (
                    batch.index in aborted or offset >= last_stable):
                continue
            if low is not None and offset < low or high not in (None, -1) and offset >= high:
                continue
            row = expected_row(record)
            row["offset"] = offset
            rows.append(row)
    return rows, end


def _crc_matches(data: bytes, position: int, size: int, magic: int) -> bool:
    import crc32c  # independent of the reader's CRC code

    if magic == 2:
        stored = struct.unpack_from(">I", data, position + 17)[0]
        return crc32c.crc32c(data[position + 21:position + size]) == stored
    stored = struct.unpack_from(">I", data, position + 12)[0]
    return zlib.crc32(data[position + 16:position + size]) == stored


def _frame(data: bytes, position: int) -> Optional[Tuple[int, int]]:
    """(size, magic) of a framed entry at `position`, or None where the README's end rule
    ends an active segment's data: short, zero-filled, or not framable."""
    remaining = len(data) - position
    if remaining < 17:
        return None
    offset, length, epoch_or_crc, magic = struct.unpack_from(">qiIb", data, position)
    if not (offset or length or epoch_or_crc or magic):
        return None
    if magic not in MIN_ENTRY_LENGTH or length < MIN_ENTRY_LENGTH[magic] or 12 + length > remaining:
        return None
    if magic == 2:
        last_delta = struct.unpack_from(">i", data, position + 23)[0]
        count = struct.unpack_from(">i", data, position + 57)[0]
        if last_delta < 0 or count < 0:
            return None
    return 12 + length, magic


def data_may_end_at(data: bytes, position: int) -> bool:
    """Whether the active segment's data may end at `position` (README, "What is read"):
    the entry there is short, zero-filled or unframeable, or it is complete, fails its
    checksum, and nothing framed follows it."""
    framed = _frame(data, position)
    if framed is None:
        return True
    size, magic = framed
    return not _crc_matches(data, position, size, magic) and _frame(data, position + size) is None


def _log_damage(part: Partition, edits: List[dict]) -> Dict[str, int]:
    """For each damaged .log: the first byte position the edits changed."""
    first: Dict[str, int] = {}
    for edit in edits:
        if not edit["file"].endswith(".log"):
            continue
        size = len(part.files[edit["file"]])
        if edit["op"] == "write":
            position = edit["position"]
        elif edit["op"] == "append":
            position = size
        else:
            position = min(edit["size"], size)
        first[edit["file"]] = min(position, first.get(edit["file"], position))
    return first


def _entry_field(batch: Batch) -> Optional[Tuple[int, int]]:
    """(byte within the entry, offset it holds) of an entry's offset field, where moving
    it moves every record's offset alike; None for magic-0 compressed wrappers, whose
    inner messages hold absolute offsets."""
    info = batch.info
    if info["magic"] == 2:
        return 0, info["base_offset"]
    if info["magic"] == 1 or info["compression"] == "none":
        return 0, info["last_offset"]
    return None


def undetectable_variants(part: Partition, edits: List[dict], damaged: Dict[str, bytes]
                          ) -> List[Tuple[str, List[Tuple[Batch, int]]]]:
    """Valid logs the damage may have made (see the module docstring), as kept batches."""
    variants = []
    if len(edits) == 1 and edits[0]["file"].endswith(".log"):
        edit = edits[0]
        segment = part.segment_of(edit["file"])
        in_segment = part.segment_batches(segment)
        if edit["op"] == "write":
            for k, batch in enumerate(in_segment):
                spot = _entry_field(batch)
                start = batch.position
                if spot is None or not (start <= edit["position"]
                                        and edit["position"] + len(edit["data"]) // 2 <= start + 8):
                    continue
                new = struct.unpack_from(">q", damaged[edit["file"]], start)[0]
                shift = new - spot[1]
                info = batch.info
                below = in_segment[k - 1].info["last_offset"] if k else \
                    part.manifest["segments"][segment]["base_offset"] - 1
                if k + 1 < len(in_segment):
                    above = in_segment[k + 1].info["base_offset"]
                elif segment + 1 < len(part.segment_files):
                    above = part.manifest["segments"][segment + 1]["base_offset"]
                else:  # nothing follows: any forward move (even past 2^63 - 1) is unseen
                    above = float("inf")
                if shift and below < info["base_offset"] + shift and \
                        info["last_offset"] + shift < above:
                    variants.append((f"offset field moved by {shift} within its gap",
                                     [(b, shift if b is batch else 0) for b in part.batches]))
        elif edit["op"] == "resize" and segment + 1 < len(part.segment_files) and \
                edit["size"] in [b.position for b in in_segment] + [0]:
            variants.append(("segment cut at an entry boundary",
                             [(b, 0) for b in part.batches
                              if b.segment != segment or b.position < edit["size"]]))
    return variants


def allowed_prefix(part: Partition, edits: List[dict], damaged: Dict[str, bytes]
                   ) -> Optional[List[Tuple[Batch, int]]]:
    """The batches before the damaged entry of the last segment, where the end rule lets
    its data end there; None where it does not apply."""
    first = _log_damage(part, edits).get(part.last_log)
    if first is None:
        return None
    last = len(part.segment_files) - 1
    hit = next((b for b in part.segment_batches(last) if b.position <= first < b.end), None)
    if hit is None or not data_may_end_at(damaged[part.last_log], hit.position):
        return None
    return [(b, 0) for b in part.batches if b.segment < last or b.position < hit.position]


def aborted_by_txn_indexes(part: Partition, damaged: Dict[str, bytes]) -> Optional[frozenset]:
    """The batches a consumer hides trusting the (damaged) transaction indexes: those of
    an entry's producer from its first offset to its marker; None if one does not parse."""
    entries = []
    for file_name, data in part.files.items():
        if not file_name.endswith(".txnindex"):
            continue
        data = damaged.get(file_name, data)
        if len(data) % TXN_ENTRY.size:
            return None
        entries.extend(TXN_ENTRY.unpack_from(data, at)
                       for at in range(0, len(data), TXN_ENTRY.size))
    return frozenset(
        b.index for b in part.batches
        if b.info["is_transactional"] and not b.info["is_control"] and any(
            pid == b.info["producer_id"] and first <= b.info["base_offset"] <= last
            for _, pid, first, last, _ in entries))


def _is_suffix(rows: List[dict], whole: List[dict]) -> bool:
    return not rows or (len(rows) <= len(whole) and whole[len(whole) - len(rows):] == rows)


def _rows_differ(got: List[dict], expected: List[dict]) -> str:
    for i, (a, b) in enumerate(zip(got, expected)):
        if a != b:
            return f"row {i} differs: got {_short(a)}, expected {_short(b)}"
    return f"{len(got)} rows, expected {len(expected)}" + (
        f"; first missing offset {expected[len(got)]['offset']}" if len(got) < len(expected)
        else f"; first extra offset {got[len(expected)]['offset']}")


def _short(row: dict) -> str:
    return repr({k: (v[:24] if isinstance(v, bytes) else v) for k, v in row.items()
                 if k != "headers"})


def judge_error(error: BaseException, partition_dir: str, data_loss_allowed: bool
                ) -> Optional[str]:
    """None when `error` is an acceptable report of damage, else why it is not."""
    from segmentlog_datasource.errors import CorruptLogError, SegmentLogError

    text = f"{type(error).__name__}: {error}"
    if not isinstance(error, SegmentLogError):
        return f"not a SegmentLogError: {text}"
    if "is outside the log" in str(error):
        return None if data_loss_allowed else f"data-loss error on a log that lost no data: {text}"
    partition_dir = os.path.realpath(partition_dir)
    path = getattr(error, "path", None)
    if path is None:  # errors without a path attribute must name it in the message
        named = [os.path.join(partition_dir, n) for n in sorted(os.listdir(partition_dir))
                 if os.path.join(partition_dir, n) in str(error)]
        path = named[0] if named else (partition_dir if partition_dir in str(error) else None)
        if path is None:
            return f"names no file of the damaged partition: {text}"
    real = os.path.realpath(path)
    if not os.path.exists(real) or not (real == partition_dir
                                        or os.path.dirname(real) == partition_dir):
        return f"names {path!r}, not an existing file of {partition_dir}: {text}"
    if isinstance(error, CorruptLogError):
        if error.path not in str(error):
            return f"message does not contain the path: {text}"
        position = error.position
        if real.endswith(".log") and not isinstance(position, int):
            return f"no byte position for a .log: {text}"
        if position is not None and not (isinstance(position, int)
                                         and 0 <= position <= os.path.getsize(real)):
            return f"position {position!r} is not within the file: {text}"
    return None


def judge(part: Partition, case: dict, read: dict, outcome, logdir: str
          ) -> Tuple[Optional[str], str]:
    """(None, what was accepted) when the outcome of `read` on the damaged copy is one the
    oracle accepts, else (why not, "")."""
    damaged = {}
    for file_name in {e["file"] for e in case["edits"]}:
        with open(os.path.join(logdir, part.name, file_name), "rb") as handle:
            damaged[file_name] = handle.read()
    if read.get("timestamp") is not None:
        # The manifests hold no offsetsForTimes answers: the reference is the reader's own
        # rows of the undamaged partition (only index damage is read this way, which
        # must not change them).
        kind, value = outcome
        if kind == "error":
            problem = judge_error(value, os.path.join(logdir, part.name), False)
            return problem, "" if problem else f"error {type(value).__name__}"
        undamaged = read_rows(read_options(part, os.path.dirname(part.directory), read),
                              read["fast"])
        if value == undamaged:
            return None, "the rows of the undamaged partition, by timestamp"
        if all(e["file"].endswith(".timeindex") for e in case["edits"]):
            # Trusted as Kafka trusts it: a damaged entry moves where the lookup starts,
            # never which records follow from there.
            everything, _ = visible_rows(part, [(b, 0) for b in part.batches],
                                         read["isolation"], None)
            if _is_suffix(value, everything) and (
                    not value or value[0]["timestamp"] >= read["timestamp"]):
                return None, "a start moved by the damaged time index, as Kafka's"
        return ("wrong rows without an error: vs the rows of the undamaged partition, by "
                "timestamp: " + _rows_differ(value, undamaged)), ""
    whole = [(b, 0) for b in part.batches]
    expected, _ = visible_rows(part, whole, read["isolation"], read["range"])
    accepted = [("Kafka's rows", expected)]
    data_loss_allowed = False
    prefix = allowed_prefix(part, case["edits"], damaged)
    if prefix is not None:
        rows, end = visible_rows(part, prefix, read["isolation"], read["range"])
        accepted.append(("the rows before the damaged last-segment entry", rows))
        data_loss_allowed = read["range"] is not None and read["failOnDataLoss"] and any(
            value > end for value in read["range"] if value != -1)
    if read["isolation"] == "read_committed" and \
            all(e["file"].endswith(".txnindex") for e in case["edits"]):
        # A first offset (no marker shows it) is trusted as a Kafka consumer trusts it.
        trusted = aborted_by_txn_indexes(part, damaged)
        if trusted is not None:
            accepted.append(("the transaction index trusted, as a consumer does",
                             visible_rows(part, whole, read["isolation"], read["range"],
                                          trusted)[0]))
    last = part.batches[-1]
    if read["range"] is not None and read["failOnDataLoss"] and any(
            e["op"] == "write" and e["file"] == part.last_log and
            last.position <= e["position"] < last.position + 8 for e in case["edits"]):
        # The last entry's offset field (no checksum covers it) gives the log end offset
        # that planning checks a range against: moved back, the range is past that end.
        data_loss_allowed = True
    for label, kept in undetectable_variants(part, case["edits"], damaged):
        rows, end = visible_rows(part, kept, read["isolation"], read["range"])
        accepted.append((label, rows))
        # that valid log may end earlier (its last batch moved back): a range past its end
        data_loss_allowed = data_loss_allowed or (
            read["range"] is not None and read["failOnDataLoss"] and any(
                value > end for value in read["range"] if value != -1))
    kind, value = outcome
    if kind == "error":
        problem = judge_error(value, os.path.join(logdir, part.name), data_loss_allowed)
        return problem, "" if problem else f"error {type(value).__name__}"
    for label, rows in accepted:
        if value == rows:
            return None, label
    return "wrong rows without an error: " + "; ".join(
        f"vs {label}: {_rows_differ(value, rows)}" for label, rows in accepted), ""


def run_case(fixtures: Fixtures, case: dict, workdir: str) -> dict:
    """Damage a copy, read it every way the case says, and judge each read."""
    part = fixtures[case["partition"]]
    logdir = damaged_copy(part, case["edits"], workdir)
    problems, outcomes = [], []
    for read in case["reads"]:
        try:
            outcome = ("rows", read_rows(read_options(part, logdir, read), read["fast"]))
        except Exception as error:  # judged below: only SegmentLogErrors are acceptable
            outcome = ("error", error)
        problem, accepted = judge(part, case, read, outcome, logdir)
        outcomes.append(accepted)
        if problem is not None:
            decoder = "compiled" if read["fast"] else "pure"
            problems.append(f"[{decoder}, {read['isolation']}, range {read['range']}, "
                            f"startingTimestamp {read.get('timestamp')}, "
                            f"failOnDataLoss {read['failOnDataLoss']}] {problem}")
    return {"status": "wrong" if problems else "ok", "detail": "\n".join(problems),
            "outcomes": outcomes}


# ------------------------------------------------ the runner: one case per child request
WORKER_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
               "from support.fuzzing import worker_main; worker_main(sys.argv[2])")


def worker_main(root: str):
    """Read cases (JSON lines) from stdin, answer each with a RESULT_MARK line."""
    fixtures = Fixtures(root)
    workdir = tempfile.mkdtemp(prefix="segmentlog-fuzz-")
    out = sys.stdout
    sys.stdout = sys.stderr  # stray prints must not mix with the answers
    try:
        for line in sys.stdin:
            case = json.loads(line)
            try:
                result = run_case(fixtures, case, workdir)
            except Exception as error:  # of the harness itself: reported, not hidden
                result = {"status": "wrong", "detail": f"harness error {error!r}"}
            out.write(RESULT_MARK + json.dumps(result) + "\n")
            out.flush()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def reproducer(case: dict) -> str:
    return ("partition " + case["partition"] + ": " + case["mutation"] + "\n  replay: "
            "python tests/fuzz_segments.py --replay '" + json.dumps(case) + "'")


class CaseRunner:
    """Runs cases in a worker process, so that a crash (SIGSEGV, SIGBUS) or a hang is a
    failing case with its reproducer, and the next case gets a fresh worker."""

    def __init__(self, root: Optional[str] = None, timeout: float = 20.0):
        self.root = root or fixtures_root()
        self.timeout = timeout
        self.process = None
        self.stderr = None
        self._buffer = b""

    def _start(self):
        self.stderr = tempfile.TemporaryFile()
        self._buffer = b""
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER_BOOT, TESTS_DIR, self.root],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)

    def _stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")[-2000:]

    def _stop(self):
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            self.process.stdin.close()
            self.process.stdout.close()
            self.stderr.close()
            self.process = None

    def close(self):
        self._stop()

    def pid(self) -> int:
        if self.process is None:
            self._start()
        return self.process.pid

    def run(self, case: dict) -> dict:
        if self.process is None:
            self._start()
        try:
            self.process.stdin.write((json.dumps(case) + "\n").encode())
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # the worker is gone: reported below from its exit status
        deadline = time.monotonic() + self.timeout
        fd = self.process.stdout.fileno()
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                text = line.decode("utf-8", "replace")
                if text.startswith(RESULT_MARK):
                    return json.loads(text[len(RESULT_MARK):])
            left = deadline - time.monotonic()
            if left <= 0:
                self._stop()
                return {"status": "hang",
                        "detail": f"no answer within {self.timeout} s (worker killed)"}
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if chunk:
                self._buffer += chunk
                continue
            code = self.process.wait()
            how = (f"killed by {signal.Signals(-code).name}" if code < 0
                   else f"exited with status {code}")
            tail = self._stderr_tail()
            self._stop()
            return {"status": "crash", "detail": f"worker {how}; stderr: {tail}"}
