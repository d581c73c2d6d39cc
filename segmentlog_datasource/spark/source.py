"""The Spark data source: schema, and the entry points of batch and streaming reads and writes."""
from pyspark.sql.datasource import DataSource
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from ..format.arrow import arrow_schema
from .errors import short_errors


def spark_schema(include_headers: bool) -> StructType:
    """The schema of Spark's Kafka source, column for column: the Arrow schema reads yield."""
    return from_arrow_schema(arrow_schema(include_headers))


class SegmentLogDataSource(DataSource):
    """`format("segmentlog")`: Kafka segment-log directories, read and written directly."""

    @classmethod
    def name(cls) -> str:
        return "segmentlog"

    @short_errors
    def schema(self):
        from ..read.options import parse_bool

        return spark_schema(parse_bool(self.options, "includeHeaders", False))

    @short_errors
    def reader(self, schema):
        from .reader import make_reader

        return make_reader(self.options, schema)

    @short_errors
    def writer(self, schema, overwrite: bool):
        from .write import SegmentLogSparkWriter

        return SegmentLogSparkWriter(self.options, schema, overwrite)

    @short_errors
    def streamReader(self, schema):
        from .stream_read import SegmentLogStreamReader

        return SegmentLogStreamReader(self.options, schema)

    @short_errors
    def streamWriter(self, schema, overwrite: bool):
        from .stream_write import SegmentLogStreamWriter

        return SegmentLogStreamWriter(self.options, schema, overwrite)
