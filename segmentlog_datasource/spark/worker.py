"""A Spark Python worker that runs segmentlog's tasks keeps its long-lived objects out of
the garbage collector's walks.

Spark's daemon reuses a worker for task after task and runs a full garbage collection
after each one (`pyspark/daemon.py`). A full collection walks every object the worker
holds: some 45,000 once pyspark, pyarrow and segmentlog are imported, about 30 ms a task,
0.27-0.28 CPU-s of the task workers in a scan of nine tasks (BENCHMARKS.md). Those objects
(modules, classes, functions) live as long as the worker, so segmentlog's first task in a
worker collects once more and moves what is left out of the collector's reach
(`gc.freeze`). Objects made afterwards are collected as before (a few hundred stay in a
scan's worker), and objects are still freed when their last reference goes; only reference
cycles among the frozen ones (the modules', that first task's own) would stay.

Only the Spark adapters call this, and it acts only in a worker Spark's daemon reuses: a
user's own process (the driver, a test, the engine alone) is left as it is.
"""
import gc
import os
import sys

_frozen = []  # the number of objects frozen, once done in this process


def in_reused_worker() -> bool:
    """True in a Python worker forked by Spark's daemon with worker reuse on."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == "pyspark.daemon" and \
        os.environ.get("SPARK_REUSE_WORKER", "") not in ("", "0")


def freeze_long_lived_objects() -> int:
    """Once per process: collect, then freeze every object left. Returns the number of
    objects the first call froze (later calls freeze nothing)."""
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen.append(gc.get_freeze_count())
    return _frozen[0]


def settle_worker() -> bool:
    """In a reused Spark worker, freeze its long-lived objects (once); True there.
    Anywhere else, nothing (False)."""
    if not in_reused_worker():
        return False
    freeze_long_lived_objects()
    return True
