"""The writer engine and the read planning, without Spark.

Writes a topic from row dicts and from an Arrow table with `segmentlog_datasource.writer`,
shows that a write that fails leaves the log as it was, then reads records back by
planning fragments (byte ranges of segments) and scanning each into Arrow record batches,
as a Spark task would. pyspark is never imported.

    python examples/engine_without_spark.py
"""
import datetime as dt
import os
import shutil
import sys
import tempfile

import pyarrow as pa
import pyarrow.compute as pc

from segmentlog_datasource import offset_range, time_range
from segmentlog_datasource.format import ScanOptions, discover_partitions
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.writer import SegmentLogWriter, write_log

START_MS = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC


def read_table(logdir, **options):
    """Plan a read with the data source's options and scan every fragment into one table."""
    fragments = plan_fragments(parse_read_options({"path": logdir, **options}), Constraints())
    batches = [batch for fragment in fragments
               for batch in fragment.scan(ScanOptions(include_headers=True))]
    table = pa.Table.from_batches(batches) if batches else None
    return fragments, table


def end_offsets(logdir):
    return {log.partition: log.end_offset() for log in discover_partitions([logdir])}


def main():
    logdir = tempfile.mkdtemp(prefix="segmentlog-engine-")
    try:
        # Rows as dicts: bytes or str keys and values, epoch ms or datetime timestamps,
        # headers as (key, value) pairs.
        summary = write_log(logdir, [
            {"key": "sensor-1", "value": b'{"celsius": 21.5}', "timestamp": START_MS,
             "headers": [("unit", b"C")]},
            {"key": "sensor-2", "value": b'{"celsius": 19.0}', "timestamp": START_MS + 500},
            {"key": None, "value": b"calibration done", "timestamp": START_MS + 900},
        ], topic="readings", num_partitions=2, compression="lz4")
        print(f"first write: {summary.records} records, offsets per partition {summary.offsets()}")

        # An Arrow table, appended with a writer that commits when the block ends.
        n = 20_000
        table = pa.table({
            "key": [f"sensor-{i % 40}" for i in range(n)],
            "value": [f'{{"celsius": {15 + i % 100 / 10}}}' for i in range(n)],
            "timestamp": pa.array([START_MS + 1_000 + i * 100 for i in range(n)],
                                  pa.timestamp("ms", tz="UTC")),
        })
        with SegmentLogWriter(logdir, "readings", compression="gzip",
                              segment_bytes=64 * 1024) as writer:
            writer.write_table(table)
        print(f"appended {writer.summary.records:,} records: {writer.summary.offsets()}")

        # An error inside the block aborts the write: nothing of it becomes visible.
        ends_before = end_offsets(logdir)
        try:
            with SegmentLogWriter(logdir, "readings") as writer:
                writer.write_rows([{"key": "sensor-1", "value": b"never visible"}])
                raise RuntimeError("the producer of this data failed")
        except RuntimeError as error:
            assert end_offsets(logdir) == ends_before
            print(f"aborted write ({error}): the log end offsets are still {ends_before}")

        for log in discover_partitions([logdir]):
            sizes = ", ".join(f"{s.base_offset}: {s.size:,} B" for s in log.segments)
            print(f"{log.topic}-{log.partition}: log end offset {log.end_offset():,}; "
                  f"segments {sizes}")

        fragments, everything = read_table(logdir)
        print(f"whole log: {len(fragments)} fragments, {everything.num_rows:,} records")
        assert everything.num_rows == n + 3, everything.num_rows

        fragments, one = read_table(logdir, **offset_range("readings", 1, 5_000, 5_001))
        record = one.to_pylist()[0]
        print(f"offset 5000 of readings-1 ({len(fragments)} fragment, {fragments[0]}): "
              f"key={record['key'].decode()} value={record['value'].decode()} "
              f"timestamp={record['timestamp']}")
        assert one.num_rows == 1 and record["offset"] == 5_000

        window_start = dt.datetime.fromtimestamp((START_MS + 1_000_000) / 1000, dt.timezone.utc)
        fragments, window = read_table(
            logdir, **time_range(window_start, window_start + dt.timedelta(seconds=30)))
        print(f"30 s from {window_start:%H:%M:%S} UTC through the time index: "
              f"{window.num_rows} records in {len(fragments)} fragments")
        assert window.num_rows == 300, window.num_rows

        with_headers = everything.filter(pc.greater(pc.list_value_length(everything["headers"]), 0))
        for row in with_headers.to_pylist():
            print(f"record with headers: readings-{row['partition']} offset {row['offset']}, "
                  f"headers {[(h['key'], h['value']) for h in row['headers']]}")

        assert "pyspark" not in sys.modules
        print("pyspark was never imported")
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    print("removed", os.path.basename(logdir))


if __name__ == "__main__":
    main()
