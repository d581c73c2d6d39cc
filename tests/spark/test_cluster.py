"""On a Spark standalone cluster (a master and two workers of the pip-installed PySpark), a
batch read and an AvailableNow streaming query over the Kafka-written fixtures deliver every
record exactly once, with tasks on both executors.

The driver runs in a subprocess (support/cluster_job.py): this pytest process keeps its own
local SparkSession.
"""
import base64
import collections
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from support.cluster import StandaloneCluster, kill_group
from support.manifest import expected_rows, load_manifest, partition_names

JOB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "support", "cluster_job.py")
MAX_OFFSETS_PER_TRIGGER = 50
JOB_TIMEOUT = 150


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


@pytest.fixture(scope="module")
def cluster_run(kafka_logdir, tmp_path_factory):
    """Start the cluster, run both phases in one application, stop the cluster."""
    work = tmp_path_factory.mktemp("cluster-job")
    stream_logdir = work / "logdir"
    shutil.copytree(kafka_logdir, stream_logdir)
    for root, dirs, files in os.walk(stream_logdir):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)
    spec = {
        "phases": ["batch", "stream"],
        "logdir": kafka_logdir,
        "stream_logdir": str(stream_logdir),
        "checkpoint": str(work / "checkpoint"),
        "stream_options": {"maxOffsetsPerTrigger": str(MAX_OFFSETS_PER_TRIGGER)},
        "executors": 2,
        "timeout": JOB_TIMEOUT - 30,
    }
    started = time.monotonic()
    with StandaloneCluster(workers=2, cores=1, memory="1g") as cluster:
        spec["master"] = cluster.master_url
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
            output, _ = driver.communicate(timeout=JOB_TIMEOUT)
        except subprocess.TimeoutExpired:
            kill_group(driver)
            output, _ = driver.communicate()
            output += f"\n(the driver was killed after {JOB_TIMEOUT}s)"
        finally:
            kill_group(driver, grace=5.0)
        result = json.loads(result_path.read_text()) if result_path.exists() else {}
        if driver.returncode != 0 or result.get("error") or not result.get("phases"):
            pytest.fail(f"the cluster job failed ({driver.returncode}):\n"
                        f"{result.get('error')}\n{output[-6000:]}\n" + cluster.logs_tail())
        result["workers"] = [w["id"] for w in cluster.state()["workers"]
                             if w["state"] == "ALIVE"]
    result["seconds"] = time.monotonic() - started
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


def test_batch_read_on_the_cluster_delivers_every_record_once(cluster_run, kafka_logdir):
    batch = phase(cluster_run, "batch")
    got = job_records(batch["rows"])
    expected = manifest_records(kafka_logdir)
    assert len(expected) > 5000
    duplicates = [r[:3] for r, n in collections.Counter(got).items() if n > 1]
    assert not duplicates, duplicates[:10]
    assert len(got) == len(expected)
    assert set(got) == set(expected)
    assert_both_executors_ran_tasks(cluster_run, "batch")


def test_available_now_stream_on_the_cluster_delivers_every_record_once(cluster_run,
                                                                        kafka_logdir):
    stream = phase(cluster_run, "stream")
    got = job_records(stream["rows"])
    keys = collections.Counter(r[:3] for r in got)
    duplicates = [key for key, n in keys.items() if n > 1]
    assert not duplicates, duplicates[:10]
    batch_keys = {r[:3] for r in job_records(phase(cluster_run, "batch")["rows"])}
    assert set(keys) == batch_keys
    assert set(got) == set(manifest_records(kafka_logdir))

    batches = stream["batches"]
    # The limit is split across partitions by backlog, and a share below one offset is
    # rounded up so that no partition starves (as in Spark's Kafka source): a batch may
    # pass the limit by one offset for each partition but the largest.
    bound = MAX_OFFSETS_PER_TRIGGER + len({r[:2] for r in got}) - 1
    assert all(b["rows"] <= bound for b in batches), (bound, [b["rows"] for b in batches])
    # Each topic-partition advances in offset order from one micro-batch to the next.
    last = {}
    for b in sorted(batches, key=lambda b: b["id"]):
        for tp, (first, final) in b["ranges"].items():
            assert first > last.get(tp, -1), (tp, b["id"], first, last.get(tp))
            last[tp] = final
    assert_both_executors_ran_tasks(cluster_run, "stream")
