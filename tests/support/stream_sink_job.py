"""A streaming query into the segmentlog sink whose driver is killed (SIGKILL, JVM and
Python alike) in the middle of committing one micro-batch. Run as a script:

    python stream_sink_job.py <input dir> <checkpoint> <log dir> <batch> <step>

step "after_publish": killed once the batch is in the log, before the sink records it;
step "after_sink_commit": killed once the sink recorded it, before Spark's commit log.
The test restarts the query from the checkpoint and checks every record is there once.
"""
import os
import signal
import sys

from pyspark.sql import SparkSession

from segmentlog_datasource.spark.source import SegmentLogDataSource
from segmentlog_datasource.spark.stream_write import SegmentLogStreamWriter
from segmentlog_datasource.writer.locks import owner_info

INPUT_SCHEMA = "key string, value string"


def kill_driver(*_):
    os.kill(owner_info(under_jvm=True)["pid"], signal.SIGKILL)  # the driver JVM
    os.kill(os.getpid(), signal.SIGKILL)


def killing_source(kill_batch: int, step: str):
    class KilledInCommit(SegmentLogStreamWriter):
        def commit(self, messages, batchId):
            staged = [m.staged if m is not None else None for m in messages]
            if batchId != kill_batch:
                self.sink.commit(batchId, staged)
            elif step == "after_publish":
                self.sink.commit(batchId, staged, after_publish=kill_driver)
            else:
                self.sink.commit(batchId, staged)
                kill_driver()

    class KillingSource(SegmentLogDataSource):
        @classmethod
        def name(cls):
            return "segmentlog_killed"

        def streamWriter(self, schema, overwrite):
            return KilledInCommit(self.options, schema, overwrite)

    return KillingSource


def start_query(spark, fmt, input_dir, checkpoint, logdir):
    frame = spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).json(input_dir)
    return (frame.writeStream.format(fmt).option("checkpointLocation", checkpoint)
            .option("topic", "orders").option("numPartitions", 3).start(logdir))


def main(input_dir, checkpoint, logdir, kill_batch, step):
    spark = (SparkSession.builder.master("local[2]").appName("segmentlog-killed-sink")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "768m").getOrCreate())
    spark.dataSource.register(killing_source(int(kill_batch), step))
    query = start_query(spark, "segmentlog_killed", input_dir, checkpoint, logdir)
    query.awaitTermination()  # never returns normally: the driver is killed


if __name__ == "__main__":
    main(*sys.argv[1:6])
