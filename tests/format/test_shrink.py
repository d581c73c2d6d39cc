"""A segment that shrinks while it is read (#22): every timing ends in SegmentShrankError
naming the file and its sizes, or in exactly the rows of the intact segment; never in a
crash. Touching a mapped page past a file's end raises SIGBUS, so each case runs in a
child process (support/children.py), where a crash shows as a signal exit.

The segment (about 2 MB: plain batches, every eighth lz4-compressed, so that both the
compiled run and the scan loop's Python path read it) is cut to a tenth of its size, or
to nothing, at each timing: before the scan opens it; after it is mapped, before the
first run (with an offset index entry to check, which Python reads first); inside a
decode run, after a given batch (fastpath.set_run_hook), in the compiled accumulator and
in its pure-Python twin, also beside a thread reading another copy; between two runs,
while the consumer holds a batch; at the last batch; and without the compiled module
(read with pread). benchmarks/shrink_sweep.py sweeps the timings over a 300 MB segment.
"""
import json
import os
import signal

import pytest

from segmentlog_datasource.format import compression
from segmentlog_datasource.format.encode import build_record_batch

from support.children import run_script
from support.compiled import requires_compiled

pytestmark = requires_compiled

BATCHES = 160
RECORDS_PER_BATCH = 50

# Runs one case: argv = segment path, case (JSON). Prints the outcome as JSON.
CHILD = r"""
import hashlib, json, os, sys, threading, warnings

from segmentlog_datasource.errors import SegmentShrankError
from segmentlog_datasource.format import fastpath
from segmentlog_datasource.format.layout import MAX_OFFSET
from segmentlog_datasource.format.scan import ScanOptions, SegmentRange, scan_segment
from segmentlog_datasource.storage.local import LocalStore

path, case = sys.argv[1], json.loads(sys.argv[2])
size = os.path.getsize(path)
cut_to = case.get("cut_to")
timing = case["timing"]
if case.get("faulthandler") == "before":
    import faulthandler
    faulthandler.enable()
if not case.get("compiled", True):
    fastpath._compiled_module = False  # as in an install without the compiled module
    warnings.simplefilter("ignore", fastpath.FastPathUnavailableWarning)


def cut():
    os.truncate(path, cut_to)


opened = []


class Recording(LocalStore):
    def open_log(self, log_path, log_size, chunks=None):
        data = super().open_log(log_path, log_size, chunks)
        if log_path == path:
            opened.append(data)
            if timing == "after_open":
                cut()
        return data


if timing == "in_run":
    def hook(position):  # only the main thread's scan: a thread may read another file
        if position >= case["at"] and threading.current_thread() is threading.main_thread() \
                and os.path.getsize(path) == size:
            cut()
    fastpath.set_run_hook(hook)

indexed = case.get("indexed")
segment = SegmentRange("shrink", 0, path, size, 0, size, 0, MAX_OFFSET, True,
                       store=Recording(), start_index_entry=indexed and tuple(indexed))
options = ScanOptions(use_fast_path=case.get("fast", True),
                      max_batch_rows=case.get("max_batch_rows", 10_000))


def outcome():
    digest, rows = hashlib.sha256(), 0
    try:
        if timing == "before_open":
            cut()
        batches = scan_segment(segment, options)
        for batch in batches:
            rows += batch.num_rows
            for column in ("offset", "timestamp", "key", "value"):
                digest.update(batch.column(column).to_string().encode())
            # Where the scan waits for the consumer: between two runs, after the last.
            if timing == "between_runs" and rows == 2 * options.max_batch_rows or \
                    timing == "at_the_last_batch" and rows == case["rows"]:
                cut()
    except SegmentShrankError as error:
        return {"error": "SegmentShrankError", "message": str(error), "path": error.path}
    except Exception as error:
        return {"error": type(error).__name__, "message": str(error)}
    return {"rows": rows, "digest": digest.hexdigest()}


if case.get("beside"):  # another segment, intact, read at the same time in a thread
    beside = {}
    intact = SegmentRange("shrink", 0, case["beside"], size, 0, size, 0, MAX_OFFSET, True)

    def read_beside():
        digest, rows = hashlib.sha256(), 0
        for batch in scan_segment(intact, options):
            rows += batch.num_rows
            for column in ("offset", "timestamp", "key", "value"):
                digest.update(batch.column(column).to_string().encode())
        beside.update(rows=rows, digest=digest.hexdigest())

    thread = threading.Thread(target=read_beside)
    thread.start()
    result = outcome()
    thread.join()
    result["beside"] = beside
else:
    result = outcome()
# Where the scan read past the file's new end (a page of the mapping lost), if it did.
result["fault"] = getattr(opened[0], "fault_position", None) if opened else None
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def segment():
    """(bytes, end position of each batch)."""
    out, ends = bytearray(), []
    for number in range(BATCHES):
        base = number * RECORDS_PER_BATCH
        records = [(b"key-%d" % (base + i), b"%07d" % (base + i) + b"v" * 230,
                    1_700_000_000_000 + base + i, [("h", b"%d" % i)] if i % 7 == 0 else [])
                   for i in range(RECORDS_PER_BATCH)]
        out += build_record_batch(records, base_offset=base,
                                  codec=compression.LZ4 if is_compressed(number) else
                                  compression.NONE)
        ends.append(len(out))
    return bytes(out), ends


def is_compressed(number):
    """Every eighth batch: the compiled run stops before it, the scan loop reads it."""
    return number % 8 == 7


@pytest.fixture(scope="module")
def intact(segment, tmp_path_factory):
    """The outcome of reading the intact segment, in a child as every case is."""
    path = tmp_path_factory.mktemp("intact") / "00000000000000000000.log"
    path.write_bytes(segment[0])
    result = run(path, {"timing": "none"})
    assert result.pop("fault") is None
    assert result["rows"] == BATCHES * RECORDS_PER_BATCH, result
    return result


def run(path, case):
    """The child's outcome; a child killed by a signal (SIGBUS: the crash) fails here."""
    done = run_script(CHILD, [path, json.dumps(case)], timeout=60)
    how = signal.Signals(-done.returncode).name if done.returncode < 0 else done.returncode
    assert done.returncode == 0, f"the reader ended with {how}: {case}\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def copy(data, tmp_path, name="00000000000000000000.log"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


# name: (timing, options). A run cuts the file after decoding batch `after_batch` (then
# the run goes on: the next batch is plain too); cut_to is a tenth of the size, or a
# position `cut_in_batch` 1000 bytes into that batch, or 0.
# `lost`: the scan must read past the new end (a mapped page lost; else it saw the new
# size first); `rows_ok`: the cut comes after every row was read, so the intact rows are
# as right as the error.
CASES = {
    "before_open": ("before_open", {}),
    "after_open": ("after_open", {}),
    "after_open_to_nothing_with_an_index_entry_to_check": (
        "after_open", {"cut_to": 0, "indexed": [RECORDS_PER_BATCH - 1, 0], "lost": True}),
    "in_compiled_run_past_the_new_end": ("in_run", {"after_batch": 81, "lost": True}),
    "in_compiled_run_before_the_new_end": (
        "in_run", {"after_batch": 17, "cut_in_batch": 20, "lost": True}),
    "in_pure_run": ("in_run", {"after_batch": 81, "fast": False, "lost": True}),
    "in_run_with_faulthandler_enabled": (
        "in_run", {"after_batch": 81, "faulthandler": "before", "lost": True}),
    "in_run_beside_an_intact_read_in_a_thread": (
        "in_run", {"after_batch": 41, "beside": True, "lost": True}),
    "between_runs": ("between_runs", {"max_batch_rows": 1000}),
    "at_the_last_batch": ("at_the_last_batch", {"rows_ok": True}),
    "after_open_without_the_compiled_module": ("after_open", {"compiled": False}),
    # pread fetched the whole (small) segment before the run: the rows are intact
    "in_run_without_the_compiled_module": (
        "in_run", {"after_batch": 81, "compiled": False, "rows_ok": True}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_shrinking_segment_ends_in_the_clean_error_or_the_intact_rows(
        name, segment, intact, tmp_path):
    timing, options = CASES[name]
    data, ends = segment
    size = len(data)
    path = copy(data, tmp_path)
    case = {"timing": timing, "cut_to": size // 10, "rows": intact["rows"], **options}
    if "after_batch" in case:
        assert not is_compressed(case["after_batch"] + 1)
        case["at"] = ends[case["after_batch"]]
    if "cut_in_batch" in case:
        case["cut_to"] = ends[case["cut_in_batch"] - 1] + 1000
    if case.get("beside"):
        case["beside"] = str(copy(data, tmp_path, "00000000000000000001.log"))
    result = run(path, case)
    assert os.path.getsize(path) == case["cut_to"], "the case did not cut the file"
    if case.get("beside"):
        assert result.pop("beside") == intact, result  # the other mapping read on, intact
    fault = result.pop("fault")
    if case.get("lost"):
        assert fault is not None and fault >= case["cut_to"], (fault, result)
    if case.get("rows_ok") and "error" not in result:
        assert result == intact
        return
    assert result.get("error") == "SegmentShrankError", result
    assert result["path"] == str(path), result
    assert f"at byte {case['cut_to']}: segment shrank from {size} to {case['cut_to']} " \
        "bytes while being read" in result["message"], result
    assert result["message"].endswith("read it again"), result


def test_a_fault_in_another_mapping_still_kills_the_process(tmp_path):
    """Only pages of segmentlog's own mappings read as zeros: any other SIGBUS goes to the
    disposition there was before (here the default: the process dies of it)."""
    path = tmp_path / "other.bin"
    path.write_bytes(b"x" * (1 << 20))
    script = r"""
import mmap, os, sys
from segmentlog_datasource.format.fastpath import file_mapping_class

path = sys.argv[1]
with open(path, "rb") as ours:
    mapping = file_mapping_class()(ours.fileno(), 1 << 20)  # installs the handler
    with open(path, "rb") as handle:
        other = mmap.mmap(handle.fileno(), 1 << 20, access=mmap.ACCESS_READ)
    os.truncate(path, 4096)
    print("read", other[1 << 19], flush=True)
"""
    done = run_script(script, [path])
    assert done.returncode == -signal.SIGBUS, (done.returncode, done.stdout, done.stderr)
    assert "read" not in done.stdout


def test_a_writable_mapping_takes_writes_and_survives_a_shrink(tmp_path):
    """The writer sets batch headers through a writable FileMapping: its writes reach the
    file; a write past a file that shrank under it lands on a zero page instead of
    killing the process, and fault_position says where. A read-only one refuses writes."""
    path = tmp_path / "staged.batches"
    path.write_bytes(b"a" * 100_000)
    script = r"""
import os, sys
from segmentlog_datasource.format.fastpath import file_mapping_class

mapping_class = file_mapping_class()
fd = os.open(sys.argv[1], os.O_RDWR)
mapping = mapping_class(fd, 100_000, writable=True)
with memoryview(mapping) as view:
    view[5:7] = b"ZZ"
    view[99_999] = ord("Y")
print("first", mapping.fault_position, flush=True)
mapping.close()
mapping = mapping_class(fd, 100_000, writable=True)
os.ftruncate(fd, 4096)
with memoryview(mapping) as view:
    view[10] = ord("Q")
    view[50_000] = ord("X")
    view[60_000] = ord("X")
print("shrunk", mapping.fault_position, flush=True)
mapping.close()
try:
    with memoryview(mapping_class(fd, 4096)) as view:
        view[0] = 1
except TypeError:
    print("read-only refused", flush=True)
"""
    done = run_script(script, [path])
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    assert done.stdout.split("\n")[:3] == ["first None", "shrunk 50000", "read-only refused"]
    data = path.read_bytes()
    assert len(data) == 4096 and data[:12] == b"aaaaaZZaaaQa" and set(data[12:]) == {ord("a")}
