"""The Spark data source over an S3 store (moto's server on loopback behind the counting
proxy, tests/support/s3server.py): batch reads in both isolation levels, pushdown, the
secret given as an option kept out of plans and errors, and AvailableNow streaming over
objects uploaded between runs.

The store is named by store.* options, not the environment: Spark's Python workers
(planning and tasks) get the environment the JVM had when the session started, so
os.environ set later in this process never reaches them.
"""
import datetime as dt
import hashlib
import io
import os
import contextlib

import pytest
from pyspark.errors import AnalysisException, PythonException
from pyspark.sql import functions as F

from support.manifest import TIMESTAMP_TYPE_IDS, b64, load_manifest, partition_names
from support.streams import offsets_by_partition, records_table
from segmentlog_datasource.writer import write_log

BUCKET = "spark-logs"
ACCESS_KEY = "AKIASEGMENTLOGSPARK1"
# moto (without enforce_auth) accepts any secret: this one is only looked for in output.
SECRET = "sl-spark-secret-Zq7w1Xv9pL"


@pytest.fixture(scope="module")
def store_options(s3_server):
    return {"store.endpoint": s3_server.endpoint, "store.region": s3_server.region,
            "store.accessKeyId": ACCESS_KEY, "store.secretAccessKey": SECRET}


@pytest.fixture(scope="module")
def fixtures_uri(s3_server, kafka_logdir):
    s3_server.make_bucket(BUCKET)
    s3_server.upload_tree(kafka_logdir, BUCKET, "fixtures")
    return f"s3://{BUCKET}/fixtures"


@pytest.fixture(scope="module")
def utc_spark(spark):
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    yield spark
    spark.conf.set("spark.sql.session.timeZone", previous)


def manifest_rows(logdir, isolation):
    rows = set()
    for name in partition_names(logdir):
        manifest = load_manifest(logdir, name)
        for segment in manifest["segments"]:
            for batch in segment["batches"]:
                if batch["is_control"]:
                    continue
                for record in batch["records"]:
                    if record["visible_" + isolation]:
                        rows.add((manifest["topic"], manifest["partition"], record["offset"],
                                  b64(record["key"]), b64(record["value"]), record["timestamp"],
                                  TIMESTAMP_TYPE_IDS[record["timestamp_type"]],
                                  tuple((k, b64(v)) for k, v in record["headers"])))
    return rows


def spark_rows(df):
    rows = []
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    for row in df.collect():
        micros = (row.timestamp.replace(tzinfo=dt.timezone.utc) - epoch) \
            // dt.timedelta(microseconds=1)
        rows.append((row.topic, row.partition, row.offset,
                     None if row.key is None else bytes(row.key),
                     None if row.value is None else bytes(row.value), micros // 1000,
                     row.timestampType,
                     tuple((h.key, None if h.value is None else bytes(h.value))
                           for h in (row.headers or []))))
    return rows


def log_gets(requests):
    return [r for r in requests if r.method == "GET" and (r.key or "").endswith(".log")]


# ------------------------------------------------------------------ batch reads

@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_s3_read_equals_the_manifests_and_the_local_read(utc_spark, s3_server, store_options,
                                                         fixtures_uri, kafka_logdir, isolation):
    reader = utc_spark.read.format("segmentlog").option("includeHeaders", "true") \
        .option("isolationLevel", isolation)
    s3_server.reset_counts()
    from_store = spark_rows(reader.options(**store_options).load(fixtures_uri))
    assert len(from_store) == len(set(from_store))
    assert set(from_store) == manifest_rows(kafka_logdir, isolation)
    assert sorted(from_store, key=repr) == \
        sorted(spark_rows(reader.load(kafka_logdir)), key=repr)
    # The tasks fetched the segments from the store.
    fetched = {r.key for r in log_gets(s3_server.requests())}
    assert {k.split("/")[1] for k in fetched} == set(partition_names(kafka_logdir))


def test_a_read_through_store_faults_reads_every_row_once(utc_spark, s3_server, store_options,
                                                          fixtures_uri, kafka_logdir):
    """Faults at the listing, an index GET and a ranged GET inside a segment (#22), met by
    the planner's and the tasks' Python workers: retried, every row read once."""
    from support.s3server import Fault

    reader = utc_spark.read.format("segmentlog").options(
        maxPartitionBytes="30000", includeHeaders="true", assign='{"plain": [0]}',
        **store_options)
    faults = [Fault("reset", op="LIST"),
              Fault("short_body", op="GET", key="fixtures/plain-0/*.index"),
              Fault("slowdown", op="GET", key="fixtures/plain-0/*.log", min_range_start=1)]
    with s3_server.inject(*faults):
        rows = spark_rows(reader.load(fixtures_uri))
    assert [fault.fired for fault in faults] == [1, 1, 1]
    assert len(rows) == len(set(rows))
    assert set(rows) == {row for row in manifest_rows(kafka_logdir, "read_uncommitted")
                         if row[:2] == ("plain", 0)}


def partition_layout(df):
    """(number of Spark partitions, what each one read: topic-partition, offsets, rows)."""
    parts = (df.select(F.spark_partition_id().alias("part"), "topic", "partition", "offset")
             .groupBy("part", "topic", "partition")
             .agg(F.min("offset"), F.max("offset"), F.count("*")).collect())
    return df.rdd.getNumPartitions(), sorted(tuple(r) for r in parts)


# An IN list of offsets plans as the equal lookups above do, store or not (tests/spark/
# test_read.py checks its rows with pushdown on local disk).
PUSHED = [
    "topic = 'plain' AND partition = 0 AND offset = 200",
    "partition IN (1, 2) AND offset < 50",
    "offset > 8589938900 AND offset <= 8589938980",
    "timestamp >= timestamp'2023-11-14 22:13:30'",
    "topic = 'compacted' AND timestamp >= timestamp'2023-11-16 00:00:00'",
]


# Splits small enough that the larger partitions of the fixtures plan several (79 splits
# for a whole read, 32 for the time bound, 16 for the offset range), so that the store's
# index lookups decide where they start. Each split is a task that fetches its range from
# the store: 4096 planned 165, and 57 for the time bound, twice the tasks for the same check.
MAX_PARTITION_BYTES = "16384"


@pytest.fixture(scope="module")
def unpushed_partitions(utc_spark, store_options, fixtures_uri):
    """Input partitions of a whole read of the fixtures in the store: what nothing pushed
    plans, the same for every condition below."""
    return utc_spark.read.format("segmentlog") \
        .options(maxPartitionBytes=MAX_PARTITION_BYTES, **store_options) \
        .load(fixtures_uri).rdd.getNumPartitions()


@pytest.mark.parametrize("condition", PUSHED)
def test_pushdown_plans_the_same_partitions_as_on_local_disk(utc_spark, pushdown, store_options,
                                                             fixtures_uri, kafka_logdir,
                                                             unpushed_partitions, condition):
    pushdown(True)

    def layout(path, **options):  # a new DataFrame per query: Spark 4.3 reuses pushed reads
        df = utc_spark.read.format("segmentlog") \
            .options(maxPartitionBytes=MAX_PARTITION_BYTES, **options).load(path).where(condition)
        return partition_layout(df)

    local = layout(kafka_logdir)
    assert layout(fixtures_uri, **store_options) == local
    assert local[0] < unpushed_partitions  # it was pushed


def test_a_pushed_point_lookup_reads_one_segment_object(utc_spark, pushdown, s3_server,
                                                        store_options, fixtures_uri):
    pushdown(True)
    df = utc_spark.read.format("segmentlog").options(**store_options).load(fixtures_uri) \
        .where("topic = 'plain' AND partition = 0 AND offset = 200")
    s3_server.reset_counts()
    assert [r.offset for r in df.collect()] == [200]
    keys = {r.key for r in log_gets(s3_server.requests())}
    assert len(keys) == 1 and next(iter(keys)).startswith("fixtures/plain-0/"), keys


# ------------------------------------------------------------------ the secret

def printed(action) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        action()
    return out.getvalue()


def test_plans_and_string_forms_do_not_show_the_secret(utc_spark, pushdown, store_options,
                                                       fixtures_uri):
    pushdown(True)
    df = utc_spark.read.format("segmentlog").options(**store_options).load(fixtures_uri) \
        .where("offset < 10")
    texts = [printed(df.explain)] + \
        [printed(lambda m=m: df.explain(m)) for m in ("extended", "formatted", "cost", "codegen")]
    assert "BatchScan segmentlog" in texts[0]
    execution = df._jdf.queryExecution()
    texts += [str(df), repr(df), execution.toString(), execution.logical().toJSON(),
              execution.analyzed().toJSON(),
              execution.optimizedPlan().toJSON()]
    df.collect()
    texts.append(df._jdf.queryExecution().executedPlan().toString())
    for text in texts:
        assert SECRET not in text, text
        assert ACCESS_KEY not in text, text


@pytest.fixture(scope="module")
def locked_store(kafka_logdir):
    from support.s3server import S3Server

    with S3Server(enforce_auth=True) as server:
        server.make_bucket("locked")
        server.upload_tree(os.path.join(kafka_logdir, "plain-0"), "locked", "logs/plain-0")
        yield server


def test_a_wrong_secret_fails_with_one_line_that_names_no_secret(spark, locked_store, capfd):
    wrong = "wrong-spark-secret-8d41e0"
    reader = spark.read.format("segmentlog").options(**{
        "store.endpoint": locked_store.endpoint, "store.region": locked_store.region,
        "store.accessKeyId": locked_store.access_key, "store.secretAccessKey": wrong})
    with pytest.raises((AnalysisException, PythonException)) as error:
        reader.load("s3://locked/logs").collect()
    text = str(error.value)
    lines = [line for line in text.splitlines()  # its one line, after Spark's header
             if "segmentlog_datasource.errors.StoreError: " in line]
    assert len(lines) == 1, text
    assert "check the credentials" in lines[0] and "s3://locked/logs" in lines[0], lines[0]
    for secret in (wrong, locked_store.access_key):
        assert secret not in text
    logged = capfd.readouterr()  # the JVM's and Python workers' output meanwhile
    assert wrong not in logged.out + logged.err


def test_the_right_secret_as_options_reads_from_an_enforcing_store(utc_spark, locked_store,
                                                                   kafka_logdir):
    df = utc_spark.read.format("segmentlog").option("includeHeaders", "true").options(**{
        "store.endpoint": locked_store.endpoint, "store.region": locked_store.region,
        "store.accessKeyId": locked_store.access_key,
        "store.secretAccessKey": locked_store.secret_key}).load("s3://locked/logs")
    expected = {r for r in manifest_rows(kafka_logdir, "read_uncommitted") if r[0] == "plain"
                and r[1] == 0}
    assert set(spark_rows(df)) == expected


# ------------------------------------------------------------------ streaming

class Collected:
    def __init__(self):
        self.batches = []

    def __call__(self, frame, batch_id):
        self.batches.append(
            (batch_id, [tuple(r) for r in frame.select("topic", "partition", "offset").collect()]))

    def rows(self):
        return [row for _, rows in self.batches for row in rows]


def sync_to_store(s3_server, local_dir, prefix, uploaded):
    """Uploads the files that are new or changed since the last sync (as a backup tool
    would); returns their keys."""
    client = s3_server.client()
    keys = []
    for root, _, files in os.walk(local_dir):
        for name in sorted(files):
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
            key = prefix + "/" + os.path.relpath(path, local_dir).replace(os.sep, "/")
            if uploaded.get(key) != digest:
                client.upload_file(path, BUCKET, key)
                uploaded[key] = digest
                keys.append(key)
    return keys


def run_available_now(spark, uri, checkpoint, sink, options):
    query = (spark.readStream.format("segmentlog").options(**options).load(uri)
             .writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    assert query.awaitTermination(240), "the AvailableNow query did not stop"
    if query.exception() is not None:
        raise query.exception()
    return query


def test_available_now_over_s3_reads_each_record_once_then_only_new_objects(
        spark, s3_server, store_options, tmp_path):
    local = str(tmp_path / "logdir")
    prefix = "growing"
    uri = f"s3://{BUCKET}/{prefix}"
    checkpoint = str(tmp_path / "checkpoint")
    write_log(local, records_table(0, 600, partitions=3), topic="grow", num_partitions=3,
              segment_bytes=4096, batch_size=2048)
    uploaded = {}
    sync_to_store(s3_server, local, prefix, uploaded)
    options = dict(store_options, maxOffsetsPerTrigger="250")

    first = Collected()
    query = run_available_now(spark, uri, checkpoint, first, options)
    assert offsets_by_partition(first.rows()) == {("grow", p): list(range(200)) for p in range(3)}
    assert len(first.batches) >= 3
    for text in (printed(query.explain), printed(lambda: query.explain(True)),
                 str(query.lastProgress), str(query.status)):
        assert SECRET not in text and ACCESS_KEY not in text, text

    write_log(local, records_table(600, 300, partitions=3), topic="grow", num_partitions=3,
              segment_bytes=4096, batch_size=2048)
    new_keys = sync_to_store(s3_server, local, prefix, uploaded)
    assert any(k.endswith(".log") for k in new_keys) and len(new_keys) < len(uploaded)
    s3_server.reset_counts()
    second = Collected()
    run_available_now(spark, uri, checkpoint, second, options)
    assert offsets_by_partition(second.rows()) == \
        {("grow", p): list(range(200, 300)) for p in range(3)}
    assert min(b for b, _ in second.batches) == max(b for b, _ in first.batches) + 1
    assert log_gets(s3_server.requests())  # the second run read from the store
