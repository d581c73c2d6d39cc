"""The compiled twin of pure.RecordAccumulator.

Magic-2 records are decoded in C (`_fastrecords`) straight into Arrow-layout buffers;
take() wraps those buffers as Arrow arrays without copying them. Importing this module
raises ImportError, its message saying why, when no usable build of the extension is
found; make_accumulator (this package) then warns once and falls back to the pure-Python accumulator.

Run from a checkout, the build of an installed copy of the package is used when it was
built from the checkout's own _fastrecords.c and Python values (loading.py).

The scan loop hands whole stretches of a mapped segment to `accumulator.decode_run(...)`
(see its docstring): plain batches are then walked, verified and decoded in C, and the
loop handles in Python only the entries the run stops at (RUN_ENTRY_FOR_PYTHON), taking
a batch on RUN_FLUSH and stopping on RUN_DONE or RUN_END.

FileMapping is how storage/local.py maps segments: a page lost to the file shrinking reads
as zeros there (and is noted) instead of killing the process with SIGBUS.
"""
import numpy as np
import pyarrow as pa

from ...errors import CorruptLogError
from ..arrow import HEADER_TYPE, TIMESTAMP_TYPE, finish_batch
from .extension import fast_records
from .protocol import ENTRY_FIELDS

_fastrecords = fast_records()
MalformedRecords, DecodedColumns = _fastrecords.MalformedRecords, _fastrecords.DecodedColumns
v2_batch_headers = _fastrecords.v2_batch_headers
FileMapping, set_run_hook = _fastrecords.FileMapping, _fastrecords.set_run_hook
# CRC32C on the CPU's instruction (format/crc.py); None where the CPU has none.
crc32c = _fastrecords.crc32c if _fastrecords.CRC32C_INSTRUCTION else None

_HEADER_ENTRY_FIELDS = list(HEADER_TYPE.value_type)
_HEADER_KEY_TYPE = HEADER_TYPE.value_type.field("key").type
_HEADER_VALUE_TYPE = HEADER_TYPE.value_type.field("value").type
_INT64 = pa.int64()
_INT32 = pa.int32()
_BINARY = pa.binary()


_EXPANDED_WIDTHS = (8, 4, 4, 4, 4, 8, 8)


def expand_batch_entries(entries: np.ndarray, offsets: np.ndarray, wanted):
    """arrow.expanded_entries in C, as Arrow buffers of the default memory pool (which
    reuses freed memory: fresh pages would cost more than writing them)."""
    rows = len(offsets)
    columns = tuple(pa.allocate_buffer(width * rows) if want else None
                    for want, width in zip(wanted, _EXPANDED_WIDTHS))
    _fastrecords.expand_batch_entries(np.ascontiguousarray(entries),
                                      np.ascontiguousarray(offsets), columns)
    return columns


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


class CompiledAccumulator(DecodedColumns):
    """RecordAccumulator's interface (add, add_v2_batch, decode_run, len, payload_bytes,
    take, track_batches, note_batch, take_batch_entries); decode_run, add, track_batches
    and note_batch come from DecodedColumns."""

    __slots__ = ()

    def add_v2_batch(self, data, count, header, min_offset, end_offset, path=None) -> int:
        try:
            return self.decode_v2(data, count, header.base_offset, header.base_timestamp,
                                  header.max_timestamp, header.attributes, min_offset,
                                  end_offset)
        except MalformedRecords as exc:
            raise CorruptLogError(path, header.position, str(exc)) from None

    def take_batch_entries(self) -> np.ndarray:
        return np.frombuffer(DecodedColumns.take_batch_entries(self),
                             dtype=np.int64).reshape(-1, ENTRY_FIELDS)

    def take(self, topic: str, partition: int) -> pa.RecordBatch:
        rows, offsets, timestamps, timestamp_types, keys, values, headers = \
            self.take_columns(micros=True)
        return finish_batch(
            topic, partition,
            _fixed_width(_INT64, rows, offsets),
            _fixed_width(TIMESTAMP_TYPE, rows, timestamps),
            _fixed_width(_INT32, rows, timestamp_types),
            _variable_width(_BINARY, rows, keys),
            _variable_width(_BINARY, rows, values),
            None if headers is None else _headers_array(rows, headers),
            self.include_headers,
        )
