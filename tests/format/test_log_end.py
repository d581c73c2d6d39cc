"""The end of a partition's data: a file that shrinks while it is read, and where the
valid data of the last (active) segment ends."""
import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from segmentlog_datasource.writer import write_log

SHRINK_SCRIPT = textwrap.dedent("""
    import os, sys
    from segmentlog_datasource.errors import CorruptLogError
    from segmentlog_datasource.format.log import PartitionLog
    from segmentlog_datasource.format.scan import ScanOptions, SegmentRange, scan_segment

    directory, fast = sys.argv[1], sys.argv[2] == "1"
    segment = PartitionLog.open(directory).segments[0]
    scan = scan_segment(SegmentRange("t", 0, segment.log_path, segment.size, 0, segment.size,
                                     0, 1 << 62, True, segment_base_offset=0),
                        ScanOptions(max_batch_rows=100, use_fast_path=fast))
    first = next(scan)
    # Another process (retention, a truncating follower) cuts the file between batches, at
    # a page boundary: the next mapped page read lies wholly past the end (SIGBUS).
    os.truncate(segment.log_path, segment.size // 3 // 4096 * 4096)
    try:
        for batch in scan:
            pass
    except CorruptLogError as exc:
        print("ERROR", first.num_rows, exc)
    else:
        print("NO ERROR")
""")


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "pure"])
def test_a_segment_that_shrinks_during_a_scan_is_an_error_not_a_crash(tmp_path, fast):
    logdir = str(tmp_path)
    write_log(logdir, pa.table({"value": [b"v%05d" % i + b"x" * 200 for i in range(5000)]}),
              topic="t", num_partitions=1, batch_size=50)
    directory = os.path.join(logdir, "t-0")
    size = os.path.getsize(os.path.join(directory, "00000000000000000000.log"))
    done = subprocess.run([sys.executable, "-c", SHRINK_SCRIPT, directory, "1" if fast else "0"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    out = done.stdout.strip()
    assert out.startswith("ERROR 100 "), out
    assert f"shrank from {size} to {size // 3 // 4096 * 4096} bytes while being read" in out
    assert "00000000000000000000.log" in out

