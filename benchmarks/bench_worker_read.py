"""A Spark scan's Python side alone: what a Python worker does for bench_spark_read.py's
(b) scan of segmentlog and of its prebuilt-Arrow ceiling, without the JVM.

Each source's `read()` runs over all of its input partitions as Spark's worker runs it,
and every batch is written as an Arrow IPC stream into a socket that another process
drains (as the JVM reads it). Prints, per source, the median wall, user and system CPU
seconds a scan over `--rounds` rounds in turn (the first two left out); segmentlog also
with `verifyChecksums` off, to show what the CRC32C costs, and the ceiling with every
batch's keys and values checked and its buffers copied (prebuilt_sources.checked_copy:
the per-byte work of any reader of Kafka's log, without parsing).

Usage: python benchmarks/bench_worker_read.py --workdir DIR [--rounds 10]
DIR is a bench_spark_read.py --workdir (its `logdir` and `arrow`). Run from outside the
checkout (cd /tmp); `taskset -c 1` keeps it to one core, as a Spark task.
"""
import argparse
import os
import resource
import socket
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pyarrow as pa  # noqa: E402

from prebuilt_sources import CheckedCopyArrowReader, PrebuiltArrowReader  # noqa: E402
from segmentlog_datasource.spark.source import SegmentLogDataSource  # noqa: E402


def drained_socket():
    """A socket whose bytes a child process reads and drops; (socket, child pid)."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        while theirs.recv(1 << 20):
            pass
        os._exit(0)
    theirs.close()
    return ours, pid


def scan(reader, partitions, sink) -> int:
    """Every partition's batches, one IPC stream each, into `sink`; the rows."""
    rows = 0
    for partition in partitions:
        writer = None
        for batch in reader.read(partition):
            if writer is None:
                writer = pa.ipc.new_stream(sink, batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
        if writer is not None:
            writer.close()
    sink.flush()
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    sources = {}
    for name, options in (("segmentlog", {}), ("segmentlog, no checksums",
                                                {"verifyChecksums": "false"})):
        source = SegmentLogDataSource({"path": os.path.join(args.workdir, "logdir"), **options})
        reader = source.reader(source.schema())
        sources[name] = (reader, reader.partitions())
    ceiling = PrebuiltArrowReader(os.path.join(args.workdir, "arrow"))
    sources["prebuilt-Arrow ceiling"] = (ceiling, ceiling.partitions())
    checked = CheckedCopyArrowReader(os.path.join(args.workdir, "arrow"))
    sources["ceiling, checked and copied"] = (checked, checked.partitions())
    connection, pid = drained_socket()
    sink = connection.makefile("wb", buffering=1 << 16)
    figures = {name: [] for name in sources}
    rows = {}
    try:
        for round_number in range(args.rounds):
            for name, (reader, partitions) in sources.items():
                before = resource.getrusage(resource.RUSAGE_SELF)
                start = time.perf_counter()
                rows[name] = scan(reader, partitions, sink)
                wall = time.perf_counter() - start
                after = resource.getrusage(resource.RUSAGE_SELF)
                if round_number >= 2:
                    figures[name].append((wall, after.ru_utime - before.ru_utime,
                                          after.ru_stime - before.ru_stime))
    finally:
        sink.close()
        connection.close()
        os.waitpid(pid, 0)
    print(f"medians of {args.rounds - 2} rounds in turn; seconds a scan")
    print(f"{'source':<30}{'rows':>11}{'wall':>8}{'user':>8}{'system':>8}")
    for name, runs in figures.items():
        print(f"{name:<30}{rows[name]:>11,}" + "".join(
            f"{statistics.median(run[i] for run in runs):>8.3f}" for i in range(3)))


if __name__ == "__main__":
    main()
