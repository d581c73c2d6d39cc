"""A Spark worker that runs segmentlog's tasks keeps its long-lived objects out of the
collections Spark's daemon runs after every task; other processes are left alone."""
import json
import os
import subprocess
import sys

from support.paths import CHECKOUT

# In a fresh interpreter (not a Spark worker): settle_worker leaves it alone;
# freeze_long_lived_objects takes the imported modules' objects out of the collector's
# walks, once, and a cycle made afterwards is still collected.
FREEZE = r"""
import gc, json, weakref
from segmentlog_datasource.spark.worker import (
    freeze_long_lived_objects, in_reused_worker, settle_worker)
out = {"in_worker": in_reused_worker(), "settled": settle_worker(),
       "frozen_before": gc.get_freeze_count(), "walked_before": len(gc.get_objects())}
out["frozen"] = freeze_long_lived_objects()
out["again"] = freeze_long_lived_objects()
out["frozen_after"] = gc.get_freeze_count()
out["walked_after"] = len(gc.get_objects())
class Node:
    pass
node = Node()
node.me = node
freed = []
ref = weakref.ref(node, lambda _: freed.append(True))
del node
gc.collect()
out["cycle_freed"] = freed == [True]
print(json.dumps(out))
"""


def test_freezing_takes_the_modules_out_of_the_collections_once():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(CHECKOUT), os.environ.get("PYTHONPATH")) if p))
    out = json.loads(subprocess.run(
        [sys.executable, "-c", FREEZE], env=env, capture_output=True, text=True, check=True,
        cwd=str(CHECKOUT.parent)).stdout)
    assert out["in_worker"] is False and out["settled"] is False, out
    assert out["frozen_before"] == 0, out
    # pyspark and pyarrow are imported through the spark package: tens of thousands.
    assert out["walked_before"] > 10_000 and out["frozen"] > 10_000, out
    assert out["again"] == out["frozen"] == out["frozen_after"], out
    assert out["walked_after"] < out["walked_before"] // 100, out
    assert out["cycle_freed"] is True, out


def test_a_reused_spark_worker_is_settled_and_the_driver_is_not(spark):
    from segmentlog_datasource.spark.worker import in_reused_worker

    def probe_worker(_):  # defined here: pickled by value, as the tests are no module there
        import gc
        import json

        from segmentlog_datasource.spark.worker import in_reused_worker, settle_worker

        return [json.dumps({"in_worker": in_reused_worker(), "settled": settle_worker(),
                            "frozen": gc.get_freeze_count()})]

    found = [json.loads(line) for line in
             spark.sparkContext.parallelize(range(2), 2).mapPartitions(probe_worker).collect()]
    assert found and all(f["in_worker"] and f["settled"] and f["frozen"] > 10_000
                         for f in found), found
    assert in_reused_worker() is False
