"""What every store offers the layers above it."""
import posixpath
from abc import ABC, abstractmethod
from typing import Dict, List, NamedTuple, Optional, Tuple

from ..errors import SegmentShrankError


class Chunk(NamedTuple):
    """Where one chunk of a file stored as independent zstd frames (a tiered-storage
    plugin's compression) is: its bytes in the original file and in the stored object."""
    original_offset: int
    original_size: int
    stored_offset: int
    stored_size: int


class FileEntry(NamedTuple):
    kind: str  # "file", "dir" or "other"
    size: int  # bytes, for files


class TreeView(ABC):
    """A directory tree as seen at one moment (remote: one listing; local: the disk)."""

    @abstractmethod
    def isdir(self, path: str) -> bool:
        ...

    @abstractmethod
    def names(self, path: str) -> List[str]:
        """Names in the directory `path`; OSError when it cannot be listed."""

    @abstractmethod
    def entry(self, path: str) -> Optional[FileEntry]:
        """What `path` is, None when nothing is there."""

    @abstractmethod
    def files_under(self, root: str) -> Dict[str, int]:
        """Every file below `root`: {'/'-separated path relative to it: size}."""


class LogBytes(ABC):
    """The first `size` bytes of a segment, as a buffer indexed by file position.

    `view` covers the whole size; a remote one holds only what `available`/`ensure`
    fetched, so every reader of `view` first asks for the bytes it will touch."""

    view: memoryview
    size: int

    @abstractmethod
    def available(self, position: int, end: int) -> int:
        """Make bytes from `position` on readable, heading for `end`; return where the
        readable bytes from `position` stop (at most the size)."""

    @abstractmethod
    def ensure(self, position: int, length: int) -> None:
        """Make `length` bytes at `position` (cut at the size) readable."""

    def ensure_entry(self, position: int) -> None:
        """Make the whole entry that starts at `position` readable (as far as its length
        field says and the size allows)."""
        from_header = 12  # offset (8) + length (4): Kafka's LOG_OVERHEAD
        self.ensure(position, from_header)
        if position + from_header <= self.size:
            length = int.from_bytes(self.view[position + 8 : position + 12], "big", signed=True)
            if length > 0:
                self.ensure(position, from_header + length)

    @abstractmethod
    def check(self) -> None:
        """Raise SegmentShrankError when the file got shorter than `size`, or when bytes
        read from `view` since it was opened may not have been the file's (a mapped page
        lost to the file shrinking reads as zeros)."""

    def shrink_error(self) -> Optional[SegmentShrankError]:
        """The SegmentShrankError check() raises now, or None: when reading fails, a
        shrink explains it (zeros where a page was lost, a torn entry at the new end)."""
        try:
            self.check()
        except SegmentShrankError as shrank:
            return shrank
        return None

    @abstractmethod
    def close(self) -> None:
        ...

    def _release(self, mapping) -> None:
        """Let go of `view` and `mapping` (an mmap or None)."""
        try:
            self.view.release()
            if mapping is not None:
                mapping.close()
        except BufferError:
            pass  # slices are still referenced; the mapping goes when they do

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ByteReader(ABC):
    """Positioned reads of one file, for walks over headers."""

    @abstractmethod
    def pread(self, length: int, position: int) -> bytes:
        ...

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class LogBytesReader(ByteReader):
    """Positioned reads through a LogBytes (a segment stored in compressed chunks)."""

    def __init__(self, data: LogBytes):
        self._data = data

    def pread(self, length: int, position: int) -> bytes:
        self._data.ensure(position, length)
        return bytes(self._data.view[position : min(position + length, self._data.size)])

    def close(self) -> None:
        self._data.close()


class Store(ABC):
    """A filesystem that logs are read from (see the package docstring)."""

    remote = False

    @abstractmethod
    def tree(self, root: str) -> TreeView:
        ...

    def child_names(self, path: str) -> List[str]:
        """The names directly under `path` now (none when it is not a directory)."""
        tree = self.tree(path)
        return sorted(tree.names(path)) if tree.isdir(path) else []

    def child_dirs(self, path: str) -> List[str]:
        """The names of the directories directly under `path` now, sorted (none when it
        is not a directory): what a glob is matched against (storage.globs)."""
        tree = self.tree(path)
        if not tree.isdir(path):
            return []
        return sorted(name for name in tree.names(path) if tree.isdir(self.join(path, name)))

    @abstractmethod
    def read_optional(self, path: str) -> Optional[bytes]:
        """The whole file, None when there is none."""

    @abstractmethod
    def open_log(self, path: str, size: int, chunks: Optional[Tuple[Chunk, ...]] = None
                 ) -> LogBytes:
        """The segment's first `size` bytes; `chunks`: the object holds them compressed."""

    @abstractmethod
    def reader(self, path: str, size: int, chunks: Optional[Tuple[Chunk, ...]] = None
               ) -> ByteReader:
        ...

    @abstractmethod
    def read_bytes(self, path: str, position: int, length: int) -> bytes:
        """`length` bytes at `position` of a file (fewer at its end)."""

    @abstractmethod
    def size_of(self, path: str) -> Optional[int]:
        """The file's size now, None when it is gone."""

    def join(self, directory: str, name: str) -> str:
        return posixpath.join(directory, name)

    @staticmethod
    def basename(path: str) -> str:
        return posixpath.basename(path.rstrip("/"))

    @staticmethod
    def dirname(path: str) -> str:
        return posixpath.dirname(path.rstrip("/"))
