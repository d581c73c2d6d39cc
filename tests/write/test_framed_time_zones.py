"""Framed writes of timestamps nested in structs, arrays and maps, and of dates, in any
session time zone: Spark hands a write's tasks Arrow batches whose timestamps carry the
session's zone, while a timestamp's values are instants whatever the zone. Every zone
gives the same bytes and reads back the same instants, for Avro, JSON Schema and
Protobuf."""
import datetime as dt

import pyarrow as pa
import pytest

from segmentlog_datasource.writer import write_log
from support.reading import decoded_rows, read_values

ZONES = ["UTC", "Etc/UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata",
         "Pacific/Chatham"]
LANGUAGES = ["avro", "json", "protobuf"]
UTC = dt.timezone.utc
MOMENTS = [dt.datetime(2024, 3, 31, 0, 59, 59, 123456, tzinfo=UTC),  # Berlin's DST starts
           dt.datetime(2024, 11, 3, 6, 30, tzinfo=UTC),               # New York's DST ends
           dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)]


def value_type(zone, language):
    stamp = pa.timestamp("us", zone)
    # Protobuf's mapping has no date (docs/values.md: derived schemas refuse it)
    day = [] if language == "protobuf" else [pa.field("day", pa.date32())]
    return pa.struct([
        pa.field("at", stamp),
        pa.field("inner", pa.struct([pa.field("when", stamp), *day])),
        pa.field("history", pa.list_(pa.field("element", stamp))),
        pa.field("by_name", pa.map_(pa.string(), stamp)),
    ])


def rows(language):
    out = []
    for index, moment in enumerate(MOMENTS):
        out.append({"at": moment,
                    "inner": {"when": moment + dt.timedelta(hours=index),
                              **({} if language == "protobuf" else
                                 {"day": (moment + dt.timedelta(days=index)).date()})},
                    "history": [moment, moment - dt.timedelta(minutes=1)],
                    "by_name": [("first", moment)]})
    return out


def batch(zone, language):
    return pa.record_batch({"value": pa.array(rows(language), value_type(zone, language))})


def instants(value):
    """A decoded value with every timestamp as an aware UTC datetime (Arrow gives aware
    datetimes for zoned columns) and maps as item lists."""
    if isinstance(value, dt.datetime):
        return value.astimezone(UTC)
    if isinstance(value, dict):
        return {name: instants(item) for name, item in value.items()}
    if isinstance(value, list):
        return [instants(item) for item in value]
    if isinstance(value, tuple):
        return tuple(instants(item) for item in value)
    return value


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_zone_writes_the_same_bytes_and_reads_back_the_same_instants(tmp_path,
                                                                          language):
    written = {}
    for zone in ZONES:
        logdir = str(tmp_path / zone.replace("/", "_"))
        # the batches of one write in two zones, as a driver in UTC plans what a session
        # in another zone's tasks hand over
        write_log(logdir, [batch("UTC", language), batch(zone, language)], topic="events",
                  num_partitions=1,
                  options={"valueFormat": language})
        written[zone] = read_values(logdir, subscribe="events")[("events", 0)]
        got = decoded_rows({"path": logdir, "subscribe": "events", "valueFormat": language})
        expected = instants(rows(language)) * 2
        assert [instants(row["valueDecoded"]) for row in got] == expected, zone
    first = written[ZONES[0]]
    assert all(values == first for values in written.values())
