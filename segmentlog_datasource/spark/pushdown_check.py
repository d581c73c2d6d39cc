"""Does this Spark leak a pushed-down read into later queries of the same DataFrame?

Spark 4.3 keeps one planned read (the pickled reader and its partitions) per loaded
relation. Filter pushdown replaces it, and a later query on the same DataFrame that
pushes no filter reuses the pushed-down plan, so it returns only the earlier filter's
rows. `pushed_reads_leak(spark)` answers by running that sequence on a two-row probe
source: three tiny queries, about half a second, once per Spark version and process.
"""
from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo

from ..spark_conf import PUSHDOWN_CONF

PROBE_FORMAT = "segmentlog_pushdown_probe"

_answers = {}


class PushdownProbeSource(DataSource):
    """Rows x = 0 and x = 1; `x = v` is pushed down and applied by the reader."""

    @classmethod
    def name(cls):
        return PROBE_FORMAT

    def schema(self):
        return "x int"

    def reader(self, schema):
        return _ProbeReader()


class _ProbeReader(DataSourceReader):
    def __init__(self):
        self.wanted = None

    def pushFilters(self, filters):
        for f in filters:
            if isinstance(f, EqualTo) and f.attribute == ("x",) and isinstance(f.value, int):
                self.wanted = f.value
            else:
                yield f

    def read(self, partition):
        for x in (0, 1):
            if self.wanted is None or x == self.wanted:
                yield (x,)


def probe_pushed_read_leak(spark) -> bool:
    """Run the probe now: True when an unfiltered query reuses a pushed-down read."""
    spark.dataSource.register(PushdownProbeSource)
    previous = spark.conf.get(PUSHDOWN_CONF, "false")
    spark.conf.set(PUSHDOWN_CONF, "true")
    try:
        df = spark.read.format(PROBE_FORMAT).load()
        df.count()
        df.where("x = 1").collect()
        return len(df.collect()) != 2
    finally:
        spark.conf.set(PUSHDOWN_CONF, previous)


def pushed_reads_leak(spark) -> bool:
    """probe_pushed_read_leak, remembered per Spark version for this process."""
    version = spark.version
    if version not in _answers:
        _answers[version] = probe_pushed_read_leak(spark)
    return _answers[version]
