"""Avro value decode rates on one core (issue #24 part C), side by side in one run:

  * fastavro: a schemaless_reader loop over the payloads (Python dicts, no Arrow);
  * pure: decode/avro.py's decode_payloads on its fastavro path, then the Arrow column
    (pa.array of the values, as value_formats.FramedColumn builds it);
  * compiled: decode_payloads on the compiled decoder (decode/avro_program.py), which
    gives the Arrow column itself.

The record is the issue's: 10 fields of strings, ints, longs, doubles, a nullable field
and an array. Payloads are the bytes after the 5-byte frame, encoded once by fastavro.

    python benchmarks/bench_avro_decode.py                    # 500k records
    python benchmarks/bench_avro_decode.py --records 1000000 --repeat 3
"""
from framed_common import in_turns, pin_one_thread

pin_one_thread()

import argparse  # noqa: E402
import io  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402

import fastavro  # noqa: E402
import pyarrow as pa  # noqa: E402

from segmentlog_datasource.decode import avro  # noqa: E402
from segmentlog_datasource.decode.avro_program import program_for  # noqa: E402
from segmentlog_datasource.schemas.avro import without_logical_types  # noqa: E402

ORDER = {
    "type": "record", "name": "Order", "namespace": "bench",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "sku", "type": "string"},
        {"name": "quantity", "type": "int"},
        {"name": "store", "type": "int"},
        {"name": "created_at", "type": "long"},
        {"name": "price", "type": "double"},
        {"name": "discount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}


def records(count: int):
    rng = random.Random(24)
    for index in range(count):
        yield {
            "order_id": 10_000_000 + index,
            "customer": f"customer-{rng.randrange(100_000)}",
            "sku": f"SKU{rng.randrange(10_000):05d}",
            "quantity": rng.randrange(1, 20),
            "store": rng.randrange(500),
            "created_at": 1_700_000_000_000 + index * 17,
            "price": rng.random() * 100,
            "discount": rng.random(),
            "note": None if index % 3 else f"gift wrap {index % 7}",
            "tags": [f"t{rng.randrange(50)}" for _ in range(rng.randrange(4))],
        }


def payloads(count: int):
    parsed = fastavro.parse_schema(ORDER)
    out = []
    for datum in records(count):
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, datum)
        out.append(buffer.getvalue())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per path, in turns; the best counts")
    args = parser.parse_args()

    data = payloads(args.records)
    named = {}
    typed = fastavro.parse_schema(dict(ORDER), named_schemas=named)
    writer = fastavro.parse_schema(without_logical_types(dict(ORDER)))
    arrow_type = avro.spark_type(typed, named, "bench")
    convert = avro.converter(typed, named) or (lambda value: value)
    if program_for(writer, (typed, named)) is None:
        sys.exit("the compiled Avro decoder is not built: python setup.py build_ext --inplace")

    def fastavro_loop():
        reader = fastavro.schemaless_reader
        for payload in data:
            reader(io.BytesIO(payload), writer, None)

    def pure():
        values, _ = avro.decode_payloads(data, writer, None, convert, compiled=False)
        return pa.array(values, arrow_type)

    def compiled():
        values, _ = avro.decode_payloads(data, writer, None, convert,
                                         reader_typed=(typed, named), compiled=True)
        return values

    assert compiled().equals(pure()), "the compiled and pure paths disagree"
    _, wall = in_turns({"fastavro schemaless_reader loop": fastavro_loop,
                        "pure decode_payloads + pa.array": pure,
                        "compiled decode_payloads (Arrow)": compiled}, args.repeat)
    rates = {name: args.records / min(seconds) for name, seconds in wall.items()}
    print(f"{args.records:,} records of a 10-field Avro record, "
          f"{sum(map(len, data)) / len(data):.0f} bytes each; one core; best of {args.repeat}")
    print(f"python {platform.python_version()}, fastavro {fastavro.__version__}, "
          f"pyarrow {pa.__version__}, {platform.machine()}")
    for name, rate in rates.items():
        print(f"  {name:<36} {rate / 1e6:8.3f} M records/s")
    fast = rates["compiled decode_payloads (Arrow)"]
    print(f"  compiled / fastavro loop: "
          f"{fast / rates['fastavro schemaless_reader loop']:.1f}x; "
          f"compiled / pure: {fast / rates['pure decode_payloads + pa.array']:.1f}x")


if __name__ == "__main__":
    main()
