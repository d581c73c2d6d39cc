"""Encoding record batches: the one place that picks the encoder, the compiled one
(fastpath/compiled_encode.py) when it is built and wanted, else its pure twin
(v2_encode.encode_batches_python). Both give the same bytes; v2_encode holds the layout,
the record columns and the pure twin, which the compiled twin shares."""
from typing import Iterable, Optional

import numpy as np

from . import compression
from .fastpath import batch_encoder
from .layout import CREATE_TIME, NO_PARTITION_LEADER_EPOCH
from .v2_encode import EncodedBatches, RecordColumns, patch_batch_headers


def encode_batches(columns: RecordColumns, *, codec: int = compression.NONE,
                   batch_size: int = 16384, timestamp_type: int = CREATE_TIME,
                   log_append_time: Optional[int] = None, compression_level=None,
                   max_batch_bytes: Optional[int] = None,
                   batch_starts: Optional[np.ndarray] = None,
                   rows: Optional[np.ndarray] = None,
                   use_fast_path: bool = True) -> EncodedBatches:
    """Encode every record of `columns` (or those at `rows`, in that order) into record
    batches at base offset 0; input rows (first_rows, errors) count in that order.

    Batches are cut at `batch_size` bytes of uncompressed batch (see `plan_batches`),
    or at `batch_starts` when given. LogAppendTime batches carry `log_append_time` as
    their maxTimestamp. A batch larger than `max_batch_bytes` raises RecordTooLargeError.
    The compiled encoder does it when built and `use_fast_path`, else the pure twin.
    """
    return batch_encoder(use_fast_path)(
        columns, codec=codec, batch_size=batch_size, timestamp_type=timestamp_type,
        log_append_time=log_append_time, compression_level=compression_level,
        max_batch_bytes=max_batch_bytes, batch_starts=batch_starts, rows=rows)


def encode_groups(columns: RecordColumns, groups: np.ndarray, group_count: int, *,
                  codec: int = compression.NONE, batch_size: int = 16384,
                  timestamp_type: int = CREATE_TIME, log_append_time: Optional[int] = None,
                  compression_level=None, use_fast_path: bool = True) -> list:
    """The records of each group (`groups`: a group number in [0, group_count) per row)
    encoded as `encode_batches` encodes them with `rows` = that group's rows in order:
    a list of EncodedBatches per group, None for a group without rows. Batch sizes are not
    checked against a limit here (`check_batch_sizes`). The compiled encoder reads the
    rows once, in order, chunked keys and values in place; else the pure twin."""
    return batch_encoder(use_fast_path, grouped=True)(
        columns, groups, group_count, codec=codec, batch_size=batch_size,
        timestamp_type=timestamp_type, log_append_time=log_append_time,
        compression_level=compression_level)


def build_record_batch(records: Iterable, *, base_offset: int = 0,
                       codec: int = compression.NONE, timestamp_type: int = CREATE_TIME,
                       log_append_time: Optional[int] = None,
                       partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """One record batch holding all `records` ((key, value, timestamp_ms, headers) tuples)."""
    columns = RecordColumns.from_records(records)
    if len(columns) == 0:
        raise ValueError("a record batch needs at least one record")
    encoded = encode_batches(columns, codec=codec, timestamp_type=timestamp_type,
                             log_append_time=log_append_time,
                             batch_starts=np.zeros(1, dtype=np.int64))
    patch_batch_headers(encoded.data, np.zeros(1, dtype=np.int64),
                        np.array([base_offset], dtype=np.int64), partition_leader_epoch)
    return bytes(encoded.data)
