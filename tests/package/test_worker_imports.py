"""What a fresh Spark Python worker imports to plan or run a read.

Spark starts a Python process (or forks one) for each planning step, each streaming query
and each task's worker, and every one imports the source's modules again: what a read does
not use must not be imported on the way. pyarrow.compute alone costs a worker some 80 ms,
the crc32c package's import scans every installed distribution for its own version, the
writer's modules are not needed to read, nor are the decoders a plain read does not ask
for.
"""
import json
import subprocess
import sys

READ_MODULES = ["segmentlog_datasource.spark.source", "segmentlog_datasource.spark.reader",
                "segmentlog_datasource.spark.stream_read"]
NOT_NEEDED_TO_READ = ["pyarrow.compute", "crc32c", "segmentlog_datasource.format.v2_encode",
                      "segmentlog_datasource.writer",
                      # the decoders of the reads that ask for them
                      "segmentlog_datasource.decode.internal_topics",
                      "segmentlog_datasource.decode.value_formats",
                      "segmentlog_datasource.read.cluster_metadata"]


def imported_by(modules):
    script = ("import json, sys\n"
              + "".join(f"import {name}\n" for name in modules)
              + f"print(json.dumps([m for m in {NOT_NEEDED_TO_READ!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_the_read_modules_import_no_encoder_compute_kernels_checksum_package_or_decoders():
    assert imported_by(READ_MODULES) == []


def test_the_check_sees_what_the_writer_imports():
    # the writer's Spark adapter does import the encoder and the compute kernels
    assert {"pyarrow.compute", "segmentlog_datasource.format.v2_encode",
            "segmentlog_datasource.writer"} <= set(imported_by(["segmentlog_datasource.spark.write"]))
