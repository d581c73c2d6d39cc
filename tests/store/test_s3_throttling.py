"""A store that throttles (#46): moto's server behind the proxy of support.s3server, which
answers 503 SlowDown or 500 InternalError to three requests in a row out of every ten of
each request kind (the listing, HEAD, ranged GET; PUT, conditional PUT and the rest of a
write), or to one request in three at random, for as long as a read or a write lasts.

With the production retry settings (storage/retry.py: backoff with full jitter from
0.1 s, capped at 5 s; store.maxAttempts 20 and store.retryTimeout 30 s), every read
returns exactly the rows of a fault-free read and every write lands whole, in each run:
one read and one write per pattern in the test run (503 for one pattern and 500 for the
other, the read's and the write's the other way round; a loop's runs alternate between
them), about 15 s in all; `SEGMENTLOG_THROTTLING_RUNS=100 pytest
tests/store/test_s3_throttling.py` makes each case a loop of 100 runs (benchmarks/
s3_fault_sweep.py --sections throttling times them). A store that stays down fails after
store.retryTimeout, naming the object, the status, the tries and the seconds spent; the
throttling answers make the process send fewer requests at once (retry.Limiter).
"""
import os
import re
import threading
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
from segmentlog_datasource.writer import write_log

BUCKET = "segmentlog-throttling"
LOOP = os.environ.get("SEGMENTLOG_THROTTLING_RUNS")
READ_RUNS = int(LOOP or 1)
WRITE_RUNS = int(LOOP or 1)
KINDS = ["slowdown", "internal"]  # 503 SlowDown, 500 InternalError: run by run
SMALL = {"segment_bytes": 1024, "batch_size": 256, "index_interval_bytes": 200}


@pytest.fixture(scope="module")
def s3(s3_server):
    s3_server.make_bucket(BUCKET)
    try:
        yield s3_server
    finally:
        remote._filesystems.clear()
        retry.reset_limiters()


@pytest.fixture(autouse=True)
def fresh_limiters():
    """Each test starts with a store that has not throttled yet (the limiter is the
    process's, as the server is)."""
    retry.reset_limiters()
    yield
    retry.reset_limiters()


def table(tag, per_partition, partitions, topic="t"):
    values = [b"%s-p%d-%03d-" % (tag.encode(), p, i) + b"x" * 60
              for p in partitions for i in range(per_partition)]
    parts = [p for p in partitions for _ in range(per_partition)]
    return pa.table({"value": values, "partition": pa.array(parts, pa.int32()),
                     "key": [v[:12] for v in values], "topic": [topic] * len(values)})


def read_rows(uri, opts):
    fragments = plan_fragments(parse_read_options(dict(opts, path=uri)), Constraints())
    rows = []
    for batch in scan_fragments(fragments, ScanOptions()):
        rows.extend(zip(*(batch.column(c).to_pylist()
                          for c in ("topic", "partition", "offset", "key", "value"))))
    return sorted(rows)


def keys_under(s3, prefix):
    client = s3.client()
    return sorted(item["Key"] for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=prefix + "/") for item in page.get("Contents", ()))


@pytest.fixture(scope="module")
def log_in_s3(s3, tmp_path_factory):
    local = str(tmp_path_factory.mktemp("throttling") / "logdir")
    write_log(local, table("row", 40, [0, 1]), num_partitions=2, **SMALL)
    s3.upload_tree(local, BUCKET, "read")
    uri = f"s3://{BUCKET}/read"
    fault_free = read_rows(uri, s3.store_options())
    assert fault_free == read_rows(local, {}) and len(fault_free) == 80
    return uri, fault_free


# How a store throttles: given the fault kind, a rule's pattern (and the run, for seeds).
PATTERNS = {
    "bursts of 3 in 10": lambda run, place: dict(every=10, times=3),
    "1 in 3 at random": lambda run, place: dict(probability=1 / 3, seed=run * 100 + place),
}
READ_PLACES = {"listing": dict(op="LIST"), "HEAD": dict(op="HEAD"),
               "ranged GET": dict(op="GET", ranged=True)}
# First match wins: a conditional PUT is not counted among the plain ones.
WRITE_PLACES = {"conditional PUT": dict(op="PUT", conditional="If-None-Match"),
                "PUT": dict(op="PUT"), "GET": dict(op="GET"), "HEAD": dict(op="HEAD"),
                "listing": dict(op="LIST"), "DELETE": dict(op="DELETE"),
                "POST": dict(op="POST")}


def rules(kind, pattern, run, places):
    return {place: Fault(kind, **match, **PATTERNS[pattern](run, number))
            for number, (place, match) in enumerate(places.items())}


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_a_read_under_throttling_returns_exact_rows_every_time(s3, log_in_s3, pattern):
    uri, fault_free = log_in_s3
    fired = {place: 0 for place in READ_PLACES}
    for run in range(READ_RUNS):
        remote._filesystems.clear()  # new connections, as a new process would make
        retry.reset_limiters()
        # the other kind than the write's of this pattern, run 0: both kinds are read
        # and written through in one run per pattern
        kind = KINDS[(run + list(PATTERNS).index(pattern) + 1) % 2]
        at = rules(kind, pattern, run, READ_PLACES)
        with s3.inject(*at.values()):
            rows = read_rows(uri, s3.store_options())
        assert rows == fault_free, f"run {run} ({kind})"
        for place, fault in at.items():
            fired[place] += fault.fired
    if pattern.startswith("bursts"):  # each kind's first request is in a burst
        assert min(fired.values()) >= READ_RUNS, fired
    else:  # a kind of few requests may have drawn none
        assert sum(fired.values()) >= READ_RUNS, fired


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_a_write_under_throttling_lands_whole_every_time(s3, pattern):
    """Every request of a write throttled (the locks, the tasks' uploads, the staged
    objects, the journal, the conditional PUTs that publish, the GETs, DELETEs and
    listings): the rows land once, nothing is left behind."""
    want = table("job", 8, [0, 1])
    fired = {place: 0 for place in WRITE_PLACES}
    for run in range(WRITE_RUNS):
        retry.reset_limiters()
        kind = KINDS[(run + list(PATTERNS).index(pattern)) % 2]
        prefix = f"write-{kind}-{run}-{time.time_ns()}"
        uri = f"s3://{BUCKET}/{prefix}"
        at = rules(kind, pattern, run, WRITE_PLACES)
        with s3.inject(*at.values()):
            summary = write_log(uri, want, num_partitions=2, options=s3.store_options(),
                                **SMALL)
        assert summary.offsets()[("t", 0)] == (0, 8), f"run {run} ({kind})"
        assert [row[4] for row in read_rows(uri, s3.store_options())] == \
            sorted(want.column("value").to_pylist()), f"run {run}"
        assert not [key for key in keys_under(s3, prefix) if "/.segmentlog-staging-" in key
                    or "/.segmentlog-lock-" in key], f"run {run}"
        for place, fault in at.items():
            fired[place] += fault.fired
    if pattern.startswith("bursts"):
        assert min(fired[place] for place in ("conditional PUT", "PUT", "GET", "HEAD",
                                               "listing", "DELETE")) >= WRITE_RUNS, fired
    else:
        assert sum(fired.values()) >= WRITE_RUNS, fired


# ------------------------------------------------------------- a store that stays down

def test_a_read_of_a_store_that_stays_down_fails_after_the_budget(s3, log_in_s3):
    uri, _ = log_in_s3
    budget = 1.0  # (a short one: the test waits it out)
    opts = dict(s3.store_options(), **{"store.retryTimeout": "1",
                                       "store.maxAttempts": "100"})
    fault = Fault("slowdown", op="GET", key="read/t-0/*.log", times=10 ** 6)
    started = time.monotonic()
    with s3.inject(fault), pytest.raises(StoreError) as caught:
        read_rows(uri, opts)
    took = time.monotonic() - started
    message = str(caught.value)
    assert message.startswith(f"{uri}/t-0/000") and ".log: cannot read bytes " in message, \
        message
    spent = re.search(r": (503 SlowDown|an error answer longer than the bytes asked \(its "
                      r"status unknown\)) after (\d+) attempts in ([0-9.]+) s "
                      r"\(store.retryTimeout is 1 s; ", message)
    assert spent, message
    assert budget <= float(spent.group(3)) <= took, (message, took)
    assert took < budget + 20  # bounded: the budget, then one last try (generous for CI)
    assert "What to do:" in message and "store.retryTimeout (now 1 s)" in message
    assert isinstance(caught.value, retry.Exhausted) and caught.value.attempts >= 3
    assert s3.secret_key not in message


def test_a_write_to_a_store_that_stays_down_fails_after_the_budget(s3):
    prefix = f"write-down-{time.time_ns()}"
    uri = f"s3://{BUCKET}/{prefix}"
    opts = dict(s3.store_options(), **{"store.retryTimeout": "1.5",
                                       "store.maxAttempts": "100"})
    started = time.monotonic()
    with s3.inject(Fault("internal", op="PUT", times=10 ** 6)), \
            pytest.raises(StoreError) as caught:
        write_log(uri, table("job", 4, [0]), num_partitions=1, options=opts, **SMALL)
    took = time.monotonic() - started
    message = str(caught.value)
    assert message.startswith(f"{uri}/.segmentlog-") and ": cannot write: 500 InternalError " \
        "after " in message and "(store.retryTimeout is 1.5 s; " in message, message
    assert 1.5 <= caught.value.seconds <= took < 1.5 + 20, (message, took)
    assert keys_under(s3, prefix) == []  # nothing was written


def test_the_tries_run_out_at_store_max_attempts_within_the_budget(s3, log_in_s3):
    uri, _ = log_in_s3
    with s3.inject(Fault("internal", op="LIST", times=10 ** 6)) as injected, \
            pytest.raises(StoreError) as caught:
        read_rows(uri, dict(s3.store_options(), **{"store.maxAttempts": "3"}))
    assert re.match(rf"{uri}: cannot list: 500 InternalError after 3 attempts in [0-9.]+ s "
                    r"\(store.maxAttempts is 3; ", str(caught.value)), str(caught.value)
    assert injected.fired == 3


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "4000"])
def test_a_bad_retry_timeout_names_the_option(s3, log_in_s3, value):
    uri, _ = log_in_s3
    with pytest.raises(InvalidOptionError,
                       match="option 'store.retryTimeout': invalid value") as caught:
        read_rows(uri, dict(s3.store_options(), **{"store.retryTimeout": value}))
    assert caught.value.option == "store.retryTimeout"


def test_the_retry_options_are_refused_for_other_stores():
    with pytest.raises(InvalidOptionError, match=r"apply to s3:// paths \(store.retryTimeout "
                                                 r"was given\)") as caught:
        plan_fragments(parse_read_options({"path": "gs://bucket/logs",
                                           "store.retryTimeout": "5"}), Constraints())
    assert caught.value.option == "store.retryTimeout"


# ------------------------------------------------------------------- fewer in flight

class Holder(threading.Thread):
    """A thread that takes a place in the limiter and keeps it until told to leave."""

    def __init__(self, limiter):
        super().__init__(daemon=True)
        self.limiter = limiter
        self.inside, self.leave = threading.Event(), threading.Event()

    def run(self):
        with self.limiter.slot():
            self.inside.set()
            self.leave.wait(60)

    def done(self):
        self.leave.set()
        self.join(60)


def test_throttling_answers_let_fewer_requests_in_flight():
    """The limiter halves the requests in flight at a throttling answer (down to one) and
    lets one more through per `limit` successes."""
    limiter = retry.Limiter(ceiling=8)
    holders = [Holder(limiter) for _ in range(4)]
    for holder in holders:
        holder.start()
        assert holder.inside.wait(60)
    assert limiter.in_flight == 4 and limiter.waits == 0
    limiter.throttled()  # four in flight: from now on two may be
    assert limiter.limit == 2
    fifth = Holder(limiter)
    fifth.start()
    deadline = time.monotonic() + 60
    while limiter.waits == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert limiter.waits == 1 and not fifth.inside.is_set()
    holders[0].done()
    holders[1].done()
    assert limiter.in_flight == 2 and not fifth.inside.is_set()  # two still: the limit
    holders[2].done()
    assert fifth.inside.wait(60)  # one in flight: the fifth goes
    for holder in holders[3:] + [fifth]:
        holder.done()
    assert limiter.in_flight == 0

    with limiter.slot():
        with limiter.slot():  # a check made inside a try takes no second place
            assert limiter.in_flight == 1
    limiter.throttled()
    limiter.throttled()
    assert limiter.limit == 1  # never below one
    for _ in range(3):
        limiter.succeeded()
    assert limiter.limit == pytest.approx(1 + 1 + 1 / 2 + 1 / 2.5)  # additive increase
    for _ in range(100):
        limiter.succeeded()
    assert limiter.limit == 8


def test_a_throttled_read_slows_its_own_requests_down(s3, log_in_s3):
    uri, fault_free = log_in_s3
    remote._filesystems.clear()
    with s3.inject(Fault("slowdown", every=10, times=3)):
        assert read_rows(uri, s3.store_options()) == fault_free
    limiter = retry.limiter_for(remote.StoreConfig(endpoint=s3.endpoint, region=s3.region))
    assert limiter.throttles >= 3 and limiter.limit < retry.MAX_IN_FLIGHT
