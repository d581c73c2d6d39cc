"""The compiled fast path, if it imports here, and a marker for the tests that need it.

A pure-Python install (no C compiler) is supported, so these tests skip without the
build; CI sets SEGMENTLOG_REQUIRE_FAST=1, and test_fast_path.py then fails instead.
"""
import pytest

try:
    from segmentlog_datasource.format.fastpath import compiled
except ImportError as exc:
    compiled, NOT_BUILT = None, str(exc)
else:
    NOT_BUILT = None

requires_compiled = pytest.mark.skipif(
    compiled is None,
    reason=f"compiled fast path not built ({NOT_BUILT}); "
           "build it with: python setup.py build_ext --inplace")


try:
    from segmentlog_datasource.format.fastpath import compiled_encode
except ImportError as exc:
    compiled_encode, ENCODER_NOT_BUILT = None, str(exc)
else:
    ENCODER_NOT_BUILT = None
