"""Columnar accumulation of decoded records into Arrow record batches.

The Arrow schema is the one Spark's Kafka source produces, so batches can be handed to
Spark as they are. Rows from many small Kafka batches are merged into one Arrow batch.
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


class RecordAccumulator:
    """Collects decoded records (pure-Python path) until a batch is taken."""

    def __init__(self, include_headers: bool):
        self.include_headers = include_headers
        self._reset()

    def _reset(self):
        self.offsets = []
        self.timestamps = []
        self.timestamp_types = []
        self.keys = []
        self.values = []
        self.headers = []
        self.payload_bytes = 0

    def add(self, offset, timestamp, timestamp_type, key, value, headers):
        self.offsets.append(offset)
        self.timestamps.append(timestamp)
        self.timestamp_types.append(timestamp_type)
        self.keys.append(key)
        self.values.append(value)
        self.headers.append(headers)
        self.payload_bytes += (len(key) if key else 0) + (len(value) if value else 0)

    def __len__(self):
        return len(self.offsets)

    def take(self, topic: str, partition: int) -> pa.RecordBatch:
        batch = finish_batch(
            topic, partition, self.offsets, self.timestamps, self.timestamp_types,
            self.keys, self.values, self.headers, self.include_headers,
        )
        self._reset()
        return batch

    def add_v2_batch(self, data, count, header, min_offset, end_offset, path=None) -> int:
        from .records import decode_v2_records

        return decode_v2_records(data, count, header, self, min_offset, end_offset, path)
