"""Segment files from staged batches: a segment's `.log` from the tasks' staging files,
and its `.index` and `.timeindex` from its plan.

A segment whose first batches are a per-partition staging file, whole, gets that file as
its `.log` by a rename; the rest of its batches are copied after them (so a task's large
file starts a segment of its own: own_segment_starts). Only baseOffset and
partitionLeaderEpoch are set in a batch header, which the CRC does not cover, and only
where the stamped ones differ. In a renamed file they are set through a writable mapping
where the file system overwrites in place; otherwise, and in copies, in memory a chunk
of batches at a time, written back with the chunk: a write per header costs ext4 a
journal handle each (a commit placing 3,108 batches spent 0.095 s in those pwrites).
"""
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..format.log import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file_name
from ..format.v2_encode import patch_batch_headers

from .errors import WriteError, raise_out_of_space
from .fsops import filesystem_type, preallocate, read_at
from .segments import SegmentPlan
from .task import PartitionBatches

# Bytes copied (or read and patched) at once, through one buffer a segment reuses: memory
# touched for the first time is what a copy pays most for where a VM's host takes back
# the pages a guest frees (45 MB through fresh 16 MiB buffers: 200-260 ms; through one
# 1 MiB buffer: 19-25 ms; BENCHMARKS.md).
COPY_CHUNK = 1 << 20
# Copy buffers kept for the process's next segments (their pages stay in place).
_SPARE_BUFFERS: List[bytearray] = []
# File systems (statfs f_type) that write a file's existing pages in place: ext4 (ext2,
# ext3), XFS, tmpfs. There a write through a mapping needs no new block, so a full disk
# cannot fail it; elsewhere (copy-on-write file systems) headers are set with pwrite.
OVERWRITE_IN_PLACE_FILESYSTEMS = frozenset({0xEF53, 0x58465342, 0x01021994})


@dataclass
class StagedBatches:
    """One partition's batches from all tasks, in task order, and where each one lies."""

    file_names: List[str]  # staging files (inside the staging dir), one per task
    file_ids: np.ndarray  # int64 index into file_names, per batch
    positions: np.ndarray  # int64 position in that file
    sizes: np.ndarray  # int64
    record_counts: np.ndarray  # int64
    max_timestamps: np.ndarray  # int64
    # per file: its first batch's index here and, for a per-partition file (the
    # partition's batches alone), the epoch and first base offset stamped; else None
    file_starts: Optional[np.ndarray] = None
    stamped_epochs: Optional[List[Optional[int]]] = None
    stamped_starts: Optional[List[int]] = None

    @classmethod
    def gather(cls, pieces: List[Tuple[Optional[str], PartitionBatches]]) -> "StagedBatches":
        """`pieces`: (the task's staging file name, its batches of this partition) per
        task, in order; a PartitionBatches with a file of its own names that file."""
        if not pieces:
            empty = np.zeros(0, dtype=np.int64)
            return cls([], empty, empty, empty, empty, empty, empty, [], [])
        counts = np.array([len(p.sizes) for _, p in pieces], dtype=np.int64)
        file_starts = np.zeros(len(pieces), dtype=np.int64)
        np.cumsum(counts[:-1], out=file_starts[1:])
        return cls(
            [p.file or name for name, p in pieces],
            np.concatenate([np.full(len(p.sizes), i, dtype=np.int64)
                            for i, (_, p) in enumerate(pieces)]),
            np.concatenate([p.positions for _, p in pieces]).astype(np.int64),
            np.concatenate([p.sizes for _, p in pieces]).astype(np.int64),
            np.concatenate([p.record_counts for _, p in pieces]).astype(np.int64),
            np.concatenate([p.max_timestamps for _, p in pieces]).astype(np.int64),
            file_starts,
            [p.stamped_epoch if p.file else None for _, p in pieces],
            [p.stamped_start for _, p in pieces],
        )

    def leading_file(self, first: int, end: int) -> Optional[int]:
        """The per-partition file whose batches are exactly the first ones of batches
        [first, end) and all of that file: a segment may take it whole as its .log."""
        if first >= end or self.file_starts is None or int(self.positions[first]) != 0:
            return None
        file_id = int(self.file_ids[first])
        if self.stamped_epochs[file_id] is None or int(self.file_starts[file_id]) != first:
            return None
        last = len(self.sizes) if file_id + 1 == len(self.file_names) \
            else int(self.file_starts[file_id + 1])
        return file_id if last <= end else None

    def own_segment_starts(self, min_bytes: int) -> np.ndarray:
        """The first batch of each task's per-partition file, after the first task's,
        holding at least `min_bytes`: a segment that starts there takes that file as its
        .log by a rename, where joining the segment before it would copy its bytes."""
        if self.file_starts is None or len(self.file_names) < 2:
            return np.zeros(0, dtype=np.int64)
        ends = np.append(self.file_starts[1:], len(self.sizes))
        bytes_before = np.concatenate(([0], np.cumsum(self.sizes)))
        starts = [int(first) for k, (first, end) in enumerate(zip(self.file_starts, ends))
                  if k > 0 and end > first and self.stamped_epochs[k] is not None
                  and bytes_before[end] - bytes_before[first] >= min_bytes]
        return np.asarray(starts, dtype=np.int64)

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
    leading = batches.leading_file(first, end)
    try:
        buffer = _SPARE_BUFFERS.pop()
    except IndexError:
        buffer = bytearray(COPY_CHUNK)
    out = None
    try:
        if leading is None:
            out = os.open(log_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            written = 0
        else:
            # the staged file is laid out as the segment's start: it becomes the .log
            os.rename(os.path.join(staging_dir, file_names[leading]), log_path)
            out = os.open(log_path, os.O_RDWR)
            taken = end if leading + 1 == len(file_names) \
                else min(end, int(batches.file_starts[leading + 1]))
            # stamped in the task: placed again only if they land elsewhere
            if (int(offsets[first]) != batches.stamped_starts[leading] or
                    batches.stamped_epochs[leading] != epoch) and \
                    not _restamp_mapped(out, batches, first, taken, offsets, epoch):
                for run_start, run_end in contiguous_runs(file_ids[first:taken],
                                                          positions[first:taken],
                                                          sizes[first:taken]):
                    _place_run(out, out, first + run_start, first + run_end, batches,
                               offsets, epoch, None, file_names[leading], buffer)
            written = int(positions[taken - 1] + sizes[taken - 1])
            first = taken
        preallocate(out, written, int(sizes[first:end].sum()))
        for run_start, run_end in contiguous_runs(file_ids[first:end], positions[first:end],
                                                  sizes[first:end]):
            run_start += first
            run_end += first
            file_id = int(file_ids[run_start])
            fd = handles.get(file_id)
            if fd is None:
                fd = os.open(os.path.join(staging_dir, file_names[file_id]), os.O_RDONLY)
                handles[file_id] = fd
            written += _place_run(fd, out, run_start, run_end, batches, offsets, epoch,
                                  written, file_names[file_id], buffer)
    except OSError as exc:
        raise_out_of_space(exc, log_path)
        raise
    finally:
        if out is not None:
            os.close(out)
        for fd in handles.values():
            os.close(fd)
        if len(_SPARE_BUFFERS) < 4:
            _SPARE_BUFFERS.append(buffer)


def _restamp_mapped(fd: int, batches: StagedBatches, first: int, end: int,
                    offsets: np.ndarray, epoch: int) -> bool:
    """Set the headers of batches [first, end), which are the file `fd` from its start,
    through a shared writable mapping of it: only the pages holding a header are touched,
    where reading the file and writing it back moves all of it (BENCHMARKS.md). False where
    that cannot be done: no compiled mapping, a file system that may need new blocks to
    overwrite a page, or a page the file did not take (the caller then writes them with
    pwrite, which reports the error)."""
    if filesystem_type(fd) not in OVERWRITE_IN_PLACE_FILESYSTEMS:
        return False
    from ..format.fastpath import file_mapping_class  # the compiled decoder's module

    mapping_class = file_mapping_class()
    positions = batches.positions[first:end]
    size = int(positions[-1] + batches.sizes[end - 1]) if end > first else 0
    if mapping_class is None or size == 0:
        return False
    try:
        mapping = mapping_class(fd, size, writable=True)
    except (OSError, TypeError):  # not mappable here; a build without writable mappings
        return False
    try:
        with memoryview(mapping) as view:
            patch_batch_headers(view, positions, offsets[first:end], epoch)
        return mapping.fault_position is None
    finally:
        mapping.close()


def _place_run(source: int, target: int, run_start: int, run_end: int,
               batches: StagedBatches, offsets: np.ndarray, epoch: int,
               at: Optional[int], file_name: str, buffer: bytearray) -> int:
    """Read batches [run_start, run_end) (back to back in `source`), set their base
    offsets and epoch, and write them to `target` at `at` (None: where they were read).
    Reads into `buffer` (a batch larger than it gets its own). Returns the bytes written."""
    positions, sizes = batches.positions, batches.sizes
    begin = int(positions[run_start])
    run_bytes = int(positions[run_end - 1] + sizes[run_end - 1]) - begin
    buffer = memoryview(buffer)[:run_bytes] if run_bytes <= len(buffer) else bytearray(run_bytes)
    got = os.preadv(source, [buffer], begin) if hasattr(os, "preadv") else None
    if got is None:
        buffer = read_at(source, run_bytes, begin)
        got = len(buffer)
    if got != run_bytes:
        raise WriteError(f"staging file {file_name} is shorter than its task reported")
    patch_batch_headers(buffer, positions[run_start:run_end] - begin,
                        offsets[run_start:run_end], epoch)
    at = begin if at is None else at
    view = memoryview(buffer)
    done = 0
    while done < run_bytes:
        done += os.pwrite(target, view[done:], at + done)
    return run_bytes


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
