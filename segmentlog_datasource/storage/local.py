"""Local files (or a shared filesystem mounted here): listed live, segments mapped."""
import mmap
import os
import stat
from typing import Dict, List, Optional

from ..errors import CorruptLogError, SegmentShrankError
from .base import ByteReader, FileEntry, LogBytes, LogBytesReader, Store, TreeView


class LocalTree(TreeView):
    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def names(self, path: str) -> List[str]:
        return os.listdir(path)

    def entry(self, path: str) -> Optional[FileEntry]:
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return None
        if stat.S_ISREG(info.st_mode):
            return FileEntry("file", info.st_size)
        return FileEntry("dir" if stat.S_ISDIR(info.st_mode) else "other", 0)

    def files_under(self, root: str) -> Dict[str, int]:
        found = {}
        for directory, _, files in os.walk(root):
            for name in files:
                path = os.path.join(directory, name)
                try:
                    found[os.path.relpath(path, root).replace(os.sep, "/")] = \
                        os.stat(path).st_size
                except FileNotFoundError:
                    continue
        return found


class MappedLog(LogBytes):
    """The first `size` bytes of a segment file, mapped read-only.

    Touching a mapped page past the file's end kills the process (SIGBUS), and a file
    can shrink while it is read (retention, a follower truncating). So only the size
    verified is mapped, and `check()` verifies it again before each run of decoding."""

    def __init__(self, path: str, size: int):
        self.path = path
        self.size = size
        self._file = open(path, "rb")
        try:
            self.check()
        except CorruptLogError:
            self._file.close()
            raise
        self._map = mmap.mmap(self._file.fileno(), size, access=mmap.ACCESS_READ) if size else None
        self.view = memoryview(self._map) if self._map is not None else memoryview(b"")

    def available(self, position: int, end: int) -> int:
        return self.size

    def ensure(self, position: int, length: int) -> None:
        pass

    def ensure_entry(self, position: int) -> None:
        pass

    def check(self) -> None:
        actual = os.fstat(self._file.fileno()).st_size
        if actual < self.size:
            raise SegmentShrankError(
                self.path, actual,
                f"segment shrank from {self.size} to {actual} bytes while being read "
                "(retention or a truncating broker); read it again")

    def close(self):
        self._file.close()
        self._release(self._map)


class FileReader(ByteReader):
    def __init__(self, path: str):
        self._file = open(path, "rb")

    def pread(self, length: int, position: int) -> bytes:
        return os.pread(self._file.fileno(), length, position)

    def close(self) -> None:
        self._file.close()


class LocalStore(Store):
    def __reduce__(self):
        return (_local, ())

    def __repr__(self):
        return "LocalStore()"

    def tree(self, root: str) -> TreeView:
        return LocalTree()

    def read_optional(self, path: str) -> Optional[bytes]:
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def open_log(self, path: str, size: int, chunks=None) -> LogBytes:
        if chunks is not None:
            from .remote import FetchedLog

            reader = FileReader(path)
            return FetchedLog(path, size, reader.pread, chunks, on_close=reader.close)
        return MappedLog(path, size)

    def reader(self, path: str, size: int, chunks=None) -> ByteReader:
        if chunks is not None:
            return LogBytesReader(self.open_log(path, size, chunks))
        return FileReader(path)

    def read_bytes(self, path: str, position: int, length: int) -> bytes:
        with open(path, "rb") as handle:
            return os.pread(handle.fileno(), length, position)

    def size_of(self, path: str) -> Optional[int]:
        try:
            return os.stat(path).st_size
        except FileNotFoundError:
            return None

    def join(self, directory: str, name: str) -> str:
        return os.path.join(directory, name)

    @staticmethod
    def basename(path: str) -> str:
        return os.path.basename(path.rstrip(os.sep))

    @staticmethod
    def dirname(path: str) -> str:
        return os.path.dirname(path.rstrip(os.sep))


LOCAL = LocalStore()


def _local():
    return LOCAL
