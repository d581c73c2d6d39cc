"""Reading a log as a Spark task would, without Spark: plan fragments, scan each."""
from segmentlog_datasource.format import ScanOptions
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments


def read_values(path, **options):
    """{(topic, partition): values in offset order} of a batch read with `options`."""
    found = {}
    for fragment in plan_fragments(parse_read_options({"path": path, **options}),
                                   Constraints()):
        for batch in fragment.scan(ScanOptions()):
            columns = [batch.column(name).to_pylist()
                       for name in ("topic", "partition", "offset", "value")]
            for topic, partition, offset, value in zip(*columns):
                found.setdefault((topic, partition), []).append((offset, value))
    return {key: [value for _, value in sorted(pairs)] for key, pairs in found.items()}


def decoded_rows(options):
    """The rows of a read with the decode layer's options (decode, valueFormat, ...) as
    Spark's reader gets them: DecodedRead plans and scans; every batch has the schema
    Spark is told."""
    import pyarrow as pa

    from segmentlog_datasource.decode import DecodedRead
    from segmentlog_datasource.decode.reads import read_schema
    from segmentlog_datasource.read.fragments import scan_options

    decoded = DecodedRead(options)
    read = decoded.read_options(parse_read_options(options))
    batches = list(decoded.scan(decoded.plan(read, Constraints()), scan_options(read)))
    schema = read_schema(options)
    for batch in batches:
        assert batch.schema == schema
    return pa.Table.from_batches(batches, schema).to_pylist()
