"""A Spark scan with valueFormat=avro beside a raw scan of the same log (issue #24), side
by side in one run.

The log: --records records of bench_avro_decode.py's 10-field Avro record (strings, ints,
longs, doubles, a nullable field, an array), encoded by fastavro and framed as Confluent's
serializer frames them (schema id 1), in --partitions partitions of topic `orders`; the
schema is registered beside them in a `_schemas` topic, as Schema Registry writes it.
Two readings, each `spark.read.format("segmentlog")...load(logdir)` fully consumed by
Spark's `noop` sink, local[2]:

  * raw:  the plain columns (topic, partition, offset, timestamp, key, value, ...);
  * avro: option valueFormat=avro, selecting valueDecoded (the struct column).

With --ceiling, two more readings say where avro's time goes: a trivial Python data
source yielding the very same batches, prebuilt (decoded once, kept in memory-mapped
Arrow IPC files): the plain columns (`prebuilt raw`) and the plain columns with
valueDecoded, selecting it (`prebuilt avro`): what Spark costs to carry the struct, with
no scan and no decoding at all. With --without-value also the latter less the raw
`value` column (`prebuilt avro, no value`): what the struct would cost were the raw
payloads not carried beside it.

Each round runs every reading (the order alternating between rounds); medians over the
rounds, and their ratio (target: avro within 1.5x of raw). Run it from outside the
checkout (Spark's Python workers put the working directory first on their path):

    cd /tmp && python /path/to/checkout/benchmarks/bench_avro_scan.py
    cd /tmp && python /path/to/checkout/benchmarks/bench_avro_scan.py --rounds 9 --ceiling
"""
import io
import json

import fastavro

# what the framed-value scans share: the log's writing, the session, the rounds, the figures
from framed_common import (FRAME, check_decoded, decoded_readings, print_scans, run_scans,
                           scan, scan_arguments, threads_unpinned, write_framed_log)

with threads_unpinned():
    from bench_avro_decode import ORDER, records


def build_log(logdir: str, count: int, partitions: int) -> None:
    """The framed Avro log and its `_schemas` topic under `logdir`."""
    parsed = fastavro.parse_schema(ORDER)

    def framed():
        for datum in records(count):
            buffer = io.BytesIO()
            buffer.write(FRAME)
            fastavro.schemaless_writer(buffer, parsed, datum)
            yield buffer.getvalue()

    write_framed_log(logdir, {"schema": json.dumps(ORDER)}, framed(), count, partitions)


def main() -> None:
    parser = scan_arguments(__doc__, records=1_000_000, ceiling=True)
    parser.add_argument("--without-value", action="store_true",
                        help="with --ceiling, also the prebuilt avro batches without `value`")
    args = parser.parse_args()

    def check(spark, logdirs):
        check_decoded(scan(spark, logdirs["logdir"], "avro"), args.records,
                      sum(datum["order_id"] for datum in records(args.records)))

    times, size, *loads = run_scans(args, "avro", {"logdir": build_log},
                                    decoded_readings(args, "avro", args.without_value), check)
    print_scans(args, times, size, loads, "a 10-field Avro record",
                f", fastavro {fastavro.__version__}", "avro", 1.5)


if __name__ == "__main__":
    main()
