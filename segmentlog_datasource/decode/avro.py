"""Avro keys and values (valueFormat=avro / keyFormat=avro): Spark types as spark-avro's
SchemaConverters.toSqlType gives them, and payloads decoded with Avro schema resolution
(fastavro's schemaless_reader) into the reader schema's values.

Logical types are left out of the schemas fastavro reads with, and applied here from the
reader schema alone, as Avro's Java reader applies them: a writer that wrote a plain long
and a reader that says timestamp-millis give a timestamp, whatever fastavro would do.
"""
import io
import json
from decimal import Decimal
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa

from ..errors import InvalidOptionError, UnsupportedFormatError
from .value_formats import FormatReader, ValueFormat

SPARK_MAX_DECIMAL_PRECISION = 38
_PRIMITIVES = {
    "null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(),
}
_TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")  # Spark's TimestampType
_TIMESTAMP_NTZ = pa.timestamp("us")  # Spark's TimestampNTZType
# Logical types spark-avro maps, by the type they annotate; others read as that type.
_LOGICAL = {
    ("int", "date"): pa.date32(),
    ("long", "timestamp-millis"): _TIMESTAMP_UTC,
    ("long", "timestamp-micros"): _TIMESTAMP_UTC,
    ("long", "local-timestamp-millis"): _TIMESTAMP_NTZ,
    ("long", "local-timestamp-micros"): _TIMESTAMP_NTZ,
}
_MILLIS = {"timestamp-millis", "local-timestamp-millis"}


def _fastavro():
    import fastavro

    return fastavro


class AvroFormat(ValueFormat):
    name = "avro"
    schema_type = "AVRO"
    extra = "avro"

    def require(self, option: str) -> None:
        try:
            _fastavro()
        except ImportError:
            raise InvalidOptionError(
                f"option {option!r}: decoding Avro needs fastavro, which is not installed: "
                f"pip install \"segmentlog[avro]\"", option) from None

    def reader(self, schema, registry) -> "AvroReader":
        return AvroReader(schema, registry)


AVRO = AvroFormat()


def describe(schema) -> str:
    return f"subject {schema.subject!r} version {schema.version} (schema id {schema.id})"


# ------------------------------------------------------------------------ parsing

def _without_logical_types(schema):
    """`schema` (its JSON form) with every logicalType left out."""
    if isinstance(schema, dict):
        return {key: _without_logical_types(value) for key, value in schema.items()
                if key != "logicalType"}
    if isinstance(schema, list):
        return [_without_logical_types(value) for value in schema]
    return schema


def parse_registered(schema, registry, logical_types: bool = True):
    """`schema` (a RegisteredSchema) parsed by fastavro with its references as named
    types: (the parsed schema, the named types by full name)."""
    fastavro = _fastavro()
    named: Dict[str, dict] = {}
    _parse_references(schema, registry, named, logical_types)
    text = json.loads(schema.schema)
    if not logical_types:
        text = _without_logical_types(text)
    try:
        parsed = fastavro.parse_schema(text, named_schemas=named)
    except Exception as failure:  # fastavro's SchemaParseException, UnknownType, ...
        raise UnsupportedFormatError(
            f"{describe(schema)}: not an Avro schema fastavro can parse: {failure}") from None
    return parsed, named


def _parse_references(schema, registry, named, logical_types) -> None:
    """Parses the schemas `schema` references (transitively, dependencies first) into
    `named`."""
    for reference in registry.references_of(schema):
        text = json.loads(reference.schema)
        if not logical_types:
            text = _without_logical_types(text)
        try:
            _fastavro().parse_schema(text, named_schemas=named)
        except Exception as failure:
            raise UnsupportedFormatError(
                f"{describe(reference)}, referenced by {describe(schema)}: not an Avro "
                f"schema fastavro can parse: {failure}") from None


# ---------------------------------------------------------------------- Spark types

def _is_named_reference(schema) -> bool:
    return isinstance(schema, str) and schema not in _PRIMITIVES


def _type_name(schema, named) -> str:
    """The Avro type of a parsed schema: a primitive's name, record, enum, union..."""
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, str):
        return schema if schema in _PRIMITIVES else named[schema]["type"]
    return schema["type"]


def _fixed_max_precision(size: int) -> int:
    """The most decimal digits a `size`-byte two's complement number always holds."""
    return len(str(2 ** (8 * size - 1) - 1)) - 1


def spark_type(schema, named, where: str, stack=()) -> pa.DataType:
    """The Arrow type of a parsed Avro schema, as spark-avro maps it to Spark's."""
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema in stack:
            raise UnsupportedFormatError(
                f"{where}: recursive schema: {schema} contains itself "
                f"({' > '.join(stack + (schema,))}), and a Spark type cannot (spark-avro "
                f"refuses it too)")
        return spark_type(named[schema], named, where, stack)
    if isinstance(schema, list):
        return _union_type(schema, named, where, stack)
    kind = schema["type"]
    if kind in ("record", "error"):
        name = schema["name"]
        if name in stack:
            return spark_type(name, named, where, stack)
        inner = stack + (name,)
        return pa.struct([pa.field(field["name"], spark_type(field["type"], named, where, inner))
                          for field in schema["fields"]])
    if kind == "enum":
        return pa.string()
    if kind == "array":
        return pa.list_(pa.field("element", spark_type(schema["items"], named, where, stack)))
    if kind == "map":
        return pa.map_(pa.string(), spark_type(schema["values"], named, where, stack))
    if kind in ("bytes", "fixed"):
        decimal = _decimal_of(schema)
        if decimal is None:
            return pa.binary()
        precision, scale = decimal
        if precision > SPARK_MAX_DECIMAL_PRECISION:
            raise UnsupportedFormatError(
                f"{where}: decimal({precision}, {scale}): Spark's decimals hold at most "
                f"{SPARK_MAX_DECIMAL_PRECISION} digits")
        return pa.decimal128(precision, scale)
    logical = _LOGICAL.get((kind, schema.get("logicalType")))
    if logical is not None:
        return logical
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    return spark_type(kind, named, where, stack)  # {"type": "<a named type>"}


def _decimal_of(schema) -> Optional[Tuple[int, int]]:
    if schema.get("logicalType") != "decimal":
        return None
    precision, scale = schema.get("precision"), schema.get("scale", 0)
    if not isinstance(precision, int) or not isinstance(scale, int) or precision <= 0 \
            or not 0 <= scale <= precision:
        return None
    if schema["type"] == "fixed" and precision > _fixed_max_precision(schema["size"]):
        return None
    return precision, scale


def _branches(union) -> List:
    return [branch for branch in union if branch != "null"]


def _union_shape(union, named) -> str:
    """How spark-avro maps a union: "nullable" (one other type), "long", "double" (int
    and long, float and double) or "members" (a struct of member0, member1, ...)."""
    branches = _branches(union)
    if len(branches) == 1:
        return "nullable"
    kinds = {_type_name(branch, named) for branch in branches}
    if len(branches) == 2 and kinds == {"int", "long"}:
        return "long"
    if len(branches) == 2 and kinds == {"float", "double"}:
        return "double"
    return "members"


def _union_type(union, named, where, stack) -> pa.DataType:
    shape = _union_shape(union, named)
    branches = _branches(union)
    if not branches:
        return pa.null()
    if shape == "nullable":
        return spark_type(branches[0], named, where, stack)
    if shape == "long":
        return pa.int64()
    if shape == "double":
        return pa.float64()
    return pa.struct([pa.field(f"member{index}", spark_type(branch, named, where, stack))
                      for index, branch in enumerate(branches)])


# ----------------------------------------------------------------------- converters

Converter = Optional[Callable]  # a decoded value into what its Arrow type takes; None: as is


def _unwrap(value):
    """A union member read with fastavro's return_named_type: (name, value) -> value."""
    return value[1] if isinstance(value, tuple) else value


def converter(schema, named) -> Converter:
    """What turns fastavro's value (read with logical types left out) into the value of
    the reader schema's Spark type."""
    if isinstance(schema, str):
        return None if schema in _PRIMITIVES else converter(named[schema], named)
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
        decimal = _decimal_of(schema)
        if decimal is None:
            return None
        scale = decimal[1]
        return lambda value: Decimal(f"{int.from_bytes(value, 'big', signed=True)}e-{scale}")
    if kind == "long" and schema.get("logicalType") in _MILLIS:
        return lambda value: value * 1000
    if kind in _PRIMITIVES or kind == "enum":
        return None
    return converter(kind, named)


def _none_safe(convert: Converter) -> Converter:
    if convert is None:
        return None
    return lambda value: None if value is None else convert(value)


def _union_converter(union, named) -> Converter:
    shape = _union_shape(union, named)
    branches = _branches(union)
    if not branches or shape in ("long", "double"):
        return None
    if shape == "nullable":
        inner = converter(branches[0], named)
        if inner is None and _type_name(branches[0], named) not in ("record", "error", "enum", "fixed"):
            return None
        inner = inner or (lambda value: value)
        return lambda value: None if value is None else inner(_unwrap(value))
    members = [(f"member{index}", _none_safe(converter(branch, named)) or (lambda v: v))
               for index, branch in enumerate(branches)]
    by_name = {}
    for index, branch in enumerate(branches):
        if isinstance(branch, dict) and "name" in branch:
            by_name[branch["name"]] = index
        elif _is_named_reference(branch):
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
    kinds = [_type_name(branch, named) for branch in branches]

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
    fastavro = _fastavro()
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
