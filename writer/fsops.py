"""File system calls the writer needs beyond `os`: an atomic directory exchange, blocks
reserved before a large write, positional reads, a tree removal that tolerates
stragglers, and small files replaced whole (the checkpoint files a write keeps beside its
segments).

Each falls back (or reports that it cannot help) where the platform lacks the call.
"""
import errno
import os
import shutil
import time
import uuid

from ..format.pending import REMOVING_MARK  # readers skip areas being removed

from .errors import SPACE_ERRNOS, raise_out_of_space


# ------------------------------------------------------------------ rename exchange

def rename_exchange(a: str, b: str) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    func = _renameat2()
    if func is None:
        return False
    import ctypes

    result = func(-100, os.fsencode(a), -100, os.fsencode(b), 2)  # AT_FDCWD, RENAME_EXCHANGE
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), a, None, b)


_RENAMEAT2 = []


def _renameat2():
    if not _RENAMEAT2:
        _RENAMEAT2.append(_libc_function(
            "renameat2", lambda c: [c.c_int, c.c_char_p, c.c_int, c.c_char_p, c.c_uint]))
    return _RENAMEAT2[0]


def _libc_function(name: str, argtypes):
    """The C library's `name` through ctypes (errno kept, int result), None where this
    platform has no such function. `argtypes(ctypes)` gives its argument types. The
    process's own symbols are searched: finding libc by name would start a subprocess."""
    try:
        import ctypes

        func = getattr(ctypes.CDLL(None, use_errno=True), name)
        func.argtypes = argtypes(ctypes)
        func.restype = ctypes.c_int
        return func
    except (OSError, AttributeError, ImportError):
        return None


# ------------------------------------------------------------------ preallocation

PREALLOCATE_MIN = 256 << 10  # smaller writes skip it: a call, and ctypes' import, saved
# Where reserving first was measured to pay (statfs f_type): ext4's magic, which ext2 and
# ext3 share (they refuse the call). On tmpfs a reservation zeroes the pages the write
# then fills: 10% slower there.
PREALLOCATING_FILESYSTEMS = frozenset({0xEF53})
_FALLOC_FL_KEEP_SIZE = 1
_PREALLOCATION_CALLS = []


def _preallocation_calls():
    """(fallocate, fstatfs) through ctypes, or None where the platform lacks either."""
    if not _PREALLOCATION_CALLS:
        fallocate = _libc_function("fallocate",
                                   lambda c: [c.c_int, c.c_int, c.c_int64, c.c_int64])
        fstatfs = _libc_function("fstatfs", lambda c: [c.c_int, c.c_void_p])
        _PREALLOCATION_CALLS.append(None if fallocate is None or fstatfs is None
                                    else (fallocate, fstatfs))
    return _PREALLOCATION_CALLS[0]


def preallocate(fd: int, position: int, length: int) -> None:
    """Reserve the blocks a write of `length` bytes at `position` will fill, before it is
    written (Linux fallocate, the file's size kept), on the file systems where that pays.
    Unreserved, every page of a buffered write costs ext4 a delayed-allocation reservation
    of its own: reserved first, 100 MB of staged batches took two thirds of the time. A
    full disk raises OSError here, before a byte is written; elsewhere, or where the call
    is refused, the write allocates as it goes, as before."""
    if length < PREALLOCATE_MIN:
        return
    calls = _preallocation_calls()
    if calls is None or filesystem_type(fd) not in PREALLOCATING_FILESYSTEMS:
        return
    if calls[0](fd, _FALLOC_FL_KEEP_SIZE, position, length) == 0:
        return
    import ctypes

    err = ctypes.get_errno()
    if err in SPACE_ERRNOS:
        raise OSError(err, os.strerror(err))
    # any other refusal (no such call on this file system, an interrupted call): the
    # write allocates as it goes, and reports its own errors


def filesystem_type(fd: int):
    """The magic number of the file system `fd` is on (statfs f_type), None if unknown."""
    calls = _preallocation_calls()
    if calls is None:
        return None
    import ctypes

    info = (ctypes.c_long * 32)()  # struct statfs: f_type first, under 32 words
    return int(info[0]) if calls[1](fd, info) == 0 else None


# -------------------------------------------------------------------- reads

def read_at(fd: int, count: int, position: int) -> bytearray:
    """`count` bytes from `position` into a writable buffer (fewer at end of file)."""
    buffer = bytearray(count)
    if hasattr(os, "preadv"):
        got = os.preadv(fd, [buffer], position)
        return buffer if got == count else buffer[:got]
    got = 0
    while got < count:
        chunk = os.pread(fd, count - got, position + got)
        if not chunk:
            break
        buffer[got : got + len(chunk)] = chunk
        got += len(chunk)
    return buffer if got == count else buffer[:got]


# ------------------------------------------------------------------------ removal

def remove_tree(path: str) -> None:
    for _ in range(5):  # a straggling task may add a file while the tree is removed
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)
    shutil.rmtree(path, ignore_errors=True)


# A staging directory being deleted is renamed to `<name>~removing-<nonce>` first ('~' is
# in no job id): whatever a process killed while deleting it leaves is then known to be
# garbage, rather than a staging directory whose owner file is already gone.


def remove_staging(path: str) -> None:
    """Delete a staging directory (see REMOVING_MARK)."""
    aside = f"{path}{REMOVING_MARK}{uuid.uuid4().hex[:8]}"
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return
    except OSError:
        aside = path
    remove_tree(aside)


# ------------------------------------------------------------- small files in place

def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temporary_name(path: str) -> str:
    """Where `replace_file` stages `path`'s new content (Kafka's name for it too). One
    name per file, so a copy a killed process left is overwritten by the next update."""
    return path + ".tmp"


def replace_file(path: str, data: bytes) -> None:
    """Replace `path` with `data` as Kafka replaces its checkpoint files: written to a
    temporary file beside it, fsynced, renamed over it, and the directory fsynced, so a
    reader (or a crash) finds the old content or the new, never part of either. A space
    error is an OutOfSpaceError naming `path`."""
    temporary = temporary_name(path)
    try:
        try:
            fd = os.open(temporary, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(temporary, path)
        except BaseException:
            remove_if_there(temporary)
            raise
        fsync_dir(os.path.dirname(path))
    except OSError as exc:
        raise_out_of_space(exc, path)
        raise


def remove_file(path: str) -> None:
    """Delete `path` (if there) durably: the directory is fsynced afterwards."""
    if remove_if_there(path):
        fsync_dir(os.path.dirname(path))


def remove_if_there(path: str) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True
