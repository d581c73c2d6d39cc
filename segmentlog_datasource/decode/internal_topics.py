"""An internal topic's records as typed columns, appended to a read's Arrow batches.

`keyDecoded` and `valueDecoded` are structs of one struct per record type (the way Spark's
Avro reader maps a union to a struct of its members): the member named by the row's
`recordType` holds the decoded key or value, every other member is null. Each member has
its record type's fields with Kafka's own types, at every depth, whatever other record
types call a field of the same name.
"""
from typing import List, Optional

import pyarrow as pa

from ..errors import RecordDecodeError
from ..format.internal.topics import DecodedRecord, InternalTopic

_PRIMITIVES = {
    "bool": pa.bool_(), "int8": pa.int8(), "int16": pa.int16(), "uint16": pa.int32(),
    "int32": pa.int32(), "uint32": pa.int64(), "int64": pa.int64(),
    "float64": pa.float64(), "string": pa.string(), "bytes": pa.binary(),
    "records": pa.binary(),
}


def arrow_type(shape) -> pa.DataType:
    """The Arrow (and so Spark) type of a messages.field_tree shape. Unsigned numbers
    take the next wider signed type: Spark has none."""
    if isinstance(shape, tuple):
        kind, inner = shape
        if kind == "array":
            return pa.list_(pa.field("element", arrow_type(inner)))
        return struct_type(list(inner.items()))
    return _PRIMITIVES[shape]


def struct_type(fields) -> pa.StructType:
    return pa.struct([pa.field(name, arrow_type(shape)) for name, shape in fields])


def record_type_struct(members) -> pa.StructType:
    """A struct of one member struct per (record type name, its fields)."""
    return pa.struct([pa.field(name, struct_type(fields)) for name, fields in members])


class InternalTopicColumns:
    """Appends the decoded columns of `topic`'s records to Arrow batches of a read:
    recordType, keyVersion, valueVersion, keyDecoded, valueDecoded, deleted, for a topic
    with snapshot files `snapshot` (the file a row comes from, null for the log's), and
    when permissive, decodeError."""

    def __init__(self, topic: InternalTopic, permissive: bool = False):
        self.topic = topic
        self.permissive = permissive
        shapes = topic.record_shapes()
        # a key member for each record type that has a key (metadata records have none)
        self.key_type = record_type_struct([(shape.name, shape.key) for shape in shapes
                                            if shape.key])
        self.value_type = record_type_struct([(shape.name, shape.value) for shape in shapes])
        self._keyed = {field.name for field in self.key_type}

    def fields(self) -> List[pa.Field]:
        fields = [
            pa.field("recordType", pa.string()),
            pa.field("keyVersion", pa.int32()),
            pa.field("valueVersion", pa.int32()),
            pa.field("keyDecoded", self.key_type),
            pa.field("valueDecoded", self.value_type),
            pa.field("deleted", pa.bool_()),
        ]
        if self.topic.has_snapshots:
            fields.append(pa.field("snapshot", pa.string()))
        if self.permissive:
            fields.append(pa.field("decodeError", pa.string()))
        return fields

    def schema(self, base: pa.Schema) -> pa.Schema:
        return pa.schema(list(base) + self.fields())

    def decode_batch(self, batch: pa.RecordBatch, snapshot: Optional[str] = None
                     ) -> pa.RecordBatch:
        """`batch` with the decoded columns; `snapshot`: the snapshot file it was read
        from, if any."""
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        topics = batch.column("topic")
        partitions = batch.column("partition")
        offsets = batch.column("offset")
        control = batch.schema.get_field_index("controlType")
        control_types = batch.column(control).to_pylist() if control >= 0 else None
        types, key_versions, value_versions, decoded_keys, decoded_values = [], [], [], [], []
        deleted, errors = [], []
        for row, (key, value) in enumerate(zip(keys, values)):
            error = None
            if control_types is not None and control_types[row] is not None:
                record = DecodedRecord(None, None, None, None, None, False)
            else:
                try:
                    record = self.topic.decode(key, value)
                except RecordDecodeError as failure:
                    placed = failure.at(topics[row].as_py(), partitions[row].as_py(),
                                        offsets[row].as_py())
                    if not self.permissive:
                        raise placed from None
                    record = DecodedRecord(None, None, None, None, None, value is None)
                    error = str(placed)
            types.append(record.record_type)
            key_versions.append(record.key_version)
            value_versions.append(record.value_version)
            decoded_keys.append(None if record.key is None or record.record_type not in
                                self._keyed else {record.record_type: record.key})
            decoded_values.append(None if record.value is None
                                  else {record.record_type: record.value})
            deleted.append(record.deleted)
            errors.append(error)
        columns = list(batch.columns) + [
            pa.array(types, pa.string()),
            pa.array(key_versions, pa.int32()),
            pa.array(value_versions, pa.int32()),
            pa.array(decoded_keys, self.key_type),
            pa.array(decoded_values, self.value_type),
            pa.array(deleted, pa.bool_()),
        ]
        if self.topic.has_snapshots:
            columns.append(pa.array([snapshot] * len(keys), pa.string()))
        if self.permissive:
            columns.append(pa.array(errors, pa.string()))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema(batch.schema))
