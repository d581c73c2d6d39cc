"""On a Spark standalone cluster (a master and two workers of the pip-installed PySpark), a
batch read and an AvailableNow streaming query over the Kafka-written fixtures deliver every
record exactly once, with tasks on both executors; from local disk, and from an S3 store
(moto behind the counting proxy) together with a write into it that reads back exactly.

The driver runs in a subprocess (support/cluster_job.py): this pytest process keeps its own
local SparkSession. Every phase, local and S3, runs in one application of one cluster: a
driver and two executors start once for the module.
"""
import base64
import collections
import json
import os
import shutil
import subprocess
import sys

import pytest

from support.cluster import StandaloneCluster, kill_group
from support.manifest import expected_rows, load_manifest, partition_names
from support.s3server import S3Server

JOB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "support", "cluster_job.py")
# Several micro-batches each (the fixtures hold over 5,000 records), few enough that the
# run is not spent scheduling them.
MAX_OFFSETS_PER_TRIGGER = 700
# At least two tasks a micro-batch, so that both one-core executors take one of each: one
# task a micro-batch went wherever the scheduler's shuffled offers sent it, and once all
# nine went to one executor.
STREAM_MIN_PARTITIONS = "2"
# Generous (a loaded 2-core machine ran the local phases alone past 150 s): only a hang
# should fail.
JOB_TIMEOUT = 420


def manifest_records(logdir, isolation="read_uncommitted"):
    """Every data record the manifests list as visible, as comparable tuples."""
    records = []
    for name in partition_names(logdir):
        manifest = load_manifest(logdir, name)
        for row in expected_rows(manifest, isolation):
            records.append((manifest["topic"], manifest["partition"], row["offset"], row["key"],
                            row["value"], row["timestamp"], row["timestampType"],
                            tuple(row["headers"])))
    return records


def decoded(text):
    # Tolerates line breaks, should Spark's base64() chunk its output.
    return None if text is None else base64.b64decode(text)


def job_records(rows):
    return [(topic, partition, offset, decoded(key), decoded(value), ts, ts_type,
             tuple((h_key, decoded(h_value)) for h_key, h_value in headers))
            for topic, partition, offset, key, value, ts, ts_type, headers in rows]


def run_job(cluster, spec, work, timeout=JOB_TIMEOUT):
    """Run cluster_job.py as the driver of one application; its result, with the workers."""
    spec = dict(spec, master=cluster.master_url, executors=2, timeout=timeout - 30)
    spec_path, result_path = work / "spec.json", work / "result.json"
    spec_path.write_text(json.dumps(spec))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    # Run outside the checkout: Python workers put their working directory on sys.path.
    # A group of its own, so that a hung driver's JVM goes with it.
    driver = subprocess.Popen(
        [sys.executable, JOB, str(spec_path), str(result_path)], cwd=str(work), env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    try:
        output, _ = driver.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(driver)
        output, _ = driver.communicate()
        output += f"\n(the driver was killed after {timeout}s)"
    finally:
        kill_group(driver, grace=5.0)
    result = json.loads(result_path.read_text()) if result_path.exists() else {}
    if driver.returncode != 0 or result.get("error") or not result.get("phases"):
        pytest.fail(f"the cluster job failed ({driver.returncode}):\n"
                    f"{result.get('error')}\n{output[-6000:]}\n" + cluster.logs_tail())
    result["workers"] = [w["id"] for w in cluster.state()["workers"] if w["state"] == "ALIVE"]
    result["output"] = output
    return result


def start_cluster_run(request):
    """Every phase in one application of one cluster: a batch read and an AvailableNow
    stream of the fixtures on local disk, then the same from S3 and a write into it, where
    the executors have no copy of the data (the fixtures' local directory is never named).
    The cluster and the application run while the rest of the suite does
    (support/background.py), with an S3 server of their own: the other tests reset and
    count the shared server's requests."""
    kafka_logdir = request.getfixturevalue("kafka_logdir")
    work = request.getfixturevalue("tmp_path_factory").mktemp("cluster-job")
    stream_logdir = work / "logdir"
    environ = dict(os.environ)  # taken here: a test may change os.environ while it runs
    s3_dir = work / "s3"
    s3_dir.mkdir()
    # The copy, the S3 server and the uploads are the program's (the background thread's).

    def phases(store):
        return [
            {"name": "batch", "run": "batch", "logdir": kafka_logdir},
            {"name": "stream", "run": "stream", "logdir": str(stream_logdir),
             "checkpoint": str(work / "checkpoint"),
             "stream_options": {"maxOffsetsPerTrigger": str(MAX_OFFSETS_PER_TRIGGER),
                                "minPartitions": STREAM_MIN_PARTITIONS}},
            {"name": "s3-batch", "run": "batch", "logdir": f"s3://{BUCKET}/batch",
             "read_options": store},
            {"name": "s3-stream", "run": "stream", "logdir": f"s3://{BUCKET}/stream",
             "checkpoint": str(work / "s3-checkpoint"), "read_options": store,
             "stream_options": {"maxOffsetsPerTrigger": str(S3_MAX_OFFSETS_PER_TRIGGER),
                                "minPartitions": STREAM_MIN_PARTITIONS}},
            {"name": "s3-write", "run": "write", "write_path": f"s3://{BUCKET}/out",
             "write_rows": WRITE_ROWS, "read_options": store,
             "write_options": {"topic": WRITE_TOPIC, "numPartitions": "3",
                               "segment.bytes": "16384"}},
        ]

    def program():
        shutil.copytree(kafka_logdir, stream_logdir)
        for root, dirs, files in os.walk(stream_logdir):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)
        s3_server = S3Server(parent=str(s3_dir), environ=environ)
        try:
            s3_server.make_bucket(BUCKET)
            s3_server.upload_tree(kafka_logdir, BUCKET, "batch")
            s3_server.upload_tree(kafka_logdir, BUCKET, "stream")
            store = s3_server.store_options()
            spec = {"phases": phases(store)}
            with StandaloneCluster(workers=2, cores=1, memory="1g",
                                   parent=str(work)) as cluster:
                s3_server.reset_counts()
                result = run_job(cluster, spec, work, timeout=JOB_TIMEOUT + 150)
            result["requests"] = s3_server.requests()
        finally:
            s3_server.close()
        result["secret"] = store["store.secretAccessKey"]
        return result

    return program


# Every test here checks the application that start_cluster_run runs.
pytestmark = pytest.mark.background(starter=start_cluster_run)


@pytest.fixture(scope="module")
def cluster_run(background):
    result = background.result(start_cluster_run)
    print("cluster phases:", {name: (round(p.get("seconds", 0), 1), len(p.get("batches", [])))
                              for name, p in result["phases"].items()})
    assert result["secret"] not in result["output"]
    return result


def phase(result, name):
    outcome = result["phases"][name]
    assert not outcome.get("error"), f"the {name} phase failed on the cluster:\n{outcome['error']}"
    return outcome


def assert_both_executors_ran_tasks(result, phase):
    tasks = result["phases"][phase]["tasks"]
    executors = [e for e in result["executors"] if e["id"] != "driver"]
    assert len(executors) == 2, executors
    assert len({e["hostPort"] for e in executors}) == 2 and len(result["workers"]) == 2
    assert set(tasks) == {e["id"] for e in executors}, (tasks, executors)
    assert all(count > 0 for count in tasks.values()), (phase, tasks)


def check_batch(result, kafka_logdir, name="batch"):
    batch = phase(result, name)
    got = job_records(batch["rows"])
    expected = manifest_records(kafka_logdir)
    assert len(expected) > 5000
    duplicates = [r[:3] for r, n in collections.Counter(got).items() if n > 1]
    assert not duplicates, duplicates[:10]
    assert len(got) == len(expected)
    assert set(got) == set(expected)
    assert_both_executors_ran_tasks(result, name)


def test_batch_read_on_the_cluster_delivers_every_record_once(cluster_run, kafka_logdir):
    check_batch(cluster_run, kafka_logdir)


def check_stream(result, kafka_logdir, limit, name="stream", batch_name="batch"):
    stream = phase(result, name)
    got = job_records(stream["rows"])
    keys = collections.Counter(r[:3] for r in got)
    duplicates = [key for key, n in keys.items() if n > 1]
    assert not duplicates, duplicates[:10]
    batch_keys = {r[:3] for r in job_records(phase(result, batch_name)["rows"])}
    assert set(keys) == batch_keys
    assert set(got) == set(manifest_records(kafka_logdir))

    batches = stream["batches"]
    # The limit is split across partitions by backlog, and a share below one offset is
    # rounded up so that no partition starves (as in Spark's Kafka source): a batch may
    # pass the limit by one offset for each partition but the largest.
    bound = limit + len({r[:2] for r in got}) - 1
    assert all(b["rows"] <= bound for b in batches), (bound, [b["rows"] for b in batches])
    # Each topic-partition advances in offset order from one micro-batch to the next.
    last = {}
    for b in sorted(batches, key=lambda b: b["id"]):
        for tp, (first, final) in b["ranges"].items():
            assert first > last.get(tp, -1), (tp, b["id"], first, last.get(tp))
            last[tp] = final
    assert len(batches) > 1, [b["rows"] for b in batches]
    # minPartitions held: two tasks or more a micro-batch, one for each executor
    tasks = result["phases"][name]["tasks"]
    assert sum(tasks.values()) >= 2 * len(batches), (tasks, len(batches))
    assert_both_executors_ran_tasks(result, name)


def test_available_now_stream_on_the_cluster_delivers_every_record_once(cluster_run,
                                                                        kafka_logdir):
    check_stream(cluster_run, kafka_logdir, MAX_OFFSETS_PER_TRIGGER)


# ------------------------------------------------------------------ from and into S3

BUCKET = "cluster-logs"
WRITE_ROWS = 3000
WRITE_TOPIC = "written"
# Each trigger lists the store and reads indexes again: fewer, larger micro-batches, but
# enough of them that both executors get tasks (tasks go to free executors at random:
# five single-task batches all landed on one in a CI run).
S3_MAX_OFFSETS_PER_TRIGGER = 750


def segment_gets(result, prefix):
    """{partition dir: bytes} of the .log GETs under `prefix`/."""
    got = collections.Counter()
    for r in result["requests"]:
        if r.method == "GET" and r.status in (200, 206) and (r.key or "").startswith(prefix + "/") \
                and r.key.endswith(".log"):
            got[r.key.split("/")[1]] += r.response_bytes
    return got


def test_batch_read_from_s3_on_the_cluster_delivers_every_record_once(cluster_run,
                                                                      kafka_logdir):
    check_batch(cluster_run, kafka_logdir, "s3-batch")
    fetched = segment_gets(cluster_run, "batch")
    assert set(fetched) == set(partition_names(kafka_logdir))
    # The tasks read the segments' bytes from the store: at least all the records.
    on_disk = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(kafka_logdir)
                  for n in names if n.endswith(".log"))
    assert sum(fetched.values()) >= on_disk, (sum(fetched.values()), on_disk)


def test_available_now_stream_from_s3_on_the_cluster_delivers_every_record_once(
        cluster_run, kafka_logdir):
    check_stream(cluster_run, kafka_logdir, S3_MAX_OFFSETS_PER_TRIGGER, "s3-stream", "s3-batch")
    assert set(segment_gets(cluster_run, "stream")) == set(partition_names(kafka_logdir))


def test_write_to_s3_on_the_cluster_reads_back_exactly(cluster_run):
    outcome = phase(cluster_run, "s3-write")
    got = job_records(outcome["rows"])
    assert len(got) == WRITE_ROWS
    by_partition = collections.defaultdict(list)
    for topic, partition, offset, key, value, *_ in got:
        assert topic == WRITE_TOPIC and key == b"k" + value[1:] and value[:1] == b"v"
        assert int(value[1:]) % 3 == partition
        by_partition[partition].append(offset)
    assert {p: sorted(o) for p, o in by_partition.items()} == \
        {p: list(range(WRITE_ROWS // 3)) for p in range(3)}
    assert {r[4] for r in got} == {b"v%d" % i for i in range(WRITE_ROWS)}
    assert_both_executors_ran_tasks(cluster_run, "s3-write")
    puts = [r.key for r in cluster_run["requests"]
            if r.method == "PUT" and r.status == 200 and (r.key or "").startswith("out/")]
    # The executors uploaded their tasks' staging files; the commit, the segments.
    staged = [k for k in puts if "/task-" in k and ".segmentlog-staging-" in k]
    assert len(staged) >= 2, puts
    assert {k.split("/")[1] for k in puts if k.endswith(".log") and "staging" not in k} == \
        {f"{WRITE_TOPIC}-{p}" for p in range(3)}
