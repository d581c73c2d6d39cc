"""segmentlog: Apache Kafka segment logs as a PySpark data source.

`spark.read.format("segmentlog")` works once the package is installed (Spark finds the
top-level `pyspark_segmentlog` module). `register(spark)` registers the source
explicitly, and turns filter pushdown on only where Spark gives exact answers with it.

The layers, each importing only those before it:
  errors   every error type
  format   Kafka's on-disk format, free of Spark: codec, indexes, partition-log view, scans
  read     read options, planning into fragments, lookups, consumer lag (free of Spark)
  decode   typed columns decoded from records: Kafka's internal topics
  writer   the write engine (free of Spark; the checkout's top-level writer/ directory)
  spark    the Spark data source: schema, reader, write adapter
PySpark is imported only by `spark`, so everything else runs without it installed.
"""
import os as _os
import sys as _sys

from .read.lookups import offset_range, offset_ranges, time_range
from .spark_conf import PUSHDOWN_CONF


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

# Spark starts its Python processes (the data source lookup, planning, tasks) with
# PYSPARK_DRIVER_PYTHON, else PYSPARK_PYTHON, else `python3` from PATH, as the JVM's
# environment has them when it starts.
PYTHON_ENV_VARIABLES = ("PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON")


def _is_this_python(executable) -> bool:
    """Whether `executable` (a path) runs in this environment: it sits beside this Python."""
    return bool(executable) and _os.path.dirname(_os.path.abspath(executable)) == \
        _os.path.dirname(_sys.executable)


def _spark_jvm_started() -> bool:
    context = _sys.modules.get("pyspark.core.context") or _sys.modules.get("pyspark.context")
    spark_context = getattr(context, "SparkContext", None)
    return getattr(spark_context, "_gateway", None) is not None


def _run_spark_workers_here():
    """Imported before Spark starts, in a Python that is not the `python3` on PATH (a
    virtualenv used without activating it): have Spark's Python processes run this Python
    too, which has segmentlog, unless PYSPARK_PYTHON already says which one to run."""
    import shutil

    if any(_os.environ.get(name) for name in PYTHON_ENV_VARIABLES) or _spark_jvm_started():
        return
    if not _sys.executable or _is_this_python(shutil.which("python3")):
        return
    _os.environ["PYSPARK_PYTHON"] = _sys.executable


_run_spark_workers_here()

# Spark release series known to reuse a pushed-down read in later queries of the same
# DataFrame (docs/reading.md, "Filter pushdown"): register() leaves pushdown off there without
# probing, which runs Spark jobs (seconds on a session's first call). Other series are
# probed; tests/spark/test_reused_dataframe.py probes the running one, to notice a fix.
# Spark 4.0 has no filter pushdown at all (spark/compat.py).
PUSHED_READS_LEAK = {"4.1": True, "4.2": True, "4.3": True}


def _pushed_reads_leak(spark) -> bool:
    series = ".".join(str(spark.version).split(".")[:2])
    if series in PUSHED_READS_LEAK:
        return PUSHED_READS_LEAK[series]
    from .spark.pushdown_check import pushed_reads_leak

    return pushed_reads_leak(spark)


def spark_python(spark) -> str:
    """The Python executable Spark starts its Python processes with, as its JVM sees it."""
    jvm = getattr(spark, "_jvm", None)  # None in a Spark Connect session
    if jvm is None:
        return ""
    getenv = jvm.java.lang.System.getenv
    return next((getenv(name) for name in PYTHON_ENV_VARIABLES if getenv(name)), "python3")


def check_spark_python(spark) -> None:
    """Raise an error saying what to do when the Python that Spark starts for its Python
    processes cannot import segmentlog (`format("segmentlog")` is then not found)."""
    import shutil
    import subprocess

    python = spark_python(spark)
    if not python:
        return
    found = shutil.which(python)
    if _is_this_python(found):
        return
    probe = "import segmentlog_datasource, pyspark_segmentlog"
    try:
        result = subprocess.run([found or python, "-c", probe], capture_output=True,
                                text=True, timeout=120)
        problem = (result.stderr.strip().splitlines() or [""])[-1] if result.returncode else ""
    except OSError as exc:
        problem = str(exc)
    if not problem:
        return
    from .errors import SegmentLogError

    chosen = next((f"{name}={_os.environ.get(name) or python}" for name in PYTHON_ENV_VARIABLES
                   if _os.environ.get(name)), "PYSPARK_PYTHON unset, so `python3` from PATH")
    raise SegmentLogError(
        f"Spark runs its Python processes with {found or python!r} ({chosen}), which cannot "
        f"import segmentlog ({problem}), so format('segmentlog') is not found there. Set "
        f"PYSPARK_PYTHON={_sys.executable} before the Spark session starts (export it in the "
        f"shell, or os.environ['PYSPARK_PYTHON'] = sys.executable before getOrCreate()), or "
        f"activate the virtualenv so that `python3` is this Python")


def register(spark, enable_filter_pushdown=None) -> bool:
    """Register the `segmentlog` format with `spark`; return whether pushdown is on.

    enable_filter_pushdown=None (the default) turns Python data source filter pushdown on
    only when this Spark does not leak a pushed-down read into later queries of the same
    DataFrame (Spark 4.3 does; see docs/reading.md), and otherwise leaves the setting alone.
    True turns it on regardless, False turns it off. Spark 4.0 has no filter pushdown:
    there True is refused (SparkReleaseError) and the others leave it off.
    """
    from .spark.compat import FILTER_PUSHDOWN, refuse_unless, spark_has
    from .spark.source import register_source

    check_spark_python(spark)
    register_source(spark)
    if not spark_has(spark, FILTER_PUSHDOWN):
        if enable_filter_pushdown:
            refuse_unless(spark, FILTER_PUSHDOWN, "register(spark, enable_filter_pushdown=True)")
        return False
    if enable_filter_pushdown is False:
        spark.conf.set(PUSHDOWN_CONF, "false")
    else:
        leaks = _pushed_reads_leak(spark)
        if enable_filter_pushdown and leaks:
            import warnings

            warnings.warn(
                f"filter pushdown is on, and Spark {spark.version} reuses a pushed-down read "
                "in later queries of the same DataFrame, which then return too few rows: "
                "load() a new DataFrame for every filtered query (docs/reading.md, 'Filter pushdown')",
                RuntimeWarning, stacklevel=2)
        if enable_filter_pushdown or not leaks:
            spark.conf.set(PUSHDOWN_CONF, "true")
    return spark.conf.get(PUSHDOWN_CONF, "false").lower() == "true"


def consumer_lag(spark, paths, group=None, at=None, options=None):
    """Consumer groups' committed offsets and lag from the `__consumer_offsets` partitions
    under `paths` (a log dir, several brokers' log dirs, a store URI) and the partitions
    beside them, as a DataFrame: group, topic, partition, committedOffset, leaderEpoch,
    metadata, commitTimestamp, logStartOffset, logEndOffset, highWatermark, lag (the high
    watermark minus the committed offset). `group`: that group's alone; `at` (epoch
    milliseconds, an ISO 8601 time such as "2026-11-25T03:00:00Z" or with an offset, UTC
    without either, as the command line's --at; or a datetime, a naive one local time):
    the commits written by then and each partition's end then; `options`: read options
    (readUpTo, store.*)."""
    from .spark.lag import consumer_lag_dataframe

    return consumer_lag_dataframe(spark, paths, group, at, options)


def share_groups(spark, paths, group=None, options=None):
    """Share groups' progress (KIP-932) from the `__share_group_state` partitions under
    `paths` and the partitions beside them, as a DataFrame with a row per share-partition:
    group, topicId, topic, partition, startOffset, deliveryCompleteCount, inFlightRecords,
    maxDeliveryCount, stateBatches (each firstOffset, lastOffset, deliveryState by name,
    deliveryCount), stateEpoch, leaderEpoch, snapshotEpoch, createTimestamp,
    writeTimestamp, highWatermark and lag (as Kafka counts it: the high watermark minus the
    start offset minus the delivery complete count). `group`: that group's alone;
    `options`: read options (readUpTo, store.*)."""
    from .spark.share_groups import share_group_dataframe

    return share_group_dataframe(spark, paths, group, options)


def __getattr__(name):
    if name == "SegmentLogDataSource":
        from .spark.source import SegmentLogDataSource

        return SegmentLogDataSource
    if name == "cluster_state":  # the metadata records' tables load on first use
        from .read.cluster_metadata import cluster_state

        return cluster_state
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SegmentLogDataSource", "register", "check_spark_python", "PUSHDOWN_CONF", "offset_range",
           "offset_ranges", "time_range", "consumer_lag", "share_groups", "cluster_state"]
