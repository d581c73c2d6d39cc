"""The compiled walk of magic-2 batch headers and its pure-Python twin (fastpath
v2_batch_headers): the same rows and stops on every fixture segment and on damage, and
rows as kafka-python-independent struct parsing (support.kafka_logs) reads them; the
active segment's end found with the walk equals the end found header by header."""
import glob
import os
import struct
import sys

import pytest

from segmentlog_datasource.format.fastpath.pure import v2_batch_headers as pure_walk
from segmentlog_datasource.format.log import PartitionLog
from support import broker_disks as disks
from support.compiled import compiled, requires_compiled
from support.fixtures import fixtures_root
from support.kafka_logs import read_batches

SEGMENTS = sorted(glob.glob(os.path.join(disks.root(), "broker-*", "*", "*.log"))
                  + glob.glob(os.path.join(fixtures_root(), "*", "*.log")))
ROW = struct.Struct("=qqq")


def rows_of(packed):
    return [ROW.unpack_from(packed, i) for i in range(0, len(packed), ROW.size)]


@requires_compiled
@pytest.mark.parametrize("start_fraction", [0, 0.5])
def test_the_compiled_walk_and_its_twin_agree_on_every_fixture_segment(start_fraction):
    for path in SEGMENTS:
        with open(path, "rb") as handle:
            data = handle.read()
        for position, end, next_offset in ((0, len(data), -(1 << 63)),
                                           (61, len(data), 0),
                                           (0, int(len(data) * start_fraction) or 100, 0)):
            walked = compiled.v2_batch_headers(data, position, end, next_offset)
            assert walked == pure_walk(data, position, end, next_offset), (path, position, end)
            fd = os.open(path, os.O_RDONLY)  # headers read with pread: the same walk
            try:
                assert compiled.v2_batch_headers(fd, position, end, next_offset) == walked
                assert pure_walk(fd, position, end, next_offset) == walked
            finally:
                os.close(fd)


def test_the_walk_reads_the_headers_struct_parsing_reads():
    path = os.path.join(disks.root(), "broker-0", "txn-0", "00000000000000000000.log")
    with open(path, "rb") as handle:
        data = handle.read()
    stop, last, packed = pure_walk(data, 0, len(data), 0)
    batches = read_batches(path)
    assert stop == len(data) and last == batches[-1]["position"]
    assert rows_of(packed) == [(b["base_offset"], b["last_offset"], b["crc"]) for b in batches]


def damaged_cases(data, batches):
    """(what, bytes) of a segment with damage the walk must stop at, and where."""
    second = batches[1]["position"]
    cases = []
    torn = data[:second + 30]
    cases.append(("torn", torn, second))
    zeros = data[:second] + bytes(200)
    cases.append(("zero-filled", zeros, second))
    backwards = bytearray(data)
    struct.pack_into(">q", backwards, second, batches[0]["base_offset"])
    cases.append(("offsets backwards", bytes(backwards), second))
    negative = bytearray(data)
    struct.pack_into(">i", negative, second + 57, -1)
    cases.append(("negative count", bytes(negative), second))
    legacy = bytearray(data)
    legacy[second + 16] = 1
    cases.append(("another magic", bytes(legacy), second))
    short = bytearray(data)
    struct.pack_into(">i", short, second + 8, 10)
    cases.append(("impossible length", bytes(short), second))
    return cases


@pytest.mark.parametrize("case", range(6))
def test_the_walk_stops_where_the_header_by_header_walk_would_look_closer(case, tmp_path):
    path = os.path.join(disks.root(), "broker-0", "orders-0", "00000000000000000000.log")
    with open(path, "rb") as handle:
        data = handle.read()
    what, damaged, stop_at = damaged_cases(data, read_batches(path))[case]
    walks = [pure_walk] + ([compiled.v2_batch_headers] if compiled else [])
    copy = tmp_path / "damaged.log"
    copy.write_bytes(damaged)
    fd = os.open(copy, os.O_RDONLY)
    try:
        for walk in walks:
            for source in (damaged, fd):
                stop, last, packed = walk(source, 0, len(damaged), 0)
                assert (stop, last, len(rows_of(packed))) == (stop_at, 0, 1), (what, walk)
    finally:
        os.close(fd)


@pytest.mark.parametrize("broker,name", [("broker-0", "orders-0"), ("broker-2", "diverged-0"),
                                         ("broker-0", "txn-0")])
def test_the_active_segments_end_is_the_same_with_the_walk(broker, name, monkeypatch):
    directory = os.path.join(disks.root(), broker, name)
    with_walk = PartitionLog.open(directory).segments[-1]
    ends = (with_walk.valid_end(False), with_walk.valid_end(True))
    monkeypatch.setattr(sys.modules["segmentlog_datasource.format.fastpath"],
                        "batch_header_walker", lambda *a, **k: None)
    header_by_header = PartitionLog.open(directory).segments[-1]
    assert (header_by_header.valid_end(False), header_by_header.valid_end(True)) == ends
    assert ends[0] == with_walk.size
