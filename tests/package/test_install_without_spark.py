"""`pip install .` without extras brings no PySpark, and the Spark-free layers run.

The install goes into a fresh virtual environment (no system site packages), from this
checkout, the way a cluster image with its own Spark would install the package. It runs
beside the rest of the suite, and these tests last.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from support.paths import CHECKOUT

USE_WITHOUT_SPARK = textwrap.dedent("""
    import importlib.util, json, os, sys
    import pyarrow as pa
    from segmentlog_datasource import offset_range
    from segmentlog_datasource.format import PartitionLog, ScanOptions, SegmentRange, scan_segment
    from segmentlog_datasource.read.options import parse_read_options
    from segmentlog_datasource.read.planning import Constraints, plan_fragments
    from segmentlog_datasource.writer import write_log

    logdir = sys.argv[1]
    write_log(logdir, pa.table({"key": [b"k%d" % i for i in range(50)],
                                "value": [b"v%d" % i for i in range(50)]}),
              topic="orders", num_partitions=2)
    log = PartitionLog.open(os.path.join(logdir, "orders-0"))
    segment = log.segments[0]
    whole = SegmentRange(log.topic, log.partition, segment.log_path, segment.size, 0,
                         segment.size, 0, log.end_offset(), True)
    scanned = sum(batch.num_rows for batch in scan_segment(whole, ScanOptions()))
    options = {"path": logdir, **offset_range("orders", 1, 0, 5)}
    planned = [f for f in plan_fragments(parse_read_options(options), Constraints())]
    looked_up = sum(b.num_rows for f in planned for b in f.scan(ScanOptions()))
    print(json.dumps({
        "pyspark": importlib.util.find_spec("pyspark") is not None,
        "partition_0_rows": scanned, "partition_1_rows": PartitionLog.open(
            os.path.join(logdir, "orders-1")).end_offset(),
        "lookup_rows": looked_up,
    }))
""")


def start_plain_install(request):
    """The virtualenv and the pip install, run beside the suite (support/background.py)."""
    venv = request.getfixturevalue("tmp_path_factory").mktemp("plain-install") / "venv"

    def program():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        python = venv / "bin" / "python"
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--no-compile", str(CHECKOUT)],
            capture_output=True, text=True, timeout=900)
        return python, installed

    return program


pytestmark = pytest.mark.background(starter=start_plain_install)


@pytest.fixture  # not module-scoped: after the autouse fixture that starts the programs,
def plain_install(background):  # which `-m "not spark"` leaves to this file's first test
    python, installed = background.result(start_plain_install)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return python


def test_plain_install_has_no_pyspark_and_declares_it_only_as_an_extra(plain_install):
    shown = subprocess.run(
        [str(plain_install), "-c",
         "import importlib.metadata as m, json; print(json.dumps(m.requires('segmentlog')))"],
        capture_output=True, text=True, timeout=120, cwd="/")
    assert shown.returncode == 0, shown.stderr
    requires = json.loads(shown.stdout)
    pyspark = [r for r in requires if r.startswith("pyspark")]
    assert pyspark and all("extra ==" in r for r in pyspark), requires
    missing = subprocess.run([str(plain_install), "-c", "import pyspark"],
                             capture_output=True, text=True, timeout=120, cwd="/")
    assert missing.returncode != 0 and "No module named 'pyspark'" in missing.stderr


def test_format_read_planning_and_writer_engine_run_without_pyspark(plain_install, tmp_path):
    result = subprocess.run(
        [str(plain_install), "-c", USE_WITHOUT_SPARK, str(tmp_path / "logdir")],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["pyspark"] is False
    assert report["partition_0_rows"] + report["partition_1_rows"] == 50
    assert report["lookup_rows"] == min(5, report["partition_1_rows"])


def test_the_command_line_runs_without_pyspark(plain_install, kafka_logdir):
    script = plain_install.parent / "segmentlog"
    # txn-0 is uncompressed: the plain install has no snappy or zstd codec.
    result = subprocess.run([str(script), "describe", "--json", os.path.join(kafka_logdir, "txn-0")],
                            capture_output=True, text=True, timeout=300, cwd="/")
    assert result.returncode == 0, result.stderr[-2000:]
    (described,) = json.loads(result.stdout)["partitions"]
    assert (described["topic"], described["records"]) == ("txn", 204)


def test_the_spark_source_says_what_to_install_without_pyspark(plain_install, tmp_path):
    result = subprocess.run(
        [str(plain_install), "-c", "import segmentlog_datasource.spark.source"],
        capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert result.returncode != 0
    assert "segmentlog[spark]" in result.stderr, result.stderr[-2000:]


def test_the_sdist_carries_every_file_the_compiled_modules_are_built_from(tmp_path):
    """A wheel built from the sdist (`python -m build`) compiles the C sources there: every
    header they include must be packed too, or the build fails and the pure twins run.
    The sdist packs what egg_info's manifest (SOURCES.txt) lists; it is written to the
    temp dir, so nothing appears in the checkout."""
    import re

    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)],
                   cwd=CHECKOUT, check=True, capture_output=True, timeout=120)
    names = set((tmp_path / "segmentlog.egg-info" / "SOURCES.txt").read_text().split())
    sources = [path.relative_to(CHECKOUT).as_posix()
               for path in (CHECKOUT / "segmentlog_datasource").rglob("*.c")]
    assert "segmentlog_datasource/format/fastpath/_fastencode.c" in sources
    for source in sources:
        assert source in names, source
        for header in re.findall(r'#include "([^"]+)"', (CHECKOUT / source).read_text()):
            included = ((CHECKOUT / source).parent / header).relative_to(CHECKOUT)
            assert included.as_posix() in names, (source, header)
