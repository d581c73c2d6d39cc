"""Read options for offset and time lookups, in the forms of Spark's Kafka source.

Each function returns a dict for `spark.read.format("segmentlog").options(**...)`; it
only writes the JSON of `assign`, `startingOffsets`/`endingOffsets` or
`subscribe`, `startingTimestamp`/`endingTimestamp`, so the same dict works with
`format("kafka")`. Planning turns these into index lookups for each DataFrame on its
own, whatever Spark's filter pushdown setting.
"""
import datetime as dt
import json
from typing import Dict, Iterable, Mapping, Optional, Tuple, Union

from ..errors import InvalidOptionError
from ..format.log import partition_dir_name

LATEST = "latest"
_LATEST_OFFSET = -1  # Spark's Kafka source's JSON value for "latest"

Offset = Union[int, str]
Timestamp = Union[int, dt.datetime]


def _check_offset(value, what: str, allow_latest: bool) -> int:
    if allow_latest and isinstance(value, str) and value.lower() == LATEST:
        return _LATEST_OFFSET
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        accepted = 'an offset >= 0 or "latest"' if allow_latest else "an offset >= 0"
        raise InvalidOptionError(f"{what}: {value!r} is not {accepted}")
    return value


def offset_ranges(ranges: Mapping[str, Mapping[int, Tuple[int, Offset]]]) -> Dict[str, str]:
    """Options that read offsets [start, end) of each partition named:
    `{"orders": {0: (100, 200), 3: (5, "latest")}}`. Only these partitions are read."""
    assign, starting, ending = {}, {}, {}
    for topic, partitions in ranges.items():
        if not partitions:
            raise InvalidOptionError(f"topic {topic!r}: name at least one partition")
        for partition, bounds in partitions.items():
            where = partition_dir_name(topic, partition)
            if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
                raise InvalidOptionError(f"{where}: the partition must be an integer >= 0")
            start, end = bounds
            start = _check_offset(start, f"{where} start", allow_latest=False)
            end = _check_offset(end, f"{where} end", allow_latest=True)
            if end != _LATEST_OFFSET and end < start:
                raise InvalidOptionError(f"{where}: end {end} is before start {start}")
            assign.setdefault(topic, []).append(partition)
            starting.setdefault(topic, {})[str(partition)] = start
            ending.setdefault(topic, {})[str(partition)] = end
    return {"assign": json.dumps(assign), "startingOffsets": json.dumps(starting),
            "endingOffsets": json.dumps(ending)}


def offset_range(topic: str, partition: int, start: int, end: Offset = LATEST) -> Dict[str, str]:
    """Options that read offsets [start, end) of one partition; a point lookup of offset
    N is `offset_range(topic, partition, N, N + 1)`."""
    return offset_ranges({topic: {partition: (start, end)}})


def _epoch_millis(value: Timestamp, what: str) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise InvalidOptionError(f"{what}: {value!r} has no time zone; give an aware datetime "
                             "(e.g. tzinfo=datetime.timezone.utc) or epoch milliseconds")
        delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        return delta // dt.timedelta(milliseconds=1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidOptionError(f"{what}: {value!r} is neither epoch milliseconds >= 0 nor a datetime")
    return value


def time_range(start: Optional[Timestamp] = None, end: Optional[Timestamp] = None,
               topics: Optional[Iterable[str]] = None) -> Dict[str, str]:
    """Options that read, in each partition, from the first offset whose timestamp is at
    or after `start` up to (not including) the first offset whose timestamp is at or
    after `end`, found through the time index as a Kafka consumer's offsetsForTimes
    does. `topics` limits the read to those topics (`subscribe`)."""
    options = {}
    if start is not None:
        options["startingTimestamp"] = str(_epoch_millis(start, "start"))
    if end is not None:
        options["endingTimestamp"] = str(_epoch_millis(end, "end"))
    if start is not None and end is not None and \
            int(options["endingTimestamp"]) < int(options["startingTimestamp"]):
        raise InvalidOptionError(f"end {end!r} is before start {start!r}")
    if topics is not None:
        topics = [topics] if isinstance(topics, str) else list(topics)
        if not topics or not all(isinstance(t, str) and t for t in topics):
            raise InvalidOptionError(f"topics: {topics!r} is not a list of topic names")
        options["subscribe"] = ",".join(topics)
    return options
