"""Record decoding into Arrow batches: a compiled accumulator and its pure-Python twin.

Both have one interface (add, add_v2_batch, decode_run, len, payload_bytes, take);
`make_accumulator` is the one place that picks between them. Encoding has its twins too
(compiled_encode.py and v2_encode.encode_batches_python), picked by `batch_encoder` for
format/encode.py. The compiled module also
maps local segments so that a file shrinking under a reader cannot kill the process
(`file_mapping_class`, used by storage/local.py).
"""
import warnings

from ...storage import local as _local_storage
from .protocol import (
    ENTRY_ATTRIBUTES, ENTRY_BASE_OFFSET, ENTRY_BASE_SEQUENCE, ENTRY_CONTROL_TYPE,
    ENTRY_COORDINATOR_EPOCH, ENTRY_END_ROW, ENTRY_FIELDS, ENTRY_LEADER_EPOCH, ENTRY_MAGIC,
    ENTRY_POSITION, ENTRY_PRODUCER_EPOCH, ENTRY_PRODUCER_ID, NO_COORDINATOR_EPOCH,
    NOT_CONTROL, RUN_DONE, RUN_END, RUN_ENTRY_FOR_PYTHON, RUN_FLUSH,
)

__all__ = ["FastPathUnavailableWarning", "FastEncoderUnavailableWarning", "RUN_DONE", "RUN_END", "RUN_ENTRY_FOR_PYTHON",
           "RUN_FLUSH", "make_accumulator", "batch_encoder", "compiled_key_hasher", "batch_header_walker", "file_mapping_class",
           "set_run_hook", "batch_entry_expander", "ENTRY_ATTRIBUTES", "ENTRY_BASE_OFFSET", "ENTRY_BASE_SEQUENCE",
           "ENTRY_CONTROL_TYPE", "ENTRY_COORDINATOR_EPOCH", "ENTRY_END_ROW", "ENTRY_FIELDS",
           "ENTRY_LEADER_EPOCH", "ENTRY_MAGIC", "ENTRY_POSITION", "ENTRY_PRODUCER_EPOCH",
           "ENTRY_PRODUCER_ID", "NO_COORDINATOR_EPOCH", "NOT_CONTROL"]


class FastPathUnavailableWarning(RuntimeWarning):
    """The compiled decoder is unavailable: reads use the pure-Python one, about 6x slower."""


class FastEncoderUnavailableWarning(RuntimeWarning):
    """The compiled encoder is unavailable: writes encode with the pure-Python one."""


_compiled_module = None  # compiled.py once imported; False once it failed to
_compiled_error = None  # why it failed to
_warned_unavailable = False


def _compiled(warn: bool):
    """compiled.py, None when it cannot be loaded (with `warn`, said once a process)."""
    global _compiled_module, _compiled_error, _warned_unavailable
    if _compiled_module is None:
        try:
            from . import compiled
        except ImportError as exc:
            # Remembered, so sys.path is searched once, not on every scan.
            _compiled_module, _compiled_error = False, exc
        else:
            _compiled_module = compiled
    if _compiled_module is False and warn and not _warned_unavailable:
        _warned_unavailable = True
        warnings.warn(
            f"segmentlog's compiled decoder is unavailable ({_compiled_error}); reads fall "
            "back to the pure-Python decoder, about 6x slower. To fix it, run "
            "`pip install .` in the segmentlog checkout with a C compiler present "
            "(or, for runs from the checkout, `python setup.py build_ext --inplace`).",
            FastPathUnavailableWarning, stacklevel=4)
    return _compiled_module or None


def _compiled_class():
    """The compiled accumulator class, None when it cannot be loaded (warned once)."""
    compiled = _compiled(warn=True)
    return compiled.CompiledAccumulator if compiled is not None else None


def make_accumulator(include_headers: bool, use_fast_path: bool = True):
    """An accumulator: the compiled one when built and wanted, else the pure-Python twin.
    (Metadata and control rows: see track_batches, in both.)"""
    if use_fast_path:
        compiled = _compiled_class()
        if compiled is not None:
            return compiled(include_headers)
    from .pure import RecordAccumulator

    return RecordAccumulator(include_headers)


def batch_header_walker(use_fast_path: bool = True, allow_pure: bool = True):
    """v2_batch_headers(buffer, position, end, next_offset) -> (stop, last, rows): the
    compiled walk when built and wanted (it is when make_accumulator's compiled class
    loads), else its twin, or None without `allow_pure` (the caller's own walk is as fast)."""
    if use_fast_path and _compiled_class() is not None:
        from .compiled import v2_batch_headers

        return v2_batch_headers
    if not allow_pure:
        return None
    from .pure import v2_batch_headers

    return v2_batch_headers


def batch_entry_expander(use_fast_path: bool = True):
    """expand(entries, offsets) -> the per-row metadata columns (see
    arrow.expanded_entries): the compiled expansion when built and wanted, else its twin."""
    if use_fast_path and _compiled_class() is not None:
        from .compiled import expand_batch_entries

        return expand_batch_entries
    from ..arrow import expanded_entries

    return expanded_entries


_encoder_module = None  # compiled_encode.py once imported; False once it failed to


def _compiled_encoder():
    """compiled_encode.py, None when it cannot be loaded (said once a process)."""
    global _encoder_module
    if _encoder_module is None:
        try:
            from . import compiled_encode
        except ImportError as exc:
            _encoder_module = False
            warnings.warn(
                f"segmentlog's compiled encoder is unavailable ({exc}); writes encode "
                "record batches in Python, several times slower. To fix it, run `pip "
                "install .` in the segmentlog checkout with a C compiler present (or, for "
                "runs from the checkout, `python setup.py build_ext --inplace`).",
                FastEncoderUnavailableWarning, stacklevel=4)
        else:
            _encoder_module = compiled_encode
    return _encoder_module or None


def batch_encoder(use_fast_path: bool = True, grouped: bool = False):
    """encode(columns, **options) -> EncodedBatches (encode.encode_batches), or with
    `grouped` encode(columns, groups, group_count, **options) -> [EncodedBatches or None]
    (encode.encode_groups): the compiled encoder when built and wanted, else its
    pure-Python twin (warned once)."""
    compiled = _compiled_encoder() if use_fast_path else None
    if compiled is not None:
        return compiled.encode_groups_compiled if grouped else compiled.encode_batches_compiled
    from ..v2_encode import encode_batches_python, encode_groups_python

    return encode_groups_python if grouped else encode_batches_python


def compiled_key_hasher(use_fast_path: bool = True):
    """murmur2(keys) -> uint32 per row, Kafka's key hash (nulls as empty keys), and
    murmur2(keys, n) -> each key's partition among n (int64), compiled beside the
    encoder; None when it is not built or not wanted (the writer's partitioner then hashes
    with its numpy twin, partitioner.murmur2_array)."""
    compiled = _compiled_encoder() if use_fast_path else None
    return None if compiled is None else compiled.murmur2_compiled


def file_mapping_class():
    """The compiled FileMapping(fd, size): a read-only mapping of a file in which a page
    lost to the file shrinking reads as zeros (and is noted) instead of killing the
    process. None when the compiled module does not load (storage then reads with pread)."""
    compiled = _compiled(warn=False)
    return compiled.FileMapping if compiled is not None else None


_local_storage.use_file_mapping(file_mapping_class)


def set_run_hook(hook) -> None:
    """For tests: call hook(position) after each batch either accumulator's decode_run
    decodes (None: no hook), to change a file at a chosen point inside a run."""
    from . import pure

    pure.run_hook = hook
    compiled = _compiled(warn=False)
    if compiled is not None:
        compiled.set_run_hook(hook)
