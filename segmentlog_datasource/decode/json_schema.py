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
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa

from ..errors import RecordDecodeError
from ..schemas.json_schema.mapping import (
    JsonSchemaMappingError, Mapper, Misfit, SchemaDocument, resolution_problem,
)
from .value_formats import (FRAME_SIZE, FormatReader, IncompatibleSchemaError, ValueFormat,
                            decoded_rows, frame_error)

# Whether values decode through the compiled decoder (json_program.py) when it is built;
# tests set it (or pass `compiled`) to force either twin.
USE_COMPILED = True


class JsonSchemaColumn:
    """The column of one subject version's JSON Schema: its Arrow type and the conversion
    of a parsed JSON value into it."""

    def __init__(self, document: SchemaDocument):
        self.document = document
        self._node = Mapper(document).map()
        self.type: pa.DataType = self._node.type
        self._convert = self._node.checked(True)
        self._program = None  # the compiled decoder's program, once asked for; False: none

    def decode_bodies(self, bodies, compiled: Optional[bool] = None
                      ) -> Tuple[Any, List[Optional[str]]]:
        """Each JSON document of `bodies` (framed values after their frames: a sequence of
        bytes, or value_formats.Payloads) as the column holds it, and each one's error
        reason (None where it decoded; its value is then null). The values are a pa.Array
        from the compiled decoder (json_program.py), whose errors are None when every
        document decoded, or a list from the row-by-row path when it is not built.
        `compiled` (default USE_COMPILED) says whether it may be used; both give the same
        values and reasons."""
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
        return resolution_problem(writer._node, self._node, "")


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
        for row, error in zip(rows, body_errors or ()):
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
        built), the same values and reasons as decode (None for the reasons when every
        payload decoded)."""
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
