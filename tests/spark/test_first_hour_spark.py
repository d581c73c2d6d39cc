"""What a new user meets first with Spark: a Python for Spark's workers that lacks the
package, a schema given to the reader, a topic read and written back, option typos, and a
codec package missing at write time."""
import os
import subprocess
import sys
import textwrap

import pytest

PLAIN = ("plain-0", "plain-1", "plain-2")

START_SPARK = """
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
"""


def python_without_segmentlog(directory):
    """A bin directory whose `python3` is a fresh virtualenv's, without segmentlog."""
    venv = directory / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=300)
    return str(venv / "bin")


def script_run(request, script, path_first=None, **env):
    """A starter's program (support/background.py): `script` (or script(directory)) run by
    this Python in a directory of its own, with `path_first` ahead on PATH ("bare": a virtualenv's bin
    without segmentlog) and the given variables; PYSPARK_PYTHON and
    PYSPARK_DRIVER_PYTHON unset."""
    directory = request.getfixturevalue("tmp_path_factory").mktemp("first-hour")
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    if path_first == "bare":
        path_first = python_without_segmentlog(directory)
    if path_first:
        environment["PATH"] = path_first + os.pathsep + environment["PATH"]
    environment.update({k: v(directory) if callable(v) else v for k, v in env.items()})
    if callable(script):
        script = script(directory)

    def program():
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)],
                              capture_output=True, text=True, timeout=600, cwd=str(directory),
                              env=environment)
        return directory, path_first, done

    return program


def start_register_without_the_package(request):
    # A virtualenv's Python run without activating it: `python3` on PATH is another one.
    return script_run(request, START_SPARK + """
        import segmentlog_datasource
        segmentlog_datasource.register(spark)
    """.replace("\n        ", "\n"), "bare")


@pytest.mark.background(starter=start_register_without_the_package)
def test_register_says_to_set_pyspark_python_when_spark_workers_lack_the_package(background):
    _, bare, result = background.result(start_register_without_the_package)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert f"PYSPARK_PYTHON={sys.executable} before the Spark session starts" in last, last
    assert os.path.join(bare, "python3") in last
    assert "No module named 'segmentlog_datasource'" in last


def test_a_schema_given_to_the_reader_is_refused_when_the_first_query_is_planned(
        spark, kafka_logdir):
    path = os.path.join(kafka_logdir, "plain-0")
    tasks_before = spark.sparkContext.statusTracker().getJobIdsForGroup()
    df = spark.read.format("segmentlog").schema("key string, value string").load(path)
    with pytest.raises(Exception) as caught:
        df.count()
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == tasks_before  # no job ran
    message = str(caught.value)
    assert "format('segmentlog') takes no schema of its own" in message
    assert ".schema(struct<key:string,value:string>)" in message
    assert "Leave out .schema(...)" in message


def test_the_source_schema_itself_may_be_given(spark, kafka_logdir):
    path = os.path.join(kafka_logdir, "plain-0")
    own = spark.read.format("segmentlog").load(path).schema
    assert spark.read.format("segmentlog").schema(own).load(path).count() == 371
    ddl = ("key binary, value binary, topic string, partition int, offset bigint, "
           "timestamp timestamp, timestampType int")
    assert spark.read.format("segmentlog").schema(ddl).load(path).count() == 371


def test_a_topic_read_with_spark_writes_back_as_the_same_records(spark, kafka_logdir, tmp_path):
    read = (spark.read.format("segmentlog").option("includeHeaders", "true")
            .option("subscribe", "plain").load(kafka_logdir))
    copy = str(tmp_path / "copy")
    # Every column as read: offset and timestampType are ignored, partition is kept.
    read.write.format("segmentlog").mode("append").option("topic", "plain-copy").save(copy)
    copied = spark.read.format("segmentlog").option("includeHeaders", "true").load(copy)
    columns = ["partition", "offset", "key", "value", "timestamp", "headers"]

    def records(df):
        return sorted(tuple(row) for row in df.select(*columns).collect())

    assert records(copied) == records(read)
    assert {row.topic for row in copied.select("topic").distinct().collect()} == {"plain-copy"}


def test_a_copy_into_a_topic_of_fewer_partitions_says_to_drop_the_partition_column(
        spark, kafka_logdir, tmp_path):
    copy = str(tmp_path / "copy")
    read = spark.read.format("segmentlog").option("subscribe", "plain").load(kafka_logdir)
    (read.limit(1).drop("partition").write.format("segmentlog").mode("append")
     .option("topic", "narrow").option("numPartitions", 1).save(copy))
    with pytest.raises(Exception) as caught:
        read.write.format("segmentlog").mode("append").option("topic", "narrow").save(copy)
    message = str(caught.value)
    assert "which has 1 partitions (0..0)" in message and "df.drop('partition')" in message
    read.drop("partition").write.format("segmentlog").mode("append").option(
        "topic", "narrow").save(copy)
    assert spark.read.format("segmentlog").load(copy).count() == 1 + read.count()


@pytest.mark.parametrize("side, name, suggestion", [
    ("read", "kafka.bootstrap.server", "kafka.bootstrap.servers"),
    ("read", "startingOffset", "startingOffsets"),
    ("write", "compresion.type", "compression.type"),
    ("write", "store.regoin", "store.region"),
])
def test_a_misspelled_option_names_the_near_miss(spark, kafka_logdir, tmp_path, side, name,
                                                 suggestion):
    with pytest.raises(Exception) as caught:
        if side == "read":
            spark.read.format("segmentlog").option(name, "x").load(kafka_logdir).count()
        else:
            (spark.createDataFrame([(b"v",)], "value binary").write.format("segmentlog")
             .mode("append").option("topic", "t").option(name, "x").save(str(tmp_path)))
    assert f"did you mean '{suggestion}'" in str(caught.value)


def without_zstandard(directory):
    """A site directory whose sitecustomize makes `import zstandard` fail and find_spec find
    nothing, as where the package was never installed, in every Python process that has it
    on PYTHONPATH (the driver's and Spark's)."""
    site = directory / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['zstandard'] = None\n")
    return str(site)


def start_new_users_script(request):
    """A new user's script: segmentlog imported before the session starts, with a
    virtualenv's Python not activated (PATH's `python3` lacks segmentlog) and without the
    zstandard package; it reads a topic, then writes with zstd. One driver for two tests."""
    plain_0 = os.path.join(request.getfixturevalue("kafka_logdir"), "plain-0")
    return script_run(request, lambda directory: "import segmentlog_datasource\n" + START_SPARK + f"""
import os
print(os.environ["PYSPARK_PYTHON"])
print(spark.read.format("segmentlog").load({plain_0!r}).count())
segmentlog_datasource.register(spark, enable_filter_pushdown=False)
tasks = spark.sparkContext.accumulator(0)
def count_task(value):
    tasks.add(1)
    return value
df = spark.createDataFrame([(b"v%d" % i,) for i in range(10)], "value binary")
counted = spark.createDataFrame(df.rdd.map(count_task), df.schema)
try:
    (counted.write.format("segmentlog").mode("append").option("topic", "t")
     .option("numPartitions", 1).option("compression.type", "zstd").save({str(directory / "logdir")!r}))
except Exception as exc:
    print("error", next(line for line in str(exc).splitlines() if "compression.type" in line))
print("tasks", tasks.value)
""", "bare", PYTHONPATH=without_zstandard)


@pytest.mark.background(starter=start_new_users_script)
def test_importing_segmentlog_before_spark_starts_runs_the_workers_in_this_python(background):
    _, _, result = background.result(start_new_users_script)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[:2] == [sys.executable, "371"]


@pytest.mark.background(starter=start_new_users_script)
def test_a_codec_missing_everywhere_fails_the_write_before_any_task(background):
    directory, _, result = background.result(start_new_users_script)
    assert result.returncode == 0, result.stderr[-3000:]
    error, tasks = result.stdout.strip().splitlines()[-2:]
    assert "option 'compression.type': zstd compression needs the 'zstandard' package" in error
    assert error.endswith('pip install "segmentlog[zstd]"'), error
    assert tasks == "tasks 0"
    assert not (directory / "logdir").exists()
