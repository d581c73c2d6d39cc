import os
import shutil
import sys

import pytest

FIXTURES_ENV = "SEGMENTLOG_FIXTURES"


def fixtures_root():
    """The kafka-written fixtures' logdir, or None when SEGMENTLOG_FIXTURES is unset."""
    root = os.environ.get(FIXTURES_ENV)
    if not root:
        return None
    logdir = os.path.join(root, "logdir") if os.path.isdir(os.path.join(root, "logdir")) else root
    return logdir


@pytest.fixture(scope="session")
def kafka_logdir():
    logdir = fixtures_root()
    if logdir is None:
        pytest.skip(f"{FIXTURES_ENV} is not set: the Kafka-written fixtures are not available "
                    "(.ci/run sets it to ../shared/fixtures/kafka-written)")
    if not os.path.isdir(logdir):
        pytest.fail(f"{FIXTURES_ENV} points at {logdir}, which is not a directory")
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
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("segmentlog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
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
