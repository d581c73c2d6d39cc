"""Reading logs in an S3 store (moto's server on loopback, behind the counting proxy):
the Kafka-written fixtures read as the manifests say, splits are planned as for the same
log on disk, and the requests made are the ones the storage layer promises."""
import os

import pyarrow as pa
import pytest

from support.manifest import arrow_rows, expected_rows, load_manifest, partition_names
from segmentlog_datasource.format.pending import PUBLISH_TOKEN
from segmentlog_datasource.errors import SegmentLogError, StoreError
from segmentlog_datasource.read.fragments import scan_fragments
from segmentlog_datasource.format.scan import ScanOptions
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.storage import remote
from segmentlog_datasource.writer import write_log

BUCKET = "kafka-backups"


@pytest.fixture(scope="module")
def s3_env(s3_server):
    """The process environment pointing pyarrow at the server (as a user's would)."""
    saved = dict(os.environ)
    os.environ.update(s3_server.env())
    try:
        yield s3_server
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def bucket(s3_env):
    s3_env.make_bucket(BUCKET)
    return BUCKET


@pytest.fixture(scope="module")
def fixtures_in_s3(s3_env, bucket, kafka_logdir):
    s3_env.upload_tree(kafka_logdir, BUCKET, "fixtures")
    return f"s3://{BUCKET}/fixtures"


def _rows(options, constraints=None):
    read = parse_read_options(options)
    fragments = plan_fragments(read, constraints or Constraints())
    scan = ScanOptions(include_headers=True)
    return fragments, arrow_rows(list(scan_fragments(fragments, scan)))


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_every_fixture_reads_through_s3_as_kafka_read_it(fixtures_in_s3, kafka_logdir,
                                                          isolation):
    # One read of the whole log dir, its splits scanned partition by partition (a read
    # of each partition alone planned the same splits, at 0.3 s a planning).
    read = parse_read_options({"path": fixtures_in_s3, "includeHeaders": "true",
                               "isolationLevel": isolation})
    by_partition = {}
    for fragment in plan_fragments(read, Constraints()):
        by_partition.setdefault(f"{fragment.topic}-{fragment.partition}", []).append(fragment)
    assert sorted(by_partition) == partition_names(kafka_logdir)
    scan = ScanOptions(include_headers=True)
    for name, fragments in by_partition.items():
        rows = arrow_rows(list(scan_fragments(fragments, scan)))
        assert rows == expected_rows(load_manifest(kafka_logdir, name), isolation), name


def _plan_shape(fragments):
    return [(f.topic, f.partition, os.path.basename(f.log_path), f.start_position,
             f.end_position, f.min_offset, f.end_offset, f.allow_torn_tail,
             f.min_entry_offset, f.start_index_entry, f.entry_follows) for f in fragments]


@pytest.mark.parametrize("options, constraints", [
    ({}, Constraints()),
    ({"maxPartitionBytes": "3000"}, Constraints()),
    ({"isolationLevel": "read_committed"}, Constraints()),
    ({}, Constraints(offset_low=5, offset_high=40)),
    ({}, Constraints(offset_values=frozenset({3, 17, 29}))),
    ({"subscribe": "plain"}, Constraints(timestamp_low_us=1_700_000_000_000_000)),
])
def test_splits_are_planned_as_for_the_log_on_disk(fixtures_in_s3, kafka_logdir, options,
                                                   constraints):
    # Planning alone: the plans are compared, and a scan leaves its (frozen) fragments as
    # they were; the rows read through the store are the test above's.
    local = plan_fragments(parse_read_options(dict(options, path=kafka_logdir)), constraints)
    in_store = plan_fragments(parse_read_options(dict(options, path=fixtures_in_s3)),
                              constraints)
    assert _plan_shape(in_store) == _plan_shape(local)
    assert all(f.log_path.startswith(fixtures_in_s3 + "/") for f in in_store)


def test_a_live_segment_with_a_torn_tail_reads_to_its_valid_end(s3_env, fixtures_in_s3,
                                                                 kafka_logdir):
    manifest = load_manifest(kafka_logdir, "live-0")
    s3_env.reset_counts()
    fragments = plan_fragments(parse_read_options({"path": fixtures_in_s3 + "/live-0"}),
                               Constraints())
    # The scan, not planning, finds where the data ends (#25): no .log byte at planning.
    assert _log_reads(s3_env.requests()) == []
    assert fragments[-1].end_position == fragments[-1].log_size
    rows = arrow_rows(list(scan_fragments(fragments, ScanOptions(include_headers=True))))
    assert rows == expected_rows(manifest)


# ------------------------------------------------------------------ what is requested

SEGMENTS = 400  # 1,200 segment files and more: a listing of two pages


@pytest.fixture(scope="module")
def many_segments(s3_env, bucket, tmp_path_factory):
    """A topic of SEGMENTS segments (and index files), on disk and in the store."""
    logdir = tmp_path_factory.mktemp("many") / "logdir"
    rows = pa.table({"key": [b"k%d" % i for i in range(SEGMENTS * 2)],
                     "value": [b"v" * 300] * (SEGMENTS * 2)})
    # One record a batch, two batches a segment, an index entry each.
    write_log(str(logdir), rows, topic="deep", num_partitions=1, segment_bytes=800,
              batch_size=400, index_interval_bytes=1)
    names = os.listdir(logdir / "deep-0")
    assert len([n for n in names if n.endswith(".log")]) == SEGMENTS
    keys = s3_env.upload_tree(str(logdir), BUCKET, "many")
    return str(logdir), f"s3://{BUCKET}/many", len(keys)


def _log_reads(requests):
    return [r for r in requests if r.method == "GET" and (r.key or "").endswith(".log")]


def test_planning_a_point_lookup_reads_no_log_bytes(s3_env, many_segments):
    local, uri, keys = many_segments
    read = parse_read_options({"path": uri})
    target = SEGMENTS + 1  # in a rolled segment near the middle
    s3_env.reset_counts()
    fragments = plan_fragments(read, Constraints(offset_values=frozenset({target})))
    planning = s3_env.requests()
    assert _log_reads(planning) == []
    listings = [r for r in planning if "list-type" in r.query]
    # pages of 1,000 keys, not a request per directory or file; and one listing of the
    # log dir's own entries, for unfinished publishes' journals (#22)
    assert len([r for r in listings if r.query.get("delimiter") == "/"]) == 1, listings
    assert len(listings) == 1 + -(-keys // 1000), listings
    # the one segment's offset index, read whole (a HEAD and a GET), and the log dir's
    # log start and high watermark checkpoints (the writer leaves them), read once each;
    # the publish token, read before and after the listing (#22)
    checkpoints = {f"many/{name}" for name in ("log-start-offset-checkpoint",
                                               "replication-offset-checkpoint",
                                               PUBLISH_TOKEN)
                   if os.path.exists(os.path.join(local, name))}
    others = [r for r in planning if "list-type" not in r.query]
    assert {r.key for r in others} == {fragments[0].log_path.split(BUCKET + "/", 1)[1][:-4]
                                       + ".index"} | checkpoints, others
    # (a HEAD and a GET each; a read whose last byte equals the cut-short check's marker,
    # 1 in 256, is made again)
    assert len(others) <= 2 * (2 + len(checkpoints)) + 2
    assert len(fragments) == 1

    s3_env.reset_counts()
    batches = list(scan_fragments(fragments, ScanOptions()))
    assert sum(b.num_rows for b in batches) == 1
    assert pa.concat_arrays([b.column("offset") for b in batches]).to_pylist() == [target]
    reads = _log_reads(s3_env.requests())
    assert {r.key for r in reads} == {fragments[0].log_path.split(BUCKET + "/", 1)[1]}
    fetched = sum(r.response_bytes for r in reads)
    assert fetched <= fragments[0].bytes + remote.READ_PAST_BYTES + remote.MIN_FETCH_BYTES


def test_a_read_to_the_end_downloads_the_active_segment_once(s3_env, many_segments):
    """Planning a read to the end fetches no .log byte: the active segment's end is found
    by its scan, which reads every entry from its start anyway (#25; planning walked its
    headers before, downloading it a second time). The last three segments, to stay fast."""
    local, uri, _ = many_segments
    s3_env.reset_counts()
    fragments = plan_fragments(parse_read_options({"path": uri}),
                               Constraints(offset_low=SEGMENTS * 2 - 6))
    assert _log_reads(s3_env.requests()) == []
    active = fragments[-1]
    assert active.allow_torn_tail and active.start_position == 0
    s3_env.reset_counts()
    assert sum(b.num_rows for b in scan_fragments(fragments, ScanOptions())) == 6
    key = active.log_path.split(BUCKET + "/", 1)[1]
    fetched = sum(r.response_bytes for r in _log_reads(s3_env.requests()) if r.key == key)
    # (a read whose last byte equals the cut-short check's marker, 1 in 256, is made again)
    assert fetched in (active.log_size, 2 * active.log_size), (fetched, active.log_size)


def test_a_split_reads_its_range_in_chunks_and_no_more(s3_env, many_segments, monkeypatch):
    _, uri, _ = many_segments
    monkeypatch.setattr(remote, "CHUNK_BYTES", 2048)
    monkeypatch.setattr(remote, "MIN_FETCH_BYTES", 256)
    monkeypatch.setattr(remote, "READ_PAST_BYTES", 128)
    read = parse_read_options({"path": uri})
    fragments = plan_fragments(read, Constraints(offset_low=100, offset_high=140))
    s3_env.reset_counts()
    rows = sum(b.num_rows for b in scan_fragments(fragments, ScanOptions()))
    assert rows == 40
    for fragment in fragments:
        key = fragment.log_path.split(BUCKET + "/", 1)[1]
        ranges = [r.range_header for r in _log_reads(s3_env.requests()) if r.key == key]
        assert ranges, key
        for header in ranges:
            low, high = (int(x) for x in header.split("=")[1].split("-"))
            assert low >= fragment.start_position
            assert high < fragment.end_position + 128 + 256 + 2048


def test_a_thousand_partitions_are_listed_in_a_few_requests(s3_env, many_segments):
    local, _, _ = many_segments
    segment = os.path.join(local, "deep-0", "00000000000000000000.log")
    with open(segment, "rb") as handle:
        body = handle.read()
    # eight PUTs at a time (one after another, they took 25 s)
    s3_env.put_objects(BUCKET, ((f"wide/wide-{p}/00000000000000000000.log", body)
                                for p in range(1000)))
    s3_env.reset_counts()
    fragments = plan_fragments(parse_read_options({"path": f"s3://{BUCKET}/wide"}),
                               Constraints())
    assert {f.partition for f in fragments} == set(range(1000))
    planning = s3_env.requests()
    listings = [r for r in planning if "list-type" in r.query]
    assert 1 <= len(listings) <= 3, len(listings)
    assert _log_reads(planning) == [] or all(r.range_header for r in _log_reads(planning))


# ------------------------------------------------------------------ errors

def test_a_missing_bucket_is_one_clear_line(s3_env):
    with pytest.raises(StoreError) as info:
        plan_fragments(parse_read_options({"path": "s3://no-such-bucket-here/logs"}),
                       Constraints())
    message = str(info.value)
    assert message.startswith("s3://no-such-bucket-here/logs: cannot list")
    assert "\n" not in message and "bucket" in message.lower()


def test_a_prefix_with_nothing_under_it_is_no_such_directory(fixtures_in_s3):
    with pytest.raises(SegmentLogError, match="no such directory .no objects under this prefix"):
        plan_fragments(parse_read_options({"path": fixtures_in_s3 + "-missing"}), Constraints())


def test_a_segment_file_given_as_the_path_says_to_give_its_directory(fixtures_in_s3):
    path = fixtures_in_s3 + "/plain-0/00000000000000000000.log"
    with pytest.raises(SegmentLogError, match="is a file; give the partition directory"):
        plan_fragments(parse_read_options({"path": path}), Constraints())


@pytest.fixture(scope="module")
def auth_server(kafka_logdir):
    from support.s3server import S3Server

    with S3Server(enforce_auth=True) as server:
        server.make_bucket("locked")
        server.upload_tree(os.path.join(kafka_logdir, "plain-0"), "locked", "logs/plain-0")
        yield server


def test_a_wrong_secret_is_one_line_without_the_secret(auth_server):
    wrong = "wrong-secret-3f9a7c"
    options = {"path": "s3://locked/logs", "store.endpoint": auth_server.endpoint,
               "store.region": auth_server.region, "store.accessKeyId": auth_server.access_key,
               "store.secretAccessKey": wrong}
    with pytest.raises(StoreError) as info:
        plan_fragments(parse_read_options(options), Constraints())
    message = str(info.value)
    assert wrong not in message and auth_server.access_key not in message
    assert "\n" not in message and "check the credentials" in message
    assert wrong not in repr(parse_read_options(options))


def test_the_right_secret_as_options_reads(auth_server, kafka_logdir):
    options = {"path": "s3://locked/logs", "includeHeaders": "true",
               **auth_server.store_options()}
    _, rows = _rows(options)
    assert rows == expected_rows(load_manifest(kafka_logdir, "plain-0"))


def test_anonymous_access_sends_unsigned_requests(s3_env, fixtures_in_s3, kafka_logdir):
    # moto serves a private bucket to any signed request and refuses unsigned reads, so
    # the option is seen working by the refusal, and by reading a public object.
    with pytest.raises(StoreError, match="check the credentials"):
        _rows({"path": fixtures_in_s3, "store.anonymous": "true"})
    assert any(r.status == 403 for r in s3_env.requests()), "no unsigned request refused"
    s3_env.make_bucket("public-logs")
    client = s3_env.client()
    client.put_bucket_acl(Bucket="public-logs", ACL="public-read")
    for key in s3_env.upload_tree(os.path.join(kafka_logdir, "plain-0"), "public-logs",
                                  "logs/plain-0"):
        client.put_object_acl(Bucket="public-logs", Key=key, ACL="public-read")
    _, rows = _rows({"path": "s3://public-logs/logs", "store.anonymous": "true",
                     "includeHeaders": "true"})
    assert rows == expected_rows(load_manifest(kafka_logdir, "plain-0"))


@pytest.fixture(scope="module")
def cluster_in_s3(s3_env, bucket):
    """The broker-disks fixtures uploaded as they are, under cluster/."""
    from support import broker_disks as disks

    s3_env.upload_tree(disks.root(), BUCKET, "cluster")
    return f"s3://{BUCKET}/cluster"


def _cluster_read(uris_option):
    return parse_read_options({**uris_option, "includeHeaders": "true",
                               # read_committed: the last stable offset as computed below
                               # the high watermark too
                               "isolationLevel": "read_committed"})


def test_three_brokers_disks_in_s3_read_as_the_clusters_consumer_view(cluster_in_s3):
    """The broker-disks fixtures uploaded as they are: checkpoints found in the listing,
    leader epochs read, the copies compared header by header (no compiled walk over a
    store), and every partition read as the manifest says, as from local disk."""
    import json

    from support import broker_disks as disks

    uris = [f"{cluster_in_s3}/{broker}" for broker in disks.BROKERS]
    read = _cluster_read({"paths": json.dumps(uris)})
    fragments = plan_fragments(read, Constraints())
    got = disks.arrow_rows_by_partition(
        scan_fragments(fragments, ScanOptions(include_headers=True)))
    assert sorted(got) == sorted(disks.manifest()["partitions"])
    for name in got:
        assert got[name] == disks.expected(name, "read_committed"), name


def test_a_glob_of_brokers_in_s3_is_matched_by_delimited_listings(s3_env, cluster_in_s3):
    """`s3://bucket/cluster/broker-*`: one delimited listing of cluster/ (never the tree
    below), the same brokers as the list, and so the read the manifest says; `{a,b}` and
    `[...]` alike; one that matches nothing names itself and its option."""
    import dataclasses
    import json

    from support import broker_disks as disks

    uris = [f"{cluster_in_s3}/{broker}" for broker in disks.BROKERS]
    s3_env.reset_counts()
    read = _cluster_read({"path": cluster_in_s3 + "/broker-*"})
    listings = [r for r in s3_env.requests() if r.op == "LIST"]
    assert read.paths == uris
    assert [(r.query.get("prefix"), r.query.get("delimiter")) for r in listings] == \
        [("cluster/", "/")]
    # The glob's read is the list's in every option but the paths as given (which only a
    # stream's triggers match again, to the same paths): it plans the splits, and reads
    # the rows, that the test above compares with the manifest. (Planning the cluster
    # in the store a second time took 7 s.)
    as_list = _cluster_read({"paths": json.dumps(uris)})
    assert dataclasses.replace(read, given_paths=()) == \
        dataclasses.replace(as_list, given_paths=())
    assert read.current_paths() == uris
    assert parse_read_options({"paths": json.dumps([
        cluster_in_s3.replace("s3://", "s3a://") + "/broker-{0,2}",
        cluster_in_s3 + "/broker-[01]"])}).paths == [uris[0], uris[2], uris[1]]
    with pytest.raises(SegmentLogError, match=r"^option 'path': the glob "
                       r"'s3://kafka-backups/cluster/broker-\[3-9\]' matches no directory"):
        parse_read_options({"path": cluster_in_s3 + "/broker-[3-9]"})
