"""The end of a partition's data: a file that shrinks while it is read, and where the
valid data of the last (active) segment ends."""
import os
import shutil
import struct
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from segmentlog_datasource.errors import CorruptLogError
from segmentlog_datasource.format.log import PartitionLog
from segmentlog_datasource.format.scan import ScanOptions
from segmentlog_datasource.read.fragments import scan_fragments
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.read.stream import LogStream, parse_stream_options
from segmentlog_datasource.writer import write_log
from support.kafka_logs import decode_partition
from support.manifest import b64, iter_records, load_manifest

SHRINK_SCRIPT = textwrap.dedent("""
    import os, sys
    from segmentlog_datasource.errors import CorruptLogError
    from segmentlog_datasource.format.log import PartitionLog
    from segmentlog_datasource.format.scan import ScanOptions, SegmentRange, scan_segment

    directory, fast = sys.argv[1], sys.argv[2] == "1"
    segment = PartitionLog.open(directory).segments[0]
    scan = scan_segment(SegmentRange("t", 0, segment.log_path, segment.size, 0, segment.size,
                                     0, 1 << 62, True, min_entry_offset=0),
                        ScanOptions(max_batch_rows=100, use_fast_path=fast))
    first = next(scan)
    # Another process (retention, a truncating follower) cuts the file between batches, at
    # a page boundary: the next mapped page read lies wholly past the end (SIGBUS).
    os.truncate(segment.log_path, segment.size // 3 // 4096 * 4096)
    try:
        for batch in scan:
            pass
    except CorruptLogError as exc:
        print("ERROR", first.num_rows, exc)
    else:
        print("NO ERROR")
""")


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "pure"])
def test_a_segment_that_shrinks_during_a_scan_is_an_error_not_a_crash(tmp_path, fast):
    logdir = str(tmp_path)
    write_log(logdir, pa.table({"value": [b"v%05d" % i + b"x" * 200 for i in range(5000)]}),
              topic="t", num_partitions=1, batch_size=50)
    directory = os.path.join(logdir, "t-0")
    size = os.path.getsize(os.path.join(directory, "00000000000000000000.log"))
    done = subprocess.run([sys.executable, "-c", SHRINK_SCRIPT, directory, "1" if fast else "0"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    out = done.stdout.strip()
    assert out.startswith("ERROR 100 "), out
    assert f"shrank from {size} to {size // 3 // 4096 * 4096} bytes while being read" in out
    assert "00000000000000000000.log" in out


# ------------------------------------------- where the active segment's valid data ends
# The rule (docs/reading.md, "What is read"), Kafka's recovery of an active segment: its data ends
# at the first entry that is short (torn), zero-filled (preallocated space), cannot be
# framed (impossible length, unknown magic), or is its last entry and fails its checksum. Planning, every split, header walks and the
# streaming tail all stop there; the same damage anywhere else is a CorruptLogError.
SPLIT_BYTES = 6000  # several splits per segment


def _batches(path):
    """(position, base offset, size) of the complete entries of a segment, by struct."""
    with open(path, "rb") as handle:
        data = handle.read()
    found, pos = [], 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length <= 0 or pos + 12 + length > len(data):
            break
        found.append((pos, base, 12 + length))
        pos += 12 + length
    return found


@pytest.fixture(scope="module")
def generated_log(tmp_path_factory):
    """A generated log of several segments and its [(offset, value)], written once: each
    test damages a copy of it."""
    logdir = str(tmp_path_factory.mktemp("log-end") / "generated")
    write_log(logdir, pa.table({"value": [b"v%05d" % i + b"y" * 150 for i in range(3000)]}),
              topic="g", num_partitions=1, batch_size=20, segment_bytes=200_000,
              index_interval_bytes=2048)
    directory = os.path.join(logdir, "g-0")
    return directory, [(r[0], r[4]) for r in decode_partition(directory)]


def _writable_copy(source, target):
    shutil.copytree(source, target)
    os.chmod(target, 0o755)
    for name in os.listdir(target):
        os.chmod(os.path.join(target, name), 0o644)
    return target


@pytest.fixture(params=["kafka-live", "generated"])
def partition(request, kafka_logdir, tmp_path):
    """(partition directory, [(offset, value)] of the undamaged log), a copy of its own
    in a log dir of its own: Kafka's live-0 (a torn tail, preallocated indexes) or a
    generated log of several segments."""
    if request.param == "kafka-live":
        directory = _writable_copy(os.path.join(kafka_logdir, "live-0"),
                                   str(tmp_path / "logdir" / "live-0"))
        manifest = load_manifest(kafka_logdir, "live-0")
        rows = [(r["offset"], b64(r["value"])) for _, b, r in iter_records(manifest)
                if not b["is_control"]]
        return directory, rows
    source, rows = request.getfixturevalue("generated_log")
    return _writable_copy(source, str(tmp_path / "generated" / "g-0")), rows


def _last_log(directory):
    return PartitionLog.open(directory).segments[-1].log_path


def _every_way(directory, verify=True):
    """Rows read through a batch plan of several splits (and each split alone) and
    through a streaming LogStream, which must agree; and the log end offset."""
    logdir = os.path.dirname(directory)
    options = {"path": logdir, "maxPartitionBytes": str(SPLIT_BYTES),
               "verifyChecksums": str(verify).lower()}
    read = parse_read_options(options)
    fragments = plan_fragments(read, Constraints())
    last = PartitionLog.open(directory).segments[-1]
    assert sum(1 for f in fragments if f.log_path == last.log_path) >= 2
    scan = ScanOptions(verify_checksums=verify, max_batch_rows=50)
    batch_rows = []
    for fragment in fragments:
        batch_rows.extend(_rows(scan_fragments([fragment], scan)))
    stream = LogStream(parse_stream_options(options))
    start = stream.initial_offsets()
    end = stream.latest_offsets(start, None)
    stream_rows = _rows(b for group in stream.plan(start, end)
                        for b in scan_fragments(group, scan))
    assert stream_rows == batch_rows
    end_offset = PartitionLog.open(directory).end_offset(verify=verify)
    assert end_offset == (batch_rows[-1][0] + 1 if batch_rows else 0)
    assert list(end.values()) == [end_offset]
    return batch_rows


def _flip_max_timestamp(path, position):
    """Damage a CRC-covered byte that no row shows (the batch's max timestamp)."""
    with open(path, "r+b") as handle:
        handle.seek(position + 42)
        byte = handle.read(1)
        handle.seek(position + 42)
        handle.write(bytes([byte[0] ^ 0x01]))


def _rows(batches):
    rows = []
    for batch in batches:
        columns = batch.to_pydict()
        rows.extend(zip(columns["offset"], columns["value"]))
    return rows


def test_an_undamaged_log_reads_whole(partition):
    directory, rows = partition
    assert _every_way(directory) == rows


def test_a_huge_length_in_the_active_segment_ends_its_data_for_every_split(partition):
    directory, rows = partition
    path = _last_log(directory)
    position, base, _ = _batches(path)[len(_batches(path)) // 3]  # before index entries
    with open(path, "r+b") as handle:
        handle.seek(position + 8)
        handle.write(struct.pack(">i", 2 ** 31 - 1))
    assert _every_way(directory) == [r for r in rows if r[0] < base]


def test_a_segment_truncated_below_its_index_entries_ends_at_the_last_whole_batch(partition):
    directory, rows = partition
    path = _last_log(directory)
    batches = _batches(path)
    position, base, size = batches[len(batches) // 2]
    os.truncate(path, position + size // 2)  # mid-batch; index entries lie beyond
    assert _every_way(directory) == [r for r in rows if r[0] < base]


def test_zero_filled_space_after_the_last_batch_ends_the_data(partition):
    directory, rows = partition
    path = _last_log(directory)
    position, base, size = _batches(path)[-1]
    os.truncate(path, position + size)  # drop a torn tail, if any
    os.truncate(path, position + size + 300_000)  # then preallocate, as log.preallocate
    assert _every_way(directory) == rows
    assert _every_way(directory, verify=False) == rows


@pytest.mark.parametrize("damage", ["unknown magic", "zero length"])
def test_an_unframeable_entry_in_the_active_segment_ends_its_data_for_every_split(
        partition, damage, caplog):
    directory, rows = partition
    path = _last_log(directory)
    position, base, _ = _batches(path)[len(_batches(path)) // 3]  # before index entries
    with open(path, "r+b") as handle:
        if damage == "unknown magic":
            handle.seek(position + 16)
            handle.write(bytes([7]))
        else:
            handle.seek(position + 8)
            handle.write(struct.pack(">i", 0))
    assert _every_way(directory) == [r for r in rows if r[0] < base]
    assert _every_way(directory, verify=False) == [r for r in rows if r[0] < base]
    assert any(f"{path}: the active segment's data ends at byte {position}" in message
               for message in caplog.messages)


def test_a_checksum_failure_in_the_active_segments_last_entry_ends_its_data(partition):
    directory, rows = partition
    path = _last_log(directory)
    position, base, size = _batches(path)[-1]
    _flip_max_timestamp(path, position)
    assert _every_way(directory) == [r for r in rows if r[0] < base]
    # Unchecked, the entry reads as it stands (docs/reading.md: what can go wrong without it).
    assert _every_way(directory, verify=False) == rows


def test_a_checksum_failure_before_the_last_entry_is_an_error(partition):
    directory, rows = partition
    path = _last_log(directory)
    position, base, size = _batches(path)[len(_batches(path)) // 2]
    _flip_max_timestamp(path, position)
    with pytest.raises(CorruptLogError) as error:
        _every_way(directory)
    assert error.value.path == path and error.value.position == position
