"""Record decoding into Arrow batches: a compiled accumulator and its pure-Python twin.

Both have one interface (add, add_v2_batch, decode_run, len, payload_bytes, take);
`make_accumulator` is the one place that picks between them.
"""
import warnings

from .protocol import RUN_DONE, RUN_END, RUN_ENTRY_FOR_PYTHON, RUN_FLUSH

__all__ = ["FastPathUnavailableWarning", "RUN_DONE", "RUN_END", "RUN_ENTRY_FOR_PYTHON",
           "RUN_FLUSH", "make_accumulator", "batch_header_walker"]


class FastPathUnavailableWarning(RuntimeWarning):
    """The compiled decoder is unavailable: reads use the pure-Python one, about 6x slower."""


_compiled_accumulator = None  # the compiled class once imported; False once it failed to


def _compiled_class():
    """The compiled accumulator class, None when it cannot be loaded (warned once)."""
    global _compiled_accumulator
    if _compiled_accumulator is None:
        try:
            from .compiled import CompiledAccumulator
        except ImportError as exc:
            # Remembered, so the warning comes once per process and sys.path is
            # searched once, not on every scan.
            _compiled_accumulator = False
            warnings.warn(
                f"segmentlog's compiled decoder is unavailable ({exc}); reads fall back "
                "to the pure-Python decoder, about 6x slower. To fix it, run "
                "`pip install .` in the segmentlog checkout with a C compiler present "
                "(or, for runs from the checkout, `python setup.py build_ext --inplace`).",
                FastPathUnavailableWarning, stacklevel=3)
        else:
            _compiled_accumulator = CompiledAccumulator
    return _compiled_accumulator or None


def make_accumulator(include_headers: bool, use_fast_path: bool = True):
    """An accumulator: the compiled one when built and wanted, else the pure-Python twin."""
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
