"""File system calls the writer needs beyond `os`: an atomic directory exchange, in-kernel
ranged copies, positional reads, a tree removal that tolerates stragglers, and small
files replaced whole (the checkpoint files a write keeps beside its segments).

Each falls back (or reports that it cannot help) where the platform lacks the call.
"""
import errno
import os
import shutil
import time
import uuid

from ..format.pending import REMOVING_MARK  # readers skip areas being removed

from .errors import WriteError, raise_out_of_space


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
        func = None
        try:
            import ctypes
            import ctypes.util

            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            func = libc.renameat2
            func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                             ctypes.c_uint]
            func.restype = ctypes.c_int
        except (OSError, AttributeError):
            func = None
        _RENAMEAT2.append(func)
    return _RENAMEAT2[0]


# -------------------------------------------------------------- reads and copies

_COPY_FILE_RANGE = [hasattr(os, "copy_file_range")]


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


def copy_range(source_fd: int, target_fd: int, source_pos: int, target_pos: int,
               count: int) -> bool:
    """Copy bytes between files inside the kernel; False when that is not possible here
    (nothing was copied then)."""
    if not _COPY_FILE_RANGE[0]:
        return False
    done = 0
    try:
        while done < count:
            copied = os.copy_file_range(source_fd, target_fd, count - done,
                                        source_pos + done, target_pos + done)
            if copied == 0:
                raise WriteError("a staging file is shorter than its task reported")
            done += copied
    except OSError as exc:
        if done == 0 and exc.errno in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP,
                                       errno.ENOTSUP, errno.EBADF, errno.EPERM):
            _COPY_FILE_RANGE[0] = False
            return False
        raise
    return True


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
