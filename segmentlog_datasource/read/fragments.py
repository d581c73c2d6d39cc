"""Fragments: the pieces a read is planned into, each able to scan itself.

A fragment is a byte range of one segment that starts and ends on entry boundaries
(offset index positions), with the offset range to keep and the row constraints that
positions cannot express (an IN list of offsets, timestamp bounds). Each batch belongs to
exactly one fragment of a read: the one whose byte range holds its start.
"""
import os
from dataclasses import dataclass
from typing import FrozenSet, Iterable, Iterator, Optional

import pyarrow as pa

from ..format.arrow import int64_array
from ..format.scan import ScanOptions, SegmentRange, scan_segment


@dataclass(frozen=True)
class Fragment(SegmentRange):
    offset_values: Optional[FrozenSet[int]] = None
    timestamp_low_us: Optional[int] = None  # inclusive, microseconds since the epoch
    timestamp_high_us: Optional[int] = None  # exclusive

    def scan(self, options: ScanOptions) -> Iterator[pa.RecordBatch]:
        """Arrow batches of the fragment's records that meet all of its constraints."""
        for batch in scan_segment(self, options):
            batch = filter_rows(batch, self)
            if batch.num_rows:
                yield batch

    def __str__(self):
        return f"{os.path.basename(self.log_path)}[{self.start_position}:{self.end_position}]"


def scan_options(read) -> ScanOptions:
    """What a scan of a read with these ReadOptions decodes: the one place they meet."""
    return ScanOptions(verify_checksums=read.verify_checksums,
                       include_headers=read.include_headers,
                       include_metadata=read.include_metadata,
                       include_control_records=read.include_control_records,
                       max_batch_inflated_bytes=read.max_batch_inflated_bytes,
                       max_batch_rows=read.max_records_per_batch)


def scan_fragments(fragments: Iterable[Fragment], options: ScanOptions
                   ) -> Iterator[pa.RecordBatch]:
    for fragment in fragments:
        yield from fragment.scan(options)


def filter_rows(batch: pa.RecordBatch, fragment: Fragment) -> pa.RecordBatch:
    """The rows of `batch` inside the fragment's offset list and timestamp bounds."""
    if fragment.offset_values is None and fragment.timestamp_low_us is None and \
            fragment.timestamp_high_us is None:
        return batch
    import pyarrow.compute as pc  # only reads with row constraints need it

    # values as int64 arrays, not Python ints (format/arrow.py: no pandas in a worker)
    mask = None
    if fragment.offset_values is not None:
        mask = pc.is_in(batch.column("offset"),
                        value_set=int64_array(sorted(fragment.offset_values)))
    timestamps = None
    if fragment.timestamp_low_us is not None or fragment.timestamp_high_us is not None:
        timestamps = batch.column("timestamp").cast(pa.int64())
    if fragment.timestamp_low_us is not None:
        part = pc.greater_equal(timestamps, int64_array([fragment.timestamp_low_us])[0])
        mask = part if mask is None else pc.and_(mask, part)
    if fragment.timestamp_high_us is not None:
        part = pc.less(timestamps, int64_array([fragment.timestamp_high_us])[0])
        mask = part if mask is None else pc.and_(mask, part)
    return batch.filter(mask)
