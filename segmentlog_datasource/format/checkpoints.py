"""Kafka's checkpoint files: the small text files a broker keeps beside its segments.

A log dir's offset checkpoints (`replication-offset-checkpoint`: high watermarks,
`log-start-offset-checkpoint`, `recovery-point-offset-checkpoint`,
`cleaner-offset-checkpoint`) and a partition's `leader-epoch-checkpoint` share one
layout: a version line (0), a line with the number of entries, then one entry per line,
fields separated by whitespace (`topic partition offset`, or `epoch start_offset`). An
empty file, or one that stops after its version line, holds no entries, as Kafka reads
it. `partition.metadata` holds `version: 0` and `topic_id: <base64 uuid>` lines.

A codec only: bytes to entries and back, every fault a CheckpointError naming the file
and line. Reading the files of a log dir is format.log's.
"""
import base64
import re
import uuid
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from ..errors import CheckpointError

HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
CLEANER_FILE = "cleaner-offset-checkpoint"
OFFSET_CHECKPOINT_FILES = (HIGH_WATERMARK_FILE, LOG_START_FILE, RECOVERY_POINT_FILE,
                           CLEANER_FILE)
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
CHECKPOINT_VERSION = 0

# Java's Integer/Long.parseLong: an optional sign, then digits.
_NUMBER = re.compile(r"^[+-]?[0-9]+$")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_FIELD_BREAK = re.compile(r"\s+")
MAX_LONG = (1 << 63) - 1


class OffsetEntry(NamedTuple):
    offset: int
    line: int  # where it is in its file, from 1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int
    line: int = 0


def _number(text: str, path: str, line: int, what: str, bits: int = 64) -> int:
    if not _NUMBER.match(text):
        raise CheckpointError(path, line, f"{what} {text!r} is not a number")
    value = int(text)
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise CheckpointError(path, line, f"{what} {value} does not fit in {bits} bits")
    return value


def _text_lines(data: bytes, path: str) -> List[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CheckpointError(path, text_line_of(data, error.start),
                              "is not text (not UTF-8)") from None
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()  # the break that ends the last line
    return lines


def text_line_of(data: bytes, position: int) -> int:
    return data.count(b"\n", 0, position) + 1


def parse_entries(data: bytes, path: str, fields: int, kind: str
                  ) -> List[Tuple[int, List[str]]]:
    """(line number, fields) of every entry; `fields` per entry, as the version-0 layout."""
    lines = _text_lines(data, path)
    if not lines:
        return []
    version = _number(lines[0], path, 1, "the version", 32)
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(path, 1, f"version {version} is not one Kafka writes for a "
                                       f"{kind} (expected {CHECKPOINT_VERSION})")
    if len(lines) == 1:
        return []
    expected = _number(lines[1], path, 2, "the entry count", 32)
    entries = []
    for number, line in enumerate(lines[2:], 3):
        parts = _FIELD_BREAK.split(line)
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) != fields:
            raise CheckpointError(path, number, f"malformed entry {line!r}: a {kind} entry has "
                                                f"{fields} fields")
        entries.append((number, parts))
    if len(entries) != expected:
        raise CheckpointError(path, 2, f"the count line says {expected} entries, but the file "
                                       f"holds {len(entries)}")
    return entries


def parse_offset_checkpoint(data: bytes, path: str) -> Dict[Tuple[str, int], OffsetEntry]:
    """{(topic, partition): OffsetEntry} of an offset checkpoint file (a later entry for the
    same partition replaces an earlier one, as Kafka's map does)."""
    found = {}
    for line, (topic, partition, offset) in parse_entries(data, path, 3, "offset checkpoint"):
        key = (topic, _number(partition, path, line, "partition", 32))
        found[key] = OffsetEntry(_number(offset, path, line, "offset"), line)
    return found


def parse_leader_epochs(data: bytes, path: str) -> List[EpochEntry]:
    return [EpochEntry(_number(epoch, path, line, "epoch", 32),
                       _number(start, path, line, "start offset"), line)
            for line, (epoch, start) in parse_entries(data, path, 2, "leader-epoch-checkpoint")]


def leader_epoch_faults(entries: List[EpochEntry]) -> List[Tuple[int, str]]:
    """(line, what is wrong) where epochs do not grow with their start offsets."""
    faults = []
    for before, entry in zip(entries, entries[1:]):
        if entry.epoch <= before.epoch:
            faults.append((entry.line, f"epoch {entry.epoch} follows epoch {before.epoch}: "
                                       f"epochs must increase"))
        elif entry.start_offset < before.start_offset:
            faults.append((entry.line, f"epoch {entry.epoch} starts at offset "
                                       f"{entry.start_offset}, below epoch {before.epoch}'s "
                                       f"start {before.start_offset}"))
    for entry in entries:
        if entry.epoch < 0 or entry.start_offset < 0:
            faults.append((entry.line, f"negative epoch or start offset "
                                       f"({entry.epoch} {entry.start_offset})"))
    return faults


def parse_partition_metadata(data: bytes, path: str) -> str:
    """The topic id (base64, as Kafka prints it) of a partition.metadata file."""
    lines = _text_lines(data, path)
    values = {}
    for number, (key, line) in enumerate(zip(("version", "topic_id"), lines), 1):
        name, separator, value = line.partition(": ")
        if not separator or name != key:
            raise CheckpointError(path, number, f"malformed line {line!r}: expected "
                                                f"'{key}: <value>'")
        values[key] = (value, number)
    if "topic_id" not in values:
        raise CheckpointError(path, len(lines) + 1, "the topic_id line is missing")
    version = _number(values["version"][0], path, 1, "the version", 32)
    if version != 0:
        raise CheckpointError(path, 1, f"version {version} is not one Kafka writes (0)")
    topic_id, line = values["topic_id"]
    if parse_topic_id(topic_id) is None:
        raise CheckpointError(path, line, f"topic id {topic_id!r} is not a base64 UUID")
    return topic_id


def parse_topic_id(text: str) -> Optional[bytes]:
    """The 16 bytes of a topic id written as Kafka writes it (URL-safe base64, no padding)."""
    if len(text) != 22 or not re.match(r"^[A-Za-z0-9_-]{22}$", text):
        return None
    return base64.urlsafe_b64decode(text + "==")


def new_topic_id() -> str:
    """A random topic id as Kafka makes one: never all zeros, never starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-") and text != "AAAAAAAAAAAAAAAAAAAAAA":
            return text


def _with_header(entries: List[str]) -> bytes:
    return ("\n".join([str(CHECKPOINT_VERSION), str(len(entries))] + entries) + "\n"
            ).encode("utf-8")


def format_offset_checkpoint(offsets: Dict[Tuple[str, int], int]) -> bytes:
    return _with_header([f"{topic} {partition} {offset}"
                         for (topic, partition), offset in sorted(offsets.items())])


def format_leader_epochs(entries: Iterable[Tuple[int, int]]) -> bytes:
    return _with_header([f"{epoch} {start}" for epoch, start in entries])


def format_partition_metadata(topic_id: str) -> bytes:
    return f"version: 0\ntopic_id: {topic_id}".encode("ascii")
