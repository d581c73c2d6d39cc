"""One error type for bad options, whether a read or a write refuses them."""
import pyarrow as pa
import pytest

from segmentlog_datasource.errors import InvalidOptionError, SegmentLogError
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.writer import write_log


def test_reads_and_writes_raise_the_same_option_error(tmp_path):
    with pytest.raises(InvalidOptionError) as read_error:
        parse_read_options({"path": str(tmp_path), "maxPartitionBytes": "lots"})
    assert read_error.value.option == "maxPartitionBytes" and "'lots'" in str(read_error.value)
    with pytest.raises(InvalidOptionError) as write_error:
        write_log(str(tmp_path / "log"), pa.table({"value": [b"v"]}), topic="t",
                  num_partitions=1, compression="brotli")
    assert "brotli" in str(write_error.value)
    for error in (read_error.value, write_error.value):
        assert isinstance(error, SegmentLogError) and isinstance(error, ValueError)
    assert not (tmp_path / "log" / "t-0").exists()  # refused before anything was written
