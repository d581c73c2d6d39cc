"""Avro schemas for framed writes: derived from an Arrow type as spark-avro's
SchemaConverters.toAvroType derives them from the Spark type, written as Avro's
Schema.toString writes them (the text Schema Registry stores for an Avro schema), and
checked for compatibility by Avro's schema resolution rules (SchemaCompatibility), as
Schema Registry checks a new version.

toAvroType, field by field: boolean; byte, short, int -> int; long; float; double;
string; binary -> bytes; date -> int with logicalType date; timestamp -> long
timestamp-micros (without a time zone: local-timestamp-micros); decimal(p, s) -> fixed
named `<namespace>.<field>.fixed` of the fewest bytes that hold p digits, logicalType
decimal; array; map with string keys; struct -> record named after its field, in the
namespace of the records around it (`topLevelRecord`, `topLevelRecord.address`, ...);
a nullable field -> the union [type, "null"]; no defaults.
"""
import io
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

import pyarrow as pa

from ..errors import InvalidOptionError
from .errors import InvalidInputError
from .schema_format import PayloadMisfit, SchemaFormat, level_problem

DEFAULT_RECORD_NAME = "topLevelRecord"  # spark-avro's recordName default
PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


def _bytes_for_precision(precision: int) -> int:
    """The fewest bytes whose two's complement holds every `precision`-digit number
    (spark-avro's minBytesForPrecision)."""
    size = 1
    while 2 ** (8 * size - 1) < 10 ** precision:
        size += 1
    return size


def _named(kind: str, full_name: str, enclosing: str) -> Dict[str, Any]:
    """A named schema's first keys as Avro writes them: type, name, then namespace unless
    it is the enclosing one."""
    namespace, _, name = full_name.rpartition(".")
    obj: Dict[str, Any] = {"type": kind, "name": name}
    if namespace != enclosing:
        obj["namespace"] = namespace
    return obj


def avro_type(arrow_type: pa.DataType, nullable: bool, record_name: str, namespace: str,
              enclosing: str, where: str):
    """toAvroType of one Arrow type (as JSON objects in Avro's key order)."""
    t = arrow_type
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        schema: Any = "boolean"
    elif pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        schema = "int"
    elif pa.types.is_int64(t):
        schema = "long"
    elif pa.types.is_float32(t):
        schema = "float"
    elif pa.types.is_float64(t):
        schema = "double"
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        schema = "string"
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        schema = "bytes"
    elif pa.types.is_date32(t):
        schema = {"type": "int", "logicalType": "date"}
    elif pa.types.is_timestamp(t):
        logical = "timestamp-micros" if t.tz is not None else "local-timestamp-micros"
        schema = {"type": "long", "logicalType": logical}
    elif pa.types.is_decimal(t):
        full = f"{namespace}.{record_name}.fixed" if namespace else f"{record_name}.fixed"
        schema = _named("fixed", full, enclosing)
        schema.update(size=_bytes_for_precision(t.precision), logicalType="decimal",
                      precision=t.precision, scale=t.scale)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        schema = {"type": "array", "items": avro_type(
            t.value_type, t.value_field.nullable, record_name, namespace, enclosing,
            f"{where}[]")}
    elif pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise InvalidInputError(
                f"{where} is a map with {t.key_type} keys; Avro maps have string keys")
        schema = {"type": "map", "values": avro_type(
            t.item_type, t.item_field.nullable, record_name, namespace, enclosing,
            f"{where}{{}}")}
    elif pa.types.is_struct(t):
        child_namespace = f"{namespace}.{record_name}" if namespace else record_name
        full = f"{namespace}.{record_name}" if namespace else record_name
        schema = _named("record", full, enclosing)
        schema["fields"] = [
            {"name": f.name, "type": avro_type(f.type, f.nullable, f.name, child_namespace,
                                               namespace, f"{where}.{f.name}")}
            for f in t]
    else:
        raise InvalidInputError(
            f"{where} has type {t}, which has no Avro type (spark-avro maps boolean, "
            f"integers, floats, string, binary, date, timestamp, decimal, array, map, struct)")
    return [schema, "null"] if nullable else schema


def derive_record_schema(struct: pa.DataType, full_name: Optional[str], column: str) -> str:
    """The Avro record schema text of a struct column (spark-avro's to_avro with
    recordName and recordNamespace from `full_name`, default topLevelRecord)."""
    if not pa.types.is_struct(struct):
        raise InvalidInputError(f"column {column!r} has type {struct}; an Avro-framed "
                                f"write needs a struct there")
    namespace, _, name = (full_name or DEFAULT_RECORD_NAME).rpartition(".")
    schema = avro_type(struct, False, name, namespace, "", f"column {column!r}")
    if namespace:  # Avro writes a top-level namespace
        schema = {"type": "record", "name": name, "namespace": namespace,
                  "fields": schema["fields"]}
    return canonical_text(schema)


def canonical_text(schema) -> str:
    """Compact JSON, as Avro's Schema.toString writes it."""
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def parse_schema_option(text, option: str) -> str:
    """A schema given as an option (Avro JSON): checked with fastavro, as compact text."""
    import fastavro

    try:
        obj = json.loads(text)
        fastavro.parse_schema(obj)
    except Exception as exc:
        raise InvalidOptionError(f"option {option!r} is not an Avro schema: {exc}",
                                 option) from None
    if not (isinstance(obj, dict) and obj.get("type") == "record"):
        raise InvalidOptionError(f"option {option!r} must be an Avro record schema", option)
    return canonical_text(obj)


# -- compatibility (Avro schema resolution) -----------------------------------------

_PROMOTIONS = {  # writer type -> reader types that read it
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}


class _Names:
    """The named types of one schema by full name, for resolving references."""

    def __init__(self, schema):
        self.types: Dict[str, dict] = {}
        self._collect(schema, "")

    def _collect(self, schema, namespace):
        if isinstance(schema, list):
            for branch in schema:
                self._collect(branch, namespace)
        elif isinstance(schema, dict):
            kind = schema.get("type")
            if kind in ("record", "error", "enum", "fixed"):
                full = self.full_name(schema, namespace)
                self.types[full] = schema
                namespace = full.rpartition(".")[0]
            if kind in ("record", "error"):
                for field in schema.get("fields", []):
                    self._collect(field["type"], namespace)
            elif kind == "array":
                self._collect(schema["items"], namespace)
            elif kind == "map":
                self._collect(schema["values"], namespace)
            elif isinstance(kind, (dict, list)):
                self._collect(kind, namespace)

    @staticmethod
    def full_name(schema: dict, namespace: str) -> str:
        name = schema["name"]
        if "." in name:
            return name
        space = schema.get("namespace", namespace)
        return f"{space}.{name}" if space else name

    def resolve(self, schema, namespace):
        """(schema: a primitive's name, a union list or a complex type's object, the
        namespace names inside it resolve in). Logical types are passed over, as Avro's
        SchemaCompatibility passes them over."""
        while True:
            if isinstance(schema, str) and schema not in PRIMITIVES:
                full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
                found = self.types.get(full) or self.types.get(schema)
                if found is None:
                    raise InvalidOptionError(f"unknown Avro type name {schema!r}")
                schema = found
            if not isinstance(schema, dict):
                return schema, namespace
            kind = schema.get("type")
            if kind in ("record", "error", "enum", "fixed"):
                return schema, self.full_name(schema, namespace).rpartition(".")[0]
            if kind in ("array", "map"):
                return schema, namespace
            schema = kind  # a primitive with properties, or a type given as {"type": ...}


def _kind(schema) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, str):
        return schema
    return "record" if schema["type"] == "error" else schema["type"]


def first_incompatibility(reader_text: str, writer_text: str) -> Optional[str]:
    """None when data written with `writer_text` reads with `reader_text` by Avro's
    resolution rules; else where and why it does not, the first place found."""
    reader, writer = json.loads(reader_text), json.loads(writer_text)
    names_r, names_w = _Names(reader), _Names(writer)
    # (reader record, writer record) -> the outcome; None while it is being checked, so
    # that a recursive type is taken as fine where it recurs
    records_checked: Dict[Tuple[int, int], Optional[str]] = {}

    def check(r, rns, w, wns, path) -> Optional[str]:
        r, rns = names_r.resolve(r, rns)
        w, wns = names_w.resolve(w, wns)
        rk, wk = _kind(r), _kind(w)
        if wk == "union":
            for branch in w:
                problem = check(r, rns, branch, wns, path)
                if problem is not None:
                    return problem
            return None
        if rk == "union":
            for branch in r:
                if check(branch, rns, w, wns, path) is None:
                    return None
            return f"{path}: the reader's union {_describe(r)} has no branch for the " \
                   f"writer's {_describe(w)}"
        if wk in PRIMITIVES and rk in PRIMITIVES:
            if rk == wk or rk in _PROMOTIONS.get(wk, ()):
                return None
            return f"{path}: the reader's {rk} cannot read the writer's {wk}"
        if rk != wk:
            return f"{path}: the reader's {_describe(r)} cannot read the writer's {_describe(w)}"
        if rk in ("record", "enum", "fixed"):
            rname, wname = r["name"].rpartition(".")[2], w["name"].rpartition(".")[2]
            aliases = [a.rpartition(".")[2] for a in r.get("aliases", [])]
            if rname != wname and wname not in aliases:
                return f"{path}: the reader's {rk} {rname!r} and the writer's {wname!r} " \
                       f"differ in name"
        if rk == "fixed":
            if r["size"] != w["size"]:
                return f"{path}: fixed size {w['size']} written, {r['size']} read"
            return None
        if rk == "enum":
            missing = [s for s in w["symbols"] if s not in r["symbols"]]
            if missing and "default" not in r:
                return f"{path}: the reader's enum lacks the writer's symbols {missing}"
            return None
        if rk == "array":
            return check(r["items"], rns, w["items"], wns, f"{path}[]")
        if rk == "map":
            return check(r["values"], rns, w["values"], wns, f"{path}{{}}")
        key = (id(r), id(w))
        if key not in records_checked:
            records_checked[key] = None
            records_checked[key] = check_record(r, rns, w, wns, path)
        return records_checked[key]

    def check_record(r, rns, w, wns, path) -> Optional[str]:
        """Every reader field is written, or has a default."""
        written = {f["name"]: f for f in w["fields"]}
        for field in r["fields"]:
            where = f"{path}.{field['name']}" if path else field["name"]
            source = written.get(field["name"])
            if source is None:
                for alias in field.get("aliases", []):
                    source = written.get(alias)
                    if source is not None:
                        break
            if source is None:
                if "default" not in field:
                    return f"{where}: a field the reader has and the writer lacks, " \
                           f"without a default"
                continue
            problem = check(field["type"], rns, source["type"], wns, where)
            if problem is not None:
                return problem
        return None

    return check(reader, "", writer, "", "")


def _describe(schema) -> str:
    if isinstance(schema, list):
        return json.dumps(schema, separators=(",", ":"))[:80]
    if isinstance(schema, str):
        return schema
    if schema.get("type") in ("record", "error", "enum", "fixed"):
        return f"{schema['type']} {schema['name']!r}"
    return str(schema.get("type"))


def compatibility_problem(level: str, new_text: str, previous: List[Tuple[int, str]]
                          ) -> Optional[Tuple[int, str]]:
    """(version, reason) of the first earlier version `new_text` is incompatible with at
    `level` by Avro's resolution rules (schema_format.level_problem); None when
    compatible."""
    return level_problem(level, new_text, previous,
                         lambda writer, _, reader, __: first_incompatibility(reader, writer))


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


_PARSED: Dict[str, object] = {}  # schema text -> fastavro's parsed schema, per process


def _parsed(text: str):
    import fastavro

    parsed = _PARSED.get(text)
    if parsed is None:
        parsed = _PARSED[text] = fastavro.parse_schema(json.loads(text))
    return parsed


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
        return _Names.full_name(json.loads(text), "")

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
