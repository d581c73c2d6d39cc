"""A write's commit alone: the engine's two-task write of bench_write.py's rows, the
tasks staged first and untimed, then `WriteJob.commit` timed, three ways in turn:

- one segment a partition: every later task's batches copied after the first task's
  renamed file, then deleted (taskSegmentBytes above the write's size; the layout
  before taskSegmentBytes);
- each task's batches a segment of their own, their headers set by reading the file and
  writing it back;
- the same, the headers set through a writable mapping (the default on ext4, XFS, tmpfs).

    .venv/bin/python benchmarks/bench_commit.py --rounds 12 [--codec lz4] [--tasks 8 --rows 4000000]

Prints the median and best wall time and the median CPU time of each, over the rounds
after the first two. Run from outside the checkout (cd /tmp).
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from bench_write import make_table  # noqa: E402
from segmentlog_datasource.writer import assembly  # noqa: E402
from segmentlog_datasource.writer.job import WriteJob  # noqa: E402
from segmentlog_datasource.writer.options import WriteOptions  # noqa: E402

MAPPED = assembly.OVERWRITE_IN_PLACE_FILESYSTEMS
WAYS = {
    "one segment, copied": ({"taskSegmentBytes": str(1 << 62)}, MAPPED),
    "own segments, written back": ({}, frozenset()),
    "own segments, mapped": ({}, MAPPED),
}


def staged_job(target, table, tasks, partitions, codec, options):
    """A started job and its tasks' results, each task given a slice of the rows in
    Spark's 10,000-row batches."""
    job = WriteJob(target, topic="bench", options=WriteOptions.from_mapping(
        {"numPartitions": str(partitions), "compression.type": codec, **options})).start()
    step = -(-table.num_rows // tasks)
    results = []
    for index in range(tasks):
        task = job.task_writer(index)
        for batch in table.slice(index * step, step).to_batches(max_chunksize=10_000):
            task.write(batch)
        results.append(task.finish())
    return job, results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--codec", default="none")
    args = parser.parse_args()
    table = make_table(args.rows)
    workdir = tempfile.mkdtemp(prefix="segmentlog-bench-commit-")
    target = os.path.join(workdir, "log")
    timings = {name: [] for name in WAYS}
    try:
        for round_number in range(args.rounds):
            for name, (options, filesystems) in WAYS.items():
                assembly.OVERWRITE_IN_PLACE_FILESYSTEMS = filesystems
                shutil.rmtree(target, ignore_errors=True)
                job, results = staged_job(target, table, args.tasks, args.partitions,
                                          args.codec, options)
                start, cpu = time.perf_counter(), time.process_time()
                job.commit(results)
                if round_number >= 2:
                    timings[name].append((time.perf_counter() - start,
                                          time.process_time() - cpu))
    finally:
        assembly.OVERWRITE_IN_PLACE_FILESYSTEMS = MAPPED
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"commit of {args.rows:,} rows from {args.tasks} tasks into {args.partitions} "
          f"partitions, codec {args.codec}, {args.rounds - 2} rounds in turn")
    for name, runs in timings.items():
        print(f"{name:<28} median {statistics.median(w for w, _ in runs) * 1000:6.1f} ms  "
              f"best {min(w for w, _ in runs) * 1000:6.1f} ms  "
              f"CPU median {statistics.median(c for _, c in runs) * 1000:6.1f} ms")


if __name__ == "__main__":
    main()
