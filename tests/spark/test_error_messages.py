"""What a user sees when a query fails on segmentlog's account (#9, #45): the project's
message, with what to do, on one line and with no traceback of segmentlog's, raised on
the driver wherever planning can find the fault (options, discovery, indexes)."""
import os
import re
import shutil
import struct

import pytest
from pyspark.errors import AnalysisException, PythonException

from support.manifest import expected_rows, iter_batches, load_manifest


def python_frames(error) -> int:
    """Frames of the Python traceback inside Spark's error text."""
    return len(re.findall(r'^\s*File "', str(error), re.M))


def segmentlog_line(error, kind):
    """The line of Spark's error text that is segmentlog's error `kind`: what segmentlog
    puts there is that one line, with no Python traceback above it."""
    text = str(error)
    lines = [line for line in text.splitlines()
             if f"segmentlog_datasource.errors.{kind}: " in line]
    assert len(lines) == 1, text
    assert python_frames(error) == 0 and "Traceback (most recent call last)" not in text, text
    return lines[0]


@pytest.fixture
def plain_copy(kafka_logdir, tmp_path):
    """A log dir holding a writable copy of partition plain-0 only."""
    logdir = tmp_path / "logdir"
    shutil.copytree(os.path.join(kafka_logdir, "plain-0"), logdir / "plain-0")
    for directory, _, files in os.walk(logdir):
        os.chmod(directory, 0o755)
        for name in files:
            os.chmod(os.path.join(directory, name), 0o644)
    return str(logdir)


@pytest.mark.compat
def test_a_damaged_batch_fails_the_task_with_the_file_byte_and_remedy(spark, kafka_logdir,
                                                                       plain_copy):
    manifest = load_manifest(kafka_logdir, "plain-0")
    segment, batch = next((s, b) for s, b in iter_batches(manifest)
                          if b["compression"] == "none" and b["record_count"] > 1)
    path = os.path.join(plain_copy, "plain-0", f"{segment['base_offset']:020d}.log")
    with open(path, "r+b") as handle:  # a byte of the records: only the CRC shows it
        handle.seek(batch["position"] + batch["size_in_bytes"] - 1)
        last = handle.read(1)
        handle.seek(batch["position"] + batch["size_in_bytes"] - 1)
        handle.write(bytes([last[0] ^ 0xFF]))
    with pytest.raises(PythonException) as error:
        spark.read.format("segmentlog").load(plain_copy).collect()
    line = segmentlog_line(error.value, "CorruptLogError")
    assert f"{path} at byte {batch['position']}: checksum mismatch" in line
    assert "What to do: copy the segment again from another replica" in line


@pytest.mark.compat
def test_an_option_error_is_raised_on_the_driver_in_one_line(spark, plain_copy):
    reader = spark.read.format("segmentlog").option("startingOffsets", "bogus")
    with pytest.raises(AnalysisException) as error:
        reader.load(plain_copy).collect()
    line = segmentlog_line(error.value, "InvalidOptionError")
    assert "option 'startingOffsets': invalid value 'bogus'" in line


def test_a_damaged_index_fails_planning_and_its_remedy_works(spark, kafka_logdir,
                                                             plain_copy):
    manifest = load_manifest(kafka_logdir, "plain-0")
    segment = next(s for s in manifest["segments"] if s["offset_index"]["entries"])
    index = os.path.join(plain_copy, "plain-0", f"{segment['base_offset']:020d}.index")
    with open(index, "r+b") as handle:  # the first entry's position past its log's end
        handle.seek(4)
        handle.write(struct.pack(">i", 1 << 30))
    df = spark.read.format("segmentlog").load(plain_copy)
    with pytest.raises(AnalysisException) as error:  # planning, before any task
        df.collect()
    assert "Failed to generate Python data source read partitions" in str(error.value)
    line = segmentlog_line(error.value, "CorruptLogError")
    assert index in line and "What to do: move the damaged index file aside" in line
    # The remedy, followed: the segment reads whole without its index.
    os.rename(index, index + ".damaged")
    rows = spark.read.format("segmentlog").load(plain_copy).orderBy("offset").collect()
    assert [r["offset"] for r in rows] == \
        [row["offset"] for row in expected_rows(manifest)]


@pytest.mark.compat
def test_a_write_option_error_is_raised_on_the_driver_in_one_line(spark, tmp_path):
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(AnalysisException) as error:
        df.write.format("segmentlog").option("topic", "t").option("compression.type", "brotli") \
            .mode("append").save(str(tmp_path / "out"))
    line = segmentlog_line(error.value, "InvalidOptionError")
    assert "compression" in line and "brotli" in line
    assert not os.path.exists(tmp_path / "out")


def test_the_full_traceback_is_kept_on_request(monkeypatch):
    import traceback

    from segmentlog_datasource.errors import SegmentLogError
    from segmentlog_datasource.spark.errors import FULL_TRACEBACK_VARIABLE, short_errors

    def deep_down():
        raise SegmentLogError("the cause")

    @short_errors
    def entry_point():
        deep_down()

    def frames():
        with pytest.raises(SegmentLogError) as error:
            entry_point()
        return [frame.name for frame in traceback.extract_tb(error.value.__traceback__)]

    assert "deep_down" not in frames()
    monkeypatch.setenv(FULL_TRACEBACK_VARIABLE, "1")
    assert "deep_down" in frames()
