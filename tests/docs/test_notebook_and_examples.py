"""The notebook and every example run to the end, so neither goes stale.

The notebook is executed through a Jupyter kernel of this interpreter (nbclient, in
support/run_notebook.py). The examples that use Spark run in this process on the test
run's one SparkSession, through their `main(spark)`; the demo (the README's first command)
and the Spark-free example run as scripts of this interpreter. The notebook and the demo
start when the run begins and are checked at its end (support/background.py). Each
program runs in a scratch directory that is its working directory, its TMPDIR and Spark's
local and temp directory; what it leaves there is checked. Spark's Python workers put the
working directory first on sys.path: the demo's holds a copy of the checkout's package
source, as a checkout's root does, so its workers import that copy, as a user's do.
"""
import glob
import importlib.util
import os
import subprocess
import sys
import tempfile

import nbformat
import pytest

from support.fixtures import internal_topics_root
from support.checkout_copy import copy_checkout_source

pytestmark = pytest.mark.spark

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(ROOT, "notebooks", "segmentlog_tour.ipynb")
NOTEBOOK_RUNNER = os.path.join(ROOT, "tests", "support", "run_notebook.py")
EXAMPLES_DIR = os.path.join(ROOT, "examples")
# example_session.py is the examples' shared helper, not an example.
EXAMPLES = sorted(path for path in glob.glob(os.path.join(EXAMPLES_DIR, "*.py"))
                  if os.path.basename(path) != "example_session.py")
# Records per minute, bytes per segment, key skew, consumer lag, read_committed.
NOTEBOOK_PLOTS = 5
# What each example prints once it has shown what it is there for.
EXAMPLE_OUTPUT = {
    "demo.py": ["demo finished: the log was written and read back with Spark"],
    "engine_without_spark.py": ["aborted write", "whole log: ", "pyspark was never imported"],
    "read_with_lookups.py": ["offset_range: offset 4242 of readings-1: 1 record, 1 input partitions",
                             "time_range: the minute from 22:15 UTC: 600 records"],
    "stream_growing_log.py": ["stopped after", "the restarted query read 700 records and stopped"],
    "topic_to_parquet.py": ["9,000 rows in Parquet, 9,000 records in the topic"],
    "write_keys_headers_compression.py": ["5,000 page views", "gzip:", "lz4:",
                                          "each in 1 partition",
                                          "views-none overwritten: 1,000 records in partitions [0, 1]"],
}
# The demo's default log is sized for a first look, the examples' for their output: CI
# runs smaller ones.
EXAMPLE_ARGUMENTS = {"demo.py": ["--rows", "20000"]}
EXAMPLE_SIZES = {"read_with_lookups.py": {"minutes": 30},
                 "write_keys_headers_compression.py": {"views_count": 5_000}}
# Run as scripts: the README's first command, and the example that shows pyspark is never
# imported (which a process with a SparkSession cannot show).
SCRIPT_EXAMPLES = ["demo.py", "engine_without_spark.py"]


def scratch_env(directory):
    """The environment of a program run in `directory` (its working directory, TMPDIR and
    Spark's local and temp dirs)."""
    env = dict(os.environ)
    env.update({
        "PYSPARK_PYTHON": sys.executable,
        "TMPDIR": str(directory),
        "SPARK_LOCAL_DIRS": str(directory),
        "PYSPARK_SUBMIT_ARGS": f"--driver-java-options -Djava.io.tmpdir={directory} pyspark-shell",
    })
    env.pop("PYTHONPATH", None)
    return env


def run_script_example(name, directory, env=None):
    return subprocess.run([sys.executable, os.path.join(EXAMPLES_DIR, name),
                           *EXAMPLE_ARGUMENTS.get(name, [])], cwd=str(directory),
                          env=env or scratch_env(directory), capture_output=True, text=True,
                          timeout=900)


def left_behind(directory):
    """The run's own temp files still there (Spark's directories are not the run's)."""
    return sorted(name for name in os.listdir(directory) if name.startswith("segmentlog-"))


def test_every_example_has_expected_output():
    assert sorted(os.path.basename(path) for path in EXAMPLES) == sorted(EXAMPLE_OUTPUT)


def check_output(name, stdout):
    for expected in EXAMPLE_OUTPUT[name]:
        assert expected in stdout, f"{name} did not print {expected!r}:\n{stdout}"


def check_script_run(name, directory, run):
    assert run.returncode == 0, f"{name} exited with {run.returncode}:\n{run.stdout}\n{run.stderr[-5000:]}"
    check_output(name, run.stdout)
    assert left_behind(directory) == []


def start_demo(request):
    """The demo run from a checkout's root, as the README runs it: its working directory
    (first on the path of Spark's Python workers) holds the package's source and no
    compiled module, as a checkout does where the package was installed with pip."""
    directory = request.getfixturevalue("tmp_path_factory").mktemp("demo")
    env = scratch_env(directory)  # taken in the main thread, where no test changes it

    def program():  # the copy too runs in the background thread
        copy_checkout_source(directory)
        return directory, run_script_example("demo.py", directory, env)

    return program


@pytest.mark.background(starter=start_demo)
def test_the_demo_runs_as_a_script(background):
    directory, run = background.result(start_demo)
    check_script_run("demo.py", directory, run)


@pytest.mark.background(starter=start_demo)
def test_the_demo_from_a_checkout_decodes_avro_with_the_compiled_decoder(background):
    """Spark's workers import the checkout's package (their working directory comes
    first): the compiled decoders of the installed build load all the same, and no
    fallback warning is printed."""
    _, run = background.result(start_demo)
    assert "valueFormat=avro: 1,000 records decoded" in run.stdout, run.stdout
    assert "Unavailable" not in run.stderr and "unavailable" not in run.stderr, \
        run.stderr[-5000:]


def test_the_engine_example_runs_as_a_script_without_pyspark(tmp_path):
    name = "engine_without_spark.py"
    check_script_run(name, tmp_path, run_script_example(name, tmp_path))


@pytest.mark.parametrize("name", sorted(set(EXAMPLE_OUTPUT) - set(SCRIPT_EXAMPLES)))
def test_example_runs_on_the_test_session(name, spark, capsys, monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(EXAMPLES_DIR)  # where `from example_session import ...` looks
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the example's temp files go here
    settings = {key: spark.conf.get(key, None) for key in
                ("spark.sql.session.timeZone", "spark.sql.shuffle.partitions")}
    spec = importlib.util.spec_from_file_location(f"example_{name[:-3]}",
                                                  os.path.join(EXAMPLES_DIR, name))
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.main(spark=spark, **EXAMPLE_SIZES.get(name, {}))
    check_output(name, capsys.readouterr().out)
    assert left_behind(str(tmp_path)) == []
    # The session is left as the example found it: running, with the same SQL settings.
    assert spark.range(3).count() == 3
    assert {key: spark.conf.get(key, None) for key in settings} == settings


def image_outputs(notebook):
    return sum(1 for cell in notebook.cells if cell.cell_type == "code"
               for output in cell.get("outputs", []) if "image/png" in output.get("data", {}))


def test_committed_notebook_keeps_its_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code_cells)
    assert [cell.execution_count for cell in code_cells] == list(range(1, len(code_cells) + 1))
    assert not [output for cell in code_cells for output in cell.outputs
                if output.output_type == "error"]
    assert image_outputs(notebook) >= NOTEBOOK_PLOTS


def start_notebook(request):
    directory = request.getfixturevalue("tmp_path_factory").mktemp("notebook")
    env = scratch_env(directory)
    env["SEGMENTLOG_FIXTURES"] = request.getfixturevalue("kafka_logdir")  # txn-0's transactions
    env["SEGMENTLOG_INTERNAL_TOPICS"] = internal_topics_root()  # a __consumer_offsets partition
    executed = directory / "executed.ipynb"
    return lambda: (directory, executed, subprocess.run(
        [sys.executable, NOTEBOOK_RUNNER, NOTEBOOK, str(executed)], cwd=str(directory), env=env,
        capture_output=True, text=True, timeout=900))


@pytest.mark.background(starter=start_notebook)
def test_notebook_runs(background):
    directory, executed, run = background.result(start_notebook)
    assert run.returncode == 0, run.stderr[-5000:]  # CellExecutionError names the cell
    notebook = nbformat.read(str(executed), as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code_cells)
    assert not [output for cell in code_cells for output in cell.outputs
                if output.output_type == "error"]
    assert image_outputs(notebook) >= NOTEBOOK_PLOTS
    assert left_behind(directory) == []
