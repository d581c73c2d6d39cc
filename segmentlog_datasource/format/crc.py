"""CRC32C (record batches, magic 2) and CRC32 (legacy messages, magic 0 and 1).

The `crc32c` package uses the CPU's CRC instruction and is several times faster than
crcmod's table-driven C extension, so it is preferred when installed; crcmod is the
always-available fallback. The implementation is picked on first use: importing the
`crc32c` package costs about 12 ms, which query planning should not pay.
"""
import zlib

_crc32c_impl = None
_backend = None


def _load_crc32c():
    global _crc32c_impl, _backend
    try:  # hardware-accelerated when the CPU has SSE4.2 / ARMv8 CRC
        from crc32c import crc32c as fast

        _crc32c_impl, _backend = fast, "crc32c"
    except ImportError:  # only crcmod is installed
        import crcmod.predefined

        table_driven = crcmod.predefined.mkPredefinedCrcFun("crc-32c")

        def from_crcmod(data):
            return table_driven(bytes(data) if isinstance(data, memoryview) else data)

        _crc32c_impl, _backend = from_crcmod, "crcmod"
    return _crc32c_impl


def crc32c(data) -> int:
    return (_crc32c_impl or _load_crc32c())(data)


def crc32c_backend() -> str:
    """Which CRC32C implementation is in use: "crc32c" or "crcmod"."""
    if _backend is None:
        _load_crc32c()
    return _backend


def crc32(data) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF
