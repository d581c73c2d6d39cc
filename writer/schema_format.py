"""What a framed write needs of one schema language (Avro, JSON Schema, Protobuf): a
schema from a column's type or from an option, the text Schema Registry stores for it,
its compatibility with a subject's versions, its record name, and the payloads of a
column's values. framed.py does the rest, the same for every language: the subject,
the registration in `_schemas`, and the frame (magic byte, schema id, message indexes).
"""
from abc import ABC, abstractmethod
from importlib import import_module
from typing import List, Optional, Tuple

import pyarrow as pa


class PayloadMisfit(Exception):
    """A value that does not fit the schema: `row` is its index in the column encoded."""

    def __init__(self, row: int, reason: str):
        super().__init__(reason)
        self.row = row
        self.reason = reason


class SchemaFormat(ABC):
    name: str  # the valueFormat / keyFormat option's value: "avro"
    schema_type: str  # Schema Registry's schemaType: AVRO, JSON, PROTOBUF
    schema_option: str  # the suffix of the option that gives a schema: valueAvroSchema
    # A schema text may hold several records, of which the record name option picks the
    # one written (Protobuf's messages); such a language's given_schema, record_name,
    # message_indexes and encode_payloads take that name as `message`.
    picks_message: bool = False

    @abstractmethod
    def derive_schema(self, column_type: pa.DataType, record_name: Optional[str],
                      column: str) -> str:
        """The schema text of a struct column, named `record_name` (None: the language's
        default, as Spark's converter names it); InvalidInputError for a type the
        language cannot hold, naming `column` and the field."""

    @abstractmethod
    def given_schema(self, text, option: str, column_type: pa.DataType, column: str) -> str:
        """The schema an option gives, as Schema Registry stores it; InvalidOptionError
        naming `option` when it is not one, InvalidInputError when the column has fields
        it would not write."""

    @abstractmethod
    def same_schema(self, a: str, b: str) -> bool:
        """Whether two schema texts are one schema to Schema Registry (it reuses the id)."""

    @abstractmethod
    def compatibility_problem(self, level: str, new_text: str,
                              previous: List[Tuple[int, str]]) -> Optional[Tuple[int, str]]:
        """(version, reason) of the first of the subject's versions (oldest first in
        `previous`) the new schema breaks at `level`, as Schema Registry checks it;
        None when it is compatible."""

    @abstractmethod
    def record_name(self, text: str) -> str:
        """The fully qualified name RecordNameStrategy names the subject after."""

    def message_indexes(self, text: str) -> bytes:
        """What follows the schema id in the frame (Protobuf's message indexes)."""
        return b""

    @abstractmethod
    def encode_payloads(self, column: pa.Array, text: str) -> List[Optional[bytes]]:
        """The payload of each value of a struct column (None for a null value), without
        the frame; PayloadMisfit for the first value that does not fit."""


_FORMATS = {"avro": ("avro_schema", "AvroFormat"),
            "json": ("json_schema", "JsonSchemaFormat"),
            "protobuf": ("protobuf_schema", "ProtobufFormat")}
FRAMED_FORMAT_NAMES = tuple(_FORMATS)
LABELS = {"avro": "Avro", "json": "JSON Schema", "protobuf": "Protobuf"}  # for messages


def schema_format(name: str) -> SchemaFormat:
    """The SchemaFormat of a valueFormat / keyFormat value (imported when first asked:
    each language loads its own libraries)."""
    module, cls = _FORMATS[name]
    return getattr(import_module(f"{__package__}.{module}"), cls)()
