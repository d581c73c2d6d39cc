"""`spark.readStream.format("segmentlog")`: Spark's DataSourceStreamReader over read.stream.

Spark keeps this reader in one long-lived Python process on the driver for the whole
query (offsets, admission control, planning); `read` runs in the tasks. Spark 4.2 and
later ask the source for each micro-batch's end from a start and a read limit (admission
control: `stream_limits.py`); 4.0 and 4.1 call `latestOffset()` with neither, so there
the reader keeps where the last micro-batch ended and reports an end already within the
trigger limits (spark/compat.py).
"""
from dataclasses import replace
from typing import Iterator, List, Optional

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from ..decode import DecodedRead
from ..errors import SegmentLogError
from ..read.fragments import scan_fragments, scan_options
from ..read.stream import (
    LogStream, Offsets, TriggerLimits, offsets_from_json, offsets_to_json,
    parse_stream_options,
)
from .reader import FragmentGroup
from .errors import short_errors
from .worker import settle_worker


class SegmentLogStreamReader(DataSourceStreamReader):
    """What every release's stream reader does: the query's start, planning and reading."""

    def __init__(self, options, schema):
        self.decoded = DecodedRead(options)
        stream_options = parse_stream_options(options)
        self.stream_options = replace(stream_options,
                                      read=self.decoded.read_options(stream_options.read))
        self.scan_options = scan_options(self.stream_options.read)
        self._stream: Optional[LogStream] = None
        self._initial: Optional[Offsets] = None

    @property
    def stream(self) -> LogStream:
        # Created on first use: Spark also builds this reader in planning processes that
        # only ever call read().
        if self._stream is None:
            self._stream = LogStream(self.stream_options)
        return self._stream

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_stream"] = None  # tasks need only the options
        return state

    def initial_offsets(self) -> Offsets:
        """Where the query starts, found once: every later answer is the same, though the
        log grows (with startingOffsets=latest, its end moves)."""
        if self._initial is None:
            self._initial = self.stream.initial_offsets()
        return self._initial

    # ------------------------------------------------------------------ offsets
    @short_errors
    def initialOffset(self) -> dict:
        return offsets_to_json(self.initial_offsets())

    # ----------------------------------------------------------------- planning
    @short_errors
    def partitions(self, start: dict, end: dict) -> List[InputPartition]:
        groups = self.stream.plan(offsets_from_json(start, "start offset"),
                                  offsets_from_json(end, "end offset"))
        return [FragmentGroup(group) for group in groups]

    @short_errors
    def read(self, partition) -> Iterator[pa.RecordBatch]:
        settle_worker()  # the daemon's collection after each task skips the modules
        yield from self.decoded.batches(
            scan_fragments(getattr(partition, "fragments", ()), self.scan_options))

    def commit(self, end: dict) -> None:
        """Nothing to do: the source never writes to the log dir (a broker may own it)."""


class CappedStreamReader(SegmentLogStreamReader):
    """Spark 4.0 and 4.1, which have no admission control for Python sources: each
    `latestOffset()` reports the next micro-batch's end within maxOffsetsPerTrigger,
    maxBytesPerTrigger and minOffsetsPerTrigger, from where the last one ended.

    Spark asks for the latest offset before the initial one on a new query, plans each
    micro-batch right after asking, and on a restart plans the checkpoint's last
    micro-batch (or an empty one at its end) before asking again: so the next start is
    the end of the last micro-batch planned, or the query's start before any."""

    def __init__(self, options, schema):
        super().__init__(options, schema)
        self._next_start: Optional[Offsets] = None

    @short_errors
    def latestOffset(self) -> dict:
        start = self._next_start if self._next_start is not None else self.initial_offsets()
        limits = TriggerLimits.from_options(self.stream_options)
        return offsets_to_json(self.stream.latest_offsets(start, limits))

    @short_errors
    def partitions(self, start: dict, end: dict) -> List[InputPartition]:
        planned = super().partitions(start, end)
        self._next_start = offsets_from_json(end, "end offset")
        return planned



class RefusedStreamReader(DataSourceStreamReader):
    """A stream reader whose options were refused: it raises that error at Spark's first
    call. Spark's stream source runner (4.0 to 4.3) makes the reader inside a `try` whose
    `finally` stops it, and when making it failed, that `finally` fails for want of a
    reader and is what Spark reports, in place of the error (or, with the traceback
    hidden, with no word of it). A reader is always made, so the error is the query's."""

    def __init__(self, error: SegmentLogError):
        self.error = error

    @short_errors
    def _refuse(self, *args):
        raise self.error

    initialOffset = latestOffset = getDefaultReadLimit = reportLatestOffset = _refuse
    partitions = read = commit = prepareForTriggerAvailableNow = _refuse
