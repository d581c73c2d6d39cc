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
import json

# what the framed-value scans share: the log's writing, the session, the rounds, the figures
from framed_common import (FRAME, check_decoded, noop, print_scans, raw_and_decoded,
                           run_scans, scan, scan_arguments, threads_unpinned,
                           write_framed_log)

with threads_unpinned():
    from bench_avro_decode import records
    from bench_json_decode import ORDER


def build_log(logdir: str, count: int, partitions: int) -> None:
    """The framed JSON log and its `_schemas` topic under `logdir`."""
    framed = (FRAME + json.dumps(datum, separators=(",", ":")).encode()
              for datum in records(count))
    write_framed_log(logdir, {"schemaType": "JSON", "schema": json.dumps(ORDER)}, framed,
                     count, partitions)


def main() -> None:
    parser = scan_arguments(__doc__, records=300_000)
    parser.add_argument("--avro", action="store_true",
                        help="also the same records as Avro, valueFormat=avro")
    args = parser.parse_args()
    logs = {"json": build_log}
    if args.avro:
        from bench_avro_scan import build_log as build_avro_log

        logs["avro"] = build_avro_log

    def readings(spark, logdirs, workdir):
        runs = raw_and_decoded(spark, logdirs["json"], "json", load_each_run=False)
        if "avro" in logdirs:
            runs["avro"] = noop(scan(spark, logdirs["avro"], "avro").select("valueDecoded"))
        return runs

    def check(spark, logdirs):
        expected = sum(datum["order_id"] for datum in records(args.records))
        for value_format, logdir in logdirs.items():
            check_decoded(scan(spark, logdir, value_format), args.records, expected)

    times, size, *loads = run_scans(args, "json", logs, readings, check)
    print_scans(args, times, size, loads, "a 10-field JSON object", "", "json", 2)


if __name__ == "__main__":
    main()
