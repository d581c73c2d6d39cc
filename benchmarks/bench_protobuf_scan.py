"""A Spark scan with valueFormat=protobuf beside a raw scan of the same log, side by side
in one run.

The log: --records records of bench_protobuf_decode.py's 10-field message (strings, ints,
longs, doubles, an optional string, a bool and a repeated string), serialized by the
protobuf runtime and framed as Confluent's serializer frames them (schema id 1, message
indexes [0]), in --partitions partitions of topic `orders`; the .proto is registered
beside them in a `_schemas` topic, as Schema Registry writes it. Two readings, each
`spark.read.format("segmentlog")...load(logdir)` fully consumed by Spark's `noop` sink,
local[2]:

  * raw:      the plain columns (topic, partition, offset, timestamp, key, value, ...);
  * protobuf: option valueFormat=protobuf, selecting valueDecoded (the struct column).

With --ceiling, two more readings, as bench_avro_scan.py's: the very same batches
prebuilt (decoded once, kept in memory-mapped Arrow IPC files) and yielded by a trivial
Python data source: the plain columns (`prebuilt raw`), and with valueDecoded, selecting
it (`prebuilt protobuf`): what Spark costs to carry the struct, with no scan and no
decoding at all.

Each round runs every reading (the order alternating between rounds); medians over the
rounds, and their ratio (target: protobuf within 2x of raw). Run it from outside the
checkout (Spark's Python workers put the working directory first on their path):

    cd /tmp && python /path/to/checkout/benchmarks/bench_protobuf_scan.py
    cd /tmp && python /path/to/checkout/benchmarks/bench_protobuf_scan.py --rounds 9 --ceiling

SEGMENTLOG_BENCH_ROOT=<another copy of the package> takes the package from there instead
of this checkout (with PYTHONPATH=<that copy>, for the workers): a before/after run.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.environ.get("SEGMENTLOG_BENCH_ROOT") or os.path.dirname(HERE))

import pyarrow as pa  # noqa: E402

_THREADS = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                     "MKL_NUM_THREADS")}
from bench_protobuf_decode import ORDER_PROTO, message_class, records  # noqa: E402

for _name, _value in _THREADS.items():  # it pins threads for its one-core figures: not here
    if _value is None:
        os.environ.pop(_name, None)

TOPIC = "orders"
SCHEMA_ID = 1
CHUNK = 100_000  # records per write: bounds the generator's memory


def build_log(logdir: str, count: int, partitions: int) -> None:
    """The framed log and its `_schemas` topic under `logdir`."""
    from segmentlog_datasource.writer import write_log

    key = {"keytype": "SCHEMA", "subject": f"{TOPIC}-value", "version": 1, "magic": 1}
    value = {"subject": f"{TOPIC}-value", "version": 1, "id": SCHEMA_ID,
             "schema": ORDER_PROTO, "schemaType": "PROTOBUF", "deleted": False}
    write_log(logdir, pa.table({"key": [json.dumps(key).encode()],
                                "value": [json.dumps(value).encode()]}),
              topic="_schemas", num_partitions=1)
    cls = message_class()
    frame = b"\x00" + SCHEMA_ID.to_bytes(4, "big") + b"\x00"  # message indexes [0]
    values, written = [], 0
    for record in records(count):
        values.append(frame + cls(**record).SerializeToString())
        if len(values) == CHUNK or written + len(values) == count:
            write_log(logdir, pa.table({
                "value": pa.array(values, pa.binary()),
                "partition": pa.array([(written + n) % partitions for n in range(len(values))],
                                      pa.int32())}),
                topic=TOPIC, num_partitions=partitions)
            written += len(values)
            values = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--ceiling", action="store_true",
                        help="also time the same batches prebuilt (see above)")
    parser.add_argument("--workdir", default=None,
                        help="keep the log here (built when missing) instead of a temp dir")
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import segmentlog_datasource

    workdir = args.workdir or tempfile.mkdtemp(prefix="segmentlog-protobuf-scan-")
    logdir = os.path.join(workdir, "logdir")
    try:
        if not os.path.isdir(logdir):
            started = time.perf_counter()
            build_log(logdir, args.records, args.partitions)
            print(f"built {args.records:,} framed records in "
                  f"{time.perf_counter() - started:.1f}s")
        expected = sum(record["order_id"] for record in records(args.records))
        log_bytes = sum(os.path.getsize(os.path.join(root, name))
                        for root, _, names in os.walk(logdir) for name in names
                        if name.endswith(".log") and f"{TOPIC}-" in root)

        spark = (SparkSession.builder.master("local[2]").appName("segmentlog-protobuf-scan")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "4g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        segmentlog_datasource.register(spark, enable_filter_pushdown=False)

        def frame(value_format=None):
            reader = spark.read.format("segmentlog").option("subscribe", TOPIC)
            if value_format:
                reader = reader.option("valueFormat", value_format)
            return reader.load(logdir)

        readings = {
            "raw": lambda: frame().write.format("noop").mode("overwrite").save(),
            "protobuf": lambda: frame("protobuf").select("valueDecoded").write.format("noop")
            .mode("overwrite").save(),
        }
        if args.ceiling:
            from bench_avro_scan import prebuild, prebuilt_source

            prebuilt = os.path.join(workdir, "prebuilt")
            shutil.rmtree(prebuilt, ignore_errors=True)
            prebuild(logdir, os.path.join(prebuilt, "raw"), args.partitions)
            prebuild(logdir, os.path.join(prebuilt, "protobuf"), args.partitions, "protobuf")
            spark.dataSource.register(prebuilt_source())

            def from_prebuilt(name, *columns):
                df = spark.read.format("prebuilt_avro_bench").option(
                    "path", os.path.join(prebuilt, name)).load()
                return lambda: (df.select(*columns) if columns else df).write.format(
                    "noop").mode("overwrite").save()

            readings["prebuilt raw"] = from_prebuilt("raw")
            readings["prebuilt protobuf"] = from_prebuilt("protobuf", "valueDecoded")
        # Right answers first (and warm workers): every value decoded, none lost.
        check = frame("protobuf").selectExpr(
            "count(*) AS n", "count(valueDecoded) AS decoded",
            "sum(valueDecoded.order_id) AS ids", "count(valueDecoded.note) AS notes").first()
        assert (check.n, check.decoded, check.ids, check.notes) == (
            args.records, args.records, expected, (args.records + 2) // 3), check
        for run in readings.values():
            run()

        load_before = os.getloadavg()
        times = {name: [] for name in readings}
        names = list(readings)
        for round_number in range(args.rounds):
            order = names if round_number % 2 == 0 else names[::-1]
            for name in order:
                started = time.perf_counter()
                readings[name]()
                times[name].append(time.perf_counter() - started)
            print(f"round {round_number + 1}/{args.rounds}: " + ", ".join(
                f"{name} {times[name][-1]:.2f}s" for name in names), file=sys.stderr,
                flush=True)
        load_after = os.getloadavg()
        spark.stop()
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)

    import google.protobuf
    import pyspark

    try:
        from segmentlog_datasource.decode.protobuf_program import extension
    except ImportError:  # a copy from before the compiled decoder
        compiled = "row by row (no compiled decoder in this copy)"
    else:
        compiled = "compiled" if extension() is not None else "row by row (not built)"
    print(f"{args.records:,} records of a 10-field Protobuf message, framed, in "
          f"{args.partitions} partitions ({log_bytes / 1e6:.0f} MB of .log); local[2]; noop "
          f"sink; {args.rounds} rounds, alternating; load average {load_before[0]:.1f} before "
          f"the rounds, {load_after[0]:.1f} after; the decoder {compiled}")
    print(f"python {platform.python_version()}, pyspark {pyspark.__version__}, "
          f"pyarrow {pa.__version__}, protobuf {google.protobuf.__version__}, package from "
          f"{os.path.dirname(segmentlog_datasource.__file__)}")
    raw = statistics.median(times["raw"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<18} median {median:6.2f} s  best {min(values):6.2f} s  "
              f"worst {max(values):6.2f} s  {args.records / median / 1e6:6.3f} M records/s")
    ratios = sorted(decoded / plain for decoded, plain in zip(times["protobuf"], times["raw"]))
    print(f"  protobuf / raw: {statistics.median(times['protobuf']) / raw:.2f}x (medians; per "
          f"round {ratios[0]:.2f}x-{ratios[-1]:.2f}x; target <= 2x)")
    if args.ceiling:
        carried = statistics.median(times["prebuilt protobuf"])
        print(f"  prebuilt protobuf / raw: {carried / raw:.2f}x (Spark carrying the struct, "
              f"nothing scanned or decoded); prebuilt protobuf / prebuilt raw: "
              f"{carried / statistics.median(times['prebuilt raw']):.2f}x")
        floor = carried + raw - statistics.median(times["prebuilt raw"])
        print(f"  floor (prebuilt protobuf + raw - prebuilt raw): {floor:.2f} s, "
              f"{floor / raw:.2f}x raw; the decoding costs protobuf "
              f"{statistics.median(times['protobuf']) - floor:.2f} s over it")


if __name__ == "__main__":
    main()
