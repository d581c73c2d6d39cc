"""What a fresh Spark Python worker imports to plan or run a read.

Spark starts a Python process (or forks one) for each planning step, each streaming query
and each task's worker, and every one imports the source's modules again: what a read does
not use must not be imported on the way. pyarrow.compute alone costs a worker some 80 ms,
the crc32c package's import scans every installed distribution for its own version, the
writer's modules are not needed to read, nor are the decoders a plain read does not ask
for. A write's modules import no compute kernels either: only the encoder's pure twin and
a write with a topic column use them, and import them there.
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
    # the writer's Spark adapter does import the encoder and the write engine
    assert {"segmentlog_datasource.format.v2_encode", "segmentlog_datasource.writer"} <= \
        set(imported_by(["segmentlog_datasource.spark.write"]))


def test_the_write_modules_import_no_compute_kernels_checksum_package_or_decoders():
    # A write query's planning worker and its commit worker (Python processes of their
    # own, before and after its tasks) and its task workers import the write adapter.
    unwanted = set(NOT_NEEDED_TO_READ) - {"segmentlog_datasource.format.v2_encode",
                                          "segmentlog_datasource.writer"}
    found = imported_by(["segmentlog_datasource.spark.write",
                         "segmentlog_datasource.spark.stream_write"])
    assert unwanted.isdisjoint(found), found


# A Spark task's work, as its worker does it: batches arrive as Arrow IPC, are written by a
# write task and committed; a lookup and a time-bounded scan read the fixtures.
TASKS_WITHOUT_PANDAS = """
import json, os, sys, tempfile
import pyarrow as pa
from segmentlog_datasource.format import ScanOptions
from segmentlog_datasource.read.fragments import scan_fragments
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.writer import WriteJob, WriteOptions

fixtures, batches, unwanted = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
seen = {}
for name in sorted(os.listdir(batches)):
    table = pa.ipc.open_file(os.path.join(batches, name)).read_all()
    job = WriteJob(tempfile.mkdtemp(), mode="append", topic="t",
                   options=WriteOptions(num_partitions=3)).start()
    task = job.task_writer(0)
    for batch in table.to_batches(max_chunksize=100):
        task.write(batch)
    job.commit([task.finish()])
    seen["write " + name] = [m for m in unwanted if m in sys.modules]
read = parse_read_options({"path": fixtures})
for what, constraints in [("lookup", Constraints(offset_values=frozenset({3, 5}))),
                          ("time bounds", Constraints(timestamp_low_us=1, timestamp_high_us=2**62))]:
    rows = sum(b.num_rows for b in scan_fragments(plan_fragments(read, constraints), ScanOptions()))
    assert rows > 0, what
    seen[what] = [m for m in unwanted if m in sys.modules]
print(json.dumps(seen))
"""


def test_a_write_task_and_scans_import_no_pandas_nor_the_checksum_package(kafka_logdir, tmp_path):
    # pyarrow's conversions of Python values import pandas where it is installed (here it
    # is): a second of each fresh worker's first task. The crc32c package is not needed
    # where the compiled decoder has the CRC instruction (format/crc.py): the time-bounded
    # scan verifies the fixtures' compressed batches.
    import pyarrow as pa

    from segmentlog_datasource.format import crc

    unwanted = ["pandas"] + (["crc32c"] if crc.crc32c_backend() == "compiled" else [])

    rows = 1000
    keyed = pa.table({"key": [b"k%d" % (i % 17) for i in range(rows)],
                      "value": [b"v" * 50] * rows})
    placed = pa.table({"value": [b"v%d" % i for i in range(rows)],
                       "partition": pa.array([i % 3 for i in range(rows)], pa.int32()),
                       "timestamp": pa.array([None if i % 5 == 0 else i * 1000 for i in range(rows)],
                                             pa.timestamp("us", tz="UTC"))})
    for name, table in [("keyed.arrow", keyed), ("placed.arrow", placed)]:
        with pa.ipc.new_file(str(tmp_path / name), table.schema) as out:
            out.write_table(table)
    done = subprocess.run([sys.executable, "-c", TASKS_WITHOUT_PANDAS, kafka_logdir,
                           str(tmp_path), json.dumps(unwanted)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {"write keyed.arrow": [], "write placed.arrow": [],
                                       "lookup": [], "time bounds": []}
