"""Spark reads of a tiered-storage cluster (../shared/fixtures/tiered-cluster): the three
brokers' dirs and the remote store in one load, in batch, as a stream and from S3, give
what a consumer of the cluster reads (the manifest). docs/reading.md, "Tiered storage"."""
import base64
import json
import os

import pytest

from support.streams import delivered_offsets
from support.tiered_cluster import BROKERS, MANIFEST, ROOT, STORE, USER_PARTITIONS


def expected(name, isolation="read_uncommitted"):
    key = "consumer_records" if isolation == "read_uncommitted" else "committed_records"
    def raw(text):
        return None if text is None else base64.b64decode(text)
    return [(r["offset"], r["timestamp"], raw(r["key_b64"]), raw(r["value_b64"]))
            for r in MANIFEST["partitions"][name][key]]


def by_partition(rows):
    found = {}
    for row in sorted(rows, key=lambda r: (r.topic, r.partition, r.offset)):
        found.setdefault(f"{row.topic}-{row.partition}", []).append((
            row.offset, int(row.timestamp.timestamp() * 1000 + 0.5), row.key, row.value))
    return found


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_a_batch_read_of_the_brokers_and_the_store_is_the_consumers_view(spark, isolation):
    frame = spark.read.format("segmentlog").option("isolationLevel", isolation) \
        .load(BROKERS + [STORE])
    got = by_partition(frame.collect())
    assert sorted(got) == sorted(USER_PARTITIONS)
    for name in USER_PARTITIONS:
        assert got[name] == expected(name, isolation), name


def test_a_stream_of_the_cluster_delivers_each_offset_once(spark, tmp_path):
    frame = spark.readStream.format("segmentlog").option("maxOffsetsPerTrigger", 1500) \
        .load(os.path.join(ROOT, "{broker-*,remote-storage/kafka-tiered-storage}"))
    got, batches = delivered_offsets(frame, str(tmp_path / "checkpoint"))
    assert batches >= 2
    for name in USER_PARTITIONS:
        p = MANIFEST["partitions"][name]
        assert got[(p["topic"], p["partition"])] == [r[0] for r in expected(name)], name


def test_the_cluster_uploaded_to_s3_reads_the_same(spark, s3_server):
    bucket = "tiered-cluster"
    s3_server.make_bucket(bucket)
    s3_server.upload_tree(ROOT, bucket, "cluster")
    reader = spark.read.format("segmentlog")
    for key, value in s3_server.store_options().items():
        reader = reader.option(key, value)
    frame = reader.option("paths", json.dumps(
        [f"s3://{bucket}/cluster/broker-{n}" for n in range(3)]
        + [f"s3://{bucket}/cluster/remote-storage/kafka-tiered-storage"])).load()
    got = by_partition(frame.collect())
    for name in USER_PARTITIONS:
        assert got[name] == expected(name), name
