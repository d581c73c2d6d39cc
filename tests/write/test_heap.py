"""A Spark write task's worker keeps its freed heap for the next input batches."""
import os
import subprocess
import sys

import pytest

from support.paths import CHECKOUT

# In a fresh interpreter: rounds of eight 1 MiB blocks written and freed together, as a task
# holds Spark's batches until a chunk is full and lets them go at once; the page faults of
# each round, before and after keep_freed_heap().
ROUNDS = r"""
import ctypes, json, resource
from segmentlog_datasource.writer.heap import keep_freed_heap
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
def rounds():
    faults = []
    for _ in range(4):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        blocks = [libc.malloc(1 << 20) for _ in range(8)]
        for block in blocks:
            ctypes.memset(block, 1, 1 << 20)
        for block in blocks:
            libc.free(block)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return faults
before = rounds()
kept = keep_freed_heap()
print(json.dumps({"before": before, "kept": kept, "again": keep_freed_heap(), "after": rounds()}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or
                    not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"),
                    reason="the heap thresholds are glibc's; elsewhere the allocator is left as it is")
def test_freed_input_batches_are_reused_without_page_faults():
    import json

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(CHECKOUT), os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([sys.executable, "-c", ROUNDS], env=env, capture_output=True,
                         text=True, check=True, cwd=str(CHECKOUT.parent)).stdout
    figures = json.loads(out)
    assert figures["kept"] is True and figures["again"] is True
    # glibc's defaults hand the 8 MiB back each round: every page faults in again.
    assert min(figures["before"][1:]) > 1500, figures
    # Raised thresholds keep it: after the round that grows the heap, next to nothing.
    assert max(figures["after"][1:]) < 100, figures
