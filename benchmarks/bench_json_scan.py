"""A Spark scan with valueFormat=json beside a raw scan of the same log ("Framed values
II"), side by side in one run.

The log: --records records of bench_avro_decode.py's 10-field record (strings, ints,
longs, doubles, a nullable string, an array of strings) as JSON text without spaces (as
Schema Registry's Jackson-based serializer writes it), framed as Confluent's serializer
frames them (schema id 1), in --partitions partitions of topic `orders`; the JSON Schema
(bench_json_decode.py's ORDER) registered beside them in a `_schemas` topic, as Schema
Registry writes it. Readings, each `spark.read.format("segmentlog")...load(logdir)`
fully consumed by Spark's `noop` sink, local[2]:

  * raw:  the plain columns (topic, partition, offset, timestamp, key, value, ...);
  * json: option valueFormat=json, selecting valueDecoded (the struct column).

With --avro, a third reading: the same records as Avro (a log of its own, built as
bench_avro_scan.py builds it), valueFormat=avro: what the columnar Avro decoder gives on
the same machine in the same run.

Each round runs every reading (the order alternating between rounds); medians over the
rounds, and their ratio (target: json within 2x of raw). Run it from outside the
checkout (Spark's Python workers put the working directory first on their path):

    cd /tmp && python /path/to/checkout/benchmarks/bench_json_scan.py
    cd /tmp && python /path/to/checkout/benchmarks/bench_json_scan.py --rounds 9 --avro
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
sys.path.insert(0, os.path.dirname(HERE))

import pyarrow as pa  # noqa: E402

_THREADS = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                     "MKL_NUM_THREADS")}
from bench_avro_decode import records  # noqa: E402
from bench_json_decode import ORDER  # noqa: E402

for _name, _value in _THREADS.items():  # they pin threads for one-core figures: not here
    if _value is None:
        os.environ.pop(_name, None)

TOPIC = "orders"
SCHEMA_ID = 1
CHUNK = 100_000  # records per write: bounds the generator's memory


def build_log(logdir: str, count: int, partitions: int) -> None:
    """The framed JSON log and its `_schemas` topic under `logdir`."""
    from segmentlog_datasource.writer import write_log

    key = {"keytype": "SCHEMA", "subject": f"{TOPIC}-value", "version": 1, "magic": 1}
    value = {"subject": f"{TOPIC}-value", "version": 1, "id": SCHEMA_ID, "schemaType": "JSON",
             "schema": json.dumps(ORDER), "deleted": False}
    write_log(logdir, pa.table({"key": [json.dumps(key).encode()],
                                "value": [json.dumps(value).encode()]}),
              topic="_schemas", num_partitions=1)
    frame = b"\x00" + SCHEMA_ID.to_bytes(4, "big")
    values, written = [], 0
    for datum in records(count):
        values.append(frame + json.dumps(datum, separators=(",", ":")).encode())
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
    parser.add_argument("--avro", action="store_true",
                        help="also the same records as Avro, valueFormat=avro")
    parser.add_argument("--workdir", default=None,
                        help="keep the logs here (built when missing) instead of a temp dir")
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import segmentlog_datasource

    workdir = args.workdir or tempfile.mkdtemp(prefix="segmentlog-json-scan-")
    logdir = os.path.join(workdir, "json")
    avrodir = os.path.join(workdir, "avro")
    try:
        if not os.path.isdir(logdir):
            started = time.perf_counter()
            build_log(logdir, args.records, args.partitions)
            print(f"built {args.records:,} framed JSON records in "
                  f"{time.perf_counter() - started:.1f}s")
        if args.avro and not os.path.isdir(avrodir):
            from bench_avro_scan import build_log as build_avro_log

            build_avro_log(avrodir, args.records, args.partitions)
        expected = sum(datum["order_id"] for datum in records(args.records))
        log_bytes = sum(os.path.getsize(os.path.join(root, name))
                        for root, _, names in os.walk(logdir) for name in names
                        if name.endswith(".log") and f"{TOPIC}-" in root)

        spark = (SparkSession.builder.master("local[2]").appName("segmentlog-json-scan")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "4g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        segmentlog_datasource.register(spark, enable_filter_pushdown=False)

        def frame(value_format=None, path=logdir):
            reader = spark.read.format("segmentlog").option("subscribe", TOPIC)
            if value_format:
                reader = reader.option("valueFormat", value_format)
            return reader.load(path)

        def noop(df):
            return lambda: df.write.format("noop").mode("overwrite").save()

        readings = {"raw": noop(frame()),
                    "json": noop(frame("json").select("valueDecoded"))}
        if args.avro:
            readings["avro"] = noop(frame("avro", avrodir).select("valueDecoded"))
        # Right answers first (and warm workers): every value decoded, none lost.
        for value_format, path in [("json", logdir)] + ([("avro", avrodir)] if args.avro
                                                         else []):
            check = frame(value_format, path).selectExpr(
                "count(*) AS n", "count(valueDecoded) AS decoded",
                "sum(valueDecoded.order_id) AS ids").first()
            assert (check.n, check.decoded, check.ids) == (args.records, args.records,
                                                           expected), (value_format, check)
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

    import pyspark

    print(f"{args.records:,} records of a 10-field JSON object, framed, in {args.partitions} "
          f"partitions ({log_bytes / 1e6:.0f} MB of .log); local[2]; noop sink; "
          f"{args.rounds} rounds, alternating; load average {load_before[0]:.1f} before the "
          f"rounds, {load_after[0]:.1f} after")
    print(f"python {platform.python_version()}, pyspark {pyspark.__version__}, "
          f"pyarrow {pa.__version__}")
    raw = statistics.median(times["raw"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<6} median {median:6.2f} s  best {min(values):6.2f} s  "
              f"worst {max(values):6.2f} s  {args.records / median / 1e6:6.2f} M records/s  "
              f"{median / raw:5.2f}x raw")
    ratios = sorted(decoded / plain for decoded, plain in zip(times["json"], times["raw"]))
    print(f"  json / raw: {statistics.median(times['json']) / raw:.2f}x (medians; per round "
          f"{ratios[0]:.2f}x-{ratios[-1]:.2f}x; target <= 2x)")


if __name__ == "__main__":
    main()
