"""segmentlog's errors as Spark shows them: the project's message on one line, with the
remedy, under the shortest traceback Spark will print.

Spark puts a Python error's whole traceback under its own header, so the cause sits far
below frames of the reader's internals. The entry points Spark calls are wrapped: a
segmentlog error leaves them with no frames of its own, which leaves one frame (the
wrapper's) and the message. SEGMENTLOG_FULL_TRACEBACK=1 in the environment of the
driver or executors (spark.executorEnv.*) keeps the whole traceback, for bug reports.
"""
import functools
import inspect
import os

from ..errors import CorruptLogError, SegmentLogError

FULL_TRACEBACK_VARIABLE = "SEGMENTLOG_FULL_TRACEBACK"


def _shown(error: SegmentLogError) -> SegmentLogError:
    remedy = error.remedy if isinstance(error, CorruptLogError) else None
    if remedy and len(error.args) == 1 and not getattr(error, "_remedy_added", False):
        error.args = (f"{error.args[0]}. What to do: {remedy}",)
        error._remedy_added = True
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
