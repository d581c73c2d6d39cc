"""The Arrow side of records: the schema of a read, batch assembly and binary columns.

The Arrow schema is the one Spark's Kafka source produces (the Spark schema is derived
from it), so batches can be handed to Spark as they are.
"""
import numpy as np
import pyarrow as pa

HEADER_TYPE = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)
BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
ARROW_SCHEMA = pa.schema(BASE_FIELDS)
ARROW_SCHEMA_WITH_HEADERS = pa.schema(BASE_FIELDS + [pa.field("headers", HEADER_TYPE)])


def arrow_schema(include_headers: bool) -> pa.Schema:
    return ARROW_SCHEMA_WITH_HEADERS if include_headers else ARROW_SCHEMA


def constant_string_array(text: str, length: int) -> pa.Array:
    data = text.encode("utf-8")
    offsets = np.arange(0, (length + 1) * len(data), len(data) or 1, dtype=np.int32)[: length + 1]
    if not data:
        offsets = np.zeros(length + 1, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), length, [None, pa.py_buffer(offsets), pa.py_buffer(data * length)]
    )


_TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


def _micros_from_millis(millis, length: int) -> pa.Array:
    """Kafka's epoch milliseconds as Spark's microsecond timestamps.

    Built from raw buffers: pyarrow's numpy conversions probe for pandas, whose import
    would cost a fresh Spark worker a fifth of a second.
    """
    if isinstance(millis, pa.Array):
        values = np.frombuffer(millis.buffers()[1], dtype=np.int64, count=length,
                               offset=millis.offset * 8)
    else:
        values = np.fromiter(millis, dtype=np.int64, count=length)
    return pa.Array.from_buffers(_TIMESTAMP_TYPE, length, [None, pa.py_buffer(values * 1000)])


def finish_batch(topic, partition, offsets, timestamps_ms, timestamp_types, keys, values,
                 headers, include_headers) -> pa.RecordBatch:
    """Assemble one Arrow batch from decoded columns (Arrow arrays or Python sequences)."""
    length = len(offsets)
    offsets = pa.array(offsets, pa.int64()) if not isinstance(offsets, pa.Array) else offsets
    timestamps = _micros_from_millis(timestamps_ms, length)
    columns = [
        keys if isinstance(keys, pa.Array) else pa.array(keys, pa.binary()),
        values if isinstance(values, pa.Array) else pa.array(values, pa.binary()),
        constant_string_array(topic, length),
        pa.Array.from_buffers(pa.int32(), length,
                              [None, pa.py_buffer(np.full(length, partition, dtype=np.int32))]),
        offsets,
        timestamps,
        timestamp_types if isinstance(timestamp_types, pa.Array)
        else pa.array(timestamp_types, pa.int32()),
    ]
    if include_headers:
        if not isinstance(headers, pa.Array):
            headers = pa.array(
                [[{"key": k, "value": v} for k, v in row] for row in headers], HEADER_TYPE
            )
        columns.append(headers)
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def as_binary(array) -> pa.Array:
    """A binary (or string, large, fixed-size, null) column as a plain binary array."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_binary(array.type):
        return array
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), pa.binary())
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type) or \
            pa.types.is_large_binary(array.type) or pa.types.is_fixed_size_binary(array.type):
        return array.cast(pa.binary())
    raise TypeError(f"expected a binary or string column, got {array.type}")


def binary_offsets(array: pa.Array) -> np.ndarray:
    """The n+1 value offsets of a binary array (int64, indexes into its data buffer)."""
    dtype = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    raw = np.frombuffer(array.buffers()[1], dtype=dtype)
    return raw[array.offset : array.offset + len(array) + 1].astype(np.int64)


def binary_lengths(array: pa.Array) -> np.ndarray:
    """int64 byte lengths of a binary array, -1 for nulls."""
    import pyarrow.compute as pc  # costs a fresh Spark worker time; only writes need it

    lengths = pc.binary_length(array).fill_null(-1)
    return np.asarray(lengths.to_numpy(zero_copy_only=False), dtype=np.int64)
