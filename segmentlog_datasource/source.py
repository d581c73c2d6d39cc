"""The Spark data source: schema, batch reader and the write adapter's entry point."""
from pyspark.sql.datasource import DataSource
from pyspark.sql.types import (
    ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def spark_schema(include_headers: bool) -> StructType:
    """The schema of Spark's Kafka source, column for column."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class SegmentLogDataSource(DataSource):
    """`format("segmentlog")`: Kafka segment-log directories, read and written directly."""

    @classmethod
    def name(cls) -> str:
        return "segmentlog"

    def schema(self):
        from .options import parse_bool

        return spark_schema(parse_bool(self.options, "includeHeaders", False))

    def reader(self, schema):
        from .reader import make_reader

        return make_reader(self.options, schema)

    def writer(self, schema, overwrite: bool):
        from .sink import SegmentLogSparkWriter

        return SegmentLogSparkWriter(self.options, schema, overwrite)
