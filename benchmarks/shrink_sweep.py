"""A large segment cut short at every timing of a scan (#22): run by hand, not in CI.

Generates one segment (300 MB by default: plain batches of 100 records, every eighth
lz4-compressed), then, per timing, copies it, scans the copy with scan_segment in a child
process and cuts the copy to a tenth of its size (or to nothing) at that timing. Prints
what each child ended in: SegmentShrankError, the intact rows (count and offset sum
checked), another error, or the signal that killed it (SIGBUS: the crash of #22).

    python benchmarks/shrink_sweep.py                       # this checkout
    python benchmarks/shrink_sweep.py --package /tmp/old    # another copy of the package

Timings: before the scan opens the segment; once it is open (mapped), before the first
run; the same, cut to nothing, with an offset index entry to check (Python reads the
mapping first); inside a compiled decode run after a given share of the segment was
decoded (fastpath.set_run_hook; copies without it show n/a); inside a checksum computed
from the compiled run (a batch over 4 KiB goes to the crc32c package, which is wrapped
to cut first: works with any copy of the package); the same in the pure-Python decoder;
between two runs, while the consumer holds a batch; at the last batch.
"""
import argparse
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(HERE)
RECORDS_PER_BATCH = 100

CHILD = r"""
import json, os, sys, time, warnings
sys.path.insert(0, sys.argv[1])
from segmentlog_datasource.errors import SegmentShrankError
from segmentlog_datasource.format import fastpath, scan
from segmentlog_datasource.format.layout import MAX_OFFSET
from segmentlog_datasource.format.scan import ScanOptions, SegmentRange, scan_segment
from segmentlog_datasource.storage.local import LocalStore

path, case = sys.argv[2], json.loads(sys.argv[3])
size = os.path.getsize(path)
timing, cut_to, at = case["timing"], case["cut_to"], case.get("at", 0)


def cut():
    if os.path.getsize(path) == size:
        os.truncate(path, cut_to)


class CutAfterOpening(LocalStore):
    def open_log(self, log_path, log_size, chunks=None):
        data = super().open_log(log_path, log_size, chunks)
        cut()
        return data


if timing in ("in_run", "in_pure_run"):
    if not hasattr(fastpath, "set_run_hook"):
        print(json.dumps({"outcome": "n/a (no run hook in this copy)"}))
        sys.exit(0)
    fastpath.set_run_hook(lambda position: position >= at and cut())
if timing == "in_checksum":
    checksum = scan.crc32c
    decoded = [0]

    def cutting_checksum(data):
        decoded[0] += len(data)
        if decoded[0] >= at:
            cut()
        return checksum(data)
    scan.crc32c = cutting_checksum

store = CutAfterOpening() if timing.startswith("after_open") else LocalStore()
segment = SegmentRange("sweep", 0, path, size, 0, size, 0, MAX_OFFSET, True, store=store,
                       start_index_entry=(case["indexed"], 0) if "indexed" in case else None)
options = ScanOptions(use_fast_path=timing != "in_pure_run")
rows = offsets = 0
started = time.perf_counter()
try:
    if timing == "before_open":
        cut()
    for number, batch in enumerate(scan_segment(segment, options)):
        rows += batch.num_rows
        offsets += batch.column("offset").to_numpy().sum()
        if timing == "between_runs" and number == 0 or \
                timing == "at_last_batch" and rows == case["rows"]:
            cut()
    outcome = {"outcome": "rows", "rows": int(rows), "offsets": int(offsets)}
except SegmentShrankError as error:
    outcome = {"outcome": "SegmentShrankError", "message": str(error)}
except Exception as error:
    outcome = {"outcome": type(error).__name__, "message": str(error)}
outcome["seconds"] = time.perf_counter() - started
print(json.dumps(outcome))
"""


def generate(path: str, megabytes: int) -> int:
    """A segment of about `megabytes` MB; returns its record count. Two batches are built
    and repeated with their base offsets patched (the CRC does not cover the base offset)."""
    sys.path.insert(0, CHECKOUT)
    from segmentlog_datasource.format import compression
    from segmentlog_datasource.format.encode import build_record_batch

    records = [(b"key-%d" % i, (b"%07d " % i) * 20, 1_700_000_000_000 + i, [])
               for i in range(RECORDS_PER_BATCH)]
    plain = build_record_batch(records)
    packed = build_record_batch(records, codec=compression.LZ4)
    written = batches = 0
    with open(path, "wb") as out:
        while written < megabytes * 1_000_000:
            batch = bytearray(packed if batches % 8 == 7 else plain)
            struct.pack_into(">q", batch, 0, batches * RECORDS_PER_BATCH)
            out.write(batch)
            written += len(batch)
            batches += 1
    return batches * RECORDS_PER_BATCH


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=300)
    parser.add_argument("--cut", type=float, default=0.1, help="share of the size kept")
    parser.add_argument("--package", default=CHECKOUT,
                        help="directory holding the segmentlog_datasource package to run")
    parser.add_argument("--work-dir", default="/tmp/segmentlog-shrink-sweep")
    args = parser.parse_args(argv)

    os.makedirs(args.work_dir, exist_ok=True)
    source = os.path.join(args.work_dir, f"source-{args.size_mb}mb.log")
    marker = source + ".records"
    if not os.path.exists(marker):
        print(f"generating {source} ...", flush=True)
        with open(marker, "w") as out:
            out.write(str(generate(source, args.size_mb)))
    with open(marker) as handle:
        records = int(handle.read())
    size = os.path.getsize(source)
    cut_to = int(size * args.cut)
    print(f"package: {args.package}\nsegment: {size:,} bytes, {records:,} records; "
          f"cut to {cut_to:,} bytes\n")

    cases = [("before_open", {}), ("after_open", {}),
             ("after_open, to nothing, index entry to check",
              {"timing": "after_open", "cut_to": 0, "indexed": RECORDS_PER_BATCH - 1})]
    for share in (0.05, 0.5, 0.95):
        cases.append((f"in_run at {share:.0%}", {"timing": "in_run", "at": int(share * size)}))
    for share in (0.05, 0.5):
        cases.append((f"in_checksum at {share:.0%}",
                      {"timing": "in_checksum", "at": int(share * size)}))
    cases += [("in_pure_run at 50%", {"timing": "in_pure_run", "at": size // 2}),
              ("between_runs", {}), ("at_last_batch", {})]

    copy = os.path.join(args.work_dir, "00000000000000000000.log")
    print(f"{'timing':<46}{'outcome':<22}{'seconds':>8}  detail")
    for name, options in cases:
        case = {"timing": name, "cut_to": cut_to, "rows": records, **options}
        shutil.copyfile(source, copy)
        done = subprocess.run([sys.executable, "-c", CHILD, args.package, copy, json.dumps(case)],
                              capture_output=True, text=True)
        if done.returncode < 0:
            outcome, seconds = f"killed by {signal.Signals(-done.returncode).name}", ""
            detail = ""
        elif done.returncode != 0:
            outcome, seconds, detail = "failed", "", done.stderr.strip().splitlines()[-1]
        else:
            result = json.loads(done.stdout.strip().splitlines()[-1])
            outcome = result["outcome"]
            seconds = f"{result['seconds']:.3f}" if "seconds" in result else ""
            if outcome == "rows":
                whole = result["rows"] == records and \
                    result["offsets"] == records * (records - 1) // 2
                outcome = "intact rows" if whole else "WRONG ROWS"
                detail = f"{result['rows']:,} rows"
            else:
                detail = result.get("message", "").split(": ", 1)[-1][:100]
        print(f"{name:<46}{outcome:<22}{seconds:>8}  {detail}", flush=True)
    os.remove(copy)


if __name__ == "__main__":
    main()
