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
import os

# what the framed-value scans share: the log's writing, the session, the rounds, the figures
from framed_common import (FRAME, check_decoded, decoded_readings, print_scans, run_scans,
                           scan, scan_arguments, threads_unpinned, write_framed_log)

with threads_unpinned():
    from bench_protobuf_decode import ORDER_PROTO, message_class, records


def build_log(logdir: str, count: int, partitions: int) -> None:
    """The framed log and its `_schemas` topic under `logdir`."""
    cls = message_class()
    frame = FRAME + b"\x00"  # message indexes [0]
    framed = (frame + cls(**record).SerializeToString() for record in records(count))
    write_framed_log(logdir, {"schema": ORDER_PROTO, "schemaType": "PROTOBUF"}, framed, count,
                     partitions)


def decoder() -> str:
    """Which decoder the package measured has."""
    try:
        from segmentlog_datasource.decode.protobuf_program import extension
    except ImportError:  # a copy from before the compiled decoder
        return "row by row (no compiled decoder in this copy)"
    return "compiled" if extension() is not None else "row by row (not built)"


def main() -> None:
    args = scan_arguments(__doc__, records=300_000, ceiling=True).parse_args()

    def check(spark, logdirs):
        check_decoded(scan(spark, logdirs["logdir"], "protobuf"), args.records,
                      sum(record["order_id"] for record in records(args.records)),
                      ("count(valueDecoded.note)", (args.records + 2) // 3))

    times, size, *loads = run_scans(args, "protobuf", {"logdir": build_log},
                                    decoded_readings(args, "protobuf"), check)
    import google.protobuf

    import segmentlog_datasource

    print_scans(args, times, size, loads, "a 10-field Protobuf message",
                f", protobuf {google.protobuf.__version__}, package from "
                f"{os.path.dirname(segmentlog_datasource.__file__)}; the decoder {decoder()}",
                "protobuf", 2)


if __name__ == "__main__":
    main()
