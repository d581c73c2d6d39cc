"""What seeing whole writes only (#22 A) costs a read's discovery of a log dir (no Spark).

Writes (once, then reuses) a log dir of P partitions with S segments each, and times,
side by side in one run, alternating, best of R each:
  * listing: the partitions and their segments listed alone (format.log._listed, what
    discovery did before #22);
  * discovery: the same with the publish token read before and after and the staging
    areas looked at for journals (format.log.discover_copies, what reads use);
  * discovery during a publish: the same while a write's journal is in place (its
    writer stopped after its first rename), so the log dir is read as it was before it.

    python benchmarks/bench_discovery.py                         # 400 partitions x 4
    python benchmarks/bench_discovery.py --partitions 2000 --repeat 15
"""
import argparse
import os
import platform
import signal
import subprocess
import sys
import time

import pyarrow as pa

from segmentlog_datasource.format import pending
from segmentlog_datasource.format.log import _listed, discover_copies
from segmentlog_datasource.storage import LOCAL
from segmentlog_datasource.writer import write_log
from segmentlog_datasource.writer.publish import STOP_HOOK

STOPPED_APPEND = """
import sys, pyarrow as pa
from segmentlog_datasource.writer import write_log
write_log(sys.argv[1], pa.table({"value": [b"x" * 100] * 64}), topic="t", mode="append",
          segment_bytes=1024, batch_size=8)
"""


def make_logdir(path, partitions, segments):
    if os.path.isdir(path):
        return
    rows = partitions * segments * 8
    table = pa.table({"value": [b"v" * 100] * rows,
                      "partition": pa.array([i % partitions for i in range(rows)], pa.int32())})
    write_log(path, table, topic="t", num_partitions=partitions, segment_bytes=1024,
              batch_size=8)


def listing_alone(path):
    tree = LOCAL.tree(path)
    return _listed(LOCAL, tree, path, False, pending.BeforePublishes())


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=400)
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--data", default="/tmp/segmentlog-bench-discovery")
    args = parser.parse_args()
    path = os.path.join(args.data, f"p{args.partitions}-s{args.segments}")
    make_logdir(path, args.partitions, args.segments)
    print(f"{platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} CPUs; {args.partitions} partitions x ~{args.segments} segments")
    assert len(discover_copies([path])) == len(listing_alone(path)) == args.partitions
    results = {"listing": [], "discovery": []}
    for _ in range(3):  # alternating rounds
        results["listing"].append(best(lambda: listing_alone(path), args.repeat))
        results["discovery"].append(best(lambda: discover_copies([path]), args.repeat))
    writer = subprocess.Popen([sys.executable, "-c", STOPPED_APPEND, path],
                              env=dict(os.environ, **{STOP_HOOK: "1"}))
    try:
        while open(f"/proc/{writer.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T":
            time.sleep(0.01)
        journal = best(lambda: discover_copies([path]), args.repeat)
    finally:
        os.kill(writer.pid, signal.SIGCONT)
        writer.wait()
    listing, discovery = min(results["listing"]), min(results["discovery"])
    print(f"listing alone            {listing * 1000:8.2f} ms")
    print(f"discovery                {discovery * 1000:8.2f} ms   "
          f"{discovery / listing:.3f}x the listing")
    print(f"discovery, journal found {journal * 1000:8.2f} ms   "
          f"{journal / listing:.3f}x the listing")


if __name__ == "__main__":
    main()
