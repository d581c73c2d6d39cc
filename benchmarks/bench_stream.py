"""Structured Streaming benchmarks, measured side by side in one run.

(a) Catch-up: `readStream.format("segmentlog")` with Trigger.AvailableNow and no rate
    limit into the `noop` sink, beside a batch read of the same log into `noop`, in
    alternating runs (each stream run with a fresh checkpoint). The log is generated as
    bench_spark_read.py generates it (200-byte values, 4 partitions, 16 MB segments).
    Beside them, the same pair for a Python source that yields the same rows as prebuilt
    Arrow batches, batch and streaming: what Spark's Python streaming path costs without
    any decoding or log planning.
(b) Latency: a `processingTime("0 seconds")` query over a log dir that another thread
    appends to with the writer engine (no Spark), one record per append, one append at a
    time: from just before the append to the moment foreachBatch has the record. Beside
    it, the floor: the same query and appender over a Python source whose "log" is a
    counter in a file.

Usage: cd /tmp && python /path/to/checkout/benchmarks/bench_stream.py
           [--records 2000000] [--runs 3] [--appends 200]
           [--skip-catchup] [--skip-ceiling] [--skip-latency]
(Run it from outside the checkout, so that Spark's Python workers import the installed
package.)
"""
import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyarrow as pa  # noqa: E402
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition  # noqa: E402

from _gen import generate_log  # noqa: E402
from prebuilt_sources import PrebuiltArrowSource, workers_import_from_here  # noqa: E402

workers_import_from_here()

LATENCY_TOPIC = "latency"
LATENCY_PARTITIONS = 4


def prebuild_arrow(logdir, target):
    """The Arrow output of each segmentlog Spark partition, one IPC file each, planned and
    read without Spark."""
    from segmentlog_datasource.format.scan import ScanOptions
    from segmentlog_datasource.read.fragments import scan_fragments
    from segmentlog_datasource.read.options import parse_read_options
    from segmentlog_datasource.read.planning import Constraints, group_fragments, plan_fragments

    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    read = parse_read_options({"path": logdir})
    for n, group in enumerate(group_fragments(plan_fragments(read, Constraints()), read)):
        batches = list(scan_fragments(group, ScanOptions()))
        with pa.OSFile(os.path.join(target, f"{n:05d}.arrow"), "wb") as sink:
            with pa.ipc.new_file(sink, batches[0].schema) as writer:
                for batch in batches:
                    writer.write_batch(batch)


def log_bytes(logdir: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(logdir) for name in names
               if name.endswith(".log"))


def percentile(values, fraction):
    """Nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(-(-fraction * len(ordered) // 1)) - 1))]


def epoch(iso: str) -> float:
    """A progress report's timestamp ('2026-01-01T00:00:00.000Z') in epoch seconds."""
    import datetime as dt

    return dt.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=dt.timezone.utc).timestamp()


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def catch_up(spark, sources, workdir: str, runs: int, records: int, log_mb: float):
    """sources: [(label, format, path)]; each is read as a batch and as a stream."""
    def batch(fmt, path):
        spark.read.format(fmt).load(path).write.format("noop").mode("overwrite").save()

    def stream(fmt, path):
        checkpoint = os.path.join(workdir, "checkpoint-catch-up")
        shutil.rmtree(checkpoint, ignore_errors=True)
        started = time.time()
        query = (spark.readStream.format(fmt).load(path)
                 .writeStream.format("noop").option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        ended = time.time()
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        progresses = query.recentProgress
        rows = sum(p["numInputRows"] for p in progresses)
        assert rows == records, f"the {fmt} stream read {rows:,} rows of {records:,}"
        durations = {"batches": len([p for p in progresses if p["numInputRows"]])}
        if progresses:
            last = progresses[-1]
            durations["before the first trigger"] = int(
                1000 * (epoch(progresses[0]["timestamp"]) - started))
            durations["after the last trigger"] = int(1000 * (ended - epoch(last["timestamp"]))
                                                      - last["durationMs"]["triggerExecution"])
        for progress in progresses:
            for name, ms in progress["durationMs"].items():
                durations[name] = durations.get(name, 0) + ms
        shutil.rmtree(checkpoint, ignore_errors=True)
        return durations

    def timed(fn, *args):
        start = time.perf_counter()
        result = fn(*args)
        return time.perf_counter() - start, result

    times = {(label, kind): [] for label, _, _ in sources for kind in ("batch", "stream")}
    breakdowns = {label: [] for label, _, _ in sources}
    for _, fmt, path in sources:  # warm up: workers, imports, page cache
        timed(batch, fmt, path)
        timed(stream, fmt, path)
    for n in range(runs):
        # Alternate the order, so that drift of the machine hits every figure alike.
        rounds = [(label, kind, fmt, path) for label, fmt, path in sources
                  for kind in ("batch", "stream")]
        for label, kind, fmt, path in (rounds if n % 2 == 0 else rounds[::-1]):
            seconds, durations = timed(batch if kind == "batch" else stream, fmt, path)
            times[(label, kind)].append(seconds)
            if kind == "stream":
                breakdowns[label].append((seconds, durations))

    print(f"(a) catch-up over {records:,} records ({log_mb:.0f} MB of .log), local[2], "
          f"{runs} alternating runs, seconds")
    for label, _, _ in sources:
        t_batch, t_stream = times[(label, "batch")], times[(label, "stream")]
        print(f"    {label:<24} batch -> noop          "
              + "  ".join(f"{t:6.2f}" for t in t_batch))
        print(f"    {'':<24} AvailableNow -> noop   "
              + "  ".join(f"{t:6.2f}" for t in t_stream))
        best_b, best_s = min(t_batch), min(t_stream)
        print(f"    {'':<24} best batch {best_b:.2f} s ({records / best_b:,.0f} records/s), "
              f"best stream {best_s:.2f} s ({records / best_s:,.0f} records/s)")
        print(f"    {'':<24} ratio stream/batch {best_s / best_b:.2f}x best, "
              f"{median(t_stream) / median(t_batch):.2f}x median")
        seconds, durations = min(breakdowns[label], key=lambda item: item[0])
        durations = dict(durations)
        batches = durations.pop("batches")
        trigger = durations.pop("triggerExecution", 0)
        before = durations.pop("before the first trigger", 0)
        after = durations.pop("after the last trigger", 0)
        parts = ", ".join(f"{name} {ms}" for name, ms in
                          sorted(durations.items(), key=lambda item: -item[1]) if ms)
        print(f"    {'':<24} best stream run, ms: start to first trigger {before}, "
              f"{batches} trigger(s) {trigger} ({parts}), last trigger to termination {after}")
    if len(sources) > 1:
        ours, ceiling = sources[0][0], sources[1][0]
        print(f"    segmentlog stream / {ceiling} stream: "
              f"{min(times[(ours, 'stream')]) / min(times[(ceiling, 'stream')]):.2f}x best")
    print("    target: segmentlog stream within 1.3x of the segmentlog batch read")


class CounterSource(DataSource):
    """The floor of (b): a Python streaming source whose log is one integer in a file (how
    many records were appended); offset i is the row (0, i)."""

    @classmethod
    def name(cls):
        return "counter_file"

    def schema(self):
        return "partition int, offset bigint"

    def streamReader(self, schema):
        return CounterStreamReader(self.options["path"])


class CounterStreamReader(DataSourceStreamReader):
    def __init__(self, path):
        self.path = path

    def initialOffset(self):
        return {"n": 0}

    def latestOffset(self, start=None, limit=None):
        with open(self.path) as handle:
            return {"n": int(handle.read())}

    def partitions(self, start, end):
        return [InputPartition((start["n"], end["n"]))] if end["n"] > start["n"] else []

    def read(self, partition):
        first, end = partition.value
        for offset in range(first, end):
            yield (0, offset)

    def commit(self, end):
        pass


class SegmentLogFeed:
    """Appends one record per call with the writer engine (a write job per append)."""
    label = "segmentlog, writer engine appends"
    format = "segmentlog"

    def __init__(self, workdir):
        self.path = os.path.join(workdir, "latency-logdir")
        shutil.rmtree(self.path, ignore_errors=True)

    def append(self, n):
        from segmentlog_datasource.writer import SegmentLogWriter

        partition = n % LATENCY_PARTITIONS
        row = {"key": b"k%d" % n, "value": b"append %d" % n, "partition": partition,
               "timestamp": int(time.time() * 1000)}
        with SegmentLogWriter(self.path, LATENCY_TOPIC, mode="append",
                              num_partitions=LATENCY_PARTITIONS) as writer:
            writer.write_rows([row])
        (first, end), = [span for tp, span in writer.summary.offsets().items()
                         if tp[1] == partition]
        assert end == first + 1, (first, end)
        return (partition, first)


class CounterFeed:
    """Bumps the counter file of CounterSource (written aside, renamed into place)."""
    label = "floor: counter-file source"
    format = "counter_file"

    def __init__(self, workdir):
        self.path = os.path.join(workdir, "latency-counter")
        self.count = 0

    def append(self, n):
        with open(self.path + ".tmp", "w") as handle:
            handle.write(str(self.count + 1))
        os.replace(self.path + ".tmp", self.path)
        self.count += 1
        return (0, self.count - 1)


def latency(spark, feed, workdir: str, appends: int, warmup: int):
    """Median and 99th percentile, in ms, from just before an append to foreachBatch
    having the record; appends come from a thread of their own, one at a time."""
    checkpoint = os.path.join(workdir, "checkpoint-latency")
    shutil.rmtree(checkpoint, ignore_errors=True)
    seen = {}  # (partition, offset) -> time foreachBatch had it
    batches = []
    arrived = threading.Condition()

    def sink(batch_df, batch_id):
        rows = batch_df.select("partition", "offset").collect()
        now = time.time()
        with arrived:
            for row in rows:
                key = (row.partition, row.offset)
                assert key not in seen, f"{key} delivered twice"
                seen[key] = now
            batches.append((batch_id, len(rows)))
            arrived.notify_all()

    for n in range(-LATENCY_PARTITIONS, 0):  # every partition exists before the query starts
        feed.append(n)
    query = (spark.readStream.format(feed.format).load(feed.path)
             .writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(processingTime="0 seconds").start())
    latencies, append_seconds, failure = [], [], []

    def appender():
        rng = random.Random(0)
        try:
            for n in range(warmup + appends):
                time.sleep(rng.uniform(0, 0.02))  # off the trigger loop's phase
                start = time.time()
                key = feed.append(n)
                appended = time.time()
                with arrived:
                    if not arrived.wait_for(
                            lambda: key in seen or query.exception() is not None, timeout=60):
                        raise RuntimeError(f"append {n} ({key}) not seen within 60 s")
                if query.exception() is not None:
                    raise RuntimeError(str(query.exception()))
                if n >= warmup:
                    latencies.append(seen[key] - start)
                    append_seconds.append(appended - start)
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=appender, name="appender")
    try:
        thread.start()
        thread.join()
    finally:
        query.stop()
    if failure:
        raise failure[0]
    expected = warmup + appends + LATENCY_PARTITIONS
    assert len(seen) == expected, f"{len(seen)} records seen, {expected} appended"
    ms = [1000 * t for t in latencies]
    print(f"    {feed.label:<36} median {median(ms):5.0f} ms   p99 "
          f"{percentile(ms, 0.99):5.0f} ms   min {min(ms):4.0f}   max {max(ms):5.0f}   "
          f"append itself {1000 * median(append_seconds):5.1f} ms (median), "
          f"{len(batches)} non-empty micro-batches")
    shutil.rmtree(checkpoint, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--value-size", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--segment-bytes", type=int, default=16 << 20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--warmup-appends", type=int, default=10)
    parser.add_argument("--workdir", default=None, help="kept, and its log reused")
    parser.add_argument("--skip-catchup", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-ceiling", action="store_true",
                        help="no prebuilt-Arrow comparison in (a)")
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import segmentlog_datasource

    workdir = args.workdir or tempfile.mkdtemp(prefix="segmentlog-bench-stream-")
    os.makedirs(workdir, exist_ok=True)
    logdir = os.path.join(workdir, "logdir")
    try:
        if not args.skip_catchup and not os.path.isdir(logdir):
            start = time.perf_counter()
            generate_log(logdir, "bench", args.partitions, args.records // args.partitions,
                         args.value_size, segment_bytes=args.segment_bytes)
            print(f"generated {args.records:,} records in {time.perf_counter() - start:.1f}s")

        spark = (SparkSession.builder.master("local[2]").appName("segmentlog-bench-stream")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "4g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        segmentlog_datasource.register(spark, enable_filter_pushdown=False)
        print()
        if not args.skip_catchup:
            sources = [("segmentlog", "segmentlog", logdir)]
            if not args.skip_ceiling:
                arrow_dir = os.path.join(workdir, "arrow")
                prebuild_arrow(logdir, arrow_dir)
                spark.dataSource.register(PrebuiltArrowSource)
                sources.append(("prebuilt Arrow (ceiling)", "prebuilt_arrow", arrow_dir))
            catch_up(spark, sources, workdir, args.runs,
                     args.records // args.partitions * args.partitions, log_bytes(logdir) / 1e6)
        if not args.skip_latency:
            print(f"(b) latency, append -> foreachBatch, processingTime 0 s, {args.appends} "
                  f"appends of one record ({args.warmup_appends} warm-up appends left out)")
            spark.dataSource.register(CounterSource)
            for feed in (SegmentLogFeed(workdir), CounterFeed(workdir)):
                latency(spark, feed, workdir, args.appends, args.warmup_appends)
        spark.stop()
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
