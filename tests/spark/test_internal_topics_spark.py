"""Kafka's internal topics as Spark tables (decode=...), batch and streaming, and consumer
lag as a DataFrame, on the partitions Kafka 4.2's own serializers wrote."""
import json
import os
import shutil

import pytest
from pyspark.sql import functions as F

import segmentlog_datasource
from support.fixtures import internal_topics_kafka4_root

PARTITIONS = ("__consumer_offsets-0", "__consumer_offsets-1", "__transaction_state-0",
              "__cluster_metadata-0", "__share_group_state-0")


def manifest(name):
    with open(os.path.join(internal_topics_kafka4_root(), name + ".manifest.json")) as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def internal_logdir(tmp_path_factory):
    """The internal-topics partitions in one log dir, as a broker holds them."""
    logdir = tmp_path_factory.mktemp("internal") / "logdir"
    logdir.mkdir()
    for name in PARTITIONS:
        shutil.copytree(os.path.join(internal_topics_kafka4_root(), name), logdir / name)
    return str(logdir)


def test_consumer_offsets_as_a_table(spark, internal_logdir):
    df = spark.read.format("segmentlog").option("decode", "consumerOffsets") \
        .option("includeMetadata", "true").load(internal_logdir)
    assert df.columns[-7:] == ["position", "recordType", "keyVersion", "valueVersion",
                               "keyDecoded", "valueDecoded", "deleted"]
    commits = (df.where("recordType = 'OffsetCommit' AND NOT deleted")
               .select("partition", "offset", "keyDecoded.OffsetCommit.group",
                       "keyDecoded.OffsetCommit.topic",
                       F.col("keyDecoded.OffsetCommit.partition").alias("p"),
                       "valueDecoded.OffsetCommit.offset",
                       "valueDecoded.OffsetCommit.commitTimestamp", "producerId").collect())
    expected = [(int(name[-1]), r["offset"], r["key"]["group"], r["key"]["topic"],
                 r["key"]["partition"], r["value"]["offset"], r["value"]["commitTimestamp"],
                 r["producer_id"])
                for name in ("__consumer_offsets-0", "__consumer_offsets-1")
                for r in manifest(name)["records"]
                if r["record_type_name"] == "OffsetCommit" and not r["tombstone"]]
    assert sorted(tuple(row) for row in commits) == sorted(expected)
    members = (df.where("recordType = 'GroupMetadata' AND NOT deleted")
               .select(F.explode("valueDecoded.GroupMetadata.members").alias("m"))
               .select("m.memberId", "m.assignmentDecoded.assignedPartitions").collect())
    assert members and all(row.assignedPartitions is not None for row in members)
    streams = (df.where("recordType = 'StreamsGroupTopology' AND NOT deleted")
               .select(F.explode("valueDecoded.StreamsGroupTopology.subtopologies")
                       .alias("s")).select("s.repartitionSinkTopics").collect())
    assert ["wordcount-repartition"] in [row.repartitionSinkTopics for row in streams]
    counts = {row.recordType: row["count"] for row in
              df.where("partition = 0").groupBy("recordType").count().collect()}
    wanted = {}
    for name, count in manifest("__consumer_offsets-0")["record_types"].items():
        wanted[name.split(":")[0]] = wanted.get(name.split(":")[0], 0) + count
    assert counts == wanted


def test_cluster_metadata_share_state_and_transactions_as_tables(spark, internal_logdir):
    metadata = spark.read.format("segmentlog").option("decode", "clusterMetadata") \
        .load(internal_logdir)
    log = metadata.where("snapshot IS NULL")
    topics = sorted(row.name for row in log.where("recordType = 'TOPIC_RECORD'")
                    .select("valueDecoded.TOPIC_RECORD.name").collect())
    records = manifest("__cluster_metadata-0")["records"]
    assert topics == sorted(r["value"]["name"] for r in records
                            if r["record_type_name"] == "TOPIC_RECORD")
    # a boolean field filters as a boolean
    fenced = log.where("valueDecoded.REGISTER_BROKER_RECORD.fenced").select("offset")
    assert sorted(row.offset for row in fenced.collect()) == sorted(
        r["offset"] for r in records
        if r["record_type_name"] == "REGISTER_BROKER_RECORD" and r["value"]["fenced"])
    snapshot_rows = metadata.where("snapshot IS NOT NULL").count()
    assert snapshot_rows == sum(s["record_count"] for s in
                                manifest("__cluster_metadata-0")["snapshots"])
    share = (spark.read.format("segmentlog").option("decode", "shareGroupState")
             .load(internal_logdir).where("recordType = 'ShareUpdate'")
             .select(F.explode("valueDecoded.ShareUpdate.stateBatches").alias("b"))
             .groupBy("b.deliveryState").count().collect())
    wanted = {}
    for r in manifest("__share_group_state-0")["records"]:
        if r["record_type_name"] == "ShareUpdate":
            for batch in r["value"]["stateBatches"]:
                wanted[batch["deliveryState"]] = wanted.get(batch["deliveryState"], 0) + 1
    assert {row.deliveryState: row["count"] for row in share} == wanted
    states = (spark.read.format("segmentlog").option("decode", "transactionState")
              .load(internal_logdir).where("NOT deleted")
              .groupBy("valueDecoded.TransactionLog.state").count().collect())
    wanted = {name.split(":")[1]: count
              for name, count in manifest("__transaction_state-0")["record_types"].items()
              if name != "TransactionLog:tombstone"}
    assert {row.state: row["count"] for row in states} == wanted


def test_transaction_state_streams_decoded(spark, internal_logdir, tmp_path):
    query = (spark.readStream.format("segmentlog").option("decode", "transactionState")
             .load(internal_logdir)
             .select("offset", "keyDecoded.TransactionLog.transactionalId",
                     "valueDecoded.TransactionLog.state", "deleted")
             .writeStream.format("memory").queryName("txn_states")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = spark.sql("SELECT * FROM txn_states ORDER BY offset").collect()
    records = manifest("__transaction_state-0")["records"]
    assert [(r.offset, r.transactionalId, r.deleted) for r in rows] == \
        [(r["offset"], r["key"]["transactionalId"], r["tombstone"]) for r in records]
    assert [r.state for r in rows if not r.deleted] == \
        [r["state"] for r in records if not r["tombstone"]]


def test_consumer_lag_as_a_dataframe(spark, internal_logdir):
    lag = segmentlog_datasource.consumer_lag(spark, internal_logdir, group="stream-etl")
    assert lag.columns == ["group", "groupType", "topic", "partition", "committedOffset", "leaderEpoch",
                           "metadata", "commitTimestamp", "logStartOffset", "logEndOffset",
                           "highWatermark", "lag"]
    committed = manifest("__consumer_offsets-0")["latest_committed"]["stream-etl"]
    assert {(r.topic, str(r.partition)): r.committedOffset for r in lag.collect()} == \
        {(topic, p): offset for topic, parts in committed.items() for p, offset in parts.items()}
    assert lag.where("lag IS NOT NULL").count() == 0  # the topics' partitions are not here
    assert {row.groupType for row in lag.collect()} == {"consumer"}


def test_share_groups_as_a_dataframe(spark, internal_logdir):
    from support.share_state import replayed_from_manifest

    progress = segmentlog_datasource.share_groups(spark, internal_logdir)
    assert progress.columns[:8] == ["group", "topicId", "topic", "partition", "startOffset",
                                    "deliveryCompleteCount", "inFlightRecords",
                                    "maxDeliveryCount"]
    rows = progress.collect()
    expected = replayed_from_manifest()
    assert {(r.group, r.topicId, r.partition): (r.startOffset, r.leaderEpoch)
            for r in rows} == {key: (state["startOffset"], state["leaderEpoch"])
                               for key, state in expected.items()}
    batches = [b for r in rows for b in r.stateBatches]
    assert batches and {b.deliveryState for b in batches} <= {
        "AVAILABLE", "ACQUIRED", "ACKNOWLEDGED", "ARCHIVED"}
