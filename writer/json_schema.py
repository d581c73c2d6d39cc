"""JSON Schema for framed writes (valueFormat=json): a schema derived from an Arrow type as
the inverse of the reader's mapping (decode/json_schema.py), stored as Schema Registry
stores a JSON schema (its canonicalString: Jackson's compact JSON of the document, key
order kept, numbers as written), checked for compatibility by the rules of Schema
Registry's JSON Schema diff, and values written as KafkaJsonSchemaSerializer writes them
(the JSON document as UTF-8, nothing between the frame and it).

The derived schema, field by field: boolean; int8/16/32 -> integer with Connect's
`connect.type` int8/int16/int32; int64 -> integer; float32 -> number with `connect.type`
float32; float64 -> number; string; binary -> string with `contentEncoding: base64`;
date -> string `format: date`; timestamp -> string `format: date-time` (written in UTC
with `Z`, one without a time zone as if in UTC; the reader gives timestamp[us, UTC]);
list -> array with `items`; map with string keys -> object with only
`additionalProperties`; struct -> object with `properties` in field order, non-nullable
fields `required`, and `additionalProperties: false` (a closed content model, as
Connect's JsonSchemaData writes structs: adding a nullable column is then backward
compatible); a nullable field -> `oneOf: [{"type": "null"}, T]`. The top-level object's
`title` is the record name (Schema Registry's JsonSchema.name(), what RecordNameStrategy
names the subject after), `topLevelRecord` by default as for Avro. Decimals are refused
(the reader has no decimal type: cast to double or string).

A given schema guides the values the same way: its `$ref`s within the document, `oneOf` /
`anyOf` / type lists (null among them: the field takes null), `allOf` of objects, enums,
string formats, Connect's Date and Timestamp integers. Constraints (`minimum`, `pattern`,
...) are not checked, as the reader does not check them. A null field is written as null
where the schema takes null, left out where the property is optional, else a misfit.

Compatibility: schemas/json_schema/compatibility.py.
"""
import base64
import functools
import datetime as dt
import json
import math
import struct as _struct
from decimal import Decimal
from typing import Any, Callable, List, Optional, Tuple

import pyarrow as pa

from ..errors import InvalidOptionError
from ..schemas.json_schema import (
    CONNECT_DATE, CONNECT_TIMESTAMP, JSON_TYPES, canonical_or_none, canonical_text,
    derive_object_schema, enum_key, follow_pointer, implied_type, number_text,
    parse_schema_text, pointer_token, split_ref,
)
from .errors import InvalidInputError
from .schema_format import PayloadMisfit, SchemaFormat

_UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)
_EPOCH_DAY = dt.date(1970, 1, 1).toordinal()


# -- the stored text ----------------------------------------------------------------

# -- values -> JSON, guided by the schema -----------------------------------------------

class _SchemaProblem(Exception):
    """A part of a given schema the writer cannot write values for."""

    def __init__(self, pointer: str, reason: str):
        super().__init__(f"the JSON Schema at {pointer or '#'} {reason}")


class _Misfit(Exception):
    """A value that does not fit (caught per row); `path` grows as it unwinds."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self.path: List[str] = []

    def where(self) -> str:
        text = "".join(self.path)
        return text[1:] if text.startswith(".") else text


def _inside(misfit: _Misfit, segment: str) -> _Misfit:
    misfit.path.insert(0, segment)
    return misfit


class _Mismatch:
    """An alternative of the schema that no value of the column's type fits."""

    def __init__(self, reason: str):
        self.reason = reason


Converter = Optional[Callable[[Any], Any]]  # None: the value is written as it is


def _never(reason: str) -> Callable[[Any], Any]:
    def convert(value):
        raise _Misfit(reason)
    return convert


def _finite(value):
    if math.isinf(value) or math.isnan(value):
        raise _Misfit(f"{value} is not a JSON number")
    return value


_F32 = _struct.Struct("<f")


def _float32(value):
    """The shortest decimal that reads back as the same float32 (as Java's Float.toString
    writes a Connect float32)."""
    _finite(value)
    for digits in (6, 7, 8, 9):
        shorter = float(f"{value:.{digits}g}")
        if _F32.unpack(_F32.pack(shorter))[0] == value:
            return shorter
    return value


def _date_text(value):
    return value.isoformat()


def _timestamp_text(value):
    value = value.replace(tzinfo=_UTC) if value.tzinfo is None else value.astimezone(_UTC)
    return value.isoformat()[:-6] + "Z"  # isoformat ends +00:00 in UTC


def _base64_text(value):
    return base64.b64encode(value).decode("ascii")


def _checked_date(value):
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        raise _Misfit(f"{value!r} is not a date (format date, YYYY-MM-DD)") from None
    return value


def _checked_date_time(value):
    try:
        moment = dt.datetime.fromisoformat(value.upper())
    except ValueError:
        moment = None
    if moment is None or "T" not in value.upper():
        raise _Misfit(f"{value!r} is not a date-time (format date-time, RFC 3339)")
    return value


def _checked_base64(value):
    try:
        base64.b64decode(value, validate=True)
    except ValueError:
        raise _Misfit(f"{value!r} is not base64 text (contentEncoding base64)") from None
    return value


def _integer_range(bits: int) -> Tuple[int, int]:
    return -2 ** (bits - 1), 2 ** (bits - 1) - 1


def _in_range(bits: int) -> Callable[[Any], Any]:
    low, high = _integer_range(bits)

    def convert(value):
        if low <= value <= high:
            return value
        raise _Misfit(f"{value} is out of the range of the schema's {bits}-bit integer")
    return convert


def _integral(bits: int) -> Callable[[Any], Any]:
    low, high = _integer_range(bits)

    def convert(value):
        if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
            raise _Misfit(f"{value} is not an integer")
        if value != int(value):
            raise _Misfit(f"{value} is not an integer, and the schema's type is integer")
        value = int(value)
        if low <= value <= high:
            return value
        raise _Misfit(f"{value} is out of the range of the schema's {bits}-bit integer")
    return convert


class _Encoder:
    """The converters of one (schema, column type): from the column's Python values to
    the JSON values the schema takes, built once. `lacking` and `unheld` collect, for a
    given schema's check, the column fields the schema's objects lack and the required
    properties the column lacks (as field paths)."""

    def __init__(self, root):
        self.root = root
        self.lacking: List[str] = []
        self.unheld: List[str] = []

    # -- the schema's parts
    def resolve(self, schema, pointer):
        for _ in range(64):
            if not (isinstance(schema, dict) and "$ref" in schema):
                return schema, pointer
            ref = schema["$ref"]
            base, fragment = split_ref(ref) if isinstance(ref, str) else (ref, "")
            if base and not (isinstance(self.root, dict) and base == self.root.get("$id")):
                raise _SchemaProblem(pointer, f"refers to {ref!r}: only references within "
                                              f"the schema (#/...) are written")
            try:
                target = follow_pointer(self.root, fragment)
            except (LookupError, ValueError):
                raise _SchemaProblem(pointer, f"refers to {ref!r}, which does not exist") \
                    from None
            schema, pointer = target, ref
        raise _SchemaProblem(pointer, "is a $ref that leads back to itself")

    def alternatives(self, schema, pointer) -> Tuple[bool, List[Tuple[Any, str]]]:
        """(whether null fits, the non-null alternatives) of a schema."""
        schema, pointer = self.resolve(schema, pointer)
        if schema is True or schema == {}:
            return True, [({}, pointer)]
        if schema is False:
            return False, []
        if not isinstance(schema, dict):
            raise _SchemaProblem(pointer, f"is {json.dumps(schema)[:40]}, not a schema")
        for keyword in ("oneOf", "anyOf"):
            if keyword in schema:
                members = schema[keyword]
                if not isinstance(members, list) or not members:
                    raise _SchemaProblem(f"{pointer}/{keyword}", "is not a non-empty array")
                nullable, alternatives = False, []
                for index, member in enumerate(members):
                    takes_null, options = self.alternatives(member, f"{pointer}/{keyword}/"
                                                                    f"{index}")
                    nullable = nullable or takes_null
                    alternatives += options
                return nullable, alternatives
        if "allOf" in schema:
            return False, [(self.merged(schema, pointer), pointer)]
        if "enum" in schema:
            if not isinstance(schema["enum"], list):
                raise _SchemaProblem(f"{pointer}/enum", "is not an array")
            return None in schema["enum"], [(schema, pointer)]
        if "const" in schema:
            return schema["const"] is None, [(schema, pointer)]
        kind = schema.get("type", implied_type(schema))
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            return len(others) < len(kind), [({**schema, "type": k}, pointer) for k in others]
        if kind == "null":
            return True, []
        if kind is None:
            return True, [(schema, pointer)]
        return False, [(schema, pointer)]

    def merged(self, schema, pointer) -> dict:
        """allOf of object schemas as one object (as the reader merges them)."""
        parts = schema["allOf"]
        if not isinstance(parts, list) or not parts:
            raise _SchemaProblem(f"{pointer}/allOf", "is not a non-empty array")
        merged = {"type": "object", "properties": {}, "required": []}
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        for index, part in enumerate(parts + ([rest] if rest else [])):
            part, _ = self.resolve(part, f"{pointer}/allOf/{index}")
            if not isinstance(part, dict) or not (
                    part.get("type") == "object" or implied_type(part) == "object"
                    or not any(k in part for k in ("type", "enum", "const", "oneOf", "anyOf",
                                                   "allOf", "items"))):
                raise _SchemaProblem(f"{pointer}/allOf", "combines schemas that are not all "
                                                         "objects, which are not written")
            merged["properties"].update(part.get("properties") or {})
            merged["required"] += list(part.get("required") or ())
            if part.get("additionalProperties") is False:
                merged["additionalProperties"] = False
        return merged

    # -- converters
    def convert(self, t: pa.DataType, schema, pointer: str, where: str
                ) -> Tuple[Converter, bool]:
        """(converter of a non-null value, whether null fits)."""
        nullable, alternatives = self.alternatives(schema, pointer)
        options, reasons = [], []
        for part, part_pointer in alternatives:
            converter = self.alternative(t, part, part_pointer, where)
            if isinstance(converter, _Mismatch):
                reasons.append(converter.reason)
            else:
                options.append(converter)
        if not options:
            if reasons:
                return _never("; ".join(reasons)), nullable
            return _never(f"the schema at {pointer} takes only null" if nullable else
                          f"the schema at {pointer} takes no value"), nullable
        if len(options) == 1:
            return options[0], nullable

        def first_fit(value):
            failures = []
            for option in options:
                if option is None:
                    return value
                try:
                    return option(value)
                except _Misfit as misfit:
                    failures.append(misfit.reason)
            raise _Misfit(f"fits none of the alternatives of the schema at {pointer} "
                          f"({'; '.join(failures)})")
        return first_fit, nullable

    def alternative(self, t, schema: dict, pointer: str, where: str):
        if "enum" in schema or "const" in schema:
            allowed = schema["enum"] if "enum" in schema else [schema["const"]]
            rest = {k: v for k, v in schema.items() if k not in ("enum", "const")}
            base = self.alternative(t, rest, pointer, where)
            if isinstance(base, _Mismatch):
                return base
            keys = {enum_key(v) for v in allowed}

            def member(value):
                value = value if base is None else base(value)
                if enum_key(value) in keys:
                    return value
                raise _Misfit(f"{json.dumps(value, default=str)[:40]} is not among the "
                              f"schema's enum {json.dumps(allowed, default=str)[:80]}")
            return member
        kind = schema.get("type", implied_type(schema))
        if kind is None:
            return self.natural(t, pointer, where)
        if not isinstance(kind, str) or kind not in JSON_TYPES:
            raise _SchemaProblem(pointer, f"has type {kind!r}; JSON Schema's types are "
                                          f"{', '.join(JSON_TYPES)}")
        mismatch = _Mismatch(f"the column's {t} does not fit the schema's type "
                             f"{kind} (at {pointer})")
        if kind == "string":
            return self.string(t, schema, mismatch)
        if kind == "integer":
            return self.integer(t, schema, mismatch)
        if kind == "number":
            if pa.types.is_integer(t):
                return None
            if pa.types.is_float32(t):
                return _float32
            if pa.types.is_floating(t):
                return _finite
            if pa.types.is_decimal(t):
                return lambda value: _finite(float(value))
            return mismatch
        if kind == "boolean":
            return None if pa.types.is_boolean(t) else mismatch
        if kind == "array":
            return self.array(t, schema, pointer, where, mismatch)
        if kind == "object":
            if pa.types.is_struct(t):
                return self.struct(t, schema, pointer, where)
            if pa.types.is_map(t):
                return self.map(t, schema, pointer, where)
            return mismatch
        return _Mismatch(f"the schema at {pointer} takes only null")

    def string(self, t, schema, mismatch):
        form = schema.get("format")
        encoded = schema.get("contentEncoding") == "base64" or \
            schema.get("connect.type") == "bytes"
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            if encoded:
                return _checked_base64
            return _checked_date if form == "date" else \
                _checked_date_time if form == "date-time" else None
        if pa.types.is_binary(t) or pa.types.is_large_binary(t) or \
                pa.types.is_fixed_size_binary(t):
            return _base64_text if encoded else _Mismatch(
                f"{mismatch.reason[:-1]}, which has no contentEncoding base64 for bytes)")
        if pa.types.is_date(t) and form in (None, "date"):
            return _date_text
        if pa.types.is_timestamp(t) and form in (None, "date-time"):
            return _timestamp_text
        if pa.types.is_decimal(t) and form is None and not encoded:
            return str
        return mismatch

    def integer(self, t, schema, mismatch):
        bits = {"int8": 8, "int16": 16, "int32": 32}.get(schema.get("connect.type"), 64)
        title = schema.get("title")
        if pa.types.is_integer(t):
            width = t.bit_width + (1 if pa.types.is_unsigned_integer(t) else 0)
            return None if width <= bits else _in_range(bits)
        if pa.types.is_floating(t) or pa.types.is_decimal(t):
            return _integral(bits)
        if pa.types.is_date(t) and title == CONNECT_DATE:
            return lambda value: value.toordinal() - _EPOCH_DAY
        if pa.types.is_timestamp(t) and title == CONNECT_TIMESTAMP:
            return lambda value: (
                (value.replace(tzinfo=_UTC) if value.tzinfo is None else value) - _EPOCH
            ) // dt.timedelta(milliseconds=1)
        return mismatch

    def array(self, t, schema, pointer, where, mismatch):
        if not (pa.types.is_list(t) or pa.types.is_large_list(t)
                or pa.types.is_fixed_size_list(t)):
            return mismatch
        items = schema.get("items", schema.get("additionalItems", True))
        if isinstance(items, list) or "prefixItems" in schema:
            raise _SchemaProblem(pointer, "is a tuple (items as a list or prefixItems), "
                                          "which is not written")
        element, nullable = self.convert(t.value_type, items, f"{pointer}/items", f"{where}[]")

        def convert(value):
            out = []
            for index, item in enumerate(value):
                if item is None:
                    if not nullable:
                        raise _inside(_Misfit("null, and the array's items take no null"),
                                      f"[{index}]")
                    out.append(None)
                elif element is None:
                    out.append(item)
                else:
                    try:
                        out.append(element(item))
                    except _Misfit as misfit:
                        raise _inside(misfit, f"[{index}]")
            return out
        if element is None and nullable:
            return None
        return convert

    def natural(self, t, pointer, where):
        """The converter of a value where the schema takes any JSON."""
        if pa.types.is_struct(t):
            return self.struct(t, {}, pointer, where, named=False)
        if pa.types.is_map(t):
            return self.map(t, {}, pointer, where)
        if _nested(t):
            return self.array(t, {}, pointer, where, None)
        return self._natural_leaf(t)

    def _natural_leaf(self, t):
        if pa.types.is_float32(t):
            return _float32
        if pa.types.is_floating(t):
            return _finite
        if pa.types.is_date(t):
            return _date_text
        if pa.types.is_timestamp(t):
            return _timestamp_text
        if pa.types.is_binary(t) or pa.types.is_large_binary(t) or \
                pa.types.is_fixed_size_binary(t):
            return _base64_text
        if pa.types.is_decimal(t):
            return lambda value: _finite(float(value))
        if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_string(t) or \
                pa.types.is_large_string(t):
            return None
        return _Mismatch(f"the column's {t} has no JSON value")

    def _properties(self, schema, pointer):
        properties = schema.get("properties") or {}
        if not isinstance(properties, dict):
            raise _SchemaProblem(f"{pointer}/properties", "is not an object")
        required = schema.get("required") or []
        if not isinstance(required, list):
            raise _SchemaProblem(f"{pointer}/required", "is not an array")
        return properties, set(required), schema.get("additionalProperties", True)

    def struct(self, t, schema, pointer, where, named=True):
        properties, required, additional = self._properties(schema, pointer)
        fields = []
        for f in t:
            inner = f"{where}.{f.name}" if where else f.name
            if f.name in properties:
                converter, nullable = self.convert(
                    f.type, properties[f.name], f"{pointer}/properties/{pointer_token(f.name)}",
                    inner)
            else:
                if named:
                    self.lacking.append(inner)
                if additional is False:
                    converter, nullable = _never(
                        f"the schema at {pointer} has no property {f.name!r} and allows no "
                        f"others (additionalProperties false)"), True
                else:
                    converter, nullable = self.convert(
                        f.type, additional if isinstance(additional, dict) else {},
                        f"{pointer}/additionalProperties", inner)
            fields.append((f.name, converter, nullable, f.name in required))
        names = {f.name for f in t}
        unheld = [name for name in dict.fromkeys(schema.get("required") or ())
                  if name not in names]
        self.unheld += [f"{where}.{name}" if where else name for name in unheld]

        def convert(value):
            if unheld:
                raise _Misfit(f"the schema at {pointer} requires propert"
                              f"{'y' if len(unheld) == 1 else 'ies'} "
                              f"{', '.join(map(repr, unheld))}, which the column lacks")
            out = {}
            for name, converter, nullable, needed in fields:
                item = value[name]
                if item is None:
                    if nullable:
                        out[name] = None
                    elif needed:
                        raise _inside(_Misfit("null, and the schema requires a value (a "
                                              "required property that takes no null)"),
                                      f".{name}")
                    # else left out: an optional property that takes no null
                elif converter is None:
                    out[name] = item
                else:
                    try:
                        out[name] = converter(item)
                    except _Misfit as misfit:
                        raise _inside(misfit, f".{name}")
            return out
        return convert

    def map(self, t, schema, pointer, where):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            return _Mismatch(f"the column's map has {t.key_type} keys; a JSON object's are "
                             f"strings")
        properties, required, additional = self._properties(schema, pointer)
        named = {name: self.convert(t.item_type, part,
                                    f"{pointer}/properties/{pointer_token(name)}", f"{where}{{}}")
                 for name, part in properties.items()}
        if additional is False:
            others = (_never(f"the schema at {pointer} allows no keys but its properties "
                             f"(additionalProperties false)"), False)
        else:
            others = self.convert(t.item_type,
                                  additional if isinstance(additional, dict) else {},
                                  f"{pointer}/additionalProperties", f"{where}{{}}")
        needed = sorted(required)

        def convert(value):
            out = {}
            for key, item in value:
                converter, nullable = named.get(key, others)
                if item is None:
                    if nullable:
                        out[key] = None
                        continue
                    raise _inside(_Misfit("null, and the schema takes no null there"),
                                  f"[{key!r}]")
                try:
                    out[key] = item if converter is None else converter(item)
                except _Misfit as misfit:
                    raise _inside(misfit, f"[{key!r}]")
            for key in needed:
                if key not in out:
                    raise _Misfit(f"the schema at {pointer} requires the key {key!r}, which "
                                  f"the map lacks")
            return out
        return convert


def _nested(t: pa.DataType) -> bool:
    return pa.types.is_struct(t) or pa.types.is_map(t) or pa.types.is_list(t) or \
        pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _object_alternatives(encoder: _Encoder, schema) -> bool:
    _, alternatives = encoder.alternatives(schema, "#")
    return any(isinstance(part, dict) and (part.get("type", implied_type(part)) == "object")
               for part, _ in alternatives)


@functools.lru_cache(maxsize=64)
def _column_converter(text: str, column_type: pa.DataType) -> Callable[[Any], Any]:
    """What turns a column's values into the JSON values the schema takes, built once a
    process per (schema text, column type)."""
    root = parse_schema_text(text)
    converter, _ = _Encoder(root).convert(column_type, root, "#", "")
    return converter if converter is not None else (lambda value: value)


def encode_values(column: pa.Array, text: str) -> List[Optional[bytes]]:
    """The JSON payload of each value of a struct column (None for null)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks else pa.array([], column.type)
    try:
        convert = _column_converter(text, column.type)
    except _SchemaProblem as problem:
        raise InvalidInputError(f"the JSON schema cannot be written: {problem}") from None
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                             allow_nan=False).encode
    out: List[Optional[bytes]] = []
    for row, value in enumerate(column.to_pylist()):
        if value is None:
            out.append(None)
            continue
        try:
            out.append(dumps(convert(value)).encode("utf-8"))
        except _Misfit as misfit:
            where = misfit.where()
            raise PayloadMisfit(row, f"field {where}: {misfit.reason}" if where
                                else misfit.reason) from None
    return out


# -- the language ---------------------------------------------------------------------

def _title_text(value) -> Optional[str]:
    """A title as Jackson's asText gives it (the registry's JsonSchema.name())."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        return number_text(value)
    if value is None:
        return "null"
    return ""  # an object or array


class JsonSchemaFormat(SchemaFormat):
    name = "json"
    schema_type = "JSON"
    schema_option = "JsonSchema"

    def derive_schema(self, column_type: pa.DataType, record_name: Optional[str],
                      column: str) -> str:
        return derive_object_schema(column_type, record_name, column)

    def given_schema(self, text, option: str, column_type: pa.DataType, column: str) -> str:
        try:
            schema = parse_schema_text(text)
        except (ValueError, TypeError) as exc:
            raise InvalidOptionError(f"option {option!r} is not JSON: {exc}", option) from None
        if not isinstance(schema, dict):
            raise InvalidOptionError(f"option {option!r} must be a JSON Schema object (of "
                                     f"an object with properties)", option)
        encoder = _Encoder(schema)
        try:
            if not _object_alternatives(encoder, schema):
                raise InvalidOptionError(
                    f"option {option!r} must be the JSON Schema of an object (type object "
                    f"with properties), as a struct column is written", option)
            if not pa.types.is_struct(column_type):
                raise InvalidInputError(f"column {column!r} has type {column_type}; a JSON "
                                        f"Schema framed write needs a struct there")
            encoder.convert(column_type, schema, "#", "")
        except _SchemaProblem as problem:
            raise InvalidOptionError(f"option {option!r}: {problem}", option) from None
        if encoder.lacking:
            raise InvalidInputError(
                f"column {column!r} has field(s) {', '.join(map(repr, encoder.lacking))} "
                f"that option {option!r} lacks among its properties: a reader of the schema "
                f"would not read them")
        if encoder.unheld:
            raise InvalidInputError(
                f"column {column!r} lacks field(s) {', '.join(map(repr, encoder.unheld))} "
                f"that option {option!r} requires")
        return canonical_text(schema)

    def same_schema(self, a: str, b: str) -> bool:
        if a == b:
            return True
        ca, cb = canonical_or_none(a), canonical_or_none(b)
        return ca is not None and ca == cb

    def compatibility_problem(self, level: str, new_text: str,
                              previous: List[Tuple[int, str]]) -> Optional[Tuple[int, str]]:
        from ..schemas.json_schema.compatibility import compatibility_problem

        return compatibility_problem(level, new_text, previous)

    def record_name(self, text: str) -> Optional[str]:
        """The schema's `title` (None without one: RecordNameStrategy then has no name)."""
        schema = parse_schema_text(text)
        if isinstance(schema, dict) and "title" in schema:
            return _title_text(schema["title"])
        return None

    def encode_payloads(self, column: pa.Array, text: str) -> List[Optional[bytes]]:
        return encode_values(column, text)
