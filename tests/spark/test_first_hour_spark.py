"""What a new user meets first with Spark: a Python for Spark's workers that lacks the
package, the README's first example, a schema given to the reader, a topic read and
written back, option typos, a codec package missing at write time, SQL tables and views,
a symbolic link loop, register's cost, a write into a directory of other data."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

from support.paths import CHECKOUT

PLAIN = ("plain-0", "plain-1", "plain-2")
README = (CHECKOUT / "README.md").read_text(encoding="utf-8")
README_EXAMPLE_RAN = "--- the README's first example ran"


def readme_first_example() -> str:
    """The README's first Python example, as a user copies it into a script."""
    return README.split("```python\n", 1)[1].split("```", 1)[0]

START_SPARK = """
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
"""


def python_without_segmentlog(directory, env):
    """A bin directory whose `python3` is a fresh virtualenv's, without segmentlog."""
    venv = directory / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=300, env=env)
    return str(venv / "bin")


def script_run(request, script, path_first=None, **env):
    """A starter's program (support/background.py): `script` (or script(directory)) run by
    this Python in a directory of its own, with `path_first` ahead on PATH ("bare": a virtualenv's bin
    without segmentlog) and the given variables; PYSPARK_PYTHON and
    PYSPARK_DRIVER_PYTHON unset. The virtualenv and the script run in the program (the
    background thread); the environment is taken here, in the main thread, where no test is
    changing it."""
    directory = request.getfixturevalue("tmp_path_factory").mktemp("first-hour")
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    make_venv = path_first == "bare"
    venv_env = dict(environment)
    if make_venv:
        path_first = str(directory / "venv" / "bin")  # made by the program
    if path_first:
        environment["PATH"] = path_first + os.pathsep + environment["PATH"]
    environment.update({k: v(directory) if callable(v) else v for k, v in env.items()})
    if callable(script):
        script = script(directory)

    def program():
        if make_venv:
            python_without_segmentlog(directory, venv_env)  # the bin dir path_first names
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


FAILING_READ = "--- a read of a damaged segment, at Spark's default log level"
FAILING_READ_DONE = "--- the damaged read's error shown"


def start_new_users_script(request):
    """A new user's script, run with a virtualenv's Python not activated (PATH's `python3`
    lacks segmentlog) and without the zstandard package: the README's first example (on
    plain-0), then a read, a write with zstd, and a read of a damaged copy of plain-0 whose
    error is printed as an uncaught one is. One driver for four tests."""
    plain_0 = os.path.join(request.getfixturevalue("kafka_logdir"), "plain-0")
    first = readme_first_example().replace("/data/kafka-logs", plain_0)
    return script_run(request, lambda directory: first + f"print({README_EXAMPLE_RAN!r})\n"
                      + "import segmentlog_datasource\n" + START_SPARK + f"""
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
import json, shutil, sys, traceback
damaged = {str(directory / "damaged")!r}
shutil.copytree({plain_0!r}, os.path.join(damaged, "plain-0"))
manifest = json.load(open({plain_0 + ".manifest.json"!r}))
segment = manifest["segments"][0]
batch = next(b for b in segment["batches"] if b["compression"] == "none" and b["record_count"] > 1)
name = os.path.join(damaged, "plain-0", "%020d.log" % segment["base_offset"])
os.chmod(name, 0o644)
with open(name, "r+b") as handle:  # a byte of the records: only the CRC shows it
    handle.seek(batch["position"] + batch["size_in_bytes"] - 1)
    last = handle.read(1)
    handle.seek(batch["position"] + batch["size_in_bytes"] - 1)
    handle.write(bytes([last[0] ^ 0xFF]))
print({FAILING_READ!r}, file=sys.stderr, flush=True)
try:
    spark.read.format("segmentlog").load(damaged).count()
except Exception:
    traceback.print_exc()  # what an uncaught error prints
print({FAILING_READ_DONE!r}, file=sys.stderr, flush=True)
""", "bare", PYTHONPATH=without_zstandard)


@pytest.mark.background(starter=start_new_users_script)
def test_the_readmes_first_example_runs_with_a_virtualenvs_python_not_activated(background):
    example = readme_first_example()
    statements = [line for line in example.splitlines() if line and not line.startswith("#")]
    # segmentlog is imported before the session starts: that is what makes it work here
    assert statements[0].startswith("import segmentlog_datasource"), example
    assert example.index("import segmentlog_datasource") < example.index("getOrCreate()")
    _, _, result = background.result(start_new_users_script)
    assert result.returncode == 0, result.stderr[-3000:]
    shown = result.stdout.split(README_EXAMPLE_RAN)[0]
    assert re.search(r"\|\s*plain\s*\|\s*0\s*\|\s*371\s*\|", shown), shown


@pytest.mark.background(starter=start_new_users_script)
def test_importing_segmentlog_before_spark_starts_runs_the_workers_in_this_python(background):
    _, _, result = background.result(start_new_users_script)
    assert result.returncode == 0, result.stderr[-3000:]
    after = result.stdout.split(README_EXAMPLE_RAN + "\n")[1]
    assert after.split("\n")[:2] == [sys.executable, "371"]


@pytest.mark.background(starter=start_new_users_script)
def test_a_codec_missing_everywhere_fails_the_write_before_any_task(background):
    directory, _, result = background.result(start_new_users_script)
    assert result.returncode == 0, result.stderr[-3000:]
    error, tasks = result.stdout.strip().splitlines()[-2:]
    assert "option 'compression.type': zstd compression needs the 'zstandard' package" in error
    assert error.endswith('pip install "segmentlog[zstd]"'), error
    assert tasks == "tasks 0"
    assert not (directory / "logdir").exists()


@pytest.mark.background(starter=start_new_users_script)
def test_a_failing_task_shows_segmentlogs_error_as_one_line_each_time(background):
    """What a failed task prints at Spark's default log level: Spark reports it several
    times (its log lines for the task, with the JVM's frames, and the driver's exception);
    what segmentlog puts there, each time, is its error's one line: no traceback of its
    own, no line of its code."""
    _, _, result = background.result(start_new_users_script)
    assert result.returncode == 0, result.stderr[-3000:]
    shown = result.stderr.split(FAILING_READ + "\n", 1)[1].split(FAILING_READ_DONE, 1)[0]
    ours = [line for line in shown.splitlines() if "segmentlog" in line]
    assert ours, shown
    for line in ours:
        assert re.search(r"segmentlog_datasource\.errors\.CorruptLogError: \S+/plain-0/0{20}"
                         r"\.log at byte \d+: checksum mismatch .* What to do: copy the segment "
                         r"again from another replica", line), line
    assert 1 <= len(ours) <= 3, shown  # the task's error and warning logs, the exception


# ------------------------------------------------------------------------ SQL

# The README's SQL examples ("SQL"), verbatim: a test runs each with the log's path.
README_SQL_TABLE = """\
CREATE TABLE orders USING segmentlog OPTIONS (path '/data/kafka-logs', subscribe 'orders');
SELECT partition, count(*) AS records, max(offset) AS last_offset
FROM orders GROUP BY partition ORDER BY partition;"""
README_SQL_VIEW = """\
CREATE TEMPORARY VIEW orders_now USING segmentlog OPTIONS (path '/data/kafka-logs/orders-1');
SELECT count(*) FROM orders_now;"""


def run_sql(spark, text, path):
    """Each statement of `text` with the log at `path`; the last one's rows."""
    rows = None
    for statement in text.replace("/data/kafka-logs", path).split(";"):
        if statement.strip():
            rows = [tuple(row) for row in spark.sql(statement).collect()]
    return rows


@pytest.fixture(scope="module")
def orders_logdir(tmp_path_factory):
    """`orders` of 3 partitions (3, 2 and 1 records) beside another topic."""
    import pyarrow as pa
    from segmentlog_datasource.writer import write_log

    logdir = str(tmp_path_factory.mktemp("sql") / "kafka-logs")
    write_log(logdir, pa.table({"value": [b"%d" % i for i in range(6)],
                                "partition": [0, 0, 0, 1, 1, 2]}), topic="orders",
              num_partitions=3)
    write_log(logdir, pa.table({"value": [b"x"]}), topic="payments", num_partitions=1)
    return logdir


@pytest.fixture
def sql_tables(spark):
    names = []
    yield names
    for name in names:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def engine_rows(logdir):
    """(partition, value) of every record under `logdir`, read by the engine (no Spark job)."""
    from segmentlog_datasource.format import ScanOptions
    from segmentlog_datasource.read.options import parse_read_options
    from segmentlog_datasource.read.planning import Constraints, plan_fragments

    fragments = plan_fragments(parse_read_options({"path": logdir}), Constraints())
    return sorted((row["partition"], row["value"]) for fragment in fragments
                  for batch in fragment.scan(ScanOptions()) for row in batch.to_pylist())


def sql_error(caught) -> str:
    """segmentlog's message in Spark's error text: on one line, with no Python frame."""
    text = str(caught.value)
    lines = [line.split("segmentlog_datasource.errors.", 1)[1].split(": ", 1)[1]
             for line in text.splitlines() if re.search(r"segmentlog_datasource\.errors\.\w+: ", line)]
    assert len(lines) == 1 and not re.search(r'^\s*File "', text, re.M), text
    return lines[0]


@pytest.mark.compat
def test_the_readmes_sql_reads_a_topic_through_a_table_and_a_view(spark, orders_logdir,
                                                                   sql_tables):
    sql_tables.append("orders")
    assert run_sql(spark, README_SQL_TABLE, orders_logdir) == [(0, 3, 2), (1, 2, 1),
                                                               (2, 1, 0)]
    assert README_SQL_TABLE in README and README_SQL_VIEW in README
    assert run_sql(spark, README_SQL_VIEW, orders_logdir) == [(2,)]
    spark.catalog.dropTempView("orders_now")


@pytest.mark.compat
def test_a_table_at_a_location_reads_that_partition(spark, orders_logdir, sql_tables):
    sql_tables.append("orders_zero")
    spark.sql(f"CREATE TABLE orders_zero USING segmentlog LOCATION '{orders_logdir}/orders-0'")
    assert spark.sql("SELECT offset, value FROM orders_zero ORDER BY offset").collect() == \
        [(0, b"0"), (1, b"1"), (2, b"2")]


@pytest.mark.compat
def test_sql_forms_spark_passes_no_options_are_refused_naming_the_forms_that_work(
        spark, orders_logdir, sql_tables):
    sql_tables.extend(["no_path", "with_columns", "with_secret", "orders_in"])
    # no path: refused when the table is created, and not created
    with pytest.raises(Exception) as caught:
        spark.sql("CREATE TABLE no_path USING segmentlog")
    assert sql_error(caught) == (
        "CREATE TABLE ... USING segmentlog needs the log's path: OPTIONS (path "
        "'/data/kafka-logs') or LOCATION '/data/kafka-logs'")
    assert not spark.catalog.tableExists("no_path")
    # credentials would be kept in the catalog
    with pytest.raises(Exception) as caught:
        spark.sql(f"CREATE TABLE with_secret USING segmentlog OPTIONS (path '{orders_logdir}', "
                  f"`store.secretAccessKey` 'abc')")
    assert "give credentials through the environment or a role" in sql_error(caught)
    # a column list: Spark calls the source at no CREATE, and passes a SELECT no options
    spark.sql(f"CREATE TABLE with_columns (key binary, value binary, topic string, "
              f"partition int, offset bigint, timestamp timestamp, timestampType int) "
              f"USING segmentlog OPTIONS (path '{orders_logdir}')")
    with pytest.raises(Exception) as caught:
        spark.sql("SELECT count(*) FROM with_columns").collect()
    assert "CREATE TEMPORARY VIEW t USING segmentlog OPTIONS (path '/data/kafka-logs')" in \
        sql_error(caught)
    # an INSERT INTO a table gets no options either: refused, not written anywhere
    spark.sql(f"CREATE TABLE orders_in USING segmentlog OPTIONS (path '{orders_logdir}')")
    before = sorted(os.walk(orders_logdir))
    with pytest.raises(Exception) as caught:
        spark.sql("INSERT INTO orders_in VALUES (NULL, X'76', 'orders', 0, 0, NULL, 0)")
    assert "INSERT INTO a view made by CREATE TEMPORARY VIEW v USING segmentlog" in \
        sql_error(caught)
    assert sorted(os.walk(orders_logdir)) == before
    # ... which is what the error says to do, and does
    copy = os.path.join(os.path.dirname(orders_logdir), "copy")
    spark.sql(f"CREATE TEMPORARY VIEW orders_out USING segmentlog OPTIONS (path '{copy}', "
              f"topic 'orders', numPartitions '3')")
    try:
        spark.sql("INSERT INTO orders_out VALUES (NULL, X'76', 'orders', 1, 0, NULL, 0)")
    finally:
        spark.catalog.dropTempView("orders_out")
    assert engine_rows(copy) == [(1, b"v")]


@pytest.mark.compat
@pytest.mark.parametrize("form", ["OPTIONS (path '{path}')", "LOCATION '{path}'"])
def test_create_table_over_a_missing_path_fails_and_makes_no_table(spark, tmp_path, sql_tables,
                                                                    form):
    missing = str(tmp_path / "kafka-logs")
    sql_tables.append("lost")
    with pytest.raises(Exception) as caught:
        spark.sql(f"CREATE TABLE lost USING segmentlog {form.format(path=missing)}")
    assert sql_error(caught) == f"{missing}: no such directory"
    assert not spark.catalog.tableExists("lost")
    assert not os.path.exists(missing)
    # docs/sql.md says so
    assert "a missing path or a glob that matches no directory fails the `CREATE TABLE`, " \
        "and no table" in " ".join((CHECKOUT / "docs" / "sql.md").read_text().split())


# The insert-target view of docs/sql.md (the README's SQL section links it), verbatim.
SQL_INSERT_VIEW = ("CREATE TEMPORARY VIEW out USING segmentlog OPTIONS (path '/data/copy', "
                   "topic 'orders', numPartitions '3')")


@pytest.mark.compat
def test_a_view_made_for_inserts_reads_back_its_topic(spark, orders_logdir, tmp_path):
    assert SQL_INSERT_VIEW in " ".join((CHECKOUT / "docs" / "sql.md").read_text().split())
    copy = str(tmp_path / "copy")
    spark.sql(f"CREATE TEMPORARY VIEW orders_source USING segmentlog "
              f"OPTIONS (path '{orders_logdir}', subscribe 'orders')")
    spark.sql(SQL_INSERT_VIEW.replace("/data/copy", copy))
    try:
        spark.sql("INSERT INTO out SELECT * FROM orders_source")
        # another topic beside it, which the view's topic leaves out
        (spark.createDataFrame([(b"x",)], "value binary").write.format("segmentlog")
         .mode("append").option("topic", "other").option("numPartitions", "1").save(copy))
        back = spark.sql("SELECT topic, partition, value FROM out").collect()
        assert sorted(tuple(r) for r in back) == sorted(
            ("orders", p, v) for p, v in engine_rows(orders_logdir) if v != b"x")
        assert spark.sql("SELECT count(*) FROM out").first()[0] == 6
    finally:
        spark.catalog.dropTempView("out")
        spark.catalog.dropTempView("orders_source")
    # A read given topic and another selection is refused, naming both.
    with pytest.raises(Exception) as caught:
        spark.read.format("segmentlog").option("topic", "orders") \
            .option("subscribe", "other").load(copy).count()
    assert "only one of 'subscribe', 'subscribePattern', 'assign' and 'topic'" in \
        sql_error(caught)
    # A topic that is not there is named as the option that chose it.
    with pytest.raises(Exception) as caught:
        spark.read.format("segmentlog").option("topic", "payments").load(copy).count()
    assert sql_error(caught).startswith(
        f"option 'topic': no partition directories for topic(s) 'payments' under {copy}")


# ---------------------------------------------------- a symbolic link loop

def test_a_symbolic_link_loop_fails_the_read_in_one_line_naming_it(spark, tmp_path):
    loop = tmp_path / "kafka-logs"
    os.symlink(loop, loop)
    with pytest.raises(Exception) as caught:
        spark.read.format("segmentlog").load(str(loop)).count()
    assert sql_error(caught) == (
        f"{loop}: a symbolic link loop (too many levels of symbolic links): fix or remove the "
        f"link, or give the log dir's own path")


# ------------------------------------------------------------ register's cost

def test_register_runs_no_spark_job_on_a_spark_it_knows(spark, monkeypatch):
    import segmentlog_datasource
    from segmentlog_datasource.spark import pushdown_check

    # the release series segmentlog supports (see tests/spark/test_reused_dataframe.py)
    assert ".".join(spark.version.split(".")[:2]) in segmentlog_datasource.PUSHED_READS_LEAK
    monkeypatch.setattr(pushdown_check, "_answers", {})  # as in a process's first call
    jobs_before = spark.sparkContext.statusTracker().getJobIdsForGroup()
    segmentlog_datasource.register(spark)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs_before


# ------------------------------------------------ a directory of other data

def test_spark_refuses_to_write_into_a_parquet_output_directory(spark, tmp_path):
    out = tmp_path / "orders.parquet"
    out.mkdir()
    for name in ("_SUCCESS", "part-00000-5b1c.snappy.parquet"):
        (out / name).write_bytes(b"")
    with pytest.raises(Exception) as caught:
        (spark.createDataFrame([(b"v",)], "value binary").write.format("segmentlog")
         .mode("append").option("topic", "t1").option("numPartitions", 1).save(str(out)))
    assert sql_error(caught) == (
        f"{out} is not a Kafka log dir: it holds '_SUCCESS', 'part-00000-5b1c.snappy.parquet' "
        f"and no <topic>-<partition> directory, and a read of it fails. Write into a new or "
        f"empty directory, or into a log dir")
    assert sorted(os.listdir(out)) == ["_SUCCESS", "part-00000-5b1c.snappy.parquet"]
