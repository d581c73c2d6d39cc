"""Spark batch reader: filter pushdown, input partitions and Arrow batch reads."""
import datetime as dt
import os
import sys
from typing import Iterator, List

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceReader, EqualTo, GreaterThan, GreaterThanOrEqual, In, InputPartition, LessThan,
    LessThanOrEqual,
)

from .format.scan import ScanOptions, TransactionFilter, scan_segment
from .options import OptionError, parse_read_options
from .planning import Constraints, Split, group_splits, plan_splits

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


class SegmentSplits(InputPartition):
    """One Spark partition: one or more splits (byte ranges of segments, planning.Split)."""

    def __init__(self, splits: List[Split]):
        super().__init__(None)
        self.splits = splits

    def __repr__(self):
        return "SegmentSplits(" + ", ".join(
            f"{os.path.basename(s.log_path)}[{s.start_position}:{s.end_position}]"
            for s in self.splits) + ")"


def _to_micros(value) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            # Spark hands pushed timestamp literals over as naive datetimes in local time.
            value = value.astimezone()
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, dt.date):
        return _to_micros(dt.datetime(value.year, value.month, value.day))
    raise TypeError(value)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def apply_filter(constraints: Constraints, f) -> bool:
    """Fold one pushed filter into `constraints`; False when the source cannot apply it."""
    attribute = getattr(f, "attribute", None)  # Not(...) has a child instead
    column = attribute[0] if attribute is not None and len(attribute) == 1 else None
    value = getattr(f, "value", None)
    if column == "topic":
        if isinstance(f, EqualTo) and isinstance(value, str):
            constraints.restrict_topics([value])
            return True
        if isinstance(f, In) and all(isinstance(v, str) for v in value):
            constraints.restrict_topics(value)
            return True
        return False
    if column == "partition":
        if isinstance(f, EqualTo) and _is_int(value):
            constraints.restrict_partitions([value])
            return True
        if isinstance(f, In) and all(_is_int(v) for v in value):
            constraints.restrict_partitions(value)
            return True
        return False
    if column == "offset":
        if isinstance(f, In) and all(_is_int(v) for v in value):
            constraints.restrict_offsets(values=value)
            return True
        bounds = _comparison_bounds(f, value) if _is_int(value) else None
        if bounds is None:
            return False
        constraints.restrict_offsets(low=bounds[0], high=bounds[1])
        return True
    if column == "timestamp":
        try:
            micros = _to_micros(value)
        except TypeError:
            return False
        bounds = _comparison_bounds(f, micros)
        if bounds is None:
            return False
        constraints.restrict_timestamps(low_us=bounds[0], high_us=bounds[1])
        return True
    return False


def _comparison_bounds(f, value: int):
    """(inclusive low, exclusive high) of an integer comparison; None for other filters."""
    if isinstance(f, EqualTo):
        return value, value + 1
    if isinstance(f, GreaterThan):
        return value + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return value, None
    if isinstance(f, LessThan):
        return None, value
    if isinstance(f, LessThanOrEqual):
        return None, value + 1
    return None


def filter_rows(batch: pa.RecordBatch, split: Split) -> pa.RecordBatch:
    import pyarrow.compute as pc  # only reads with row constraints need it

    mask = None
    if split.offset_values is not None:
        mask = pc.is_in(batch.column("offset"), pa.array(sorted(split.offset_values), pa.int64()))
    timestamps = None
    if split.timestamp_low_us is not None or split.timestamp_high_us is not None:
        timestamps = batch.column("timestamp").cast(pa.int64())
    if split.timestamp_low_us is not None:
        part = pc.greater_equal(timestamps, split.timestamp_low_us)
        mask = part if mask is None else pc.and_(mask, part)
    if split.timestamp_high_us is not None:
        part = pc.less(timestamps, split.timestamp_high_us)
        mask = part if mask is None else pc.and_(mask, part)
    return batch if mask is None else batch.filter(mask)


class SegmentLogReader(DataSourceReader):
    """Reads without pushed filters (Spark's default, pushdown disabled)."""

    def __init__(self, options, schema):
        self.read_options = parse_read_options(options)
        self.constraints = Constraints()
        self.schema = schema

    def partitions(self) -> List[InputPartition]:
        splits = plan_splits(self.read_options, self.constraints)
        return [SegmentSplits(group) for group in group_splits(splits, self.read_options)]

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        # Spark passes a placeholder partition when planning found nothing to read.
        for split in getattr(partition, "splits", ()):
            yield from read_split(split, self.read_options.include_headers,
                                  self.read_options.verify_checksums)


def read_split(split: Split, include_headers: bool, verify_checksums: bool,
               use_fast_path: bool = True) -> Iterator[pa.RecordBatch]:
    options = ScanOptions(verify_checksums=verify_checksums, include_headers=include_headers,
                          use_fast_path=use_fast_path)
    transactions = None
    if split.read_committed:
        transactions = TransactionFilter(split.aborted, split.last_stable_offset)
    for batch in scan_segment(split.topic, split.partition, split.log_path, split.log_size,
                              split.start_position, split.end_position, split.min_offset,
                              split.end_offset, split.allow_torn_tail, options, transactions):
        batch = filter_rows(batch, split)
        if batch.num_rows:
            yield batch


class SegmentLogPushdownReader(SegmentLogReader):
    """Reads with pushed filters (spark.sql.python.filterPushdown.enabled=true)."""

    def pushFilters(self, filters):
        for f in filters:
            if not apply_filter(self.constraints, f):
                yield f


# The module of Spark's filter-pushdown planner, which alone calls pushFilters.
PUSHDOWN_PLANNER_MODULE = "pyspark.sql.worker.data_source_pushdown_filters"


def _planning_with_pushdown() -> bool:
    """True when Spark's filter-pushdown planner (not the plain planner) asks for a reader.

    Spark refuses a reader that overrides pushFilters while pushdown is disabled, and
    tells the data source neither the setting nor which planner is asking; the caller's
    module does. tests/test_spark_read.py fails loudly if a Spark release renames it.
    """
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__")
        if module == PUSHDOWN_PLANNER_MODULE or (
                module == "__main__" and frame.f_code.co_filename.endswith(
                    PUSHDOWN_PLANNER_MODULE.rsplit(".", 1)[1] + ".py")):
            return True
        frame = frame.f_back
    return False


def make_reader(options, schema) -> SegmentLogReader:
    if _planning_with_pushdown():
        return SegmentLogPushdownReader(options, schema)
    return SegmentLogReader(options, schema)
