"""CRC32C (record batches, magic 2) and CRC32 (legacy messages, magic 0 and 1).

Three implementations, the first available picked on first use: the compiled decoder's
(the CPU's CRC instruction, three streams at once, as beside its parse), the `crc32c`
package's (the same instruction), then crcmod's table-driven C extension, which is always
installed. The compiled one comes first because importing the `crc32c` package reads
every installed distribution's metadata for its version: a tenth of a second or more in a
fresh Spark worker, whose path holds Spark's jars, and every task's first scan of a
compressed batch would pay it.
"""
import zlib

_crc32c_impl = None
_crc32c_continue = None  # crc(data, value): continues a checksum; None with crcmod alone
_backend = None


def _compiled_crc32c():
    """The compiled decoder's CRC32C, None where it is not built or the CPU lacks the
    instruction."""
    from .fastpath.extension import fast_records

    try:
        compiled = fast_records()
    except ImportError:  # the decoder says why, once, when a read first wants it
        return None
    return compiled.crc32c if compiled.CRC32C_INSTRUCTION else None


def _load_crc32c():
    global _crc32c_impl, _crc32c_continue, _backend
    compiled = _compiled_crc32c()
    if compiled is not None:
        _crc32c_impl = _crc32c_continue = compiled
        _backend = "compiled"
        return _crc32c_impl
    try:  # hardware-accelerated when the CPU has SSE4.2 / ARMv8 CRC
        from crc32c import crc32c as fast

        _crc32c_impl = _crc32c_continue = fast
        _backend = "crc32c"
    except ImportError:  # only crcmod is installed
        import crcmod.predefined

        table_driven = crcmod.predefined.mkPredefinedCrcFun("crc-32c")

        def from_crcmod(data):
            return table_driven(bytes(data) if isinstance(data, memoryview) else data)

        _crc32c_impl, _crc32c_continue, _backend = from_crcmod, None, "crcmod"
    return _crc32c_impl


def crc32c(data) -> int:
    return (_crc32c_impl or _load_crc32c())(data)


def crc32c_continuing():
    """crc(data, value) that continues the checksum `value` of the bytes before `data`
    (0 for none); None where only crcmod, which cannot, is there."""
    if _backend is None:
        _load_crc32c()
    return _crc32c_continue


def crc32c_backend() -> str:
    """Which CRC32C implementation is in use: "compiled", "crc32c" or "crcmod"."""
    if _backend is None:
        _load_crc32c()
    return _backend


def crc32(data) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF
