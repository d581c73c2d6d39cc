"""segmentlog's errors as Spark shows them: the project's message on one line, with the
remedy, and no traceback of segmentlog's.

Spark puts a Python error's whole traceback under its own header, so the cause sits far
below frames of the reader's internals. The entry points Spark calls are wrapped: a
segmentlog error leaves them with no frames of its own, and, in the Spark Python process
that runs them, with Spark's own switch for hiding a Python traceback
(`SPARK_HIDE_TRACEBACK`, what `spark.sql.execution.pyspark.udf.hideTraceback.enabled`
sets) turned on, so Spark shows the error as its one line. That process reports the
error and exits (every Spark release's workers do, from 4.0 on), so no other error is
shown without its traceback. SEGMENTLOG_FULL_TRACEBACK=1 in the environment of the
driver or executors (spark.executorEnv.*) keeps the whole traceback, for bug reports.

The rest of what a failed task prints is Spark's: its log lines for the task (with the
JVM's stack frames) and the driver's exception. docs/reading.md ("When a query fails")
says how to quiet them.
"""
import functools
import inspect
import os

from ..errors import CorruptLogError, SegmentLogError

FULL_TRACEBACK_VARIABLE = "SEGMENTLOG_FULL_TRACEBACK"
# Spark's Python workers: the secret they connect back to the JVM with is in their
# environment alone (pyspark.util.local_connect_and_auth), never in the driver's.
SPARK_WORKER_VARIABLE = "PYTHON_WORKER_FACTORY_SECRET"
# pyspark.util.handle_worker_exception shows only the error's line when it is set.
SPARK_HIDE_TRACEBACK_VARIABLE = "SPARK_HIDE_TRACEBACK"


def _shown(error: SegmentLogError) -> SegmentLogError:
    remedy = error.remedy if isinstance(error, CorruptLogError) else None
    if remedy and len(error.args) == 1 and not getattr(error, "_remedy_added", False):
        error.args = (f"{error.args[0]}. What to do: {remedy}",)
        error._remedy_added = True
    if os.environ.get(SPARK_WORKER_VARIABLE):
        os.environ[SPARK_HIDE_TRACEBACK_VARIABLE] = "1"
    return error.with_traceback(None)


def short_errors(function):
    """Wrap a Spark entry point (a plain or generator function) as the module says."""
    if inspect.isgeneratorfunction(function):
        @functools.wraps(function)
        def generator(*args, **kwargs):
            try:
                yield from function(*args, **kwargs)
            except SegmentLogError as error:
                if os.environ.get(FULL_TRACEBACK_VARIABLE) == "1":
                    raise
                raise _shown(error) from None  # segmentlog's message is the last line
        return generator

    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except SegmentLogError as error:
            if os.environ.get(FULL_TRACEBACK_VARIABLE) == "1":
                raise
            raise _shown(error) from None  # segmentlog's message is the last line
    return call
