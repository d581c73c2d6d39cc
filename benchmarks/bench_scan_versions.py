"""Scan speed of two copies of the package, side by side in one process: before and after
a change.

Both copies are imported into this process, under two package names (the package imports
itself only relatively), so both scan the same page-cached log with the same pyarrow,
allocator and CPU (pinned). Each round times, for each figure, the best of --repeat of
one copy, then of the other (the order alternates between rounds):

  * a scan_segment of the whole log of bench_decode.py (1M records of 100 bytes, batches
    of 500; generated on first use) per codec, checksums verified and skipped;
  * --opens scans of a single batch (open, map, read one batch, close: what a point
    lookup pays per segment).

Prints the median over the rounds of each figure for both copies, their ratio after /
before, the median and range of the rounds' own ratios, and the best time of each copy
over all rounds (the least disturbed on a shared machine) with their ratio.

    python benchmarks/bench_scan_versions.py --before /tmp/old-copy --after .

A copy is a directory holding a segmentlog_datasource package with its compiled module
built beside its source (python setup.py build_ext --inplace in that copy).
"""
import argparse
import importlib
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def import_copy(directory: str, name: str, scratch: str):
    """The package segmentlog_datasource of `directory`, imported as `name`."""
    target = os.path.join(scratch, name)
    shutil.copytree(os.path.join(directory, "segmentlog_datasource"), target,
                    ignore=shutil.ignore_patterns("__pycache__"))
    if scratch not in sys.path:
        sys.path.insert(0, scratch)
    package = importlib.import_module(name)
    importlib.import_module(name + ".format.fastpath.compiled")  # fails when not built
    return package


class Reader:
    """Scans of one log with one copy of the package."""

    def __init__(self, package, logdir: str):
        fmt = importlib.import_module(package.__name__ + ".format")
        self.ScanOptions, self.SegmentRange = fmt.ScanOptions, fmt.SegmentRange
        self.scan_segment = fmt.scan_segment
        (self.log,) = fmt.discover_partitions([logdir])
        self.max_offset = (1 << 63) - 1

    def whole(self, verify: bool) -> int:
        log, rows = self.log, 0
        for segment in log.segments:
            whole = self.SegmentRange(log.topic, log.partition, segment.log_path, segment.size,
                                      0, segment.size, 0, self.max_offset, log.is_last(segment))
            for batch in self.scan_segment(whole, self.ScanOptions(verify_checksums=verify)):
                rows += batch.num_rows
        return rows

    def one_batch(self, opens: int) -> None:
        log = self.log
        segment = log.segments[0]
        index = segment.offset_index
        one = self.SegmentRange(log.topic, log.partition, segment.log_path, segment.size, 0,
                                index.positions[0] if len(index) else segment.size, 0,
                                self.max_offset, log.is_last(segment))
        options = self.ScanOptions()
        for _ in range(opens):
            for _ in self.scan_segment(one, options):
                pass


def best(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="directory of the copy before")
    parser.add_argument("--after", required=True, help="directory of the copy after")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--opens", type=int, default=2000)
    parser.add_argument("--codecs", default="none,lz4")
    parser.add_argument("--data-dir", default=os.path.join(os.path.dirname(HERE), "bench-data"))
    args = parser.parse_args(argv)

    sys.path.insert(0, HERE)
    from bench_decode import log_for, pin_to_one_core

    print(pin_to_one_core())
    logdirs = {codec: log_for(args.data_dir, 1_000_000, 100, 500, codec)
               for codec in args.codecs.split(",")}
    scratch = tempfile.mkdtemp(prefix="segmentlog-versions-")
    try:
        copies = {"before": import_copy(args.before, "segmentlog_before", scratch),
                  "after": import_copy(args.after, "segmentlog_after", scratch)}
        figures = {}  # figure: {copy: function}
        for codec, logdir in logdirs.items():
            readers = {name: Reader(package, logdir) for name, package in copies.items()}
            for reader in readers.values():
                assert reader.whole(True) == 1_000_000  # and the page cache is warm
            for verify in (True, False):
                figures[f"{codec}, checksums {'verified' if verify else 'skipped'}"] = {
                    name: (lambda r=reader, v=verify: r.whole(v))
                    for name, reader in readers.items()}
            figures[f"{codec}, {args.opens} one-batch scans"] = {
                name: (lambda r=reader: r.one_batch(args.opens))
                for name, reader in readers.items()}
        times = {figure: {name: [] for name in copies} for figure in figures}
        for round_number in range(args.rounds):
            order = list(copies) if round_number % 2 == 0 else list(reversed(copies))
            for figure, functions in figures.items():
                for name in order:
                    times[figure][name].append(best(functions[name], args.repeat))
            print(f"round {round_number + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"before: {os.path.abspath(args.before)}\nafter:  {os.path.abspath(args.after)}\n"
          f"{args.rounds} rounds, each the best of {args.repeat}; medians over the rounds\n")
    print(f"{'figure':<34}{'before s':>10}{'after s':>10}{'ratio of medians':>18}"
          f"{'median ratio':>14}{'ratios min..max':>18}{'best before, after, ratio':>30}")
    for figure, by_copy in times.items():
        before, after = by_copy["before"], by_copy["after"]
        ratios = sorted(a / b for a, b in zip(after, before))
        print(f"{figure:<34}{statistics.median(before):>10.4f}{statistics.median(after):>10.4f}"
              f"{statistics.median(after) / statistics.median(before):>17.3f}x"
              f"{statistics.median(ratios):>13.3f}x{ratios[0]:>11.3f}..{ratios[-1]:.3f}"
              f"{min(before):>12.4f}{min(after):>9.4f}{min(after) / min(before):>8.3f}x")


if __name__ == "__main__":
    main()
