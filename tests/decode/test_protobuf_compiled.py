"""The compiled Protobuf decoder (decode/protobuf_program.py, _protobufcolumns.c) against
its twin, the pure path (the protobuf runtime's parse, then protobuf.py's conversion):
random .proto schemas (seeded) of every type of the mapping, read as evolved versions of
themselves; random values set and serialized by the runtime; messages merged by
concatenation; unknown fields of every wire type (groups included), known fields of the
wrong wire type or of raw random content; edge values; truncated, garbled and random
payloads. Both twins must give the same Arrow array and the same error per row. Then
classes compiled by protoc (grpc_tools), the runtime's limits, and malformed programs."""
import math
import os
import random
import struct
import sys
import warnings

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf import message_factory

from segmentlog_datasource.decode import protobuf, protobuf_program
from segmentlog_datasource.decode.protobuf import PROTOBUF
from segmentlog_datasource.decode.protobuf_program import (ROW_CORRUPT, ROW_INDEXES,
                                                           ROW_MISFIT, ROW_REASONS, ROW_UTF8,
                                                           extension)
from segmentlog_datasource.decode.registry import RegisteredSchema, SchemaRegistry
from segmentlog_datasource.decode.value_formats import Payloads
from segmentlog_datasource.schemas.protobuf.descriptors import load_registered

# A pure-Python install (no C compiler) decodes through the runtime alone, so these tests
# skip without the build; CI sets SEGMENTLOG_REQUIRE_FAST=1, and then a missing build fails.
pytestmark = pytest.mark.skipif(
    extension() is None and not os.environ.get("SEGMENTLOG_REQUIRE_FAST"),
    reason="the compiled Protobuf decoder is not built here (a pure-Python install); build "
           "it with: python setup.py build_ext --inplace")

# A sweep by hand: PROTOBUF_COMPILED_EXAMPLES=2000 (schemas; 40 payloads each).
SWEEP = int(os.environ.get("PROTOBUF_COMPILED_EXAMPLES", "0"))
SCHEMAS = SWEEP or 80


def test_the_compiled_decoder_is_built_where_ci_requires_it():
    assert extension() is not None, "_protobufcolumns did not build"


# ------------------------------------------------------------------ random schemas

INTS = ["int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
        "sfixed32", "sfixed64"]
SCALARS = INTS + ["float", "double", "bool", "string", "bytes"]
KEYS = INTS + ["bool", "string"]
WRAPPERS = {"google.protobuf.DoubleValue": "double", "google.protobuf.FloatValue": "float",
            "google.protobuf.Int64Value": "int64", "google.protobuf.UInt64Value": "uint64",
            "google.protobuf.Int32Value": "int32", "google.protobuf.UInt32Value": "uint32",
            "google.protobuf.BoolValue": "bool", "google.protobuf.StringValue": "string",
            "google.protobuf.BytesValue": "bytes"}
TIMES = ["google.protobuf.Timestamp", "google.protobuf.Duration"]
WELL_KNOWN = list(WRAPPERS) + TIMES


class Field:
    def __init__(self, name, number, kind, label="", oneof=None, default=None, packed=None):
        self.name, self.number, self.kind, self.label = name, number, kind, label
        self.oneof, self.default, self.packed = oneof, default, packed

    def copy(self, **changes):
        made = Field(self.name, self.number, self.kind, self.label, self.oneof, self.default,
                     self.packed)
        made.__dict__.update(changes)
        return made


class Schema:
    """A file: syntax, messages (name -> fields; Root first) and enums (name -> values)."""

    def __init__(self, syntax):
        self.syntax = syntax
        self.messages = {}
        self.enums = {}

    def text(self) -> str:
        out = [f'syntax = "{self.syntax}";', "package fz;",
               'import "google/protobuf/timestamp.proto";',
               'import "google/protobuf/duration.proto";',
               'import "google/protobuf/wrappers.proto";']
        for name, fields in self.messages.items():
            out.append(f"message {name} {{")
            oneofs = {}
            for field in fields:
                if field.oneof:
                    oneofs.setdefault(field.oneof, []).append(field)
                    continue
                out.append("  " + self.field_text(field))
            for oneof, members in oneofs.items():
                out.append(f"  oneof {oneof} {{")
                out.extend("    " + self.field_text(field, in_oneof=True) for field in members)
                out.append("  }")
            out.append("}")
        for name, values in self.enums.items():
            out.append(f"enum {name} {{")
            out.extend(f"  {value} = {number};" for value, number in values)
            out.append("}")
        return "\n".join(out) + "\n"

    def field_text(self, field, in_oneof=False) -> str:
        label = "" if in_oneof or field.kind.startswith("map<") else field.label
        options = []
        if field.packed is not None:
            options.append(f"packed = {'true' if field.packed else 'false'}")
        if field.default is not None:
            options.append(f"default = {field.default}")
        suffix = f" [{', '.join(options)}]" if options else ""
        return f"{label + ' ' if label else ''}{field.kind} {field.name} = {field.number}{suffix};"


def is_scalar(kind):
    return kind in SCALARS


def random_schema(rng: random.Random) -> Schema:
    schema = Schema(rng.choice(["proto3", "proto3", "proto2"]))
    proto2 = schema.syntax == "proto2"
    for count in range(rng.randint(0, 2)):
        name = f"E{count}"
        numbers = sorted(rng.sample(range(-3, 12), rng.randint(1, 5)))
        if not proto2 and 0 not in numbers:
            numbers = [0] + numbers
        if not proto2:  # proto3: the first value is 0
            numbers = [0] + [n for n in numbers if n != 0]
        schema.enums[name] = [(f"{name}_V{n}".replace("-", "M"), n) for n in numbers]
    names = ["Root"] + [f"M{k}" for k in range(rng.randint(0, 2))]
    for index, name in enumerate(names):
        schema.messages[name] = random_fields(rng, schema, names[index + 1:], proto2)
    return schema


def random_kind(rng, schema, nested, allow_message=True):
    choices = ["scalar"] * 8 + ["wkt"] * 2
    if schema.enums:
        choices += ["enum"] * 2
    if nested and allow_message:
        choices += ["message"] * 3
    pick = rng.choice(choices)
    if pick == "scalar":
        return rng.choice(SCALARS)
    if pick == "wkt":
        return rng.choice(WELL_KNOWN)
    if pick == "enum":
        return rng.choice(list(schema.enums))
    return rng.choice(nested)


def random_fields(rng, schema, nested, proto2):
    fields, numbers = [], rng.sample(list(range(1, 40)) + [1000, 70000, 2 ** 29 - 1],
                                     rng.randint(1, 9))
    oneofs = 0
    for position, number in enumerate(numbers):
        name = f"f{number}"
        shape = rng.choice(["single"] * 5 + ["repeated"] * 2 + ["map", "oneof", "optional"])
        if shape == "map":
            key = rng.choice(KEYS)
            value = random_kind(rng, schema, nested)
            if proto2 and value in schema.enums:  # the runtime refuses a closed enum there
                value = "int32"
            fields.append(Field(name, number, f"map<{key}, {value}>"))
            continue
        kind = random_kind(rng, schema, nested)
        if shape == "oneof":
            oneof = f"o{rng.randint(0, oneofs)}"
            oneofs = max(oneofs, int(oneof[1:]) + 1)
            fields.append(Field(name, number, kind, oneof=oneof))
            continue
        if shape == "repeated":
            packed = rng.choice([None, None, True, False]) if is_scalar(kind) and kind not in (
                "string", "bytes") or kind in schema.enums else None
            fields.append(Field(name, number, kind, "repeated", packed=packed))
            continue
        label = ""
        default = None
        if proto2:
            label = rng.choice(["optional"] * 6 + ["required"])
            if rng.random() < 0.3:
                default = random_default(rng, schema, kind)
        elif shape == "optional" and (is_scalar(kind) or kind in schema.enums):
            label = "optional"
        fields.append(Field(name, number, kind, label, default=default))
    return fields


def random_default(rng, schema, kind):
    if kind in schema.enums:
        return rng.choice(schema.enums[kind])[0]
    if kind in ("int32", "sint32", "sfixed32"):
        return str(rng.choice([-2 ** 31, 7, -1]))
    if kind in ("int64", "sint64", "sfixed64"):
        return str(rng.choice([-2 ** 63, 2 ** 40, 2 ** 63 - 1]))
    if kind in ("uint32", "fixed32"):
        return str(rng.choice([2 ** 32 - 1, 3]))
    if kind in ("uint64", "fixed64"):
        return str(rng.choice([2 ** 64 - 1, 5]))
    if kind in ("float", "double"):
        return rng.choice(["1.5", "-inf", "inf", "nan", "-0.0"])
    if kind == "bool":
        return rng.choice(["true", "false"])
    if kind == "string":
        return rng.choice(['"dflt"', '""', '"\\303\\251"'])
    if kind == "bytes":
        return rng.choice(['"\\001\\377"', '"b"'])
    return None


# What a writer field may become in the reader schema (protobuf.py's resolution).
def evolve_kind(rng, kind, schema):
    if kind in INTS:
        return rng.choice(INTS + ["double", "float"] + list(schema.enums))
    if kind in ("float", "double"):
        return rng.choice(["float", "double"])
    if kind in ("string", "bytes"):
        return rng.choice(["string", "bytes"])
    if kind in WRAPPERS:
        return rng.choice([kind, WRAPPERS[kind]] + [w for w, s in WRAPPERS.items()
                                                   if s == WRAPPERS[kind]])
    return kind


def evolve(rng, writer: Schema) -> Schema:
    reader = Schema(writer.syntax)
    proto2 = writer.syntax == "proto2"
    for name, values in writer.enums.items():
        kept = [(value, number) for value, number in values if rng.random() < 0.8
                or (number == 0 and not proto2)]
        if not proto2 and (not kept or kept[0][1] != 0):
            kept = [values[0]] + [v for v in kept if v != values[0]]
        if not kept:
            kept = values[:1]
        used = {number for _, number in kept}
        extra = [n for n in range(-2, 15) if n not in used]
        kept += [(f"{name}_R{n}".replace("-", "M"), n)
                 for n in rng.sample(extra, rng.randint(0, 2))]
        reader.enums[name] = [(v.replace("_V", "_W") if rng.random() < 0.2 else v, n)
                              for v, n in kept]
    for name, fields in writer.messages.items():
        evolved, used = [], {f.number for f in fields}
        for field in fields:
            roll = rng.random()
            if roll < 0.1:
                continue  # dropped
            changed = field.copy()
            if roll < 0.2:
                changed.name = field.name + "_renamed"
            if roll > 0.75 and not field.kind.startswith("map<"):
                changed.kind = evolve_kind(rng, field.kind, writer)
                changed.default = None
                if changed.kind not in SCALARS or changed.kind in ("string", "bytes"):
                    changed.packed = None
                if changed.label == "optional" and not proto2 and changed.kind in WELL_KNOWN:
                    changed.label = ""
            elif roll > 0.7 and field.kind.startswith("map<") and rng.random() < 0.5:
                key, value = field.kind[4:-1].split(", ")
                value = evolve_kind(rng, value, writer)
                if proto2 and value in writer.enums:  # the runtime refuses a closed enum there
                    value = "int64"
                if key in INTS:
                    key = rng.choice(INTS)
                changed.kind = f"map<{key}, {value}>"
            if 0.65 < roll <= 0.7 and not field.kind.startswith("map<") and not field.oneof \
                    and field.label != "repeated":
                changed.label, changed.default = "repeated", None
            if changed.label == "required" and rng.random() < 0.5:
                changed.label = "optional"
            if changed.kind in reader.enums and changed.default not in (
                    value for value, _ in reader.enums[changed.kind]):
                changed.default = None  # a value the evolved enum dropped or renamed
            evolved.append(changed)
        for _ in range(rng.randint(0, 2)):
            number = rng.choice([n for n in range(1, 45) if n not in used])
            used.add(number)
            kind = random_kind(rng, writer, [m for m in writer.messages if m != name
                                             and m > name])
            evolved.append(Field(f"added{number}", number, kind,
                                 "optional" if proto2 else ""))
        if not evolved:
            evolved = [Field("only", 99, "int32", "optional" if proto2 else "")]
        reader.messages[name] = evolved
    return reader


# ------------------------------------------------------------------ random values

EDGES = {
    "int32": [-2 ** 31, 2 ** 31 - 1, -1, 0, 1], "sint32": [-2 ** 31, 2 ** 31 - 1, -1],
    "sfixed32": [-2 ** 31, 2 ** 31 - 1, -1], "int64": [-2 ** 63, 2 ** 63 - 1, -1, 2 ** 40],
    "sint64": [-2 ** 63, 2 ** 63 - 1, -1], "sfixed64": [-2 ** 63, 2 ** 63 - 1, -1],
    "uint32": [0, 2 ** 32 - 1, 2 ** 31], "fixed32": [0, 2 ** 32 - 1, 2 ** 31],
    "uint64": [0, 2 ** 64 - 1, 2 ** 63], "fixed64": [0, 2 ** 64 - 1, 2 ** 63],
}
RANGES = {"int32": (-2 ** 31, 2 ** 31 - 1), "sint32": (-2 ** 31, 2 ** 31 - 1),
          "sfixed32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1),
          "sint64": (-2 ** 63, 2 ** 63 - 1), "sfixed64": (-2 ** 63, 2 ** 63 - 1),
          "uint32": (0, 2 ** 32 - 1), "fixed32": (0, 2 ** 32 - 1),
          "uint64": (0, 2 ** 64 - 1), "fixed64": (0, 2 ** 64 - 1)}
FLOATS = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1.5, 3.4028234663852886e38, 1e-45]
DOUBLES = [math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324, 2.5]
TEXTS = ["", "a", "é", "𝄞 clef", "日本語", "x" * 300]
TYPE_NAMES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64",
              7: "fixed32", 8: "bool", 9: "string", 12: "bytes", 13: "uint32",
              15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64"}


def random_scalar(rng, field):
    kind = TYPE_NAMES.get(field.type)
    if field.type == 14:  # enum
        numbers = [v.number for v in field.enum_type.values]
        if not field.enum_type.is_closed and rng.random() < 0.2:
            return rng.choice([-2 ** 31, 2 ** 31 - 1, 77, -5])
        return rng.choice(numbers)
    if kind in EDGES:
        if rng.random() < 0.4:
            return rng.choice(EDGES[kind])
        low, high = RANGES[kind]
        return rng.choice([rng.randint(low, high), rng.randint(-300, 300) if low < 0 else
                           rng.randint(0, 600)])
    if kind == "float":
        return rng.choice(FLOATS) if rng.random() < 0.4 else struct.unpack(
            "<f", struct.pack("<f", rng.uniform(-1e6, 1e6)))[0]
    if kind == "double":
        return rng.choice(DOUBLES) if rng.random() < 0.4 else rng.uniform(-1e12, 1e12)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "string":
        if rng.random() < 0.5:
            return rng.choice(TEXTS)
        return "".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0xa0, 0xd7ff),
                                       rng.randint(0xe000, 0x10ffff)]))
                       for _ in range(rng.randint(0, 12)))
    if kind == "bytes":
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 10)))
    raise AssertionError(field.type)


def fill(message, rng, depth=0):
    descriptor = message.DESCRIPTOR
    for field in descriptor.fields:
        if rng.random() < 0.35:
            continue
        name = field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            entries = getattr(message, name)
            key_field, value_field = field.message_type.fields
            for _ in range(rng.choice([0, 1, 2, 3, 6])):
                key = random_scalar(rng, key_field)
                if value_field.message_type is not None:
                    fill(entries[key], rng, depth + 1)
                else:
                    entries[key] = random_scalar(rng, value_field)
            continue
        if field.is_repeated:
            items = getattr(message, name)
            count = rng.choice([0, 1, 2, 3, 5] + ([300] if depth == 0 else []))
            for _ in range(count):
                if field.message_type is not None:
                    fill(items.add(), rng, depth + 1)
                else:
                    items.append(random_scalar(rng, field))
            continue
        if field.message_type is not None:
            if depth > 3:
                continue
            sub = getattr(message, name)
            fill(sub, rng, depth + 1)
            sub.SetInParent()
            continue
        setattr(message, name, random_scalar(rng, field))


def varint(value):
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(number, wire):
    return varint(number << 3 | wire)


def random_wire_value(rng, wire, depth=0):
    if wire == 0:
        return rng.choice([varint(rng.getrandbits(64)), varint(rng.randint(0, 300)),
                           b"\xff" * 9 + b"\x01", b"\x80\x00"])
    if wire == 1:
        return rng.choice([struct.pack("<Q", rng.getrandbits(64)),
                           struct.pack("<d", math.nan), b"\x01\x00\x00\x00\x00\x00\xf0\x7f"])
    if wire == 5:
        return rng.choice([struct.pack("<I", rng.getrandbits(32)), b"\x01\x00\x80\x7f",
                           b"\x00\x00\xc0\xff"])
    if wire == 2:
        content = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 8)))
        if rng.random() < 0.3:
            content = rng.choice(TEXTS).encode()
        return varint(len(content)) + content
    raise AssertionError(wire)


def random_unknown(rng, numbers, depth=0):
    """An unknown field: a number the schema lacks (or has, with another wire type)."""
    number = rng.choice([rng.randint(1, 60), rng.randint(1, 2 ** 29 - 1)] + list(numbers))
    wire = rng.choice([0, 1, 2, 5, 3])
    if wire == 3 and depth < 3:
        inner = b"".join(random_unknown(rng, numbers, depth + 1)
                         for _ in range(rng.randint(0, 3)))
        return tag(number, 3) + inner + tag(number, 4)
    if wire == 3:
        wire = 0
    return tag(number, wire) + random_wire_value(rng, wire)


def known_raw(rng, descriptor):
    """A known field with its own wire type and random content (or another wire type)."""
    field = rng.choice(descriptor.fields)
    natural = {1: 1, 6: 1, 16: 1, 2: 5, 7: 5, 15: 5, 9: 2, 11: 2, 12: 2}.get(field.type, 0)
    wire = natural if rng.random() < 0.8 else rng.choice([0, 1, 2, 5])
    return tag(field.number, wire) + random_wire_value(rng, wire)


def damage(rng, body: bytes) -> bytes:
    body = bytearray(body)
    how = rng.choice(["truncate", "flip", "insert", "garbage"])
    if how == "truncate" and body:
        del body[rng.randint(0, len(body) - 1):]
    elif how == "flip" and body:
        body[rng.randint(0, len(body) - 1)] = rng.getrandbits(8)
    elif how == "insert":
        body.insert(rng.randint(0, len(body)), rng.getrandbits(8))
    else:
        body = bytearray(rng.getrandbits(8) for _ in range(rng.randint(0, 20)))
    return bytes(body)


def random_payloads(rng, cls, count):
    descriptor = cls.DESCRIPTOR
    numbers = [f.number for f in descriptor.fields]
    payloads = []
    for _ in range(count):
        message = cls()
        fill(message, rng)
        body = message.SerializePartialToString()
        roll = rng.random()
        if roll < 0.15:  # merged with another: last values win, messages merge
            other = cls()
            fill(other, rng)
            body += other.SerializePartialToString()
        elif roll < 0.35:
            for _ in range(rng.randint(1, 3)):
                at = rng.randint(0, len(body)) if rng.random() < 0.3 else len(body)
                extra = random_unknown(rng, numbers) if rng.random() < 0.6 \
                    else known_raw(rng, descriptor)
                body = body[:at] + extra + body[at:] if at == len(body) else body + extra
        elif roll < 0.45:
            body = damage(rng, body)
        indexes = rng.choice([b"\x00"] * 12 + [b"\x02\x00", b"\x02\x02", b"", b"\x01",
                                               b"\x04\x00\x00"])
        payloads.append(indexes + body)
    return payloads


# ------------------------------------------------------------------ the twins

def registered(schema_id, version, text):
    return RegisteredSchema(schema_id, "fz-value", version, "PROTOBUF", text, ())


def as_spans(payloads) -> Payloads:
    data = b"\xee" * 3 + b"".join(payloads)
    lengths = np.array([len(p) for p in payloads], np.int64)
    ends = 3 + np.cumsum(lengths, dtype=np.int64)
    return Payloads(data, ends - lengths, ends)


def canonical(value):
    """A value with NaNs made comparable (by their bits), recursively."""
    if isinstance(value, float):
        return ("float", struct.pack("<d", value).hex()) if math.isnan(value) else value
    if isinstance(value, dict):
        return {key: canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(canonical(item) for item in value)
    return value


def storage(arrow_type):
    """`arrow_type` with timestamps and durations as the int64 they hold (any value reads
    back: Python's datetimes stop at year 9999)."""
    if pa.types.is_timestamp(arrow_type) or pa.types.is_duration(arrow_type):
        return pa.int64()
    if pa.types.is_map(arrow_type):
        return pa.map_(storage(arrow_type.key_type), pa.field(
            "value", storage(arrow_type.item_type)))
    if pa.types.is_list(arrow_type):
        return pa.list_(pa.field("element", storage(arrow_type.value_type)))
    if pa.types.is_struct(arrow_type):
        return pa.struct([pa.field(f.name, storage(f.type)) for f in arrow_type])
    return arrow_type


def assert_same_arrays(compiled: pa.Array, expected: pa.Array):
    assert compiled.type == expected.type
    compiled.validate(full=True)
    plain = storage(expected.type)
    rows = expected.cast(plain).to_pylist()
    assert canonical(compiled.cast(plain).to_pylist()) == canonical(rows)
    if not compiled.equals(expected):  # only NaNs (which Arrow's equality refuses) differ
        assert "nan" in repr(rows)


def pure_reason_fits(code, reason, reader_name):
    if code == ROW_INDEXES:
        return reason.startswith(("truncated message indexes", "bad message indexes",
                                  "the value is message"))
    if code == ROW_MISFIT:
        return reason.startswith("field ")
    # A parse error: the runtime's words for which fault it meets first may differ (it
    # checks a string's UTF-8 before the end of the entry that holds it, say); the reason
    # given is the pure path's anyway. The cases below hold the exact words.
    return reason.startswith(f"invalid Protobuf binary for message {reader_name}: Error "
                             f"parsing message with type '{reader_name}': ")


def twins(writer_text, reader_text, payloads, message=None):
    """Decodes `payloads` (written with writer_text's Root) as reader_text's both ways and
    checks they agree; returns (the compiled values, errors, the program or None)."""
    held = SchemaRegistry("twins")
    writer, reader_schema = registered(1, 1, writer_text), registered(2, 2, reader_text)
    held.register(writer)
    held.register(reader_schema)
    reader = PROTOBUF.reader(reader_schema, held, **({"message": message} if message else {}))
    pure_values, pure_errors = reader.decode(writer, held, payloads)
    with warnings.catch_warnings():
        warnings.simplefilter("error", protobuf_program.ProtobufTwinsDisagreeWarning)
        values, errors = reader.decode_columns(writer, held, payloads, compiled=True)
        in_place = reader.decode_columns(writer, held, as_spans(payloads), compiled=True)
    program = reader._programs.get(1)
    every = [None] * len(payloads)  # None for the errors: every payload decoded
    errors = every if errors is None else errors
    assert errors == pure_errors
    assert (every if in_place[1] is None else in_place[1]) == errors
    expected = pa.array(pure_values, reader.arrow_type)
    if program is None:
        assert values == pure_values
        return values, errors, None
    assert isinstance(values, pa.Array)
    assert_same_arrays(values, expected)
    assert_same_arrays(in_place[0], expected)
    _, codes = program.run(payloads)
    name = reader.descriptor.full_name
    for row, code in enumerate(codes):
        assert (code == 0) == (errors[row] is None), (row, code, errors[row])
        if code:
            assert pure_reason_fits(code, errors[row], name), (code, errors[row])
    return values, errors, program


def writer_class(text):
    held = SchemaRegistry("classes")
    schema = registered(1, 1, text)
    held.register(schema)
    loaded = load_registered(schema, held)
    return message_factory.GetMessageClass(loaded.by_name("Root"))


def test_random_schemas_evolved_and_random_values_read_as_the_pure_path():
    compiled = 0
    for seed in range(SCHEMAS):
        rng = random.Random(seed)
        writer = random_schema(rng)
        reader = evolve(rng, writer) if rng.random() < 0.7 else writer
        payloads = random_payloads(rng, writer_class(writer.text()), 40)
        try:
            _, _, program = twins(writer.text(), reader.text(), payloads)
        except AssertionError as failure:
            raise AssertionError(f"seed {seed}:\n{writer.text()}\n--- reader:\n"
                                 f"{reader.text()}") from failure
        except protobuf.ProtobufSchemaError as failure:  # e.g. an evolved message left empty
            assert "has no field" in str(failure) or "recursive" in str(failure), failure
            continue
        compiled += program is not None
    assert compiled >= SCHEMAS * 0.6  # most pairs are in the compiled scope


def test_random_bytes_fail_or_read_alike():
    """Payloads of random bytes (the decoder's fuzz): no crash, and the twins agree."""
    rng = random.Random(7)
    schema = random_schema(random.Random(3))
    text = ORDERS
    for round_number in range(30):
        payloads = [b"\x00" + bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 60)))
                    for _ in range(50)]
        payloads += [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 12)))
                     for _ in range(10)]
        twins(text, text, payloads)
    twins(schema.text(), schema.text(), payloads)


# ------------------------------------------------------------------ chosen cases

ORDERS = """syntax = "proto3";
package fz;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";

message Root {
  int64 order_id = 1;
  string customer = 2;
  string sku = 3;
  int32 quantity = 4;
  uint32 store = 5;
  sint64 created = 6;
  double price = 7;
  float discount = 8;
  optional string note = 9;
  bool paid = 10;
  repeated string tags = 11;
  repeated int32 counts = 12;
  map<string, Line> lines = 13;
  oneof payment {
    string card = 14;
    Line voucher = 15;
  }
  google.protobuf.Timestamp at = 16;
  google.protobuf.Duration took = 17;
  google.protobuf.Int64Value maybe = 18;
  Status status = 19;
  bytes blob = 20;
  fixed64 checksum = 21;
  sfixed32 delta = 22;
  repeated Line history = 23;
  map<int32, Status> states = 24;
  enum Status { UNKNOWN = 0; PLACED = 1; SHIPPED = 2; }
}

message Line {
  string sku = 1;
  repeated int64 amounts = 2;
  Line2 deeper = 3;
}

message Line2 {
  int32 n = 1;
}
"""


def orders_class():
    return writer_class(ORDERS)


def test_edge_values_read_alike():
    Root = orders_class()
    values = [
        Root(order_id=-2 ** 63, quantity=-2 ** 31, store=2 ** 32 - 1, created=2 ** 63 - 1,
             price=math.nan, discount=math.inf, checksum=2 ** 64 - 1, delta=-2 ** 31),
        Root(order_id=2 ** 63 - 1, quantity=2 ** 31 - 1, price=-0.0, discount=-math.inf,
             customer="", sku="𝄞" * 1000, note="", tags=[""] * 3),
        Root(counts=list(range(-50_000, 50_000)), tags=["t"] * 20_000),
        Root(price=5e-324, discount=1e-45, blob=b"\x00" * 70_000),
    ]
    payloads = [b"\x00" + value.SerializeToString() for value in values]
    # NaN with a payload and a signaling NaN (float): raw fixed values
    payloads.append(b"\x00" + tag(7, 1) + b"\x01\x00\x00\x00\x00\x00\xf0\x7f"
                    + tag(8, 5) + b"\x01\x00\x80\x7f")
    out, errors, program = twins(ORDERS, ORDERS, payloads)
    assert program is not None and errors == [None] * 5
    rows = out.to_pylist()
    assert rows[0]["order_id"] == -2 ** 63 and rows[0]["checksum"] == 2 ** 64 - 1
    assert math.isnan(rows[0]["price"]) and rows[0]["note"] is None
    assert rows[1]["note"] == "" and len(rows[2]["counts"]) == 100_000
    discount = out.field("discount").to_numpy(zero_copy_only=False)[4]
    assert struct.pack("<f", discount) == b"\x01\x00\xc0\x7f"  # quieted, as the runtime's


def test_last_value_wins_messages_merge_and_oneofs_keep_their_last_member():
    Root = orders_class()
    first = Root(order_id=1, customer="a", tags=["x"], card="4111")
    first.at.seconds = 5
    first.lines["k"].sku = "first"
    first.lines["k"].amounts.extend([1, 2])
    second = Root(order_id=2, tags=["y"])
    second.at.nanos = 7000
    second.voucher.sku = "v"
    second.voucher.amounts.extend([9])
    second.lines["k"].sku = "second"
    second.lines["j"].sku = "j"
    third = Root(card="5500")  # the oneof's last member: card again, the voucher unset
    third.history.add(sku="h")
    payload = b"\x00" + first.SerializeToString() + second.SerializeToString()
    switched = payload + third.SerializeToString()
    # a voucher merged over two occurrences, its lists concatenated
    merged = b"\x00" + second.SerializeToString() + second.SerializeToString()
    out, errors, _ = twins(ORDERS, ORDERS, [payload, switched, merged])
    rows = out.to_pylist()
    assert errors == [None] * 3
    assert rows[0]["order_id"] == 2 and rows[0]["customer"] == "a"
    assert rows[0]["tags"] == ["x", "y"] and rows[0]["card"] is None
    assert rows[0]["voucher"]["sku"] == "v"
    assert rows[0]["at"].timestamp() == 5.000007  # seconds from one, nanos from the other
    assert dict(rows[0]["lines"])["k"] == {"sku": "second", "amounts": [], "deeper": None}
    assert [key for key, _ in rows[0]["lines"]] == ["j", "k"]
    assert rows[1]["card"] == "5500" and rows[1]["voucher"] is None
    assert rows[1]["history"] == [{"sku": "h", "amounts": [], "deeper": None}]
    assert rows[2]["voucher"]["amounts"] == [9, 9]


def test_unknown_fields_of_every_wire_type_are_skipped_and_map_entries_with_one_dropped():
    Root = orders_class()
    body = Root(order_id=3).SerializeToString()
    unknown = (tag(99, 0) + varint(2 ** 64 - 1) + tag(98, 1) + bytes(8) + tag(97, 5)
               + bytes(4) + tag(96, 2) + b"\x03abc" + tag(95, 3) + tag(1, 0) + b"\x05"
               + tag(94, 3) + tag(2, 2) + b"\x00" + tag(94, 4) + tag(95, 4)
               + tag(1, 2) + b"\x01z"  # order_id with the wrong wire type: unknown too
               + tag(2 ** 29 - 1, 0) + b"\x01")
    entry = tag(1, 2) + b"\x01e" + tag(2, 2) + b"\x00"
    with_unknown = entry + tag(7, 0) + b"\x01"  # an entry holding an unknown field
    maps = (tag(13, 2) + varint(len(entry)) + entry + tag(13, 2) + varint(len(with_unknown))
            + with_unknown + tag(24, 2) + b"\x04\x08\x05\x10\x07")
    out, errors, _ = twins(ORDERS, ORDERS, [b"\x00" + body + unknown, b"\x00" + unknown + body,
                                            b"\x00" + maps])
    assert errors == [None] * 3
    rows = out.to_pylist()
    assert rows[0]["order_id"] == 3 and rows[1]["order_id"] == 3
    assert rows[2]["lines"] == [("e", {"sku": "", "amounts": [], "deeper": None})]
    assert rows[2]["states"] == [(5, "UNKNOWN_ENUM_VALUE_Status_7")]


def test_the_roots_scalars_read_straight_into_their_columns_keep_the_runtimes_rules():
    """The root's singular scalars go to their columns as they are read (the compiled
    decoder's direct fields): a field given again replaces its value, one of another wire
    type is unknown, varints of every length up to 10 bytes (overlong ones too), tags of
    two bytes, values that end where the payload ends, absent fields, and rows that fail
    after some of their values went in."""
    Root = orders_class()
    full = Root(order_id=1, customer="first", sku="s1", quantity=2, store=3, created=-4,
                price=1.5, discount=2.5, note="n1", paid=True, checksum=9, delta=-9,
                blob=b"b1", tags=["a"]).SerializeToString()
    again = (Root(order_id=-1, customer="second, and longer than sixteen bytes",
                  quantity=-2, price=-1.5, delta=7, blob=b"").SerializeToString()
             + tag(10, 0) + b"\x00"  # paid: false, given
             + tag(9, 2) + b"\x00")  # note: "", given
    payloads = [b"\x00" + full + again, b"\x00" + again + full, b"\x00"]
    for bits in range(0, 64, 7):  # every varint length, and the values around it
        for value in (2 ** bits - 1, 2 ** bits, -(2 ** bits)):
            payloads.append(b"\x00" + tag(1, 0) + varint(value) + tag(4, 0) + varint(value)
                            + tag(6, 0) + varint(value) + tag(5, 0) + varint(value))
    payloads += [
        b"\x00" + tag(1, 0) + b"\x81\x80\x80\x80\x80\x80\x80\x80\x80\x00",  # overlong 1
        b"\x00" + tag(1, 0) + b"\xff" * 9 + b"\x01" + tag(2, 2) + b"\x01x",  # 10 bytes: -1
        b"\x00" + tag(2, 2) + b"\x03abc" + tag(1, 0) + b"\x80\x80\x01",  # ends the payload
        b"\x00" + tag(7, 0) + b"\x05" + tag(2, 0) + b"\x01" + tag(20, 0) + b"\x01"  # wire types
        + tag(22, 2) + b"\x00" + tag(1, 0) + b"\x02",
        b"\x00" + tag(20, 2) + b"\x02\xff\x00" + tag(22, 5) + b"\xff\xff\xff\xff",  # 2-byte tags
        b"\x00" + Root(customer="ok").SerializeToString() + tag(2, 2) + b"\x01\xff",  # bad again
        b"\x00" + tag(2, 2) + b"\x01\xff" + Root(customer="ok").SerializeToString(),
        b"\x00" + Root(order_id=7, customer="abc", price=1.0).SerializeToString()
        + tag(3, 2) + b"\x05ab",  # fails after three values went in
        b"\x00" + full,
        b"\x00" + Root(order_id=1).SerializeToString() + tag(1, 0) + b"\x80\x80",  # cut short
    ]
    out, errors, program = twins(ORDERS, ORDERS, payloads)
    assert program is not None
    rows = out.to_pylist()
    assert rows[0]["order_id"] == -1 and rows[0]["customer"].startswith("second")
    assert rows[0]["sku"] == "s1" and rows[0]["paid"] is False and rows[0]["note"] == ""
    assert rows[0]["delta"] == 7 and rows[0]["blob"] == b"b1" and rows[0]["price"] == -1.5
    assert rows[1]["order_id"] == 1 and rows[1]["customer"] == "first" and rows[1]["note"] == "n1"
    assert rows[2]["order_id"] == 0 and rows[2]["note"] is None and rows[2]["tags"] == []
    assert [row["order_id"] for row in rows[3:6]] == [0, 1, -1]
    tail = len(rows) - 10
    assert rows[tail]["order_id"] == 1 and rows[tail + 1]["order_id"] == -1
    assert rows[tail + 2]["order_id"] == 1 << 14 and rows[tail + 2]["customer"] == "abc"
    assert rows[tail + 3]["order_id"] == 2 and rows[tail + 3]["price"] == 0.0
    assert rows[tail + 4]["blob"] == b"\xff\x00" and rows[tail + 4]["delta"] == -1
    assert errors[tail + 5] is not None and errors[tail + 6] is not None
    assert errors[tail + 7] is not None and rows[tail + 7] is None
    assert rows[tail + 8]["tags"] == ["a"] and rows[tail + 8]["customer"] == "first"
    assert errors[tail + 9] is not None
    assert [error is None for error in errors].count(False) == 4


# The benchmark's message (every field a step of the root's expected order), with a field
# of a two-byte tag after them.
IN_ORDER = """syntax = "proto3";
package fz;

message Root {
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
  sint32 far = 20;
}
"""


def runtime_row(cls, body):
    """The runtime's own reading of `body` (an independent twin of both paths): the row
    as the reader's column holds it, or None when the runtime refuses the bytes."""
    try:
        message = cls.FromString(body)
    except Exception:  # the runtime's DecodeError
        return None
    row = {field.name: getattr(message, field.name) for field in message.DESCRIPTOR.fields}
    row["note"] = message.note if message.HasField("note") else None
    row["tags"] = list(message.tags)
    return row


def test_the_roots_expected_order_and_every_way_out_of_it_read_as_the_runtime_does():
    """The root's fields read in the order serializers write them (fields by number, no
    lookup per tag), and every way out of that order: a field absent, given out of the
    order or twice (the last wins), unknown fields and fields of another wire type between
    known ones, a repeated field interleaved with others, a tag of two bytes, and each
    payload cut short at every byte. The compiled rows equal the pure path's and the
    runtime's own."""
    Root = writer_class(IN_ORDER)
    first = Root(order_id=10_000_001, customer="customer-1", sku="SKU00001", quantity=3,
                 created_at=1_700_000_000_017, price=12.5, discount=0.25, note="gift wrap",
                 paid=True, tags=["t1", "t22"])
    second = Root(order_id=-7, customer="another customer, past sixteen bytes", sku="",
                  quantity=-2 ** 31, created_at=2 ** 62, price=-0.0, discount=1e300,
                  note="", paid=True, tags=["x"], far=-5)
    pieces = [Root(**{name: value}).SerializeToString() if name != "tags" else
              b"".join(tag(10, 2) + varint(len(item)) + item.encode() for item in value)
              for name, value in [("order_id", first.order_id), ("customer", first.customer),
                                  ("sku", first.sku), ("quantity", first.quantity),
                                  ("created_at", first.created_at), ("price", first.price),
                                  ("discount", first.discount), ("note", first.note),
                                  ("paid", first.paid), ("tags", list(first.tags))]]
    assert b"".join(pieces) == first.SerializeToString()  # the runtime writes by number
    bodies = [first.SerializeToString(), second.SerializeToString(), b""]
    bodies += [b"".join(pieces[:k] + pieces[k + 1:]) for k in range(len(pieces))]  # absent
    bodies += [b"".join(pieces[k:] + pieces[:k]) for k in range(1, len(pieces))]  # rotated
    bodies.append(b"".join(reversed(pieces)))
    bodies += [b"".join(pieces[:k] + [pieces[k + 1], pieces[k]] + pieces[k + 2:])
               for k in range(len(pieces) - 1)]  # two neighbours swapped
    again = [Root(**{name: getattr(second, name)}).SerializeToString()
             for name in ("order_id", "customer", "sku", "quantity", "created_at", "price",
                          "discount", "note", "paid")]
    bodies += [b"".join(pieces[:k + 1] + [again[k]] + pieces[k + 1:])  # twice: last wins
               for k in range(len(again))]
    bodies += [first.SerializeToString() + piece for piece in again]  # again, after all
    unknowns = [tag(30, 0) + varint(2 ** 40), tag(31, 1) + bytes(8), tag(32, 2) + b"\x02ab",
                tag(33, 5) + bytes(4), tag(34, 3) + tag(1, 0) + b"\x01" + tag(34, 4),
                tag(1, 2) + b"\x01z", tag(2, 0) + b"\x05", tag(6, 5) + bytes(4),
                tag(9, 1) + bytes(8), tag(20, 0) + varint(9)]
    for k in range(len(pieces) + 1):  # between known ones, of every wire type
        bodies.append(b"".join(pieces[:k]) + unknowns[k % len(unknowns)] + b"".join(pieces[k:]))
    bodies += [pieces[9] + b"".join(pieces[:9]),  # the repeated field first
               b"".join(pieces[:8]) + tag(10, 2) + b"\x01a" + pieces[8] + pieces[9],
               b"".join(pieces) + tag(20, 0) + varint(7) + tag(10, 2) + b"\x01z",
               tag(20, 0) + varint(3) + b"".join(pieces),
               b"".join(pieces[:5]) + tag(20, 0) + varint(3) + b"".join(pieces[5:])]
    whole = second.SerializeToString()
    cuts = [body[:k] for body in (first.SerializeToString(), whole) for k in range(len(body))]
    bad = [pieces[0] + tag(2, 2) + b"\x02\xc3\x28" + b"".join(pieces[2:]),  # not UTF-8
           b"".join(pieces[:3]) + tag(10, 2) + b"\x01\xff"]
    bodies += cuts + bad
    payloads = [b"\x00" + body for body in bodies]
    out, errors, program = twins(IN_ORDER, IN_ORDER, payloads)
    assert program is not None
    rows = out.to_pylist()
    for body, row, error in zip(bodies, rows, errors):
        expected = runtime_row(Root, body)
        assert (error is None) == (expected is not None), (body, error)
        if expected is not None:
            assert row == expected, body
    assert rows[0]["note"] == "gift wrap" and rows[1]["note"] == "" and rows[2]["note"] is None
    assert errors[-2] is not None and errors[-1] is not None
    assert sum(error is not None for error in errors[-len(cuts) - 2:-2]) > len(cuts) // 3


@pytest.mark.parametrize("body, code", [
    (tag(1, 0) + b"\x80", ROW_CORRUPT),  # a varint cut short
    (tag(1, 0) + b"\xff" * 10 + b"\x01", ROW_CORRUPT),  # 11 bytes
    (tag(2, 2) + b"\x05ab", ROW_CORRUPT),  # a length past the end
    (tag(2, 2) + b"\x01\xff", ROW_UTF8),  # proto3 strings are checked
    (tag(13, 2) + b"\x03\x0a\x01\xff", ROW_UTF8),  # map keys too
    (b"\x00\x01", ROW_CORRUPT),  # field number 0
    (b"\x0e", ROW_CORRUPT),  # wire type 6
    (b"\x0c", ROW_CORRUPT),  # an END_GROUP with no group
    (tag(50, 3) + tag(1, 0), ROW_CORRUPT),  # a group never closed
    (tag(50, 3) + tag(51, 4), ROW_CORRUPT),  # closed by another number
    (tag(12, 2) + b"\x02\x80\x80", ROW_CORRUPT),  # packed varints cut short
    (b"\x80\x80\x80\x80\x80\x01", ROW_CORRUPT),  # a tag of 6 bytes
    (b"\xf8\xff\xff\xff\x1f\x00", ROW_CORRUPT),  # a tag past 32 bits
    (tag(21, 1) + b"\x01", ROW_CORRUPT),  # a fixed64 cut short
    (tag(15, 2) + b"\x02" + tag(2, 0), ROW_CORRUPT),  # a nested message cut short
    (tag(23, 2) + b"\x01\x0c", ROW_CORRUPT),  # an END_GROUP in a nested message
])
def test_corrupt_payloads_fail_with_the_runtimes_reason(body, code):
    Root = orders_class()
    good = b"\x00" + Root(order_id=1, tags=["t"]).SerializeToString()
    out, errors, program = twins(ORDERS, ORDERS, [good, b"\x00" + body, good])
    assert errors[0] is None and errors[2] is None
    assert errors[1] == ("invalid Protobuf binary for message fz.Root: Error parsing message "
                         f"with type 'fz.Root': {ROW_REASONS[code]}")
    assert program.run([b"\x00" + body])[1] == bytes([code])
    assert out.to_pylist()[1] is None and out.to_pylist()[0] == out.to_pylist()[2]


def test_the_runtimes_depth_limit_holds_for_messages_groups_and_map_entries():
    text = """syntax = "proto3"; package fz;
message Root { int32 x = 1; Node node = 2; map<int32, Node> nodes = 3; }
message Node { Node next = 1; map<int32, Node> more = 2; int32 v = 3; }"""
    reader_text = 'syntax = "proto3"; package fz; message Root { int32 x = 1; }'

    def nested(depth):  # Root.node.next.next...: `depth` messages below the root
        body = tag(3, 0) + b"\x01"
        for level in range(depth - 1):
            body = tag(1, 2) + varint(len(body)) + body
        return tag(2, 2) + varint(len(body)) + body

    def via_maps(depth):  # Root.nodes, then Node.more: an entry and its value each level
        node = tag(3, 0) + b"\x01"
        for level in range(depth - 1):
            entry = tag(2, 2) + varint(len(node)) + node
            node = tag(2, 2) + varint(len(entry)) + entry
        entry = tag(2, 2) + varint(len(node)) + node
        return tag(3, 2) + varint(len(entry)) + entry

    def groups(depth):
        return tag(9, 3) * depth + tag(9, 4) * depth

    payloads = [b"\x00" + nested(d) for d in (99, 100, 101)]
    payloads += [b"\x00" + via_maps(d) for d in (49, 50, 51)]
    payloads += [b"\x00" + groups(d) for d in (99, 100, 101)]
    _, errors, program = twins(text, reader_text, payloads)
    assert program is not None
    assert [e is None for e in errors] == [True, True, False] * 3, errors
    assert "Exceeded upb_DecodeOptions_MaxDepth" in errors[2]
    assert "Exceeded upb_DecodeOptions_MaxDepth" in errors[5]
    assert "Wire format was corrupt" in errors[8]
    assert extension().MAX_DEPTH == 100


PROTO2 = """syntax = "proto2";
package fz;
message Root {
  optional string name = 1;
  required int32 id = 2 [default = 7];
  optional Kind kind = 3 [default = B];
  repeated Kind kinds = 4;
  repeated Kind packed_kinds = 5 [packed = true];
  map<int32, int32> by_id = 6;
  oneof choice { Kind ok = 7; int32 other = 8; }
  optional bytes raw = 9;
  optional int64 big = 10 [default = -7];
  optional float ratio = 11 [default = -inf];
  enum Kind { A = 1; B = 2; C = 5; }
}
"""


def test_proto2_closed_enums_defaults_and_strings_that_are_not_utf8():
    reader_text = PROTO2.replace("optional bytes raw = 9;", "optional string raw = 9;") \
        .replace("optional string name = 1;", "optional bytes name = 1;") \
        .replace("optional int64 big = 10 [default = -7]", "optional int32 big = 10")
    payloads = [
        b"\x00",  # defaults: explicit ones read, others null
        b"\x00" + tag(3, 0) + b"\x09" + tag(4, 0) + b"\x01" + tag(4, 0) + b"\x09"
        + tag(5, 2) + b"\x03\x02\x09\x05" + tag(6, 2) + b"\x04\x08\x01\x18\x09"
        + tag(6, 2) + b"\x04\x08\x02\x10\x05" + tag(8, 0) + b"\x03" + tag(7, 0) + b"\x09",
        b"\x00" + tag(1, 2) + b"\x02\xff\xfe" + tag(9, 2) + b"\x01a",  # name as bytes
        b"\x00" + tag(9, 2) + b"\x01\xff",  # raw read as a string: not UTF-8
        b"\x00" + tag(10, 0) + varint(2 ** 40),  # past the int32 column
    ]
    out, errors, program = twins(PROTO2, reader_text, payloads)
    assert program is not None
    rows = out.to_pylist()
    assert rows[0]["id"] == 7 and rows[0]["kind"] == "B" and rows[0]["big"] == -7
    assert rows[0]["ratio"] == -math.inf and rows[0]["name"] is None
    assert rows[1]["kind"] == "B" and rows[1]["kinds"] == ["A"]
    assert rows[1]["packed_kinds"] == ["B", "C"] and rows[1]["by_id"] == [(2, 5)]
    assert rows[1]["ok"] is None and rows[1]["other"] == 3
    assert rows[2]["name"] == b"\xff\xfe" and rows[2]["raw"] == "a"
    assert errors[3] == "field raw: bytes that are not UTF-8, and the column's field is a string"
    assert errors[4] == "field big: 1099511627776 is out of the range of the column's int32"
    # the same strings into a string column, by the writer's own schema
    _, errors, _ = twins(PROTO2, PROTO2, [b"\x00" + tag(1, 2) + b"\x01\xff"])
    assert errors == ["field name: bytes that are not UTF-8, and the column's field is a "
                      "string"]


def test_timestamps_past_the_columns_range_are_row_errors():
    Root = orders_class()
    far = Root()
    far.at.seconds = 2 ** 62
    far.took.seconds = -2 ** 62
    floor = Root()
    floor.at.seconds, floor.at.nanos = -1, -1  # Python's floor division: -1000001 us
    out, errors, _ = twins(ORDERS, ORDERS, [b"\x00" + far.SerializeToString(),
                                            b"\x00" + floor.SerializeToString()])
    assert errors[0] == ("field at: 4611686018427387904 seconds and 0 nanoseconds are out of "
                         "the range of the column's timestamp[us, tz=UTC]")
    assert out.field("at").cast(pa.int64()).to_pylist()[1] == -1_000_001


def test_message_indexes_name_nested_messages_and_others_fail():
    text = """syntax = "proto3"; package fz;
message Outer { int32 a = 1; message Inner { string s = 1; map<string, int32> m = 2; } }
message Root { int32 b = 1; }"""
    inner = b"\x04\x00\x00" + tag(1, 2) + b"\x02hi"
    payloads = [inner, b"\x00" + tag(1, 0) + b"\x01", b"\x02\x02", b"\x04\x00\x02", b"\x06",
                b"\x04\x00\x80\x80\x80\x80\x80\x01"]
    out, errors, program = twins(text, text, payloads, message="Outer.Inner")
    assert program is not None
    assert out.to_pylist()[0] == {"s": "hi", "m": []}
    assert errors[1] == ("the value is message fz.Outer (message indexes [0]), and the column "
                         "holds message fz.Outer.Inner")
    assert all(error is not None for error in errors[1:])
    assert program.run(payloads)[1] == bytes([0] + [ROW_INDEXES] * 5)


def test_grpc_tools_compiled_classes_read_alike(tmp_path):
    protoc = pytest.importorskip("grpc_tools.protoc", reason="grpcio-tools, a test extra, "
                                                         "is not installed")
    import grpc_tools

    (tmp_path / "fzorders.proto").write_text(ORDERS.replace("package fz;", "package fzg;"))
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    assert protoc.main(["protoc", f"-I{tmp_path}", f"-I{include}", f"--python_out={tmp_path}",
                        str(tmp_path / "fzorders.proto")]) == 0
    sys.path.insert(0, str(tmp_path))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the generated code's version notice
            import fzorders_pb2
    finally:
        sys.path.remove(str(tmp_path))
    rng = random.Random(11)
    payloads = []
    for _ in range(200):
        message = fzorders_pb2.Root()
        fill(message, rng)
        payloads.append(b"\x00" + message.SerializeToString())
    text = ORDERS.replace("package fz;", "package fzg;")
    out, errors, program = twins(text, text, payloads)
    assert program is not None
    assert errors.count(None) > 80  # the others: random timestamps past the column's range


# ------------------------------------------------------------------ the extension

def test_spans_outside_the_buffer_are_refused():
    _, _, program = twins(ORDERS, ORDERS, [b"\x00"])
    with pytest.raises(ValueError, match=r"payload 1 spans \[2, 9\), outside the 4 bytes"):
        program.run(Payloads(b"abcd", np.array([0, 2]), np.array([1, 9])))


STRUCT_COLUMNS = [(9, (1,)), (3, ())]  # struct<int64>


@pytest.mark.parametrize("programs, reason", [
    (((1, 0, 0, ((1, 3, 0, 0, 0, 1, -1, 5, -1, -1, None, None),), ()),), "claimed twice or out"),
    (((1, 0, 1, ((1, 3, 0, 0, 0, 1, -1, 0, -1, -1, None, None),),
       ((1, 1, 0, -1, -1, 0, 0, (6, 9, 0, -1), b"", None),)),), "does not fit"),
    (((1, 0, 0, ((1, 3, 0, 0, 0, 2, -1, 0, 0, -1, None, None),), ()),), "inline message"),
    (((1, 0, 0, ((0, 3, 0, 0, 0, 0, -1, 0, -1, -1, None, None),), ()),), "malformed field"),
    (((0, -1, 0, (), ()),), "root program"),
])
def test_the_extension_refuses_malformed_programs(programs, reason):
    with pytest.raises(ValueError, match=reason):
        extension().compile(STRUCT_COLUMNS, (), programs, 0, (0,))


def test_without_the_extension_the_pure_path_reads_and_says_so(monkeypatch):
    monkeypatch.setattr(protobuf_program, "_extension", None)  # not imported yet
    monkeypatch.setitem(sys.modules, "segmentlog_datasource.decode._protobufcolumns", None)
    monkeypatch.delattr(sys.modules["segmentlog_datasource.decode"], "_protobufcolumns",
                        raising=False)
    Root = orders_class()
    payloads = [b"\x00" + Root(order_id=5).SerializeToString(), b"\x00\x0a"]
    with pytest.warns(protobuf_program.ProtobufCompiledUnavailableWarning,
                      match="build_ext --inplace"):
        values, errors, program = twins(ORDERS, ORDERS, payloads)
    assert program is None and values[0]["order_id"] == 5 and errors[1] is not None


def test_the_switch_forces_the_pure_path(monkeypatch):
    monkeypatch.setattr(protobuf, "USE_COMPILED", False)
    held = SchemaRegistry("t")
    schema = registered(1, 1, ORDERS)
    held.register(schema)
    reader = PROTOBUF.reader(schema, held)
    values, _ = reader.decode_columns(schema, held, [b"\x00"])
    assert isinstance(values, list) and values[0]["order_id"] == 0


def test_a_read_decodes_through_the_compiled_twin_as_the_pure_path_does(tmp_path, monkeypatch):
    """DecodedRead (as Spark's reader plans and scans) over a log of framed values, errors
    placed at their offsets: the same table with the compiled decoder as without it."""
    import json

    from segmentlog_datasource.decode import DecodedRead
    from segmentlog_datasource.decode.reads import read_schema
    from segmentlog_datasource.format.scan import ScanOptions
    from segmentlog_datasource.read.options import parse_read_options
    from segmentlog_datasource.read.planning import Constraints
    from segmentlog_datasource.writer import write_log

    rng = random.Random(5)
    Root = orders_class()
    values = []
    for index in range(1000):
        message = Root()
        fill(message, rng)
        body = message.SerializeToString()
        values.append(b"\x00\x00\x00\x00\x01" + (b"\x00" + body if index % 250 else body[:3]))
    values[7] = None
    export = tmp_path / "registry.json"
    export.write_text(json.dumps([{"id": 1, "subject": "orders-value", "version": 1,
                                   "schemaType": "PROTOBUF", "schema": ORDERS}]))
    logdir = str(tmp_path / "logs")
    write_log(logdir, pa.table({"value": pa.array(values, pa.binary())}), topic="orders",
              num_partitions=1)
    options = {"path": logdir, "valueFormat": "protobuf", "schemas": str(export),
               "mode": "PERMISSIVE"}

    def read():
        decoded = DecodedRead(options)
        plan = decoded.plan(decoded.read_options(parse_read_options(options)), Constraints())
        return pa.Table.from_batches(list(decoded.scan(plan, ScanOptions())),
                                     read_schema(options)).select(["valueDecoded", "valueError"])

    with warnings.catch_warnings():
        warnings.simplefilter("error", protobuf_program.ProtobufTwinsDisagreeWarning)
        compiled = read()
    monkeypatch.setattr(protobuf, "USE_COMPILED", False)
    pure = read()
    plain = pa.schema([pa.field("valueDecoded", storage(compiled.schema.field(0).type)),
                       compiled.schema.field(1)])
    assert canonical(compiled.cast(plain).to_pylist()) == canonical(pure.cast(plain).to_pylist())
    errors = compiled.column("valueError").to_pylist()
    assert errors[250].startswith("orders-0 offset 250: value: schema id 1 (orders-value "
                                  "version 1): ")
    assert all(errors[row] is not None for row in range(0, 1000, 250))
    assert errors[7] is None and compiled.column("valueDecoded")[7].as_py() is None
    assert errors.count(None) > 500  # the others: random timestamps past the column's range


def test_a_run_from_a_checkouts_root_loads_the_build_of_the_same_source(tmp_path):
    """From a checkout's root (its working directory first on sys.path, as Spark's Python
    workers have it), the package imported is the checkout's, which holds no build: the
    build of the installed copy loads, as it was built from the same source
    (SOURCE_SHA256), and no fallback warning is given."""
    from support.checkout_copy import copy_checkout_source, loaded_extension

    copy_checkout_source(tmp_path)
    package, built = loaded_extension(tmp_path, "protobuf_program")
    assert package.startswith(str(tmp_path))  # the checkout's package...
    assert not built.startswith(str(tmp_path))  # ...with the installed build


def test_a_row_the_twins_disagree_on_sends_the_batch_to_the_pure_path(monkeypatch):
    """Were the compiled decoder to refuse a row the runtime reads (a bug), the batch's
    values come from the pure path, with a warning saying so."""
    held = SchemaRegistry("t")
    schema = registered(1, 1, ORDERS)
    held.register(schema)
    reader = PROTOBUF.reader(schema, held)
    Root = orders_class()
    payloads = [b"\x00" + Root(order_id=n).SerializeToString() for n in range(3)]
    program = reader._program(1, reader._writer_schema(schema, held))
    run = program.run

    def refusing(batch):
        array, codes = run(batch)
        return array, bytes([0, ROW_CORRUPT, 0])

    monkeypatch.setattr(program, "run", refusing)
    with pytest.warns(protobuf_program.ProtobufTwinsDisagreeWarning, match="payload 1"):
        values, errors = reader.decode_columns(schema, held, payloads, compiled=True)
    assert isinstance(values, list) and [v["order_id"] for v in values] == [0, 1, 2]
    assert errors == [None] * 3


def test_the_columns_handed_over_through_arrows_c_interface_equal_the_buffers(monkeypatch):
    """The columns go to pyarrow as one ArrowArray (columns.h's column_capsule) where
    pyarrow imports it; the buffers, one by one, otherwise: both give the same array."""
    Root = orders_class()
    payloads = [b"\x00" + Root(order_id=n, note="n" if n % 2 else None, paid=n % 3 == 0,
                               tags=["t"] * (n % 4)).SerializeToString() for n in range(50)]
    payloads[7] = b"\x00\xff"  # a failed row: a null
    held = SchemaRegistry("t")
    schema = registered(1, 1, ORDERS)
    held.register(schema)
    reader = PROTOBUF.reader(schema, held)
    program = reader._program(1, reader._writer_schema(schema, held))
    imported, codes = program.run(as_spans(payloads))
    monkeypatch.setattr(protobuf_program, "_ARROW_C", False)
    built, same_codes = program.run(as_spans(payloads))
    imported.validate(full=True)
    assert imported.equals(built) and codes == same_codes and imported.null_count == 1
