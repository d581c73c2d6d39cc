"""Publishing a commit: the renames that make staged partitions visible, undone in reverse
order when a later one fails.

* new segments of an existing partition: each segment's indexes before its `.log`;
* a partition of a topic the write creates: the whole directory at once;
* an overwritten partition: an atomic exchange of the directories where the kernel has
  one, the old directory going to the staging area's trash (deleted with it);
* a partition an overwrite drops (fewer partitions): moved to the trash.
"""
import os
from abc import ABC, abstractmethod
from typing import List, Tuple

from ..format.log import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, \
    partition_dir_name, segment_file_name

from .errors import ConcurrentWriteError
from .fsops import rename_exchange


class PublishAction(ABC):
    """One publishing step, undone in reverse order if a later step fails."""

    @abstractmethod
    def apply(self) -> None:
        ...

    @abstractmethod
    def undo(self) -> None:
        ...


def publish(actions: List[PublishAction]) -> None:
    """Apply every action in order; on failure undo those applied and re-raise."""
    done: List[PublishAction] = []
    try:
        for action in actions:
            action.apply()
            done.append(action)
    except BaseException:
        for action in reversed(done):
            try:
                action.undo()
            except OSError:
                pass
        raise


def trash_path(staging_dir: str, topic: str, partition: int) -> str:
    """Where a replaced or dropped partition directory goes; creates the trash directory."""
    trash = os.path.join(staging_dir, "trash")
    os.makedirs(trash, exist_ok=True)
    return os.path.join(trash, partition_dir_name(topic, partition))


class NewPartitionDir(PublishAction):
    """A partition directory of a topic the write creates."""

    def __init__(self, staged: str, target: str):
        self.staged, self.target = staged, target

    def apply(self):
        if os.path.exists(self.target):
            raise ConcurrentWriteError(f"{self.target} appeared while this write ran")
        os.rename(self.staged, self.target)

    def undo(self):
        os.rename(self.target, self.staged)


class ReplacePartitionDir(PublishAction):
    """Overwrite: swap the new partition directory in, the old one out to the trash."""

    def __init__(self, staged: str, target: str, trash: str):
        self.staged, self.target, self.trash = staged, target, trash
        self.exchanged = False

    def apply(self):
        if rename_exchange(self.staged, self.target):  # readers see old or new, never neither
            self.exchanged = True
            os.rename(self.staged, self.trash)
        else:
            os.rename(self.target, self.trash)
            try:
                os.rename(self.staged, self.target)
            except BaseException:
                os.rename(self.trash, self.target)
                raise

    def undo(self):
        if self.exchanged:
            os.rename(self.trash, self.staged)
            rename_exchange(self.staged, self.target)
        else:
            os.rename(self.target, self.staged)
            os.rename(self.trash, self.target)


class RemovePartitionDir(PublishAction):
    """A partition an overwrite with fewer partitions no longer has."""

    def __init__(self, target: str, trash: str):
        self.target, self.trash = target, trash

    def apply(self):
        os.rename(self.target, self.trash)

    def undo(self):
        os.rename(self.trash, self.target)


class AppendSegments(PublishAction):
    """New segments of an existing partition: indexes first, then the .log.

    A reader listing the directory only sees a segment once its .log is there, and by
    then its indexes are complete. An empty last segment with the same base offset (one
    that never got data) is moved aside first and restored on undo.
    """

    def __init__(self, staged: str, target: str, bases: List[int]):
        self.staged, self.target, self.bases = staged, target, bases
        self.moved: List[Tuple[str, str]] = []  # (from, to) renames done, in order

    def apply(self):
        suffixes = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX)
        aside = os.path.join(self.staged, ".replaced")
        for base in self.bases:
            old_log = os.path.join(self.target, segment_file_name(base, LOG_SUFFIX))
            if os.path.exists(old_log):
                if os.path.getsize(old_log) != 0:
                    raise ConcurrentWriteError(
                        f"{old_log} appeared with data while this write ran"
                    )
                os.makedirs(aside, exist_ok=True)
                # The empty .log goes first so that a reader never pairs it with new indexes.
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    path = os.path.join(self.target, segment_file_name(base, suffix))
                    if os.path.exists(path):
                        self._move(path, os.path.join(aside, os.path.basename(path)))
            for suffix in suffixes:
                name = segment_file_name(base, suffix)
                self._move(os.path.join(self.staged, name), os.path.join(self.target, name))

    def _move(self, source: str, destination: str):
        os.rename(source, destination)
        self.moved.append((source, destination))

    def undo(self):
        # Exact reverse order: each new .log leaves before its indexes, and a replaced
        # empty segment comes back .log last.
        for source, destination in reversed(self.moved):
            if os.path.exists(destination):
                os.rename(destination, source)
        self.moved = []
