"""What the framed-value benchmarks share: bench_{avro,json,protobuf}_decode.py (one core)
and bench_{avro,json,protobuf}_scan.py (Spark): the package they measure on the path, their
threads, payloads as a scan's spans, the framed log a scan reads, its timed readings, and
the figures the scans print.

Importing it puts the checkout's package first on sys.path, or the package of another
copy: SEGMENTLOG_BENCH_ROOT=<that copy> (with PYTHONPATH=<that copy>, for Spark's workers)
makes a before/after run. It imports neither pyarrow nor the package itself, so that a
decode benchmark pins Arrow's threads (pin_one_thread) before they are imported.
"""
import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("SEGMENTLOG_BENCH_ROOT") or os.path.dirname(HERE))

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

TOPIC = "orders"
SCHEMA_ID = 1
FRAME = b"\x00" + SCHEMA_ID.to_bytes(4, "big")  # Confluent's magic byte and the schema id
CHUNK = 100_000  # records per write: bounds the generator's memory


def pin_one_thread() -> None:
    """One core means one thread: keep Arrow from spreading work out. Called before
    pyarrow is imported."""
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


@contextlib.contextmanager
def threads_unpinned():
    """Within: import a decode benchmark (its records, its schema) without keeping the
    thread pinning it sets for its one-core figures: a scan uses every core (pyarrow is
    imported first, as Arrow sizes its thread pool from these variables)."""
    import pyarrow  # noqa: F401

    before = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)


# ------------------------------------------------------------------ timing

def in_turns(runs: dict, turns: int, rotate: bool = False, progress: bool = False):
    """Every callable of `runs` ({name: run}) run `turns` times, in turns: each turn runs
    each once, the order reversed every other turn (with `rotate`, shifted by one each
    turn). Returns ({name: [CPU seconds of this process]}, {name: [wall seconds]}); with
    `progress`, each turn's wall times go to stderr."""
    cpu = {name: [] for name in runs}
    wall = {name: [] for name in runs}
    names = list(runs)
    for turn in range(turns):
        if rotate:
            shift = turn % len(names)
            order = names[shift:] + names[:shift]
        else:
            order = names if turn % 2 == 0 else names[::-1]
        for name in order:
            cpu_started, started = time.process_time(), time.perf_counter()
            runs[name]()
            cpu[name].append(time.process_time() - cpu_started)
            wall[name].append(time.perf_counter() - started)
        if progress:
            print(f"round {turn + 1}/{turns}: " + ", ".join(
                f"{name} {wall[name][-1]:.2f}s" for name in names), file=sys.stderr, flush=True)
    return cpu, wall


# ------------------------------------------------------------------ payloads

def spans(payloads):
    """The payloads as spans of one buffer (value_formats.Payloads), as a scan's framed
    column gives them to a decoder."""
    import numpy as np

    from segmentlog_datasource.decode.value_formats import Payloads

    lengths = np.fromiter(map(len, payloads), np.int64, len(payloads))
    ends = np.cumsum(lengths)
    return Payloads(b"".join(payloads), ends - lengths, ends)


def batches(payloads, size: int) -> list:
    """The payloads in spans of `size` (a scan's batches)."""
    return [spans(payloads[at:at + size]) for at in range(0, len(payloads), size)]


# ------------------------------------------------------------------ the scans' log

def write_framed_log(logdir: str, schema: dict, framed, count: int, partitions: int) -> None:
    """`count` framed payloads (an iterable, written CHUNK at a time) in `partitions`
    partitions of TOPIC under `logdir`, in turn, and their schema in a `_schemas` topic, as
    Schema Registry writes it: subject TOPIC-value, version 1, id SCHEMA_ID, with the
    fields of `schema` (its "schema" text, and "schemaType" but for Avro)."""
    import pyarrow as pa

    from segmentlog_datasource.writer import write_log

    key = {"keytype": "SCHEMA", "subject": f"{TOPIC}-value", "version": 1, "magic": 1}
    value = {"subject": f"{TOPIC}-value", "version": 1, "id": SCHEMA_ID, **schema,
             "deleted": False}
    write_log(logdir, pa.table({"key": [json.dumps(key).encode()],
                                "value": [json.dumps(value).encode()]}),
              topic="_schemas", num_partitions=1)
    values, written = [], 0
    for payload in framed:
        values.append(payload)
        if len(values) == CHUNK or written + len(values) == count:
            write_log(logdir, pa.table({
                "value": pa.array(values, pa.binary()),
                "partition": pa.array([(written + n) % partitions for n in range(len(values))],
                                      pa.int32())}),
                topic=TOPIC, num_partitions=partitions)
            written += len(values)
            values = []


def log_bytes(logdir: str) -> int:
    """The bytes of TOPIC's .log files under `logdir`."""
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(logdir) for name in names
               if name.endswith(".log") and f"{TOPIC}-" in root)


# ------------------------------------------------------------------ the scans' readings

def scan_arguments(doc: str, records: int, ceiling: bool = False):
    """The options every scan benchmark takes (and --ceiling: see decoded_readings); a
    script adds its own."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--records", type=int, default=records)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    if ceiling:
        parser.add_argument("--ceiling", action="store_true",
                            help="also time the same batches prebuilt (see above)")
    parser.add_argument("--workdir", default=None,
                        help="keep the logs here (built when missing) instead of a temp dir")
    return parser


def scan(spark, logdir: str, value_format=None):
    """TOPIC of the log at `logdir`, as spark.read.format("segmentlog") loads it (with
    valueFormat when given)."""
    reader = spark.read.format("segmentlog").option("subscribe", TOPIC)
    if value_format:
        reader = reader.option("valueFormat", value_format)
    return reader.load(logdir)


def noop(frame):
    """A reading: `frame` (a DataFrame, or a callable that loads one at each run) fully
    consumed by Spark's noop sink."""
    load = frame if callable(frame) else (lambda: frame)
    return lambda: load().write.format("noop").mode("overwrite").save()


def raw_and_decoded(spark, logdir: str, value_format: str, load_each_run: bool) -> dict:
    """The readings `raw` (the plain columns) and `<value_format>` (valueDecoded selected)
    of the log at `logdir`; with `load_each_run`, each run loads its DataFrame, and the
    load is timed too."""
    frames = {"raw": lambda: scan(spark, logdir),
              value_format: lambda: scan(spark, logdir, value_format).select("valueDecoded")}
    return {name: noop(frame if load_each_run else frame()) for name, frame in frames.items()}


def decoded_readings(args, value_format: str, without_value: bool = False):
    """run_scans's `readings` of one log (directory `logdir`): raw_and_decoded, each run
    loading its DataFrame; with --ceiling, prebuilt_readings too."""
    def readings(spark, logdirs, workdir):
        runs = raw_and_decoded(spark, logdirs["logdir"], value_format, load_each_run=True)
        if args.ceiling:
            runs.update(prebuilt_readings(spark, logdirs["logdir"], workdir, args.partitions,
                                          value_format, without_value))
        return runs

    return readings


def check_decoded(frame, records: int, order_ids: int, *more) -> None:
    """Right answers first: `frame` has `records` rows, each value decoded, none lost (the
    sum of their order_id is `order_ids`), and each (SQL expression, value) of `more`."""
    wanted = (records, records, order_ids, *(value for _, value in more))
    got = tuple(frame.selectExpr("count(*)", "count(valueDecoded)", "sum(valueDecoded.order_id)",
                                 *(expression for expression, _ in more)).first())
    assert got == wanted, (got, wanted)


def run_scans(args, name: str, logs: dict, readings, check):
    """A scan benchmark's measured part. Under --workdir (or a temporary directory, removed
    at the end), each of `logs` ({directory: build(logdir, records, partitions)}) is built
    when missing; a local[2] session with segmentlog registered takes `readings(spark,
    logdirs, workdir)` ({reading: run}); `check(spark, logdirs)` first (right answers, and
    warm workers), then each reading once, then --rounds rounds in turns. Returns
    ({reading: [seconds]}, the first log's bytes of .log, the load average before the
    rounds and after)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import segmentlog_datasource

    workdir = args.workdir or tempfile.mkdtemp(prefix=f"segmentlog-{name}-scan-")
    try:
        logdirs = {directory: os.path.join(workdir, directory) for directory in logs}
        for directory, build in logs.items():
            if not os.path.isdir(logdirs[directory]):
                started = time.perf_counter()
                build(logdirs[directory], args.records, args.partitions)
                print(f"built {args.records:,} framed records ({directory}) in "
                      f"{time.perf_counter() - started:.1f}s")
        size = log_bytes(next(iter(logdirs.values())))

        spark = (SparkSession.builder.master("local[2]").appName(f"segmentlog-{name}-scan")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "4g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        segmentlog_datasource.register(spark, enable_filter_pushdown=False)
        runs = readings(spark, logdirs, workdir)
        check(spark, logdirs)
        for run in runs.values():
            run()
        load_before = os.getloadavg()[0]
        _, times = in_turns(runs, args.rounds, progress=True)
        load_after = os.getloadavg()[0]
        spark.stop()
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return times, size, load_before, load_after


# ------------------------------------------------------------------ --ceiling

def prebuild(logdir: str, target: str, partitions: int, value_format=None,
             drop=()) -> None:
    """Each partition's batches as segmentlog's reader gives them (less the columns in
    `drop`), in an Arrow IPC file."""
    import pyarrow as pa

    from segmentlog_datasource.decode import DecodedRead
    from segmentlog_datasource.format.scan import ScanOptions
    from segmentlog_datasource.read.options import parse_read_options
    from segmentlog_datasource.read.planning import Constraints

    os.makedirs(target, exist_ok=True)
    for partition in range(partitions):
        options = {"path": logdir, "assign": json.dumps({TOPIC: [partition]})}
        if value_format:
            options["valueFormat"] = value_format
        read = DecodedRead(options)
        plan = read.plan(read.read_options(parse_read_options(options)), Constraints())
        batches = [batch.drop_columns(list(drop)) if drop else batch
                   for batch in read.scan(plan, ScanOptions())]
        with pa.OSFile(os.path.join(target, f"{partition}.arrow"), "wb") as sink:
            with pa.ipc.new_file(sink, batches[0].schema) as writer:
                for batch in batches:
                    writer.write_batch(batch)


def prebuilt_source():
    """A Python data source yielding the batches of prebuild's files, one split each
    (its classes defined here, so that Spark's workers get them pickled whole)."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class PrebuiltReader(DataSourceReader):
        def __init__(self, path):
            self.path = path

        def partitions(self):
            return [InputPartition(os.path.join(self.path, name))
                    for name in sorted(os.listdir(self.path))]

        def read(self, partition):
            with pa.memory_map(partition.value) as source:
                reader = pa.ipc.open_file(source)
                for index in range(reader.num_record_batches):
                    yield reader.get_batch(index)

    class PrebuiltSource(DataSource):
        @classmethod
        def name(cls):
            return "prebuilt_bench"

        def schema(self):
            from pyspark.sql.pandas.types import from_arrow_schema

            first = os.path.join(self.options["path"], sorted(os.listdir(self.options["path"]))[0])
            with pa.memory_map(first) as source:
                return from_arrow_schema(pa.ipc.open_file(source).schema)

        def reader(self, schema):
            return PrebuiltReader(self.options["path"])

    return PrebuiltSource


def prebuilt_readings(spark, logdir: str, workdir: str, partitions: int, value_format: str,
                      without_value: bool = False) -> dict:
    """--ceiling's readings: the very batches of the log at `logdir` prebuilt (decoded
    once, kept in memory-mapped Arrow IPC files under `workdir`) and yielded by a trivial
    Python data source: the plain columns (`prebuilt raw`), and with valueDecoded,
    selecting it (`prebuilt <value_format>`); with `without_value`, also the latter less
    the raw `value` column (`prebuilt <value_format>, no value`)."""
    prebuilt = os.path.join(workdir, "prebuilt")
    shutil.rmtree(prebuilt, ignore_errors=True)
    kinds = {"prebuilt raw": ("raw", None, ()),
             f"prebuilt {value_format}": (value_format, value_format, ())}
    if without_value:
        kinds[f"prebuilt {value_format}, no value"] = (f"{value_format}-no-value", value_format,
                                                       ("value",))
    spark.dataSource.register(prebuilt_source())
    readings = {}
    for reading, (directory, decoded, drop) in kinds.items():
        prebuild(logdir, os.path.join(prebuilt, directory), partitions, decoded, drop)
        frame = spark.read.format("prebuilt_bench").option(
            "path", os.path.join(prebuilt, directory)).load()
        readings[reading] = noop(frame.select("valueDecoded") if decoded else frame)
    return readings


# ------------------------------------------------------------------ the scans' figures

def print_scans(args, times: dict, size: int, loads, what: str, versions: str,
                decoded: str, target: float) -> None:
    """A scan benchmark's figures: the run (`what` was scanned; `versions` beside
    Python's, PySpark's and pyarrow's), each reading's median, best and worst over the
    rounds, and `decoded`'s ratio to raw (the target: at most `target`)."""
    import pyarrow as pa
    import pyspark

    print(f"{args.records:,} records of {what}, framed, in {args.partitions} partitions "
          f"({size / 1e6:.0f} MB of .log); local[2]; noop sink; {args.rounds} rounds, "
          f"alternating; load average {loads[0]:.1f} before the rounds, {loads[1]:.1f} after")
    print(f"python {platform.python_version()}, pyspark {pyspark.__version__}, "
          f"pyarrow {pa.__version__}{versions}")
    raw = statistics.median(times["raw"])
    width = max(map(len, times))
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<{width}} median {median:6.2f} s  best {min(values):6.2f} s  "
              f"worst {max(values):6.2f} s  {args.records / median / 1e6:6.3f} M records/s  "
              f"{median / raw:5.2f}x raw")
    ratios = sorted(value / plain for value, plain in zip(times[decoded], times["raw"]))
    print(f"  {decoded} / raw: {statistics.median(times[decoded]) / raw:.2f}x (medians; per "
          f"round {ratios[0]:.2f}x-{ratios[-1]:.2f}x; target <= {target:g}x)")
    prebuilt = f"prebuilt {decoded}"
    if prebuilt in times:  # --ceiling
        carried = statistics.median(times[prebuilt])
        prebuilt_raw = statistics.median(times["prebuilt raw"])
        print(f"  {prebuilt} / raw: {carried / raw:.2f}x (Spark carrying the struct, nothing "
              f"scanned or decoded); {prebuilt} / prebuilt raw: {carried / prebuilt_raw:.2f}x")
        # decoding free: the struct carried, plus what the scan adds to prebuilt batches
        floor = carried + raw - prebuilt_raw
        print(f"  floor ({prebuilt} + raw - prebuilt raw): {floor:.2f} s, {floor / raw:.2f}x "
              f"raw; the decoding costs {decoded} "
              f"{statistics.median(times[decoded]) - floor:.2f} s over it")
