"""Writing logs into S3 (moto's server on loopback, behind the counting proxy; #12): the
objects of an S3 write are byte for byte those of the same write to a local dir and read
back through the reader over S3; a second writer fails cleanly on the topic lock or on a
clashing object; a stale lock is taken over; a writer SIGKILLed while publishing is
finished by the next write; what is refused is refused with a clear error."""
import json
import os
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from segmentlog_datasource.errors import InvalidOptionError, StoreError
from segmentlog_datasource.format.scan import ScanOptions
from segmentlog_datasource.read.fragments import scan_fragments
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.writer import (
    ConcurrentWriteError, SegmentLogWriter, WriteError, write_log,
)
from segmentlog_datasource.writer import objectstore
from segmentlog_datasource.writer.publish import KILL_HOOK
from segmentlog_datasource.writer.stream import StreamSink

from segmentlog_datasource.format.pending import PUBLISH_TOKEN
from support.children import run_script
from support.kafka_logs import decode_logdir

BUCKET = "segmentlog-writes"
TESTS_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRITE_TIME = 1_700_000_000_000
SMALL = {"segment_bytes": 1024, "batch_size": 256, "index_interval_bytes": 200}


@pytest.fixture(scope="module")
def s3(s3_server):
    saved = dict(os.environ)
    os.environ.update(s3_server.env())
    s3_server.make_bucket(BUCKET)
    try:
        yield s3_server
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def prefix(request):
    return f"{request.node.name.replace('[', '-').replace(']', '')}-{time.time_ns()}"


def rows(tag, per_partition, partitions, topic=None):
    values, parts = [], []
    for partition in partitions:
        for i in range(per_partition):
            values.append(b"%s-p%d-%03d-" % (tag.encode(), partition, i) + b"x" * 60)
            parts.append(partition)
    columns = {"value": values, "partition": pa.array(parts, pa.int32()),
               "key": [v[:12] for v in values]}
    if topic is not None:
        columns["topic"] = [topic] * len(values)
    return pa.table(columns)


def names(s3, prefix):
    """The keys under the prefix, relative to it (a listing: no object is read)."""
    client = s3.client()
    return [item["Key"][len(prefix) + 1:]
            for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=BUCKET, Prefix=prefix + "/")
            for item in page.get("Contents", ())]


def objects(s3, prefix):
    """{key relative to prefix: bytes} of everything under the prefix, read eight at a
    time (one after another, they were a third of the kill tests' time)."""
    from concurrent.futures import ThreadPoolExecutor

    client = s3.client()
    relative = names(s3, prefix)
    with ThreadPoolExecutor(max_workers=8) as pool:
        bodies = pool.map(lambda name: client.get_object(
            Bucket=BUCKET, Key=f"{prefix}/{name}")["Body"].read(), relative)
        return dict(zip(relative, bodies))


def local_files(logdir):
    found = {}
    for root, _, names in os.walk(logdir):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, logdir)] = handle.read()
    return found


def download(s3, prefix, target):
    for relative, data in objects(s3, prefix).items():
        if relative.startswith("."):
            continue
        path = os.path.join(target, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
    return str(target)


def values_by_partition(s3, prefix, tmp_path):
    local = download(s3, prefix, tmp_path / f"copy-{time.time_ns()}")
    return {key: [r[4] for r in records] for key, records in decode_logdir(local).items()}


def read_through_reader(uri):
    fragments = plan_fragments(parse_read_options({"path": uri}), Constraints())
    found = {}
    for batch in scan_fragments(fragments, ScanOptions(include_headers=True)):
        for topic, partition, offset, value in zip(
                batch.column("topic").to_pylist(), batch.column("partition").to_pylist(),
                batch.column("offset").to_pylist(), batch.column("value").to_pylist()):
            found.setdefault((topic, partition), []).append((offset, value))
    return {key: [v for _, v in sorted(items)] for key, items in found.items()}


def expected(table):
    found = {}
    for topic, partition, value in zip(table.column("topic").to_pylist(),
                                       table.column("partition").to_pylist(),
                                       table.column("value").to_pylist()):
        found.setdefault((topic, partition), []).append(value)
    return found


# ------------------------------------------------------------ the same bytes as locally

def test_new_and_existing_topic_written_as_locally_byte_for_byte(s3, prefix, tmp_path):
    uri = f"s3://{BUCKET}/{prefix}"
    local = str(tmp_path / "local")
    first = rows("first", 30, [0, 1], topic="t")
    second = pa.concat_tables([rows("second", 25, [0, 2], topic="t"),
                               rows("second", 10, [1], topic="n")])
    for logdir in (local, uri):
        write_log(logdir, first, num_partitions=3, write_time_ms=WRITE_TIME,
                  compression="lz4", **SMALL)
        summary = write_log(logdir, second, write_time_ms=WRITE_TIME, compression="lz4",
                            **SMALL)
    assert summary.offsets()[("t", 0)] == (30, 55)
    assert summary.offsets()[("n", 0)] == (0, 0)  # a new topic's empty partition

    in_s3 = objects(s3, prefix)
    assert not [name for name in in_s3 if name.startswith(".") and name != PUBLISH_TOKEN], \
        "staging or lock left"
    # the checkpoint files a local write keeps beside the segments (#21) are not written
    # to object stores
    on_disk = {name: data for name, data in local_files(local).items()
               if not name.endswith(("-checkpoint", "partition.metadata"))
               and name != PUBLISH_TOKEN}  # random: only its presence is compared
    assert PUBLISH_TOKEN in in_s3
    in_s3 = {name: data for name, data in in_s3.items() if name != PUBLISH_TOKEN}
    assert sorted(in_s3) == sorted(on_disk)
    assert any(name.endswith(".timeindex") for name in in_s3)
    assert len([name for name in in_s3 if name.startswith("t-0/")]) > 6  # several segments
    for name in on_disk:
        assert in_s3[name] == on_disk[name], name

    want = expected(first)
    for key, values in expected(second).items():
        want[key] = want.get(key, []) + values
    assert read_through_reader(uri) == want
    assert values_by_partition(s3, prefix, tmp_path) == {**want, ("t", 2): want[("t", 2)],
                                                         ("n", 0): []}


def test_engine_writer_appends_with_store_options(s3, prefix):
    uri = f"s3a://{BUCKET}/{prefix}/"
    options = s3.store_options()
    with SegmentLogWriter(uri, topic="events", num_partitions=2, options=options) as writer:
        writer.write_rows([{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(20)])
        assert s3.secret_key not in repr(writer.job.target)
    assert writer.summary.records == 20
    got = read_through_reader(f"s3://{BUCKET}/{prefix}")
    assert sorted(v for values in got.values() for v in values) == \
        sorted(b"v%d" % i for i in range(20))


@pytest.mark.parametrize("option", [{"leader_epoch": 3}, {"topic_id": "VGhlIHRvcGljIHQgaWQuLg"}])
def test_options_for_the_files_beside_segments_are_refused_for_a_store(s3, prefix, option):
    uri = f"s3://{BUCKET}/{prefix}"
    with pytest.raises(InvalidOptionError, match="leaves segments only") as caught:
        write_log(uri, rows("x", 2, [0], topic="t"), num_partitions=1, **option)
    assert caught.value.option in ("leaderEpoch", "topicId")
    assert not names(s3, prefix)


# --------------------------------------------------------------------- concurrency

def test_second_writer_of_a_locked_topic_fails_cleanly(s3, prefix):
    uri = f"s3://{BUCKET}/{prefix}"
    write_log(uri, rows("seed", 5, [0], topic="t"), num_partitions=1)
    first = SegmentLogWriter(uri, topic="t")
    first.write_table(rows("first", 5, [0]))
    with pytest.raises(ConcurrentWriteError, match=r"topic 't' .* is being written by job"):
        SegmentLogWriter(uri, topic="t")
    # the refused writer left nothing of its own behind, and the first one commits
    first.commit()
    assert [name for name in names(s3, prefix)
            if name.startswith(".") and name != PUBLISH_TOKEN] == []
    write_log(uri, rows("third", 5, [0], topic="t"))
    values = read_through_reader(uri)[("t", 0)]
    assert [v.split(b"-")[0] for v in values] == [b"seed"] * 5 + [b"first"] * 5 + [b"third"] * 5


def test_clashing_object_undoes_the_job_and_leaves_nothing_visible(s3, prefix):
    uri = f"s3://{BUCKET}/{prefix}"
    write_log(uri, rows("seed", 10, [0, 1, 2], topic="t"), num_partitions=3)
    before = objects(s3, prefix)
    # A writer that ignores the locks put partition 2's next segment index in place:
    # partitions 0 and 1 are published before the clash, and must be undone.
    foreign = f"{prefix}/t-2/{10:020d}.index"
    s3.client().put_object(Bucket=BUCKET, Key=foreign, Body=b"foreign")
    with pytest.raises(ConcurrentWriteError, match="appeared or changed while this write ran"):
        write_log(uri, rows("job", 10, [0, 1, 2], topic="t"))
    after = objects(s3, prefix)
    # the publish token changed as the publish began (readers' hint), nothing else did
    assert after[PUBLISH_TOKEN] != before.pop(PUBLISH_TOKEN)
    del after[PUBLISH_TOKEN]
    assert after == {**before, foreign[len(prefix) + 1:]: b"foreign"}
    assert read_through_reader(uri) == {("t", p): [b"seed-p%d-%03d-" % (p, i) + b"x" * 60
                                                   for i in range(10)] for p in range(3)}


def test_failed_job_leaves_nothing(s3, prefix):
    uri = f"s3://{BUCKET}/{prefix}"
    write_log(uri, rows("seed", 4, [0, 1], topic="t"), num_partitions=2)
    before = objects(s3, prefix)
    with pytest.raises(ValueError):
        with SegmentLogWriter(uri, topic="t") as writer:
            writer.write_table(rows("job", 4, [0, 1]))
            raise ValueError("the application failed")
    with pytest.raises(Exception, match="column 'partition' holds 5"):
        write_log(uri, rows("bad", 2, [0, 5], topic="t"))
    assert objects(s3, prefix) == before


def test_stale_lock_is_taken_over(s3, prefix, monkeypatch):
    uri = f"s3://{BUCKET}/{prefix}"
    write_log(uri, rows("seed", 3, [0], topic="t"), num_partitions=1)
    lock = {"job": "20240101000000-0123456789ab", "mode": "append", "time": 0,
            "owner": {"host": "another-host", "pid": 1}}
    s3.client().put_object(Bucket=BUCKET, Key=f"{prefix}/.segmentlog-lock-t",
                           Body=json.dumps(lock).encode())
    with pytest.raises(ConcurrentWriteError, match="is being written by job 2024"):
        write_log(uri, rows("early", 3, [0], topic="t"))
    monkeypatch.setattr(objectstore, "LOCK_TIMEOUT_S", 0.5)
    # Last-Modified and Date have one-second resolution: 1.2 s later, the lock's age as
    # the store tells it is at least 1 s, past the timeout
    time.sleep(1.2)
    write_log(uri, rows("late", 3, [0], topic="t"))
    assert [v.split(b"-")[0] for v in read_through_reader(uri)[("t", 0)]] == \
        [b"seed"] * 3 + [b"late"] * 3
    assert [name for name in names(s3, prefix)
            if name.startswith(".") and name != PUBLISH_TOKEN] == []


def test_lock_is_refreshed_while_held(s3, prefix, monkeypatch):
    uri = f"s3://{BUCKET}/{prefix}"
    monkeypatch.setattr(objectstore, "LOCK_TIMEOUT_S", 2.0)  # refreshed every 0.67 s
    writer = SegmentLogWriter(uri, topic="t", num_partitions=1)
    key = f"{prefix}/.segmentlog-lock-t"
    first = s3.client().head_object(Bucket=BUCKET, Key=key)["ETag"]
    time.sleep(3.0)  # past the timeout: only the refreshes keep the lock fresh
    assert s3.client().head_object(Bucket=BUCKET, Key=key)["ETag"] != first
    with pytest.raises(ConcurrentWriteError, match="is being written"):
        write_log(uri, rows("other", 2, [0], topic="t"))
    writer.write_table(rows("held", 2, [0]))
    writer.commit()
    assert len(read_through_reader(uri)[("t", 0)]) == 2


# ----------------------------------------------------------------------- kill safety

KILLED_JOB = """
import sys
import pyarrow as pa
sys.path.insert(0, sys.argv[2])
from write.test_s3_write import rows
from segmentlog_datasource.writer import write_log
job = pa.concat_tables([rows("job", 25, [0, 1, 2], topic="t"), rows("job", 25, [0, 1], topic="n")])
write_log(sys.argv[1], job, segment_bytes=1024, batch_size=256)
"""


def killed_job_table():
    return pa.concat_tables([rows("job", 25, [0, 1, 2], topic="t"),
                             rows("job", 25, [0, 1], topic="n")])


# 60 objects are published: 20 segments of 5 partitions; 60 is killed after the last
# (the local kill sweeps kill after every step; these are the first and the last)
@pytest.mark.parametrize("step", [1, 60])
def test_writer_killed_while_publishing_is_finished_by_the_next_write(s3, prefix, step,
                                                                      tmp_path):
    uri = f"s3://{BUCKET}/{prefix}"
    write_log(uri, rows("old", 20, [0, 1], topic="t"), num_partitions=3, **{
        k: v for k, v in SMALL.items() if k != "index_interval_bytes"})
    # A process of its own, forked from a server that has imported the writer and boto3.
    done = run_script(textwrap.dedent(KILLED_JOB), [uri, TESTS_ROOT],
                      env=dict(s3.env(), **{KILL_HOOK: str(step)}), timeout=180)
    assert done.returncode == -9, done.stderr
    assert any(name.startswith(".segmentlog-staging-") and name.endswith("publish-journal.json")
               for name in names(s3, prefix))
    # until the next write finishes it, readers see the log as it was (#22): none of the
    # killed job's published objects, whole partitions or not
    assert read_through_reader(uri) == expected(rows("old", 20, [0, 1], topic="t"))
    assert read_through_reader(f"{uri}/n-0") == {}

    write_log(uri, rows("next", 3, [0, 1, 2], topic="t"))

    job = expected(killed_job_table())
    old = expected(rows("old", 20, [0, 1], topic="t"))
    nxt = expected(rows("next", 3, [0, 1, 2], topic="t"))
    got = read_through_reader(uri)
    for key in sorted(set(job) | set(got)):
        want_all = old.get(key, []) + job.get(key, []) + nxt.get(key, [])
        assert got.get(key, []) == want_all, key  # rolled forward: all of the killed job
    assert values_by_partition(s3, prefix, tmp_path) == got
    assert [name for name in names(s3, prefix)
            if name.startswith(".") and name != PUBLISH_TOKEN] == []


# ------------------------------------------------------------------------ refusals

def test_overwrite_is_refused(s3, prefix):
    with pytest.raises(InvalidOptionError, match=r"overwrite.*no atomic replace.*new prefix"):
        write_log(f"s3://{BUCKET}/{prefix}", rows("x", 1, [0], topic="t"), mode="overwrite",
                  num_partitions=1)
    assert names(s3, prefix) == []


@pytest.mark.parametrize("uri", ["gs://bucket/logs", "abfs://container@account.dfs.core.windows.net/logs",
                                 "hdfs://namenode/logs", "memory://logs"])
def test_other_stores_are_refused(uri):
    with pytest.raises(InvalidOptionError) as caught:
        write_log(uri, rows("x", 1, [0], topic="t"), num_partitions=1)
    scheme = uri.split(":")[0]
    assert f"{scheme}://" in str(caught.value) and "If-None-Match" in str(caught.value)


def test_streaming_into_a_store_is_refused(s3, prefix):
    with pytest.raises(InvalidOptionError, match="streaming sink writes local"):
        StreamSink(f"s3://{BUCKET}/{prefix}", "query-1", topic="t")


def test_missing_bucket_is_named_and_secrets_stay_hidden(s3):
    secret = "not-the-real-secret-value"
    with pytest.raises(StoreError) as caught:
        write_log("s3://no-such-bucket-here/logs", rows("x", 1, [0], topic="t"),
                  num_partitions=1, options={"store.accessKeyId": "AKIDEXAMPLE",
                                             "store.secretAccessKey": secret})
    assert "no-such-bucket-here" in str(caught.value)
    assert secret not in str(caught.value) and "AKIDEXAMPLE" not in str(caught.value)


def test_store_options_on_a_local_path_are_refused(tmp_path):
    with pytest.raises(InvalidOptionError, match="apply to s3:// paths"):
        write_log(str(tmp_path), rows("x", 1, [0], topic="t"), num_partitions=1,
                  options={"store.region": "eu-west-1"})


def test_a_partition_prefix_is_refused(s3, prefix):
    uri = f"s3://{BUCKET}/{prefix}"
    write_log(uri, rows("x", 2, [0], topic="t"), num_partitions=1)
    with pytest.raises(InvalidOptionError, match="partition directory, not a log dir"):
        write_log(uri + "/t-0", rows("y", 1, [0], topic="t"))


def test_missing_boto3_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)
    monkeypatch.setattr(objectstore, "_clients", {})
    with pytest.raises(WriteError, match=r'pip install "segmentlog\[s3\]"'):
        objectstore._make_client(objectstore.StoreConfig(region="eu-west-1"))


# ------------------------------------------------------------------ framed values

def test_framed_values_register_their_schemas_in_the_store_as_locally(s3, prefix, tmp_path):
    """valueFormat=avro into s3://: the `_schemas` records and the framed segments are the
    local write's, byte for byte; a second write with a compatible schema registers
    version 2, an incompatible one is refused with nothing written; the values decode
    back through the reader over S3."""
    from support.reading import decoded_rows

    uri = f"s3://{BUCKET}/{prefix}"
    local = str(tmp_path / "local")
    v1 = pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string())])
    v2 = pa.struct([pa.field("id", pa.int64(), False)])  # a field removed: BACKWARD holds
    first = pa.table({"value": pa.array([{"id": 1, "name": "a"}, {"id": 2, "name": None}], v1)})
    second = pa.table({"value": pa.array([{"id": 3}], v2)})
    for logdir in (local, uri):
        write_log(logdir, first, topic="orders", num_partitions=1, write_time_ms=WRITE_TIME,
                  options={"valueFormat": "avro"})
        write_log(logdir, second, topic="orders", write_time_ms=WRITE_TIME,
                  options={"valueFormat": "avro"})
    in_s3 = {name: data for name, data in objects(s3, prefix).items()
             if not name.startswith(".")}
    on_disk = {name: data for name, data in local_files(local).items()
               if not name.startswith(".")
               and not name.endswith(("-checkpoint", "partition.metadata"))}
    assert sorted(in_s3) == sorted(on_disk)
    assert any(name.startswith("_schemas-0/") and name.endswith(".log") for name in in_s3)
    for name in on_disk:
        assert in_s3[name] == on_disk[name], name

    registered = [json.loads(v) for v in read_through_reader(uri)[("_schemas", 0)]]
    assert [(r["subject"], r["version"], r["id"]) for r in registered] == \
        [("orders-value", 1, 1), ("orders-value", 2, 2)]
    got = decoded_rows({"path": uri, "subscribe": "orders", "valueFormat": "avro"})
    assert [row["valueDecoded"] for row in got] == [{"id": 1}, {"id": 2}, {"id": 3}]

    before = objects(s3, prefix)
    v3 = pa.struct([pa.field("id", pa.int64(), False), pa.field("extra", pa.int64(), False)])
    with pytest.raises(WriteError, match="incompatible with subject 'orders-value' version 2"):
        write_log(uri, pa.table({"value": pa.array([{"id": 4, "extra": 1}], v3)}),
                  topic="orders", options={"valueFormat": "avro"})
    assert {k: v for k, v in objects(s3, prefix).items() if k != PUBLISH_TOKEN} == \
        {k: v for k, v in before.items() if k != PUBLISH_TOKEN}
