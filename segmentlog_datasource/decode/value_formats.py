"""Schema-Registry-framed keys and values as columns: what every value format shares.

A framed payload is Confluent's wire format: a zero magic byte, the writer schema's id
(4 bytes, big-endian), then the value in the schema's format. This module reads the frame,
groups a batch's rows by schema id, looks each writer schema up in the registry and hands
its payloads to the format (decode/avro.py, decode/json_schema.py), which turns them into
values of the reader schema's type: the subject's latest schema when the read was planned.
Errors follow `mode`: FAILFAST raises RecordDecodeError naming topic, partition and offset;
PERMISSIVE gives a null and the reason in keyError/valueError.
"""
import abc
import collections.abc
import importlib
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from ..errors import InvalidOptionError, RecordDecodeError, SchemaNotFoundError
from ..format.arrow import as_binary, binary_offsets

MAGIC_BYTE = 0
FRAME_SIZE = 5  # the magic byte and the 4-byte schema id
RAW = "raw"
# The formats by option value, imported when a read uses them: "module:attribute".
FORMATS = {
    "avro": "segmentlog_datasource.decode.avro:AVRO",
    "json": "segmentlog_datasource.decode.json_schema:JSON_SCHEMA",
    "protobuf": "segmentlog_datasource.decode.protobuf:PROTOBUF",
}


class IncompatibleSchemaError(Exception):
    """A writer schema that cannot be read as the reader schema at all: every payload
    written with it fails with this reason."""


class FormatReader(abc.ABC):
    """Decodes one format's payloads into values of the reader schema, fixed when the read
    was planned. Pickled with the read to Spark's tasks."""

    arrow_type: pa.DataType

    @abc.abstractmethod
    def decode(self, writer, registry, payloads: Sequence[bytes]
               ) -> Tuple[Any, List[Optional[str]]]:
        """The values of `payloads` (bytes after the frame), all written with the
        registered schema `writer`: a list of Python values pa.array takes for
        `arrow_type` (or a pa.Array of it), and one error reason per payload (None when
        it decoded; its value is then None). Raises IncompatibleSchemaError when no
        payload of `writer` can be read as the reader schema."""

    def decode_columns(self, writer, registry, payloads: Sequence[bytes]
                       ) -> Tuple[Any, Optional[List[Optional[str]]]]:
        """decode's result for a read's column (FramedColumn's call): a format with a
        columnar decoder gives a pa.Array here where its decode gives Python values
        (decode/protobuf.py), and may give None for the errors when every payload decoded
        (a batch's common case, without a list of a None per row); by default, decode's."""
        return self.decode(writer, registry, payloads)


def decoded_rows(decode_one, payloads) -> Tuple[List[Any], List[Optional[str]]]:
    """(values, errors) of `decode_one` applied to each payload: a ValueError is that
    row's error, its value None (the FormatReader.decode contract, for formats that
    decode row by row)."""
    values, errors = [], []
    for payload in payloads:
        try:
            values.append(decode_one(payload))
            errors.append(None)
        except ValueError as failure:
            values.append(None)
            errors.append(str(failure))
    return values, errors


class ValueFormat(abc.ABC):
    """One `valueFormat` / `keyFormat` value."""

    name: str  # the option value
    schema_type: str  # the registry's schemaType of the schemas it decodes
    extra: Optional[str] = None  # the pip extra its dependencies come with
    selects_message = False  # whether reader() takes `message`: which of the schema's types

    def require(self, option: str) -> None:
        """Raise InvalidOptionError naming the extra to install when a dependency is
        missing."""

    @abc.abstractmethod
    def reader(self, schema, registry) -> FormatReader:
        """The reader of the registered schema `schema` (a subject's latest). Raises
        UnsupportedFormatError naming subject and version for a schema with no Spark
        type."""


def value_format(name: str, option: str) -> ValueFormat:
    """The format of option `option`'s value `name` (one of FORMATS), its dependencies
    checked."""
    module_name, attribute = FORMATS[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as missing:
        if missing.name != module_name:
            raise
        raise InvalidOptionError(
            f"option {option!r}: {name} is not available in this version of segmentlog",
            option) from None
    chosen = getattr(module, attribute)
    chosen.require(option)
    return chosen


class _Frames:
    """The frames of a binary column's rows, read from its buffers at once (a loop over
    the rows in Python was most of the cost of a decoded read)."""

    def __init__(self, column: pa.Array, skip=None):
        self.rows = len(column)
        offsets = binary_offsets(column) if self.rows else np.zeros(1, np.int64)
        low, high = int(offsets[0]), int(offsets[-1])
        self.starts, self.ends = offsets[:-1] - low, offsets[1:] - low
        buffers = column.buffers()
        # the column's bytes, in place: payloads are spans of them
        self.data = memoryview(buffers[2].slice(low, high - low)) \
            if buffers[2] is not None and high > low else memoryview(b"")
        self.present = _valid(column)
        if skip is not None:
            self.present &= ~skip
        data = np.frombuffer(self.data, np.uint8)
        framed = self.present & (self.ends - self.starts >= FRAME_SIZE)
        # every row framed, the common case: no row taken out of the arrays
        self.all_framed = bool(framed.all())
        at = self.starts if self.all_framed else self.starts[framed]
        magic = data[at] == MAGIC_BYTE
        if not magic.all():
            self.all_framed = False
            at = at[magic]
            framed[framed] = magic
        self.framed = framed
        ids = np.zeros(len(at), np.int64)
        for byte in range(1, FRAME_SIZE):  # big-endian, then signed as Java's int
            ids = (ids << 8) | data[at + byte]
        ids = np.where(ids >= 1 << 31, ids - (1 << 32), ids)
        if self.all_framed:
            self.ids = ids
        else:
            self.ids = np.zeros(self.rows, np.int64)
            self.ids[self.framed] = ids

    def __len__(self) -> int:
        return self.rows

    def payload(self, row: int) -> bytes:
        return bytes(self.data[self.starts[row]:self.ends[row]])

    def unframed_rows(self) -> List[int]:
        """The rows with a payload that is not framed."""
        if self.all_framed:
            return []
        return np.flatnonzero(self.present & ~self.framed).tolist()

    def by_schema_id(self):
        """(schema id, its rows: an int64 array, or a slice of every row) of the framed
        rows, by schema id."""
        framed_ids = self.ids if self.all_framed else self.ids[self.framed]
        if not len(framed_ids):
            return
        if framed_ids.min() == framed_ids.max():  # the common case, without a sort
            yield int(framed_ids[0]), \
                slice(None) if self.all_framed else np.flatnonzero(self.framed)
            return
        ids = np.unique(framed_ids)
        for schema_id in ids.tolist():
            yield schema_id, np.flatnonzero(self.framed & (self.ids == schema_id))

    def bodies(self, rows) -> "Payloads":
        """The payloads of `rows` after their frames."""
        return Payloads(self.data, self.starts[rows] + FRAME_SIZE, self.ends[rows])


class Payloads(collections.abc.Sequence):
    """Payloads as spans of one buffer (bytes, or a memoryview of a column's data): a
    sequence of bytes for a format that takes them one by one, and `data`, `starts`,
    `ends` (int64 arrays) for one that reads them in place (the compiled Avro and JSON
    decoders), with no bytes object per row."""

    def __init__(self, data, starts, ends):
        self.data = data
        self.starts = np.ascontiguousarray(starts, np.int64)
        self.ends = np.ascontiguousarray(ends, np.int64)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, row):
        if isinstance(row, slice):
            return Payloads(self.data, self.starts[row], self.ends[row])
        return bytes(self.data[int(self.starts[row]):int(self.ends[row])])

    def __iter__(self):
        data = self.data
        return (bytes(data[start:end]) for start, end in zip(self.starts.tolist(),
                                                             self.ends.tolist()))


def _valid(array: pa.Array):
    """Which rows of `array` are not null, as bools."""
    bitmap = array.buffers()[0]
    if bitmap is None:  # none null, or (an all-null array may have no bitmap) all
        return np.full(len(array), array.null_count == 0)
    bits = np.unpackbits(np.frombuffer(bitmap, np.uint8), bitorder="little")
    return bits[array.offset:array.offset + len(array)].astype(bool)


def frame_error(payload: bytes) -> Optional[str]:
    """Why `payload` is not Schema Registry framed, or None."""
    if len(payload) < FRAME_SIZE:
        return (f"truncated payload: {len(payload)} bytes, shorter than the 5-byte Schema "
                f"Registry frame (magic byte 0 and a 4-byte schema id)")
    if payload[0] != MAGIC_BYTE:
        return (f"bad magic byte 0x{payload[0]:02x}: Schema Registry framed payloads start "
                f"with 0x00 (is the topic's data framed by a Schema Registry serializer?)")
    return None


class FramedColumn:
    """The decoded column of one side (key or value) of a read's records."""

    def __init__(self, side: str, format_name: str, schema_type: str, reader: FormatReader,
                 schemas, permissive: bool):
        self.side = side  # "key" or "value"
        self.format_name = format_name
        self.schema_type = schema_type
        self.reader = reader
        self.schemas = schemas  # a SchemaSource: the registry, reloaded on unknown ids
        self.permissive = permissive

    @property
    def arrow_type(self) -> pa.DataType:
        return self.reader.arrow_type

    def decode(self, column: pa.Array, topics, partitions, offsets, skip=None
               ) -> Tuple[pa.Array, Optional[List[Optional[str]]]]:
        """The decoded column of `column` (the binary keys or values, null for a null key
        or value; rows where the bool array `skip` is set are taken as null) and each
        row's error, None when no row has one. FAILFAST raises the first row's error."""
        frames = _Frames(as_binary(column), skip)
        rows_count = len(frames)
        errors: Dict[int, str] = {row: frame_error(frames.payload(row))
                                  for row in frames.unframed_rows()}
        pieces = []  # (rows, pa.Array or a list of values): each writer's values
        for schema_id, selected in frames.by_schema_id():
            rows = np.arange(rows_count) if isinstance(selected, slice) else selected
            writer, reason = self._writer(schema_id)
            if writer is None:
                errors.update((row, reason) for row in rows.tolist())
                continue
            where = f"schema id {schema_id} ({writer.subject} version {writer.version})"
            try:
                decoded, row_errors = self.reader.decode_columns(
                    writer, self.schemas.registry, frames.bodies(selected))
            except IncompatibleSchemaError as incompatible:
                reason = f"incompatible writer schema: {where}: {incompatible}"
                errors.update((row, reason) for row in rows.tolist())
                continue
            if row_errors is not None and row_errors.count(None) != len(row_errors):
                errors.update((row, f"{where}: {error}")
                              for row, error in zip(rows.tolist(), row_errors)
                              if error is not None)
            # a columnar result has a null where a row failed; a list has None
            pieces.append((rows, decoded.cast(self.arrow_type) if isinstance(decoded, pa.Array)
                           else pa.array(decoded, self.arrow_type)))
        placed = None
        if errors:
            if not self.permissive:
                row = min(errors)
                raise RecordDecodeError(f"{self.side}: {errors[row]}").at(
                    topics[row].as_py(), partitions[row].as_py(), offsets[row].as_py())
            placed = [None] * rows_count
            for row, error in errors.items():
                placed[row] = str(RecordDecodeError(f"{self.side}: {error}").at(
                    topics[row].as_py(), partitions[row].as_py(), offsets[row].as_py()))
        if len(pieces) == 1 and len(pieces[0][0]) == rows_count:
            return pieces[0][1], placed  # the common case: every row one schema id
        # Each row's position in [a null] + the pieces' values, then one take.
        index = np.zeros(rows_count, np.int64)
        start = 1
        for rows, array in pieces:
            index[rows] = np.arange(start, start + len(rows))
            start += len(rows)
        values = pa.concat_arrays([pa.nulls(1, self.arrow_type)]
                                  + [array for _, array in pieces])
        return values.take(pa.array(index)), placed

    def _writer(self, schema_id: int):
        """(the registered schema of `schema_id`, None), or (None, why not)."""
        found, missing = self.schemas.by_id(schema_id)
        if found is None:
            return None, f"unknown schema id: {missing}"
        if found.schema_type != self.schema_type:
            return None, (f"schema id {schema_id} ({found.subject} version {found.version}) "
                          f"is a {found.schema_type} schema, and {self.side}Format="
                          f"{self.format_name} decodes {self.schema_type} schemas")
        return found, None


class SchemaSource:
    """The registry a read decodes with (option `schemas`), loaded when the read is
    planned and pickled with it to the tasks. A schema id it lacks (registered after
    planning, as in a long streaming query) reloads it once per task."""

    def __init__(self, option: Optional[str], read):
        self.option = option
        self.read = read  # the ReadOptions: loaded paths and store settings
        self.registry = self._load()
        self._reloaded = False

    def _load(self):
        from .registry import load_registry

        return load_registry(self.option, self.read.paths, self.read)

    def by_id(self, schema_id: int):
        """(the registered schema of `schema_id`, None), or (None, why it is not found)."""
        try:
            return self.registry.by_id(schema_id), None
        except SchemaNotFoundError as missing:
            if self._reloaded:
                return None, missing.reason
        self._reloaded = True
        self.registry = self._load()
        try:
            return self.registry.by_id(schema_id), None
        except SchemaNotFoundError as missing:
            return None, missing.reason

    def describe(self) -> str:
        return self.registry.source


def framed_topics(read) -> List[str]:
    """The topics a read with valueFormat/keyFormat decodes: those subscribed or
    assigned, else every topic under the loaded paths the selection takes, but the
    registry's own `_schemas` (passed over unless subscribed)."""
    from ..format.log import discover_copies
    from .registry import SCHEMAS_TOPIC

    selection = read.selection
    if selection.topics is not None:
        return list(selection.topics)
    if selection.assigned is not None:
        return sorted({topic for topic, _ in selection.assigned})
    return sorted({log.topic for log in discover_copies(read.paths, read.store)
                   if log.topic != SCHEMAS_TOPIC and selection.matches(log.topic, log.partition)})


class FramedColumns:
    """Appends keyDecoded / valueDecoded (and in PERMISSIVE mode keyError / valueError) to
    a read's Arrow batches. The reader schemas are fixed here, when the read is planned:
    one per side for every topic read (a Spark column has one type)."""

    def __init__(self, decode, read):
        from .registry import subject_for

        self.topics = framed_topics(read)
        if not self.topics:
            raise InvalidOptionError(
                "valueFormat/keyFormat: no topic to decode under " + ", ".join(read.paths)
                + " (the _schemas topic is passed over unless subscribed)", "valueFormat")
        self.schemas = SchemaSource(decode.schemas, read)
        self.columns: List[FramedColumn] = []
        for side in ("key", "value"):
            name = decode.key_format if side == "key" else decode.value_format
            if name == RAW:
                continue
            option = f"{side}Format"
            chosen = value_format(name, option)
            latest: Dict[str, Any] = {}
            for topic in self.topics:
                subject = subject_for(decode.subject_strategy, topic, side == "key",
                                      decode.record_name(side))
                try:
                    latest[topic] = self.schemas.registry.latest(subject)
                except SchemaNotFoundError:
                    raise InvalidOptionError(
                        f"option {option!r} ({name}): topic {topic!r} has no schema under "
                        f"subject {subject!r} ({decode.subject_strategy}) among the schemas of "
                        f"{self.schemas.describe()}: select the topics whose {side}s are "
                        f"framed (option 'subscribe'), or name where schemas come from "
                        f"(option 'schemas')", option) from None
            distinct = {schema.id for schema in latest.values()}
            if len(distinct) > 1:
                listed = "; ".join(f"{topic!r}: subject {s.subject!r} version {s.version} "
                                   f"(schema id {s.id})" for topic, s in latest.items())
                raise InvalidOptionError(
                    f"option {option!r} ({name}): the {side}s of every topic read become one "
                    f"column, of one type, and the topics read have different latest schemas "
                    f"({listed}): read one topic at a time (option 'subscribe')", option)
            reader_schema = next(iter(latest.values()))
            if reader_schema.schema_type != chosen.schema_type:
                raise InvalidOptionError(
                    f"option {option!r} ({name}): the latest schema of subject "
                    f"{reader_schema.subject!r} (version {reader_schema.version}) is "
                    f"{reader_schema.schema_type}, not {chosen.schema_type}", option)
            # A Protobuf schema holds several messages: the record name, with the record
            # name strategies, says which one the column holds (else the first).
            chosen_message = {"message": decode.record_name(side)} \
                if chosen.selects_message and decode.record_name(side) else {}
            reader = chosen.reader(reader_schema, self.schemas.registry, **chosen_message)
            self.columns.append(FramedColumn(side, name, chosen.schema_type, reader,
                                             self.schemas, decode.permissive))
        self.permissive = decode.permissive

    def fields(self) -> List[pa.Field]:
        fields = [pa.field(f"{column.side}Decoded", column.arrow_type) for column in self.columns]
        if self.permissive:
            fields += [pa.field(f"{column.side}Error", pa.string()) for column in self.columns]
        return fields

    def schema(self, base: pa.Schema) -> pa.Schema:
        return pa.schema(list(base) + self.fields())

    def decode_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        topics, partitions = batch.column("topic"), batch.column("partition")
        offsets = batch.column("offset")
        control = batch.schema.get_field_index("controlType")
        # control records carry no framed data
        control_rows = None if control < 0 else _valid(batch.column(control))
        decoded, errors = [], []
        for column in self.columns:
            array, row_errors = column.decode(batch.column(column.side), topics, partitions,
                                              offsets, control_rows)
            decoded.append(array)
            if self.permissive:  # FAILFAST has no error columns
                errors.append(pa.nulls(batch.num_rows, pa.string()) if row_errors is None
                              else pa.array(row_errors, pa.string()))
        arrays = list(batch.columns) + decoded + (errors if self.permissive else [])
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema(batch.schema))
