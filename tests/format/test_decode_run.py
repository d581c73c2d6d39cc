"""Both accumulators' decode_run(): the same stops, positions and rows, step by step.

Each segment here is walked with decode_run() the way scan_segment walks it: take() on
RUN_FLUSH, stop on RUN_DONE or RUN_END, and step over an entry handed back with
RUN_ENTRY_FOR_PYTHON (the scan loop would read it itself). The compiled accumulator and
the pure-Python one must report the same (position, state) sequence, hold the same rows
and bytes after each step, and give equal batches.
"""
import inspect
import struct
import zlib
from itertools import product

import pytest

from segmentlog_datasource.errors import CorruptLogError
from segmentlog_datasource.format import compression
from segmentlog_datasource.format.crc import crc32c
from segmentlog_datasource.format.entries import read_entry_header
from segmentlog_datasource.format.fastpath import (
    RUN_DONE, RUN_END, RUN_ENTRY_FOR_PYTHON, RUN_FLUSH,
)
from segmentlog_datasource.format.fastpath.pure import RecordAccumulator
from segmentlog_datasource.format.layout import (
    ATTR_CONTROL, ATTR_TRANSACTIONAL, MAX_OFFSET, V2_ATTRIBUTES, V2_CRC, V2_CRC_START,
)
from segmentlog_datasource.format.encode import build_record_batch
from segmentlog_datasource.format.varint import write_varint

from support.compiled import compiled, requires_compiled

CompiledAccumulator = compiled.CompiledAccumulator if compiled is not None else None
pytestmark = requires_compiled

T0 = 1_700_000_000_000


# ------------------------------------------------------------------- segments

def batch(base_offset, count, codec=compression.NONE, attributes=0, seed=0):
    """A magic-2 batch of `count` records (keys, nulls, headers), with `attributes`
    bits added to the encoder's and the CRC made valid again."""
    records = []
    for i in range(count):
        key = None if (i + seed) % 4 == 0 else b"key-%d" % (i + seed)
        value = None if (i + seed) % 5 == 1 else bytes([i % 256]) * ((i * 37 + seed) % 90)
        headers = [("h", b"%d" % i), ("none", None)] if i % 3 == 0 else []
        records.append((key, value, T0 + 1000 * ((i * 7 + seed) % 11) - 5000, headers))
    data = bytearray(build_record_batch(records, base_offset=base_offset, codec=codec))
    if attributes:
        (current,) = struct.unpack_from(">h", data, V2_ATTRIBUTES)
        struct.pack_into(">h", data, V2_ATTRIBUTES, current | attributes)
        struct.pack_into(">I", data, V2_CRC, crc32c(bytes(data[V2_CRC_START:])))
    return bytes(data)


def raw_batch(base_offset, count, records_section, last_offset_delta=None):
    """A magic-2 batch around hand-made record bytes, with a valid CRC."""
    last_delta = count - 1 if last_offset_delta is None else last_offset_delta
    body = struct.pack(">hiqqqhii", 0, max(last_delta, 0), T0, T0, -1, -1, -1,
                       count) + records_section
    return struct.pack(">qiibI", base_offset, 9 + len(body), 0, 2, crc32c(body)) + body


def record_bytes(offset_delta, key, value):
    body = bytearray(b"\x00")  # attributes
    write_varint(0, body)  # timestamp delta
    write_varint(offset_delta, body)
    for field in (key, value):
        write_varint(len(field), body)
        body += field
    write_varint(0, body)  # no headers
    out = bytearray()
    write_varint(len(body), out)
    return bytes(out + body)


def legacy_message(offset, value):
    """A magic-1 message (uncompressed, null key)."""
    body = struct.pack(">bbqi", 1, 0, T0, -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


def damaged_value(data):
    data = bytearray(data)
    data[-2] ^= 0x40  # inside the last value: the records stay well-formed
    return bytes(data)


def control(base_offset, transactional=True):
    return batch(base_offset, 1, attributes=ATTR_CONTROL | (ATTR_TRANSACTIONAL if transactional
                                                            else 0))


SEGMENTS = {
    "plain": lambda: [batch(0, 1), batch(1, 5, seed=1), batch(6, 20, seed=2),
                      batch(26, 3, seed=3)],
    "compressed": lambda: [batch(0, 4), batch(4, 6, compression.LZ4, seed=1), batch(10, 3),
                           batch(13, 5, compression.GZIP, seed=2), batch(18, 4, seed=3)],
    "control": lambda: [batch(0, 4), control(4), batch(5, 6, seed=1), control(11, False),
                        batch(12, 3, seed=2)],
    "transactional": lambda: [batch(0, 3), batch(3, 5, attributes=ATTR_TRANSACTIONAL, seed=1),
                              control(8), batch(9, 4, seed=2),
                              batch(13, 3, compression.LZ4, ATTR_TRANSACTIONAL, seed=3),
                              batch(16, 2, seed=4)],
    "torn tail": lambda: [batch(0, 4), batch(4, 6, seed=1), batch(10, 8, seed=2)[:-9]],
    "torn header": lambda: [batch(0, 4), batch(4, 6, seed=1), batch(10, 8, seed=2)[:40]],
    "damaged crc": lambda: [batch(0, 4), damaged_value(batch(4, 6, seed=1)), batch(10, 5),
                            damaged_value(batch(15, 2, seed=2))],
    "malformed records": lambda: [
        batch(0, 4),
        raw_batch(4, 3, record_bytes(0, b"k", b"v") + record_bytes(1, b"k", b"v")),
        batch(7, 3, seed=1)],
    "empty and legacy": lambda: [batch(0, 2), raw_batch(2, 0, b"", last_offset_delta=1),
                                 batch(4, 3, seed=1), legacy_message(7, b"old"),
                                 batch(8, 2, seed=2)],
    "impossible length": lambda: [batch(0, 3), struct.pack(">qib", 3, 10, 0) + bytes(70)],
    # The last offset reaching 2**63 - 1, then going past it.
    "offsets at the int64 edge": lambda: [batch(0, 3), batch(MAX_OFFSET - 5, 4),
                                          batch(MAX_OFFSET - 1, 1), batch(MAX_OFFSET, 1),
                                          batch(MAX_OFFSET, 3)],
}

OFFSET_RANGES = [
    (0, MAX_OFFSET), (5, 13), (6, 7), (11, 11), (14, MAX_OFFSET), (0, 1),
    (-(2**63) - 7, 2**64), (2**64, 2**65), (0, -(2**64)), (MAX_OFFSET - 3, MAX_OFFSET),
]


# -------------------------------------------------------------------- walking

def step_over(view, position, size):
    """Where the scan loop would go on after reading the entry at `position` itself;
    None where it would stop (a torn tail) or raise (corruption)."""
    try:
        header = read_entry_header(view, position, position, remaining=size - position)
    except CorruptLogError:
        return None
    return None if header is None else position + header.size


def walk(accumulator, view, start, end_position, size, checksum, min_offset, end_offset,
         max_rows, max_bytes, transactions):
    """([(position, state, rows held, bytes held)...], taken batches)."""
    steps, batches = [], []
    position = start
    while position < end_position:
        position, state = accumulator.decode_run(view, position, end_position, size, checksum,
                                                 min_offset, end_offset, max_rows, max_bytes,
                                                 transactions)
        steps.append((position, state, len(accumulator), accumulator.payload_bytes))
        if state & RUN_FLUSH:
            batches.append(accumulator.take("t", 1))
        if state & (RUN_DONE | RUN_END):
            break
        if state == RUN_ENTRY_FOR_PYTHON:
            position = step_over(view, position, size)
            if position is None:
                break
    batches.append(accumulator.take("t", 1))
    return steps, batches


def boundaries(entries):
    positions, position = [], 0
    for entry in entries:
        positions.append(position)
        position += len(entry)
    return positions


def assert_same_walks(entries, include_headers, **settings):
    data = b"".join(entries)
    view = memoryview(data)
    walks = [walk(make(include_headers), view, **settings)
             for make in (CompiledAccumulator, RecordAccumulator)]
    (compiled_steps, compiled_batches), (pure_steps, pure_batches) = walks
    assert compiled_steps == pure_steps, settings
    assert len(compiled_batches) == len(pure_batches), settings
    for compiled_batch, pure_batch in zip(compiled_batches, pure_batches):
        assert compiled_batch.equals(pure_batch), (settings, compiled_batch.to_pylist()[:2],
                                                   pure_batch.to_pylist()[:2])
    return pure_steps, pure_batches


# ---------------------------------------------------------------------- tests

LIMITS = [(10_000, 64 << 20), (1, 64 << 20), (3, 64 << 20), (10_000, 50)]  # rows, bytes


def walk_settings(entries):
    """Every offset range and limit, with and without checksums and a transaction filter,
    over the whole segment; then from the second entry, to inside the last entry and to
    past the end of the data."""
    size = sum(map(len, entries))
    starts = boundaries(entries)
    whole = dict(start=0, end_position=size, size=size)
    for (min_offset, end_offset), (max_rows, max_bytes) in product(OFFSET_RANGES, LIMITS):
        for checksum, transactions in product((crc32c, None), (False, True)):
            yield dict(whole, checksum=checksum, min_offset=min_offset, end_offset=end_offset,
                       max_rows=max_rows, max_bytes=max_bytes, transactions=transactions)
    for start, end_position in ((starts[1], size), (0, starts[-1] + 1), (starts[1], size + 100)):
        for (min_offset, end_offset), (max_rows, max_bytes) in product(OFFSET_RANGES, LIMITS[:2]):
            yield dict(start=start, end_position=end_position, size=size, checksum=crc32c,
                       min_offset=min_offset, end_offset=end_offset, max_rows=max_rows,
                       max_bytes=max_bytes, transactions=True)


@pytest.mark.parametrize("include_headers", [False, True])
@pytest.mark.parametrize("segment", sorted(SEGMENTS))
def test_both_accumulators_walk_alike(segment, include_headers):
    entries = SEGMENTS[segment]()
    for settings in walk_settings(entries):
        assert_same_walks(entries, include_headers, **settings)


def test_the_stops_are_the_documented_ones():
    # Pins the behaviour itself, not only the agreement of the twins.
    entries = SEGMENTS["transactional"]()
    positions = boundaries(entries)
    size = sum(map(len, entries))
    everything = dict(start=0, end_position=size, size=size, checksum=crc32c, min_offset=0,
                      end_offset=MAX_OFFSET, max_rows=10_000, max_bytes=64 << 20)
    steps, batches = assert_same_walks(entries, False, transactions=True, **everything)
    assert [step[:2] for step in steps] == [
        (positions[1], RUN_ENTRY_FOR_PYTHON),  # transactional: read_committed decides
        (positions[4], RUN_ENTRY_FOR_PYTHON),  # compressed (the control batch is skipped)
        (size, RUN_END),
    ]
    assert [row["offset"] for row in batches[-1].to_pylist()] == [0, 1, 2, 9, 10, 11, 12, 16, 17]
    steps, _ = assert_same_walks(entries, False, transactions=False, **everything)
    assert [step[:2] for step in steps] == [(positions[4], RUN_ENTRY_FOR_PYTHON),
                                            (size, RUN_END)]
    steps, batches = assert_same_walks(entries, False, transactions=False,
                                       **dict(everything, end_offset=8, max_rows=2))
    assert [step[:2] for step in steps] == [
        (positions[1], RUN_FLUSH),  # three rows held: take them
        (positions[2], RUN_FLUSH | RUN_DONE),  # and offset 7 is the last one wanted
    ]
    assert [batch.num_rows for batch in batches] == [3, 5, 0]
    steps, _ = assert_same_walks(entries, False, transactions=False,
                                 **dict(everything, min_offset=13, end_offset=13))
    assert [step[:2] for step in steps] == [(positions[4], RUN_DONE)]  # starts at end_offset


def test_malformed_batch_leaves_no_rows_in_either_accumulator():
    entries = SEGMENTS["malformed records"]()
    size = sum(map(len, entries))
    steps, _ = assert_same_walks(entries, True, start=0, end_position=size, size=size,
                                 checksum=crc32c, min_offset=0, end_offset=MAX_OFFSET,
                                 max_rows=10_000, max_bytes=64 << 20, transactions=False)
    # Stopped at the malformed batch holding the 4 rows before it; its 2 good records
    # are not kept: add_v2_batch, from the scan loop, raises the error.
    assert steps[0] == (len(entries[0]), RUN_ENTRY_FOR_PYTHON, 4, steps[0][3])


@pytest.mark.parametrize("member", ["add", "add_v2_batch", "decode_run", "take", "__len__",
                                    "payload_bytes", "include_headers"])
def test_one_interface(member):
    for accumulator in (CompiledAccumulator(True), RecordAccumulator(True)):
        assert hasattr(accumulator, member), (type(accumulator).__name__, member)


def test_decode_run_parameters_are_the_compiled_ones():
    documented = CompiledAccumulator.decode_run.__doc__.split("->")[0]
    names = [name.strip() for name in documented[documented.index("(") + 1:
                                                  documented.index(")")].split(",")]
    assert list(inspect.signature(RecordAccumulator.decode_run).parameters)[1:] == names


def walk_tracking(accumulator, view, include_control_records, start, end_position, size,
                  checksum, min_offset, end_offset, max_rows, max_bytes, transactions):
    """walk() after track_batches(include_control_records), taking the batch entries with
    each batch: ([(position, state, rows held)...], [(rows, entries)...])."""
    accumulator.track_batches(include_control_records)
    steps, taken = [], []

    def take():
        rows = accumulator.take("t", 1).to_pylist()
        taken.append((rows, accumulator.take_batch_entries().tolist()))

    position = start
    while position < end_position:
        position, state = accumulator.decode_run(view, position, end_position, size, checksum,
                                                 min_offset, end_offset, max_rows, max_bytes,
                                                 transactions)
        steps.append((position, state, len(accumulator)))
        if state & RUN_FLUSH:
            take()
        if state & (RUN_DONE | RUN_END):
            break
        if state == RUN_ENTRY_FOR_PYTHON:
            position = step_over(view, position, size)
            if position is None:
                break
    take()
    return steps, taken

@pytest.mark.parametrize("include_control_records", [False, True])
@pytest.mark.parametrize("segment", sorted(SEGMENTS))
def test_both_accumulators_note_the_same_batch_entries(segment, include_control_records):
    entries = SEGMENTS[segment]()
    data = b"".join(entries)
    size = len(data)
    for (min_offset, end_offset), (max_rows, max_bytes) in product(OFFSET_RANGES, LIMITS[:3]):
        settings = dict(start=0, end_position=size, size=size, checksum=crc32c,
                        min_offset=min_offset, end_offset=end_offset, max_rows=max_rows,
                        max_bytes=max_bytes, transactions=False)
        walks = [walk_tracking(make(False), memoryview(data), include_control_records,
                               **settings) for make in (CompiledAccumulator, RecordAccumulator)]
        (compiled_steps, compiled_taken), (pure_steps, pure_taken) = walks
        assert compiled_steps == pure_steps, settings
        assert compiled_taken == pure_taken, settings
        for rows, batch_entries in pure_taken:  # every row is covered, once
            assert (batch_entries[-1][0] if batch_entries else 0) == len(rows)


@pytest.mark.parametrize("include_headers", [False, True])
def test_a_damaged_byte_anywhere_a_checksum_covers_stops_the_run_at_its_batch(include_headers):
    # The compiled run computes a plain batch's checksum beside its parse, a block of three
    # stripes at a time, the rest of the batch after them: a byte flipped in any of them
    # (or in the header fields from the attributes on) must stop the run before the batch,
    # its rows undone, as the pure twin's separate check does.
    entries = [batch(0, 4), batch(4, 80, seed=5), batch(84, 3, seed=6)]
    big = entries[1]
    assert len(big) > 4 * 768  # several blocks, and a tail
    size = sum(map(len, entries))
    settings = dict(start=0, end_position=size, size=size, checksum=crc32c, min_offset=0,
                    end_offset=MAX_OFFSET, max_rows=10_000, max_bytes=64 << 20,
                    transactions=False)
    steps, _ = assert_same_walks(entries, include_headers, **settings)
    assert [step[:3] for step in steps] == [(size, RUN_END, 87)]  # undamaged: no stop
    positions = sorted(set(range(V2_CRC_START, len(big), 7)) |
                       set(range(len(big) - 40, len(big))))
    for position in positions:
        damaged = bytearray(big)
        damaged[position] ^= 0x10
        steps, _ = assert_same_walks([entries[0], bytes(damaged), entries[2]], include_headers,
                                     **settings)
        assert steps[0][:3] == (len(entries[0]), RUN_ENTRY_FOR_PYTHON, 4), position
