"""The Arrow side of records: the schema of a read, batch assembly and binary columns.

The Arrow schema is the one Spark's Kafka source produces (the Spark schema is derived
from it), so batches can be handed to Spark as they are.
"""
import functools

import numpy as np
import pyarrow as pa

from .compression import CODEC_NAMES
from .control import control_type_name
from .fastpath.protocol import (
    ENTRY_ATTRIBUTES, ENTRY_BASE_OFFSET, ENTRY_BASE_SEQUENCE, ENTRY_CONTROL_TYPE,
    ENTRY_COORDINATOR_EPOCH, ENTRY_END_ROW, ENTRY_LEADER_EPOCH, ENTRY_MAGIC, ENTRY_POSITION,
    ENTRY_PRODUCER_EPOCH, ENTRY_PRODUCER_ID, NO_COORDINATOR_EPOCH, NOT_CONTROL,
)
from .layout import ATTR_COMPRESSION_MASK, ATTR_TRANSACTIONAL

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")  # Spark's timestamp column
HEADER_TYPE = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)
BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
]
HEADERS_FIELD = pa.field("headers", HEADER_TYPE)
# includeMetadata: the record's batch, as Kafka's RecordBatch and kafka-dump-log show it
# (-1 / false where a legacy message has no such field).
METADATA_FIELDS = [
    pa.field("producerId", pa.int64()),
    pa.field("producerEpoch", pa.int32()),
    pa.field("sequence", pa.int32()),  # the record's own: baseSequence + offset delta
    pa.field("leaderEpoch", pa.int32()),  # the batch's partitionLeaderEpoch
    pa.field("isTransactional", pa.bool_()),
    pa.field("compression", pa.string()),
    pa.field("magic", pa.int32()),
    pa.field("batchOffset", pa.int64()),  # the batch's base offset
    pa.field("segment", pa.string()),  # the segment file's name
    pa.field("position", pa.int64()),  # the batch's byte position in it
]
# includeControlRecords: control records are rows too; null for data rows.
CONTROL_FIELDS = [
    pa.field("controlType", pa.string()),  # Kafka's ControlRecordType name
    pa.field("coordinatorEpoch", pa.int32()),  # a transaction marker's
]
ARROW_SCHEMA = pa.schema(BASE_FIELDS)
ARROW_SCHEMA_WITH_HEADERS = pa.schema(BASE_FIELDS + [HEADERS_FIELD])


@functools.lru_cache(maxsize=None)
def arrow_schema(include_headers: bool, include_metadata: bool = False,
                 include_control_records: bool = False) -> pa.Schema:
    """The columns of a read, in order: Kafka's source columns (headers with
    include_headers), then the metadata columns, then the control record columns."""
    if not include_metadata and not include_control_records:
        return ARROW_SCHEMA_WITH_HEADERS if include_headers else ARROW_SCHEMA
    fields = BASE_FIELDS + ([HEADERS_FIELD] if include_headers else [])
    if include_metadata:
        fields = fields + METADATA_FIELDS
    if include_control_records:
        fields = fields + CONTROL_FIELDS
    return pa.schema(fields)


def constant_string_array(text: str, length: int) -> pa.Array:
    data = text.encode("utf-8")
    offsets = np.arange(0, (length + 1) * len(data), len(data) or 1, dtype=np.int32)[: length + 1]
    if not data:
        offsets = np.zeros(length + 1, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), length, [None, pa.py_buffer(offsets), pa.py_buffer(data * length)]
    )


def micros_from_millis(millis, length: int) -> pa.Array:
    """Kafka's epoch milliseconds as Spark's microsecond timestamps.

    Built from raw buffers: pyarrow's numpy conversions probe for pandas, whose import
    would cost a fresh Spark worker a fifth of a second.
    """
    if isinstance(millis, pa.Array):
        values = np.frombuffer(millis.buffers()[1], dtype=np.int64, count=length,
                               offset=millis.offset * 8)
    else:
        values = np.fromiter(millis, dtype=np.int64, count=length)
    return pa.Array.from_buffers(TIMESTAMP_TYPE, length, [None, pa.py_buffer(values * 1000)])


def finish_batch(topic, partition, offsets, timestamps, timestamp_types, keys, values,
                 headers, include_headers) -> pa.RecordBatch:
    """Assemble one Arrow batch from decoded columns (Arrow arrays or Python sequences);
    `timestamps` is already Spark's microsecond array (micros_from_millis)."""
    length = len(offsets)
    offsets = pa.array(offsets, pa.int64()) if not isinstance(offsets, pa.Array) else offsets
    columns = [
        keys if isinstance(keys, pa.Array) else pa.array(keys, pa.binary()),
        values if isinstance(values, pa.Array) else pa.array(values, pa.binary()),
        _repeated_string(topic, length),
        _repeated_int32(partition, length),
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
        # combine_chunks copies even a lone chunk
        array = array.chunk(0) if array.num_chunks == 1 else array.combine_chunks()
    if pa.types.is_binary(array.type):
        return array
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), pa.binary())
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type) or \
            pa.types.is_large_binary(array.type) or pa.types.is_fixed_size_binary(array.type):
        return array.cast(pa.binary())
    raise TypeError(f"expected a binary or string column, got {array.type}")


def as_binary_chunks(array) -> list:
    """A binary (or string, ...) column, chunked or not, as a list of plain binary arrays
    (its chunks as they are, no copy for binary ones)."""
    if isinstance(array, pa.ChunkedArray):
        chunks = [as_binary(chunk) for chunk in array.chunks]
        return chunks or [pa.array([], pa.binary())]
    return [as_binary(array)]


def as_binary_column(array):
    """as_binary, except that a column of several chunks stays chunked (each chunk a plain
    binary array, not copied): for readers of the chunks in place (encode.encode_groups)."""
    if isinstance(array, pa.ChunkedArray) and array.num_chunks > 1:
        return pa.chunked_array(as_binary_chunks(array), pa.binary())
    return as_binary(array)


def binary_offsets(array: pa.Array) -> np.ndarray:
    """The n+1 value offsets of a binary array (int64, indexes into its data buffer)."""
    dtype = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    raw = np.frombuffer(array.buffers()[1], dtype=dtype)
    return raw[array.offset : array.offset + len(array) + 1].astype(np.int64)


def binary_lengths(array) -> np.ndarray:
    """int64 byte lengths of a binary array (or chunked column), -1 for nulls."""
    if isinstance(array, pa.ChunkedArray):
        return _per_chunk(binary_lengths, array)
    array = as_binary(array)
    offsets = binary_offsets(array)
    lengths = offsets[1:] - offsets[:-1]
    return np.where(validity(array), lengths, -1) if array.null_count else lengths


# Arrays a Spark worker reads or builds go through their buffers, not through pyarrow's
# conversions of Python and numpy values (pa.array, pa.scalar, fill_null with a Python
# value, to_numpy(zero_copy_only=False)): those import pandas where it is installed, a
# second of a fresh worker's first task.

def _per_chunk(function, column, *args) -> np.ndarray:
    parts = [function(chunk, *args) for chunk in column.chunks]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def validity(array) -> np.ndarray:
    """Booleans: whether each value of an array (or chunked column) is set."""
    if isinstance(array, pa.ChunkedArray):
        return _per_chunk(validity, array).astype(bool)
    n = len(array)
    if array.null_count == 0:
        return np.ones(n, dtype=bool)
    if pa.types.is_null(array.type) or array.null_count == n:
        return np.zeros(n, dtype=bool)
    bits = np.unpackbits(np.frombuffer(array.buffers()[0], dtype=np.uint8), bitorder="little")
    return bits[array.offset : array.offset + n].astype(bool)


def int64_values(array, null_value: int) -> np.ndarray:
    """An integer array's (or chunked column's) values as int64, `null_value` where null."""
    if isinstance(array, pa.ChunkedArray):
        return _per_chunk(int64_values, array, null_value)
    n = len(array)
    if pa.types.is_null(array.type):
        return np.full(n, null_value, dtype=np.int64)
    if not pa.types.is_integer(array.type):
        raise TypeError(f"expected an integer column, got {array.type}")
    dtype = np.dtype(f"{'i' if pa.types.is_signed_integer(array.type) else 'u'}"
                     f"{array.type.bit_width // 8}")
    data = array.buffers()[1]
    raw = np.frombuffer(data, dtype=dtype) if data is not None else np.zeros(0, dtype=dtype)
    values = raw[array.offset : array.offset + n].astype(np.int64)
    return np.where(validity(array), values, null_value) if array.null_count else values


def int64_array(values) -> pa.Array:
    """An int64 array of these values (a numpy array or a sequence of ints)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)],
                                 null_count=0)


_INT32_RANGE = 1 << 32
_CODEC_BYTES = {codec: name.encode("ascii") for codec, name in CODEC_NAMES.items()}


def _wrapped_int32(values: np.ndarray) -> np.ndarray:
    """int64 values as Java's int arithmetic leaves them (two's complement wrap)."""
    return (values + (1 << 31)) % _INT32_RANGE - (1 << 31)


def record_sequences(base_sequences: np.ndarray, offset_deltas: np.ndarray) -> np.ndarray:
    """Each record's sequence as Kafka's DefaultRecord gives it: -1 in a batch without a
    base sequence, else DefaultRecordBatch.incrementSequence(baseSequence, offsetDelta),
    which goes on from 0 past Integer.MAX_VALUE (v2.record_sequence is its scalar twin)."""
    # Nearly always no delta is negative and nothing wraps: a sum (a pass each to check).
    if (offset_deltas < 0).any():
        return _record_sequences_wrapping(base_sequences, offset_deltas)
    sequences = base_sequences + offset_deltas
    if (sequences > (1 << 31) - 1).any():
        return _record_sequences_wrapping(base_sequences, offset_deltas)
    np.copyto(sequences, -1, where=base_sequences < 0)
    return sequences


def _record_sequences_wrapping(base_sequences: np.ndarray, offset_deltas: np.ndarray
                               ) -> np.ndarray:
    deltas = _wrapped_int32(offset_deltas)
    int32_max = (1 << 31) - 1
    wraps = base_sequences > _wrapped_int32(int32_max - deltas)
    wrapped = _wrapped_int32(deltas - _wrapped_int32(int32_max - base_sequences) - 1)
    sequences = np.where(wraps, wrapped, _wrapped_int32(base_sequences + deltas))
    return np.where(base_sequences >= 0, sequences, -1)


def _fixed(arrow_type, values: np.ndarray, dtype, valid=None) -> pa.Array:
    length = len(values)
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        arrow_type, length, [bitmap, pa.py_buffer(np.ascontiguousarray(values, dtype=dtype))],
        null_count=-1 if valid is not None else 0)


@functools.lru_cache(maxsize=16)
def _repeated_string(text: str, length: int) -> pa.Array:
    """constant_string_array, kept: a scan's batches mostly have one length and topic (or
    segment). Arrow arrays are immutable, so batches can share them."""
    return constant_string_array(text, length)


@functools.lru_cache(maxsize=16)
def _repeated_int32(value: int, length: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int32(), length,
                                 [None, pa.py_buffer(np.full(length, value, dtype=np.int32))])


@functools.lru_cache(maxsize=16)
def _repeated_bool(value: bool, length: int) -> pa.Array:
    bits = np.full((length + 7) // 8, 0xFF if value else 0, dtype=np.uint8)
    return pa.Array.from_buffers(pa.bool_(), length, [None, pa.py_buffer(bits)], null_count=0)


_INT64_FIELDS = [ENTRY_PRODUCER_ID, ENTRY_BASE_OFFSET, ENTRY_POSITION]
_INT32_FIELDS = [ENTRY_PRODUCER_EPOCH, ENTRY_LEADER_EPOCH, ENTRY_MAGIC]


def _plain(arrow_type, length: int, values) -> pa.Array:
    """A fixed-width column without nulls over `values` (contiguous, of its width: an
    Arrow buffer or a numpy array)."""
    if not isinstance(values, pa.Buffer):
        values = pa.py_buffer(values)
    return pa.Array.from_buffers(arrow_type, length, [None, values], null_count=0)


def _bools(values: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(pa.bool_(), len(values),
                                 [None, pa.py_buffer(np.packbits(values, bitorder="little"))],
                                 null_count=0)


def _strings_per_entry(texts, counts: np.ndarray, length: int) -> pa.Array:
    """A string column whose rows repeat texts[i] counts[i] times (None: null rows)."""
    sizes = np.array([0 if text is None else len(text) for text in texts], dtype=np.int64)
    offsets = np.zeros(length + 1, dtype=np.int32)
    np.cumsum(np.repeat(sizes, counts), out=offsets[1:])
    data = b"".join(text * int(count) for text, count in zip(texts, counts) if text)
    valid = None
    if any(text is None for text in texts):
        valid = np.repeat(np.array([text is not None for text in texts]), counts)
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.string(), length,
                                 [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=-1 if valid is not None else 0)


def expanded_entries(entries: np.ndarray, offsets: np.ndarray, wanted=(True,) * 7):
    """(producer ids, producer epochs, sequences, leader epochs, magics, batch offsets,
    positions) of each row that batch entries cover (`offsets`: the rows'), None for the
    columns not `wanted`: the compiled expand_batch_entries in numpy
    (fastpath.batch_entry_expander picks one)."""
    ends = entries[:, ENTRY_END_ROW]
    counts = ends.copy()
    counts[1:] -= ends[:-1]
    # One repeat per width: each field's rows come out contiguous, ready for Arrow.
    producer_ids, base_offsets, positions = np.repeat(entries[:, _INT64_FIELDS].T, counts,
                                                      axis=1)
    producer_epochs, leader_epochs, magics = np.repeat(
        entries[:, _INT32_FIELDS].T.astype(np.int32), counts, axis=1)
    sequences = record_sequences(np.repeat(entries[:, ENTRY_BASE_SEQUENCE], counts),
                                 offsets - base_offsets).astype(np.int32)
    columns = (producer_ids, producer_epochs, sequences, leader_epochs, magics, base_offsets,
               positions)
    return tuple(column if want else None for column, want in zip(columns, wanted))


# The expanded columns: (entry field, Arrow type), ENTRY_BASE_SEQUENCE standing for the
# sequence (-1 for all rows when every entry's is negative, else different in each row).
_EXPANDED = [(ENTRY_PRODUCER_ID, pa.int64()), (ENTRY_PRODUCER_EPOCH, pa.int32()),
             (ENTRY_BASE_SEQUENCE, pa.int32()), (ENTRY_LEADER_EPOCH, pa.int32()),
             (ENTRY_MAGIC, pa.int32()), (ENTRY_BASE_OFFSET, pa.int64()),
             (ENTRY_POSITION, pa.int64())]


@functools.lru_cache(maxsize=64)
def _repeated_number(arrow_type, value: int, length: int) -> pa.Array:
    dtype = np.int64 if arrow_type == pa.int64() else np.int32
    return _plain(arrow_type, length, np.full(length, value, dtype=dtype))


def _metadata_columns(entries: np.ndarray, counts: np.ndarray, offsets: np.ndarray,
                      length: int, segment: str, expand) -> list:
    """METADATA_FIELDS' columns. A field with one value in all the rows (one producer, one
    leader epoch, a batch's rows...) is a kept array; the others are expanded."""
    if not length:
        return [pa.array([], field.type) for field in METADATA_FIELDS]
    first = entries[0].tolist()
    same = (entries == entries[0]).all(axis=0).tolist()  # per field
    constant = []
    for field, _ in _EXPANDED:
        if field == ENTRY_BASE_SEQUENCE:
            negative = first[field] < 0 and (same[field] or
                                             (entries[:, field] < 0).all())
            constant.append(-1 if negative else None)
        else:
            constant.append(first[field] if same[field] else None)
    expanded = (expand or expanded_entries)(entries, offsets,
                                            tuple(value is None for value in constant))
    (producer_ids, producer_epochs, sequences, leader_epochs, magics, base_offsets,
     positions) = [_repeated_number(arrow_type, value, length) if value is not None
                   else _plain(arrow_type, length, column)
                   for (_, arrow_type), value, column in zip(_EXPANDED, constant, expanded)]
    if same[ENTRY_ATTRIBUTES] and same[ENTRY_MAGIC]:
        attributes = first[ENTRY_ATTRIBUTES]
        transactional = _repeated_bool(
            bool(attributes & ATTR_TRANSACTIONAL) and first[ENTRY_MAGIC] >= 2, length)
        compression = _repeated_string(CODEC_NAMES[attributes & ATTR_COMPRESSION_MASK],
                                       length)
    else:
        attributes = entries[:, ENTRY_ATTRIBUTES]
        transactional = _bools(np.repeat(((attributes & ATTR_TRANSACTIONAL) != 0) &
                                         (entries[:, ENTRY_MAGIC] >= 2), counts))
        compression = _strings_per_entry(
            [_CODEC_BYTES[codec] for codec in (attributes & ATTR_COMPRESSION_MASK).tolist()],
            counts, length)
    return [producer_ids, producer_epochs, sequences, leader_epochs, transactional,
            compression, magics, base_offsets, _repeated_string(segment, length), positions]


def with_batch_columns(batch: pa.RecordBatch, entries: np.ndarray, segment: str,
                       include_headers: bool, include_metadata: bool,
                       include_control_records: bool, expand=None) -> pa.RecordBatch:
    """`batch` (the source columns of an accumulator's take()) with the metadata and
    control record columns, expanded from the accumulator's batch entries (one per run
    of rows sharing a batch's metadata: fastpath/protocol.py) by `expand`
    (fastpath.batch_entry_expander; default expanded_entries)."""
    length = batch.num_rows
    ends = entries[:, ENTRY_END_ROW]
    covered = int(ends[-1]) if len(ends) else 0
    if covered != length:
        raise AssertionError(f"batch entries cover {covered} rows of {length}")
    counts = ends.copy()
    counts[1:] -= ends[:-1]
    columns = batch.columns
    if include_metadata:
        offset = batch.column("offset")
        offsets = np.frombuffer(offset.buffers()[1], dtype=np.int64, count=length,
                                offset=offset.offset * 8)
        columns += _metadata_columns(entries, counts, offsets, length, segment, expand)
    if include_control_records:
        types = entries[:, ENTRY_CONTROL_TYPE]
        epochs = np.repeat(entries[:, ENTRY_COORDINATOR_EPOCH], counts)
        if (types == NOT_CONTROL).all():
            columns += [pa.nulls(length, pa.string()), pa.nulls(length, pa.int32())]
        else:
            names = [None if type_id == NOT_CONTROL else control_type_name(type_id).encode()
                     for type_id in types.tolist()]
            has_epoch = epochs != NO_COORDINATOR_EPOCH
            columns += [_strings_per_entry(names, counts, length),
                        _fixed(pa.int32(), np.where(has_epoch, epochs, 0), np.int32,
                               valid=has_epoch)]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(
        include_headers, include_metadata, include_control_records))
