"""Streaming queries into the segmentlog sink whose driver is killed (SIGKILL, JVM and
Python alike) in the middle of committing one micro-batch. Run as a script:

    python stream_sink_job.py <batch> <meeting dir> <step>=<input dir>,<checkpoint>,<log dir> ...

One query per step, all in one driver. step "after_publish": its commit stops once the
batch is in the log, before the sink records it; step "after_sink_commit": once the sink
recorded it, before Spark's commit log. When every query has stopped at its step, the
driver is killed: one driver (one JVM) for every step. The tests restart each query from
its checkpoint and check every record is there once.
"""
import os
import signal
import sys
import time

from pyspark.sql import SparkSession

from segmentlog_datasource.spark.source import SegmentLogDataSource
from segmentlog_datasource.spark.stream_write import SegmentLogStreamWriter
from segmentlog_datasource.writer.lockfiles import owner_info

INPUT_SCHEMA = "key string, value string"
MEETING_SECONDS = 300  # a query that never reaches its step fails its test, not the run


def kill_driver():
    try:
        os.kill(owner_info(under_jvm=True)["pid"], signal.SIGKILL)  # the driver JVM
    except ProcessLookupError:  # another query's commit killed it first
        pass
    os.kill(os.getpid(), signal.SIGKILL)


def stop_here(meeting: str, step: str, steps: list):
    """Called inside a commit at `step` (in the sink's Python process): once every step's
    commit has stopped at its point, the driver is killed."""
    open(os.path.join(meeting, step), "w").close()
    deadline = time.monotonic() + MEETING_SECONDS
    while time.monotonic() < deadline and not all(
            os.path.exists(os.path.join(meeting, other)) for other in steps):
        time.sleep(0.05)
    kill_driver()


def killing_source(kill_batch: int, step: str, meeting: str, steps: list):
    def stop(*_):
        stop_here(meeting, step, steps)

    class KilledInCommit(SegmentLogStreamWriter):
        def commit(self, messages, batchId):
            staged = [m.staged if m is not None else None for m in messages]
            if batchId != kill_batch:
                self.sink.commit(batchId, staged)
            elif step == "after_publish":
                self.sink.commit(batchId, staged, after_publish=stop)
            else:
                self.sink.commit(batchId, staged)
                stop()

    class KillingSource(SegmentLogDataSource):
        @classmethod
        def name(cls):
            return f"segmentlog_killed_{step}"

        def streamWriter(self, schema, overwrite):
            return KilledInCommit(self.options, schema, overwrite)

    return KillingSource


def start_query(spark, fmt, input_dir, checkpoint, logdir):
    frame = spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).json(input_dir)
    return (frame.writeStream.format(fmt).option("checkpointLocation", checkpoint)
            .option("topic", "orders").option("numPartitions", 3).start(logdir))


def main(kill_batch, meeting, *queries):
    spark = (SparkSession.builder.master("local[2]").appName("segmentlog-killed-sink")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "768m").getOrCreate())
    steps = [query.split("=", 1)[0] for query in queries]
    for query in queries:
        step, paths = query.split("=", 1)
        input_dir, checkpoint, logdir = paths.split(",")
        spark.dataSource.register(killing_source(int(kill_batch), step, meeting, steps))
        start_query(spark, f"segmentlog_killed_{step}", input_dir, checkpoint, logdir)
    spark.streams.awaitAnyTermination()  # never returns normally: the driver is killed


if __name__ == "__main__":
    main(*sys.argv[1:])
