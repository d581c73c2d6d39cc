"""JSON Schema's mapping to Spark (Arrow) columns, as valueFormat=json reads a subject's
latest schema: a Node per part of the schema (its Arrow type, whether null fits, what
turns a JSON value into what the type holds, and what the compiled decoder's program
mirrors), built by Mapper; and which writer schemas a column reads (resolution_problem).
The rules are decode/json_schema.py's docstring's. The other direction, the schema a
write derives from a column's type, is beside it in __init__.py.
"""
import datetime as dt
import json
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import pyarrow as pa

from ...errors import UnsupportedFormatError
from . import (
    CONNECT_DATE, CONNECT_TIMESTAMP, JSON_TYPES, follow_pointer, implied_type, pointer_token,
    split_ref,
)

KINDS = ("string", "boolean", "integer", "number", "date", "timestamp", "base64",
         "connect_days", "connect_millis", "text", "enum", "array", "object", "map", "union")


class Misfit(Exception):
    """A value that does not fit its column (caught per row; never escapes the module)."""

    def __init__(self, path: str, reason: str):
        self.reason = reason
        super().__init__(f"field {path or '<value>'}: {reason}")


def describe_value(value) -> str:
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, list):
        return f"an array of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return "null"


NO_DEFAULT = object()


@dataclass
class Node:
    """The column of one part of a schema: its Arrow type, whether null fits, and what
    turns a non-null JSON value into what the Arrow type holds (raising Misfit)."""
    type: pa.DataType
    nullable: bool
    convert: Callable[[Any, str], Any]
    union: bool = False  # a struct of member0..: any writer type may fit one member
    text: bool = False  # schema-less: JSON text
    fields: Optional[Dict[str, "Node"]] = None  # a struct's, by name
    element: Optional["Node"] = None  # an array's items, a map's values
    # What `convert` does, for the compiled decoder (json_program.py), which mirrors it:
    # one of KINDS; an object's properties as (name, node, nullable, default, required),
    # default the schema's JSON value or NO_DEFAULT; a union's member nodes.
    kind: str = ""
    properties: Optional[List[tuple]] = None
    members: Optional[List["Node"]] = None

    def checked(self, nullable: Optional[bool] = None) -> Callable[[Any, str], Any]:
        """convert, with null passed through where the column takes it."""
        accepts_null = self.nullable if nullable is None else nullable
        convert = self.convert

        def convert_or_null(value, path):
            if value is None:
                if accepts_null:
                    return None
                raise Misfit(path, "null, and the column's schema requires a value")
            return convert(value, path)

        return convert_or_null


TIMESTAMP = pa.timestamp("us", tz="UTC")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_DAY = dt.date(1970, 1, 1).toordinal()
_INT_RANGES = {8: (-2 ** 7, 2 ** 7 - 1), 16: (-2 ** 15, 2 ** 15 - 1),
               32: (-2 ** 31, 2 ** 31 - 1), 64: (-2 ** 63, 2 ** 63 - 1)}
# What a Node's convert does (its `kind`), one per converter below.

@dataclass(frozen=True)
class SchemaDocument:
    """A registered JSON Schema as the mapping needs it: its text, where it is registered
    (for error messages) and the schemas its `$ref`s name, by reference name."""
    schema: str
    subject: Optional[str] = None
    version: Optional[int] = None
    id: Optional[int] = None
    references: Mapping[str, "SchemaDocument"] = field(default_factory=dict)

    def describe(self) -> str:
        where = f"subject {self.subject!r} version {self.version}"
        return where if self.id is None else f"{where} (schema id {self.id})"


class JsonSchemaMappingError(UnsupportedFormatError):
    """A JSON Schema, or a part of one, that has no Spark type."""


# Converters of the leaf types -------------------------------------------------------


def _unicode(text: str, path) -> str:
    """`text` as a string column holds it: UTF-8, which a lone surrogate (a \\ud800-\\udfff
    escape without its pair, which Python's json accepts) cannot be encoded in."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as failure:
        raise Misfit(path, f"{describe_value(text)} holds a lone surrogate "
                            f"(\\u{ord(text[failure.start]):04x} without its pair), which "
                            f"UTF-8 text cannot hold") from None
    return text


def _string(value, path):
    if isinstance(value, str):
        return _unicode(value, path)
    raise Misfit(path, f"expected a string, got {describe_value(value)}")


def _boolean(value, path):
    if isinstance(value, bool):
        return value
    raise Misfit(path, f"expected a boolean, got {describe_value(value)}")


def _integer(bits: int) -> Callable:
    low, high = _INT_RANGES[bits]

    def convert(value, path):
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON Schema counts 1.0 as an integer
        if isinstance(value, int) and not isinstance(value, bool):
            if low <= value <= high:
                return value
            raise Misfit(path, f"{value} is out of the range of a {bits}-bit integer")
        raise Misfit(path, f"expected an integer, got {describe_value(value)}")

    return convert


def _number(value, path):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int past a double's range
            raise Misfit(path, f"an integer of {len(str(abs(value)))} digits is out of the "
                                f"range of a double") from None
        if math.isinf(number):
            raise Misfit(path, f"{value} is out of the range of a double")
        return number
    raise Misfit(path, f"expected a number, got {describe_value(value)}")


def _date(value, path):
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value).toordinal() - _EPOCH_DAY
        except ValueError:
            pass
    raise Misfit(path, f"expected a date (format date, YYYY-MM-DD), got {describe_value(value)}")


def _timestamp(value, path):
    if isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value.upper())
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:  # RFC 3339 requires an offset; read none as UTC
                moment = moment.replace(tzinfo=dt.timezone.utc)
            return (moment - _EPOCH) // dt.timedelta(microseconds=1)
    raise Misfit(path, f"expected a date-time (format date-time, RFC 3339), got "
                        f"{describe_value(value)}")


def _base64(value, path):
    import base64
    import binascii
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            pass
    raise Misfit(path, f"expected base64 text, got {describe_value(value)}")


def _connect_days(value, path):
    return _integer(32)(value, path)


# the milliseconds whose microseconds fit a timestamp column's int64
_MILLIS_RANGE = (-(2 ** 63 // 1000), (2 ** 63 - 1) // 1000)


def _connect_millis(value, path):
    millis = _integer(64)(value, path)
    if not _MILLIS_RANGE[0] <= millis <= _MILLIS_RANGE[1]:
        raise Misfit(path, f"{millis} milliseconds is out of the range of a timestamp")
    return millis * 1000


def _json_text(value, path):
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except RecursionError:
        raise Misfit(path, "JSON nested too deeply for Python's json to write it") from None
    return _unicode(text, path)


def _enum_text(value, path):
    return _unicode(value, path) if isinstance(value, str) else _json_text(value, path)


# The schema -> column mapping -------------------------------------------------------


class Mapper:
    """Maps one subject version's schema (and the schemas it references) to a Node."""

    def __init__(self, root: SchemaDocument):
        self.root = root
        self.parsed: Dict[int, Any] = {}
        self.active: List[Tuple[int, str]] = []  # the $refs being followed, for recursion

    def error(self, document: SchemaDocument, pointer: str, reason: str):
        where = f"{self.root.describe()}: the JSON Schema at {pointer or '#'}"
        if document is not self.root:
            where += f" of referenced schema {document.describe()}"
        return JsonSchemaMappingError(f"{where} {reason}")

    def parse(self, document: SchemaDocument):
        key = id(document)
        if key not in self.parsed:
            try:
                self.parsed[key] = json.loads(document.schema) \
                    if isinstance(document.schema, (str, bytes)) else document.schema
            except ValueError as failure:
                raise self.error(document, "#", f"is not JSON: {failure}") from None
        return self.parsed[key]

    def map(self) -> Node:
        self.active.append((id(self.root), "#"))  # a $ref to "#" recurses
        return self.node(self.parse(self.root), self.root, "#")

    # -- one schema part
    def node(self, schema, document: SchemaDocument, pointer: str) -> Node:
        if schema is True or schema == {} or schema is None:
            return _text_node()
        if schema is False:
            raise self.error(document, pointer, "accepts no value (false), so has no Spark type")
        if not isinstance(schema, dict):
            raise self.error(document, pointer, f"is {describe_value(schema)}, not a schema")
        if "$ref" in schema:
            return self.reference(schema, document, pointer)
        for keyword in ("oneOf", "anyOf"):
            if keyword in schema:
                return self.union(schema[keyword], document, f"{pointer}/{keyword}")
        if "allOf" in schema:
            return self.all_of(schema, document, pointer)
        if "enum" in schema:
            values = schema["enum"]
            return Node(pa.string(), None in values, _enum_text, kind="enum")
        if "const" in schema:
            return Node(pa.string(), schema["const"] is None, _enum_text, kind="enum")
        types = schema.get("type")
        if types is None:
            types = implied_type(schema)
        if isinstance(types, list):
            return self.type_list(types, schema, document, pointer)
        return self.typed(types, schema, document, pointer)

    def typed(self, kind, schema, document, pointer) -> Node:
        if kind is None:
            return _text_node()
        connect = schema.get("connect.type")
        title = schema.get("title")
        if kind == "string":
            form = schema.get("format")
            if form == "date":
                return Node(pa.date32(), False, _date, kind="date")
            if form == "date-time":
                return Node(TIMESTAMP, False, _timestamp, kind="timestamp")
            if connect == "bytes" or schema.get("contentEncoding") == "base64":
                return Node(pa.binary(), False, _base64, kind="base64")
            return Node(pa.string(), False, _string, kind="string")
        if kind == "integer":
            if title == CONNECT_DATE:
                return Node(pa.date32(), False, _connect_days, kind="connect_days")
            if title == CONNECT_TIMESTAMP:
                return Node(TIMESTAMP, False, _connect_millis, kind="connect_millis")
            bits = {"int8": 8, "int16": 16, "int32": 32}.get(connect, 64)
            return Node(pa.int8() if bits == 8 else pa.int16() if bits == 16
                         else pa.int32() if bits == 32 else pa.int64(), False, _integer(bits),
                         kind="integer")
        if kind == "number":
            return Node(pa.float32() if connect == "float32" else pa.float64(), False, _number,
                         kind="number")
        if kind == "boolean":
            return Node(pa.bool_(), False, _boolean, kind="boolean")
        if kind == "array":
            return self.array(schema, document, pointer)
        if kind == "object":
            return self.object(schema, document, pointer)
        if kind == "null":
            raise self.error(document, pointer, "is the null type alone, which has no Spark "
                                                "type")
        raise self.error(document, pointer, f"has type {kind!r}; JSON Schema's types are "
                                            f"{', '.join(JSON_TYPES)}")

    def type_list(self, types, schema, document, pointer) -> Node:
        others = [kind for kind in types if kind != "null"]
        if "integer" in others and "number" in others:
            others.remove("integer")  # every integer is a number
        if not others:
            raise self.error(document, pointer, "is the null type alone, which has no Spark "
                                                "type")
        members = [self.typed(kind, schema, document, pointer) for kind in others]
        node = members[0] if len(members) == 1 else _union_node(members)
        return _nullable(node, len(others) < len(types) or node.nullable)

    def union(self, members, document, pointer) -> Node:
        if not isinstance(members, list) or not members:
            raise self.error(document, pointer, "is not a non-empty array of schemas")
        nullable = False
        nodes = []
        for index, member in enumerate(members):
            if isinstance(member, dict) and member.get("type") == "null":
                nullable = True
                continue
            node = self.node(member, document, f"{pointer}/{index}")
            nullable = nullable or node.nullable
            nodes.append(node)
        if not nodes:
            raise self.error(document, pointer, "accepts only null, which has no Spark type")
        node = nodes[0] if len(nodes) == 1 else _union_node(nodes)
        return _nullable(node, nullable)

    def all_of(self, schema, document, pointer) -> Node:
        parts = schema["allOf"]
        if not isinstance(parts, list) or not parts:
            raise self.error(document, pointer + "/allOf", "is not a non-empty array of "
                                                           "schemas")
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        resolved = [self.resolve(part, document, f"{pointer}/allOf/{i}")
                    for i, part in enumerate(parts)]
        if rest:
            resolved.append((rest, document, pointer))
        shaped = [(s, d, p) for s, d, p in resolved if _shapes(s)]
        if len(shaped) == 1:
            return self.node(*shaped[0])
        if shaped and all(implied_type(s) == "object" or s.get("type") == "object"
                          for s, _, _ in shaped):
            merged = {"type": "object", "properties": {}, "required": []}
            for part, _, _ in shaped:
                merged["properties"].update(part.get("properties", {}))
                merged["required"] += list(part.get("required", []))
            # the merged properties keep each one's own document for nested $refs
            return self.object(merged, document, pointer,
                               owners={name: (d, f"{p}/properties/{name}")
                                       for s, d, p in shaped
                                       for name in s.get("properties", {})})
        raise self.error(document, pointer + "/allOf",
                         "combines schemas that are not all objects, which has no Spark type")

    def resolve(self, schema, document, pointer):
        """(schema, document, pointer) with $refs followed (for allOf's merging)."""
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema:
            schema, document, pointer = self.target(schema["$ref"], document, pointer)
            seen += 1
            if seen > 64:
                raise self.error(document, pointer, "is a $ref that leads back to itself")
        return schema, document, pointer

    def reference(self, schema, document, pointer) -> Node:
        target, target_document, target_pointer = self.target(schema["$ref"], document,
                                                              pointer)
        key = (id(target_document), target_pointer)
        if key in self.active:
            raise self.error(document, pointer,
                             f"refers to {schema['$ref']!r} recursively: a recursive schema "
                             f"has no Spark type")
        self.active.append(key)
        try:
            return self.node(target, target_document, target_pointer)
        finally:
            self.active.pop()

    def target(self, ref, document: SchemaDocument, pointer: str):
        if not isinstance(ref, str):
            raise self.error(document, pointer, f"has a $ref that is not a string: {ref!r}")
        base, fragment = split_ref(ref)
        if base:
            target_document = _referenced(document, base)
            if target_document is None and base == self.parse(document).get("$id"):
                target_document = document
            if target_document is None:
                known = ", ".join(repr(name) for name in document.references) or "none"
                raise self.error(document, pointer,
                                 f"refers to {base!r}, which is not among the schema's "
                                 f"references (references: {known})")
        else:
            target_document = document
        if fragment and not fragment.startswith("/"):
            raise self.error(document, pointer, f"refers to the anchor {ref!r}; only JSON "
                                                f"pointers (#/...) are followed")
        try:
            target = follow_pointer(self.parse(target_document), fragment)
        except LookupError:
            raise self.error(document, pointer,
                             f"refers to {ref!r}, which does not exist") from None
        return target, target_document, "#" + fragment

    def array(self, schema, document, pointer) -> Node:
        items = schema.get("items", schema.get("additionalItems"))
        if "prefixItems" in schema or isinstance(items, list):
            raise self.error(document, pointer, "is a tuple (items as a list or prefixItems), "
                                                "which has no Spark type")
        if items is None or items is True:
            return _text_node()
        element = self.node(items, document, pointer + "/items")
        convert = element.checked()
        arrow = pa.list_(pa.field("element", element.type, nullable=element.nullable))

        def convert_array(value, path):
            if not isinstance(value, list):
                raise Misfit(path, f"expected an array, got {describe_value(value)}")
            return [convert(item, f"{path}[{index}]") for index, item in enumerate(value)]

        return Node(arrow, False, convert_array, element=element, kind="array")

    def object(self, schema, document, pointer, owners=None) -> Node:
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        if not properties:
            if isinstance(additional, dict) and additional:
                return self.map_node(additional, document, pointer + "/additionalProperties")
            return _text_node()
        required = set(schema.get("required") or ())
        fields, converters, nodes, mirrored = [], [], {}, []
        for name, part in properties.items():
            part_document, part_pointer = (owners or {}).get(
                name, (document, f"{pointer}/properties/{pointer_token(name)}"))
            node = self.node(part, part_document, part_pointer)
            nullable = node.nullable or name not in required
            default = NO_DEFAULT
            if isinstance(part, dict) and "default" in part:
                try:
                    default = node.checked(nullable)(part["default"], name)
                except Misfit as misfit:
                    raise self.error(part_document, part_pointer,
                                     f"has a default that does not fit its column: "
                                     f"{misfit}") from None
            fields.append(pa.field(name, node.type, nullable=nullable))
            nodes[name] = node
            converters.append((name, node.checked(nullable), default, name in required))
            mirrored.append((name, node, nullable,
                               part["default"] if default is not NO_DEFAULT else NO_DEFAULT,
                               name in required))
        arrow = pa.struct(fields)

        def convert_object(value, path):
            if not isinstance(value, dict):
                raise Misfit(path, f"expected an object, got {describe_value(value)}")
            row = {}
            for name, convert, default, needed in converters:
                inner = f"{path}.{name}" if path else name
                if name in value:
                    row[name] = convert(value[name], inner)
                elif default is not NO_DEFAULT:
                    row[name] = default
                elif needed:
                    raise Misfit(inner, "absent, and the column's schema requires it (with "
                                         "no default)")
            return row

        return Node(arrow, False, convert_object, fields=nodes, kind="object",
                     properties=mirrored)

    def map_node(self, values, document, pointer) -> Node:
        value_node = self.node(values, document, pointer)
        convert = value_node.checked()
        arrow = pa.map_(pa.string(), pa.field("value", value_node.type,
                                              nullable=value_node.nullable))

        def convert_map(value, path):
            if not isinstance(value, dict):
                raise Misfit(path, f"expected an object, got {describe_value(value)}")
            return [(_unicode(key, f"{path}[{key!r}]"), convert(item, f"{path}[{key!r}]"))
                    for key, item in value.items()]

        return Node(arrow, False, convert_map, element=value_node, kind="map")


def _referenced(document: SchemaDocument, base: str) -> Optional[SchemaDocument]:
    """The referenced schema `base` names: by its reference name, else by the last part
    of a URL-like name (references are often registered as "address.json" and named by
    a full $id URL, or the other way round)."""
    if base in document.references:
        return document.references[base]
    tail = base.rstrip("/").rsplit("/", 1)[-1]
    matches = [d for name, d in document.references.items()
               if name.rstrip("/").rsplit("/", 1)[-1] == tail]
    return matches[0] if len(matches) == 1 else None


def _shapes(schema) -> bool:
    """Whether an allOf part says what its values are (rather than only constraining)."""
    if not isinstance(schema, dict):
        return schema is False
    return any(keyword in schema for keyword in (
        "type", "properties", "additionalProperties", "items", "enum", "const", "oneOf",
        "anyOf", "allOf", "$ref"))


def _text_node() -> Node:
    return Node(pa.string(), True, _json_text, text=True, kind="text")


def _nullable(node: Node, nullable: bool) -> Node:
    return node if node.nullable == nullable else replace(node, nullable=nullable)


def _union_node(members: Sequence[Node]) -> Node:
    """A union of several types: a struct of member0, member1, ... with the first member
    the value fits set (as spark-avro reads an Avro union)."""
    names = [f"member{index}" for index in range(len(members))]
    arrow = pa.struct([pa.field(name, member.type, nullable=True)
                       for name, member in zip(names, members)])
    converters = list(zip(names, (member.convert for member in members)))

    def convert_union(value, path):
        reasons = []
        for name, convert in converters:
            try:
                return {name: convert(value, path)}
            except Misfit as misfit:
                reasons.append(f"{name}: {misfit.reason}")
        raise Misfit(path, f"{describe_value(value)} fits none of the union's members "
                            f"({'; '.join(reasons)})")

    return Node(arrow, False, convert_union, union=True, kind="union", members=list(members))


# Columns and decoding ---------------------------------------------------------------


_WIDENS = {
    pa.int8(): (pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64()),
    pa.int16(): (pa.int32(), pa.int64(), pa.float32(), pa.float64()),
    pa.int32(): (pa.int64(), pa.float32(), pa.float64()),
    pa.int64(): (pa.float32(), pa.float64()),
    pa.float32(): (pa.float64(),),
}


def resolution_problem(writer: Node, reader: Node, path: str) -> Optional[str]:
    if reader.text or reader.union or writer.union or writer.text:
        return None  # judged value by value
    w, r = writer.type, reader.type
    if reader.fields is not None and writer.fields is not None:
        for name, node in reader.fields.items():
            if name in writer.fields:  # else its default or null, or the value says
                problem = resolution_problem(writer.fields[name], node,
                                              f"{path}.{name}" if path else name)
                if problem:
                    return problem
        return None
    if reader.element is not None and writer.element is not None \
            and pa.types.is_map(r) == pa.types.is_map(w):
        return resolution_problem(writer.element, reader.element, path + "[]")
    if w == r or r in _WIDENS.get(w, ()):
        return None
    if _kind(w) == _kind(r):
        return None  # narrower integers, string formats, base64: judged value by value
    return (f"field {path or '<value>'} is {_kind(w)} in the writer's schema and "
            f"{_kind(r)} in the column's")


def _kind(arrow: pa.DataType) -> str:
    if pa.types.is_integer(arrow):
        return "an integer"
    if pa.types.is_floating(arrow):
        return "a number"
    if pa.types.is_boolean(arrow):
        return "a boolean"
    if pa.types.is_string(arrow) or pa.types.is_binary(arrow) or pa.types.is_date(arrow) \
            or pa.types.is_timestamp(arrow):
        return "a string"
    if pa.types.is_list(arrow):
        return "an array"
    if pa.types.is_map(arrow):
        return "a map"
    return "an object"
