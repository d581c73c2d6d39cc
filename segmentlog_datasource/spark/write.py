"""`df.write.format("segmentlog")`: a thin DataSourceArrowWriter over the `writer` engine.

The driver builds the writer once per write: it checks the columns and options (before
anything is written), takes the topic lock and creates the staging directory. Each
Spark task encodes the Arrow batches it receives into its own staging file; the driver's
`commit` assigns offsets and publishes, `abort` removes every trace. An s3:// path takes
the object-store protocol of writer/objectstore.py (appends only).
"""
from dataclasses import dataclass
from typing import Iterator, List, Optional

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..errors import InvalidOptionError
from ..writer.errors import InvalidInputError
from ..writer.heap import keep_freed_heap
from ..writer.input import InputLayout, check_column_names
from ..storage import STORE_OPTIONS, parse_store_config
from ..writer.objectstore import STORE_OPTION_NAMES, open_write_job
from ..writer.options import WriteOptions, check_option_names
from ..writer.task import TaskResult
from .compat import to_arrow_type
from .errors import short_errors
from .worker import settle_worker


@dataclass
class SegmentLogCommitMessage(WriterCommitMessage):
    result: TaskResult


# pyspark's error for a Spark type that has no Arrow type (a variant, a user-defined type)
NO_ARROW_TYPE = "UNSUPPORTED_DATA_TYPE_FOR_ARROW_CONVERSION"


def _arrow_schema(schema):
    """The Spark schema as the Arrow schema the tasks will receive."""
    import pyarrow as pa
    from pyspark.errors import PySparkTypeError

    check_column_names(schema.fieldNames())
    fields = []
    for field in schema.fields:
        try:
            arrow_type = to_arrow_type(field.dataType)
        except PySparkTypeError as error:
            if error.getCondition() != NO_ARROW_TYPE:
                raise
            raise InvalidInputError(
                f"column {field.name!r} has type {field.dataType.simpleString()}, which a "
                f"segmentlog write cannot take"
            ) from None
        fields.append(pa.field(field.name, arrow_type))
    return pa.schema(fields)


@dataclass
class WriteSettings:
    """What a batch or streaming write takes from its options and input schema."""

    path: str
    topic: Optional[str]
    options: WriteOptions
    layout: InputLayout
    lowered: dict  # every option, its name lowercased


def write_settings(options, schema, how_to_give_path: str, other_options=()) -> WriteSettings:
    """Check the options (all but `other_options`, which the caller takes) and the schema
    before anything is written."""
    options = {str(k): v for k, v in dict(options or {}).items()}
    other_lowered = {name.lower() for name in other_options}
    lowered = {k.lower(): v for k, v in options.items()}
    path = lowered.get("path")
    if not path:
        raise InvalidOptionError(f"no log dir given: use {how_to_give_path}", "path")
    topic = lowered.get("topic") or None
    check_option_names(options, other_options)
    write_options = WriteOptions.from_mapping(
        {k: v for k, v in options.items() if k.lower() not in other_lowered})
    try:
        layout = InputLayout.from_schema(_arrow_schema(schema), topic,
                                         write_options.framed_sides)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{exc} [input schema: {schema.simpleString()}]") from None
    return WriteSettings(path, topic, write_options, layout, lowered)


class SegmentLogSparkWriter(DataSourceArrowWriter):
    def __init__(self, options, schema, overwrite: bool):
        settings = write_settings(options, schema,
                                  "df.write.format('segmentlog').mode(...).save(path)",
                                  STORE_OPTIONS)
        store_options = {k: v for k, v in settings.lowered.items() if k in STORE_OPTION_NAMES}
        self.job = open_write_job(
            settings.path, mode="overwrite" if overwrite else "append", topic=settings.topic,
            options=settings.options, layout=settings.layout, under_jvm=True,
            store_config=parse_store_config(store_options) if store_options else None).start()

    @short_errors
    def write(self, iterator: Iterator) -> SegmentLogCommitMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        task_index = context.partitionId() if context is not None else 0
        attempt = context.attemptNumber() if context is not None else 0
        keep_freed_heap()  # this worker's next batches reuse the pages of its last ones
        settle_worker()  # the daemon's collection after each task skips the modules
        task = self.job.task_writer(task_index, attempt)
        try:
            for batch in iterator:
                task.write(batch)
            return SegmentLogCommitMessage(task.finish())
        except BaseException:
            task.discard()
            raise

    @short_errors
    def commit(self, messages: List[Optional[SegmentLogCommitMessage]]) -> None:
        self.job.commit([m.result for m in messages if m is not None])

    @short_errors
    def abort(self, messages: List[Optional[SegmentLogCommitMessage]]) -> None:
        self.job.abort()
