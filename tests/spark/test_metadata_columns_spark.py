"""includeMetadata and includeControlRecords through Spark: batch and streaming reads.

Expected values come from the kafka-written txn-0 manifest (Kafka's own batch objects):
transactional and plain batches, COMMIT and ABORT markers.
"""
import os

from support.manifest import iter_batches, load_manifest

COLUMNS = ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
           "timestamp:timestamp,timestampType:int,producerId:bigint,producerEpoch:int,"
           "sequence:int,leaderEpoch:int,isTransactional:boolean,compression:string,"
           "magic:int,batchOffset:bigint,segment:string,position:bigint,"
           "controlType:string,coordinatorEpoch:int>")
SELECTED = ["offset", "value", "producerId", "producerEpoch", "sequence", "leaderEpoch",
            "isTransactional", "compression", "magic", "batchOffset", "segment", "position",
            "controlType", "coordinatorEpoch"]


def expected_rows(manifest):
    """{offset: SELECTED values but the offset} of every record, control records included."""
    rows = {}
    for segment, batch in iter_batches(manifest):
        control = batch.get("control")
        for record in batch["records"]:
            sequence = -1
            if batch["base_sequence"] >= 0:
                sequence = batch["base_sequence"] + record["offset"] - batch["base_offset"]
                assert sequence < 2 ** 31  # no wrap in this fixture
            marker = control is not None
            rows[record["offset"]] = (
                None if marker else record["value"] is not None, batch["producer_id"],
                batch["producer_epoch"], sequence, batch["partition_leader_epoch"],
                batch["is_transactional"], batch["compression"], batch["magic"],
                batch["base_offset"], segment["log_file"], batch["position"],
                control["type"] if marker else None,
                control["coordinator_epoch"] if marker else None)
    return rows


def as_expected(rows):
    """Spark rows in expected_rows' shape (value: whether it is there, null for markers)."""
    got = {}
    for row in rows:
        values = list(row[1:])
        values[0] = None if row["controlType"] is not None and row["value"] is None else \
            row["value"] is not None
        got[row["offset"]] = tuple(values)
    return got


def test_batch_read_gives_metadata_and_control_rows(spark, kafka_logdir):
    path = os.path.join(kafka_logdir, "txn-0")
    df = (spark.read.format("segmentlog").option("includeMetadata", "true")
          .option("includeControlRecords", "true").load(path))
    assert df.schema.simpleString() == COLUMNS
    got = as_expected(df.select(*SELECTED).collect())
    assert got == expected_rows(load_manifest(kafka_logdir, "txn-0"))
    assert {row[-2] for row in got.values()} == {None, "COMMIT", "ABORT"}
    # Options off: the schema of today.
    plain = spark.read.format("segmentlog").load(path)
    assert "producerId" not in plain.columns and "controlType" not in plain.columns


def test_stream_read_gives_metadata_columns(spark, kafka_logdir, tmp_path):
    path = os.path.join(kafka_logdir, "txn-0")
    received = []

    def collect(frame, batch_id):
        received.append((frame.schema.simpleString(), frame.select(*SELECTED).collect()))

    query = (spark.readStream.format("segmentlog").option("includeMetadata", "true")
             .option("includeControlRecords", "true").load(path)
             .writeStream.foreachBatch(collect)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(300), "the AvailableNow query did not stop"
    assert query.exception() is None
    assert received and all(schema == COLUMNS for schema, _ in received)
    got = as_expected([row for _, rows in received for row in rows])
    expected = expected_rows(load_manifest(kafka_logdir, "txn-0"))
    assert got == {offset: row for offset, row in expected.items() if offset in got}
    assert min(got) == 0 and len(got) > 100  # the stream read up to the high watermark
