"""Scan time with includeMetadata off and on, beside today's code, in one process.

Three (four with --control) readings of the same page-cached log, each a scan_segment of
every segment (checksums verified), on one pinned core:

  * before:   the copy of the package given with --before (today's code), default options;
  * off:      this checkout, default options (must cost what `before` costs);
  * metadata: this checkout, include_metadata=True (at most 1.2x `off`);
  * control:  this checkout, include_metadata and include_control_records (--control).

Each round times the best of --repeat of each reading, the order rotating between rounds;
prints per reading the median and the best over the rounds and their ratio to `before`.
The log is bench_decode.py's (1M records of 100 bytes, batches of 500 by default;
generated on first use under --data-dir); with --idempotent, a copy of it whose batches
carry a producer id, epoch and base sequence (as an idempotent producer's do: each row
then has its own sequence).

    cp -r <checkout before the change> /tmp/before
    (cd /tmp/before && python setup.py build_ext --inplace)
    python benchmarks/bench_metadata_columns.py --before /tmp/before
"""
import argparse
import importlib
import os
import shutil
import statistics
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_decode import log_for, pin_to_one_core  # noqa: E402
from bench_scan_versions import best, import_copy  # noqa: E402


def idempotent_copy(logdir: str) -> str:
    """A copy of `logdir` whose batches carry producer id 7000, epoch 0 and base sequence
    = base offset (checksums made valid again), generated on first use."""
    from segmentlog_datasource.format.crc import crc32c
    from segmentlog_datasource.format.layout import (
        LOG_OVERHEAD, V2_BASE_SEQUENCE, V2_CRC, V2_CRC_START, V2_PRODUCER_ID)

    target = logdir.rstrip(os.sep) + "-idempotent"
    if os.path.exists(os.path.join(target, "GENERATED")):
        return target
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(logdir, target, ignore=shutil.ignore_patterns("GENERATED"))
    for directory, _, files in os.walk(target):
        for name in files:
            if not name.endswith(".log"):
                continue
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                data = bytearray(handle.read())
            position = 0
            while position + LOG_OVERHEAD <= len(data):
                base_offset, length = struct.unpack_from(">qi", data, position)
                struct.pack_into(">qhi", data, position + V2_PRODUCER_ID, 7000, 0,
                                 base_offset % (1 << 31))
                assert V2_BASE_SEQUENCE == V2_PRODUCER_ID + 10
                end = position + LOG_OVERHEAD + length
                struct.pack_into(">I", data, position + V2_CRC,
                                 crc32c(bytes(data[position + V2_CRC_START:end])))
                position = end
            with open(path, "wb") as handle:
                handle.write(data)
    open(os.path.join(target, "GENERATED"), "w").close()
    return target


class Scan:
    """Whole-log scans with one copy of the package and one set of scan options."""

    def __init__(self, package_name: str, logdir: str, **options):
        fmt = importlib.import_module(package_name + ".format")
        self.fmt, self.options = fmt, options
        (self.log,) = fmt.discover_partitions([logdir])

    def __call__(self) -> int:
        fmt, log, rows = self.fmt, self.log, 0
        options = fmt.ScanOptions(**self.options)
        for segment in log.segments:
            whole = fmt.SegmentRange(log.topic, log.partition, segment.log_path, segment.size,
                                     0, segment.size, 0, (1 << 63) - 1, log.is_last(segment))
            for batch in fmt.scan_segment(whole, options):
                rows += batch.num_rows
        return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True,
                        help="a copy of the package before the change, built in place")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--records-per-batch", type=int, default=500)
    parser.add_argument("--codec", default="none")
    parser.add_argument("--idempotent", action="store_true",
                        help="batches with a producer id and base sequences (see above)")
    parser.add_argument("--control", action="store_true",
                        help="also time include_control_records with the metadata")
    parser.add_argument("--data-dir", default=os.path.join(os.path.dirname(HERE), "bench-data"))
    args = parser.parse_args(argv)

    print(pin_to_one_core())
    logdir = log_for(args.data_dir, args.records, 100, args.records_per_batch, args.codec)
    if args.idempotent:
        logdir = idempotent_copy(logdir)
    scratch = tempfile.mkdtemp(prefix="segmentlog-metadata-")
    try:
        before = import_copy(args.before, "segmentlog_before", scratch).__name__
        readings = {"before": Scan(before, logdir),
                    "off": Scan("segmentlog_datasource", logdir),
                    "metadata": Scan("segmentlog_datasource", logdir, include_metadata=True)}
        if args.control:
            readings["control"] = Scan("segmentlog_datasource", logdir, include_metadata=True,
                                       include_control_records=True)
        for reading in readings.values():
            assert reading() == args.records  # and the page cache is warm
        times = {name: [] for name in readings}
        names = list(readings)
        for round_number in range(args.rounds):
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                times[name].append(best(readings[name], args.repeat))
            print(f"round {round_number + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"{logdir}\nbefore: {os.path.abspath(args.before)}\n{args.rounds} rounds, each the "
          f"best of {args.repeat}\n")
    print(f"{'reading':<10}{'median s':>10}{'best s':>10}{'median / before':>17}"
          f"{'best / before':>15}{'median / off':>14}")
    median_before, best_before = statistics.median(times["before"]), min(times["before"])
    median_off = statistics.median(times["off"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<10}{median:>10.4f}{min(values):>10.4f}{median / median_before:>16.3f}x"
              f"{min(values) / best_before:>14.3f}x{median / median_off:>13.3f}x")


if __name__ == "__main__":
    main()
