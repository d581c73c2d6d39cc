"""`segmentlog dump`: a log, a partition or one file, entry by entry, as kafka-dump-log.

Everything is produced as dicts (one per batch, record, index entry, checkpoint
entry...): `--json` prints them one per line, the text form prints them in
kafka-dump-log's words (checkpoint files, which it does not dump, as Kafka names their
fields).
"""
import base64
import datetime
import json
from typing import Iterable, Iterator, List, Optional

from ..errors import CorruptLogError, InvalidOptionError, SegmentLogError
from ..format import PartitionLog, Segment, checkpoints
from ..format.log import parse_partition_dir_name
from ..read.replicas import consumer_partitions
from ..storage import resolve
from ..format.v2 import last_sequence
from .entries import (LogEntry, LogStop, batch_fields, control_fields, record_metadata,
                      record_sequence_of, timestamp_type_name, walk_log)
from .files import (base_offset_of, offset_index_entries, producer_snapshot, time_index_entries,
                    transaction_index_entries)
from .framed import decode_bytes
from .internal import InternalDecoder, control_text, data_text

FILE_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
# What each offset checkpoint of a log dir holds, per partition.
OFFSET_CHECKPOINT_HOLDS = {
    checkpoints.HIGH_WATERMARK_FILE: "high watermarks",
    checkpoints.LOG_START_FILE: "log start offsets",
    checkpoints.RECOVERY_POINT_FILE: "recovery points (flushed up to)",
    checkpoints.CLEANER_FILE: "log cleaner positions (cleaned up to)",
}
CHECKPOINT_FILES = frozenset(OFFSET_CHECKPOINT_HOLDS) | {checkpoints.LEADER_EPOCH_FILE,
                                                         checkpoints.PARTITION_METADATA_FILE}
DECODERS = ("utf8", "hex", "json", "avro", "protobuf")
BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"  # KRaft's bootstrap metadata, in a log dir


def _holds_partitions(store, path: str) -> bool:
    """Whether a directory holds partition directories: a log dir, whatever its name."""
    return any(parse_partition_dir_name(name) for name in store.child_dirs(path))


def record_fields(record, batch, print_data: bool, decoder: str, metadata: dict,
                  path: Optional[str] = None, key_decoder="utf8") -> dict:
    """A record as kafka-dump-log shows it, with the includeMetadata and
    includeControlRecords columns under their names (`metadata`: record_metadata's).
    With an internal topic's decoder, key and value decoded (control records too);
    otherwise the value with `decoder` and the key with `key_decoder`."""
    fields = {"kind": "record", "offset": record.offset, "timestamp": record.timestamp,
              "timestamp_type": timestamp_type_name(record.timestamp_type),
              "key_size": -1 if record.key is None else len(record.key),
              "value_size": -1 if record.value is None else len(record.value),
              "header_keys": [key for key, _ in record.headers]}
    fields.update(metadata)
    fields["sequence"] = record_sequence_of(batch, record)
    control = control_fields(record) if batch.header.is_control else None
    fields["controlType"] = control["type"] if control else None
    fields["coordinatorEpoch"] = control["coordinator_epoch"] if control else None
    internal = isinstance(decoder, InternalDecoder)
    if batch.header.is_control:
        fields["control"] = control
        if internal and print_data:
            fields.update(decoder.control_fields(record, path, batch.header.position))
    elif internal and print_data:
        fields.update(decoder.data_fields(record, path, batch.header.position))
        fields["headers"] = [[key, decode_bytes(value, "utf8")] for key, value in record.headers]
    elif print_data:
        fields["key"] = decode_bytes(record.key, key_decoder)
        fields["value"] = decode_bytes(record.value, decoder)
        shown = decoder.headers if callable(decoder) else decoder  # headers are never framed
        fields["headers"] = [[key, decode_bytes(value, shown)] for key, value in record.headers]
    return fields


def framed_decoder(decoder: str, load_registry):
    """What shows keys and values for `decoder`: avro and protobuf decode framed values
    through the registry `load_registry()` returns, json checks their schema ids in it
    when it is given (None: framed JSON shown without its schema); the others are names.
    SegmentLogError (an InvalidOptionError) when the format's library is not installed."""
    from .framed import FRAMED_DECODERS

    if decoder not in FRAMED_DECODERS or (decoder == "json" and load_registry is None):
        return decoder
    from ..decode.value_formats import value_format

    value_format(decoder, "--decoder")  # its library is there, or say which extra to install
    return FRAMED_DECODERS[decoder](load_registry)


def is_metadata_snapshot(name: str) -> bool:
    """A KRaft snapshot file: `<end offset>-<epoch>.checkpoint`, or the bootstrap one."""
    if not name.endswith(".checkpoint"):
        return False
    from ..format.internal.snapshots import parse_snapshot_name

    return name == BOOTSTRAP_SNAPSHOT or parse_snapshot_name(name) is not None


def names_a_file(store, path: str) -> bool:
    """Whether `path` is named as a file dump dumps (a segment, an index, a checkpoint)."""
    name = store.basename(path)
    return path.endswith(FILE_SUFFIXES) or name in CHECKPOINT_FILES or \
        is_metadata_snapshot(name)


def is_single_file(store, path: str) -> bool:
    return names_a_file(store, path) and store.size_of(path) is not None and \
        not store.tree(path).isdir(path)


def holds_nothing(verb: str, paths: Iterable[str]) -> str:
    """What describe, dump and verify say of PATHs that hold no partition (a usage error:
    most often a path one level too high or too low)."""
    return (f"nothing to {verb}: {' '.join(paths)} holds no partition (no "
            f"<topic>-<partition> directory, and no segment file)")


def missing_file(store, path: str) -> str:
    """What dump says of a file it was given that is not there: a segment or index named
    by a base offset the partition has no segment at says which segments it has."""
    from ..format.log import SEGMENT_NAME

    directory = store.dirname(path)
    message = f"{path}: no such file"
    if store.size_of(directory) is None:
        return f"{message} (and no directory {directory})"
    base = base_offset_of(store.basename(path))
    segments = sorted(name for name in store.child_names(directory)
                      if SEGMENT_NAME.match(name) and name.endswith(".log"))
    if base is None:
        return message
    held = f"{directory} holds no segment" if not segments else \
        f"{directory} holds the segments {segments[0]}" + \
        (f" to {segments[-1]}" if len(segments) > 1 else "")
    return (f"{message}: {held} (a segment's files are named by its base offset; to dump "
            f"from offset {base}, give the partition directory and --offset {base})")


def standalone_log(store, path: str) -> PartitionLog:
    """A lone `.log` file as a one-segment partition (its indexes beside it are used)."""
    directory = store.dirname(path)
    name = store.basename(path)
    topic, partition = parse_partition_dir_name(store.basename(directory)) or ("", -1)
    base = base_offset_of(name)
    segment = Segment(directory, base or 0, store.size_of(path), active=True, store=store)
    if base is None:
        # Not named by its base offset: no index files belong to it.
        segment.locations = {".log": (path, 0, segment.size)}
    return PartitionLog(directory, topic, partition, [segment], store)


def latest_timestamp(log: PartitionLog) -> Optional[int]:
    """The largest record timestamp of the partition (epoch ms), None when none has one: a
    rolled segment's is its time index's last entry, the last segment's headers are read."""
    stamps = [segment.time_index.max_timestamp for segment in log.segments[:-1]]
    if log.segments:
        stamps.extend(header.max_timestamp
                      for header in log.segments[-1].iter_headers(allow_torn_tail=True))
    latest = max((stamp for stamp in stamps if stamp is not None), default=-1)
    return latest if latest >= 0 else None


class Dump:
    """`decoder` shows values (and header values), `key_decoder` keys (as they are, UTF-8,
    unless one is given): a log whose values are framed Avro has plain keys as often as
    not. `internal_shown`: how the command line named an internal topic's decoder (its
    kafka-dump-log flag), for messages."""

    def __init__(self, records: bool = False, print_data: bool = False,
                 decoder: str = "utf8", offset: Optional[int] = None,
                 timestamp: Optional[int] = None, load_registry=None,
                 internal_shown: Optional[str] = None, key_decoder: str = "utf8"):
        self.internal: Optional[InternalDecoder] = None
        if isinstance(decoder, str) and decoder not in DECODERS:
            # an internal topic's: key and value decoded, as its kafka-dump-log flag does
            self.internal = InternalDecoder(decoder, internal_shown)
            print_data = True
        self.records = records or print_data
        self.print_data = print_data
        if self.internal is not None:
            self.decoder = self.internal
        else:
            self.decoder = framed_decoder(decoder, load_registry) if print_data else decoder
        self.key_decoder = framed_decoder(key_decoder, load_registry) if print_data \
            else key_decoder
        self.offset = offset
        self.timestamp = timestamp

    def items(self, paths: Iterable[str]) -> Iterator[dict]:
        """Each single file as given; the directories' partitions together where the
        first directory is, as a consumer reads them (the copies of a partition in
        several brokers' log dirs as one: the leader's copy is dumped). With an internal
        topic's decoder, only that topic's partitions of a log dir; a partition of
        another topic given by name is refused (InvalidOptionError) before anything is
        dumped."""
        paths = list(paths)
        files = {}
        for given in paths:
            store, path = resolve(given)
            if is_single_file(store, path):
                files[given] = (store, path)
                self._check_file(given, store, path)
            elif names_a_file(store, path) and store.size_of(path) is None:
                raise SegmentLogError(missing_file(store, path))
            elif self.internal is not None and not _holds_partitions(store, path):
                # a log dir named like a partition (broker-1) is no partition of "broker"
                self._check_topic(given, store.basename(path))
        directories = [given for given in paths if given not in files]
        logs = self._logs(directories) if directories else []
        for given in paths:
            if given in files:
                yield from self.file_items(*files[given])
            elif given == directories[0]:
                for log in logs:
                    yield from self.log_items(log)
                    if self._with_snapshots():
                        yield from self.partition_snapshot_items(log)

    def _logs(self, directories: List[str]) -> List[PartitionLog]:
        logs = consumer_partitions(directories)
        if not logs:
            raise SegmentLogError(holds_nothing("dump", directories))
        if self.internal is None:
            return logs
        topic = self.internal.topic.topic
        kept = [log for log in logs if log.topic == topic]
        if not kept:
            held = sorted({log.topic for log in logs})
            raise InvalidOptionError(
                f"no {topic} partition under {' '.join(directories)}: "
                f"{self.internal.shown} decodes the records of {topic}"
                + (f" (it holds {', '.join(held)})" if held else " (it holds no partition)"))
        return kept

    def _check_topic(self, given: str, directory_name: str) -> None:
        """A partition directory of another topic than the internal decoder's is refused."""
        parsed = parse_partition_dir_name(directory_name)
        topic = self.internal.topic.topic
        if parsed is not None and parsed[0] != topic:
            raise InvalidOptionError(
                f"{given} is a partition of {parsed[0]}, and {self.internal.shown} decodes "
                f"the records of {topic}; leave it out to dump its records as they are")

    def _check_file(self, given: str, store, path: str) -> None:
        if self.internal is not None and path.endswith((".log", ".checkpoint")):
            self._check_topic(given, store.basename(store.dirname(path)))
        if is_metadata_snapshot(store.basename(path)) and (
                self.offset is not None or self.timestamp is not None):
            raise InvalidOptionError(
                f"{given} is a metadata snapshot: its records are the cluster's metadata "
                f"as of its end offset, numbered from 0; --offset and --timestamp select "
                f"records of a log")

    def _with_snapshots(self) -> bool:
        """Whether a partition's snapshot files follow its segments: with the decoder of
        a topic that has them (__cluster_metadata), dumped whole."""
        return self.internal is not None and self.internal.topic.has_snapshots and \
            self.offset is None and self.timestamp is None

    def partition_snapshot_items(self, log: PartitionLog) -> Iterator[dict]:
        from ..format.internal.snapshots import list_snapshots

        for snapshot in list_snapshots(log.directory, log.store):
            yield from self.snapshot_items(log.store, snapshot.path)

    def snapshot_items(self, store, path: str) -> Iterator[dict]:
        """A KRaft snapshot file as kafka-dump-log dumps one: its end offset and epoch
        (from its name), then its batches and records (offsets from 0)."""
        from ..format.internal.snapshots import parse_snapshot_name

        name = store.basename(path)
        parsed = parse_snapshot_name(name)
        size = store.size_of(path) or 0
        yield {"kind": "metadata_snapshot", "file": path, "size": size,
               "bootstrap": parsed is None,
               "end_offset": None if parsed is None else parsed[0],
               "epoch": None if parsed is None else parsed[1]}
        with store.reader(path, size) as reader:
            for item in walk_log(reader, path, size, 0):
                if isinstance(item, LogStop):
                    yield {"kind": "stop", "file": path, "position": item.position,
                           "remaining": item.remaining, "stop": item.kind,
                           "reason": item.reason}
                    break
                yield from self.entry_items(path, item)

    def file_items(self, store, path: str) -> Iterator[dict]:
        name = store.basename(path)
        if path.endswith(".log"):
            yield from self.log_items(standalone_log(store, path))
            return
        if is_metadata_snapshot(name):
            yield from self.snapshot_items(store, path)
            return
        data = store.read_optional(path) or b""
        base = base_offset_of(name) or 0
        yield {"kind": "file", "file": path, "size": len(data)}
        if name in CHECKPOINT_FILES:
            yield from checkpoint_items(name, data, path)
        elif path.endswith(".snapshot"):
            snapshot = producer_snapshot(data, path)
            yield {"kind": "snapshot", "file": path, "version": snapshot["version"],
                   "crc": snapshot["crc"], "crc_valid": snapshot["crc_valid"],
                   "entries": len(snapshot["entries"])}
            for entry in snapshot["entries"]:
                yield {"kind": "producer", "file": path, **entry}
        elif path.endswith(".txnindex"):
            for entry in transaction_index_entries(data, path):
                yield {"kind": "aborted_transaction", "file": path, **entry}
        else:
            time_index = path.endswith(".timeindex")
            entries = time_index_entries(data, base) if time_index else \
                offset_index_entries(data, base)
            kind = "time_index_entry" if time_index else "offset_index_entry"
            size = 12 if time_index else 8
            # The zero entries after the last real one are preallocated space: one line.
            real = max((n + 1 for n, e in enumerate(entries) if not e["zero"]), default=0)
            for entry in entries[:real]:
                entry.pop("zero")
                yield {"kind": kind, "file": path, **entry}
            if real < len(entries):
                yield {"kind": "zero_padding", "file": path, "entries": len(entries) - real,
                       "index_position": real * size}

    def log_items(self, log: PartitionLog) -> Iterator[dict]:
        start = self.offset
        if self.timestamp is not None:
            start = log.offset_for_timestamp(self.timestamp)
            if start is None:
                yield dict(self.nothing_item(log), timestamp=self.timestamp,
                           latest_timestamp=latest_timestamp(log))
                return
        elif start is not None and start >= log.end_offset():
            yield dict(self.nothing_item(log), offset=start)
            return
        first = log.segment_index_for(start) if start is not None else 0
        for number, segment in enumerate(log.segments[first:], first):
            position = 0
            if start is not None and number == first:
                position = segment.offset_index.lookup(start)[1]
            served = {} if segment.segment_id is None else {
                "segment_id": segment.segment_id,
                "serves": [segment.first_served,
                           None if segment.serves_to is None else segment.serves_to - 1]}
            yield {"kind": "segment", "file": segment.log_path, "topic": log.topic,
                   "partition": log.partition, "base_offset": segment.base_offset,
                   "size": segment.size, "start_position": position, **served}
            with segment.store.reader(segment.log_path, segment.size,
                                      segment.log_chunks) as reader:
                for item in walk_log(reader, segment.log_path, segment.size, position):
                    if isinstance(item, LogStop):
                        yield {"kind": "stop", "file": segment.log_path,
                               "position": item.position, "remaining": item.remaining,
                               "stop": item.kind, "reason": item.reason}
                        break
                    if start is not None and item.header.last_offset < start:
                        continue
                    # a tiered log's remote segments overlap: each batch once
                    if not segment.serves_entry(item.header, first=number == first):
                        continue
                    yield from self.entry_items(segment.log_path, item)

    @staticmethod
    def nothing_item(log: PartitionLog) -> dict:
        """What a partition holds, when it holds nothing at or after the --offset or
        --timestamp asked (the caller adds which)."""
        return {"kind": "nothing", "topic": log.topic, "partition": log.partition,
                "directory": log.directory, "log_start_offset": log.start_offset,
                "log_end_offset": log.end_offset()}

    def entry_items(self, path: str, entry: LogEntry) -> Iterator[dict]:
        records: List = []
        problem = None
        # A legacy wrapper's base offset is its first inner offset: decoded for every
        # listing; other batches only when their records are asked for.
        if entry.crc_valid and (self.records or entry.legacy_wrapper or entry.header.is_control):
            try:
                records = entry.records(path)
            except (CorruptLogError, SegmentLogError) as damage:
                problem = str(damage)
        yield {"kind": "batch", "file": path, **batch_fields(entry, records)}
        if not self.records:
            return
        if problem is not None or not entry.crc_valid:
            yield {"kind": "undecodable", "file": path, "position": entry.header.position,
                   "reason": problem or "checksum mismatch"}
            return
        metadata = record_metadata(entry, records, path)
        for record in records:
            if self.offset is None or record.offset >= self.offset or self.timestamp is not None:
                yield record_fields(record, entry, self.print_data, self.decoder, metadata,
                                    path, self.key_decoder)


def checkpoint_items(name: str, data: bytes, path: str) -> Iterator[dict]:
    """The entries of a checkpoint file as Kafka loads them (format.checkpoints decodes;
    a later entry for a partition replaces an earlier one), each with its line."""
    if name == checkpoints.PARTITION_METADATA_FILE:
        yield {"kind": "partition_metadata", "file": path, "version": 0,
               "topic_id": checkpoints.parse_partition_metadata(data, path)}
        return
    if name == checkpoints.LEADER_EPOCH_FILE:
        epochs = checkpoints.parse_leader_epochs(data, path)
        yield {"kind": "checkpoint", "file": path, "checkpoint": name,
               "holds": "leader epochs and the offset each began at", "entries": len(epochs)}
        for entry in epochs:
            yield {"kind": "leader_epoch_entry", "file": path, "line": entry.line,
                   "epoch": entry.epoch, "start_offset": entry.start_offset}
        return
    offsets = checkpoints.parse_offset_checkpoint(data, path)
    yield {"kind": "checkpoint", "file": path, "checkpoint": name,
           "holds": OFFSET_CHECKPOINT_HOLDS[name], "entries": len(offsets)}
    for (topic, partition), entry in sorted(offsets.items(), key=lambda item: item[1].line):
        yield {"kind": "offset_checkpoint_entry", "file": path, "line": entry.line,
               "topic": topic, "partition": partition, "offset": entry.offset}


def text_line(item: dict) -> str:
    """One item in kafka-dump-log's words."""
    kind = item["kind"]
    if kind == "segment":
        serves = item.get("serves")
        return (f"Dumping {item['file']}\nLog starting offset: {item['base_offset']}"
                + (f" (from position {item['start_position']})" if item["start_position"] else "")
                + ("" if serves is None else
                   f"\nRemote segment {item['segment_id']}, serving offsets {serves[0]}.."
                   + ("" if serves[1] is None else str(serves[1]))))
    if kind == "file":
        return f"Dumping {item['file']} ({item['size']} bytes)"
    if kind == "metadata_snapshot":
        return f"Dumping {item['file']}\n" + (
            "KRaft bootstrap snapshot" if item["bootstrap"] else
            f"Snapshot end offset: {item['end_offset']}, epoch: {item['epoch']}")
    if kind == "batch":
        line = (f"baseOffset: {item['base_offset']} lastOffset: {item['last_offset']} "
                f"count: {item['record_count'] if item['record_count'] is not None else '-'} "
                f"baseSequence: {item['base_sequence']} "
                f"lastSequence: {_last_sequence(item)} producerId: {item['producer_id']} "
                f"producerEpoch: {item['producer_epoch']} "
                f"partitionLeaderEpoch: {item['partition_leader_epoch']} "
                f"isTransactional: {_bool(item['is_transactional'])} "
                f"isControl: {_bool(item['is_control'])} ")
        if item["magic"] == 2:
            horizon = item["delete_horizon_ms"]  # as Kafka prints its OptionalLong
            line += "deleteHorizonMs: " + ("OptionalLong.empty " if horizon is None
                                           else f"OptionalLong[{horizon}] ")
        line += (f"position: {item['position']} {item['timestamp_type']}: "
                 f"{item['max_timestamp']} size: {item['size_in_bytes']} magic: {item['magic']} "
                 f"compresscodec: {item['compression']} crc: {item['crc']} "
                 f"isvalid: {_bool(item['crc_valid'])}")
        return line
    if kind == "record":
        line = (f"| offset: {item['offset']} {item['timestamp_type']}: {item['timestamp']} "
                f"keySize: {item['key_size']} valueSize: {item['value_size']}")
        if item["magic"] == 2:
            line += f" sequence: {item['sequence']}"
        if "control" in item and item["control"]:
            control = item["control"]
            if control["type"] in ("ABORT", "COMMIT"):
                return (line + f" endTxnMarker: {control['type']} "
                        f"coordinatorEpoch: {control['coordinator_epoch']}")
            shown = control_text(item) if "decoder" in item else None
            return line + (shown or f" controlType: {control['type']}")
        line += f" headerKeys: [{','.join(item['header_keys'])}]"  # as Kafka's mkString(",")
        if "decoder" in item:
            if "control" in item:  # a control record whose key is too short for one
                return line + (f" undecodable: {item['decodeError']}"
                               if item["decodeError"] else "")
            return line + data_text(item)
        if "value" in item:
            line += f" key: {_shown(item['key'])} payload: {_shown(item['value'])}"
        return line
    if kind == "nothing":
        name = f"{item['topic']}-{item['partition']}" if item["topic"] else item["directory"]
        start, end = item["log_start_offset"], item["log_end_offset"]
        holds = f"it holds offsets {start}..{end - 1}" if end > start else "it holds no records"
        if "timestamp" in item:
            asked = f"timestamp {item['timestamp']} ({_utc(item['timestamp'])})"
            latest = item["latest_timestamp"]
            holds += ", none with a timestamp" if latest is None else \
                f", the latest timestamp {latest} ({_utc(latest)})"
        else:
            asked = f"offset {item['offset']}"
        return f"Nothing to dump in {name} at or after {asked}: {holds} (log end offset {end})"
    if kind == "undecodable":
        return f"| records not decodable: {item['reason']}"
    if kind == "stop":
        return f"Entries end at position {item['position']} ({item['stop']}): {item['reason']}"
    if kind == "offset_index_entry":
        return f"offset: {item['offset']} position: {item['position']}"
    if kind == "time_index_entry":
        return f"timestamp: {item['timestamp']} offset: {item['offset']}"
    if kind == "zero_padding":
        return (f"{item['entries']} zero entries from byte {item['index_position']} "
                f"(preallocated space)")
    if kind == "aborted_transaction":
        return (f"version: {item['version']} producerId: {item['producer_id']} "
                f"firstOffset: {item['first_offset']} lastOffset: {item['last_offset']} "
                f"lastStableOffset: {item['last_stable_offset']}")
    if kind == "checkpoint":
        count = item["entries"]
        return f"{item['checkpoint']}: {item['holds']}, {count} entr{'y' if count == 1 else 'ies'}"
    if kind == "offset_checkpoint_entry":
        return (f"topic: {item['topic']} partition: {item['partition']} "
                f"offset: {item['offset']} (line {item['line']})")
    if kind == "leader_epoch_entry":
        return (f"epoch: {item['epoch']} startOffset: {item['start_offset']} "
                f"(line {item['line']})")
    if kind == "partition_metadata":
        return f"version: {item['version']} topicId: {item['topic_id']}"
    if kind == "snapshot":
        return (f"version: {item['version']} crc: {item['crc']} "
                f"isvalid: {_bool(item['crc_valid'])} producers: {item['entries']}")
    if kind == "producer":
        return (f"producerId: {item['producer_id']} producerEpoch: {item['producer_epoch']} "
                f"coordinatorEpoch: {item['coordinator_epoch']} "
                f"currentTxnFirstOffset: {item['current_txn_first_offset']} "
                f"lastTimestamp: {item['timestamp']} lastSequence: {item['last_sequence']} "
                f"lastOffset: {item['last_offset']} offsetDelta: {item['offset_delta']}")
    return json.dumps(item)


def _last_sequence(batch: dict) -> int:
    """kafka-dump-log's lastSequence of a batch item (-1 for a legacy message)."""
    if batch["magic"] < 2:
        return -1
    return last_sequence(batch["base_sequence"], batch["last_offset"] - batch["base_offset"])


def json_line(item: dict) -> str:
    return json.dumps(item, default=_bytes_as_base64)


def _bytes_as_base64(value):
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"cannot show {type(value).__name__}")


def _utc(millis: int) -> str:
    moment = datetime.datetime.fromtimestamp(millis / 1000, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _shown(value) -> str:
    return "null" if value is None else value if isinstance(value, str) else json.dumps(value)

