"""Errors of the segment-log writer. Each names the option, column, topic or file at fault.

Bad options raise the InvalidOptionError that reads raise too (segmentlog_datasource.errors).
"""
import errno
import os

from ..errors import InvalidInputError, WriteError  # noqa: F401 (the writer's errors, all here)


class TopicLayoutError(WriteError):
    """An existing topic's directories do not allow this write (partition count, live segment,
    damaged tail)."""


class ConcurrentWriteError(WriteError):
    """Another write holds the topic, or changed it while this write ran."""


class WriteAbortedError(WriteError):
    """The write was aborted (or already finished) and can no longer be used."""


class SinkStateError(WriteError):
    """A streaming sink's record of its micro-batches does not match the log (writer/stream.py)."""


# A write that needs more room than the filesystem (or a quota, or RLIMIT_FSIZE) allows.
SPACE_ERRNOS = frozenset(
    e for e in (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", None)) if e is not None
)


ABANDONED = "the write was abandoned and the log dir was left as it was"


class OutOfSpaceError(WriteError, OSError):
    """A write ran out of space (ENOSPC, EDQUOT, or EFBIG from a file size limit) and was
    abandoned; the log dir is left as it was (unless `outcome` says otherwise).

    An OSError: `errno`, `strerror` and `filename` (the file being written) are those of
    the original error, which is also its `__cause__`.
    """

    def __init__(self, code, strerror, filename, action: str = "writing",
                 outcome: str = ABANDONED):
        OSError.__init__(self, code, strerror or os.strerror(code), filename)
        self.action = action
        self.outcome = outcome

    def __str__(self) -> str:
        reason = self.strerror or os.strerror(self.errno)
        reason = reason[:1].lower() + reason[1:]
        return (f"{reason} while {self.action} {self.filename}: {self.outcome}; free space "
                f"on that filesystem (or raise the quota or file size limit) and retry")


def raise_out_of_space(exc: BaseException, path: str, action: str = "writing",
                       outcome: str = ABANDONED) -> None:
    """Raise `exc` as an OutOfSpaceError about `path` (its cause: `exc`) if it is a space
    error not converted yet; otherwise return, for the caller to re-raise `exc`:

        except OSError as exc:
            raise_out_of_space(exc, path)
            raise
    """
    if isinstance(exc, OSError) and not isinstance(exc, OutOfSpaceError) and \
            exc.errno in SPACE_ERRNOS:
        raise OutOfSpaceError(exc.errno, exc.strerror, path, action, outcome) from exc
