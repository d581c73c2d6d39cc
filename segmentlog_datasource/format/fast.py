"""The compiled twin of columns.RecordAccumulator.

Magic-2 records are decoded in C (`_fastrecords`) straight into Arrow-layout buffers;
take() wraps those buffers as Arrow arrays without copying them. Importing this module
raises ImportError when the extension is not built, and scan.make_accumulator then
falls back to the pure-Python accumulator.

A scan loop may also hand whole stretches of a mapped segment to
`accumulator.decode_run(...)` (see its docstring): plain batches are then walked,
verified and decoded in C, and the loop handles in Python only the entries the run
stops at (RUN_ENTRY_FOR_PYTHON), taking a batch on RUN_FLUSH and stopping on RUN_DONE
or RUN_END.
"""
import pyarrow as pa

from ._fastrecords import (  # noqa: F401 - the RUN_* states are for scan loops
    RUN_DONE, RUN_END, RUN_ENTRY_FOR_PYTHON, RUN_FLUSH, MalformedRecords, RecordColumns,
)
from .columns import HEADER_TYPE, finish_batch
from .errors import CorruptLogError

_HEADER_ENTRY_FIELDS = list(HEADER_TYPE.value_type)
_HEADER_KEY_TYPE = HEADER_TYPE.value_type.field("key").type
_HEADER_VALUE_TYPE = HEADER_TYPE.value_type.field("value").type
_INT64 = pa.int64()
_INT32 = pa.int32()
_BINARY = pa.binary()


def _fixed_width(arrow_type, rows, data):
    return pa.Array.from_buffers(arrow_type, rows, [None, pa.py_buffer(data)], null_count=0)


def _variable_width(arrow_type, rows, column):
    validity, nulls, offsets, data = column
    return pa.Array.from_buffers(
        arrow_type, rows,
        [None if validity is None else pa.py_buffer(validity), pa.py_buffer(offsets),
         pa.py_buffer(data)],
        null_count=nulls,
    )


def _headers_array(rows, headers):
    list_offsets, count, keys, values = headers
    entries = pa.StructArray.from_arrays(
        [_variable_width(_HEADER_KEY_TYPE, count, keys),
         _variable_width(_HEADER_VALUE_TYPE, count, values)],
        fields=_HEADER_ENTRY_FIELDS,
    )
    return pa.Array.from_buffers(
        HEADER_TYPE, rows, [None, pa.py_buffer(list_offsets)], null_count=0, children=[entries]
    )


class FastRecordAccumulator(RecordColumns):
    """RecordAccumulator's interface (add, add_v2_batch, len, payload_bytes, take)."""

    __slots__ = ()

    def add_v2_batch(self, data, count, header, min_offset, end_offset, path=None) -> int:
        try:
            return self.decode_v2(data, count, header.base_offset, header.base_timestamp,
                                  header.max_timestamp, header.attributes, min_offset,
                                  end_offset)
        except MalformedRecords as exc:
            raise CorruptLogError(path, header.position, str(exc)) from None

    def take(self, topic: str, partition: int) -> pa.RecordBatch:
        rows, offsets, timestamps, timestamp_types, keys, values, headers = self.take_columns()
        return finish_batch(
            topic, partition,
            _fixed_width(_INT64, rows, offsets),
            _fixed_width(_INT64, rows, timestamps),
            _fixed_width(_INT32, rows, timestamp_types),
            _variable_width(_BINARY, rows, keys),
            _variable_width(_BINARY, rows, values),
            None if headers is None else _headers_array(rows, headers),
            self.include_headers,
        )
