"""Compression codecs as Kafka frames them.

Codec ids are the low three attribute bits shared by every magic: 0 none, 1 gzip,
2 snappy, 3 lz4, 4 zstd. Snappy is written in the xerial block framing Kafka's Java
client uses and read in that framing or as a raw snappy block. LZ4 is the LZ4 frame
format; magic 0 messages carry the frame-header checksum computed the old (wrong)
way, which is accepted when reading.
"""
import functools
import gzip
import importlib
import io
import struct
import sys
import threading
import zlib

from ..errors import UnsupportedFormatError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
# The most one compressed batch may inflate to. Kafka bounds a batch's stored size
# (message.max.bytes, 1 MiB by default, rarely set past tens of MiB), not its inflated
# size; at the ratios real data compresses by (JSON, logs: 5-20x) such batches inflate to
# well under 256 MiB, while a crafted one (an 80 KB zstd batch that inflates past 4 GB)
# would exhaust a worker's memory. Reads set it with the maxBatchInflatedBytes option.
DEFAULT_MAX_INFLATED_BYTES = 256 << 20
_READ_SIZE = 1 << 20
_FIRST_READ_SIZE = 1 << 16


class InflatedSizeError(ValueError):
    """Compressed data inflates past the allowed size; decompression stopped there."""

    def __init__(self, limit: int):
        self.limit = limit
        super().__init__(f"inflates to more than {limit} bytes (the maxBatchInflatedBytes "
                         f"read option; raise it if such batches are expected)")
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS = {name: cid for cid, name in CODEC_NAMES.items()}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK_SIZE = 32 * 1024  # what Kafka's SnappyOutputStream uses
_LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_BYTES = 1 << 16
_LZ4_STORED = 0x80000000  # a block's size bit: its bytes are stored uncompressed
# compression.lz4.level's default in Kafka (KIP-390): it alone compresses with lz4's fast
# compressor; any other level with its high-compression mode at that level.
LZ4_DEFAULT_LEVEL = 9


def codec_name(codec_id: int) -> str:
    try:
        return CODEC_NAMES[codec_id]
    except KeyError:
        raise UnsupportedFormatError(f"unknown compression codec id {codec_id}") from None


# The package each codec needs beyond the standard library, and the command that installs
# it (lz4 comes with segmentlog itself).
CODEC_PACKAGES = {
    SNAPPY: ("cramjam", 'pip install "segmentlog[snappy]"'),
    LZ4: ("lz4", 'pip install "lz4>=4.0"'),
    ZSTD: ("zstandard", 'pip install "segmentlog[zstd]"'),
}


def codec_module(codec_id: int, module: str = None):
    """The codec's package (or its `module`), or an error naming the command to install it."""
    package, install = CODEC_PACKAGES[codec_id]
    try:
        return importlib.import_module(module or package)
    except ImportError:
        raise UnsupportedFormatError(
            f"{codec_name(codec_id)} compression needs the {package!r} package, which this "
            f"Python ({sys.executable}) cannot import: {install}") from None


def check_codec_available(codec_id: int) -> None:
    """Raise the install hint now, when a codec's package is missing, rather than in the
    middle of a write."""
    if codec_id in CODEC_PACKAGES:
        codec_module(codec_id)


def decompress(codec_id: int, data, max_size: int = DEFAULT_MAX_INFLATED_BYTES) -> bytes:
    """`data` inflated; InflatedSizeError as soon as the output would pass `max_size`
    bytes (each codec stops there, without producing the rest)."""
    if codec_id == GZIP:
        return _gunzip(data, max_size)
    if codec_id == SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec_id == LZ4:
        return _lz4_decompress(data, max_size)
    if codec_id == ZSTD:
        return _zstd_decompress(data, max_size)
    if codec_id == NONE:
        return bytes(data)
    raise UnsupportedFormatError(f"unknown compression codec id {codec_id}")


def compress(codec_id: int, data, level=None) -> bytes:
    return compressor(codec_id, level)(data)


def compressor(codec_id: int, level=None):
    """compress(data) -> bytes for one codec and level, set up once for the many batches
    of a write (a zstd compressor is made once, not per batch)."""
    if codec_id == NONE:
        return bytes
    if codec_id == GZIP:
        return functools.partial(_gzip_compress, level=6 if level is None or level < 0 else level)
    if codec_id == SNAPPY:
        return _snappy_compress_xerial
    if codec_id == LZ4:
        if level is not None and level != LZ4_DEFAULT_LEVEL:
            return functools.partial(_lz4_high_compress, level=level)
        lz4_frame = codec_module(LZ4, "lz4.frame")

        # Kafka's LZ4 stream: 64 KiB independent blocks, no content size; at its
        # default level, lz4's fast compressor.
        return functools.partial(
            lz4_frame.compress,
            block_size=lz4_frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
            compression_level=0,
        )
    if codec_id == ZSTD:
        zstandard = codec_module(ZSTD)
        return zstandard.ZstdCompressor(level=3 if level is None else level).compress
    raise UnsupportedFormatError(f"unknown compression codec id {codec_id}")


def _lz4_high_compress(data, level: int) -> bytes:
    """The LZ4 frame Kafka's producer writes at any compression.lz4.level but its default:
    each 64 KiB block compressed by lz4's high-compression mode at `level` (where the
    frame API would use the fast compressor for levels 1 and 2), a block that does not
    shrink stored as it is; the frame header is the one of the fast path's frames."""
    lz4_block = codec_module(LZ4, "lz4.block")
    view = memoryview(data).cast("B")
    out = bytearray(_lz4_kafka_frame_header())
    for start in range(0, len(view), _LZ4_BLOCK_BYTES):
        block = view[start : start + _LZ4_BLOCK_BYTES]
        packed = lz4_block.compress(block, mode="high_compression", compression=level,
                                    store_size=False)
        if len(packed) < len(block):
            out += struct.pack("<I", len(packed))
            out += packed
        else:
            out += struct.pack("<I", len(block) | _LZ4_STORED)
            out += block
    out += b"\0\0\0\0"  # the end mark
    return bytes(out)


@functools.lru_cache(maxsize=None)
def _lz4_kafka_frame_header() -> bytes:
    """Magic, descriptor (version 1, independent blocks, 64 KiB, no checksums or content
    size) and its checksum byte: the header of an empty frame from the fast path."""
    lz4_frame = codec_module(LZ4, "lz4.frame")
    empty = lz4_frame.compress(b"", block_size=lz4_frame.BLOCKSIZE_MAX64KB, block_linked=False,
                               content_checksum=False, store_size=False)
    return empty[:7]


def _gzip_compress(data, level: int) -> bytes:
    # libdeflate (the `deflate` package) deflates about twice as fast as zlib at the
    # same level and ratio; any gzip member is what Kafka's GZIPInputStream reads.
    try:
        import deflate
    except ImportError:
        return gzip.compress(data, compresslevel=level, mtime=0)
    return deflate.gzip_compress(bytes(data), level)


def _gunzip(data, max_size: int) -> bytes:
    # wbits 47 = auto-detect gzip/zlib header; a member may be followed by padding.
    decompressor = zlib.decompressobj(47)
    out = decompressor.decompress(data, max_size + 1)
    if len(out) > max_size:
        raise InflatedSizeError(max_size)
    # Under the bound, all input was consumed: what flush returns is what is left of it.
    out += decompressor.flush()
    if len(out) > max_size:
        raise InflatedSizeError(max_size)
    if not decompressor.eof:
        raise zlib.error("gzip stream is truncated")
    return out


def _snappy():
    return codec_module(SNAPPY).snappy


def _snappy_raw(snappy, block: bytes, max_size: int) -> bytes:
    # A raw snappy block starts with its inflated length: check it before inflating.
    if snappy.decompress_raw_len(block) > max_size:
        raise InflatedSizeError(max_size)
    return bytes(snappy.decompress_raw(block))


def _snappy_decompress(data, max_size: int) -> bytes:
    snappy = _snappy()
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return _snappy_raw(snappy, bytes(view), max_size)
    out = bytearray()
    pos = _XERIAL_HEADER.size
    end = len(view)
    while pos < end:
        if pos + 4 > end:
            raise zlib.error("xerial snappy block header is truncated")
        (length,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise zlib.error(f"xerial snappy block of {length} bytes runs past the data")
        out += _snappy_raw(snappy, bytes(view[pos : pos + length]), max_size - len(out))
        pos += length
    return bytes(out)


def _snappy_compress_xerial(data) -> bytes:
    snappy = _snappy()
    out = io.BytesIO()
    out.write(_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1))
    view = memoryview(data)
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(snappy.compress_raw(bytes(view[start : start + _XERIAL_BLOCK_SIZE])))
        out.write(struct.pack(">i", len(block)))
        out.write(block)
    return out.getvalue()


def _lz4_decompress(data, max_size: int) -> bytes:
    lz4_frame = codec_module(LZ4, "lz4.frame")

    # In pieces: the decompressor allocates the whole max_length it is given up front.
    decompressor = lz4_frame.LZ4FrameDecompressor()
    chunks = []
    total = 0
    pending = bytes(data)
    while True:
        try:
            chunk = decompressor.decompress(
                pending, max_length=min(_READ_SIZE, max_size + 1 - total))
        except RuntimeError:
            if chunks:
                raise
            # Magic-0 messages carry a frame-header checksum Kafka computed over the magic
            # number too; decode the blocks directly, which needs no header checksum.
            return _lz4_decompress_blocks(memoryview(data), max_size)
        pending = b""
        chunks.append(chunk)
        total += len(chunk)
        if total > max_size:
            raise InflatedSizeError(max_size)
        if decompressor.eof or decompressor.needs_input:
            return b"".join(chunks)


def _lz4_decompress_blocks(view, max_size: int) -> bytes:
    lz4_block = codec_module(LZ4, "lz4.block")

    if bytes(view[:4]) != _LZ4_FRAME_MAGIC:
        raise zlib.error("not an LZ4 frame (bad magic number)")
    flags = view[4]
    block_max = {4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22}.get((view[5] >> 4) & 7)
    if block_max is None:
        raise zlib.error("LZ4 frame names an unknown block size")
    if not flags & 0x20:
        raise zlib.error("LZ4 frame with linked blocks and an invalid header checksum")
    pos = 6 + (8 if flags & 0x08 else 0) + 1  # descriptor, optional content size, checksum
    has_block_checksum = bool(flags & 0x10)
    out = bytearray()
    while True:
        if pos + 4 > len(view):
            raise zlib.error("LZ4 frame is truncated")
        (size,) = struct.unpack_from("<I", view, pos)
        pos += 4
        if size == 0:
            break
        stored = bool(size & 0x80000000)
        size &= 0x7FFFFFFF
        block = bytes(view[pos : pos + size])
        if len(block) != size:
            raise zlib.error("LZ4 block runs past the data")
        pos += size + (4 if has_block_checksum else 0)
        out += block if stored else lz4_block.decompress(block, uncompressed_size=block_max)
        if len(out) > max_size:  # blocks inflate to at most 4 MiB each
            raise InflatedSizeError(max_size)
    return bytes(out)


def _zstd_decompress(data, max_size: int) -> bytes:
    zstandard = codec_module(ZSTD)
    # Kafka's streaming encoder does not record the content size, so stream it out, in
    # pieces, up to the bound. The first piece is small: a read allocates its whole size,
    # which would cost more than decompressing a typical batch.
    chunks = []
    total = 0
    size = _FIRST_READ_SIZE
    with _zstd_decompressor(zstandard).stream_reader(bytes(data)) as reader:
        while True:
            chunk = reader.read(min(size, max_size + 1 - total))
            size = min(size * 2, _READ_SIZE)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_size:
                raise InflatedSizeError(max_size)
    return b"".join(chunks)


_ZSTD_DECOMPRESSORS = threading.local()  # a context is not safe to share between threads


def _zstd_decompressor(zstandard):
    decompressor = getattr(_ZSTD_DECOMPRESSORS, "context", None)
    if decompressor is None:
        decompressor = _ZSTD_DECOMPRESSORS.context = zstandard.ZstdDecompressor()
    return decompressor
