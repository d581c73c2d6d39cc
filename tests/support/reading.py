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
