"""Confluent-framed Avro values and keys: a struct column written as Schema Registry's
serializers write it (a zero magic byte, the 4-byte big-endian schema id, the Avro
binary encoding), its schema registered in the log dir's `_schemas` topic as Schema
Registry registers it.

Planning (on the driver, when the column types are known): the schema is the
`valueAvroSchema` / `keyAvroSchema` option's, else derived from the column's type as
spark-avro derives it (avro_schema.py). Under TopicNameStrategy the subject is
`<topic>-value` / `<topic>-key`. The log dir's `_schemas` partition is replayed
(format/internal/schema_registry.py): a schema the subject already holds keeps its id and
registers nothing; a new one is checked against the subject's versions at its
compatibility level (its CONFIG record's, else the global one, else BACKWARD) and gets
the id of the same schema under another subject, else the next id, and the subject's
next version. Tasks frame rows with that id. The commit, holding the `_schemas` lock,
replays the topic again and plans once more: the same ids, or the write fails (another
writer took them); the SCHEMA records go into the same publish as the data, so a failed
write leaves no schema registered.
"""
import io
import json
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import pyarrow as pa

from ..errors import InvalidOptionError
from ..format.internal import schema_registry_records as records
from ..format.internal.schema_registry import (
    SCHEMAS_TOPIC, RegisteredSchema, SchemaRegistry, registry_from_partition_dir,
)
from ..format.log import partition_dir_name
from .avro_schema import compatibility_problem, derive_record_schema, parse_schema_option
from .errors import ConcurrentWriteError, InvalidInputError, WriteError

MAGIC_BYTE = b"\x00"
READ_ONLY_MODES = ("READONLY", "READONLY_OVERRIDE")


class SchemaRegistrationError(WriteError):
    """A schema the subject refuses (incompatible, or the subject is read-only)."""


@dataclass(frozen=True)
class FramedSide:
    side: str  # "key" | "value"
    subject: str
    schema_id: int
    schema: str  # the schema text, as registered
    version: Optional[int] = None  # the version this write registers; None: held already

    @property
    def prefix(self) -> bytes:
        return MAGIC_BYTE + self.schema_id.to_bytes(4, "big")

    def schema_record(self) -> records.RegistryRecord:
        """The SCHEMA record Schema Registry writes for this registration."""
        value = records.SchemaValue(self.subject, self.version, self.schema_id, self.schema)
        return records.RegistryRecord(value.key(), value)


@dataclass(frozen=True)
class FramingPlan:
    """The framed columns of one write, with the ids tasks frame them with; picklable."""

    sides: Tuple[FramedSide, ...]
    # (column, struct type) the plan was made for (InputLayout.framed_types)
    column_types: Tuple[Tuple[str, pa.DataType], ...] = ()

    def side(self, name: str) -> Optional[FramedSide]:
        return next((s for s in self.sides if s.side == name), None)

    @property
    def registrations(self) -> List[FramedSide]:
        return [s for s in self.sides if s.version is not None]


def schemas_partition_dir(logdir: str) -> str:
    import os

    return os.path.join(logdir, partition_dir_name(SCHEMAS_TOPIC, 0))


def _same_schema(a: str, b: str) -> bool:
    try:
        return json.loads(a) == json.loads(b)
    except ValueError:
        return a == b


def _schema_text(options, side: str, column_type: pa.DataType) -> str:
    given = getattr(options, f"{side}_avro_schema")
    if given is None:
        return derive_record_schema(column_type, getattr(options, f"{side}_record_name"), side)
    text = parse_schema_option(given, f"{side}AvroSchema")
    if getattr(options, f"{side}_record_name") is not None:
        raise InvalidOptionError(
            f"options '{side}RecordName' and '{side}AvroSchema' are both given; the schema "
            f"names its record itself", f"{side}RecordName")
    if pa.types.is_struct(column_type):
        fields = {f["name"] for f in json.loads(text)["fields"]}
        extra = [f.name for f in column_type if f.name not in fields]
        if extra:
            raise InvalidInputError(
                f"column {side!r} has field(s) {', '.join(map(repr, extra))} that option "
                f"'{side}AvroSchema' lacks: they would not be written")
    else:
        raise InvalidInputError(f"column {side!r} has type {column_type}; an Avro-framed "
                                f"write needs a struct there")
    return text


def _plan_side(registry: SchemaRegistry, side: str, subject: str, text: str) -> FramedSide:
    for held in registry.versions(subject):
        if held.schema_type == records.AVRO and _same_schema(held.schema, text):
            return FramedSide(side, subject, held.id, held.schema)
    mode = registry.mode(subject)
    if mode in READ_ONLY_MODES:
        raise SchemaRegistrationError(
            f"subject {subject!r} in {registry.source} is in mode {mode}: Schema Registry "
            f"registers no schema there")
    level = registry.compatibility(subject)
    live = registry.versions(subject)
    version = registry.next_version(subject)
    other_types = [s for s in live if s.schema_type != records.AVRO]
    if other_types and level.upper() != "NONE":
        raise SchemaRegistrationError(
            f"subject {subject!r} in {registry.source} holds {other_types[-1]} of type "
            f"{other_types[-1].schema_type}; an Avro schema cannot be checked against it "
            f"(compatibility {level})")
    problem = compatibility_problem(level, text, [(s.version, s.schema) for s in live])
    if problem is not None:
        against, reason = problem
        raise SchemaRegistrationError(
            f"the {side} schema is incompatible with subject {subject!r} version {against} "
            f"in {registry.source} at compatibility level {level} (it would have been "
            f"version {version}): {reason}; nothing was written")
    same = [s for name in registry.subjects(include_deleted=True)
            for s in registry.versions(name, include_deleted=True)
            if s.schema_type == records.AVRO and not s.references
            and _same_schema(s.schema, text)]
    schema_id = min(s.id for s in same) if same else registry.next_id()
    registry.register(RegisteredSchema(schema_id, subject, version, records.AVRO, text))
    return FramedSide(side, subject, schema_id, text, version)


def plan_framing(options, topic: Optional[str], logdir: str,
                 framed_types: Tuple[Tuple[str, pa.DataType], ...]) -> Optional[FramingPlan]:
    """The plan of a write's framed columns against the log dir's `_schemas` as it is
    now; None when the write frames nothing."""
    sides = options.framed_sides
    if not sides:
        return None
    if topic is None:
        raise InvalidOptionError(
            f"option '{sides[0]}Format' needs the 'topic' option: the subject a schema is "
            f"registered under is named after the topic (TopicNameStrategy)", "topic")
    if topic == SCHEMAS_TOPIC:
        raise InvalidOptionError(f"topic {SCHEMAS_TOPIC!r} holds the schemas themselves; "
                                 f"it takes no framed values", "topic")
    column_types = dict(framed_types)
    registry = registry_from_partition_dir(schemas_partition_dir(logdir))
    planned = []
    for side in sides:
        if side not in column_types:
            raise InvalidInputError(f"option '{side}Format' is avro, and the data has no "
                                    f"{side!r} column")
        text = _schema_text(options, side, column_types[side])
        planned.append(_plan_side(registry, side, f"{topic}-{side}", text))
    return FramingPlan(tuple(planned), tuple(framed_types))


def confirm_framing(plan: FramingPlan, options, topic: str, logdir: str) -> FramingPlan:
    """At commit, under the `_schemas` lock: the plan again against `_schemas` as it is
    now. The ids the tasks framed with must still be what the registry gives."""
    now = plan_framing(options, topic, logdir, plan.column_types)
    for before, after in zip(plan.sides, now.sides):
        if before.schema_id != after.schema_id:
            raise ConcurrentWriteError(
                f"the {SCHEMAS_TOPIC} topic in {logdir} changed while this write ran: the "
                f"{before.side} schema of subject {before.subject!r} was framed with id "
                f"{before.schema_id} and now gets id {after.schema_id}; nothing was written")
    return now


def schema_records_table(plan: FramingPlan) -> Optional[pa.Table]:
    """The `_schemas` records this write appends (None: it registers nothing)."""
    rows = [records.encode_record(side.schema_record()) for side in plan.registrations]
    if not rows:
        return None
    return pa.table({"key": pa.array([k for k, _ in rows], pa.binary()),
                     "value": pa.array([v for _, v in rows], pa.binary()),
                     "partition": pa.array([0] * len(rows), pa.int32())})


# -- encoding ---------------------------------------------------------------------


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


def encode_column(column: pa.Array, side: FramedSide, where: str, first_row: int = 0
                  ) -> pa.Array:
    """The framed bytes of a struct column (nulls stay null: a null Kafka value)."""
    from fastavro import schemaless_writer

    parsed = _parsed(side.schema)
    convert = _pythonizer(column.type)
    out = []
    buffer = io.BytesIO()
    for row, value in enumerate(column.to_pylist()):
        if value is None:
            out.append(None)
            continue
        if convert is not None:
            value = convert(value)
        buffer.seek(0)
        buffer.truncate()
        buffer.write(side.prefix)
        try:
            schemaless_writer(buffer, parsed, value)
        except Exception as exc:
            raise InvalidInputError(
                f"{where}, row {first_row + row}: column {side.side!r} does not fit the Avro schema of "
                f"subject {side.subject!r} (id {side.schema_id}): "
                f"{_misfit(value, parsed) or exc}") from None
        out.append(buffer.getvalue())
    return pa.array(out, pa.binary())


def encode_framed(table: pa.Table, plan: FramingPlan, where: str, first_row: int = 0
                  ) -> pa.Table:
    """`table` with its framed columns replaced by their framed bytes; `where` and
    `first_row` (the number of the table's first row there) place a row in errors."""
    for side in plan.sides:
        index = table.schema.get_field_index(side.side)
        column = table.column(index).combine_chunks()
        if isinstance(column, pa.ChunkedArray):  # no chunk at all
            column = pa.array([], column.type)
        table = table.set_column(index, side.side, encode_column(column, side, where, first_row))
    return table
