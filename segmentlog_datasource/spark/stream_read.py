"""`spark.readStream.format("segmentlog")`: Spark's DataSourceStreamReader over read.stream.

Spark keeps this reader in one long-lived Python process on the driver for the whole
query (offsets, admission control, planning); `read` runs in the tasks.
"""
from dataclasses import replace
from typing import Iterator, List, Optional

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable, ReadLimit, ReadMaxBytes, ReadMaxRows, ReadMinRows,
    SupportsTriggerAvailableNow,
)

from ..decode import DecodedRead
from ..read.fragments import scan_fragments, scan_options
from ..read.stream import (
    LogStream, TriggerLimits, offsets_from_json, offsets_to_json, parse_stream_options,
)
from .reader import FragmentGroup
from .errors import short_errors
from .worker import settle_worker


class SegmentLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options, schema):
        self.decoded = DecodedRead(options)
        stream_options = parse_stream_options(options)
        self.stream_options = replace(stream_options,
                                      read=self.decoded.read_options(stream_options.read))
        self.scan_options = scan_options(self.stream_options.read)
        self._stream: Optional[LogStream] = None

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

    # ------------------------------------------------------------------ offsets
    @short_errors
    def initialOffset(self) -> dict:
        return offsets_to_json(self.stream.initial_offsets())

    def getDefaultReadLimit(self) -> ReadLimit:
        # Spark takes one limit; the others configured apply alongside it (latestOffset).
        options = self.stream_options
        if options.max_offsets_per_trigger is not None:
            return ReadMaxRows(options.max_offsets_per_trigger)
        if options.max_bytes_per_trigger is not None:
            return ReadMaxBytes(options.max_bytes_per_trigger)
        if options.min_offsets_per_trigger is not None:
            return ReadMinRows(options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def _limits(self, limit: ReadLimit) -> Optional[TriggerLimits]:
        if isinstance(limit, ReadAllAvailable):
            return None  # Spark asks for everything: the options do not apply
        limits = TriggerLimits.from_options(self.stream_options)
        if isinstance(limit, ReadMaxRows):
            limits.max_offsets = limit.max_rows
        elif isinstance(limit, ReadMaxBytes):
            limits.max_bytes = limit.max_bytes
        elif isinstance(limit, ReadMinRows):
            limits.min_offsets = limit.min_rows
        return limits

    @short_errors
    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start, "start offset")
        return offsets_to_json(self.stream.latest_offsets(begin, self._limits(limit)))

    @short_errors
    def reportLatestOffset(self) -> Optional[dict]:
        latest = self.stream.latest
        return None if latest is None else offsets_to_json(latest)

    @short_errors
    def prepareForTriggerAvailableNow(self) -> None:
        self.stream.prepare_available_now()

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
