"""The reference sources of bench_spark_read.py and bench_stream.py, in a module of their own that imports
only what they need: Spark's Python workers import it to read them, and whatever a worker
imports is walked by the full garbage collection Spark's daemon runs after each task."""
import os

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource, DataSourceReader, DataSourceStreamReader, InputPartition)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow


def workers_import_from_here():
    """Put this directory on the PYTHONPATH that Spark's Python workers (started later, by
    the session) inherit, after the entries already there: the sources here are pickled
    by reference."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if here not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(paths + [here])


class OneRowSource(DataSource):
    """One split, one prebuilt row with the Kafka schema (Arrow IPC bytes in an option):
    what any query through a Python data source costs at least."""

    @classmethod
    def name(cls):
        return "one_row"

    def schema(self):
        from segmentlog_datasource.spark.source import spark_schema

        return spark_schema(False)

    def reader(self, schema):
        return OneRowReader(self.options["batch"])


class OneRowReader(DataSourceReader):
    def __init__(self, encoded):
        self.encoded = encoded

    def read(self, partition):
        import base64

        yield from pa.ipc.open_stream(base64.b64decode(self.encoded))


def encode_batch(batch: pa.RecordBatch) -> str:
    import base64

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode()


class PrebuiltArrowSource(DataSource):
    """Arrow IPC files, one per Spark partition of the segmentlog batch read, yielded as
    they are, no decoding at all: batch and streaming (one micro-batch of every file)."""

    @classmethod
    def name(cls):
        return "prebuilt_arrow"

    def schema(self):
        from segmentlog_datasource.spark.source import spark_schema

        return spark_schema(False)

    def reader(self, schema):
        return PrebuiltArrowReader(self.options["path"])

    def streamReader(self, schema):
        return PrebuiltArrowStreamReader(self.options["path"])


def arrow_files(directory):
    return [os.path.join(directory, name) for name in sorted(os.listdir(directory))]


def read_arrow_file(path):
    with pa.memory_map(path) as source:
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)


class PrebuiltArrowReader(DataSourceReader):
    def __init__(self, directory):
        self.directory = directory

    def partitions(self):
        return [InputPartition(path) for path in arrow_files(self.directory)]

    def read(self, partition):
        yield from read_arrow_file(partition.value)


class CheckedCopyArrowSource(PrebuiltArrowSource):
    """The prebuilt-Arrow ceiling plus the per-byte work no reader of Kafka's log avoids:
    each batch's key and value bytes checked with CRC32C (Kafka's consumer checks every
    batch by default), and every buffer copied into memory of the reader's own, as a
    decoder fills its columns. No parsing. The check and the copy run as two plain passes
    (segmentlog's decoder does both in one), so this is an upper estimate of that floor."""

    @classmethod
    def name(cls):
        return "prebuilt_arrow_checked"

    def reader(self, schema):
        return CheckedCopyArrowReader(self.options["path"])


def checked_copy(batch):
    """`batch` rebuilt from copies of its buffers, after a CRC32C over its key and value
    bytes (the checksum is dropped: reading the bytes is the point)."""
    from segmentlog_datasource.format.crc import crc32c

    columns = []
    for name, column in zip(batch.schema.names, batch.columns):
        buffers = column.buffers()
        if name in ("key", "value"):
            crc32c(buffers[2])
        copies = [None if b is None else pa.py_buffer(bytearray(b)) for b in buffers]
        columns.append(pa.Array.from_buffers(column.type, len(column), copies,
                                             column.null_count, column.offset))
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


class CheckedCopyArrowReader(PrebuiltArrowReader):
    def read(self, partition):
        for batch in read_arrow_file(partition.value):
            yield checked_copy(batch)


class PrebuiltArrowStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, directory):
        self.directory = directory

    def initialOffset(self):
        return {"files": 0}

    def latestOffset(self, start=None, limit=None):
        return {"files": len(arrow_files(self.directory))}

    def prepareForTriggerAvailableNow(self):
        pass

    def partitions(self, start, end):
        return [InputPartition(path) for path in
                arrow_files(self.directory)[start["files"]:end["files"]]]

    def read(self, partition):
        yield from read_arrow_file(partition.value)

    def commit(self, end):
        pass
