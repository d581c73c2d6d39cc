"""Local files (or a shared filesystem mounted here): listed live, segments mapped."""
import errno
import os
import stat
from typing import Dict, List, Optional

from ..errors import SegmentShrankError, StoreError
from .base import ByteReader, FileEntry, LogBytes, LogBytesReader, Store, TreeView


def raise_if_link_loop(exc: OSError, path: str) -> None:
    """Raise a StoreError naming the symbolic link that loops, if `exc` is ELOOP (os.stat
    and open say only which path they were given, perhaps a file below the loop)."""
    if exc.errno != errno.ELOOP:
        return
    looping = path
    parent = os.path.dirname(looping)
    while parent != looping and _loops(parent):
        looping, parent = parent, os.path.dirname(parent)
    raise StoreError(
        f"{looping}: a symbolic link loop (too many levels of symbolic links): fix or "
        f"remove the link, or give the log dir's own path") from None


def _loops(path: str) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


class LocalTree(TreeView):
    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def names(self, path: str) -> List[str]:
        try:
            return os.listdir(path)
        except OSError as exc:
            raise_if_link_loop(exc, path)
            raise

    def entry(self, path: str) -> Optional[FileEntry]:
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise_if_link_loop(exc, path)
            raise
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
                except OSError as exc:
                    raise_if_link_loop(exc, path)
                    raise
        return found


class MappedLog(LogBytes):
    """The first `size` bytes of a segment file, mapped read-only.

    A file can shrink while it is read (retention, a follower truncating its log), and
    touching a mapped page past a file's end raises SIGBUS, which kills the process. So
    the mapping is the compiled FileMapping (format/fastpath): there a page lost to a
    shrink reads as zeros instead, and is noted. `check()`, called at opening, before any
    rows decoded go out, at the end of a scan and when reading fails, raises
    SegmentShrankError when the file is shorter or a page was lost. LocalStore reads
    with pread (ShrinkAwareFileReader) where no FileMapping can be had."""

    def __init__(self, path: str, size: int, mapping_class):
        self.path = path
        self.size = size
        self._map = None
        self._file = open(path, "rb")
        try:
            self.check()
            if size:
                try:
                    self._map = mapping_class(self._file.fileno(), size)
                except OSError as exc:
                    raise CannotMap(exc) from exc
        except BaseException:
            self._file.close()
            raise
        self.view = memoryview(self._map) if self._map is not None else memoryview(b"")

    def available(self, position: int, end: int) -> int:
        return self.size

    def ensure(self, position: int, length: int) -> None:
        pass

    def ensure_entry(self, position: int) -> None:
        pass

    @property
    def fault_position(self) -> Optional[int]:
        """Where a page was first lost to the file shrinking (it and the pages after it
        read as zeros since), None if none was."""
        return self._map.fault_position if self._map is not None else None

    def check(self) -> None:
        actual = os.fstat(self._file.fileno()).st_size
        if actual < self.size:
            raise SegmentShrankError(self.path, actual, _shrank_reason(self.size, actual))
        lost = self.fault_position
        if lost is not None:
            raise SegmentShrankError(
                self.path, lost,
                f"the segment shrank below byte {lost} while being read, and grew again to "
                f"{actual} bytes (or the disk failed to read that page); read it again")

    def close(self):
        self._file.close()
        self._release(self._map)


# Where the guarded mapping comes from: the format layer's compiled module, which hands
# its loader over as it is imported (storage may not import format).
_mapping_source = None
_mapping_class = None  # the source's answer once asked; False: none


def use_file_mapping(source) -> None:
    """`source()`: the compiled FileMapping class, or None (segments are then read with
    pread)."""
    global _mapping_source, _mapping_class
    _mapping_source, _mapping_class = source, None


def _file_mapping_class():
    global _mapping_class
    if _mapping_class is None:
        _mapping_class = (_mapping_source() if _mapping_source is not None else None) or False
    return _mapping_class or None


class CannotMap(Exception):
    """The file cannot be mapped here (a filesystem without mmap, too many files mapped)."""


def _shrank_reason(size: int, actual: int) -> str:
    return (f"segment shrank from {size} to {actual} bytes while being read "
            "(retention or a truncating broker); read it again")


class FileReader(ByteReader):
    def __init__(self, path: str):
        self._file = open(path, "rb")

    def pread(self, length: int, position: int) -> bytes:
        return os.pread(self._file.fileno(), length, position)

    def close(self) -> None:
        self._file.close()


class ShrinkAwareFileReader(FileReader):
    """pread of the first `size` bytes of a segment, where a short read means the file
    shrank: SegmentShrankError, as check() raises when the file is shorter already."""

    def __init__(self, path: str, size: int):
        super().__init__(path)
        self.path = path
        self.size = size

    def pread(self, length: int, position: int) -> bytes:
        data = super().pread(length, position)
        if len(data) < min(length, self.size - position):
            self.check()
            raise SegmentShrankError(self.path, position + len(data),
                                     "segment shrank while being read; read it again")
        return data

    def check(self) -> None:
        actual = os.fstat(self._file.fileno()).st_size
        if actual < self.size:
            raise SegmentShrankError(self.path, actual, _shrank_reason(self.size, actual))


class LocalStore(Store):
    def __reduce__(self):
        return (_local, ())

    def __repr__(self):
        return "LocalStore()"

    def tree(self, root: str) -> TreeView:
        return LocalTree()

    def child_dirs(self, path: str) -> List[str]:
        try:
            with os.scandir(path) as entries:
                return sorted(entry.name for entry in entries if _is_dir(entry))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise_if_link_loop(exc, path)
            raise

    def read_optional(self, path: str) -> Optional[bytes]:
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise_if_link_loop(exc, path)
            raise

    def open_log(self, path: str, size: int, chunks=None) -> LogBytes:
        if chunks is None:
            mapping_class = _file_mapping_class()
            try:
                if mapping_class is not None:
                    return MappedLog(path, size, mapping_class)
            except CannotMap:
                mapping_class = None  # read below, as without the compiled module
        from .remote import FetchedLog

        if chunks is not None:
            reader = FileReader(path)
            return FetchedLog(path, size, reader.pread, chunks, on_close=reader.close)
        # A plain mmap would let a shrinking file kill the process: read it instead.
        reader = ShrinkAwareFileReader(path, size)
        try:
            reader.check()
        except BaseException:
            reader.close()
            raise
        return FetchedLog(path, size, reader.pread, on_close=reader.close)

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
        except OSError as exc:
            raise_if_link_loop(exc, path)
            raise

    def join(self, directory: str, name: str) -> str:
        return os.path.join(directory, name)

    @staticmethod
    def basename(path: str) -> str:
        return os.path.basename(path.rstrip(os.sep))

    @staticmethod
    def dirname(path: str) -> str:
        return os.path.dirname(path.rstrip(os.sep))


def _is_dir(entry: os.DirEntry) -> bool:
    """Whether a listed entry is a directory, or a link to one (a link that loops or
    dangles is not)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


LOCAL = LocalStore()


def _local():
    return LOCAL
