"""Keep a Spark Python worker's freed heap for the worker's next input batches.

A write task holds the Arrow batches Spark hands it until it has a chunk's worth
(task.CHUNK_BYTES), then lets them go together. glibc gives the freed top of the heap back
to the kernel as soon as it passes the trim threshold (by default twice the largest block
freed so far), so the next batches land on fresh pages that the kernel faults in and
zeroes again: about 14,000 faults and 45 ms of system time in each task of a million-row
write (BENCHMARKS.md). Raising the trim threshold keeps those pages for the next chunk.
Setting it turns off glibc's sliding mmap threshold, so the mmap threshold is fixed too,
at the largest that keeps batches of a few megabytes on the heap.

Only the Spark adapters call this, in the worker processes Spark starts for their tasks:
an engine write in a user's own process leaves that process's allocator as it is.
"""
import ctypes
import os

# mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Free heap kept at the top before any is given back: room for a task's chunk, its
# concatenation and its encoded buffers, several times over.
KEPT_FREE_BYTES = 128 << 20
# Blocks from this size up are mapped apart and unmapped when freed; 32 MiB is glibc's
# own ceiling for its sliding threshold on 64-bit platforms.
MAPPED_FROM_BYTES = 32 << 20

_applied = []


def keep_freed_heap() -> bool:
    """Raise this process's trim and mmap thresholds once; True if they are (now) raised.

    False where the C library is not glibc or refuses: the process then runs as before."""
    if _applied:
        return _applied[0]
    _applied.append(_set_thresholds())
    return _applied[0]


def _set_thresholds() -> bool:
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (ValueError, OSError, AttributeError):  # no such confstr name: not glibc
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 on an invalid value.
    return (mallopt(M_MMAP_THRESHOLD, MAPPED_FROM_BYTES) == 1
            and mallopt(M_TRIM_THRESHOLD, KEPT_FREE_BYTES) == 1)
