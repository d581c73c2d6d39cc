"""Confluent-framed values and keys: a struct column written as Schema Registry's
serializers write it (a zero magic byte, the 4-byte big-endian schema id, Protobuf's
message indexes, then the payload in the schema's language: Avro binary, JSON Schema's
JSON text, Protobuf binary), its schema registered in the log dir's `_schemas` topic as
Schema Registry registers it. What differs between the languages lives in their
SchemaFormat (schema_format.py); this module does the rest, the same for all of them.

Planning (on the driver, when the column types are known): the schema is the option's
(`valueAvroSchema`, `valueJsonSchema`, `valueProtobufSchema`, ...), else derived from the
column's type. The subject is named by `subjectNameStrategy` (TopicNameStrategy
`<topic>-value` by default; the record strategies take the schema's record name). The
log dir's `_schemas` partition is replayed (schemas/registry.py): a
schema the subject already holds keeps its id and registers nothing; a new one is checked
against the subject's versions at its compatibility level (its CONFIG record's, else the
global one, else BACKWARD) and gets the id of the same schema under another subject, else
the next id, and the subject's next version. Tasks frame rows with that id. The commit,
holding the `_schemas` lock, replays the topic again and plans once more: the same ids,
or the write fails (another writer took them); the SCHEMA records go into the same
publish as the data, so a failed write leaves no schema registered.
"""
from dataclasses import dataclass
from typing import List, Optional, Tuple

import pyarrow as pa

from ..errors import InvalidOptionError
from ..schemas import registry_records as records
from ..schemas.registry import (
    SCHEMAS_TOPIC, RegisteredSchema, SchemaRegistry, registry_from_records, subject_for,
)
from ..format.log import partition_dir_name
from .errors import ConcurrentWriteError, InvalidInputError, WriteError
from .schema_format import LABELS, PayloadMisfit, SchemaFormat, schema_format

MAGIC_BYTE = b"\x00"
READ_ONLY_MODES = ("READONLY", "READONLY_OVERRIDE")


class SchemaRegistrationError(WriteError):
    """A schema the subject refuses (incompatible, or the subject is read-only)."""


@dataclass(frozen=True)
class FramedSide:
    side: str  # "key" | "value"
    format: str  # "avro" | "json" | "protobuf"
    subject: str
    schema_id: int
    schema: str  # the schema text, as registered
    version: Optional[int] = None  # the version this write registers; None: held already
    indexes: bytes = b""  # what follows the schema id (Protobuf's message indexes)
    message: Optional[str] = None  # the record of a given schema written (Protobuf's)

    @property
    def prefix(self) -> bytes:
        return MAGIC_BYTE + self.schema_id.to_bytes(4, "big") + self.indexes

    @property
    def language(self) -> SchemaFormat:
        return schema_format(self.format)

    def schema_record(self) -> records.RegistryRecord:
        """The SCHEMA record Schema Registry writes for this registration."""
        value = records.SchemaValue(self.subject, self.version, self.schema_id, self.schema,
                                    schema_type=self.language.schema_type)
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


def registry_from_partition_dir(directory: str, store=None) -> SchemaRegistry:
    """A registry replayed from a `_schemas-0` partition directory (local, or a path of
    `store`), every record of its segments in offset order (the writer's view of its own
    log dir, under the topic's lock: nothing there is uncommitted). A missing directory:
    an empty registry."""
    import os

    from ..format.log import PartitionLog
    from ..format.scan import ScanOptions, SegmentRange, scan_segment

    if store is None:
        source = f"the {os.path.basename(directory)} partition in {os.path.dirname(directory)}"
        if not os.path.isdir(directory):
            return SchemaRegistry(source)
        log = PartitionLog.open(directory)
    else:
        source = f"the {store.basename(directory)} partition in {store.dirname(directory)}"
        tree = store.tree(directory)
        if not tree.isdir(directory):
            return SchemaRegistry(source)
        log = PartitionLog.open(directory, store, tree)
    rows = []
    for segment in log.segments:
        scanned = SegmentRange(log.topic, log.partition, segment.log_path, segment.size, 0,
                               segment.size, 0, 1 << 62, allow_torn_tail=log.is_last(segment),
                               store=log.store)
        for batch in scan_segment(scanned, ScanOptions()):
            rows.extend(zip(batch.column("offset").to_pylist(),
                            batch.column("key").to_pylist(), batch.column("value").to_pylist()))
    rows.sort(key=lambda row: row[0])
    return registry_from_records(rows, log.topic, log.partition, source)


def schemas_partition_dir(logdir: str, store=None) -> str:
    import os

    name = partition_dir_name(SCHEMAS_TOPIC, 0)
    return os.path.join(logdir, name) if store is None else store.join(logdir, name)


def _schema_text(options, language: SchemaFormat, side: str, column_type: pa.DataType
                 ) -> Tuple[str, Optional[str]]:
    """(the schema text, the message of it written: None for the language's default)."""
    given = options.given_schema(side)
    if given is None:
        return language.derive_schema(column_type, options.record_name(side), side), None
    option, text = given
    message = options.record_name(side) if language.picks_message else None
    return language.given_schema(text, option, column_type, side,
                                 **_picked(message)), message


def _picked(message: Optional[str]) -> dict:
    """The `message` argument of a language that picks_message, when a message is picked."""
    return {} if message is None else {"message": message}


def _plan_side(registry: SchemaRegistry, language: SchemaFormat, side: str, subject: str,
               text: str, message: Optional[str]) -> FramedSide:
    kind = language.schema_type
    indexes = language.message_indexes(text, **_picked(message))
    for held in registry.versions(subject):
        if held.schema_type == kind and language.same_schema(held.schema, text):
            return FramedSide(side, language.name, subject, held.id, held.schema,
                              indexes=indexes, message=message)
    mode = registry.mode(subject)
    if mode in READ_ONLY_MODES:
        raise SchemaRegistrationError(
            f"subject {subject!r} in {registry.source} is in mode {mode}: Schema Registry "
            f"registers no schema there")
    level = registry.compatibility(subject)
    live = registry.versions(subject)
    version = registry.next_version(subject)
    other_types = [s for s in live if s.schema_type != kind]
    if other_types and level.upper() != "NONE":
        raise SchemaRegistrationError(
            f"subject {subject!r} in {registry.source} holds {other_types[-1]} of type "
            f"{other_types[-1].schema_type}; a {kind} schema cannot be checked against it "
            f"(compatibility {level})")
    problem = language.compatibility_problem(
        level, text, [(s.version, s.schema) for s in live if s.schema_type == kind])
    if problem is not None:
        against, reason = problem
        raise SchemaRegistrationError(
            f"the {side} schema is incompatible with subject {subject!r} version {against} "
            f"in {registry.source} at compatibility level {level} (it would have been "
            f"version {version}): {reason}; nothing was written")
    same = [s for name in registry.subjects(include_deleted=True)
            for s in registry.versions(name, include_deleted=True)
            if s.schema_type == kind and not s.references
            and language.same_schema(s.schema, text)]
    schema_id = min(s.id for s in same) if same else registry.next_id()
    registry.register(RegisteredSchema(schema_id, subject, version, kind, text))
    return FramedSide(side, language.name, subject, schema_id, text, version, indexes, message)


def plan_framing(options, topic: Optional[str], logdir: str,
                 framed_types: Tuple[Tuple[str, pa.DataType], ...], store=None
                 ) -> Optional[FramingPlan]:
    """The plan of a write's framed columns against the log dir's `_schemas` as it is
    now (`store`: the log dir's object store; None: a local log dir); None when the write
    frames nothing."""
    sides = options.framed_sides
    if not sides:
        return None
    if topic is None:
        raise InvalidOptionError(
            f"option '{sides[0]}Format' needs the 'topic' option: the subject a schema is "
            f"registered under is named after the topic", "topic")
    if topic == SCHEMAS_TOPIC:
        raise InvalidOptionError(f"topic {SCHEMAS_TOPIC!r} holds the schemas themselves; "
                                 f"it takes no framed values", "topic")
    column_types = dict(framed_types)
    registry = registry_from_partition_dir(schemas_partition_dir(logdir, store), store)
    planned = []
    for side in sides:
        fmt = options.framed_format(side)
        if side not in column_types:
            raise InvalidInputError(f"option '{side}Format' is {fmt}, and the data has no "
                                    f"{side!r} column")
        language = schema_format(fmt)
        text, message = _schema_text(options, language, side, column_types[side])
        subject = subject_for(options.subject_name_strategy, topic, side == "key",
                              language.record_name(text, **_picked(message)))
        planned.append(_plan_side(registry, language, side, subject, text, message))
    return FramingPlan(tuple(planned), tuple(framed_types))


def confirm_framing(plan: FramingPlan, options, topic: str, logdir: str, store=None
                    ) -> FramingPlan:
    """At commit, under the `_schemas` lock: the plan again against `_schemas` as it is
    now. The ids the tasks framed with must still be what the registry gives."""
    now = plan_framing(options, topic, logdir, plan.column_types, store)
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


def encode_column(column: pa.Array, side: FramedSide, where: str, first_row: int = 0
                  ) -> pa.Array:
    """The framed bytes of a struct column (nulls stay null: a null Kafka value)."""
    language = side.language
    try:
        payloads = language.encode_payloads(column, side.schema, **_picked(side.message))
    except PayloadMisfit as misfit:
        raise InvalidInputError(
            f"{where}, row {first_row + misfit.row}: column {side.side!r} does not fit the "
            f"{LABELS[side.format]} schema of subject {side.subject!r} (id "
            f"{side.schema_id}): {misfit.reason}") from None
    prefix = side.prefix
    return pa.array([None if p is None else prefix + p for p in payloads], pa.binary())


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
