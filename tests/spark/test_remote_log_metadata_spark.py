"""`__remote_log_metadata` as a Spark table (decode=remoteLogMetadata) on one broker's log
dir of the tiered-cluster set, against the records Kafka decoded in its manifest."""
import json
import os

from pyspark.sql import functions as F
from pyspark.sql.types import ByteType, LongType

from support.fixtures import tiered_cluster_root

TOPIC = "__remote_log_metadata"
UPDATE = "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD"
SEGMENT = "REMOTE_LOG_SEGMENT_METADATA_RECORD"
DELETE = "REMOTE_PARTITION_DELETE_METADATA_RECORD"


def manifest_records():
    with open(os.path.join(tiered_cluster_root(), "manifest.json")) as handle:
        partitions = json.load(handle)["partitions"]
    return [dict(record, partition=partitions[name]["partition"])
            for name in sorted(partitions) if name.startswith(TOPIC)
            for record in partitions[name]["decoded_records"]]


def test_remote_log_metadata_as_a_table(spark):
    df = spark.read.format("segmentlog").option("decode", "remoteLogMetadata") \
        .load(os.path.join(tiered_cluster_root(), "broker-1"))
    assert df.columns[-6:] == ["recordType", "keyVersion", "valueVersion", "keyDecoded",
                               "valueDecoded", "deleted"]
    fields = {f.name: f.dataType for f in
              df.schema["valueDecoded"].dataType[SEGMENT].dataType.fields}
    assert isinstance(fields["remoteLogSegmentState"], ByteType)
    assert isinstance(fields["startOffset"], LongType)
    expected = manifest_records()
    assert {row.topic for row in df.select("topic").distinct().collect()} == {TOPIC}
    counts = {row.recordType: row["count"] for row in df.groupBy("recordType").count().collect()}
    assert counts == {kind: sum(r["type"] == kind for r in expected)
                      for kind in {r["type"] for r in expected}}
    # a filter on a struct member: the segments whose copy finished, by segment id
    finished = (df.where(F.col(f"valueDecoded.{UPDATE}.remoteLogSegmentState") == 1)
                .select("partition", "offset",
                        f"valueDecoded.{UPDATE}.remoteLogSegmentId.topicIdPartition.name",
                        F.col(f"valueDecoded.{UPDATE}.remoteLogSegmentId.id").alias("segment"),
                        f"valueDecoded.{UPDATE}.brokerId").collect())
    assert sorted(tuple(row) for row in finished) == sorted(
        (r["partition"], r["offset"],
         r["record"]["remoteLogSegmentId"]["topicIdPartition"]["name"],
         r["record"]["remoteLogSegmentId"]["id"], r["record"]["brokerId"])
        for r in expected if r["type"] == UPDATE and r["record"]["remoteLogSegmentState"] == 1)
    epochs = (df.where(f"recordType = '{SEGMENT}'")
              .select("partition", "offset", f"valueDecoded.{SEGMENT}.startOffset",
                      f"valueDecoded.{SEGMENT}.endOffset",
                      F.explode(f"valueDecoded.{SEGMENT}.segmentLeaderEpochs").alias("e"))
              .select("partition", "offset", "startOffset", "endOffset", "e.leaderEpoch",
                      "e.offset").collect())
    assert sorted(tuple(row) for row in epochs) == sorted(
        (r["partition"], r["offset"], r["record"]["startOffset"], r["record"]["endOffset"],
         epoch["leaderEpoch"], epoch["offset"])
        for r in expected if r["type"] == SEGMENT
        for epoch in r["record"]["segmentLeaderEpochs"])
    deletes = (df.where(f"recordType = '{DELETE}'")
               .select(f"valueDecoded.{DELETE}.topicIdPartition.name",
                       f"valueDecoded.{DELETE}.remotePartitionDeleteState",
                       f"valueDecoded.{SEGMENT}").orderBy("partition", "offset").collect())
    assert [(row.name, row.remotePartitionDeleteState) for row in deletes] == [
        (r["record"]["topicIdPartition"]["name"], r["record"]["remotePartitionDeleteState"])
        for r in expected if r["type"] == DELETE]
    assert all(row[SEGMENT] is None for row in deletes)  # another type's member is null
