"""A streaming query over a log that the writer engine keeps appending to.

The engine writes a first batch of events; a `readStream.format("segmentlog")` query with
a processing-time trigger picks up each append the engine makes while it runs (at most
`maxOffsetsPerTrigger` offsets per micro-batch), and is stopped. Restarted from its
checkpoint with `trigger(availableNow=True)`, the query reads only what was appended
while it was down, and stops by itself.

    python examples/stream_growing_log.py
"""
import os
import shutil
import tempfile

import pyarrow as pa

from example_session import ExampleSession

START_MS = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC


def events(first, count):
    return pa.table({
        "key": [f"device-{i % 10}" for i in range(first, first + count)],
        "value": [f"event {i}" for i in range(first, first + count)],
        "timestamp": pa.array([START_MS + i * 1_000 for i in range(first, first + count)],
                              pa.timestamp("ms", tz="UTC")),
    })


def main(spark=None):
    """Runs on `spark` when given (and leaves it running), else on a local session."""
    from pyspark.sql import functions as F

    from segmentlog_datasource.writer import SegmentLogWriter, write_log

    workdir = tempfile.mkdtemp(prefix="segmentlog-stream-")
    logdir, checkpoint = os.path.join(workdir, "logs"), os.path.join(workdir, "checkpoint")
    write_log(logdir, events(0, 1_000), topic="events", num_partitions=2)
    written = 1_000

    session = ExampleSession(spark, "segmentlog-stream-example",
                             {"spark.sql.shuffle.partitions": "2"})
    spark = session.spark
    seen = []

    def record_batch(batch, batch_id):
        """Runs on the driver for every micro-batch: what it held, per partition."""
        rows = (batch.groupBy("partition")
                .agg(F.count("*").alias("records"), F.min("offset").alias("first"),
                     F.max("offset").alias("last")).orderBy("partition").collect())
        total = sum(row.records for row in rows)
        seen.append(total)
        ranges = ", ".join(f"p{row.partition} [{row.first}..{row.last}]" for row in rows)
        print(f"  micro-batch {batch_id}: {total} records ({ranges})")

    def start(trigger):
        return (spark.readStream.format("segmentlog")
                .option("subscribe", "events")
                .option("maxOffsetsPerTrigger", 600)
                .load(logdir)
                .writeStream.foreachBatch(record_batch)
                .option("checkpointLocation", checkpoint)
                .trigger(**trigger).start())

    try:
        print("running query, processing-time trigger of 1 second:")
        query = start({"processingTime": "1 second"})
        query.processAllAvailable()
        for round_number in range(2):
            # A writer engine appends while the query runs; each commit is one whole write.
            with SegmentLogWriter(logdir, "events") as writer:
                writer.write_table(events(written, 500))
            written += 500
            print(f"  (the engine appended 500 events; {written:,} in the log)")
            query.processAllAvailable()
        query.stop()
        print(f"stopped after {len(seen)} micro-batches and {sum(seen):,} records")
        assert sum(seen) == written, (seen, written)

        with SegmentLogWriter(logdir, "events") as writer:
            writer.write_table(events(written, 700))
        written += 700
        print("while the query was stopped the engine appended 700 events; "
              "restarted from the checkpoint with availableNow:")
        already = sum(seen)
        query = start({"availableNow": True})
        query.awaitTermination()
        print(f"the restarted query read {sum(seen) - already} records and stopped; "
              f"last end offsets {query.lastProgress['sources'][0]['endOffset']}")
        assert sum(seen) == written, (seen, written)
    finally:
        session.close()
        shutil.rmtree(workdir, ignore_errors=True)
    print("removed", os.path.basename(workdir))


if __name__ == "__main__":
    main()
