"""The reference sources of bench_spark_read.py, in a module of their own that imports
only what they need: Spark's Python workers import it to read them, and whatever a worker
imports is walked by the full garbage collection Spark's daemon runs after each task."""
import os

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition


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
    """Yields Arrow batches stored in IPC files: no decoding at all."""

    @classmethod
    def name(cls):
        return "prebuilt_arrow"

    def schema(self):
        from segmentlog_datasource.spark.source import spark_schema

        return spark_schema(False)

    def reader(self, schema):
        return PrebuiltArrowReader(self.options["path"])


class PrebuiltArrowReader(DataSourceReader):
    def __init__(self, directory):
        self.directory = directory

    def partitions(self):
        return [InputPartition(os.path.join(self.directory, name))
                for name in sorted(os.listdir(self.directory))]

    def read(self, partition):
        with pa.memory_map(partition.value) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)
