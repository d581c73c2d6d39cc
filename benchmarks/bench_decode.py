"""Decode throughput of segmentlog's format core against kafka-python, on one core.

Generates (once, then reuses) a one-partition log of N records per codec, then decodes
the whole log:
  * segmentlog: scan_segment over every segment into Arrow record batches, compiled
    fast path and pure-Python path, with and without checksum verification;
  * kafka-python: MemoryRecords over each segment's bytes, every batch and record
    iterated, key/value/offset/timestamp touched, with and without validate_crc().

    python benchmarks/bench_decode.py                # 1M records, none and lz4
    python benchmarks/bench_decode.py --records 200000 --codecs none
"""
import os

# One core means one thread: keep BLAS and Arrow from spreading work out.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import pyarrow as pa  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from _gen import generate_log  # noqa: E402
from segmentlog_datasource.format import (  # noqa: E402
    ScanOptions, SegmentRange, discover_partitions, scan_segment,
)
from segmentlog_datasource.format.layout import MAX_OFFSET  # noqa: E402
from segmentlog_datasource.format.crc import crc32c_backend  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record import MemoryRecords  # noqa: E402



def pin_to_one_core():
    if hasattr(os, "sched_setaffinity"):
        cpu = sorted(os.sched_getaffinity(0))[-1]
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    return "not pinned (no sched_setaffinity)"


def log_for(data_dir, records, value_size, records_per_batch, codec):
    """The benchmark log for these parameters, generated on first use."""
    logdir = os.path.join(data_dir, f"decode-{records}r-{value_size}b-{records_per_batch}pb-{codec}")
    done_marker = os.path.join(logdir, "GENERATED")
    if not os.path.exists(done_marker):
        print(f"generating {logdir} ...", flush=True)
        started = time.perf_counter()
        generate_log(logdir, "bench", 1, records, value_size, codec=codec,
                     records_per_batch=records_per_batch)
        open(done_marker, "w").close()
        print(f"  done in {time.perf_counter() - started:.1f}s", flush=True)
    return logdir


def segmentlog_decode(log, use_fast_path, verify_checksums):
    options = ScanOptions(verify_checksums=verify_checksums, use_fast_path=use_fast_path)
    rows = 0
    for segment in log.segments:
        whole = SegmentRange(log.topic, log.partition, segment.log_path, segment.size, 0,
                             segment.size, 0, MAX_OFFSET, log.is_last(segment))
        for batch in scan_segment(whole, options):
            rows += batch.num_rows
    return rows


def kafka_python_decode(log, validate_crc):
    rows = 0
    for segment in log.segments:
        with open(segment.log_path, "rb") as handle:
            records = MemoryRecords(handle.read())
        while True:
            batch = records.next_batch()
            if batch is None:
                break
            if validate_crc and not batch.validate_crc():
                raise RuntimeError(f"kafka-python: CRC mismatch in {segment.log_path}")
            for record in batch:
                record.key, record.value, record.offset, record.timestamp
                rows += 1
    return rows


def best_time(function, repeat):
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def cpu_model():
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--records-per-batch", type=int, default=500)
    parser.add_argument("--codecs", default="none,lz4", help="comma-separated: none,gzip,snappy,lz4,zstd")
    parser.add_argument("--repeat", type=int, default=5,
                        help="runs of the fast path (best is kept); slower readers run once")
    parser.add_argument("--data-dir", default=os.path.join(os.path.dirname(HERE), "bench-data"))
    parser.add_argument("--skip-pure", action="store_true", help="skip the pure-Python path")
    args = parser.parse_args(argv)

    try:
        from segmentlog_datasource.format.fastpath import compiled  # noqa: F401
    except ImportError as exc:
        sys.exit(f"the compiled fast path is not built ({exc}): python setup.py build_ext --inplace")

    pinned = pin_to_one_core()
    print(f"{cpu_model()}; Python {platform.python_version()}; pyarrow {pa.__version__}; "
          f"crc32c backend {crc32c_backend()}; {pinned}")
    print(f"{args.records:,} records, {args.value_size}-byte values, "
          f"batches of {args.records_per_batch} records\n")

    summary = []
    for codec in args.codecs.split(","):
        logdir = log_for(args.data_dir, args.records, args.value_size, args.records_per_batch, codec)
        (log,) = discover_partitions([logdir])
        log_bytes = sum(segment.size for segment in log.segments)
        segmentlog_decode(log, True, True)  # page the log in and warm up

        results = []  # (reader, checksums, seconds)
        for verify in (True, False):
            seconds, rows = best_time(lambda: segmentlog_decode(log, True, verify), args.repeat)
            assert rows == args.records, rows
            results.append(("segmentlog fast path", verify, seconds))
        if not args.skip_pure:
            for verify in (True, False):
                seconds, rows = best_time(lambda: segmentlog_decode(log, False, verify), 1)
                assert rows == args.records, rows
                results.append(("segmentlog pure Python", verify, seconds))
        for verify in (True, False):
            seconds, rows = best_time(lambda: kafka_python_decode(log, verify), 1)
            assert rows == args.records, rows
            results.append(("kafka-python", verify, seconds))

        baseline = {verify: seconds for reader, verify, seconds in results
                    if reader == "kafka-python"}
        print(f"codec {codec}: {log_bytes / 1e6:.1f} MB in {len(log.segments)} segment(s)")
        print(f"  {'reader':<24}{'checksums':<11}{'seconds':>9}{'records/s':>14}{'MB/s':>9}"
              f"{'vs kafka-python':>17}")
        for reader, verify, seconds in results:
            ratio = baseline[verify] / seconds
            print(f"  {reader:<24}{'verified' if verify else 'skipped':<11}{seconds:>9.3f}"
                  f"{args.records / seconds:>14,.0f}{log_bytes / seconds / 1e6:>9.0f}"
                  f"{ratio:>16.1f}x")
            if reader == "segmentlog fast path":
                summary.append((codec, verify, ratio))
        print()

    print("segmentlog fast path vs kafka-python, records/s per core (target >= 20x):")
    for codec, verify, ratio in summary:
        print(f"  {codec:<6} checksums {'verified' if verify else 'skipped ':<9} {ratio:6.1f}x  "
              f"{'ok' if ratio >= 20 else 'BELOW TARGET'}")


if __name__ == "__main__":
    main()
