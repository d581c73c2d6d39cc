"""A Spark Python worker that runs segmentlog's tasks keeps its long-lived objects out of
the garbage collector's walks.

Spark's daemon reuses a worker for task after task and runs a full garbage collection
after each one (`pyspark/daemon.py`). A full collection walks every object the worker
holds: some 70,000 once pyspark, pyarrow and segmentlog are imported, 40-50 ms a task in
a scan's worker, about a sixth of a scan's CPU (BENCHMARKS.md). Those objects (modules,
classes, functions) live as long as the worker, so segmentlog's first task in a worker
collects once more and moves what is left out of the collector's reach (`gc.freeze`), and
its second does so again: the first task's run imports some 26,000 objects more (Spark's
Arrow serializers import pandas when first used). Objects made afterwards are collected
as before, and objects are still freed when their last reference goes; only reference
cycles among the frozen ones (the modules', those two tasks' own) would stay.

Only the Spark adapters call this, and it acts only in a worker Spark's daemon reuses: a
user's own process (the driver, a test, the engine alone) is left as it is.
"""
import gc
import os
import sys

# Freezes made in this process: the first two of segmentlog's tasks freeze.
_freezes = []
FREEZES = 2


def in_reused_worker() -> bool:
    """True in a Python worker forked by Spark's daemon with worker reuse on."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == "pyspark.daemon" and \
        os.environ.get("SPARK_REUSE_WORKER", "") not in ("", "0")


def freeze_long_lived_objects() -> int:
    """The first FREEZES calls in a process: collect, then freeze every object left.
    Returns the number of objects frozen so far (later calls freeze nothing)."""
    if len(_freezes) < FREEZES:
        gc.collect()
        gc.freeze()
        _freezes.append(gc.get_freeze_count())
    return _freezes[-1]


def settle_worker() -> bool:
    """In a reused Spark worker, freeze its long-lived objects (at its first two segmentlog
    tasks); True there. Anywhere else, nothing (False)."""
    if not in_reused_worker():
        return False
    freeze_long_lived_objects()
    return True
