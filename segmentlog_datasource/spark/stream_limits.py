"""The stream reader of Spark 4.2 and later, which hand a Python source the start and the
read limit of each micro-batch (admission control) and prepare it for
Trigger.AvailableNow: `pyspark.sql.streaming.datasource`, which older releases lack, is
imported here alone (spark/compat.py)."""
from typing import Optional

from pyspark.sql.streaming.datasource import (
    ReadAllAvailable, ReadLimit, ReadMaxBytes, ReadMaxRows, ReadMinRows,
    SupportsTriggerAvailableNow,
)

from ..read.stream import TriggerLimits, offsets_from_json, offsets_to_json
from .errors import short_errors
from .stream_read import SegmentLogStreamReader


class AdmissionControlStreamReader(SegmentLogStreamReader, SupportsTriggerAvailableNow):
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
