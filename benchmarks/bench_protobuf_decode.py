"""Protobuf value decode rates on one core, side by side in one run:

  * runtime: a loop of the protobuf runtime's own ParseFromString over the payloads' binary
    (one message object, no conversion, no Arrow): what parsing alone costs in Python
    (the target's yardstick); and, for reference, FromString (a new message each);
  * pure: decode/protobuf.py's row-by-row path (the runtime's parse, then the conversion
    into the reader's values), then the Arrow column (pa.array, as FramedColumn builds it);
  * compiled: the compiled decoder (decode/protobuf_program.py), reading the payloads as
    spans of one buffer in runs of --run records (as a read hands it a batch), which gives
    the Arrow column itself; each run's column is dropped before the next, as a scan hands
    it on (bench_avro_decode.py and bench_json_decode.py do the same);
  * compiled, columns kept: the same, every run's column kept to the end (as this script
    measured before): its buffers are then fresh memory each run, whose page faults this
    VM charges to the decoder (--skip-kept leaves it out).

The message is a 10-field record: strings, ints, longs, doubles, a proto3 `optional`
string (null in two of three records), a bool and a repeated string; the .proto is
registered as Schema Registry holds it and loaded as a read loads it. Payloads are the
bytes after the 5-byte frame (message indexes, then the binary), serialized once by the
runtime. Each path runs --turns times, in turns, the runtime loop and the compiled path
next to each other; the figures are medians over the turns of records per second of
process CPU time (the machine may be shared; wall time is printed too), and the ratio is
the median of each turn's ratio (also the ratio of the medians).

    python benchmarks/bench_protobuf_decode.py                  # 300k records, 7 turns
    python benchmarks/bench_protobuf_decode.py --records 1000000 --turns 9

SEGMENTLOG_BENCH_ROOT=<another copy of the package> measures that copy's package instead
(framed_common.py).
"""
from framed_common import batches, in_turns, pin_one_thread

pin_one_thread()

import argparse  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

import pyarrow as pa  # noqa: E402

from segmentlog_datasource.decode.protobuf import PROTOBUF  # noqa: E402
from segmentlog_datasource.schemas.protobuf.descriptors import load_registered  # noqa: E402
from segmentlog_datasource.decode.registry import (RegisteredSchema,  # noqa: E402
                                                   SchemaRegistry)

ORDER_PROTO = """syntax = "proto3";
package bench;

message Order {
  int64 order_id = 1;
  string customer = 2;
  string sku = 3;
  int32 quantity = 4;
  int64 created_at = 5;
  double price = 6;
  double discount = 7;
  optional string note = 8;
  bool paid = 9;
  repeated string tags = 10;
}
"""
SUBJECT = "orders-value"
SCHEMA_ID = 1


def registered() -> RegisteredSchema:
    return RegisteredSchema(SCHEMA_ID, SUBJECT, 1, "PROTOBUF", ORDER_PROTO, ())


def message_class():
    """The runtime's class of bench.Order, from the registered text as a read loads it."""
    from google.protobuf import message_factory

    schema = registered()
    registry = SchemaRegistry("bench")
    registry.register(schema)
    return message_factory.GetMessageClass(load_registered(schema, registry).by_name("Order"))


def records(count: int):
    rng = random.Random(24)
    for index in range(count):
        record = {
            "order_id": 10_000_000 + index,
            "customer": f"customer-{rng.randrange(100_000)}",
            "sku": f"SKU{rng.randrange(10_000):05d}",
            "quantity": rng.randrange(1, 20),
            "created_at": 1_700_000_000_000 + index * 17,
            "price": rng.random() * 100,
            "discount": rng.random(),
            "paid": index % 2 == 0,
            "tags": [f"t{rng.randrange(50)}" for _ in range(rng.randrange(4))],
        }
        if not index % 3:
            record["note"] = f"gift wrap {index % 7}"
        yield record


def payloads(count: int):
    """The bytes after the frame of each record: message indexes [0], then the binary."""
    cls = message_class()
    return [b"\x00" + cls(**record).SerializeToString() for record in records(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--turns", type=int, default=7, help="runs per path, in turns")
    parser.add_argument("--run", type=int, default=10_000,
                        help="records per compiled run (a read's batch)")
    parser.add_argument("--skip-kept", action="store_true",
                        help="leave out the compiled path that keeps every run's column")
    args = parser.parse_args()

    data = payloads(args.records)
    binaries = [payload[1:] for payload in data]
    schema = registered()
    registry = SchemaRegistry("bench")
    registry.register(schema)
    reader = PROTOBUF.reader(schema, registry)
    cls = message_class()
    runs = batches(data, args.run)

    def runtime_loop():
        message = cls()
        for binary in binaries:
            message.ParseFromString(binary)

    def from_string_loop():
        parse = cls.FromString
        for binary in binaries:
            parse(binary)

    def pure():
        values, _ = reader.decode(schema, registry, data)
        return pa.array(values, reader.arrow_type)

    def compiled():
        for run in runs:
            reader.decode_columns(schema, registry, run, compiled=True)

    def compiled_kept():
        return [reader.decode_columns(schema, registry, run, compiled=True)[0] for run in runs]

    columns = compiled_kept()
    if not isinstance(columns[0], pa.Array):
        sys.exit("the compiled Protobuf decoder is not built: python setup.py build_ext --inplace")
    assert pa.concat_arrays(columns).equals(pure()), "the compiled and pure paths disagree"

    # The yardstick and the compiled path next to each other in every turn (in_turns
    # reverses the order every other turn): this VM's speed drifts by up to 2x over
    # seconds, and the pure path between them took seconds.
    paths = {"runtime ParseFromString loop": runtime_loop,
             "compiled decoder (Arrow)": compiled,
             "runtime FromString loop": from_string_loop,
             "pure path + pa.array": pure}
    if not args.skip_kept:
        paths["compiled, columns kept"] = compiled_kept
    cpu, wall = in_turns(paths, args.turns)
    load = os.getloadavg()

    import google.protobuf
    from google.protobuf.internal import api_implementation

    print(f"{args.records:,} records of a 10-field Protobuf message, "
          f"{sum(map(len, data)) / len(data):.0f} bytes each (after the frame); one core; "
          f"{args.turns} turns; compiled runs of {args.run:,}; load average {load[0]:.1f}")
    print(f"python {platform.python_version()}, protobuf {google.protobuf.__version__} "
          f"({api_implementation.Type()}), pyarrow {pa.__version__}, {platform.machine()}")
    rates = {}
    for name in paths:
        rates[name] = args.records / statistics.median(cpu[name])
        print(f"  {name:<30} {rates[name] / 1e6:7.3f} M records/CPU-s (median; best "
              f"{args.records / min(cpu[name]) / 1e6:.3f}, worst "
              f"{args.records / max(cpu[name]) / 1e6:.3f}); wall median "
              f"{args.records / statistics.median(wall[name]) / 1e6:.3f} M/s")
    fast = rates["compiled decoder (Arrow)"]
    loop = rates["runtime ParseFromString loop"]
    turns = sorted(a / b for a, b in zip(cpu["runtime ParseFromString loop"],
                                         cpu["compiled decoder (Arrow)"]))
    print(f"  compiled / runtime loop: {statistics.median(turns):.2f}x (median of the turns' "
          f"ratios, {turns[0]:.2f}x-{turns[-1]:.2f}x; target >= 5x); {fast / loop:.2f}x "
          f"(ratio of the medians); compiled / pure: "
          f"{fast / rates['pure path + pa.array']:.1f}x; compiled {fast / 1e6:.2f} M records/s "
          f"per core (target >= 1.5M)")
    if "compiled, columns kept" in rates:
        print(f"  compiled, columns kept / runtime loop: "
              f"{rates['compiled, columns kept'] / loop:.2f}x")


if __name__ == "__main__":
    main()
