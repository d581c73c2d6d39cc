"""Spark reads of a cluster's disks (three brokers' log dirs): batch and streaming give
what a consumer of that cluster reads, as Kafka's reader wrote it into the manifest."""
import json

import pytest

from support import broker_disks as disks
from support.streams import offsets_by_partition

PARTITIONS = disks.manifest()["partitions"]


def rows_by_partition(rows):
    found = {}
    for row in rows:
        found.setdefault(f"{row.topic}-{row.partition}", []).append((
            row.offset, int(row.timestamp.timestamp() * 1000 + 0.5), row.key, row.value,
            [(h.key, h.value) for h in row.headers]))
    return found


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_a_batch_read_of_three_brokers_is_the_clusters_consumer_view(spark, isolation):
    frame = spark.read.format("segmentlog").option("includeHeaders", "true") \
        .option("isolationLevel", isolation).load(disks.broker_dirs())
    got = rows_by_partition(sorted(frame.collect(), key=lambda r: (r.topic, r.partition,
                                                                   r.offset)))
    assert sorted(got) == sorted(PARTITIONS)
    for name in PARTITIONS:
        assert got[name] == disks.expected(name, isolation), name


def test_a_stream_of_three_brokers_delivers_each_offset_below_the_high_watermark_once(
        spark, tmp_path):
    batches = []

    def collect(frame, batch_id):
        batches.append([tuple(r) for r in frame.select("topic", "partition", "offset").collect()])

    query = (spark.readStream.format("segmentlog")
             .option("paths", json.dumps(disks.broker_dirs()))
             .option("maxOffsetsPerTrigger", 2000).load()
             .writeStream.foreachBatch(collect)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(300)
    assert query.exception() is None
    assert len(batches) >= 2
    got = offsets_by_partition([row for rows in batches for row in rows])
    for name, p in PARTITIONS.items():
        assert got[(p["topic"], p["partition"])] == [r[0] for r in disks.expected(name)], name
