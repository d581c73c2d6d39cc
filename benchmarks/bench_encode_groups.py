"""The writer's encoding of one chunk into 4 partitions, three ways, alternating, one core.

    .venv/bin/python benchmarks/bench_encode_groups.py [--rows 1000000] [--rounds 5]

- per partition: what the writer did before encode_groups, one compiled encode of each
  partition's rows through a row order (after a stable sort of the partition numbers);
- grouped: encode_groups, every partition in one pass over the rows in input order;
- in order: the 1M rows encoded as one partition (the floor of either).
Rows as bench_write.py makes them, partitioned by Kafka's key hash. Best of `--rounds`.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from bench_write import make_table, pin_to_one_core  # noqa: E402
from segmentlog_datasource.format.encode import encode_batches, encode_groups  # noqa: E402
from segmentlog_datasource.format.v2_encode import RecordColumns  # noqa: E402
from segmentlog_datasource.writer.partitioner import partitions_for_keys  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    pinned = pin_to_one_core()
    table = make_table(args.rows)
    columns = RecordColumns(table.column("key"), table.column("value"),
                            table.column("timestamp").cast("int64").to_numpy())
    partitions = partitions_for_keys(columns.keys, args.partitions)

    def per_partition():
        order = np.argsort(partitions.astype(np.uint16), kind="stable")
        cuts = np.searchsorted(partitions[order], np.arange(args.partitions + 1))
        for p in range(args.partitions):
            encode_batches(columns, rows=order[cuts[p]:cuts[p + 1]])

    def grouped():
        encode_groups(columns, partitions, args.partitions)

    def in_order():
        encode_batches(columns)

    runs = {"per partition (row order)": per_partition, "grouped (encode_groups)": grouped,
            "in order, one partition": in_order}
    times = {name: [] for name in runs}
    for run in runs.values():
        run()  # warm-up: the memory pool
    for _ in range(args.rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    print(f"== {args.rows:,} records into {args.partitions} partitions, {pinned}, "
          f"best of {args.rounds} ==")
    for name, values in times.items():
        print(f"{name:<28}{min(values):>8.3f} s")


if __name__ == "__main__":
    main()
