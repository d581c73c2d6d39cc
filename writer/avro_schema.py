"""Avro for framed writes: a column's values encoded (fastavro) with the schema
schemas/avro.py derives from its type, or that an option gives."""
import functools
import io
import json
from typing import Callable, List, Optional

import pyarrow as pa

from ..schemas.avro import (
    NamedTypes, compatibility_problem, derive_record_schema, parse_schema_option,
)
from .errors import InvalidInputError
from .schema_format import PayloadMisfit, SchemaFormat

# -- encoding (fastavro) -------------------------------------------------------------


def _pythonizer(arrow_type: pa.DataType) -> Optional[Callable]:
    """What turns to_pylist()'s value of this type into what fastavro writes (maps as
    dicts); None where nothing needs turning."""
    t = arrow_type
    if pa.types.is_map(t):
        inner = _pythonizer(t.item_type)
        if inner is None:
            return lambda v: None if v is None else dict(v)
        return lambda v: None if v is None else {k: inner(x) for k, x in v}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _pythonizer(t.value_type)
        if inner is None:
            return None
        return lambda v: None if v is None else [inner(x) for x in v]
    if pa.types.is_struct(t):
        inner = {f.name: _pythonizer(f.type) for f in t}
        inner = {name: fn for name, fn in inner.items() if fn is not None}
        if not inner:
            return None

        def struct(v):
            if v is None:
                return None
            for name, fn in inner.items():
                v[name] = fn(v[name])
            return v
        return struct
    return None


@functools.lru_cache(maxsize=256)
def _parsed(text: str):
    """fastavro's parsed schema of a schema text, once a process."""
    import fastavro

    return fastavro.parse_schema(json.loads(text))


def _misfit(value, parsed) -> str:
    """fastavro's account of where a value does not fit the schema."""
    from fastavro.validation import validate

    try:
        validate(value, parsed, raise_errors=True)
    except Exception as exc:
        errors = getattr(exc, "errors", None)  # fastavro's ValidationError: one per union branch
        return "; ".join(str(e) for e in errors) if errors else str(exc)
    return "fastavro cannot encode it"


class AvroFormat(SchemaFormat):
    """Avro for framed writes: spark-avro's derivation, Avro's resolution rules, fastavro's
    encoder."""

    name = "avro"
    schema_type = "AVRO"
    schema_option = "AvroSchema"

    def derive_schema(self, column_type, record_name, column):
        return derive_record_schema(column_type, record_name, column)

    def given_schema(self, text, option, column_type, column):
        text = parse_schema_option(text, option)
        if not pa.types.is_struct(column_type):
            raise InvalidInputError(f"column {column!r} has type {column_type}; an "
                                    f"Avro-framed write needs a struct there")
        fields = {f["name"] for f in json.loads(text)["fields"]}
        extra = [f.name for f in column_type if f.name not in fields]
        if extra:
            raise InvalidInputError(
                f"column {column!r} has field(s) {', '.join(map(repr, extra))} that option "
                f"{option!r} lacks: they would not be written")
        return text

    def same_schema(self, a, b):
        try:
            return json.loads(a) == json.loads(b)
        except ValueError:
            return a == b

    def compatibility_problem(self, level, new_text, previous):
        return compatibility_problem(level, new_text, previous)

    def record_name(self, text):
        return NamedTypes.full_name(json.loads(text), "")

    def encode_payloads(self, column, text):
        from fastavro import schemaless_writer

        parsed = _parsed(text)
        convert = _pythonizer(column.type)
        out: List[Optional[bytes]] = []
        buffer = io.BytesIO()
        for row, value in enumerate(column.to_pylist()):
            if value is None:
                out.append(None)
                continue
            if convert is not None:
                value = convert(value)
            buffer.seek(0)
            buffer.truncate()
            try:
                schemaless_writer(buffer, parsed, value)
            except Exception as exc:
                raise PayloadMisfit(row, _misfit(value, parsed) or str(exc)) from None
            out.append(buffer.getvalue())
        return out
