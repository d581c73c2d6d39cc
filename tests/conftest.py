"""Shared fixtures. Tests live by layer (format, read, write, spark); helpers in support/.

Every test that uses Spark carries the `spark` marker (added here to the tests under
spark/ and to any test that takes the `spark` fixture): `pytest -m "not spark"` runs the
Spark-free suite alone. Without pyspark installed, tests/spark is not collected.

The README's command runs two pytest-xdist workers with `--dist loadgroup`: every Spark test
and every test with a background program is in one group, "spark", so one worker runs them
all on the run's one SparkSession while both share the Spark-free tests. Most of the suite
waits on one core at a time (a JVM, a Python worker, a child process): two workers keep
both cores busy.
"""
import importlib.util
import os
import shutil
import sys
import warnings

import pytest

from support.background import Background
from support.fixtures import FIXTURES_ENV, fixtures_root

HAVE_PYSPARK = importlib.util.find_spec("pyspark") is not None
collect_ignore_glob = [] if HAVE_PYSPARK else ["spark/*"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "spark: the test runs Spark (deselect with -m 'not spark')")
    config.addinivalue_line(
        "markers", "background(starter=...): the test checks a program that starter starts "
        "when the run begins (support/background.py); such tests run last")
    config.addinivalue_line(
        "markers", "compat: the subset of the Spark tests that .ci/compat runs on every "
        "Spark release with the Python Data Source API (4.0 to 4.3), classic and on Spark "
        "Connect, and .ci/run on 4.0 beside the whole suite (-m compat)")
    # kafka-python, the independent codec the tests compare with, loads its protocol
    # schemas through deprecated importlib.resources calls.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:kafka.*")
    config.addinivalue_line("filterwarnings",
                            "ignore:open_text is deprecated:DeprecationWarning")
    # Every JVM the tests start (the session's, the background programs', the cluster's
    # daemons and executors) runs small jobs: the JIT's optimizing compiler and a parallel
    # collector would take the CPU of a 2-core run from them (about 12% of the Spark tests'
    # time, measured side by side on the session's JVM). A JVM notes the setting on stderr.
    os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    # pytest-xdist's workers inherit a COLUMNS of 80; the CLI fits its tables to COLUMNS,
    # and its tests give a width where they want one (no terminal width otherwise, as in CI).
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.pop("COLUMNS", None)


SPARK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark") + os.sep
SPARK_GROUP = "spark"


# Markers are added as each test is collected, so that pytest-xdist's collection hook
# finds the xdist_group ones whatever the order of the hooks.
def pytest_itemcollected(item):
    if "spark" in getattr(item, "fixturenames", ()) or str(item.fspath).startswith(SPARK_DIR):
        item.add_marker(pytest.mark.spark)
    if runs_in_spark_group(item):
        item.add_marker(pytest.mark.xdist_group(name=SPARK_GROUP))


def pytest_collection_modifyitems(config, items):
    # Last, so that their programs run while the rest of the suite does.
    items[:] = ([item for item in items if not item.get_closest_marker("background")]
                + [item for item in items if item.get_closest_marker("background")])


def runs_in_spark_group(item):
    """Whether a test is in the xdist group "spark": every test on the SparkSession or with
    a background program."""
    return bool(item.get_closest_marker("spark") or item.get_closest_marker("background"))


def runs_background_programs(item):
    """Whether this process starts the background programs on reaching `item`: at its first
    test, or under xdist at its first test of the "spark" group (the worker running them)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return True
    return runs_in_spark_group(item)


@pytest.fixture(scope="session")
def background():
    """The programs of the selected tests' `background` markers (support/background.py),
    run one at a time beside the suite."""
    jobs = Background()
    yield jobs
    jobs.close()


@pytest.fixture(autouse=True)
def start_background_programs(request, background):
    """Starts every selected test's background program (in the order of their tests) when
    this process reaches its first test that may wait for one."""
    if background.started or not runs_background_programs(request.node):
        return
    background.started = True
    for item in request.session.items:
        for mark in item.iter_markers("background"):
            background.start(mark.kwargs["starter"], request)


@pytest.fixture(scope="session")
def kafka_logdir():
    logdir = fixtures_root()
    if not os.path.isdir(logdir):
        pytest.fail(f"the Kafka-written fixtures are not at {logdir} "
                    f"(set {FIXTURES_ENV} to a fixture set)")
    return logdir


@pytest.fixture
def kafka_logdir_copy(kafka_logdir, tmp_path):
    """A writable copy of the fixtures, for tests that damage files."""
    target = tmp_path / "logdir"
    shutil.copytree(kafka_logdir, target)
    for root, dirs, files in os.walk(target):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)
    os.chmod(target, 0o755)
    return str(target)


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 behind a counting proxy (support.s3server), one for the whole run."""
    from support.s3server import S3Server

    server = S3Server()
    yield server
    server.close()


@pytest.fixture
def kafka_python_codecs(monkeypatch):
    """kafka-python with the optional codec modules it lacks here (support.kafka_codecs)."""
    from support.kafka_codecs import supply_missing_codecs

    supply_missing_codecs(monkeypatch)


def spark_home_without_python_archives(directory):
    """A Spark home that is pyspark's own, linked entry by entry, except for an empty
    python/lib. Spark puts python/lib's pyspark.zip first on its Python workers' path, and
    a zip's modules are compiled from source in every process that imports them: a third
    of a fresh worker's start (planning, each streaming query's source, each task's
    worker). Without it the workers import the same pyspark from site-packages, with
    cached bytecode."""
    import pyspark

    stock = os.path.dirname(os.path.abspath(pyspark.__file__))
    home = os.path.join(directory, "spark-home")
    os.makedirs(os.path.join(home, "python", "lib"))
    for name in os.listdir(stock):
        if name != "python":
            os.symlink(os.path.join(stock, name), os.path.join(home, name))
    return home


# Set to a Spark Connect remote (`local[2]`), the run's one session is a Spark Connect
# session, started as a user starts one: SparkSession.builder.remote("local[2]") (.ci/compat).
REMOTE_VARIABLE = "SEGMENTLOG_TEST_REMOTE"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    if not HAVE_PYSPARK:
        pytest.fail("pyspark is not installed: pip install '.[test]' (or '.[spark]')")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    # The session's JVM alone gets that Spark home (its environment is fixed at launch);
    # the programs the tests start run on pyspark's own, as a user's do.
    stock_home = os.environ.get("SPARK_HOME")
    os.environ["SPARK_HOME"] = spark_home_without_python_archives(
        str(tmp_path_factory.mktemp("spark")))
    remote = os.environ.get(REMOTE_VARIABLE)
    try:
        builder = SparkSession.builder
        builder = (
            (builder.remote(remote) if remote else builder.master("local[2]"))
            .appName("segmentlog-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.driver.memory", "2g")  # its JVM's options: pytest_configure
        )
        with warnings.catch_warnings():
            # A Connect session's local server starts with these; the session then warns
            # that it cannot set the static ones again.
            warnings.filterwarnings("ignore", "Failed to set spark", UserWarning)
            session = builder.getOrCreate()
    finally:
        if stock_home is None:
            os.environ.pop("SPARK_HOME", None)
        else:
            os.environ["SPARK_HOME"] = stock_home
    import segmentlog_datasource

    segmentlog_datasource.register(session)
    yield session
    session.stop()


@pytest.fixture
def pushdown(spark):
    """A switch for Spark's Python filter pushdown in this test; the setting is restored."""
    from segmentlog_datasource import PUSHDOWN_CONF

    previous = spark.conf.get(PUSHDOWN_CONF, "false")

    def switch(enabled: bool):
        spark.conf.set(PUSHDOWN_CONF, "true" if enabled else "false")

    yield switch
    spark.conf.set(PUSHDOWN_CONF, previous)
