"""Segment files from staged batches: a segment's `.log` copied together from the tasks'
staging files, and its `.index` and `.timeindex` from its plan.

Batches are copied as they are (in the kernel where possible); only baseOffset and
partitionLeaderEpoch are patched in each batch header, which the CRC does not cover.
"""
import os
from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

from ..format.log import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file_name
from ..format.v2_encode import patch_batch_headers, placement_fields

from .errors import WriteError, raise_out_of_space
from .fsops import copy_range, read_at
from .segments import SegmentPlan
from .task import PartitionBatches

COPY_CHUNK = 16 << 20  # bytes copied (or read and patched) at once


@dataclass
class StagedBatches:
    """One partition's batches from all tasks, in task order, and where each one lies."""

    file_names: List[str]  # staging files (inside the staging dir), one per task
    file_ids: np.ndarray  # int64 index into file_names, per batch
    positions: np.ndarray  # int64 position in that file
    sizes: np.ndarray  # int64
    record_counts: np.ndarray  # int64
    max_timestamps: np.ndarray  # int64

    @classmethod
    def gather(cls, pieces: List[Tuple[str, PartitionBatches]]) -> "StagedBatches":
        """`pieces`: (staging file name, its batches of this partition) per task, in order."""
        if not pieces:
            empty = np.zeros(0, dtype=np.int64)
            return cls([], empty, empty, empty, empty, empty)
        return cls(
            [name for name, _ in pieces],
            np.concatenate([np.full(len(p.sizes), i, dtype=np.int64)
                            for i, (_, p) in enumerate(pieces)]),
            np.concatenate([p.positions for _, p in pieces]).astype(np.int64),
            np.concatenate([p.sizes for _, p in pieces]).astype(np.int64),
            np.concatenate([p.record_counts for _, p in pieces]).astype(np.int64),
            np.concatenate([p.max_timestamps for _, p in pieces]).astype(np.int64),
        )

    def base_offsets(self, start: int) -> np.ndarray:
        """Each batch's base offset when the first one gets `start`."""
        offsets = np.empty(len(self.sizes), dtype=np.int64)
        if len(self.sizes):
            offsets[0] = start
            np.cumsum(self.record_counts[:-1], out=offsets[1:])
            offsets[1:] += start
        return offsets


def write_segment(directory: str, plan: SegmentPlan, staging_dir: str, batches: StagedBatches,
                  offsets: np.ndarray, epoch: int) -> None:
    """Write the segment `plan` describes into `directory`: its indexes, and its .log from
    the batches `plan` covers, renumbered to `offsets` with leader epoch `epoch`."""
    base = plan.base_offset
    for suffix, content in ((INDEX_SUFFIX, plan.offset_index_bytes),
                            (TIME_INDEX_SUFFIX, plan.time_index_bytes)):
        path = os.path.join(directory, segment_file_name(base, suffix))
        try:
            with open(path, "wb") as out:
                out.write(content())
        except OSError as exc:
            raise_out_of_space(exc, path)
            raise
    file_ids, file_names = batches.file_ids, batches.file_names
    positions, sizes = batches.positions, batches.sizes
    handles: Dict[int, int] = {}
    log_path = os.path.join(directory, segment_file_name(base, LOG_SUFFIX))
    first, end = plan.first_batch, plan.end_batch
    try:
        with open(log_path, "wb") as out:
            for run_start, run_end in contiguous_runs(file_ids[first:end], positions[first:end],
                                                      sizes[first:end]):
                run_start += first
                run_end += first
                file_id = int(file_ids[run_start])
                fd = handles.get(file_id)
                if fd is None:
                    fd = os.open(os.path.join(staging_dir, file_names[file_id]), os.O_RDONLY)
                    handles[file_id] = fd
                run_bytes = int(positions[run_end - 1] + sizes[run_end - 1]
                                - positions[run_start])
                source = int(positions[run_start])
                relative = positions[run_start:run_end] - positions[run_start]
                run_offsets = offsets[run_start:run_end]
                written = out.tell()
                if not copy_range(fd, out.fileno(), source, written, run_bytes):
                    buffer = read_at(fd, run_bytes, source)
                    if len(buffer) != run_bytes:
                        raise WriteError(f"staging file {file_names[file_id]} is shorter "
                                         f"than its task reported")
                    patch_batch_headers(buffer, relative, run_offsets, epoch)
                    out.write(buffer)
                    continue
                out.seek(written + run_bytes)
                fields = placement_fields(run_offsets, sizes[run_start:run_end], epoch)
                raw, width = fields.tobytes(), fields.itemsize
                for i, at in enumerate((relative + written).tolist()):
                    os.pwrite(out.fileno(), raw[width * i : width * (i + 1)], at)
    except OSError as exc:
        raise_out_of_space(exc, log_path)
        raise
    finally:
        for fd in handles.values():
            os.close(fd)


def contiguous_runs(file_ids: np.ndarray, positions: np.ndarray, sizes: np.ndarray):
    """(start, end) index ranges of batches lying back to back in one staging file,
    each at most COPY_CHUNK bytes (or one batch)."""
    n = len(sizes)
    if n == 0:
        return []
    breaks = np.ones(n, dtype=bool)
    breaks[1:] = (file_ids[1:] != file_ids[:-1]) | (positions[1:] != positions[:-1] + sizes[:-1])
    runs = []
    starts = np.flatnonzero(breaks).tolist() + [n]
    for start, end in zip(starts[:-1], starts[1:]):
        # Split long runs into chunks of at most COPY_CHUNK bytes.
        ends = positions[start:end] + sizes[start:end] - positions[start]
        while start < end:
            cut = start + max(1, int(np.searchsorted(ends, COPY_CHUNK, side="right")))
            cut = min(cut, end)
            runs.append((start, cut))
            if cut < end:
                ends = ends[cut - start:] - (positions[cut] - positions[start])
            start = cut
    return runs
