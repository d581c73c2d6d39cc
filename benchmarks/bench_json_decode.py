"""JSON Schema value decode rates on one core ("Framed values II"), side by side in one run:

  * orjson loop: `orjson.loads` over the payloads, no conversion at all (json.loads when
    orjson is not installed): the bar to beat;
  * json loop: `json.loads` over the payloads, no conversion;
  * row by row: decode/json_schema.py's path (json.loads, the converters), then the Arrow
    column (pa.array of the values, as value_formats.FramedColumn builds it);
  * columnar: the compiled decoder (decode/json_program.py, _jsoncolumns.c) over the
    payloads as spans of one buffer (value_formats.Payloads, as a scan gives them), which
    gives the Arrow column itself.

The record is bench_avro_decode.py's 10-field record (strings, ints, longs, doubles, a
nullable string, an array of strings), encoded as JSON text without spaces, as Schema
Registry's Jackson-based serializer and segmentlog's writer write it (`--spaces`: as
json.dumps writes it by default), under the JSON Schema a Connect-style writer gives it.
Times are CPU time of this process; each round runs every path, the bar and the columnar
path next to each other, the order reversed every other round; medians over the rounds,
and the ratio is the median of each round's ratio (also the ratio of the medians).

    python benchmarks/bench_json_decode.py                       # 300k records, 7 rounds
    python benchmarks/bench_json_decode.py --records 500000 --rounds 9 --spaces
"""
from framed_common import batches, in_turns, pin_one_thread

pin_one_thread()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

import pyarrow as pa  # noqa: E402

from bench_avro_decode import records  # noqa: E402
from segmentlog_datasource.decode.json_schema import (JsonSchemaColumn,  # noqa: E402
                                                      SchemaDocument)

try:
    import orjson
except ImportError:
    orjson = None

# The bench record's JSON Schema, as Connect's JSON Schema converter writes a struct:
# required non-null fields, narrower ints tagged, the nullable field a oneOf with null.
ORDER = {
    "type": "object", "title": "bench.Order", "additionalProperties": False,
    "required": ["order_id", "customer", "sku", "quantity", "store", "created_at", "price",
                 "discount", "tags"],
    "properties": {
        "order_id": {"type": "integer", "connect.index": 0},
        "customer": {"type": "string", "connect.index": 1},
        "sku": {"type": "string", "connect.index": 2},
        "quantity": {"type": "integer", "connect.type": "int32", "connect.index": 3},
        "store": {"type": "integer", "connect.type": "int32", "connect.index": 4},
        "created_at": {"type": "integer", "connect.index": 5},
        "price": {"type": "number", "connect.index": 6},
        "discount": {"type": "number", "connect.index": 7},
        "note": {"oneOf": [{"type": "null"}, {"type": "string"}], "connect.index": 8},
        "tags": {"type": "array", "items": {"type": "string"}, "connect.index": 9},
    },
}


def payloads(count: int, spaces: bool = False):
    """The JSON documents of `count` bench records (the bytes after the 5-byte frame)."""
    separators = None if spaces else (",", ":")
    return [json.dumps(datum, separators=separators).encode() for datum in records(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=10_000,
                        help="documents per decode call (a scan's batch)")
    parser.add_argument("--spaces", action="store_true",
                        help="documents as json.dumps writes them by default")
    parser.add_argument("--skip-pure", action="store_true", help="leave the row-by-row path out")
    args = parser.parse_args()

    documents = payloads(args.records, args.spaces)
    runs = batches(documents, args.batch)
    column = JsonSchemaColumn(SchemaDocument(json.dumps(ORDER), "orders-value", 1, 1))
    loads = orjson.loads if orjson is not None else json.loads

    def loop_orjson():
        for document in documents:
            loads(document)

    def loop_json():
        for document in documents:
            json.loads(document)

    def row_by_row():
        for batch in runs:
            values, _ = column.decode_bodies(batch, compiled=False)
            pa.array(values, column.type)

    def columnar():
        for batch in runs:
            column.decode_bodies(batch, compiled=True)

    # right answers first: the two paths agree, and the compiled one left no row to Python
    first = runs[0]
    compiled, errors = column.decode_bodies(first, compiled=True)
    if column._program is False:
        sys.exit("the compiled JSON decoder is not built: python setup.py build_ext --inplace")
    values, _ = column.decode_bodies(first, compiled=False)
    assert compiled.equals(pa.array(values, column.type)) and errors is None
    assert not column._program.run(first)[1], "the compiled decoder deferred rows"

    # The bar and the columnar path next to each other in every round (in_turns reverses
    # the order every other round): this VM's speed drifts by up to 2x over seconds.
    paths = {f"{'orjson' if orjson else 'json'}.loads loop (no conversion)": loop_orjson,
             "columnar (compiled, Arrow)": columnar,
             "json.loads loop (no conversion)": loop_json}
    if not args.skip_pure:
        paths["row by row + pa.array"] = row_by_row
    if orjson is None:
        del paths["json.loads loop (no conversion)"]
    times, _ = in_turns(paths, args.rounds)
    names = list(paths)

    size = sum(map(len, documents)) / len(documents)
    print(f"{args.records:,} records of a 10-field JSON object ({size:.0f} bytes each, "
          f"{'with' if args.spaces else 'without'} spaces), batches of {args.batch:,}; one "
          f"core (CPU time); {args.rounds} rounds, the order reversed every other; load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"python {platform.python_version()}, pyarrow {pa.__version__}, "
          f"orjson {orjson.__version__ if orjson else 'not installed'}, {platform.machine()}")
    rates = {}
    for name, values in times.items():
        rates[name] = args.records / statistics.median(values)
        print(f"  {name:<40} median {rates[name] / 1e6:7.3f} M records/s  "
              f"(best {args.records / min(values) / 1e6:.3f}, "
              f"worst {args.records / max(values) / 1e6:.3f})")
    fast = rates["columnar (compiled, Arrow)"]
    bar = rates[names[0]]
    ratios = sorted(a / b for a, b in zip(times[names[0]], times["columnar (compiled, Arrow)"]))
    print(f"  columnar / {names[0].split(' ')[0]} loop: {statistics.median(ratios):.2f}x "
          f"(median of the rounds' ratios, {ratios[0]:.2f}x-{ratios[-1]:.2f}x; target >= 5x); "
          f"{fast / bar:.2f}x (ratio of the medians); columnar: "
          f"{fast / 1e6:.2f} M records/s per core (target >= 1.5)")
    if "row by row + pa.array" in rates:
        print(f"  columnar / row by row: {fast / rates['row by row + pa.array']:.1f}x")


if __name__ == "__main__":
    main()
