"""CRC32C (record batches, magic 2) and CRC32 (legacy messages, magic 0 and 1).

The `crc32c` package uses the CPU's CRC instruction and is several times faster than
crcmod's table-driven C extension, so it is preferred when installed; crcmod is the
always-available fallback.
"""
import zlib

try:  # hardware-accelerated when the CPU has SSE4.2 / ARMv8 CRC
    from crc32c import crc32c as _crc32c_fast

    def crc32c(data) -> int:
        return _crc32c_fast(data)

    CRC32C_BACKEND = "crc32c"
except ImportError:  # pragma: no cover - exercised when only crcmod is installed
    import crcmod.predefined

    _crc32c_fn = crcmod.predefined.mkPredefinedCrcFun("crc-32c")

    def crc32c(data) -> int:
        return _crc32c_fn(bytes(data) if isinstance(data, memoryview) else data)

    CRC32C_BACKEND = "crcmod"


def crc32(data) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF
