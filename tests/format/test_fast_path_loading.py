"""Which compiled decoder a run from a source checkout loads, and the warning when none.

Spark's Python workers put their working directory first on sys.path, so a job started
from a checkout imports the checkout's package, which has no extension built beside it.
compiled.py then loads the installed copy's build, but only one built from the checkout's
own _fastrecords.c and the Python values compiled into it (layout.py, fastpath/protocol.py:
buildinfo.source_sha256); otherwise make_accumulator warns once
(FastPathUnavailableWarning) and reads with the pure-Python decoder.

Each test copies this checkout's package source (no .so) to a temporary directory and
runs a real Python subprocess there, with that directory first on sys.path and the
installed package (the one these tests import) on the path as well.
"""
import importlib.machinery
import json
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import segmentlog_datasource
from support.paths import CHECKOUT

INSTALLED_SITE = Path(segmentlog_datasource.__file__).resolve().parent.parent
FASTPATH = Path("segmentlog_datasource", "format", "fastpath")
INSTALLED_BUILDS = [
    path for suffix in importlib.machinery.EXTENSION_SUFFIXES
    for path in (INSTALLED_SITE / "segmentlog_datasource" / "format" / "fastpath").glob("_fastrecords" + suffix)
]

requires_installed_build = pytest.mark.skipif(
    not INSTALLED_BUILDS,
    reason=f"the installed package ({INSTALLED_SITE}) has no compiled _fastrecords module, so "
           "there is no build for a checkout run to load (a pure-Python install is supported "
           "without a C compiler; CI sets SEGMENTLOG_REQUIRE_FAST=1 and fails instead)",
)

# Run in the copy: import the package from it, scan a small segment twice, and report.
PROBE = r"""
import json, os, sys, warnings

copy, installed_site, drop_installed = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
sys.path.insert(0, copy)  # the working directory first, as Spark's Python workers have it


def is_installed_site(entry):
    return os.path.realpath(entry or os.curdir) == os.path.realpath(installed_site)


if not any(map(is_installed_site, sys.path)):
    sys.path.append(installed_site)

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")  # every warning counts, not once per code location
    import segmentlog_datasource.format as fmt
    from segmentlog_datasource.format.encode import build_record_batch
    from segmentlog_datasource.format.fastpath import batch_encoder, make_accumulator
    from segmentlog_datasource.format.fastpath import FastEncoderUnavailableWarning
    from segmentlog_datasource.format.scan import ScanOptions, SegmentRange, scan_segment

    if drop_installed:  # as if the package were not installed at all
        # Its dependencies stay importable: they share the site with the installed copy.
        import crc32c, crcmod.predefined  # noqa: F401  (format/crc.py loads one at first use)

        sys.path[:] = [entry for entry in sys.path if not is_installed_site(entry)]
    pure = make_accumulator(False, use_fast_path=False)
    segment = os.path.join(copy, "00000000000000000000.log")
    with open(segment, "wb") as out:
        out.write(build_record_batch([(b"k%d" % i, b"v", 1000 + i, []) for i in range(25)]))
    size = os.path.getsize(segment)
    whole = SegmentRange("t", 0, segment, size, 0, size, 0, 2**63 - 1, True)
    rows = [sum(batch.num_rows for batch in scan_segment(whole, ScanOptions()))
            for _ in range(2)]
    accumulator = make_accumulator(False)
    encoder = batch_encoder()

fast = sys.modules.get("segmentlog_datasource.format.fastpath.compiled")
compiled = sys.modules.get("segmentlog_datasource.format.fastpath._fastrecords")
print(json.dumps({
    "package": fmt.__file__,
    "fast": fast is not None and isinstance(accumulator, fast.CompiledAccumulator),
    "accumulator": type(accumulator).__name__,
    "pure": type(pure).__name__,
    "compiled": getattr(compiled, "__file__", None),
    "rows": rows,
    "warnings": [str(w.message) for w in caught
                 if issubclass(w.category, fmt.FastPathUnavailableWarning)],
    "encoder": encoder.__name__,
    "encoder_warnings": [str(w.message) for w in caught
                         if issubclass(w.category, FastEncoderUnavailableWarning)],
}))
"""


def copy_checkout(tmp_path):
    """This checkout's package source, without any compiled module, in tmp_path/src."""
    target = tmp_path / "src"
    shutil.copytree(CHECKOUT / "segmentlog_datasource", target / "segmentlog_datasource",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    shutil.copy(CHECKOUT / "pyspark_segmentlog.py", target)
    return target


def run_probe(copy, drop_installed=False):
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(copy), str(INSTALLED_SITE),
         "1" if drop_installed else "0"],
        cwd=copy, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert Path(report["package"]).resolve().is_relative_to(copy.resolve()), report
    assert report["pure"] == "RecordAccumulator" and report["rows"] == [25, 25], report
    return report


@requires_installed_build
def test_checkout_run_loads_the_installed_build(tmp_path):
    from segmentlog_datasource.format.fastpath import _fastrecords

    # As setup.py computes it: buildinfo.py run, not imported.
    buildinfo = runpy.run_path(str(CHECKOUT / FASTPATH / "buildinfo.py"))
    assert getattr(_fastrecords, "SOURCE_SHA256", None) == \
        buildinfo["source_sha256"](str(CHECKOUT / FASTPATH)), (
        f"the installed {_fastrecords.__file__} was not built from {CHECKOUT}'s _fastrecords.c "
        f"and Python values; reinstall with: pip install {CHECKOUT}")
    report = run_probe(copy_checkout(tmp_path))
    assert report["fast"], report
    assert Path(report["compiled"]).resolve() in [path.resolve() for path in INSTALLED_BUILDS]
    assert report["warnings"] == []
    assert report["encoder"] == "encode_batches_compiled" and report["encoder_warnings"] == []


@requires_installed_build
def test_build_survives_comments_in_the_python_definitions(tmp_path):
    # Only the values of layout.py and protocol.py are compiled in, so only they count.
    copy = copy_checkout(tmp_path)
    for name in ("layout.py", "fastpath/protocol.py"):
        with open(copy / "segmentlog_datasource" / "format" / name, "a") as source:
            source.write("# a comment added after the installed build\n")
    report = run_probe(copy)
    assert report["fast"] and report["warnings"] == [], report


def change_c_source(copy):
    with open(copy / FASTPATH / "_fastrecords.c", "a") as source:
        source.write("/* changed after the installed build */\n")


def change_the_crc_header(copy):
    with open(copy / FASTPATH / "crc32c.h", "a") as source:
        source.write("/* changed after the installed build */\n")


def change_a_run_state(copy):
    protocol = copy / FASTPATH / "protocol.py"
    text = protocol.read_text()
    assert "RUN_END = 4" in text
    protocol.write_text(text.replace("RUN_END = 4", "RUN_END = 8"))  # still a free bit


def change_a_layout_value(copy):
    layout = copy / "segmentlog_datasource" / "format" / "layout.py"
    text = layout.read_text()
    assert "ATTR_DELETE_HORIZON = 0x40" in text and "ATTR_CONTROL = 0x20" in text
    # Swap two bits the probe's batch does not set: the pure reading is unchanged.
    layout.write_text(text.replace("ATTR_DELETE_HORIZON = 0x40", "ATTR_DELETE_HORIZON = 0x20")
                      .replace("ATTR_CONTROL = 0x20", "ATTR_CONTROL = 0x40"))


@requires_installed_build
@pytest.mark.parametrize("change", [change_c_source, change_the_crc_header, change_a_run_state,
                                    change_a_layout_value])
def test_build_of_other_source_is_not_loaded(tmp_path, change):
    copy = copy_checkout(tmp_path)
    change(copy)
    report = run_probe(copy)
    assert not report["fast"] and report["accumulator"] == "RecordAccumulator", report
    assert report["compiled"] is None, report
    # Two scans and a third make_accumulator: still one warning.
    assert len(report["warnings"]) == 1, report
    message = report["warnings"][0]
    assert "built from other source" in message and "6x slower" in message, message
    assert "pip install ." in message, message


def test_no_build_anywhere_warns_once_that_it_is_not_built(tmp_path):
    report = run_probe(copy_checkout(tmp_path), drop_installed=True)
    assert not report["fast"] and report["accumulator"] == "RecordAccumulator", report
    assert len(report["warnings"]) == 1, report
    message = report["warnings"][0]
    assert "not built" in message and "6x slower" in message, message
    assert "pip install ." in message, message
    # The encoder too: its pure twin, said once (a batch encoded, the encoder asked again).
    assert report["encoder"] == "encode_batches_python", report
    assert len(report["encoder_warnings"]) == 1, report
    assert "not built" in report["encoder_warnings"][0], report
