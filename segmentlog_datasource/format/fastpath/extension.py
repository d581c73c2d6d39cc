"""The compiled decoder's extension module (`_fastrecords`), loaded once a process.

A leaf: the CRC (format/crc.py) takes its CRC32C from here without importing the decoder
that is built on the format modules (compiled.py).
"""
from .buildinfo import C_SOURCE
from .loading import load_extension

_module = None  # the module once loaded; an ImportError once it failed to


def fast_records():
    """The `_fastrecords` module; ImportError saying why when no usable build is found
    (remembered, so sys.path is searched once)."""
    global _module
    if _module is None:
        try:
            _module = load_extension("_fastrecords", C_SOURCE)
        except ImportError as error:
            _module = error
    if isinstance(_module, ImportError):
        raise _module
    return _module
