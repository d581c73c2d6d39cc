"""Streaming reads over growing logs: offsets, admission control and micro-batch plans.

Free of Spark; spark/stream_read.py adapts it to Spark's DataSourceStreamReader. An offset
is, per topic-partition, the next offset to read (exclusive end of what was read), kept
in Spark's Kafka source JSON: {"orders": {"0": 1234, "1": 99}}.

Only complete batches are admitted: the end of a partition is one past the last complete
batch (a torn tail waits for a later trigger), and with read_committed its last stable
offset. The log dir is only ever read.
"""
import logging
import re
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from ..errors import InvalidOptionError, SegmentLogError
from ..format.entries import BatchHeader
from ..format.log import PartitionLog
from .fragments import Fragment
from .options import LATEST, ReadOptions, _get, parse_positive_int, parse_read_options
from .planning import group_fragments, offset_ranges, plan_ranges
from .replicas import consumer_partitions, read_bound

TopicPartition = Tuple[str, int]
Offsets = Dict[TopicPartition, int]

logger = logging.getLogger("segmentlog_datasource.stream")

DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Spark's Kafka source default, 15m
BATCH_ONLY_OPTIONS = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")


class DataLossError(SegmentLogError):
    """Offsets a streaming query had not read yet are gone (failOnDataLoss=true)."""


# ------------------------------------------------------------------ offsets as JSON
def offsets_to_json(offsets: Offsets) -> dict:
    """Spark Kafka source's offset JSON, topics and partitions in order."""
    result: Dict[str, Dict[str, int]] = {}
    for (topic, partition) in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return result


def offsets_from_json(value, what: str = "offset") -> Offsets:
    accepted = 'JSON like {"topicA":{"0":23,"1":42}}'
    if not isinstance(value, dict):
        raise SegmentLogError(f"{what} {value!r} is not {accepted}")
    offsets = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict):
            raise SegmentLogError(f"{what} {value!r} is not {accepted}")
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise SegmentLogError(f"{what} {value!r} is not {accepted}") from None
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise SegmentLogError(f"{what} {value!r} is not {accepted}")
            offsets[(topic, number)] = offset
    return offsets


# ------------------------------------------------------------------------ options
_DURATION = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")
_DURATION_UNITS_MS = {
    "": 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000,
}
_BYTE_UNITS = {
    "": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
}


def _parse_with_units(options, name: str, units: Dict[str, int], accepted: str
                      ) -> Optional[int]:
    raw = _get(options, name)
    if raw is None:
        return None
    match = _DURATION.match(str(raw).lower())
    if not match or match.group(2) not in units:
        raise InvalidOptionError.for_value(name, raw, accepted)
    value = int(match.group(1)) * units[match.group(2)]
    if value <= 0:
        raise InvalidOptionError.for_value(name, raw, accepted)
    return value


@dataclass
class StreamOptions:
    read: ReadOptions
    max_offsets_per_trigger: Optional[int] = None
    min_offsets_per_trigger: Optional[int] = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    max_bytes_per_trigger: Optional[int] = None


def parse_stream_options(options) -> StreamOptions:
    for name in BATCH_ONLY_OPTIONS:
        if _get(options, name) is not None:
            raise InvalidOptionError(option=name, message=(
                f"option {name!r} is for batch reads: a streaming query reads on as the log "
                f"grows (bound a streaming micro-batch with maxOffsetsPerTrigger or "
                f"maxBytesPerTrigger)"))
    delay = _parse_with_units(options, "maxTriggerDelay", _DURATION_UNITS_MS,
                              "a duration such as 30s, 5m, 1h or 500ms")
    max_offsets = parse_positive_int(options, "maxOffsetsPerTrigger", None)
    min_offsets = parse_positive_int(options, "minOffsetsPerTrigger", None)
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise InvalidOptionError(option="minOffsetsPerTrigger", message=(
            f"option 'minOffsetsPerTrigger' ({min_offsets}) is greater than "
            f"'maxOffsetsPerTrigger' ({max_offsets})"))
    return StreamOptions(
        read=parse_read_options(options),
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=delay if delay is not None else DEFAULT_MAX_TRIGGER_DELAY_MS,
        max_bytes_per_trigger=_parse_with_units(
            options, "maxBytesPerTrigger", _BYTE_UNITS,
            "a positive size in bytes, optionally with a unit (k, m, g: 512k, 64m, 1g)"),
    )


@dataclass
class TriggerLimits:
    """What one micro-batch may take; None fields do not limit."""

    max_offsets: Optional[int] = None
    min_offsets: Optional[int] = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    max_bytes: Optional[int] = None

    @classmethod
    def from_options(cls, options: StreamOptions) -> "TriggerLimits":
        return cls(options.max_offsets_per_trigger, options.min_offsets_per_trigger,
                   options.max_trigger_delay_ms, options.max_bytes_per_trigger)


# ---------------------------------------------------------------- the log's tail
class _TailScan:
    """A partition's log end (and, for read_committed, last stable offset), reading only
    the batch headers appended since the previous trigger; with `verify`, each of those
    batches passes its checksum before its header counts."""

    def __init__(self, track_transactions: bool, verify: bool = True):
        self.track_transactions = track_transactions
        self.verify = verify
        self.segment_base: Optional[int] = None
        self.position = 0
        self.open_since: Dict[int, int] = {}
        self.end = 0
        self.reached_limit = False  # the last advance stopped at its limit, not the data's end

    def advance(self, log: PartitionLog, limit: Optional[int] = None) -> Tuple[int, int]:
        """(end, last stable offset) of `log` now: the end is one past the last complete
        batch, or `limit` (a high watermark) when that comes first; batches from `limit`
        on are left for a later trigger, so that they count for transactions only once
        they are below it."""
        bases = [segment.base_offset for segment in log.segments]
        if self.segment_base not in bases or \
                log.segments[bases.index(self.segment_base)].size < self.position:
            # First look, or the segment scanned last is gone or shrank: start over.
            self._restart(log)
        self.reached_limit = False
        if self.segment_base is None:
            return self._bounded(limit)
        first = bases.index(self.segment_base)
        for segment in log.segments[first:]:
            position = self.position if segment.base_offset == self.segment_base else 0
            for header in segment.iter_headers(position, allow_torn_tail=log.is_last(segment),
                                               verify=self.verify):
                if limit is not None and header.base_offset >= limit:
                    self.reached_limit = True
                    break
                position += header.size
                self.end = header.last_offset + 1
                if self.track_transactions and header.is_transactional:
                    if header.is_control:
                        self.open_since.pop(header.producer_id, None)
                    else:
                        self.open_since.setdefault(header.producer_id, header.base_offset)
            self.segment_base, self.position = segment.base_offset, position
            if self.reached_limit:
                break
        return self._bounded(limit)

    def _bounded(self, limit: Optional[int]) -> Tuple[int, int]:
        end = self.end if limit is None else min(self.end, limit)
        return end, min(min(self.open_since.values(), default=end), end)

    def _restart(self, log: PartitionLog) -> None:
        self.open_since, self.end = {}, log.start_offset
        self.segment_base = log.segments[0].base_offset if log.segments else None
        self.position = 0
        if self.track_transactions:
            return  # every transaction's state is needed: scan from the start
        # Without transactions only the end matters: start at the last complete entry,
        # found from the last offset index entry.
        for segment in reversed(log.segments):
            last = segment.last_entry(allow_torn_tail=log.is_last(segment), verify=self.verify)
            if last is not None:
                self.segment_base, self.position = segment.base_offset, last.end_position
                self.end = last.last_offset + 1
                return


# --------------------------------------------------------------- the stream itself
@dataclass
class PartitionView:
    log: PartitionLog
    end: int  # one past the last complete batch
    available: int  # what may be delivered: `end`, or the last stable offset


class LogStream:
    """The source side of a streaming query over one or more log dirs.

    Keeps, between triggers, only what makes triggers cheap (tail scans) and what
    admission control needs (time of the last admitted micro-batch, AvailableNow's
    target); everything about a micro-batch is recomputed from its offsets, so a
    restarted query replays a micro-batch exactly.
    """

    def __init__(self, options: StreamOptions,
                 warn: Optional[Callable[[str], None]] = None,
                 clock: Callable[[], float] = time.time):
        self.options = options
        self.read = options.read
        self.warn = warn or logger.warning
        self.clock = clock
        self._tails: Dict[TopicPartition, _TailScan] = {}  # the end seen, per partition
        self.target: Optional[Offsets] = None  # Trigger.AvailableNow: read up to here
        self.latest: Optional[Offsets] = None  # what the last trigger found available
        self._last_admitted_ms = 0.0  # as Spark's Kafka source: the first batch never waits
        # (end offsets, views) of the last trigger over a remote store: planning that
        # micro-batch right after reuses the listing and indexes instead of fetching them again
        self._trigger_views = None

    # ------------------------------------------------------------ discovery
    def partitions_now(self) -> Dict[TopicPartition, PartitionView]:
        # A glob among the paths is matched again, as the log dirs are listed again: a
        # broker's log dir that appears is read from now on, and the partitions of one
        # that is gone count as vanished.
        logs = consumer_partitions(self.read.current_paths(), self.read.store)
        views = {}
        for log in logs:
            if not self.read.selection.matches(log.topic, log.partition):
                continue
            tail = self._tails.get(log.topic_partition)
            if tail is None:
                tail = self._tails[log.topic_partition] = _TailScan(self.read.read_committed,
                                                                  self.read.verify_checksums)
            end, available = tail.advance(log, read_bound(log, self.read))
            if log.segments and tail.segment_base == log.segments[-1].base_offset and \
                    not tail.reached_limit:
                # The tail scan has walked the active segment to where its data ends:
                # planning this trigger's micro-batch need not walk it again.
                log.segments[-1].found_valid_end(tail.verify, tail.position)
            views[log.topic_partition] = PartitionView(log, end, available)
        for tp in list(self._tails):
            if tp not in views:
                del self._tails[tp]
        return views

    def initial_offsets(self) -> Offsets:
        """Where a new query starts: startingOffsets, startingTimestamp or
        startingOffsetsByTimestamp, as in a batch read (earliest by default)."""
        views = self.partitions_now()
        if not views:
            return {}
        logs = [view.log for view in views.values()]
        starting = self.read.starting
        starts = {}
        for tp, (start, _) in offset_ranges(self.read, logs).items():
            if starting.kind == "latest" or (
                    starting.kind == "offsets" and starting.offsets.get(tp) == LATEST):
                start = views[tp].available  # for read_committed, the last stable offset
            starts[tp] = start
        return starts

    def prepare_available_now(self) -> None:
        """Trigger.AvailableNow: read what is there now, then stop."""
        self.target = {tp: view.available for tp, view in self.partitions_now().items()}

    # --------------------------------------------------------------- triggers
    def latest_offsets(self, start: Offsets, limits: Optional[TriggerLimits]) -> Offsets:
        """The end of the next micro-batch from `start`; `start` itself when there is
        nothing to read yet (or minOffsetsPerTrigger asks to wait). `limits` None reads
        all that is available."""
        views = self.partitions_now()
        self.latest = {tp: view.available for tp, view in views.items()}
        begin: Offsets = {}
        for tp, offset in start.items():
            view = views.get(tp)
            if view is None:
                self._data_loss(tp, offset, None, "its partition directory is gone")
                continue
            begin[tp] = self._checked_start(tp, offset, view)
        for tp, view in views.items():
            if tp not in begin and (self.target is None or tp in self.target):
                begin[tp] = self._new_partition_start(tp, view)
        available = {}
        for tp, offset in begin.items():
            end = max(views[tp].available, offset)
            if self.target is not None:
                end = max(offset, min(end, self.target.get(tp, offset)))
            available[tp] = end
        if limits is None:
            self._remember_views(available, views)
            return available
        admitted = self._admit(begin, available, views, limits)
        if admitted is None:
            return dict(start)
        self._remember_views(admitted, views)
        return admitted

    def _remember_views(self, end: Offsets, views) -> None:
        remote = bool(views) and all(view.log.store.remote for view in views.values())
        self._trigger_views = (dict(end), views) if remote else None

    def _checked_start(self, tp: TopicPartition, offset: int, view: PartitionView) -> int:
        log = view.log
        if offset < log.start_offset:
            self._data_loss(tp, offset, log.start_offset,
                            f"the log now starts at {log.start_offset} (deleted by retention?)")
            return log.start_offset
        if offset > view.end:
            self._data_loss(tp, view.end, offset,
                            f"the log now ends at {view.end}, before offset {offset} that the "
                            f"query had reached (was the topic deleted and recreated?)",
                            reset_to=log.start_offset)
            return log.start_offset
        return offset

    def _new_partition_start(self, tp: TopicPartition, view: PartitionView) -> int:
        start = view.log.start_offset
        if start != 0:
            self._data_loss(tp, 0, start,
                            f"new partition {tp[0]}-{tp[1]} starts at offset {start}, not 0",
                            reset_to=start)
        return start

    def _data_loss(self, tp: TopicPartition, first: int, end: Optional[int], why: str,
                   reset_to: Optional[int] = None) -> None:
        name = f"{tp[0]}-{tp[1]}"
        missing = f"offsets [{first}, {end})" if end is not None else f"offsets from {first} on"
        if self.read.fail_on_data_loss:
            raise DataLossError(
                f"data loss in {name}: {missing} can no longer be read: {why}. Set "
                f"failOnDataLoss=false to continue from the earliest offset still present")
        resume = reset_to if reset_to is not None else end
        where = (f"continuing from offset {resume}" if resume is not None
                 else "it is no longer read")
        self.warn(f"data loss in {name}: {missing} can no longer be read: {why}; {where} "
                  f"(failOnDataLoss=false)")

    # ------------------------------------------------------- admission control
    def _admit(self, begin: Offsets, available: Offsets, views, limits: TriggerLimits
               ) -> Optional[Offsets]:
        backlog = {tp: available[tp] - begin[tp] for tp in begin if available[tp] > begin[tp]}
        total = sum(backlog.values())
        if limits.min_offsets is not None and self.target is None:
            now_ms = self.clock() * 1000
            waited = now_ms - self._last_admitted_ms
            if total < limits.min_offsets and waited < limits.max_trigger_delay_ms:
                return None
            self._last_admitted_ms = now_ms
        ends = dict(available)
        if limits.max_offsets is not None and total > limits.max_offsets:
            ends = _prorate(begin, available, backlog, total, limits.max_offsets, views)
        if limits.max_bytes is not None:
            ends = _limit_bytes(begin, ends, views, limits.max_bytes)
        return ends

    # ----------------------------------------------------------------- planning
    def plan(self, start: Offsets, end: Offsets) -> List[List[Fragment]]:
        """The micro-batch [start, end) as groups of fragments, one group per task."""
        remembered, self._trigger_views = self._trigger_views, None
        views = remembered[1] if remembered is not None and remembered[0] == end else \
            self.partitions_now()
        ranges = {}
        for tp, stop in end.items():
            view = views.get(tp)
            first = start.get(tp)
            if view is None:
                if first is not None and stop > first:
                    self._data_loss(tp, first, stop, "its partition directory is gone")
                continue
            log = view.log
            if first is None:
                first = log.start_offset  # a partition that appeared during the query
            elif first < log.start_offset:
                if stop > first:
                    self._data_loss(tp, first, min(stop, log.start_offset),
                                    f"the log now starts at {log.start_offset} (deleted by "
                                    f"retention?)")
                first = log.start_offset
            elif stop < first:
                first = log.start_offset  # the log was recreated (reported by the trigger)
            if stop > view.end:
                self._data_loss(tp, view.end, stop, f"the log now ends at {view.end}, before "
                                f"the end of this micro-batch (was it truncated?)")
                stop = view.end
            if first < stop:
                ranges[tp] = (first, stop)
        logs = [views[tp].log for tp in ranges]
        # Every end was at or below the last stable offset when it was admitted.
        fragments = plan_ranges(logs, ranges, self.read, last_stable=end)
        return group_fragments(fragments, self.read)


# ---------------------------------------------------------- limits, in offsets and bytes
def _prorate(begin: Offsets, available: Offsets, backlog: Dict[TopicPartition, int],
             total: int, limit: int, views) -> Offsets:
    """maxOffsetsPerTrigger split across partitions in proportion to their backlog, as
    Spark's Kafka source splits it: a share below one offset is rounded up so that no
    partition starves, others are rounded down. Offsets no batch holds (compaction gaps)
    cost nothing, so a gap never stalls a query."""
    ends = dict(available)
    for tp, size in backlog.items():
        share = limit * (size / total)
        share = int(-(-share // 1)) if share < 1 else int(share)
        if share < size:
            ends[tp] = _walk_offsets(views[tp].log, begin[tp], available[tp], share)
    return ends


def _headers_from(log: PartitionLog, start: int, limit: int) -> Iterator[BatchHeader]:
    """Batch headers of `log` that hold offsets at or past `start`, in order, from the
    segments that start below `limit` (the index entry below `start` is the way in).

    The headers are not checksummed here: they only pick where a micro-batch ends, below
    `limit` (from verified headers), and every batch of [start, limit) is verified when a
    micro-batch reads it, so a damaged header fails that read instead of hiding rows."""
    for segment in log.segments[log.segment_index_for(start):]:
        if segment.base_offset >= limit:
            return
        position = segment.offset_index.lookup(max(start, segment.base_offset))[1]
        for header in segment.iter_headers(position, allow_torn_tail=log.is_last(segment)):
            if header.last_offset >= start:
                yield header


def _walk_offsets(log: PartitionLog, start: int, limit: int, count: int) -> int:
    """The end offset after `count` offsets held by batches from `start` on, not past
    `limit`."""
    current, left = start, count
    for header in _headers_from(log, start, limit):
        # A compressed legacy wrapper knows only its last offset: it follows on.
        exact = header.magic == 2 or header.compression == 0
        first = max(header.base_offset if exact else current, current)
        if first >= limit:
            return limit
        span = header.last_offset + 1 - first
        if span >= left:
            return min(first + left, limit)
        left -= span
        current = header.last_offset + 1
        if current >= limit:
            return limit
    return min(current, limit)


def _limit_bytes(begin: Offsets, ends: Offsets, views, budget: int) -> Offsets:
    """Ends that keep the micro-batch within `budget` bytes of log, counted in whole
    batches: first a share per partition in proportion to its backlog, then what is left
    to partitions in order. One batch is admitted even when it alone is over budget, so
    that a query always progresses."""
    backlog = {tp: _backlog_bytes(views[tp].log, begin[tp], ends[tp])
               for tp in begin if ends[tp] > begin[tp]}
    total = sum(backlog.values())
    if total <= budget:
        return dict(ends)
    limited = dict(begin)
    for tp, end in ends.items():
        if tp not in backlog:
            limited[tp] = end
    left = budget
    for tp in sorted(backlog):
        share = budget * backlog[tp] // total
        limited[tp], used = _walk_bytes(views[tp].log, begin[tp], ends[tp], share)
        left -= used
    for tp in sorted(backlog):
        if left <= 0:
            break
        limited[tp], used = _walk_bytes(views[tp].log, limited[tp], ends[tp], left)
        left -= used
    if all(limited[tp] == begin[tp] for tp in backlog):
        tp = max(sorted(backlog), key=lambda t: backlog[t])
        limited[tp], _ = _walk_bytes(views[tp].log, begin[tp], ends[tp], budget,
                                     at_least_one=True)
    return limited


def _backlog_bytes(log: PartitionLog, start: int, end: int) -> int:
    """About how many bytes of log hold offsets [start, end): from the index entry at or
    before `start` to the one after `end - 1` (an overestimate by up to an interval)."""
    first = log.segment_index_for(start)
    last = log.segment_index_for(end - 1)
    total = 0
    for i in range(first, last + 1):
        segment = log.segments[i]
        low = segment.offset_index.lookup(max(start, segment.base_offset))[1] if i == first else 0
        high = segment.offset_index.position_after(end - 1) if i == last else None
        total += max(0, (segment.size if high is None else min(high, segment.size)) - low)
    return total


def _walk_bytes(log: PartitionLog, start: int, limit: int, budget: int,
                at_least_one: bool = False) -> Tuple[int, int]:
    """(end, bytes): the end offset after the whole batches from `start` that fit in
    `budget` bytes, without passing `limit`; a batch that `start` falls inside counts
    whole."""
    end, used = start, 0
    if start >= limit:
        return end, used
    for header in _headers_from(log, start, limit):
        if header.base_offset >= limit and header.last_offset >= limit:
            break
        if used + header.size > budget and not (at_least_one and used == 0):
            break
        used += header.size
        end = min(header.last_offset + 1, limit)
        if end >= limit:
            break
    return end, used
