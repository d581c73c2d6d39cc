"""kafka-python's optional codec modules, supplied for the cross-checks when absent.

kafka-python writes magic-0 lz4 wrappers with the xxhash package and raw snappy blocks
with python-snappy; neither is a test requirement, so XXH32 is given here in pure Python
(checked against lz4's frame-header checksums) and snappy through cramjam.
"""
import struct
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec

# ----------------------------------------------------------- xxhash32 (pure Python)

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data, seed=0):
    """XXH32 as in the xxHash specification."""
    data = bytes(data)
    n, pos = len(data), 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                (lane,) = struct.unpack_from("<I", data, pos + 4 * i)
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
            pos += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (word,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


class _XXHashModule:
    """The slice of the `xxhash` package's API that kafka.codec uses."""

    class xxh32:  # noqa: N801 - named as in the xxhash package
        def __init__(self, data=b""):
            self._data = bytes(data)

        def digest(self):
            return struct.pack(">I", xxh32(self._data))


class _SnappyModule:
    """The slice of python-snappy's API that kafka.codec uses: raw snappy blocks.

    python-snappy is not among the test requirements (cramjam is); kafka-python's own
    xerial framing around these blocks is what the cross-check relies on.
    """

    @staticmethod
    def compress(data):
        import cramjam

        return bytes(cramjam.snappy.compress_raw(bytes(data)))

    @staticmethod
    def decompress(data):
        import cramjam

        return bytes(cramjam.snappy.decompress_raw(bytes(data)))


def supply_missing_codecs(monkeypatch):
    """Give kafka-python the codec modules it lacks in this environment (undone after)."""
    if kafka.codec.xxhash is None:
        monkeypatch.setattr(kafka.codec, "xxhash", _XXHashModule)
    if kafka.codec.snappy is None:
        monkeypatch.setattr(kafka.codec, "snappy", _SnappyModule)
