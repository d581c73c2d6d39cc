"""JSON Schema, the language's facts (this module) and Schema Registry's compatibility of
its versions (compatibility.py): a schema's text as the registry's Jackson
reads it and the canonical text it stores; JSON pointers, and `$ref`s followed within a
document, one way for reading, writing and compatibility alike (a pointer's tokens
percent-decoded, as a URI fragment is, then unescaped: `#/definitions/a%20b` names
"a b"); the schema a framed write derives from a column's type. The columns a schema
reads as: mapping.py; the registry's compatibility of versions: compatibility.py.
"""
import json
import re
from decimal import Decimal
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import unquote

import pyarrow as pa

from ...errors import InvalidInputError


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


def number_text(value) -> str:
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
        return number_text(schema)
    if isinstance(schema, list):
        return "[" + ",".join(canonical_text(item) for item in schema) + "]"
    return "{" + ",".join(f"{_string_text(key)}:{canonical_text(value)}"
                          for key, value in schema.items()) + "}"


def canonical_or_none(text) -> Optional[str]:
    try:
        return canonical_text(parse_schema_text(text))
    except (ValueError, TypeError):
        return None


def enum_key(value):
    """A JSON value as JSON Schema compares enum members (1 == 1.0, true != 1)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, (int, float, Decimal)):
        return ("number", Decimal(str(value)).normalize() if not isinstance(value, Decimal)
                else value.normalize())
    if isinstance(value, str):
        return ("string", value)
    return ("json", json.dumps(value, sort_keys=True, default=str))


def pointer_token(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def pointer_tokens(fragment: str) -> List[str]:
    """The reference tokens of a JSON pointer given as a URI fragment (the part after
    '#'): each percent-decoded, then '~1' and '~0' unescaped (RFC 6901 in a URI)."""
    if fragment == "":
        return []
    if not fragment.startswith("/"):
        raise ValueError(f"#{fragment} is no JSON pointer (an anchor)")
    return [unquote(token).replace("~1", "/").replace("~0", "~")
            for token in fragment.split("/")[1:]]


def split_ref(ref: str) -> Tuple[str, str]:
    """A `$ref` as (the document it names, "" for this one; the fragment after '#')."""
    base, _, fragment = ref.partition("#")
    return base, fragment


def follow_pointer(root: Any, fragment: str) -> Any:
    """The part of `root` the JSON pointer `fragment` names; LookupError when there is
    none (ValueError for an anchor, which is no pointer)."""
    target = root
    for token in pointer_tokens(fragment):
        if isinstance(target, dict) and token in target:
            target = target[token]
        elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
            target = target[int(token)]
        else:
            raise LookupError(token)
    return target


def local_target(root: Any, ref: Any) -> Optional[Any]:
    """What a `$ref` within the document names (None when it names another document, or
    nothing). `root`'s own `$id` followed by a fragment counts as within the document."""
    if not isinstance(ref, str):
        return None
    base, fragment = split_ref(ref)
    if base and not (isinstance(root, dict) and base == root.get("$id")):
        return None
    try:
        return follow_pointer(root, fragment)
    except (LookupError, ValueError):
        return None


DEFAULT_TITLE = "topLevelRecord"  # a derived schema's title, as spark-avro's record name
CONNECT_DATE = "org.apache.kafka.connect.data.Date"  # Connect's logical types, by title
CONNECT_TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
JSON_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")


def implied_type(schema: dict) -> Optional[str]:
    """The type a schema without `type` constrains its values to, by its keywords."""
    if "properties" in schema or "additionalProperties" in schema or "required" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    return None


# -- the schema of a Spark (Arrow) type, as a framed write derives it -------------------

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
