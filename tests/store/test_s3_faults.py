"""Faults of an S3 store (#22): moto's server behind the proxy of support.s3server, which
answers chosen requests with 503 SlowDown, 500 InternalError, a reset connection, a body
cut short, or a stall, then lets the retry through.

Reads (listing, an index GET, a ranged GET in the middle of a segment) and writes (a PUT,
a conditional PUT, a lock, a GET's body, a download) survive each fault with exactly the
rows of a fault-free run, and the proxy saw the retry; when the tries run out, the error
names the object and the last fault, and a failed write leaves the log as it was.

Timeouts are short here (1 s; 0.5 s for boto3); the retries are segmentlog's own
(storage/retry.py), with their production backoff. Each case injects its fault at every
place at once, so one read or write covers them all. Throttling in bursts and at random,
and a store that stays down: test_s3_throttling.py.
"""
import re
import time

import pyarrow as pa
import pytest

from support.s3server import Fault
from segmentlog_datasource.errors import InvalidOptionError, StoreError
from segmentlog_datasource.format.scan import ScanOptions
from segmentlog_datasource.read.fragments import scan_fragments
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.storage import remote, retry
from segmentlog_datasource.writer import objectstore, write_log

BUCKET = "segmentlog-faults"
RETRY = {"store.maxAttempts": "4", "store.connectTimeout": "1", "store.readTimeout": "1"}
WRITE_RETRY = {"store.readTimeout": "0.5"}  # boto3 takes fractions (curl whole seconds)
SMALL = {"segment_bytes": 1024, "batch_size": 256, "index_interval_bytes": 200}
STALL_S = 3.0  # longer than store.readTimeout: the client gives up first


@pytest.fixture(scope="module")
def s3(s3_server):
    s3_server.make_bucket(BUCKET)
    try:
        yield s3_server
    finally:
        remote._filesystems.clear()
        retry.reset_limiters()  # the process's next tests meet a store that never throttled


@pytest.fixture
def small_chunks(monkeypatch):
    """Segments fetched in several ranged GETs, so one starts mid-segment."""
    monkeypatch.setattr(remote, "CHUNK_BYTES", 512)  # below a segment's 1,024 bytes
    monkeypatch.setattr(remote, "MIN_FETCH_BYTES", 256)
    monkeypatch.setattr(remote, "READ_PAST_BYTES", 128)


_direct = {}


def direct(s3):
    """One boto3 client on moto itself (uncounted, never faulted): making one takes long."""
    if s3 not in _direct:
        _direct[s3] = s3.client()
    return _direct[s3]


def options(s3, **more):
    return {**s3.store_options(), **RETRY, **more}


def table(tag, per_partition, partitions, topic="t"):
    values = [b"%s-p%d-%03d-" % (tag.encode(), p, i) + b"x" * 60
              for p in partitions for i in range(per_partition)]
    parts = [p for p in partitions for _ in range(per_partition)]
    return pa.table({"value": values, "partition": pa.array(parts, pa.int32()),
                     "key": [v[:12] for v in values], "topic": [topic] * len(values)})


def values(tab):
    found = {}
    for topic, partition, value in zip(*(tab.column(c).to_pylist()
                                         for c in ("topic", "partition", "value"))):
        found.setdefault((topic, partition), []).append(value)
    return found


def read_rows(uri, opts):
    """Every row as (topic, partition, offset, key, value), in order."""
    fragments = plan_fragments(parse_read_options(dict(opts, path=uri)), Constraints())
    rows = []
    for batch in scan_fragments(fragments, ScanOptions()):
        rows.extend(zip(*(batch.column(c).to_pylist()
                          for c in ("topic", "partition", "offset", "key", "value"))))
    return sorted(rows)


def read_values(uri, opts):
    found = {}
    for topic, partition, _, _, value in read_rows(uri, opts):
        found.setdefault((topic, partition), []).append(value)
    return found


def keys_under(s3, prefix):
    client = direct(s3)
    return sorted(item["Key"] for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=prefix + "/") for item in page.get("Contents", ()))


def segments(s3, prefix):
    """{key: bytes} of the log's own objects (not the writers' dot-files)."""
    client = direct(s3)
    return {key: client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            for key in keys_under(s3, prefix) if "/." not in key}


def leftovers(s3, prefix):
    """A write's staging objects and locks still there."""
    return [key for key in keys_under(s3, prefix)
            if "/.segmentlog-staging-" in key or "/.segmentlog-lock-" in key]


def retried(s3, fault, ok=(200, 206)):
    """Each time `fault` fired, the same request went again, and one answer came through."""
    faulted = [r for r in s3.requests() if r.rule is fault]
    assert len(faulted) == fault.fired >= 1, (fault, faulted)
    for request in faulted:
        again = [r for r in s3.requests() if r.fault is None and r.op == request.op and
                 r.key == request.key and r.range_header == request.range_header]
        assert any(r.status in ok for r in again), (request, again)


@pytest.fixture(scope="module")
def log_in_s3(s3, tmp_path_factory):
    """A log of two partitions, several segments each, and its fault-free read."""
    local = str(tmp_path_factory.mktemp("faults") / "logdir")
    write_log(local, table("row", 40, [0, 1]), num_partitions=2, **SMALL)
    s3.upload_tree(local, BUCKET, "read")
    uri = f"s3://{BUCKET}/read"
    fault_free = read_rows(uri, options(s3))
    assert fault_free == read_rows(local, {}) and len(fault_free) == 80
    return uri, fault_free


# --------------------------------------------------------------------------- the proxy

def test_the_proxy_answers_each_fault_as_it_says(s3):
    """What each kind puts on the wire, seen by a raw HTTP client (no SDK to hide it)."""
    import http.client
    import urllib.parse

    direct(s3).put_object(Bucket=BUCKET, Key="wire/object", Body=b"0123456789" * 100)
    signing = objectstore._make_client(remote.StoreConfig(
        endpoint=s3.endpoint, region=s3.region, access_key_id=s3.access_key,
        secret_access_key=s3.secret_key))
    url = urllib.parse.urlsplit(signing.generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "wire/object"}))

    def get(kind, timeout=5.0):
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
        with s3.inject(Fault(kind, op="GET", key="wire/object", stall_s=2)) as injected:
            try:
                connection.request("GET", f"{url.path}?{url.query}")
                response = connection.getresponse()
                return response.status, response.getheader("Content-Length"), response.read()
            except Exception as exc:
                return type(exc).__name__
            finally:
                connection.close()
                assert injected.fired == 1

    status, _, body = get("slowdown")
    assert status == 503 and b"<Code>SlowDown</Code>" in body
    status, _, body = get("internal")
    assert status == 500 and b"<Code>InternalError</Code>" in body
    assert get("reset") in ("ConnectionResetError", "RemoteDisconnected")
    assert get("reset_after_headers") == "ConnectionResetError"
    assert get("short_body") == "IncompleteRead"  # 1000 announced, 500 sent
    assert get("truncated") == (200, "500", b"0123456789" * 50)  # well-formed, half
    assert get("stall", timeout=0.3) == "TimeoutError"
    assert get("stall_mid_body", timeout=0.3) == "TimeoutError"


# ------------------------------------------------------------------------------- reads

READ_KINDS = ["slowdown", "internal", "reset", "reset_after_headers", "short_body",
              "truncated", "stall"]


@pytest.mark.parametrize("kind", READ_KINDS)
def test_a_read_survives_each_fault_at_the_listing_an_index_and_a_ranged_get(
        s3, log_in_s3, small_chunks, kind):
    uri, fault_free = log_in_s3
    remote._filesystems.clear()  # a new connection, as a new process would make
    at = {"listing": Fault(kind, op="LIST", stall_s=STALL_S),
          "index GET": Fault(kind, op="GET", key="read/t-1/*.index", stall_s=STALL_S),
          "mid-segment GET": Fault(kind, op="GET", key="read/t-0/*.log", min_range_start=1,
                                   stall_s=STALL_S)}
    s3.reset_counts()
    with s3.inject(*at.values()):
        rows = read_rows(uri, options(s3))
    assert rows == fault_free
    for place, fault in at.items():
        assert fault.fired == 1, place
        retried(s3, fault)


def test_a_read_whose_tries_run_out_names_the_object_the_range_and_the_fault(
        s3, log_in_s3, small_chunks):
    uri, _ = log_in_s3
    fault = Fault("slowdown", op="GET", key="read/t-0/*.log", min_range_start=1, times=100)
    with s3.inject(fault), pytest.raises(StoreError) as caught:
        read_rows(uri, options(s3, **{"store.maxAttempts": "2"}))
    message = str(caught.value)
    assert message.startswith(f"{uri}/t-0/000"), message
    assert ".log: cannot read bytes " in message
    assert re.search(r": 503 (SlowDown|ServiceUnavailable) after 2 attempts in [0-9.]+ s "
                     r"\(store.maxAttempts is 2; ", message), message
    assert "store.maxAttempts" in message and s3.secret_key not in message
    tries = {}
    for request in s3.requests():
        if request.rule is fault:
            tries[request.key, request.range_header] = tries.get((request.key,
                                                                  request.range_header), 0) + 1
    assert max(tries.values()) == 2, tries  # the first try and one retry: bounded


def test_a_listing_whose_tries_run_out_names_the_prefix_and_the_fault(s3, log_in_s3):
    uri, _ = log_in_s3
    with s3.inject(Fault("internal", op="LIST", times=100)) as injected, \
            pytest.raises(StoreError) as caught:
        read_rows(uri, options(s3, **{"store.maxAttempts": "3"}))
    assert str(caught.value).startswith(f"{uri}: cannot list: 500 InternalError after 3 "
                                        f"attempts"), str(caught.value)
    assert injected.fired == 3


def test_an_object_replaced_by_a_shorter_one_is_not_read_as_data(s3, tmp_path):
    """The store answers a range with fewer bytes (the object got shorter between the
    HEAD and the GET): never garbage in place of the missing bytes."""
    store, uri = remote.ArrowStore("s3", "s3://", "", remote.StoreConfig(
        endpoint=s3.endpoint, region=s3.region, access_key_id=s3.access_key,
        secret_access_key=s3.secret_key, max_attempts=2)), f"s3://{BUCKET}/shrinks/object"
    client = direct(s3)
    client.put_object(Bucket=BUCKET, Key="shrinks/object", Body=b"a" * 5000)
    handle = store._open_file(uri, 5000)
    try:
        client.put_object(Bucket=BUCKET, Key="shrinks/object", Body=b"b" * 3000)
        with pytest.raises(remote.SegmentShrankError, match="replaced while being read"):
            store.read_range(handle, uri, 1000, 3000)
    finally:
        handle.close()


# ------------------------------------------------------------------------------ writes

WRITE_KINDS = ["slowdown", "internal", "reset", "stall"]


@pytest.mark.parametrize("kind", WRITE_KINDS)
def test_a_write_survives_each_fault_at_a_put_and_a_conditional_put(s3, kind):
    """The conditional PUTs reach the store before the fault: the retry gets 412, and
    the writer must see that the object there is its own, not another writer's."""
    prefix = f"write-{kind}-{time.time_ns()}"
    uri = f"s3://{BUCKET}/{prefix}"
    at = {"PUT": Fault(kind, op="PUT", key=f"{prefix}/.segmentlog-staging-*/publish/t-0/*.log",
                       stall_s=STALL_S),
          "conditional PUT": Fault(kind, op="PUT", key=f"{prefix}/t-1/*.log",
                                   conditional="If-None-Match", upstream=True, stall_s=STALL_S)}
    if kind == "reset":  # the lock too: created, its answer lost
        at["lock"] = Fault(kind, op="PUT", key=f"{prefix}/.segmentlog-lock-t",
                           conditional="If-None-Match", upstream=True)
    s3.reset_counts()
    with s3.inject(*at.values()):
        summary = write_log(uri, table("job", 8, [0, 1]), num_partitions=2,
                            options=options(s3, **WRITE_RETRY), **SMALL)
    assert summary.offsets()[("t", 0)] == (0, 8)
    for place, fault in at.items():
        assert fault.fired == 1, place
    retried(s3, at["PUT"])
    for place in at.keys() - {"PUT"}:  # written by the faulted try: 412 on the retry
        retried(s3, at[place], ok=(412,))
    assert read_values(uri, options(s3)) == values(table("job", 8, [0, 1]))
    assert leftovers(s3, prefix) == []


def test_a_write_survives_bodies_cut_off_at_its_gets_and_downloads(s3):
    prefix = f"write-bodies-{time.time_ns()}"
    uri = f"s3://{BUCKET}/{prefix}"
    lock, task = f"{prefix}/.segmentlog-lock-t", f"{prefix}/.segmentlog-staging-*/task-*"
    # each object's second GET (the retry of the first) gets the second fault; a body
    # cut off inside a well-formed answer fails boto3's check of the object's CRC
    at = [Fault("short_body", op="GET", key=lock), Fault("truncated", op="GET", key=lock),
          Fault("reset_after_headers", op="GET", key=task),
          Fault("truncated", op="GET", key=task)]
    s3.reset_counts()
    with s3.inject(*at):
        write_log(uri, table("job", 5, [0]), num_partitions=1,
                  options=options(s3, **WRITE_RETRY), **SMALL)
    for fault in at:
        assert fault.fired == 1, fault
        retried(s3, fault)
    assert read_values(uri, options(s3)) == values(table("job", 5, [0]))
    assert leftovers(s3, prefix) == []


def test_a_write_whose_tries_run_out_leaves_the_log_as_it_was(s3):
    """Partition 0's first .log keeps failing after its indexes were published: they are
    undone, and the error names the object and the fault."""
    prefix = f"write-exhausted-{time.time_ns()}"
    uri = f"s3://{BUCKET}/{prefix}"
    write_log(uri, table("seed", 4, [0, 1]), num_partitions=2, options=options(s3), **SMALL)
    before = segments(s3, prefix)
    fault = Fault("internal", op="PUT", key=f"{prefix}/t-0/*.log",
                  conditional="If-None-Match", times=100)
    s3.reset_counts()
    with s3.inject(fault), pytest.raises(StoreError) as caught:
        write_log(uri, table("job", 8, [0, 1]),
                  options=options(s3, **{"store.maxAttempts": "2"}), **SMALL)
    message = str(caught.value)
    assert message.startswith(f"{uri}/t-0/000") and ".log: cannot write: 500 InternalError " \
        "after 2 attempts" in message, message
    assert s3.secret_key not in message
    assert fault.fired == 2
    undone = {r.key for r in s3.requests() if r.op == "DELETE" and r.status == 204 and
              r.key.startswith(f"{prefix}/t-0/")}  # published before the .log, then undone
    assert {key.rsplit(".", 1)[1] for key in undone} == {"index", "timeindex"}, undone
    assert segments(s3, prefix) == before
    assert leftovers(s3, prefix) == []
    assert read_values(uri, options(s3)) == values(table("seed", 4, [0, 1]))


# ----------------------------------------------------------------------------- options

@pytest.mark.parametrize("name, value", [("store.maxAttempts", "0"),
                                         ("store.maxAttempts", "three"),
                                         ("store.readTimeout", "-1"),
                                         ("store.connectTimeout", "nan")])
def test_a_bad_retry_setting_names_the_option(s3, log_in_s3, name, value):
    uri, _ = log_in_s3
    with pytest.raises(InvalidOptionError, match=f"option '{name}': invalid value") as caught:
        read_rows(uri, options(s3, **{name: value}))
    assert caught.value.option == name


def test_retry_settings_reach_both_clients(s3):
    config = remote.StoreConfig(endpoint=s3.endpoint, max_attempts=7, connect_timeout=2.5,
                                read_timeout=4.0)
    client = objectstore._make_client(config)
    # one try of boto3's per request: storage/retry.py retries, with store.maxAttempts
    assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 1}
    assert config.retry.max_attempts == 7
    assert (client.meta.config.connect_timeout, client.meta.config.read_timeout) == (2.5, 4.0)
    assert "max_attempts=7" in repr(config)
    with pytest.raises(InvalidOptionError, match="apply to s3:// paths"):
        plan_fragments(parse_read_options({"path": "gs://bucket/logs",
                                           "store.maxAttempts": "3"}), Constraints())
