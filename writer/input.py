"""The columns a write takes, checked and normalised, as Spark's Kafka sink expects them.

The columns are tabled in docs/writing.md, "Columns". Strings are written as their
UTF-8 bytes.
"""
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
import pyarrow as pa

from ..format.arrow import as_binary_column, binary_lengths, int64_array, int64_values, validity
from ..format.layout import INT32_MAX
from ..errors import did_you_mean
from .errors import InvalidInputError

COLUMNS = ("key", "value", "topic", "partition", "timestamp", "headers")
# Columns a read gives that a producer does not set: the broker assigns offsets and the
# timestamp type is the topic's. A write ignores them, as Spark's Kafka sink does, so a
# DataFrame read from a topic writes back as it is.
READ_ONLY_COLUMNS = ("offset", "timestampType")
_UNIT_TO_MS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


def check_column_names(names, what: str = "column") -> None:
    """Refuse names that are not Kafka columns, naming them and the columns a write takes."""
    unknown = [n for n in names if n not in COLUMNS and n not in READ_ONLY_COLUMNS]
    if unknown:
        hints = "".join(did_you_mean(n, COLUMNS) for n in unknown)
        raise InvalidInputError(
            f"{what}(s) {', '.join(repr(n) for n in unknown)}{hints} cannot be written to "
            f"Kafka; a segmentlog write takes only {', '.join(COLUMNS)}, and ignores "
            f"{' and '.join(READ_ONLY_COLUMNS)} (select or drop columns first, e.g. "
            f"df.select('key', 'value'))"
        )


def _is_bytes_like(t: pa.DataType) -> bool:
    return (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t) or pa.types.is_null(t))


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _headers_ok(t: pa.DataType) -> bool:
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return False
    element = t.value_type
    if not pa.types.is_struct(element) or element.num_fields != 2:
        return False
    key, value = element.field(0), element.field(1)
    return key.name == "key" and _is_string(key.type) and value.name == "value" and \
        _is_bytes_like(value.type)


def in_utc(t: pa.DataType) -> pa.DataType:
    """`t` with every zoned timestamp in it, at any depth, zoned UTC. Spark's Arrow batches
    carry the session's time zone on their timestamps, but a timestamp's values are
    instants (microseconds since the epoch) in any zone: only the label differs."""
    if pa.types.is_timestamp(t):
        return pa.timestamp(t.unit, "UTC") if t.tz is not None else t
    if pa.types.is_struct(t):
        return pa.struct([field.with_type(in_utc(field.type)) for field in t])
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(in_utc(t.key_type)),
                       t.item_field.with_type(in_utc(t.item_type)), t.keys_sorted)
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(in_utc(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(in_utc(t.value_type)), t.list_size)
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(in_utc(t.value_type)))
    return t


def framed_in_utc(table: pa.Table, framed: Tuple[str, ...]) -> pa.Table:
    """`table` with its framed columns' timestamps zoned UTC (in_utc): the same values."""
    for name in framed:
        index = table.schema.get_field_index(name)
        if index < 0:
            continue
        wanted = in_utc(table.schema.field(index).type)
        if wanted != table.schema.field(index).type:
            table = table.set_column(index, table.schema.field(index).with_type(wanted),
                                     table.column(index).cast(wanted))
    return table


@dataclass(frozen=True)
class InputLayout:
    """Which of the Kafka columns the input has (checked against its schema)."""

    has_key: bool
    has_topic: bool
    has_partition: bool
    has_timestamp: bool
    has_headers: bool
    # (column, struct type) of the columns written Confluent-framed (writer/framed.py)
    framed_types: Tuple[Tuple[str, pa.DataType], ...] = ()

    @classmethod
    def from_schema(cls, schema: pa.Schema, topic_option: Optional[str],
                    framed: Tuple[str, ...] = ()) -> "InputLayout":
        """`framed`: the columns (key, value) the write encodes from a struct."""
        names = list(schema.names)
        for name in set(names):
            if names.count(name) > 1:
                raise InvalidInputError(f"column {name!r} appears twice")
        check_column_names(names)
        if "value" not in names:
            raise InvalidInputError(
                "the data has no 'value' column; a segmentlog write needs one (binary or string)"
            )
        checks = {
            "key": (_is_bytes_like, "binary or string"),
            "value": (_is_bytes_like, "binary or string"),
            "topic": (lambda t: _is_string(t) or pa.types.is_null(t), "string"),
            "partition": (lambda t: pa.types.is_integer(t) or pa.types.is_null(t), "int"),
            "timestamp": (lambda t: pa.types.is_timestamp(t) or pa.types.is_null(t), "timestamp"),
            "headers": (lambda t: _headers_ok(t) or pa.types.is_null(t),
                        "array<struct<key: string, value: binary>>"),
        }
        for name in names:
            if name in READ_ONLY_COLUMNS:
                continue
            accept, wanted = checks[name]
            if name in framed:
                accept, wanted = pa.types.is_struct, \
                    f"a struct (option '{name}Format' frames it)"
            if not accept(schema.field(name).type):
                raise InvalidInputError(
                    f"column {name!r} has type {schema.field(name).type}; a segmentlog write "
                    f"needs {wanted} there"
                )
        if "topic" not in names and not topic_option:
            raise InvalidInputError(
                "no topic to write to: add a 'topic' column or set the 'topic' option"
            )
        framed_types = tuple((name, in_utc(schema.field(name).type)) for name in framed
                             if name in names)
        return cls("key" in names, "topic" in names, "partition" in names,
                   "timestamp" in names, "headers" in names, framed_types)


@dataclass
class NormalizedRows:
    """One chunk of input as the encoder takes it."""

    keys: pa.Array  # binary (a pa.ChunkedArray of binary chunks when the input had several)
    values: pa.Array  # binary (likewise)
    timestamps: np.ndarray  # int64 ms
    headers: Optional[pa.Array]
    partitions: Optional[np.ndarray]  # int64, -1 where not given; None without the column
    topics: Optional[pa.Array]  # string, None when the topic option applies

    def __len__(self):
        return len(self.values)


def _column(table, name):
    column = table.column(name)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return column


def normalize(table, layout: InputLayout, write_time_ms: int,
              topic_option: Optional[str]) -> NormalizedRows:
    """Columns of a pa.Table or RecordBatch turned into the encoder's form."""
    n = table.num_rows
    # Keys and values keep their chunks (Spark's batches): the encoder reads them in place.
    values = as_binary_column(table.column("value"))
    keys = as_binary_column(table.column("key")) if layout.has_key else pa.nulls(n, pa.binary())
    if layout.has_timestamp:
        timestamps = timestamps_ms(_column(table, "timestamp"), write_time_ms)
    else:
        timestamps = np.full(n, write_time_ms, dtype=np.int64)
    headers = None
    if layout.has_headers:
        headers = _column(table, "headers")
        if pa.types.is_null(headers.type) or headers.null_count == n:
            headers = None
    partitions = None
    if layout.has_partition:
        column = _column(table, "partition")
        if pa.types.is_null(column.type):
            partitions = np.full(n, -1, dtype=np.int64)
        else:
            raw = column.cast(pa.int64())
            partitions = int64_values(raw, -1)
            valid = validity(raw)
            bad = valid & ((partitions < 0) | (partitions > INT32_MAX))
            if bad.any():
                raise InvalidInputError(
                    f"column 'partition' holds {int(partitions[bad][0])}; partitions are "
                    f"numbered from 0"
                )
    topics = None
    if layout.has_topic and not topic_option:
        topics = _column(table, "topic")
        if pa.types.is_null(topics.type) or topics.null_count:
            raise InvalidInputError(
                "column 'topic' is null in some rows; fill it or set the 'topic' option"
            )
        if pa.types.is_large_string(topics.type):
            topics = topics.cast(pa.string())
    return NormalizedRows(keys, values, timestamps, headers, partitions, topics)


def timestamps_ms(column: pa.Array, write_time_ms: int) -> np.ndarray:
    """Epoch milliseconds of a timestamp column; nulls become `write_time_ms`."""
    n = len(column)
    if pa.types.is_null(column.type):
        return np.full(n, write_time_ms, dtype=np.int64)
    multiply, divide = _UNIT_TO_MS[column.type.unit]
    raw = column.cast(pa.int64())
    values = int64_values(raw, 0)
    if divide != 1:
        values = np.floor_divide(values, divide)
    elif multiply != 1:
        values = values * multiply
    if raw.null_count:
        values = np.where(validity(raw), values, write_time_ms)
    if n and values.min() < 0:
        first = int(values[values < 0][0])
        raise InvalidInputError(
            f"column 'timestamp' holds a time before 1970-01-01 ({first} ms); Kafka record "
            f"timestamps cannot be negative"
        )
    return values


def approximate_sizes(rows: NormalizedRows) -> np.ndarray:
    """Rough record sizes for spreading keyless rows (key + value bytes + overhead)."""
    sizes = np.maximum(binary_lengths(rows.values), 0) + 8
    if rows.keys.null_count != len(rows.keys):
        sizes += np.maximum(binary_lengths(rows.keys), 0)
    return sizes


def take_rows(rows: NormalizedRows, indices: np.ndarray) -> NormalizedRows:
    index = int64_array(indices)
    return NormalizedRows(
        rows.keys.take(index), rows.values.take(index), rows.timestamps[indices],
        rows.headers.take(index) if rows.headers is not None else None,
        rows.partitions[indices] if rows.partitions is not None else None,
        rows.topics.take(index) if rows.topics is not None else None,
    )


def slice_rows(rows: NormalizedRows, start: int, end: int) -> NormalizedRows:
    return NormalizedRows(
        rows.keys.slice(start, end - start), rows.values.slice(start, end - start),
        rows.timestamps[start:end],
        rows.headers.slice(start, end - start) if rows.headers is not None else None,
        rows.partitions[start:end] if rows.partitions is not None else None,
        rows.topics.slice(start, end - start) if rows.topics is not None else None,
    )
