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

Compatibility (Schema Registry's default STRICT policy): BACKWARD compares the latest
version (original) with the new schema (update), FORWARD the other way, FULL both; the
*_TRANSITIVE forms every live version, newest first.
"""
import base64
import datetime as dt
import json
import math
import re
import struct as _struct
from decimal import Decimal
from typing import Any, Callable, Dict, List, Optional, Tuple

import pyarrow as pa

from ..errors import InvalidOptionError
from .errors import InvalidInputError
from .schema_format import PayloadMisfit, SchemaFormat

DEFAULT_TITLE = "topLevelRecord"
CONNECT_DATE = "org.apache.kafka.connect.data.Date"
CONNECT_TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
COMPATIBILITY_LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD",
                        "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
_JSON_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
_UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)
_EPOCH_DAY = dt.date(1970, 1, 1).toordinal()


# -- the stored text ----------------------------------------------------------------

def parse_schema_text(text) -> Any:
    """JSON as Schema Registry's Jackson reads a schema: numbers with a fraction or an
    exponent kept exactly (Decimal), as its BigDecimal nodes keep them."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    return json.loads(text, parse_float=Decimal)


_LOWER_HEX_ESCAPE = re.compile(r"(\\+)u00([0-9a-f]{2})")


def _string_text(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    if "\\u00" in text:  # Jackson writes control characters' escapes in upper case
        text = _LOWER_HEX_ESCAPE.sub(
            lambda m: m.group(0) if len(m.group(1)) % 2 == 0
            else f"{m.group(1)}u00{m.group(2).upper()}", text)
    return text


def _number_text(value) -> str:
    if isinstance(value, Decimal) and value.is_finite():
        if value.is_zero() and value.is_signed():
            value = value.copy_abs()  # BigDecimal has no negative zero
        return str(value)  # BigDecimal.toString's scientific form, as Decimal's
    if isinstance(value, (float, Decimal)):
        # NaN and Infinity, which Jackson reads (ALLOW_NON_NUMERIC_NUMBERS) and writes quoted
        return json.dumps(json.dumps(float(value)))
    return str(value)


def canonical_text(schema) -> str:
    """The text Schema Registry stores for a parsed JSON schema (its canonicalString:
    Jackson's compact JSON of the document, key order kept)."""
    if schema is None:
        return "null"
    if schema is True:
        return "true"
    if schema is False:
        return "false"
    if isinstance(schema, str):
        return _string_text(schema)
    if isinstance(schema, (int, float, Decimal)):
        return _number_text(schema)
    if isinstance(schema, list):
        return "[" + ",".join(canonical_text(item) for item in schema) + "]"
    return "{" + ",".join(f"{_string_text(key)}:{canonical_text(value)}"
                          for key, value in schema.items()) + "}"


def _canonical_or_none(text) -> Optional[str]:
    try:
        return canonical_text(parse_schema_text(text))
    except (ValueError, TypeError):
        return None


# -- deriving a schema from a column's type -------------------------------------------

def _derived(t: pa.DataType, where: str) -> Dict[str, Any]:
    """The schema of a non-null value of Arrow type `t`."""
    if pa.types.is_boolean(t):
        return {"type": "boolean"}
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return {"type": "integer", "connect.type": f"int{t.bit_width}"}
    if pa.types.is_int64(t):
        return {"type": "integer"}
    if pa.types.is_float32(t):
        return {"type": "number", "connect.type": "float32"}
    if pa.types.is_float64(t):
        return {"type": "number"}
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return {"type": "string"}
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or \
            pa.types.is_fixed_size_binary(t):
        return {"type": "string", "contentEncoding": "base64"}
    if pa.types.is_date(t):
        return {"type": "string", "format": "date"}
    if pa.types.is_timestamp(t):
        return {"type": "string", "format": "date-time"}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return {"type": "array",
                "items": _field_schema(t.value_type, t.value_field.nullable, f"{where}[]")}
    if pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise InvalidInputError(f"{where} is a map with {t.key_type} keys; a JSON "
                                    f"object's keys are strings")
        return {"type": "object", "additionalProperties": _field_schema(
            t.item_type, t.item_field.nullable, f"{where}{{}}")}
    if pa.types.is_struct(t):
        if t.num_fields == 0:
            raise InvalidInputError(f"{where} is a struct without fields, which a JSON "
                                    f"Schema reader takes for schema-less JSON text")
        schema: Dict[str, Any] = {"type": "object", "properties": {
            f.name: _field_schema(f.type, f.nullable, f"{where}.{f.name}") for f in t}}
        required = [f.name for f in t if not f.nullable]
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        return schema
    if pa.types.is_decimal(t):
        raise InvalidInputError(
            f"{where} has type {t}: JSON Schema has no decimal type a reader gives back "
            f"(a number reads as a double); cast it to double or to string")
    raise InvalidInputError(
        f"{where} has type {t}, which has no JSON Schema type (boolean, integers, floats, "
        f"string, binary, date, timestamp, array, map with string keys and struct have)")


def _field_schema(t: pa.DataType, nullable: bool, where: str) -> Dict[str, Any]:
    schema = _derived(t, where)
    return {"oneOf": [{"type": "null"}, schema]} if nullable else schema


def derive_object_schema(struct: pa.DataType, title: Optional[str], column: str) -> str:
    """The JSON Schema text of a struct column, titled `title` (None: topLevelRecord)."""
    if not pa.types.is_struct(struct):
        raise InvalidInputError(f"column {column!r} has type {struct}; a JSON Schema "
                                f"framed write needs a struct there")
    body = _derived(struct, f"column {column!r}")
    return canonical_text({"title": title or DEFAULT_TITLE, **body})


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


def _enum_key(value):
    """A JSON value as JSON Schema compares enum members (1 == 1.0, true != 1)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, (int, float, Decimal)):
        return ("number", Decimal(str(value)).normalize() if not isinstance(value, Decimal)
                else value.normalize())
    if isinstance(value, str):
        return ("string", value)
    return ("json", json.dumps(value, sort_keys=True, default=str))


_OBJECT_KEYWORDS = ("properties", "additionalProperties", "required", "patternProperties",
                    "minProperties", "maxProperties", "dependencies", "propertyNames",
                    "unevaluatedProperties", "dependentRequired", "dependentSchemas")
_ARRAY_KEYWORDS = ("items", "additionalItems", "minItems", "maxItems", "uniqueItems",
                   "contains", "prefixItems", "minContains", "maxContains",
                   "unevaluatedItems")


def _implied_type(schema: dict) -> Optional[str]:
    if any(k in schema for k in ("properties", "additionalProperties", "required")):
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    return None


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


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
            if not isinstance(ref, str) or not ref.startswith("#"):
                raise _SchemaProblem(pointer, f"refers to {ref!r}: only references within "
                                              f"the schema (#/...) are written")
            target = self.root
            for token in ref[1:].split("/")[1:] if ref != "#" else []:
                token = token.replace("~1", "/").replace("~0", "~")
                if isinstance(target, dict) and token in target:
                    target = target[token]
                elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                    target = target[int(token)]
                else:
                    raise _SchemaProblem(pointer, f"refers to {ref!r}, which does not exist")
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
        kind = schema.get("type", _implied_type(schema))
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
                    part.get("type") == "object" or _implied_type(part) == "object"
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
            keys = {_enum_key(v) for v in allowed}

            def member(value):
                value = value if base is None else base(value)
                if _enum_key(value) in keys:
                    return value
                raise _Misfit(f"{json.dumps(value, default=str)[:40]} is not among the "
                              f"schema's enum {json.dumps(allowed, default=str)[:80]}")
            return member
        kind = schema.get("type", _implied_type(schema))
        if kind is None:
            return self.natural(t, pointer, where)
        if not isinstance(kind, str) or kind not in _JSON_TYPES:
            raise _SchemaProblem(pointer, f"has type {kind!r}; JSON Schema's types are "
                                          f"{', '.join(_JSON_TYPES)}")
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
                    f.type, properties[f.name], f"{pointer}/properties/{_escape(f.name)}",
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
                                    f"{pointer}/properties/{_escape(name)}", f"{where}{{}}")
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
    return any(isinstance(part, dict) and (part.get("type", _implied_type(part)) == "object")
               for part, _ in alternatives)


_ENCODERS: Dict[Tuple[str, pa.DataType], Callable[[Any], Any]] = {}


def _column_converter(text: str, column_type: pa.DataType) -> Callable[[Any], Any]:
    key = (text, column_type)
    found = _ENCODERS.get(key)
    if found is None:
        root = parse_schema_text(text)
        encoder = _Encoder(root)
        converter, _ = encoder.convert(column_type, root, "#", "")
        found = converter if converter is not None else (lambda value: value)
        if len(_ENCODERS) > 64:
            _ENCODERS.clear()
        _ENCODERS[key] = found
    return found


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


# -- compatibility (Schema Registry's JSON Schema diff) ---------------------------------

# The differences the registry counts as compatible (its STRICT policy, the default).
COMPATIBLE_CHANGES = frozenset({
    "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED",
    "SCHEMA_REMOVED", "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED",
    "MIN_LENGTH_REMOVED", "PATTERN_REMOVED",
    "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED",
    "EXCLUSIVE_MAXIMUM_INCREASED", "EXCLUSIVE_MAXIMUM_REMOVED",
    "EXCLUSIVE_MINIMUM_DECREASED", "EXCLUSIVE_MINIMUM_REMOVED",
    "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED",
    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED",
    "DEPENDENCY_ARRAY_NARROWED", "DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_SCHEMA_REMOVED",
    "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED",
    "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED",
    "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED", "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED",
    "MAX_CONTAINS_INCREASED", "MAX_CONTAINS_REMOVED", "MIN_CONTAINS_DECREASED",
    "MIN_CONTAINS_REMOVED",
    "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED", "ADDITIONAL_ITEMS_EXTENDED",
    "UNEVALUATED_PROPERTIES_ADDED", "UNEVALUATED_PROPERTIES_EXTENDED",
    "UNEVALUATED_ITEMS_ADDED", "UNEVALUATED_ITEMS_EXTENDED",
    "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ENUM_ARRAY_EXTENDED",
    "COMBINED_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED",
    "NOT_TYPE_NARROWED",
})

_EXPLAINED = {
    "TYPE_CHANGED": "the type changed",
    "TYPE_NARROWED": "number narrowed to integer",
    "SCHEMA_ADDED": "a schema added where any value was allowed",
    "REQUIRED_ATTRIBUTE_ADDED": "the property became required, without a default",
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
        "a required property without a default added",
    "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL":
        "a required property without a default added to an open content model",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL":
        "a property added to an open content model (the earlier schema allowed any "
        "additional property, so its data may hold this one with another type)",
    "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL":
        "a property added to an open content model (the earlier schema allowed any "
        "additional property, so its data may hold this one with another type)",
    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL":
        "a property removed from a closed content model (additionalProperties false), "
        "so data that holds it no longer fits",
    "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL":
        "a property added that the earlier additionalProperties schema does not cover",
    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL":
        "a property removed that the new additionalProperties schema does not cover",
    "ADDITIONAL_PROPERTIES_REMOVED": "additional properties no longer allowed",
    "ADDITIONAL_PROPERTIES_NARROWED": "additional properties narrowed to a schema",
    "ENUM_ARRAY_NARROWED": "enum values removed",
    "ENUM_ARRAY_CHANGED": "enum values changed",
    "SUM_TYPE_NARROWED": "alternatives removed from the union",
    "PRODUCT_TYPE_EXTENDED": "schemas added to allOf",
    "COMBINED_TYPE_CHANGED": "the kind of combination (oneOf/anyOf/allOf) changed",
    "COMBINED_TYPE_SUBSCHEMAS_CHANGED": "the union's alternatives changed incompatibly",
    "ADDITIONAL_ITEMS_REMOVED": "additional items no longer allowed",
    "ADDITIONAL_ITEMS_NARROWED": "additional items narrowed to a schema",
    "UNIQUE_ITEMS_ADDED": "uniqueItems added",
    "PATTERN_ADDED": "a pattern added", "PATTERN_CHANGED": "the pattern changed",
}

_ANNOTATIONS = ("title", "description", "default", "$id", "id", "$schema", "examples",
                "$comment", "definitions", "$defs", "readOnly", "writeOnly", "format",
                "contentEncoding", "contentMediaType")
_COMBINERS = ("allOf", "anyOf", "oneOf")
_KEYWORDS_OF = {
    "object": _OBJECT_KEYWORDS, "array": _ARRAY_KEYWORDS,
    "string": ("minLength", "maxLength", "pattern"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}


class _Document:
    """One side's schema document: resolves its local $refs and classifies its parts as
    the registry's schema loader does (which Schema class each would be)."""

    def __init__(self, root):
        self.root = root

    def resolve(self, schema):
        for _ in range(64):
            if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)
                    and schema["$ref"].startswith("#")):
                return schema
            target = self.root
            for token in schema["$ref"][1:].split("/")[1:]:
                token = token.replace("~1", "/").replace("~0", "~")
                if isinstance(target, dict) and token in target:
                    target = target[token]
                elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                    target = target[int(token)]
                else:
                    return {}  # an unresolvable $ref: the registry would refuse the schema
            schema = target
        return schema

    @staticmethod
    def parts(schema) -> List[Any]:
        """The loader's parts of a schema object; several make an allOf."""
        parts = []
        kind = schema.get("type")
        if isinstance(kind, list):
            parts.append({"anyOf": [{**_only(schema, kind_), "type": kind_}
                                    for kind_ in kind]})
        elif isinstance(kind, str):
            parts.append({**_only(schema, kind), "type": kind})
        else:
            for implied, keywords in _KEYWORDS_OF.items():
                if any(k in schema for k in keywords):
                    parts.append({**_only(schema, implied), "type": implied})
        for keyword in ("enum", "const", "not") + _COMBINERS:
            if keyword in schema:
                parts.append({keyword: schema[keyword]})
        return parts

    def kind(self, schema) -> Tuple[str, Any]:
        """(kind, the schema of that kind): empty, false, null, boolean, string, number,
        object, array, enum, const, not, combined."""
        schema = self.resolve(schema)
        if schema is True:
            return "empty", {}
        if schema is False:
            return "false", False
        if not isinstance(schema, dict):
            return "empty", {}
        parts = self.parts(schema)
        if not parts:
            return "empty", schema
        if len(parts) > 1:
            return "combined", {"allOf": parts, **{k: schema[k] for k in _ANNOTATIONS
                                                   if k in schema}}
        part = parts[0]
        if any(keyword in part for keyword in _COMBINERS):
            return "combined", {**{k: schema[k] for k in _ANNOTATIONS if k in schema}, **part}
        if "enum" in part:
            return "enum", schema
        if "const" in part:
            return "const", schema
        if "not" in part:
            return "not", schema
        kind = part["type"]
        if kind in ("integer", "number"):
            return "number", {**schema, **part}
        return kind, {**schema, **part}


def _only(schema: dict, kind: str) -> dict:
    """A schema's keywords that belong to one type (and its annotations)."""
    keep = _KEYWORDS_OF.get("number" if kind == "integer" else kind, ())
    return {k: v for k, v in schema.items()
            if k in keep or k in _ANNOTATIONS or k.startswith("connect.")}


def _criterion(schema: dict) -> str:
    return next(k for k in _COMBINERS if k in schema)


def _open(schema: dict) -> bool:
    """A fully open content model: any additional property, of any value."""
    additional = schema.get("additionalProperties", True)
    uneval = schema.get("unevaluatedProperties", True)
    return additional is True and not schema.get("patternProperties") and \
        (uneval is True or uneval == {})


def _partial(schema: dict, name: str):
    """The schema a partially open content model gives a property it does not name."""
    for pattern, part in (schema.get("patternProperties") or {}).items():
        try:
            if re.search(pattern, name):
                return part
        except re.error:
            continue
    additional = schema.get("additionalProperties", True)
    if isinstance(additional, dict):
        return additional
    uneval = schema.get("unevaluatedProperties")
    if additional is True and isinstance(uneval, dict) and uneval:
        return uneval
    return None


def _field_path(pointer: str) -> str:
    """The dotted field path of a pointer into a schema (#/properties/a/items -> a[])."""
    parts = pointer.lstrip("#").split("/")[1:]
    out, index = "", 0
    while index < len(parts):
        part = parts[index]
        if part in ("properties", "required") and index + 1 < len(parts):
            name = parts[index + 1].replace("~1", "/").replace("~0", "~")
            out += f".{name}" if out else name
            index += 2
            continue
        if part == "items":
            out += "[]"
        elif part == "additionalProperties":
            out += "{}"
        index += 1
    return out


class _Diff:
    """Schema Registry's JSON Schema diff of an original and an update: the differences,
    each (rule, pointer)."""

    def __init__(self, original, update):
        self.old, self.new = _Document(original), _Document(update)
        self.active = set()

    def incompatible(self) -> Optional[Tuple[str, str, str]]:
        for rule, pointer, detail in self.compare(self.old.root, self.new.root, "#"):
            if rule not in COMPATIBLE_CHANGES:
                return rule, pointer, detail
        return None

    def compatible(self, old, new, pointer) -> Tuple[bool, list]:
        found = self.compare(old, new, pointer)
        return all(rule in COMPATIBLE_CHANGES for rule, _, _ in found), found

    def compare(self, old, new, pointer) -> List[Tuple[str, str, str]]:
        if old is None and new is None:
            return []
        if old is None:
            return [("SCHEMA_ADDED", pointer, "")]
        if new is None:
            return [("SCHEMA_REMOVED", pointer, "")]
        old, new = self.old.resolve(old), self.new.resolve(new)
        key = (id(old), id(new))
        if key in self.active:  # a recursive schema: taken as compatible where it recurs
            return []
        old_kind, old_schema = self.old.kind(old)
        new_kind, new_schema = self.new.kind(new)
        self.active.add(key)
        try:
            return self.compare_kinds(old_kind, old_schema, new_kind, new_schema, pointer)
        finally:
            self.active.discard(key)

    def compare_kinds(self, old_kind, old, new_kind, new, pointer):
        if old_kind != "combined" and new_kind == "combined":
            members = new[_criterion(new)]
            if len(members) == 1:
                ok, found = self.compatible(old, members[0], pointer)
                if ok:
                    return found
            elif _criterion(new) in ("anyOf", "oneOf"):
                for member in members:
                    ok, found = self.compatible(old, member, pointer)
                    if ok:
                        return found + [("SUM_TYPE_EXTENDED", pointer, "")]
        elif old_kind == "combined" and new_kind != "combined":
            members = old[_criterion(old)]
            if len(members) == 1:
                ok, found = self.compatible(members[0], new, pointer)
                if ok:
                    return found
            elif _criterion(old) == "allOf":
                for member in members:
                    ok, found = self.compatible(member, new, pointer)
                    if ok:
                        return found + [("PRODUCT_TYPE_NARROWED", pointer, "")]
        if old_kind != new_kind:
            if old_kind == "false" or new_kind == "empty":
                return []
            if isinstance(old, dict) and isinstance(new, dict) and \
                    old.get("connect.type") == "bytes" == new.get("connect.type"):
                return []
            return [("TYPE_CHANGED", pointer, f"from {_kind_name(old_kind, old)} to "
                                              f"{_kind_name(new_kind, new)}")]
        found = []
        for keyword, rule in (("$id", "ID_CHANGED"), ("title", "TITLE_CHANGED"),
                              ("description", "DESCRIPTION_CHANGED"),
                              ("default", "DEFAULT_CHANGED")):
            if isinstance(old, dict) and isinstance(new, dict) and \
                    old.get(keyword) != new.get(keyword):
                found.append((rule, pointer, ""))
        compare = getattr(self, f"compare_{old_kind}", None)
        if compare is not None:
            found += compare(old, new, pointer)
        return found

    @staticmethod
    def bound(found, pointer, keyword, old, new, larger_rule, smaller_rule):
        """maxLength, minimum, ...: <KEYWORD>_ADDED / _REMOVED / larger / smaller."""
        a, b = old.get(keyword), new.get(keyword)
        if a == b:
            return
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", keyword).upper()
        if a is None:
            found.append((f"{name}_ADDED", f"{pointer}/{keyword}", ""))
        elif b is None:
            found.append((f"{name}_REMOVED", f"{pointer}/{keyword}", ""))
        elif isinstance(a, (int, float, Decimal)) and isinstance(b, (int, float, Decimal)):
            found.append((f"{name}_{larger_rule if a < b else smaller_rule}",
                          f"{pointer}/{keyword}", f"{a} to {b}"))

    def compare_string(self, old, new, pointer):
        found = []
        self.bound(found, pointer, "maxLength", old, new, "INCREASED", "DECREASED")
        self.bound(found, pointer, "minLength", old, new, "INCREASED", "DECREASED")
        a, b = old.get("pattern"), new.get("pattern")
        if a is None and b is not None:
            found.append(("PATTERN_ADDED", f"{pointer}/pattern", ""))
        elif a is not None and b is None:
            found.append(("PATTERN_REMOVED", f"{pointer}/pattern", ""))
        elif a != b:
            found.append(("PATTERN_CHANGED", f"{pointer}/pattern", ""))
        return found

    def compare_number(self, old, new, pointer):
        found = []
        for keyword in ("maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum"):
            self.bound(found, pointer, keyword, old, new, "INCREASED", "DECREASED")
        a, b = old.get("multipleOf"), new.get("multipleOf")
        if a is not None or b is not None:
            a = None if a is None else Decimal(str(a))
            b = None if b is None else Decimal(str(b))
            if a is None:
                found.append(("MULTIPLE_OF_ADDED", f"{pointer}/multipleOf", ""))
            elif b is None:
                found.append(("MULTIPLE_OF_REMOVED", f"{pointer}/multipleOf", ""))
            elif a != b:
                rule = "MULTIPLE_OF_EXPANDED" if a and b % a == 0 else \
                    "MULTIPLE_OF_REDUCED" if b and a % b == 0 else "MULTIPLE_OF_CHANGED"
                found.append((rule, f"{pointer}/multipleOf", f"{a} to {b}"))
        old_integer, new_integer = old.get("type") == "integer", new.get("type") == "integer"
        if old_integer and not new_integer:
            found.append(("TYPE_EXTENDED", pointer, "integer to number"))
        elif new_integer and not old_integer:
            found.append(("TYPE_NARROWED", pointer, "number to integer"))
        return found

    def compare_enum(self, old, new, pointer):
        a = {_enum_key(v) for v in old["enum"]} if isinstance(old["enum"], list) else set()
        b = {_enum_key(v) for v in new["enum"]} if isinstance(new["enum"], list) else set()
        if a == b:
            return []
        rule = "ENUM_ARRAY_EXTENDED" if b >= a else "ENUM_ARRAY_NARROWED" if a >= b \
            else "ENUM_ARRAY_CHANGED"
        lost = [v for v in old["enum"] if _enum_key(v) not in b]
        return [(rule, f"{pointer}/enum", f"values {json.dumps(lost, default=str)} no longer "
                                          f"allowed" if lost else "")]

    def compare_const(self, old, new, pointer):
        if _enum_key(old["const"]) != _enum_key(new["const"]):
            return [("ENUM_ARRAY_CHANGED", f"{pointer}/const", "")]
        return []

    def compare_not(self, old, new, pointer):
        # the negated schemas compared the other way round
        ok, _ = self.compatible(new["not"], old["not"], f"{pointer}/not")
        if ok:
            return [("NOT_TYPE_NARROWED", f"{pointer}/not", "")]
        ok, _ = self.compatible(old["not"], new["not"], f"{pointer}/not")
        return [("NOT_TYPE_EXTENDED", f"{pointer}/not", "")] if ok else \
            [("TYPE_CHANGED", f"{pointer}/not", "the negated schema changed")]

    def compare_combined(self, old, new, pointer):
        found = []
        a_criterion, b_criterion = _criterion(old), _criterion(new)
        a = _unique(old[a_criterion])
        b = _unique(new[b_criterion])
        if a_criterion != b_criterion:
            if b_criterion == "anyOf" or (len(a) == 1 and len(b) == 1) or \
                    (len(a) == 1 and b_criterion == "oneOf") or \
                    (len(b) == 1 and a_criterion == "allOf"):
                found.append(("COMBINED_TYPE_EXTENDED", pointer, ""))
            else:
                return [("COMBINED_TYPE_CHANGED", pointer, f"{a_criterion} to {b_criterion}")]
        if len(a) < len(b):
            found.append(("PRODUCT_TYPE_EXTENDED" if b_criterion == "allOf"
                          else "SUM_TYPE_EXTENDED", pointer, ""))
        elif len(a) > len(b):
            found.append(("SUM_TYPE_NARROWED" if a_criterion in ("anyOf", "oneOf")
                          else "PRODUCT_TYPE_NARROWED", pointer, ""))
        edges: Dict[int, Dict[int, list]] = {}
        problems: Dict[Tuple[int, int], tuple] = {}
        for i, member in enumerate(a):
            where = f"{pointer}/{a_criterion}/{i}"
            for j, other in enumerate(b):
                ok, differences = self.compatible(member, other, where)
                if ok:
                    edges.setdefault(i, {})[j] = differences
                else:
                    problems[i, j] = next(d for d in differences
                                          if d[0] not in COMPATIBLE_CHANGES)
        matched = _maximum_matching(edges, len(a))
        for i, j in matched.items():
            found += edges[i][j]
        if len(matched) < min(len(a), len(b)):
            unmatched = [i for i in range(len(a)) if i not in matched]
            # the nearest failure: an unmatched original against the new alternative of
            # its own kind, for the reason's sake
            detail = ""
            free = [j for j in range(len(b)) if j not in matched.values()]
            for i in unmatched:
                same = [j for j in free if (i, j) in problems and
                        self.old.kind(a[i])[0] == self.new.kind(b[j])[0]]
                candidates = same or [j for j in free if (i, j) in problems]
                if candidates:
                    rule, where, more = problems[i, candidates[0]]
                    detail = f"{where}: {rule}" + (f" ({more})" if more else "")
                    break
            found.append(("COMBINED_TYPE_SUBSCHEMAS_CHANGED", pointer, detail))
        return found

    def compare_object(self, old, new, pointer):
        found = []
        old_properties = old.get("properties") or {}
        new_properties = new.get("properties") or {}
        old_required = set(old.get("required") or ())
        new_required = set(new.get("required") or ())
        for name in old_properties:
            if name in new_properties:
                where = f"{pointer}/required/{_escape(name)}"
                if name in old_required and name not in new_required:
                    found.append(("REQUIRED_ATTRIBUTE_REMOVED", where, ""))
                elif name not in old_required and name in new_required:
                    found.append(("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                                  if _has_default(self.new.resolve(new_properties[name]))
                                  else "REQUIRED_ATTRIBUTE_ADDED", where, ""))
        names = list(old_properties) + [n for n in new_properties if n not in old_properties]
        for name in names:
            where = f"{pointer}/properties/{_escape(name)}"
            before, after = old_properties.get(name), new_properties.get(name)
            if after is None:
                found += self.property_removed(before, new, name, where)
            elif before is None:
                found += self.property_added(after, old, new, name, new_required, where)
            else:
                found += self.compare(before, after, where)
        found += self.compare_dependencies(old, new, pointer)
        found += self.compare_additional(old, new, pointer)
        for keyword in ("maxProperties", "minProperties"):
            self.bound(found, pointer, keyword, old, new, "INCREASED", "DECREASED")
        return found

    def property_removed(self, before, new, name, where):
        if _open(new):
            return [("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", where, "")]
        covering = _partial(new, name)
        if covering is not None:
            ok, found = self.compatible(before, covering, where)
            return found + [("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                             if ok else
                             "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                             where, "")]
        if self.old.resolve(before) is False:
            return [("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", where, "")]
        return [("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where, "")]

    def property_added(self, after, old, new, name, new_required, where):
        resolved = self.new.resolve(after)
        if _open(old):
            if resolved is True or resolved == {}:
                return [("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", where, "")]
            if name in new_required:
                return [("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"
                         if _has_default(resolved) else
                         "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where, "")]
            return [("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where, "")]
        found = []
        covering = _partial(old, name)
        if covering is not None:
            ok, differences = self.compatible(covering, after, where)
            found += differences + [
                ("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if ok else
                 "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where, "")]
        if name in new_required:
            found.append(("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                          if _has_default(resolved) else
                          "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where, ""))
        else:
            found.append(("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where, ""))
        return found

    def compare_additional(self, old, new, pointer):
        where = f"{pointer}/additionalProperties"
        a, b = old.get("additionalProperties", True), new.get("additionalProperties", True)
        a_permits, b_permits = a is not False, b is not False
        a_schema = a if isinstance(a, dict) else None
        b_schema = b if isinstance(b, dict) else None
        if a_permits != b_permits:
            return [("ADDITIONAL_PROPERTIES_ADDED" if b_permits
                     else "ADDITIONAL_PROPERTIES_REMOVED", where, "")]
        if a_schema is None and b_schema is not None:
            return [("ADDITIONAL_PROPERTIES_NARROWED", where, "")]
        if b_schema is None and a_schema is not None:
            return [("ADDITIONAL_PROPERTIES_EXTENDED", where, "")]
        return self.compare(a_schema, b_schema, where)

    def compare_array(self, old, new, pointer):
        found = []
        old_tuple, old_all, old_more = _array_parts(old)
        new_tuple, new_all, new_more = _array_parts(new)
        found += self.compare(old_all, new_all, f"{pointer}/items")
        found += self.compare_tuples(old_tuple, old_more, new_tuple, new_more, old, new,
                                     pointer)
        where = f"{pointer}/additionalItems"
        if (old_more is not False) != (new_more is not False):
            found.append(("ADDITIONAL_ITEMS_ADDED" if new_more is not False
                          else "ADDITIONAL_ITEMS_REMOVED", where, ""))
        elif not isinstance(old_more, dict) and isinstance(new_more, dict):
            found.append(("ADDITIONAL_ITEMS_NARROWED", where, ""))
        elif isinstance(old_more, dict) and not isinstance(new_more, dict):
            found.append(("ADDITIONAL_ITEMS_EXTENDED", where, ""))
        elif isinstance(old_more, dict):
            found += self.compare(old_more, new_more, where)
        for keyword in ("maxItems", "minItems"):
            self.bound(found, pointer, keyword, old, new, "INCREASED", "DECREASED")
        if bool(old.get("uniqueItems")) != bool(new.get("uniqueItems")):
            found.append(("UNIQUE_ITEMS_REMOVED" if old.get("uniqueItems")
                          else "UNIQUE_ITEMS_ADDED", f"{pointer}/uniqueItems", ""))
        for keyword in ("maxContains", "minContains"):
            self.bound(found, pointer, keyword, old, new, "INCREASED", "DECREASED")
        return found

    def compare_tuples(self, old_tuple, old_more, new_tuple, new_more, old, new, pointer):
        """Tuple items position by position; the extra positions of either side against
        the other side's content model (as properties are against an object's)."""
        found = []
        for index in range(max(len(old_tuple), len(new_tuple))):
            where = f"{pointer}/items/{index}"
            if index < len(old_tuple) and index < len(new_tuple):
                found += self.compare(old_tuple[index], new_tuple[index], where)
            elif index < len(old_tuple):  # an item removed
                before = old_tuple[index]
                covering = _partial_items(new, new_more)
                if _open_items(new, new_more):
                    found.append(("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", where, ""))
                elif covering is not None:
                    ok, differences = self.compatible(before, covering, where)
                    found += differences + [(
                        "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if ok else
                        "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where, "")]
                elif self.old.resolve(before) is False:
                    found.append(("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", where,
                                  ""))
                else:
                    found.append(("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", where, ""))
            else:  # an item added
                after = new_tuple[index]
                covering = _partial_items(old, old_more)
                if _open_items(old, old_more):
                    resolved = self.new.resolve(after)
                    found.append(("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                                  if resolved is True or resolved == {} else
                                  "ITEM_ADDED_TO_OPEN_CONTENT_MODEL", where, ""))
                elif covering is not None:
                    ok, differences = self.compatible(covering, after, where)
                    found += differences + [(
                        "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if ok else
                        "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where, "")]
                else:
                    found.append(("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", where, ""))
        return found

    def compare_dependencies(self, old, new, pointer):
        found = []
        a, b = _dependencies(old), _dependencies(new)
        for name in list(a) + [n for n in b if n not in a]:
            where = f"{pointer}/dependencies/{_escape(name)}"
            before, after = a.get(name), b.get(name)
            if isinstance(before, list) or isinstance(after, list):  # property dependencies
                if not isinstance(after, list):
                    found.append(("DEPENDENCY_ARRAY_REMOVED", where, ""))
                elif not isinstance(before, list):
                    found.append(("DEPENDENCY_ARRAY_ADDED", where, ""))
                elif set(before) != set(after):
                    found.append(("DEPENDENCY_ARRAY_EXTENDED" if set(after) >= set(before)
                                  else "DEPENDENCY_ARRAY_NARROWED"
                                  if set(before) >= set(after)
                                  else "DEPENDENCY_ARRAY_CHANGED", where, ""))
            elif after is None:
                found.append(("DEPENDENCY_SCHEMA_REMOVED", where, ""))
            elif before is None:
                found.append(("DEPENDENCY_SCHEMA_ADDED", where, ""))
            else:
                found += self.compare(before, after, where)
        return found


def _dependencies(schema: dict) -> dict:
    """Property and schema dependencies, in draft 7's and 2019-09's spellings."""
    found = {}
    for keyword in ("dependencies", "dependentRequired", "dependentSchemas"):
        if isinstance(schema.get(keyword), dict):
            found.update(schema[keyword])
    return found


def _array_parts(schema: dict):
    """(tuple item schemas, the schema of every item or None, the schema or boolean of
    items past the tuple) of an array schema, in draft 7's and 2020-12's spellings."""
    if "prefixItems" in schema:
        items = schema.get("items", True)
        return list(schema["prefixItems"] or []), None, items
    items = schema.get("items")
    if isinstance(items, list):
        return items, None, schema.get("additionalItems", True)
    return [], None if items is None or items is True else items, \
        schema.get("additionalItems", True)


def _open_items(schema: dict, more) -> bool:
    uneval = schema.get("unevaluatedItems", True)
    return more is True and (uneval is True or uneval == {})


def _partial_items(schema: dict, more):
    if isinstance(more, dict):
        return more
    uneval = schema.get("unevaluatedItems")
    if more is True and isinstance(uneval, dict) and uneval:
        return uneval
    return None


def _has_default(schema) -> bool:
    return isinstance(schema, dict) and "default" in schema


def _unique(members) -> list:
    """A combination's members, duplicates (the same canonical text) once."""
    seen, out = set(), []
    for member in members if isinstance(members, list) else []:
        text = canonical_text(member)
        if text not in seen:
            seen.add(text)
            out.append(member)
    return out


def _maximum_matching(edges: Dict[int, Dict[int, list]], count: int) -> Dict[int, int]:
    """A maximum matching of a bipartite graph (augmenting paths): original -> update."""
    owner: Dict[int, int] = {}

    def augment(i, seen):
        for j in edges.get(i, {}):
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(count):
        augment(i, set())
    return {i: j for j, i in owner.items()}


def _kind_name(kind: str, schema) -> str:
    if kind == "number" and isinstance(schema, dict):
        return schema.get("type", "number")
    if kind == "combined" and isinstance(schema, dict):
        return _criterion(schema)
    return {"empty": "any value", "false": "no value"}.get(kind, kind)


def first_incompatibility(original_text: str, update_text: str) -> Optional[str]:
    """Where and why the update is not compatible with the original by the registry's
    JSON Schema diff (the first incompatible difference found), or None."""
    found = _Diff(parse_schema_text(original_text),
                  parse_schema_text(update_text)).incompatible()
    if found is None:
        return None
    rule, pointer, detail = found
    explained = _EXPLAINED.get(rule, rule.lower().replace("_", " "))
    if detail:
        explained += f": {detail}"
    # a rule about the keyword itself is the object's (the pointer ends in the keyword)
    keyword_rule = rule.startswith(("ADDITIONAL_PROPERTIES_", "ADDITIONAL_ITEMS_"))
    field = _field_path(pointer.rpartition("/")[0] if keyword_rule else pointer)
    where = f"field {field} ({pointer})" if field else pointer
    return f"{where}: {rule}, {explained}"


def compatibility_problem(level: str, new_text: str, previous: List[Tuple[int, str]]
                          ) -> Optional[Tuple[int, str]]:
    """(version, reason) of the first earlier version `new_text` is incompatible with at
    `level`; None when compatible. `previous`: (version, text) oldest first; the
    non-transitive levels check the latest, the transitive ones all, newest first."""
    level = level.upper()
    if level not in COMPATIBILITY_LEVELS:
        raise InvalidOptionError(f"compatibility level {level!r} is not one Schema Registry "
                                 f"has ({', '.join(COMPATIBILITY_LEVELS)})")
    if level == "NONE" or not previous:
        return None
    against = list(reversed(previous)) if level.endswith("_TRANSITIVE") else [previous[-1]]
    for version, text in against:
        try:
            parse_schema_text(text)
        except ValueError as exc:
            return version, f"its schema is not JSON ({exc}), so nothing can be checked " \
                            f"against it"
        if level.startswith(("BACKWARD", "FULL")):
            problem = first_incompatibility(text, new_text)
            if problem is not None:
                return version, f"the new schema cannot read data written with it: {problem}"
        if level.startswith(("FORWARD", "FULL")):
            problem = first_incompatibility(new_text, text)
            if problem is not None:
                return version, f"it cannot read data written with the new schema: {problem}"
    return None


# -- the language ---------------------------------------------------------------------

def _title_text(value) -> Optional[str]:
    """A title as Jackson's asText gives it (the registry's JsonSchema.name())."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        return _number_text(value)
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
        ca, cb = _canonical_or_none(a), _canonical_or_none(b)
        return ca is not None and ca == cb

    def compatibility_problem(self, level: str, new_text: str,
                              previous: List[Tuple[int, str]]) -> Optional[Tuple[int, str]]:
        return compatibility_problem(level, new_text, previous)

    def record_name(self, text: str) -> Optional[str]:
        """The schema's `title` (None without one: RecordNameStrategy then has no name)."""
        schema = parse_schema_text(text)
        if isinstance(schema, dict) and "title" in schema:
            return _title_text(schema["title"])
        return None

    def encode_payloads(self, column: pa.Array, text: str) -> List[Optional[bytes]]:
        return encode_values(column, text)
