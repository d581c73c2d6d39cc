"""Avro, one home for its facts: the schema text parsed (with Schema Registry's references),
the Spark type of a schema (spark-avro's SchemaConverters.toSqlType) and the schema of a
Spark type (toAvroType), the text Schema Registry stores (Avro's Schema.toString), and
schema resolution as Avro's SchemaCompatibility and Schema Registry check it.

decode/avro.py turns payloads into columns with these, writer/avro_schema.py payloads
from columns.

toAvroType, field by field: boolean; byte, short, int -> int; long; float; double;
string; binary -> bytes; date -> int with logicalType date; timestamp -> long
timestamp-micros (without a time zone: local-timestamp-micros); decimal(p, s) -> fixed
named `<namespace>.<field>.fixed` of the fewest bytes that hold p digits, logicalType
decimal; array; map with string keys; struct -> record named after its field, in the
namespace of the records around it (`topLevelRecord`, `topLevelRecord.address`, ...);
a nullable field -> the union [type, "null"]; no defaults.
"""
import json
from typing import Any, Dict, List, Optional, Tuple

import pyarrow as pa

from ..errors import InvalidInputError, InvalidOptionError, UnsupportedFormatError
from .compatibility import level_problem


def load_fastavro():
    import fastavro

    return fastavro


# ------------------------------------------------------------ Avro -> Spark (reading)

SPARK_MAX_DECIMAL_PRECISION = 38
PRIMITIVE_SPARK_TYPES = {
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
MILLIS_LOGICAL_TYPES = {"timestamp-millis", "local-timestamp-millis"}


def describe(schema) -> str:
    return f"subject {schema.subject!r} version {schema.version} (schema id {schema.id})"


# ------------------------------------------------------------------------ parsing

def without_logical_types(schema):
    """`schema` (its JSON form) with every logicalType left out."""
    if isinstance(schema, dict):
        return {key: without_logical_types(value) for key, value in schema.items()
                if key != "logicalType"}
    if isinstance(schema, list):
        return [without_logical_types(value) for value in schema]
    return schema


def parse_registered(schema, registry, logical_types: bool = True):
    """`schema` (a RegisteredSchema) parsed by fastavro with its references as named
    types: (the parsed schema, the named types by full name)."""
    fastavro = load_fastavro()
    named: Dict[str, dict] = {}
    _parse_references(schema, registry, named, logical_types)
    text = json.loads(schema.schema)
    if not logical_types:
        text = without_logical_types(text)
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
            text = without_logical_types(text)
        try:
            load_fastavro().parse_schema(text, named_schemas=named)
        except Exception as failure:
            raise UnsupportedFormatError(
                f"{describe(reference)}, referenced by {describe(schema)}: not an Avro "
                f"schema fastavro can parse: {failure}") from None


# ---------------------------------------------------------------------- Spark types

def is_named_reference(schema) -> bool:
    return isinstance(schema, str) and schema not in PRIMITIVE_SPARK_TYPES


def type_name(schema, named) -> str:
    """The Avro type of a parsed schema: a primitive's name, record, enum, union..."""
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, str):
        return schema if schema in PRIMITIVE_SPARK_TYPES else named[schema]["type"]
    return schema["type"]


def _fixed_max_precision(size: int) -> int:
    """The most decimal digits a `size`-byte two's complement number always holds."""
    return len(str(2 ** (8 * size - 1) - 1)) - 1


def spark_type(schema, named, where: str, stack=()) -> pa.DataType:
    """The Arrow type of a parsed Avro schema, as spark-avro maps it to Spark's."""
    if isinstance(schema, str):
        if schema in PRIMITIVE_SPARK_TYPES:
            return PRIMITIVE_SPARK_TYPES[schema]
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
        decimal = decimal_of(schema)
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
    if kind in PRIMITIVE_SPARK_TYPES:
        return PRIMITIVE_SPARK_TYPES[kind]
    return spark_type(kind, named, where, stack)  # {"type": "<a named type>"}


def decimal_of(schema) -> Optional[Tuple[int, int]]:
    if schema.get("logicalType") != "decimal":
        return None
    precision, scale = schema.get("precision"), schema.get("scale", 0)
    if not isinstance(precision, int) or not isinstance(scale, int) or precision <= 0 \
            or not 0 <= scale <= precision:
        return None
    if schema["type"] == "fixed" and precision > _fixed_max_precision(schema["size"]):
        return None
    return precision, scale


def union_branches(union) -> List:
    return [branch for branch in union if branch != "null"]


def union_shape(union, named) -> str:
    """How spark-avro maps a union: "nullable" (one other type), "long", "double" (int
    and long, float and double) or "members" (a struct of member0, member1, ...)."""
    branches = union_branches(union)
    if len(branches) == 1:
        return "nullable"
    kinds = {type_name(branch, named) for branch in branches}
    if len(branches) == 2 and kinds == {"int", "long"}:
        return "long"
    if len(branches) == 2 and kinds == {"float", "double"}:
        return "double"
    return "members"


def _union_type(union, named, where, stack) -> pa.DataType:
    shape = union_shape(union, named)
    branches = union_branches(union)
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


# ------------------------------------------------------------ Spark -> Avro (writing)

DEFAULT_RECORD_NAME = "topLevelRecord"  # spark-avro's recordName default
PRIMITIVES = tuple(PRIMITIVE_SPARK_TYPES)  # the primitive types' names


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


class NamedTypes:
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
    names_r, names_w = NamedTypes(reader), NamedTypes(writer)
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
