"""The Spark data source: schema, and the entry points of batch and streaming reads and writes."""
from pyspark.sql.datasource import DataSource
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from ..errors import InvalidOptionError, SegmentLogError
from ..format.arrow import arrow_schema
from .errors import short_errors
from .tables import (
    STREAM_WRITE, check_table_options, check_write_options, is_table_creation, read_options,
    read_side, table_read_options, with_table_options,
)


def spark_schema(include_headers: bool, include_metadata: bool = False,
                 include_control_records: bool = False) -> StructType:
    """The schema of Spark's Kafka source, column for column, then the columns the options
    add: the Arrow schema reads yield."""
    return from_arrow_schema(arrow_schema(include_headers, include_metadata,
                                          include_control_records))


def options_schema(options) -> StructType:
    """The schema of a read with these options: Spark's Kafka source's columns, then those
    the options add (includeHeaders, includeMetadata, includeControlRecords, decode)."""
    from ..decode.reads import read_schema

    return from_arrow_schema(read_schema(options))


def _columns(schema: StructType):
    return [(field.name, field.dataType) for field in schema.fields]


def check_user_schema(options, given) -> None:
    """Refuse a schema given with .schema(...) unless it has the source's own columns and
    types, in order (nullability aside, which a DDL string cannot state): the rows are
    Kafka's records, and Spark would fail only when a task returns them. Spark builds no
    Python source at a load() with a schema; reader() is the first call that sees it, on
    the driver, when the first query is planned."""
    if given is None:
        return
    own = options_schema(options)
    if isinstance(given, StructType) and _columns(given) == _columns(own):
        return
    shown = given.simpleString() if isinstance(given, StructType) else repr(given)
    raise InvalidOptionError(
        f"format('segmentlog') takes no schema of its own: .schema({shown}) was given, and "
        f"the rows are always {own.simpleString()} (headers only with includeHeaders=true, "
        f"the metadata columns with includeMetadata=true, the control record columns with "
        f"includeControlRecords=true, the decoded ones with decode). "
        f"Leave out .schema(...), and select or cast columns after load()", "schema")


class SegmentLogDataSource(DataSource):
    """`format("segmentlog")`: Kafka segment-log directories, read and written directly."""

    @classmethod
    def name(cls) -> str:
        return "segmentlog"

    @short_errors
    def schema(self):
        if not is_table_creation(self.options):
            return options_schema(read_side(self.options))
        # CREATE TABLE: the only call that sees the table's options (see tables.py)
        options = table_read_options(self.options)
        check_table_options(options)
        return with_table_options(options_schema(options), options)

    @short_errors
    def reader(self, schema):
        from .reader import make_reader

        options = read_options(self.options, schema)
        check_user_schema(options, schema)
        return make_reader(options, schema)

    @short_errors
    def writer(self, schema, overwrite: bool):
        from .write import SegmentLogSparkWriter

        check_write_options(self.options, schema)
        return SegmentLogSparkWriter(self.options, schema, overwrite)

    @short_errors
    def streamReader(self, schema):
        from .compat import has_stream_admission_control
        from .stream_read import CappedStreamReader, RefusedStreamReader

        try:
            options = read_options(self.options, schema)
            check_user_schema(options, schema)
            if has_stream_admission_control():  # Spark 4.2+
                from .stream_limits import AdmissionControlStreamReader

                return AdmissionControlStreamReader(options, schema)
            return CappedStreamReader(options, schema)
        except SegmentLogError as error:
            return RefusedStreamReader(error)  # raises it at Spark's first call (see there)

    @short_errors
    def streamWriter(self, schema, overwrite: bool):
        from .stream_write import SegmentLogStreamWriter

        check_write_options(self.options, schema, STREAM_WRITE)
        return SegmentLogStreamWriter(self.options, schema, overwrite)


def register_source(spark) -> None:
    """Register SegmentLogDataSource with `spark`. Spark 4.0 refuses a name it has already
    discovered (DATA_SOURCE_ALREADY_EXISTS), and the source it discovered under this name
    is this one (`pyspark_segmentlog`): that refusal leaves it registered."""
    from pyspark.errors import AnalysisException

    from .compat import is_already_registered

    try:
        spark.dataSource.register(SegmentLogDataSource)
    except AnalysisException as error:
        if not is_already_registered(error):
            raise
