"""df.writeStream.format("segmentlog"): real streaming queries over a directory of JSON
files, read back with spark.read.format("segmentlog"); restarts, AvailableNow, a failing
micro-batch, and a driver killed while committing."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from segmentlog_datasource.writer.lockfiles import owner_alive, read_lock

from support.kafka_logs import kafka_partition
from support.stream_sink import leftovers, sink_records
from support.stream_sink_job import INPUT_SCHEMA, start_query

TOPIC = "orders"
PARTITIONS = 3


def add_file(input_dir, number, rows=60):
    """One input file (one micro-batch with maxFilesPerTrigger 1); returns its rows."""
    written = [(None if i % 7 == 0 else f"customer-{(number * 13 + i) % 17}",
                f"f{number}-r{i}") for i in range(rows)]
    os.makedirs(input_dir, exist_ok=True)
    temporary = os.path.join(input_dir, f".f{number}.tmp")
    with open(temporary, "w") as handle:
        for key, value in written:
            handle.write(json.dumps({"key": key, "value": value}) + "\n")
    # the file source takes the oldest file first: the file number is the batch order
    os.utime(temporary, (1_700_000_000 + 10 * number,) * 2)
    os.rename(temporary, os.path.join(input_dir, f"f{number:03d}.json"))
    return written


def read_back(spark, logdir):
    rows = (spark.read.format("segmentlog").load(logdir)
            .select("topic", "partition", "offset", F.col("key").cast("string").alias("key"),
                    F.col("value").cast("string").alias("value"))
            .orderBy("topic", "partition", "offset").collect())
    return [(r.topic, r.partition, r.offset, r.key, r.value) for r in rows]


def check_exactly_once(spark, logdir, written):
    """Every written row once, keyed rows in their key's partition, offsets contiguous,
    and each partition in file (= micro-batch) order, rows in file order."""
    got = read_back(spark, logdir)
    assert sorted(r[4] for r in got) == sorted(v for _, v in written)
    order = {value: n for n, (_, value) in enumerate(written)}
    for partition in range(PARTITIONS):
        records = [r for r in got if r[1] == partition]
        assert [r[2] for r in records] == list(range(len(records)))
        values = [r[4] for r in records]
        assert values == sorted(values, key=order.__getitem__)
    for topic, partition, _, key, _ in got:
        assert topic == TOPIC
        if key is not None:
            assert kafka_partition(key.encode(), PARTITIONS) == partition
    return got


def committed_by_spark(checkpoint):
    commits = os.path.join(checkpoint, "commits")
    if not os.path.isdir(commits):
        return []
    return sorted(int(n) for n in os.listdir(commits) if n.isdigit())


def only_record(logdir):
    records = sink_records(logdir)
    assert len(records) == 1
    return next(iter(records.values()))


def test_process_all_available_and_restart_without_duplicates(spark, tmp_path):
    """A processAllAvailable run, then a restart from its checkpoint as an AvailableNow
    query (what test_available_now_completes_and_stops checked on its own query)."""
    input_dir, checkpoint, logdir = (str(tmp_path / n) for n in ("in", "checkpoint", "log"))
    written = [row for n in range(3) for row in add_file(input_dir, n)]
    query = start_query(spark, "segmentlog", input_dir, checkpoint, logdir)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    check_exactly_once(spark, logdir, written)
    record = only_record(logdir)
    with open(os.path.join(checkpoint, "metadata")) as handle:
        assert record["query_id"] == json.load(handle)["id"] == query.id
    assert record["committed_batch"] == committed_by_spark(checkpoint)[-1] == 2
    assert leftovers(logdir) == []
    # the same checkpoint again, with more input, as an AvailableNow query writing lz4:
    # batches 3 and 4, nothing twice, and the query stops by itself when done
    written += [row for n in range(3, 5) for row in add_file(input_dir, n)]
    frame = spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).json(input_dir)
    query = (frame.writeStream.format("segmentlog").trigger(availableNow=True)
             .option("checkpointLocation", checkpoint).option("topic", TOPIC)
             .option("numPartitions", PARTITIONS).option("compression.type", "lz4")
             .outputMode("append").start(logdir))
    try:
        assert query.awaitTermination(300), "the AvailableNow query did not stop"
        assert query.exception() is None
    finally:
        query.stop()
    check_exactly_once(spark, logdir, written)
    assert only_record(logdir)["committed_batch"] == committed_by_spark(checkpoint)[-1] == 4
    assert sorted(os.listdir(logdir)) == sorted(
        [f".segmentlog-sink-{query.id}.json"] + [f"{TOPIC}-{p}" for p in range(PARTITIONS)] +
        [".segmentlog-publishing", "log-start-offset-checkpoint", "recovery-point-offset-checkpoint",
         "replication-offset-checkpoint"])


def test_a_failing_micro_batch_leaves_nothing(spark, tmp_path):
    input_dir, checkpoint, logdir = (str(tmp_path / n) for n in ("in", "checkpoint", "log"))
    first = add_file(input_dir, 0, rows=30)
    add_file(input_dir, 1, rows=30)

    @F.udf(StringType())
    def refuse_second_file(value):
        if value.startswith("f1-"):
            raise ValueError(f"refusing {value}")
        return value

    frame = spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).json(input_dir)
    frame = frame.select("key", refuse_second_file("value").alias("value"))
    query = (frame.writeStream.format("segmentlog").option("checkpointLocation", checkpoint)
             .option("topic", TOPIC).option("numPartitions", PARTITIONS).start(logdir))
    with pytest.raises(Exception, match="refusing f1-r"):
        query.awaitTermination(300)
    check_exactly_once(spark, logdir, first)  # batch 0 only
    assert only_record(logdir)["committed_batch"] == 0
    assert leftovers(logdir) == []  # the failed batch's staging area is gone


def test_bad_sink_settings_are_named(spark, tmp_path):
    input_dir = str(tmp_path / "in")
    add_file(input_dir, 0, rows=5)
    frame = spark.readStream.schema(INPUT_SCHEMA).json(input_dir)

    def failure(writer, path=None):
        query = writer.start(path) if path else writer.start()
        try:
            query.awaitTermination(300)
        except Exception as exc:  # the writer is built when the first micro-batch is planned
            return str(exc)
        finally:
            query.stop()
        pytest.fail("the query did not fail")

    logdir = str(tmp_path / "log")

    def sink(checkpoint=None):  # a new DataStreamWriter each time: option() changes it
        writer = frame.writeStream.format("segmentlog").option("topic", TOPIC)
        return writer.option("checkpointLocation", str(tmp_path / checkpoint)) if checkpoint \
            else writer

    assert "use df.writeStream.format('segmentlog').start(path) or .option('path', ...)" in \
        failure(sink("c1").option("numPartitions", 1))
    assert "unknown write option 'linger.ms'" in failure(
        sink("c2").option("numPartitions", 1).option("linger.ms", 5), logdir)
    assert "set the 'numPartitions' option" in failure(sink("c3"), logdir)
    assert "'extra' cannot be written to Kafka" in failure(
        frame.withColumn("extra", F.lit(1)).writeStream.format("segmentlog")
        .option("checkpointLocation", str(tmp_path / "c4")).option("topic", TOPIC)
        .option("numPartitions", 1), logdir)
    key = "spark.sql.streaming.checkpointLocation"
    previous = spark.conf.get(key, None)
    spark.conf.set(key, str(tmp_path / "c5"))
    try:
        assert "needs option 'checkpointLocation'" in failure(
            sink().option("numPartitions", 1), logdir)
    finally:
        spark.conf.unset(key) if previous is None else spark.conf.set(key, previous)
    assert not os.path.exists(os.path.join(logdir, f"{TOPIC}-0"))


KILL_STEPS = ("after_publish", "after_sink_commit")


def start_killed_driver(request):
    """Each step's input, then one driver (support/stream_sink_job.py) running a query per
    step, killed once each query stopped inside batch 1's commit at its step; run beside
    the suite (support/background.py)."""
    work = request.getfixturevalue("tmp_path_factory").mktemp("killed")
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "support", "stream_sink_job.py")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    meeting = work / "meeting"
    meeting.mkdir()

    def program():
        queries = {}  # the input is written here, in the background thread
        for step in KILL_STEPS:
            input_dir, checkpoint, logdir = (str(work / step / n)
                                             for n in ("in", "checkpoint", "log"))
            written = [row for n in range(3) for row in add_file(input_dir, n, rows=40)]
            queries[step] = input_dir, checkpoint, logdir, written
        process = subprocess.Popen(
            [sys.executable, script, "1", str(meeting)]
            + [f"{step}={','.join(paths[:3])}" for step, paths in queries.items()],
            cwd=str(work), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)
        try:
            _, stderr = process.communicate(timeout=400)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        return {step: (*paths, stderr) for step, paths in queries.items()}

    return program


@pytest.mark.parametrize("step, record_after_kill", [
    ("after_publish", "pending"),  # in the log, not yet in the sink's record
    ("after_sink_commit", "committed"),  # in the sink's record, not in Spark's commit log
])
@pytest.mark.background(starter=start_killed_driver)
def test_a_driver_killed_in_a_commit_restarts_without_duplicates(spark, background, step,
                                                                 record_after_kill):
    input_dir, checkpoint, logdir, written, stderr = background.result(start_killed_driver)[step]
    # the driver died inside batch 1's commit: Spark has not recorded batch 1
    assert committed_by_spark(checkpoint) == [0], stderr.decode()[-3000:]
    record = only_record(logdir)
    got = read_back(spark, logdir)
    batch_1 = sorted(v for _, v in written if v.startswith("f1-"))
    assert sorted(r[4] for r in got if r[4].startswith("f1-")) == batch_1  # published
    if record_after_kill == "pending":
        assert record["committed_batch"] == 0 and record["pending"]["batch"] == 1
    else:
        assert record["committed_batch"] == 1 and record["pending"] is None
    if record_after_kill == "pending":  # the dead commit's locks, taken over at restart
        lock = os.path.join(logdir, f".segmentlog-lock-.sink-{record['query_id']}")
        assert os.path.exists(lock)
        holder = read_lock(lock)
        deadline = time.monotonic() + 120
        while owner_alive(holder) and time.monotonic() < deadline:
            time.sleep(0.2)  # a killed JVM takes a moment to go
        assert owner_alive(holder) is False
    # restarted from the checkpoint: Spark replays batch 1, the sink does not append it
    query = start_query(spark, "segmentlog", input_dir, checkpoint, logdir)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    check_exactly_once(spark, logdir, written)
    record = only_record(logdir)
    assert record["committed_batch"] == 2 == committed_by_spark(checkpoint)[-1]
    assert record["pending"] is None
    assert leftovers(logdir) == []
