"""KRaft snapshot files: `<end offset>-<epoch>.checkpoint` in `__cluster_metadata-0`.

A snapshot holds the whole metadata image as of its end offset (exclusive: it contains
the records up to end offset - 1) in magic-2 record batches, as Kafka's
RecordsSnapshotWriter writes them: offsets from 0, every batch's partition leader epoch
the snapshot's epoch, uncompressed unless a writer chose otherwise. The first batch is a
control batch whose first record is a SnapshotHeader (then, with kraft.version 1, a
KRaftVersion and a Voters record); the metadata records follow in plain batches; the last
batch is a control batch holding the SnapshotFooter, written when the snapshot is frozen.
A file without its footer was never completed.
"""
import os
import re
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Tuple

from ...errors import CorruptLogError, RecordDecodeError
from ...storage import LOCAL, Store
from .. import compression
from ..layout import ATTR_CONTROL, INT64_MAX, V2_ATTRIBUTES, V2_CRC, V2_CRC_START
from ..scan import iter_segment_batches
from ..v2 import batch_records_payload, decode_v2_records
from ..crc import crc32c
from .metadata_records import (decode_control_record, decode_metadata_record,
                               encode_control_record, encode_metadata_record)
from .topics import DecodedRecord

SNAPSHOT_SUFFIX = ".checkpoint"
SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


@dataclass(frozen=True)
class SnapshotFile:
    path: str
    end_offset: int  # exclusive: the snapshot holds the state as of end_offset - 1
    epoch: int
    size: int

    @property
    def last_contained_offset(self) -> int:
        return self.end_offset - 1


def parse_snapshot_name(name: str) -> Optional[Tuple[int, int]]:
    """(end offset, epoch) of a snapshot file name; None for any other name (a
    `.checkpoint.part` being written, a `.checkpoint.deleted` being removed)."""
    match = SNAPSHOT_NAME.match(name)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def snapshot_file_name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}{SNAPSHOT_SUFFIX}"


def list_snapshots(directory: str, store: Store = LOCAL) -> List[SnapshotFile]:
    """The complete snapshot files of a partition directory, by end offset then epoch."""
    found = []
    for name in store.child_names(directory):
        parsed = parse_snapshot_name(name)
        if parsed is None:
            continue
        path = store.join(directory, name)
        size = store.size_of(path)
        if size is not None:
            found.append(SnapshotFile(path, parsed[0], parsed[1], size))
    return sorted(found, key=lambda snapshot: (snapshot.end_offset, snapshot.epoch))


@dataclass
class SnapshotRecord:
    offset: int  # inside the snapshot (from 0), not an offset of the log
    timestamp: int
    record: DecodedRecord
    value: Optional[bytes]


@dataclass
class Snapshot:
    """A snapshot file read whole: its control records and its metadata records."""

    path: str
    end_offset: int
    epoch: int
    header: dict  # the SnapshotHeader record's value
    footer: dict
    control_records: List[SnapshotRecord] = field(default_factory=list)
    records: List[SnapshotRecord] = field(default_factory=list)

    @property
    def last_contained_log_timestamp(self) -> int:
        return self.header["lastContainedLogTimestamp"]


class _Collect:
    """A decode_v2_records sink keeping (offset, timestamp, key, value)."""

    def __init__(self):
        self.rows = []

    def add(self, offset, timestamp, timestamp_type, key, value, headers):
        self.rows.append((offset, timestamp, key, value))


def read_snapshot(snapshot, store: Store = LOCAL, verify_checksums: bool = True) -> Snapshot:
    """Read a snapshot file (a path or a SnapshotFile) into its records. A damaged or
    incomplete file (a bad checksum, a torn batch, no header first or no footer last)
    raises CorruptLogError naming the file and byte; a record that does not decode raises
    RecordDecodeError naming the file and the record's offset in it."""
    if not isinstance(snapshot, SnapshotFile):
        path = str(snapshot)
        parsed = parse_snapshot_name(os.path.basename(path))
        if parsed is None:
            raise CorruptLogError(path, None, "not a snapshot file name (expected "
                                              "<20-digit end offset>-<10-digit epoch>.checkpoint)")
        size = store.size_of(path)
        if size is None:
            raise CorruptLogError(path, None, "snapshot file is missing")
        snapshot = SnapshotFile(path, parsed[0], parsed[1], size)
    path = snapshot.path
    header = footer = None
    footer_end = None
    control_records: List[SnapshotRecord] = []
    records: List[SnapshotRecord] = []
    position = 0
    try:
        for batch, view in iter_segment_batches(path, snapshot.size, 0, snapshot.size,
                                                allow_torn_tail=False,
                                                verify_checksums=verify_checksums,
                                                base_offset=0, store=store):
            position = batch.position
            if batch.magic != 2:
                raise CorruptLogError(path, position, f"snapshot batch at offset "
                                                      f"{batch.base_offset} has magic "
                                                      f"{batch.magic}; snapshots hold magic-2 "
                                                      f"batches only")
            if footer is not None:
                raise CorruptLogError(path, position, "a batch follows the snapshot's "
                                                      "SnapshotFooter, which must be last")
            rows = _Collect()
            if batch.record_count:
                data = batch_records_payload(view, position, batch, path)
                decode_v2_records(data, batch.record_count, batch, rows, 0, INT64_MAX, path)
            if header is None and not (batch.is_control and rows.rows):
                raise CorruptLogError(path, position, "the snapshot's first batch is not a "
                                                      "control batch starting with a "
                                                      "SnapshotHeader")
            for offset, timestamp, key, value in rows.rows:
                try:
                    if batch.is_control:
                        decoded = decode_control_record(key, value)
                    else:
                        decoded = decode_metadata_record(value)
                except RecordDecodeError as error:
                    raise RecordDecodeError(f"{path}: snapshot record at offset {offset}: "
                                            f"{error.reason}") from None
                entry = SnapshotRecord(offset, timestamp, decoded, value)
                if not batch.is_control:
                    records.append(entry)
                    continue
                if header is None:
                    if decoded.record_type != "SNAPSHOT_HEADER":
                        raise CorruptLogError(path, position, f"the snapshot's first record "
                                                              f"is {decoded.record_type}, not "
                                                              f"a SnapshotHeader")
                    header = decoded.value
                elif decoded.record_type == "SNAPSHOT_FOOTER":
                    footer = decoded.value
                    footer_end = batch.end_position
                control_records.append(entry)
    except CorruptLogError as error:
        if error.reason.startswith("no complete entry here"):
            raise CorruptLogError(path, error.position,
                                  f"the snapshot ends inside a record batch ({error.path} "
                                  f"is torn or zero-filled there): it is incomplete") from None
        raise
    if header is None:
        raise CorruptLogError(path, 0, "empty snapshot: no SnapshotHeader")
    if footer is None:
        raise CorruptLogError(path, snapshot.size,
                              "the snapshot has no SnapshotFooter: it was never completed "
                              "(Kafka writes the footer last, when it freezes the snapshot)")
    if footer_end != snapshot.size:  # pragma: no cover - iter_segment_batches reads to the end
        raise CorruptLogError(path, footer_end, "bytes follow the SnapshotFooter")
    return Snapshot(path, snapshot.end_offset, snapshot.epoch, header, footer,
                    control_records, records)


# ------------------------------------------------------------------ writing

def _control_batch(records, base_offset: int, epoch: int, timestamp: int) -> bytes:
    """A control batch of (key, value) records: the project's encoder, then the control
    attribute set and the checksum (which covers the attributes) computed again."""
    from ..encode import build_record_batch  # here: reading snapshots needs no encoder

    batch = bytearray(build_record_batch(
        [(key, value, timestamp, []) for key, value in records], base_offset=base_offset,
        partition_leader_epoch=epoch))
    attributes = int.from_bytes(batch[V2_ATTRIBUTES:V2_ATTRIBUTES + 2], "big") | ATTR_CONTROL
    batch[V2_ATTRIBUTES:V2_ATTRIBUTES + 2] = attributes.to_bytes(2, "big")
    batch[V2_CRC:V2_CRC + 4] = crc32c(bytes(batch[V2_CRC_START:])).to_bytes(4, "big")
    return bytes(batch)


def encode_snapshot(records: Iterable[Tuple[object, int, dict]], epoch: int, *,
                    last_contained_log_timestamp: int = 0, timestamp: int = 0,
                    records_per_batch: int = 1000, codec: int = compression.NONE,
                    kraft_version: Optional[int] = None) -> bytes:
    """A snapshot's bytes, laid out as RecordsSnapshotWriter lays them out, from
    (record type, version, value) metadata records (type by name or api key).
    `kraft_version`: also write a KRaftVersion control record after the header."""
    from ..encode import build_record_batch  # here: reading snapshots needs no encoder

    header = [encode_control_record("SNAPSHOT_HEADER", {
        "version": 0, "lastContainedLogTimestamp": last_contained_log_timestamp})]
    if kraft_version is not None:
        header.append(encode_control_record("KRAFT_VERSION",
                                            {"version": 0, "kRaftVersion": kraft_version}))
    out = bytearray(_control_batch(header, 0, epoch, timestamp))
    offset = len(header)
    values = [encode_metadata_record(kind, version, value) for kind, version, value in records]
    for start in range(0, len(values), records_per_batch):
        chunk = values[start:start + records_per_batch]
        out += build_record_batch([(None, value, timestamp, []) for value in chunk],
                                  base_offset=offset, codec=codec,
                                  partition_leader_epoch=epoch)
        offset += len(chunk)
    out += _control_batch([encode_control_record("SNAPSHOT_FOOTER", {"version": 0})],
                          offset, epoch, timestamp)
    return bytes(out)


def write_snapshot(directory: str, end_offset: int, epoch: int,
                   records: Iterable[Tuple[object, int, dict]], **options) -> str:
    """Write `<end offset>-<epoch>.checkpoint` into a local partition directory (through
    a `.checkpoint.part` file renamed when complete, as Kafka does); options as
    encode_snapshot's. Returns its path."""
    data = encode_snapshot(records, epoch, **options)
    path = os.path.join(directory, snapshot_file_name(end_offset, epoch))
    partial = path + ".part"
    with open(partial, "wb") as out:
        out.write(data)
    os.replace(partial, path)
    return path
