"""Avro keys and values (valueFormat=avro / keyFormat=avro): payloads decoded with Avro
schema resolution (the compiled decoder, avro_program.py, or fastavro's schemaless_reader)
into the reader schema's values, of the Spark types schemas/avro.py maps.

Logical types are left out of the schemas fastavro reads with, and applied here from the
reader schema alone, as Avro's Java reader applies them: a writer that wrote a plain long
and a reader that says timestamp-millis give a timestamp, whatever fastavro would do.
"""
import io
from decimal import Decimal
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import InvalidOptionError
from ..schemas.avro import (
    MILLIS_LOGICAL_TYPES, PRIMITIVE_SPARK_TYPES, decimal_of, describe, load_fastavro,
    is_named_reference, parse_registered, spark_type, type_name, union_branches, union_shape,
)
from .value_formats import FormatReader, ValueFormat

Converter = Optional[Callable]  # a decoded value into what its Arrow type takes; None: as is


class AvroFormat(ValueFormat):
    name = "avro"
    schema_type = "AVRO"
    extra = "avro"

    def require(self, option: str) -> None:
        try:
            load_fastavro()
        except ImportError:
            raise InvalidOptionError(
                f"option {option!r}: decoding Avro needs fastavro, which is not installed: "
                f"pip install \"segmentlog[avro]\"", option) from None

    def reader(self, schema, registry) -> "AvroReader":
        return AvroReader(schema, registry)


AVRO = AvroFormat()


def _unwrap(value):
    """A union member read with fastavro's return_named_type: (name, value) -> value."""
    return value[1] if isinstance(value, tuple) else value


def converter(schema, named) -> Converter:
    """What turns fastavro's value (read with logical types left out) into the value of
    the reader schema's Spark type."""
    if isinstance(schema, str):
        return None if schema in PRIMITIVE_SPARK_TYPES else converter(named[schema], named)
    if isinstance(schema, list):
        return _union_converter(schema, named)
    kind = schema["type"]
    if kind in ("record", "error"):
        fields = [(field["name"], converter(field["type"], named)) for field in schema["fields"]]
        fields = [(name, convert) for name, convert in fields if convert is not None]
        if not fields:
            return None

        def convert_record(value):
            for name, convert in fields:
                value[name] = convert(value[name])
            return value

        return convert_record
    if kind == "array":
        element = converter(schema["items"], named)
        return None if element is None else (lambda value: [element(v) for v in value])
    if kind == "map":
        inner = converter(schema["values"], named)
        return None if inner is None else (
            lambda value: {key: inner(v) for key, v in value.items()})
    if kind in ("bytes", "fixed"):
        decimal = decimal_of(schema)
        if decimal is None:
            return None
        scale = decimal[1]
        return lambda value: Decimal(f"{int.from_bytes(value, 'big', signed=True)}e-{scale}")
    if kind == "long" and schema.get("logicalType") in MILLIS_LOGICAL_TYPES:
        return lambda value: value * 1000
    if kind in PRIMITIVE_SPARK_TYPES or kind == "enum":
        return None
    return converter(kind, named)


def _none_safe(convert: Converter) -> Converter:
    if convert is None:
        return None
    return lambda value: None if value is None else convert(value)


def _union_converter(union, named) -> Converter:
    shape = union_shape(union, named)
    branches = union_branches(union)
    if not branches or shape in ("long", "double"):
        return None
    if shape == "nullable":
        inner = converter(branches[0], named)
        if inner is None and type_name(branches[0], named) not in ("record", "error", "enum", "fixed"):
            return None
        inner = inner or (lambda value: value)
        return lambda value: None if value is None else inner(_unwrap(value))
    members = [(f"member{index}", _none_safe(converter(branch, named)) or (lambda v: v))
               for index, branch in enumerate(branches)]
    by_name = {}
    for index, branch in enumerate(branches):
        if isinstance(branch, dict) and "name" in branch:
            by_name[branch["name"]] = index
        elif is_named_reference(branch):
            by_name[branch] = index
    pick = _branch_picker(branches, named)

    def convert_union(value):
        if value is None:
            return None
        if isinstance(value, tuple):
            index = by_name[value[0]]
            value = value[1]
        else:
            index = pick(value)
        name, convert = members[index]
        return {name: convert(value)}

    return convert_union


def _branch_picker(branches, named) -> Callable:
    """The member of a union an unnamed value (one fastavro returns without its type's
    name) belongs to, by its Python type."""
    kinds = [type_name(branch, named) for branch in branches]

    def first(*wanted):
        for kind in wanted:
            if kind in kinds:
                return kinds.index(kind)
        return None

    def pick(value):
        if isinstance(value, bool):
            index = first("boolean")
        elif isinstance(value, int):
            # int and long read alike; an int member holds what fits 32 bits
            index = first("int", "long") if -2 ** 31 <= value < 2 ** 31 else first("long")
        elif isinstance(value, float):
            index = first("double", "float")
        elif isinstance(value, str):
            index = first("string", "enum")
        elif isinstance(value, bytes):
            index = first("bytes", "fixed")
        elif isinstance(value, list):
            index = first("array")
        elif isinstance(value, dict):
            index = _record_member(value, branches, kinds, named)
        else:
            index = None
        if index is None:
            raise ValueError(f"a {type(value).__name__} value matches no member of the union")
        return index

    return pick


def _record_member(value: dict, branches, kinds, named) -> Optional[int]:
    for index, (branch, kind) in enumerate(zip(branches, kinds)):
        if kind in ("record", "error"):
            definition = named[branch] if isinstance(branch, str) else branch
            if set(value) == {field["name"] for field in definition["fields"]}:
                return index
    return kinds.index("map") if "map" in kinds else None


# -------------------------------------------------------------------------- reading

class AvroReader(FormatReader):
    """The reader schema (a subject's latest when the read was planned), its Spark type,
    and the decoding of payloads written with any registered schema."""

    def __init__(self, schema, registry):
        self.schema = schema  # the RegisteredSchema
        parsed, named = parse_registered(schema, registry, logical_types=True)
        self.arrow_type = spark_type(parsed, named, describe(schema))
        self._typed = (parsed, named)
        self._resolved = parse_registered(schema, registry, logical_types=False)[0]
        self._convert = None
        self._writers: Dict[int, object] = {}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_convert"] = None  # closures: rebuilt where the read runs
        state["_writers"] = {}
        return state

    def decode(self, writer, registry, payloads: Sequence[bytes]):
        if self._convert is None:
            self._convert = converter(*self._typed) or (lambda value: value)
        writer_schema = self._writers.get(writer.id)
        if writer_schema is None:
            writer_schema = parse_registered(writer, registry, logical_types=False)[0]
            self._writers[writer.id] = writer_schema
        reader_schema = None if writer.id == self.schema.id else self._resolved
        return decode_payloads(payloads, writer_schema, reader_schema, self._convert,
                               describe(self.schema), reader_typed=self._typed)


# Whether decode_payloads may use the compiled decoder (avro_program.py); tests set it
# (or pass `compiled`) to force either twin.
USE_COMPILED = True


def decode_payloads(payloads: Sequence[bytes], writer_schema, reader_schema,
                    convert: Callable, reader_name: str = "the reader schema",
                    reader_typed=None, compiled: Optional[bool] = None
                    ) -> Tuple[List, List[Optional[str]]]:
    """Each Avro binary payload read with `writer_schema` resolved to `reader_schema`
    (None: the same), then converted: the values and each one's error (None when fine).

    With `reader_typed` (the reader schema parsed with its logical types, and its named
    types) and the pair in the compiled decoder's scope, the values come from it, as one
    pa.Array of the reader's Spark type; otherwise from fastavro, as a list. `compiled`
    (default USE_COMPILED) says whether the compiled decoder may be used."""
    if (USE_COMPILED if compiled is None else compiled) and reader_typed is not None:
        from .avro_program import program_for

        program = program_for(writer_schema, reader_typed)
        if program is not None:
            try:
                return program.decode(payloads)
            except MemoryError:  # a column past Arrow's 2 GiB offsets: fastavro's lists take it
                pass
    fastavro = load_fastavro()
    from fastavro.read import SchemaResolutionError

    values: List = []
    errors: List[Optional[str]] = []
    for payload in payloads:
        stream = io.BytesIO(payload)
        try:
            value = fastavro.schemaless_reader(stream, writer_schema, reader_schema,
                                               return_named_type=True)
            left = len(payload) - stream.tell()
            if left:
                raise _LeftOver(f"{left} bytes left over after the Avro value (of "
                                f"{len(payload)})")
            values.append(convert(value))
            errors.append(None)
        except SchemaResolutionError as failure:
            values.append(None)
            errors.append(f"incompatible writer schema: it does not resolve to the reader "
                          f"schema, {reader_name}: {failure}")
        except EOFError:
            values.append(None)
            errors.append(f"truncated payload: the Avro value needs more than the "
                          f"{len(payload)} bytes after the frame")
        except _LeftOver as failure:
            values.append(None)
            errors.append(f"malformed payload: {failure}")
        except (ValueError, IndexError, KeyError, UnicodeDecodeError, OverflowError,
                TypeError) as failure:
            values.append(None)
            errors.append(f"malformed payload: {type(failure).__name__}: {failure}")
    return values, errors


class _LeftOver(Exception):
    pass
