"""segmentlog: Apache Kafka segment logs as a PySpark data source.

`spark.read.format("segmentlog")` works once the package is installed (Spark finds the
top-level `pyspark_segmentlog` module). `register(spark)` registers the source
explicitly, and turns filter pushdown on only where Spark gives exact answers with it.

The layers, each importing only those before it:
  errors   every error type
  format   Kafka's on-disk format, free of Spark: codec, indexes, partition-log view, scans
  read     read options, planning into fragments, lookups (free of Spark)
  writer   the write engine (free of Spark; the checkout's top-level writer/ directory)
  spark    the Spark data source: schema, reader, write adapter
PySpark is imported only by `spark`, so everything else runs without it installed.
"""
import os as _os
import sys as _sys

from .read.lookups import offset_range, offset_ranges, time_range


def _find_checkout_writer():
    """Run from a source checkout, import the top-level writer/ as this package's `writer`.

    setup.py installs writer/ as segmentlog_datasource.writer; a checkout (on sys.path
    first, as Spark workers put their working directory) keeps it beside this package.
    """
    import importlib.abc
    import importlib.util

    root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    writer_dir = _os.path.join(root, "writer")
    if _os.path.isdir(_os.path.join(__path__[0], "writer")) or \
            not _os.path.isfile(_os.path.join(writer_dir, "__init__.py")) or \
            not _os.path.isfile(_os.path.join(root, "setup.py")):
        return

    class CheckoutWriterFinder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            if fullname != __name__ + ".writer":
                return None
            return importlib.util.spec_from_file_location(
                fullname, _os.path.join(writer_dir, "__init__.py"),
                submodule_search_locations=[writer_dir])

    _sys.meta_path.append(CheckoutWriterFinder())


_find_checkout_writer()

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark, enable_filter_pushdown=None) -> bool:
    """Register the `segmentlog` format with `spark`; return whether pushdown is on.

    enable_filter_pushdown=None (the default) turns Python data source filter pushdown on
    only when this Spark does not leak a pushed-down read into later queries of the same
    DataFrame (Spark 4.3 does; see the README), and otherwise leaves the setting alone.
    True turns it on regardless, False turns it off.
    """
    from .spark.source import SegmentLogDataSource

    spark.dataSource.register(SegmentLogDataSource)
    if enable_filter_pushdown is False:
        spark.conf.set(PUSHDOWN_CONF, "false")
    else:
        from .spark.pushdown_check import pushed_reads_leak

        leaks = pushed_reads_leak(spark)
        if enable_filter_pushdown and leaks:
            import warnings

            warnings.warn(
                f"filter pushdown is on, and Spark {spark.version} reuses a pushed-down read "
                "in later queries of the same DataFrame, which then return too few rows: "
                "load() a new DataFrame for every filtered query (README, 'Filter pushdown')",
                RuntimeWarning, stacklevel=2)
        if enable_filter_pushdown or not leaks:
            spark.conf.set(PUSHDOWN_CONF, "true")
    return spark.conf.get(PUSHDOWN_CONF, "false").lower() == "true"


def __getattr__(name):
    if name == "SegmentLogDataSource":
        from .spark.source import SegmentLogDataSource

        return SegmentLogDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SegmentLogDataSource", "register", "PUSHDOWN_CONF", "offset_range",
           "offset_ranges", "time_range"]
