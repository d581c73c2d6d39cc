"""A segment cut short while a Spark task reads it (#22): the query fails with
SegmentShrankError naming the file and its sizes, the Python worker does not crash, and
the session reads on. The cut is made in the worker, at a chosen point of the task, by
a test data source whose reader wraps segmentlog's own (tests/format/test_shrink.py
covers more timings without Spark)."""
import os

import pytest
from pyspark.errors import PythonException

from segmentlog_datasource.format.encode import build_record_batch

BATCHES = 300
RECORDS_PER_BATCH = 100  # 30,000 records: three runs of 10,000 rows


def shrinking_source(timing: str, cut_to: int, at: int):
    """`format("segmentlog_shrinking")`: segmentlog's reader, whose task cuts the segment it
    reads to `cut_to` bytes: once it is open ("after_open"), inside a decode run once a
    batch ending at or past byte `at` is decoded ("in_run"), or while Spark holds the
    first batch of rows ("between_runs")."""
    from dataclasses import replace

    from pyspark.sql.datasource import DataSourceReader

    from segmentlog_datasource.spark.source import SegmentLogDataSource
    from segmentlog_datasource.storage.local import LocalStore

    class CuttingStore(LocalStore):
        def open_log(self, path, size, chunks=None):
            data = super().open_log(path, size, chunks)
            os.truncate(path, cut_to)
            return data

    class ShrinkingReader(DataSourceReader):
        def __init__(self, reader):
            self.reader = reader

        def partitions(self):
            return self.reader.partitions()

        def read(self, partition):
            from segmentlog_datasource.format import fastpath

            paths = [fragment.log_path for fragment in partition.fragments]
            if timing == "after_open":
                partition.fragments = [replace(fragment, store=CuttingStore())
                                       for fragment in partition.fragments]
            elif timing == "in_run":
                def cut_inside_the_run(position):
                    if position >= at and os.path.getsize(paths[0]) > cut_to:
                        os.truncate(paths[0], cut_to)
                fastpath.set_run_hook(cut_inside_the_run)
            try:
                for number, batch in enumerate(self.reader.read(partition)):
                    yield batch
                    if timing == "between_runs" and number == 0:
                        os.truncate(paths[0], cut_to)
            finally:
                fastpath.set_run_hook(None)

    class ShrinkingSource(SegmentLogDataSource):
        @classmethod
        def name(cls):
            return "segmentlog_shrinking"

        def reader(self, schema):
            return ShrinkingReader(super().reader(schema))

    return ShrinkingSource


@pytest.fixture(scope="module")
def segment():
    """(bytes, end position of each batch): plain batches, about 2.5 MB."""
    out, ends = bytearray(), []
    for number in range(BATCHES):
        base = number * RECORDS_PER_BATCH
        records = [(b"key-%d" % (base + i), b"%07d" % (base + i) + b"v" * 53,
                    1_700_000_000_000 + base + i, []) for i in range(RECORDS_PER_BATCH)]
        out += build_record_batch(records, base_offset=base)
        ends.append(len(out))
    return bytes(out), ends


def log_dir(tmp_path, data):
    partition = tmp_path / "shrinking-0"
    partition.mkdir(parents=True)
    (partition / "00000000000000000000.log").write_bytes(data)
    return str(tmp_path), str(partition / "00000000000000000000.log")


def test_a_segment_cut_in_the_task_fails_the_query_cleanly(spark, segment, tmp_path):
    data, ends = segment
    size, cut_to = len(data), len(data) // 10
    # Once the task mapped the segment (before its first run), and inside its second run
    # (runs stop every 10,000 rows), where the run goes on past the new end.
    for timing in ("after_open", "in_run"):
        logs, path = log_dir(tmp_path / timing, data)
        spark.dataSource.register(shrinking_source(timing, cut_to, at=ends[149]))
        with pytest.raises(PythonException) as error:
            spark.read.format("segmentlog_shrinking").load(logs).selectExpr(
                "sum(offset)").collect()
        assert os.path.getsize(path) == cut_to, f"{timing}: the task did not cut the segment"
        text = str(error.value)
        assert "crashed" not in text and "exited unexpectedly" not in text, text
        lines = [line for line in text.splitlines()
                 if line.startswith("segmentlog_datasource.errors.SegmentShrankError: ")]
        assert lines, text
        assert f"{path} at byte {cut_to}: segment shrank from {size} to {cut_to} bytes " \
            "while being read" in lines[0], lines[0]
    # The session reads on, and reads a whole copy whole.
    logs, _ = log_dir(tmp_path / "whole", data)
    rows = BATCHES * RECORDS_PER_BATCH
    assert spark.read.format("segmentlog").load(logs).selectExpr(
        "count(*)", "sum(offset)").collect()[0] == (rows, rows * (rows - 1) // 2)
