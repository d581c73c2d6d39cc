"""valueFormat=json: Schema Registry framed JSON Schema values as typed Arrow columns.

The wire format is Confluent's KafkaJsonSchemaSerializer's: a zero magic byte, the schema id
as a 4-byte big-endian int, then the JSON document as UTF-8 text (nothing in between).

A subject's latest schema gives the column's type, field by field as Spark reads it:
object with properties -> struct (declared order; a property is nullable unless `required`
and non-null), object with only `additionalProperties: {schema}` -> map<string, T>,
array with `items` -> array, string -> string (`format: date` -> date, `format: date-time`
-> timestamp, `contentEncoding: base64` or Connect's `connect.type: bytes` -> binary),
integer -> bigint, number -> double (Connect's `connect.type` int8/16/32 and float32 narrow
them; Connect's Date/Timestamp titles on integers -> date/timestamp), boolean -> boolean,
enum and const -> string, `type: [T, "null"]` and `oneOf`/`anyOf` of null and T -> nullable
T, other unions -> a struct of member0, member1, ... (as spark-avro maps unions), `allOf` of
objects -> their merged struct, `$ref` within the document, to `definitions`/`$defs`, and to
referenced schemas by their reference name. Dates: Confluent's Connect converter keeps
formatted strings as strings; here they take the types Spark's from_json reads such strings
into (a date-time without an offset is read as UTC), as the issue's Avro dates do.
Schema-less parts (`{}`, `true`, an object with neither properties nor an
additionalProperties schema, an array without items) are string columns holding the JSON
text; constraints (`not`, `pattern`, `minimum`, ...) are not checked. A schema with no Spark
type (a recursive `$ref`, tuple `items`, `false`, a lone null type, `allOf` of non-objects)
fails the read naming the subject, version and the place in the schema.

Values written with older schemas are read into the latest schema's column: a property
absent from the value takes its `default` (else null), properties the column lacks are
dropped, integers widen to numbers. The column takes a value as far as its type needs: a
value that does not fit is an error naming the field path.

This module decodes row by row: json.loads, then the converters the mapping builds. A
scan's payloads decode columnar instead (JsonSchemaColumn.decode_bodies): the compiled
parser of json_program.py / _jsoncolumns.c fills the Arrow buffers, and gives back to
this path the rows it leaves (documents that are not JSON, values that do not fit, and a
few rare forms), so that both give every value and every error alike.
"""
import datetime as dt
import json
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from ..errors import RecordDecodeError, UnsupportedFormatError
from ..schemas.json_schema import (
    CONNECT_DATE, CONNECT_TIMESTAMP, JSON_TYPES, follow_pointer, implied_type, pointer_token,
    split_ref,
)
from .json_nodes import NO_DEFAULT, Misfit, Node, describe_value
from .value_formats import (FRAME_SIZE, FormatReader, IncompatibleSchemaError, ValueFormat,
                            decoded_rows, frame_error)

TIMESTAMP = pa.timestamp("us", tz="UTC")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_DAY = dt.date(1970, 1, 1).toordinal()
_INT_RANGES = {8: (-2 ** 7, 2 ** 7 - 1), 16: (-2 ** 15, 2 ** 15 - 1),
               32: (-2 ** 31, 2 ** 31 - 1), 64: (-2 ** 63, 2 ** 63 - 1)}
# Whether values decode through the compiled decoder (json_program.py) when it is built;
# tests set it (or pass `compiled`) to force either twin.
USE_COMPILED = True
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


class _Mapper:
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


class JsonSchemaColumn:
    """The column of one subject version's JSON Schema: its Arrow type and the conversion
    of a parsed JSON value into it."""

    def __init__(self, document: SchemaDocument):
        self.document = document
        self._node = _Mapper(document).map()
        self.type: pa.DataType = self._node.type
        self._convert = self._node.checked(True)
        self._program = None  # the compiled decoder's program, once asked for; False: none

    def decode_bodies(self, bodies, compiled: Optional[bool] = None
                      ) -> Tuple[Any, List[Optional[str]]]:
        """Each JSON document of `bodies` (framed values after their frames: a sequence of
        bytes, or value_formats.Payloads) as the column holds it, and each one's error
        reason (None where it decoded; its value is then null). The values are a pa.Array
        from the compiled decoder (json_program.py), or a list from the row-by-row path
        when it is not built. `compiled` (default USE_COMPILED) says whether it may be
        used; both give the same values and reasons."""
        if USE_COMPILED if compiled is None else compiled:
            if self._program is None:
                from .json_program import program_for

                self._program = program_for(self._node) or False
            if self._program:
                try:
                    return self._program.decode(bodies, lambda body: decode_json(self, body))
                except MemoryError:  # a column past Arrow's 2 GiB offsets: lists take it
                    pass
        return decoded_rows(lambda body: decode_json(self, body), bodies)

    def convert(self, value) -> Any:
        """`value` (parsed JSON) as the column holds it; raises ValueError naming the field
        path where it does not fit."""
        try:
            return self._convert(value, "")
        except Misfit as misfit:
            raise ValueError(str(misfit)) from None

    def read_problem(self, writer: "JsonSchemaColumn") -> Optional[str]:
        """Why values written with `writer` cannot be read into this column, or None.
        Mirrors the rules the values follow: absent properties take defaults or null,
        extra ones are dropped, integers widen to numbers."""
        return _resolution_problem(writer._node, self._node, "")


_WIDENS = {
    pa.int8(): (pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64()),
    pa.int16(): (pa.int32(), pa.int64(), pa.float32(), pa.float64()),
    pa.int32(): (pa.int64(), pa.float32(), pa.float64()),
    pa.int64(): (pa.float32(), pa.float64()),
    pa.float32(): (pa.float64(),),
}


def _resolution_problem(writer: Node, reader: Node, path: str) -> Optional[str]:
    if reader.text or reader.union or writer.union or writer.text:
        return None  # judged value by value
    w, r = writer.type, reader.type
    if reader.fields is not None and writer.fields is not None:
        for name, node in reader.fields.items():
            if name in writer.fields:  # else its default or null, or the value says
                problem = _resolution_problem(writer.fields[name], node,
                                              f"{path}.{name}" if path else name)
                if problem:
                    return problem
        return None
    if reader.element is not None and writer.element is not None \
            and pa.types.is_map(r) == pa.types.is_map(w):
        return _resolution_problem(writer.element, reader.element, path + "[]")
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


def framed_schema_id(payload: bytes) -> int:
    """The schema id of a Schema Registry framed value; ValueError saying what is wrong
    with the frame."""
    reason = frame_error(payload)
    if reason is not None:
        raise ValueError(reason)
    return int.from_bytes(payload[1:FRAME_SIZE], "big", signed=True)


def decode_json(column: JsonSchemaColumn, body: bytes, start: int = FRAME_SIZE) -> Any:
    """The JSON text `body` (a framed value's bytes after the frame, which began `start`
    bytes earlier) as `column` holds it; ValueError saying why it cannot be."""
    try:
        value = json.loads(bytes(body).decode("utf-8"))
    except UnicodeDecodeError as failure:
        raise ValueError(f"the JSON text is not UTF-8 (byte {failure.start + start} of the "
                         f"value)") from None
    except ValueError as failure:
        raise ValueError(f"invalid JSON after the schema id: {failure}") from None
    except RecursionError:
        raise ValueError("invalid JSON after the schema id: nested too deeply for Python's "
                         "json to read it") from None
    return column.convert(value)


class JsonSchemaValues:
    """Decodes framed JSON Schema values into the column of a reader schema (a subject's
    latest), on its own (no registry, no Spark). `writer_of(schema_id)` gives the column
    of the schema a value was written with (raising LookupError for an unknown id);
    rows of a writer schema the column cannot read are errors."""

    def __init__(self, reader: JsonSchemaColumn,
                 writer_of: Callable[[int], JsonSchemaColumn]):
        self.reader = reader
        self.type = reader.type
        self._writer_of = writer_of
        self._problems: Dict[int, Optional[str]] = {}

    def _writer_problem(self, schema_id: int) -> Optional[str]:
        if schema_id not in self._problems:
            try:
                writer = self._writer_of(schema_id)
            except LookupError:
                problem = f"unknown schema id {schema_id}"
            except JsonSchemaMappingError as failure:
                problem = f"schema id {schema_id}: {failure}"
            else:
                problem = self.reader.read_problem(writer)
                if problem:
                    problem = (f"incompatible writer schema: {writer.document.describe()} "
                               f"cannot be read into the column of "
                               f"{self.reader.document.describe()}: {problem}")
            self._problems[schema_id] = problem
        return self._problems[schema_id]

    def decode_one(self, payload: Optional[bytes]) -> Any:
        """One payload as the column holds it (None for a null payload); ValueError saying
        why it cannot be."""
        if payload is None:
            return None
        payload = bytes(payload)
        problem = self._writer_problem(framed_schema_id(payload))
        if problem:
            raise ValueError(problem)
        return decode_json(self.reader, payload[FRAME_SIZE:])

    def decode(self, payloads, compiled: Optional[bool] = None
               ) -> Tuple[pa.Array, List[Optional[str]]]:
        """The column of `payloads` (a list of bytes/None or an Arrow binary array) and, row
        by row, why a value could not be decoded (None where it was): such rows are null.
        The JSON documents decode together (JsonSchemaColumn.decode_bodies; `compiled`
        as there)."""
        if isinstance(payloads, (pa.Array, pa.ChunkedArray)):
            payloads = payloads.to_pylist()
        errors: List[Optional[str]] = [None] * len(payloads)
        rows, bodies = [], []
        for row, payload in enumerate(payloads):
            if payload is None:
                continue
            payload = bytes(payload)
            try:
                problem = self._writer_problem(framed_schema_id(payload))
            except ValueError as failure:  # not framed
                errors[row] = str(failure)
                continue
            if problem:
                errors[row] = problem
                continue
            rows.append(row)
            bodies.append(payload[FRAME_SIZE:])
        decoded, body_errors = self.reader.decode_bodies(bodies, compiled)
        for row, error in zip(rows, body_errors):
            errors[row] = error
        if not isinstance(decoded, pa.Array):
            decoded = pa.array(decoded, type=self.type)
        # each row's place in [a null] + the decoded bodies
        index = np.zeros(len(payloads), np.int64)
        index[rows] = np.arange(1, len(rows) + 1)
        column = pa.concat_arrays([pa.nulls(1, self.type), decoded])
        return column.take(pa.array(index)), errors


# valueFormat=json in the shared framed-values layer (decode/value_formats.py) ----------


def document_of(registered, registry=None) -> SchemaDocument:
    """The SchemaDocument of a RegisteredSchema, its references resolved through the
    registry (`named_references`: reference name -> RegisteredSchema, at every depth, as
    Schema Registry's clients resolve them; every schema of the tree looks its `$ref`
    names up there)."""
    found = registry.named_references(registered) \
        if registry is not None and registered.references else {}
    shared: Dict[str, SchemaDocument] = {}
    for name, schema in found.items():
        shared[name] = SchemaDocument(schema.schema, schema.subject, schema.version,
                                      schema.id, shared)
    return SchemaDocument(registered.schema, registered.subject, registered.version,
                          registered.id, shared)


class JsonSchemaReader(FormatReader):
    """The reader of a subject's latest JSON Schema. Pickles as its SchemaDocument (plain
    data); the column's converters are built again where it is unpickled."""

    def __init__(self, document: SchemaDocument):
        self.document = document
        self._setup()

    def _setup(self):
        self.column = JsonSchemaColumn(self.document)
        self.arrow_type = self.column.type
        self._writers: Dict[Any, Optional[str]] = {}

    def __getstate__(self):
        return {"document": self.document}

    def __setstate__(self, state):
        self.document = state["document"]
        self._setup()

    def _check_writer(self, writer, registry) -> None:
        """Raises IncompatibleSchemaError when values of `writer` cannot be read into the
        column (judged once per writer)."""
        key = (writer.id, writer.subject, writer.version)
        if key not in self._writers:
            try:
                written = JsonSchemaColumn(document_of(writer, registry))
            except (JsonSchemaMappingError, RecordDecodeError) as failure:
                # RecordDecodeError: the registry's SchemaNotFoundError, a missing reference
                self._writers[key] = str(failure)
            else:
                self._writers[key] = self.column.read_problem(written)
        problem = self._writers[key]
        if problem:
            raise IncompatibleSchemaError(problem)

    def decode(self, writer, registry, payloads):
        """The values as Python values, row by row."""
        self._check_writer(writer, registry)
        return self.column.decode_bodies(payloads, compiled=False)

    def decode_columns(self, writer, registry, payloads):
        """A read's column: the compiled decoder's pa.Array (row by row when it is not
        built), the same values and reasons as decode."""
        self._check_writer(writer, registry)
        return self.column.decode_bodies(payloads)


class JsonSchemaFormat(ValueFormat):
    name = "json"
    schema_type = "JSON"

    def require(self, option: str) -> None:
        pass  # the standard library's json

    def reader(self, schema, registry) -> JsonSchemaReader:
        return JsonSchemaReader(document_of(schema, registry))


JSON_SCHEMA = JsonSchemaFormat()
