"""`df.writeStream.format("segmentlog")`: a thin DataSourceStreamArrowWriter over the
streaming sink engine (`writer/stream.py`), with the batch writer's columns and options.
Spark 4.0 has no DataSourceStreamArrowWriter; its write worker hands Arrow batches to a
stream writer that is a DataSourceArrowWriter, so there the sink is a stream writer and an
Arrow writer (spark/compat.py).

Spark builds this writer on the driver when it plans a micro-batch and pickles it to the
tasks; each micro-batch's commit or abort runs in a Python worker with a writer of its
own, and nothing is ever closed. So the writer holds no lock and no open file: each
commit takes and releases the locks it needs. Every output mode appends, as Spark's Kafka
sink does (complete mode appends the whole result each time).
"""
from dataclasses import dataclass
from typing import Iterator, List, Optional

from pyspark.sql import datasource
from pyspark.sql.datasource import WriterCommitMessage

from ..writer.errors import WriteError
from ..writer.heap import keep_freed_heap
from ..writer.objectstore import refuse_stream_into_store
from ..writer.stream import StagedTask, StreamSink, read_query_id
from .write import write_settings
from .compat import has_stream_arrow_writer
from .errors import short_errors
from .worker import settle_worker

# Options the sink reads beside the write options.
STREAM_OPTIONS = {"checkpointLocation"}
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # set by Spark on every micro-batch's tasks


@dataclass
class SegmentLogStreamCommitMessage(WriterCommitMessage):
    staged: StagedTask


def _arrow_stream_writer():
    """The classes an Arrow stream writer derives from on this Spark."""
    if has_stream_arrow_writer():  # 4.1+
        return (datasource.DataSourceStreamArrowWriter,)
    return (datasource.DataSourceStreamWriter, datasource.DataSourceArrowWriter)


class SegmentLogStreamWriter(*_arrow_stream_writer()):
    @short_errors
    def __init__(self, options, schema, overwrite: bool):
        path = {str(k).lower(): v for k, v in dict(options or {}).items()}.get("path")
        if path:  # before the options are checked: the store.* ones are not sink options
            refuse_stream_into_store(path)
        settings = write_settings(
            options, schema,
            "df.writeStream.format('segmentlog').start(path) or .option('path', ...)",
            STREAM_OPTIONS)
        checkpoint = settings.lowered.get("checkpointlocation")
        self.sink = StreamSink(settings.path, read_query_id(checkpoint), topic=settings.topic,
                               options=settings.options, layout=settings.layout,
                               under_jvm=True, checkpoint_location=checkpoint)

    @short_errors
    def write(self, iterator: Iterator) -> SegmentLogStreamCommitMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
        if batch is None:
            raise WriteError(
                f"the task has no micro-batch id (Spark local property {BATCH_ID_PROPERTY!r}); "
                f"the segmentlog sink runs only in micro-batch streaming queries"
            )
        keep_freed_heap()  # this worker's next batches reuse the pages of its last ones
        settle_worker()  # the daemon's collection after each task skips the modules
        return SegmentLogStreamCommitMessage(self.sink.stage(
            int(batch), iterator, context.partitionId(), context.attemptNumber()))

    @short_errors
    def commit(self, messages: List[Optional[SegmentLogStreamCommitMessage]],
               batchId: int) -> None:
        self.sink.commit(batchId, [m.staged if m is not None else None for m in messages])

    @short_errors
    def abort(self, messages: List[Optional[SegmentLogStreamCommitMessage]],
              batchId: int) -> None:
        self.sink.abort(batchId)
