"""Build remote (tiered) partitions from a Kafka-written partition directory, laid out as
the uploaders do (test-only; independent of segmentlog's tiered.py):

- Aiven's tiered-storage-for-apache-kafka (KafkaRemoteStorageManager, ObjectKeyFactory,
  SegmentManifestV1): `<prefix><topic>-<topicId>/<partition>/<base:020d>-<id>.log`,
  `.indexes` (offset, time, producer snapshot, leader epoch, transaction index packed in
  that order, the last only when the segment has one) and `.rsm-manifest` (JSON, written
  last). Compression stores each chunk of the log as its own zstd frame with the content
  size in its header, and lists the frame sizes in `transformedChunks`: zstd(sizes codec),
  base64.
- Kafka's LocalTieredStorage (RemoteLogSegmentFileset): `<topic>-<partition>-<topicId>/`
  holding `<base:020d>-<id>` + `.log`, `.index`, `.timeindex`, `.txnindex` (when present),
  `.leader_epoch_checkpoint`, `.snapshot`.

The segment and index bytes are copied untouched from the source directory, which is
only read.
"""
import base64
import json
import os
import random
import struct

import zstandard


def kafka_uuid(rng: random.Random) -> str:
    """A Kafka Uuid as Uuid.toString() prints it: URL-safe base64 of 16 bytes, unpadded.
    Kafka never hands out ids whose text starts with '-'."""
    while True:
        text = base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def source_segments(source_dir: str):
    """(base offset, {suffix: path}) of each segment in a Kafka partition directory, with
    the producer snapshot Kafka's RemoteLogManager uploads with it: the one named after
    the next segment's base offset (or the log end offset after the last segment)."""
    bases = sorted(int(name[:-4]) for name in os.listdir(source_dir) if name.endswith(".log"))
    snapshots = sorted(int(name[:-9]) for name in os.listdir(source_dir)
                       if name.endswith(".snapshot"))
    segments = []
    for i, base in enumerate(bases):
        files = {}
        for suffix in ("log", "index", "timeindex", "txnindex"):
            path = os.path.join(source_dir, f"{base:020d}.{suffix}")
            if os.path.exists(path):
                files[suffix] = path
        later = [s for s in snapshots if s > base and (i + 1 == len(bases) or s <= bases[i + 1])]
        if later:
            files["snapshot"] = os.path.join(source_dir, f"{later[0]:020d}.snapshot")
        segments.append((base, files))
    return segments


def segment_facts(manifest: dict, base_offset: int) -> dict:
    """End offset, max timestamp and leader-epoch starts of a segment, from the fixture's
    manifest."""
    segment = next(s for s in manifest["segments"] if s["base_offset"] == base_offset)
    batches = segment["batches"]
    epochs = {}
    for batch in batches:
        epochs.setdefault(batch.get("partition_leader_epoch", 0), batch["base_offset"])
    return {
        "end_offset": batches[-1]["last_offset"] if batches else base_offset,
        "max_timestamp": max((b["max_timestamp"] for b in batches), default=-1),
        "epochs": epochs,
    }


def leader_epoch_checkpoint(epochs: dict) -> bytes:
    """Kafka's leader-epoch checkpoint text: version 0, the entry count, `epoch offset`."""
    lines = ["0", str(len(epochs))] + [f"{epoch} {offset}" for epoch, offset in
                                       sorted(epochs.items())]
    return ("\n".join(lines) + "\n").encode()


def read_bytes(path):
    if path is None:
        return b""
    with open(path, "rb") as f:
        return f.read()


def encode_chunk_sizes(sizes) -> bytes:
    """Aiven's ChunkSizesBinaryCodec: int32 count; for more than one value, int32 base (the
    minimum of all but the last), int8 width, the others minus the base in `width`
    big-endian bytes; then the last value as int32."""
    if not sizes:
        return struct.pack(">i", 0)
    if len(sizes) == 1:
        return struct.pack(">ii", 1, sizes[0])
    base = min(sizes[:-1])
    width = max(max(1, ((size - base).bit_length() + 7) // 8) for size in sizes[:-1])
    body = b"".join((size - base).to_bytes(width, "big") for size in sizes[:-1])
    return struct.pack(">iib", len(sizes), base, width) + body + struct.pack(">i", sizes[-1])


def write_aiven_partition(source_dir, root, topic, partition, *, manifest, seed=0,
                          key_prefix="", compression=False, chunk_size=4096,
                          event_timestamp_ms=1700000000000):
    """Upload every segment of `source_dir` into `root` as Aiven's plugin lays it out.
    Returns the partition prefix (relative to root) and {base offset: segment id}."""
    rng = random.Random(seed)
    topic_id = kafka_uuid(rng)
    prefix = f"{key_prefix}{topic}-{topic_id}/{partition}/"
    os.makedirs(os.path.join(root, prefix), exist_ok=True)
    ids = {}
    for base, files in source_segments(source_dir):
        segment_id = kafka_uuid(rng)
        ids[base] = segment_id
        write_aiven_segment(root, prefix, topic, topic_id, partition, base, segment_id, files,
                            segment_facts(manifest, base), compression=compression,
                            chunk_size=chunk_size, event_timestamp_ms=event_timestamp_ms + base)
    return prefix, ids


def write_aiven_segment(root, prefix, topic, topic_id, partition, base, segment_id, files,
                        facts, *, compression, chunk_size, event_timestamp_ms):
    stem = os.path.join(root, prefix, f"{base:020d}-{segment_id}")
    log = read_bytes(files["log"])
    if compression:
        frames = [zstandard.ZstdCompressor(write_content_size=True).compress(log[i:i + chunk_size])
                  for i in range(0, len(log), chunk_size)]
        stored = b"".join(frames)
        sizes = encode_chunk_sizes([len(frame) for frame in frames])
        chunk_index = {
            "type": "variable", "originalChunkSize": chunk_size, "originalFileSize": len(log),
            "transformedChunks": base64.b64encode(
                zstandard.ZstdCompressor(write_content_size=True).compress(sizes)).decode(),
        }
    else:
        stored = log
        last = len(log) - (len(log) - 1) // chunk_size * chunk_size if log else 0
        chunk_index = {
            "type": "fixed", "originalChunkSize": chunk_size, "originalFileSize": len(log),
            "transformedChunkSize": chunk_size, "finalTransformedChunkSize": last,
        }
    with open(stem + ".log", "wb") as f:
        f.write(stored)

    packed = [("offset", read_bytes(files.get("index"))),
              ("timestamp", read_bytes(files.get("timeindex"))),
              ("producerSnapshot", read_bytes(files.get("snapshot"))),
              ("leaderEpoch", leader_epoch_checkpoint(facts["epochs"]))]
    if "txnindex" in files:
        packed.append(("transaction", read_bytes(files["txnindex"])))
    segment_indexes = {"transaction": None}
    position = 0
    for key, data in packed:
        segment_indexes[key] = {"position": position, "size": len(data)}
        position += len(data)
    with open(stem + ".indexes", "wb") as f:
        f.write(b"".join(data for _, data in packed))

    document = {
        "version": "1",
        "chunkIndex": chunk_index,
        "segmentIndexes": segment_indexes,
        "compression": compression,
        "remoteLogSegmentMetadata": {
            "remoteLogSegmentId": {
                "topicIdPartition": {"topicId": topic_id,
                                     "topicPartition": {"topic": topic, "partition": partition}},
                "id": segment_id,
            },
            "startOffset": base,
            "endOffset": facts["end_offset"],
            "maxTimestampMs": facts["max_timestamp"],
            "brokerId": 0,
            "eventTimestampMs": event_timestamp_ms,
            "segmentLeaderEpochs": {str(e): o for e, o in sorted(facts["epochs"].items())},
        },
    }
    with open(stem + ".rsm-manifest", "w") as f:
        json.dump(document, f, separators=(",", ":"))
    return stem


def write_local_tiered_partition(source_dir, root, topic, partition, *, manifest, seed=0):
    """Copy every segment of `source_dir` into `root` as Kafka's LocalTieredStorage does.
    Returns the partition directory (relative to root, ending in '/') and {base: id}."""
    rng = random.Random(seed)
    prefix = f"{topic}-{partition}-{kafka_uuid(rng)}/"
    os.makedirs(os.path.join(root, prefix), exist_ok=True)
    ids = {}
    for base, files in source_segments(source_dir):
        segment_id = kafka_uuid(rng)
        ids[base] = segment_id
        stem = os.path.join(root, prefix, f"{base:020d}-{segment_id}")
        contents = {
            "log": read_bytes(files["log"]),
            "index": read_bytes(files.get("index")),
            "timeindex": read_bytes(files.get("timeindex")),
            "leader_epoch_checkpoint": leader_epoch_checkpoint(
                segment_facts(manifest, base)["epochs"]),
            "snapshot": read_bytes(files.get("snapshot")),
        }
        if "txnindex" in files:
            contents["txnindex"] = read_bytes(files["txnindex"])
        for suffix, data in contents.items():
            with open(f"{stem}.{suffix}", "wb") as f:
                f.write(data)
    return prefix, ids


def listing_of(root: str) -> dict:
    """{'/'-separated path relative to root: size} of every file under root."""
    found = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, root).replace(os.sep, "/")] = os.path.getsize(path)
    return found


def reader_of(directory: str):
    """A `read(name, offset, length)` callback over files in `directory`."""
    def read(name, offset, length):
        with open(os.path.join(directory, name), "rb") as f:
            f.seek(offset)
            return f.read(length)
    return read
