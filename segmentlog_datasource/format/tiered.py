"""Remote (tiered, KIP-405) partitions: which objects hold each segment and its indexes.

No I/O happens here: callers pass listings ({relative name: size}) and a callback
`read(name, offset, length) -> bytes`, so the same code serves local copies and object
stores. Two layouts are understood:

`aiven` -- Aiven's RemoteStorageManager for Apache Kafka (tiered-storage-for-apache-kafka,
  released since Nov 2023). Keys are `<key prefix><topic>-<topicId>/<partition>/` then,
  per segment, `<base offset, 20 digits>-<segment id>.` + `log` | `indexes` |
  `rsm-manifest`. Ids are Kafka Uuids in URL-safe base64 without padding (22 chars).
  The manifest (JSON, `"version": "1"`) is uploaded last, so a segment without one is an
  upload that did not finish and is skipped. The `.indexes` object packs the offset,
  time, producer-snapshot, leader-epoch and (optional) transaction indexes back to back;
  the manifest's `segmentIndexes` gives each one's `position` and `size`. `chunkIndex`
  maps the original `.log` bytes to the stored ones: stored as they are (`fixed`, equal
  sizes), or, with `"compression": true`, as independent zstd frames per chunk
  (`variable`, sizes zstd-compressed and base64-encoded). Encrypted segments cannot be
  read without the broker's private key and raise UnsupportedFormatError.

`local` -- Apache Kafka's LocalTieredStorage (the RemoteStorageManager of Kafka's own
  tiered-storage tests). Directories are `<topic>-<partition>-<topicId>/`, files
  `<base offset, 20 digits>-<segment id>` + `.log` | `.index` | `.timeindex` |
  `.txnindex` (only when the segment had one) | `.leader_epoch_checkpoint` | `.snapshot`.
  It keeps no metadata, so the end offset of a segment is unknown.

A store holds more than the segments a consumer is served: unfinished uploads, a
segment uploaded twice, uploads of a diverged leader, segments being deleted. Which ones
count is decided by the `__remote_log_metadata` topic (read.tiered); `segment_copies`
gives every copy for that. Without the metadata, `remote_segments` reads the layout
alone: several segment ids with one base offset are settled by the manifests where they
can be (every copy's `remoteLogSegmentMetadata` records the same end offset and original
size: the copy with the latest `eventTimestampMs` is read, as the copies hold the same
offsets). Anything else -- copies that differ, a tie, a missing metadata record, any
duplicate in the `local` layout, or segments whose recorded ranges overlap -- raises
AmbiguousLayoutError, which says to give the metadata.
"""
import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from ..errors import CorruptLogError, UnsupportedFormatError


class AmbiguousLayoutError(CorruptLogError):
    """The objects alone cannot tell which remote segments a consumer is served; the
    `__remote_log_metadata` records can (read.tiered)."""

    HINT = ("; give the brokers' log dirs with the store (or the __remote_log_metadata "
            "partitions), whose remote log metadata says which segments count")

    def __init__(self, path, position, reason):
        super().__init__(path, position, reason + self.HINT)

AIVEN = "aiven"
LOCAL = "local"
LAYOUTS = (AIVEN, LOCAL)

ReadRange = Callable[[str, int, int], bytes]

_UUID = r"[A-Za-z0-9_-]{22}"
_TOPIC = r"[A-Za-z0-9._-]+"
_AIVEN_TOPIC_DIR = re.compile(rf"({_TOPIC})-({_UUID})")
_AIVEN_PARTITION_DIR = re.compile(r"\d+")
_LOCAL_PARTITION_DIR = re.compile(rf"({_TOPIC})-(\d+)-({_UUID})")

_AIVEN_SUFFIXES = ("log", "indexes", "rsm-manifest")
_LOCAL_SUFFIXES = ("log", "index", "timeindex", "txnindex", "leader_epoch_checkpoint",
                   "snapshot")
# Kafka's LocalTieredStorage treats every file but the transaction index as required.
_LOCAL_REQUIRED = ("log", "index", "timeindex", "leader_epoch_checkpoint", "snapshot")


def _object_name_patterns(suffixes) -> Tuple["re.Pattern", "re.Pattern"]:
    alternatives = "|".join(re.escape(suffix) for suffix in suffixes)
    exact = re.compile(rf"(\d{{20}})-({_UUID})\.({alternatives})")
    # A name that starts like a segment object and ends in one of its suffixes, but is not
    # one: reported, as it is more likely a damaged key than a file of something else.
    similar = re.compile(rf"\d+-[^/]*\.({alternatives})")
    return exact, similar


_AIVEN_NAMES = _object_name_patterns(_AIVEN_SUFFIXES)
_LOCAL_NAMES = _object_name_patterns(_LOCAL_SUFFIXES)

_MAX_CHUNK_SIZES_BYTES = 10 * 1024 * 1024  # the bound Aiven's reader puts on the sizes list


@dataclass(frozen=True)
class ObjectRange:
    """`length` bytes of object `name` from byte `offset`: a whole object or a slice."""
    name: str
    offset: int
    length: int


@dataclass(frozen=True)
class LogChunk:
    """One zstd frame of a compressed `.log` object and the original bytes it holds."""
    original_offset: int
    original_size: int
    stored_offset: int
    stored_size: int


@dataclass(frozen=True)
class RemoteSegment:
    """One remote segment. `log_size` counts the original segment bytes; `end_offset` is
    the last offset the remote metadata records (None when the layout keeps none).
    `log_chunks` is None when `log_object` holds the segment bytes as they are; otherwise
    read them with `read_log_range`. An index is None when the segment has none; a range
    of length 0 is an empty index. `missing` names the files an unfinished upload or a
    partial deletion left out (the segment cannot be read then; `log_object` may be None)."""
    base_offset: int
    end_offset: Optional[int]
    segment_id: str
    log_object: Optional[str]
    log_size: int
    offset_index: Optional[ObjectRange]
    time_index: Optional[ObjectRange]
    txn_index: Optional[ObjectRange]
    log_chunks: Optional[Tuple[LogChunk, ...]] = None
    leader_epoch_index: Optional[ObjectRange] = None
    event_timestamp_ms: Optional[int] = None  # when the uploading broker began the copy
    missing: Tuple[str, ...] = ()
    some_object: str = ""  # one object of the segment, to name it in errors


@dataclass(frozen=True)
class RemotePartition:
    """A partition directory of a layout: `prefix` is its relative path, ending in '/'."""
    layout: str
    topic: str
    partition: int
    topic_id: str
    prefix: str


# ---------------------------------------------------------------- discovery


def find_remote_partitions(listing: Mapping[str, int]) -> List[RemotePartition]:
    """The remote partition directories in a recursive listing of a root ('/'-separated
    relative paths), ordered by prefix. A directory counts when it holds at least one
    object named like a segment object of its layout; other paths are ignored. For the
    `aiven` layout the root is the directory the key prefix names (a prefix that does
    not end in '/' becomes part of the topic name)."""
    found: Dict[str, RemotePartition] = {}
    for path in listing:
        parts = path.split("/")
        if len(parts) < 2:
            continue
        name = parts[-1]
        if len(parts) >= 3 and _AIVEN_NAMES[1].fullmatch(name):
            topic_dir = _AIVEN_TOPIC_DIR.fullmatch(parts[-3])
            if topic_dir and _AIVEN_PARTITION_DIR.fullmatch(parts[-2]):
                prefix = "/".join(parts[:-1]) + "/"
                found.setdefault(prefix, RemotePartition(
                    AIVEN, topic_dir.group(1), int(parts[-2]), topic_dir.group(2), prefix))
                continue
        if _LOCAL_NAMES[1].fullmatch(name):
            partition_dir = _LOCAL_PARTITION_DIR.fullmatch(parts[-2])
            if partition_dir:
                prefix = "/".join(parts[:-1]) + "/"
                found.setdefault(prefix, RemotePartition(
                    LOCAL, partition_dir.group(1), int(partition_dir.group(2)),
                    partition_dir.group(3), prefix))
    return [found[prefix] for prefix in sorted(found)]


def partition_listing(listing: Mapping[str, int], prefix: str) -> Dict[str, int]:
    """The part of a root listing inside `prefix`, with names relative to it."""
    return {path[len(prefix):]: size for path, size in listing.items()
            if path.startswith(prefix) and "/" not in path[len(prefix):]}


# ---------------------------------------------------------------- one partition


def remote_segments(layout: str, listing: Mapping[str, int],
                    read: ReadRange) -> List[RemoteSegment]:
    """The segments of one remote partition in base-offset order, read from the layout
    alone (see the module's text). `listing` holds the partition directory's objects by
    name relative to it; `read` fetches manifests."""
    return settle_by_layout(layout, segment_copies(layout, listing, read))


def settle_by_layout(layout: str, copies: List[RemoteSegment]) -> List[RemoteSegment]:
    """The segments a consumer reads of `copies` (segment_copies) by the layout alone."""
    by_base: Dict[int, List[RemoteSegment]] = {}
    for copy in copies:
        if layout == AIVEN and "rsm-manifest" in copy.missing:
            continue  # the manifest is uploaded last: this upload never finished
        if copy.missing:
            _raise_missing(copy)
        by_base.setdefault(copy.base_offset, []).append(copy)
    segments = [_choose_copy(base, by_base[base]) for base in sorted(by_base)]
    for before, after in zip(segments, segments[1:]):
        if before.end_offset is not None and before.end_offset >= after.base_offset:
            raise AmbiguousLayoutError(
                before.log_object, None,
                f"the remote metadata says this segment ends at offset {before.end_offset}, "
                f"but segment {after.log_object} starts at {after.base_offset}: the remote "
                f"segments overlap")
    return segments


def segment_copies(layout: str, listing: Mapping[str, int],
                   read: ReadRange) -> List[RemoteSegment]:
    """Every segment of one remote partition the objects show, by (base offset, segment
    id), whatever state its upload or deletion is in; an Aiven segment's manifest is read
    where it is there."""
    if layout == AIVEN:
        return _aiven_segments(listing, read)
    if layout == LOCAL:
        return _local_segments(listing)
    raise ValueError(f"unknown remote layout {layout!r}; known: {', '.join(LAYOUTS)}")


def _raise_missing(copy: RemoteSegment):
    if copy.missing == ("log",) and copy.log_object is None:
        raise CorruptLogError(
            copy.some_object, None,
            f"the manifest has no {copy.base_offset:020d}-{copy.segment_id}.log beside it: "
            f"the segment was partly deleted or lost (or written in the Iceberg format, "
            f"which is not a Kafka segment)")
    raise CorruptLogError(
        copy.some_object, None, f"segment {copy.segment_id} lacks its "
        f"{', '.join('.' + suffix for suffix in copy.missing)} file(s): an unfinished "
        f"copy or a partial deletion")


def check_readable(copy: RemoteSegment) -> None:
    """A CorruptLogError naming the segment when files it needs are missing."""
    if copy.missing:
        _raise_missing(copy)


def _group_objects(listing, patterns) -> Dict[Tuple[int, str], Dict[str, str]]:
    """Segment objects by (base offset, segment id), each as {suffix: name}."""
    exact, similar = patterns
    groups: Dict[Tuple[int, str], Dict[str, str]] = {}
    for name in listing:
        if "/" in name:
            continue
        match = exact.fullmatch(name)
        if match is None:
            if similar.fullmatch(name):
                raise CorruptLogError(
                    name, None, "not a remote segment object name: expected "
                    "<base offset as 20 digits>-<22-character segment id>.<suffix>")
            continue
        base_offset = int(match.group(1))
        if base_offset >= 2**63:
            raise CorruptLogError(name, None, "the base offset in the name exceeds a long")
        groups.setdefault((base_offset, match.group(2)), {})[match.group(3)] = name
    return groups


def _local_segments(listing) -> List[RemoteSegment]:
    copies = []
    for (base_offset, segment_id), files in sorted(_group_objects(listing, _LOCAL_NAMES).items()):
        missing = tuple(suffix for suffix in _LOCAL_REQUIRED if suffix not in files)

        def whole(suffix):
            name = files.get(suffix)
            return None if name is None else ObjectRange(name, 0, listing[name])

        log_object = files.get("log")
        copies.append(RemoteSegment(
            base_offset=base_offset, end_offset=None, segment_id=segment_id,
            log_object=log_object, log_size=listing[log_object] if log_object else 0,
            offset_index=whole("index"), time_index=whole("timeindex"),
            txn_index=whole("txnindex"), leader_epoch_index=whole("leader_epoch_checkpoint"),
            missing=missing, some_object=sorted(files.values())[0]))
    return copies


def _aiven_segments(listing, read) -> List[RemoteSegment]:
    copies = []
    for (base_offset, segment_id), objects in sorted(_group_objects(listing, _AIVEN_NAMES).items()):
        manifest = objects.get("rsm-manifest")
        some_object = sorted(objects.values())[0]
        if manifest is None or "log" not in objects:
            copies.append(RemoteSegment(
                base_offset=base_offset, end_offset=None, segment_id=segment_id,
                log_object=objects.get("log"), log_size=0, offset_index=None,
                time_index=None, txn_index=None,
                missing=tuple(s for s in ("rsm-manifest", "log") if s not in objects),
                some_object=manifest or some_object))
            continue
        copies.append(_parse_aiven_manifest(base_offset, segment_id, objects, listing,
                                            read(manifest, 0, listing[manifest])))
    return copies


def _choose_copy(base_offset: int, copies: List[RemoteSegment]) -> RemoteSegment:
    if len(copies) == 1:
        return copies[0]
    names = ", ".join(sorted(c.some_object for c in copies))
    if copies[0].some_object.endswith(".rsm-manifest"):
        shapes = {(c.end_offset, c.log_size) for c in copies}
        if None in {c.event_timestamp_ms for c in copies} or len(shapes) > 1:
            raise AmbiguousLayoutError(
                copies[0].some_object, None,
                f"{len(copies)} remote segments start at offset {base_offset} ({names}) and "
                f"their manifests do not record the same end offset and size, so which one "
                f"the broker committed cannot be told from the objects")
        latest = max(c.event_timestamp_ms for c in copies)
        chosen = [c for c in copies if c.event_timestamp_ms == latest]
        if len(chosen) == 1:
            return chosen[0]
        raise AmbiguousLayoutError(
            chosen[0].some_object, None,
            f"{len(chosen)} remote segments start at offset {base_offset} ({names}) with the "
            f"same eventTimestampMs {latest}: which copy is current cannot be told")
    raise AmbiguousLayoutError(
        copies[0].log_object or copies[0].some_object, None,
        f"{len(copies)} segments start at offset {base_offset} "
        f"({', '.join(sorted(c.log_object or c.some_object for c in copies))}) and this "
        f"layout keeps no metadata to choose between them")


# ---------------------------------------------------------------- Aiven manifests


def _parse_aiven_manifest(base_offset, segment_id, objects, listing, data) -> RemoteSegment:
    manifest = objects["rsm-manifest"]

    def corrupt(reason):
        return CorruptLogError(manifest, None, reason)

    try:
        document = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise corrupt(f"not a JSON segment manifest: {error}") from None
    if not isinstance(document, dict):
        raise corrupt("a segment manifest is a JSON object")
    version = document.get("version")
    if version != "1":
        raise UnsupportedFormatError(
            f"{manifest}: segment manifest version {version!r} is not supported (known: '1')")
    if document.get("encryption") is not None:
        raise UnsupportedFormatError(
            f"{manifest}: the segment is encrypted; its data key can only be opened with the "
            f"private key the brokers were configured with, so segmentlog cannot read it")
    compression = document.get("compression")
    if not isinstance(compression, bool):
        raise corrupt("'compression' must be true or false")

    log_object = objects["log"]
    log_size, log_chunks = _chunk_index(document.get("chunkIndex"), compression,
                                        listing[log_object], corrupt)
    indexes_object = objects.get("indexes")
    offset_index, time_index, txn_index, leader_epoch_index = _segment_indexes(
        document.get("segmentIndexes"), indexes_object,
        None if indexes_object is None else listing[indexes_object], corrupt)

    end_offset = event_timestamp_ms = None
    metadata = document.get("remoteLogSegmentMetadata")
    if metadata is not None:  # manifests of the first releases lack it
        if not isinstance(metadata, dict):
            raise corrupt("'remoteLogSegmentMetadata' must be an object")
        start_offset = _integer(metadata, "startOffset", "remoteLogSegmentMetadata", corrupt)
        end_offset = _integer(metadata, "endOffset", "remoteLogSegmentMetadata", corrupt)
        event_timestamp_ms = _integer(metadata, "eventTimestampMs", "remoteLogSegmentMetadata",
                                      corrupt)
        if start_offset != base_offset:
            raise corrupt(f"startOffset {start_offset} differs from the base offset "
                          f"{base_offset} in the object name")
        if end_offset < start_offset:
            raise corrupt(f"endOffset {end_offset} is before startOffset {start_offset}")
        segment_key = metadata.get("remoteLogSegmentId")
        recorded_id = segment_key.get("id") if isinstance(segment_key, dict) else None
        if recorded_id is not None and recorded_id != segment_id:
            raise corrupt(f"the manifest is for segment id {recorded_id!r}, but the object "
                          f"name says {segment_id!r}")
    return RemoteSegment(
        base_offset=base_offset, end_offset=end_offset, segment_id=segment_id,
        log_object=log_object, log_size=log_size, offset_index=offset_index,
        time_index=time_index, txn_index=txn_index, log_chunks=log_chunks,
        leader_epoch_index=leader_epoch_index, event_timestamp_ms=event_timestamp_ms,
        some_object=manifest)


def _integer(mapping, key, where, corrupt, minimum=None) -> int:
    value = mapping.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise corrupt(f"{where}.{key} must be an integer, not {value!r}")
    if minimum is not None and value < minimum:
        raise corrupt(f"{where}.{key} must be at least {minimum}, not {value}")
    return value


def _chunk_index(chunk_index, compression, stored_size, corrupt):
    """(original log size, chunks or None), checked against the stored object size."""
    if not isinstance(chunk_index, dict):
        raise corrupt("'chunkIndex' must be an object")
    kind = chunk_index.get("type")
    chunk_size = _integer(chunk_index, "originalChunkSize", "chunkIndex", corrupt, 1)
    original_size = _integer(chunk_index, "originalFileSize", "chunkIndex", corrupt, 0)
    count = -(-original_size // chunk_size)
    if kind == "fixed":
        if compression:
            raise corrupt("a compressed segment needs a 'variable' chunk index")
        transformed = _integer(chunk_index, "transformedChunkSize", "chunkIndex", corrupt, 0)
        final = _integer(chunk_index, "finalTransformedChunkSize", "chunkIndex", corrupt, 0)
        last = original_size - (count - 1) * chunk_size if count else 0
        # Without compression and encryption, every chunk is stored as it is.
        if transformed != chunk_size or (count and final != last):
            raise corrupt(
                f"the chunk index stores chunks of {chunk_size} bytes as {transformed} "
                f"(the last, {last} bytes, as {final}): a transformation other than "
                f"compression, which segmentlog cannot undo")
        if stored_size != original_size:
            raise corrupt(f"the manifest says the segment holds {original_size} bytes, but its "
                          f".log object holds {stored_size}")
        return original_size, None
    if kind == "variable":
        if not compression:
            raise corrupt("a 'variable' chunk index without compression means a "
                          "transformation segmentlog cannot undo")
        sizes = _chunk_sizes(chunk_index.get("transformedChunks"), corrupt)
        if len(sizes) != count:
            raise corrupt(f"the chunk index lists {len(sizes)} stored chunks for "
                          f"{original_size} bytes in chunks of {chunk_size} ({count} chunks)")
        chunks = []
        original_offset = stored_offset = 0
        for stored in sizes:
            original = min(chunk_size, original_size - original_offset)
            chunks.append(LogChunk(original_offset, original, stored_offset, stored))
            original_offset += original
            stored_offset += stored
        if stored_offset != stored_size:
            raise corrupt(f"the chunk index stores {stored_offset} bytes, but the .log object "
                          f"holds {stored_size}")
        return original_size, tuple(chunks)
    raise corrupt(f"unknown chunkIndex type {kind!r} (known: 'fixed', 'variable')")


def _chunk_sizes(encoded, corrupt) -> List[int]:
    """Decode `transformedChunks`: base64 of a zstd frame of Aiven's chunk-sizes codec
    (int32 count; when count > 1, int32 base and int8 width, count-1 values of that many
    big-endian bytes added to the base; then the last value as an int32)."""
    if not isinstance(encoded, str):
        raise corrupt("chunkIndex.transformedChunks must be a base64 string")
    try:
        frame = base64.b64decode(encoded, validate=True)
    except binascii.Error as error:
        raise corrupt(f"chunkIndex.transformedChunks is not base64: {error}") from None
    zstandard = _zstandard()
    try:
        raw = zstandard.ZstdDecompressor().decompress(frame, max_output_size=_MAX_CHUNK_SIZES_BYTES)
    except zstandard.ZstdError as error:
        raise corrupt(f"chunkIndex.transformedChunks is not a zstd frame: {error}") from None

    def take(position, width):
        if position + width > len(raw):
            raise corrupt("chunkIndex.transformedChunks ends early")
        return int.from_bytes(raw[position:position + width], "big", signed=True)

    count = take(0, 4)
    if count < 0:
        raise corrupt(f"chunkIndex.transformedChunks has a negative count {count}")
    if count <= 1:
        sizes = [] if count == 0 else [take(4, 4)]
        end = 4 + 4 * count
    else:
        base = take(4, 4)
        width = raw[8] if len(raw) > 8 else 0
        if not 1 <= width <= 4:
            raise corrupt(f"chunkIndex.transformedChunks has a value width of {width} bytes")
        sizes = [base + int.from_bytes(raw[9 + i * width:9 + (i + 1) * width], "big")
                 for i in range(count - 1)]
        end = 9 + (count - 1) * width + 4
        sizes.append(take(end - 4, 4))
    if end != len(raw):
        raise corrupt(f"chunkIndex.transformedChunks holds {len(raw)} bytes, its count "
                      f"{count} needs {end}")
    if any(size <= 0 for size in sizes):
        raise corrupt("chunkIndex.transformedChunks lists a chunk of no bytes")
    return sizes


def _segment_indexes(indexes, indexes_object, indexes_size, corrupt):
    if not isinstance(indexes, dict):
        raise corrupt("'segmentIndexes' must be an object (manifests that name separate "
                      "index objects predate Aiven's first release and are not supported)")
    ranges = {}
    for key in ("offset", "timestamp", "producerSnapshot", "leaderEpoch", "transaction"):
        entry = indexes.get(key)
        if entry is None:
            if key != "transaction":
                raise corrupt(f"segmentIndexes.{key} is missing")
            ranges[key] = None
            continue
        if not isinstance(entry, dict):
            raise corrupt(f"segmentIndexes.{key} must be an object")
        position = _integer(entry, "position", f"segmentIndexes.{key}", corrupt, 0)
        size = _integer(entry, "size", f"segmentIndexes.{key}", corrupt, 0)
        if indexes_object is None:
            raise corrupt("the .indexes object of this segment is missing")
        if position + size > indexes_size:
            raise corrupt(f"segmentIndexes.{key} covers bytes {position}..{position + size} "
                          f"of {indexes_object}, which holds {indexes_size}")
        ranges[key] = ObjectRange(indexes_object, position, size)
    return ranges["offset"], ranges["timestamp"], ranges["transaction"], ranges["leaderEpoch"]


# ---------------------------------------------------------------- segment bytes


def read_log_range(segment: RemoteSegment, read: ReadRange, position: int, length: int) -> bytes:
    """Original bytes [position, position+length) of a segment (fewer at its end),
    decompressing the chunks they lie in when the segment is stored compressed."""
    if position < 0 or length < 0:
        raise ValueError("position and length must not be negative")
    end = min(position + length, segment.log_size)
    if position >= end:
        return b""
    if segment.log_chunks is None:
        return read(segment.log_object, position, end - position)
    zstandard = _zstandard()
    decompressor = zstandard.ZstdDecompressor()
    pieces = []
    for chunk in segment.log_chunks:
        chunk_end = chunk.original_offset + chunk.original_size
        if chunk_end <= position or chunk.original_offset >= end:
            continue
        stored = read(segment.log_object, chunk.stored_offset, chunk.stored_size)
        try:
            original = decompressor.decompress(stored, max_output_size=chunk.original_size)
        except zstandard.ZstdError as error:
            raise CorruptLogError(segment.log_object, chunk.stored_offset,
                                  f"a compressed chunk does not decompress: {error}") from None
        if len(original) != chunk.original_size:
            raise CorruptLogError(segment.log_object, chunk.stored_offset,
                                  f"a compressed chunk holds {len(original)} bytes, the "
                                  f"manifest says {chunk.original_size}")
        start = max(position, chunk.original_offset) - chunk.original_offset
        stop = min(end, chunk_end) - chunk.original_offset
        pieces.append(original[start:stop])
    return b"".join(pieces)


def _zstandard():
    try:
        import zstandard
    except ImportError:  # pragma: no cover
        raise UnsupportedFormatError(
            "compressed remote segments need the 'zstandard' package: "
            'pip install "segmentlog[zstd]"') from None
    return zstandard
