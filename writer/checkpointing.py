"""The files a Kafka broker keeps beside its segments, as a local write leaves them (#21).

In each partition directory a write publishes into:

    leader-epoch-checkpoint   every leader epoch of the partition's batches and the offset
                              it starts at; the write's epoch (option leaderEpoch, default
                              the partition's current one) is stamped on its batches and
                              gets an entry when it is new
    partition.metadata        the topic id (option topicId, else the topic's own, else a
                              new one), the same in every partition of the topic

In the log dir, for each partition a write publishes into:

    replication-offset-checkpoint
                              its new log end offset (the high watermark readers stop at)
    recovery-point-offset-checkpoint
                              kept as it was (segments are not fsynced: no flush is
                              claimed, and a broker's recovery checks the written ones)
    log-start-offset-checkpoint, cleaner-offset-checkpoint
                              no entry (nor a recovery point) for a partition an
                              overwrite recreates or drops
                              (Kafka lists a log start only when it is above the first
                              segment's base); the log start file exists after any write

A new or overwritten partition directory gets its two files before it is published: they
arrive with it. Everything else changes after the publish's renames, as the
`CheckpointChanges` in the publish's journal say: a publish killed after its renames is
finished by the next write, which makes the changes then, and one rolled back has them
undone before its renames are. So the checkpoints never claim an offset that is not
published. Writes to other topics change their own entries of the shared log dir files
meanwhile, so those are read, changed and replaced under the log dir's checkpoint lock
(lockfiles.checkpoints_lock), each file whole (fsops.replace_file).
"""
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import CheckpointError, InvalidOptionError, SegmentLogError
from ..format.checkpoints import (
    CLEANER_FILE, HIGH_WATERMARK_FILE, LEADER_EPOCH_FILE, LOG_START_FILE,
    PARTITION_METADATA_FILE, RECOVERY_POINT_FILE, format_leader_epochs,
    format_offset_checkpoint, format_partition_metadata, new_topic_id, parse_leader_epochs,
    parse_offset_checkpoint, parse_partition_metadata,
)
from ..format.log import PartitionLog, partition_dir_name

from .errors import TopicLayoutError, raise_out_of_space
from .fsops import remove_file, remove_if_there, replace_file, temporary_name
from .lockfiles import checkpoints_lock
from .logdir import inspect_tail, partition_dir

# In the order a publish updates them (undoing goes the other way): the high watermark,
# where readers stop, first, so that no checkpoint is ever past what a read returns.
OFFSET_FILES = (HIGH_WATERMARK_FILE, RECOVERY_POINT_FILE, LOG_START_FILE, CLEANER_FILE)
# Those a write leaves in every log dir it publishes into (the cleaner's is Kafka's own).
WRITTEN_OFFSET_FILES = (HIGH_WATERMARK_FILE, RECOVERY_POINT_FILE, LOG_START_FILE)

Key = Tuple[str, int]


def read_optional(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def read_offsets(path: str) -> Optional[Dict[Key, int]]:
    """{(topic, partition): offset} of an offset checkpoint file; None when it is missing."""
    data = read_optional(path)
    if data is None:
        return None
    return {key: entry.offset for key, entry in parse_offset_checkpoint(data, path).items()}


# ------------------------------------------------------------------- topic ids

def existing_topic_id(logdir: str, topic: str, partitions: Sequence[int], strict: bool = True
                      ) -> Optional[Tuple[str, str]]:
    """(topic id, the partition.metadata it is in) of an existing topic; None when none of
    its partition directories has that file. A damaged file, or directories that disagree,
    are an error; not `strict`, they count as no id."""
    found = None
    for partition in partitions:
        path = os.path.join(partition_dir(logdir, topic, partition), PARTITION_METADATA_FILE)
        data = read_optional(path)
        if data is None:
            continue
        try:
            topic_id = parse_partition_metadata(data, path)
        except CheckpointError:
            if strict:
                raise
            continue
        if found is None:
            found = (topic_id, path)
        elif found[0] != topic_id:
            if not strict:
                return None
            raise TopicLayoutError(
                f"topic {topic!r} in {logdir} has two topic ids: {found[0]} in {found[1]} and "
                f"{topic_id} in {path}; a topic has one. Correct one of these files"
            )
    return found


def choose_topic_id(option: Optional[str], logdir: str, topic: str,
                    partitions: Sequence[int], strict: bool = True) -> str:
    """The id a write gives `topic`: the option's, else the topic's own, else a new one."""
    existing = existing_topic_id(logdir, topic, partitions, strict) if partitions else None
    if option is not None and existing is not None and option != existing[0]:
        raise InvalidOptionError(
            f"option 'topicId' is {option}, but topic {topic!r} in {logdir} already has "
            f"topic id {existing[0]} ({existing[1]}); a topic keeps its id. Leave the option "
            f"out, or give {existing[0]}", "topicId")
    if option is not None:
        return option
    return existing[0] if existing is not None else new_topic_id()


# --------------------------------------------------------------- leader epochs

@dataclass
class EpochHistory:
    """An existing partition's leader epochs, as a write finds them."""

    entries: List[Tuple[int, int]]  # (epoch, start offset), epochs growing
    file_data: Optional[bytes]  # its leader-epoch-checkpoint; None: it has none
    current: int  # its current epoch: its last entry's or last batch's; 0 if neither

    def extended(self, epoch: int, start: int) -> List[Tuple[int, int]]:
        """The entries once a write at `epoch` appends from offset `start`."""
        if not self.entries or epoch > self.entries[-1][0]:
            return self.entries + [(epoch, start)]
        return list(self.entries)


NEW_PARTITION = EpochHistory([], None, 0)


def epoch_history(directory: str, log_end: int, last_batch_epoch: int) -> EpochHistory:
    """The epochs of a partition a write appends to: its leader-epoch-checkpoint's entries
    (less any starting past its log end, as a broker truncates them when it loads the
    log), or, when it has no such file, those its batches carry."""
    path = os.path.join(directory, LEADER_EPOCH_FILE)
    data = read_optional(path)
    if data is not None:
        entries = [(e.epoch, e.start_offset) for e in parse_leader_epochs(data, path)
                   if e.start_offset <= log_end]
    else:
        entries = epochs_in_batches(directory, last_batch_epoch)
    last = entries[-1][0] if entries else -1
    return EpochHistory(entries, data, max(last, last_batch_epoch, 0))


def epochs_in_batches(directory: str, last_batch_epoch: int) -> List[Tuple[int, int]]:
    """(epoch, first offset) of each epoch the partition's magic-2 batches carry, as a
    broker rebuilds its leader-epoch cache. When the first batch has the last batch's
    epoch every batch has it (epochs never shrink), so only then are the headers read."""
    try:
        log = PartitionLog.open(directory)
        first = next((header for segment in log.segments for header in segment.iter_headers()),
                     None)
        if first is None:
            return []
        if first.magic == 2 and first.partition_leader_epoch == last_batch_epoch:
            return [] if last_batch_epoch < 0 else [(last_batch_epoch, first.base_offset)]
        entries: List[Tuple[int, int]] = []
        for segment in log.segments:
            for header in segment.iter_headers():
                epoch = header.partition_leader_epoch if header.magic == 2 else -1
                if epoch >= 0 and (not entries or epoch > entries[-1][0]):
                    entries.append((epoch, header.base_offset))
        return entries
    except SegmentLogError as exc:
        raise TopicLayoutError(
            f"cannot append to {directory}: it has no {LEADER_EPOCH_FILE}, and reading the "
            f"leader epochs of its batches failed ({exc})"
        ) from exc


def append_start(directory: str, leader_epoch: Optional[int]) -> Tuple[EpochHistory, int, int]:
    """(its epochs, the epoch a write stamps, the offset it starts at) for a write
    appending to the existing partition at `directory`; `leader_epoch`: the option."""
    tail = inspect_tail(directory)
    history = epoch_history(directory, tail.log_end_offset, tail.leader_epoch)
    return history, choose_epoch(leader_epoch, history.current, directory), tail.log_end_offset


def replaced_partition_epoch(directory: str) -> int:
    """The current epoch of a partition an overwrite replaces, as far as it can be read
    (the partition is being replaced, so a damaged one is no error): 0 if unknown."""
    epochs = [0]
    path = os.path.join(directory, LEADER_EPOCH_FILE)
    data = read_optional(path)
    try:
        epochs += [entry.epoch for entry in parse_leader_epochs(data or b"", path)[-1:]]
    except SegmentLogError:
        pass
    try:
        epochs.append(inspect_tail(directory).leader_epoch)
    except SegmentLogError:
        pass
    return max(epochs)


def choose_epoch(option: Optional[int], current: int, directory: str) -> int:
    """The epoch a write stamps on a partition's batches: the option's, which may not be
    below the partition's current epoch, or that epoch."""
    if option is None:
        return current
    if option < current:
        raise InvalidOptionError(
            f"option 'leaderEpoch' is {option}, below the current leader epoch {current} of "
            f"{directory}: leader epochs only grow. Leave the option out to write at epoch "
            f"{current}, or give {current} or more", "leaderEpoch")
    return option


def write_new_partition_files(directory: str, epoch: int, topic_id: str) -> None:
    """The leader-epoch-checkpoint and partition.metadata of a partition directory a write
    creates (or recreates), written into it while it is staged: it is published whole,
    by a rename, so (like its segments) they are written in place."""
    for name, content in ((LEADER_EPOCH_FILE, format_leader_epochs([(epoch, 0)])),
                          (PARTITION_METADATA_FILE, format_partition_metadata(topic_id))):
        path = os.path.join(directory, name)
        try:
            with open(path, "wb") as handle:
                handle.write(content)
        except OSError as exc:
            raise_out_of_space(exc, path)
            raise


# --------------------------------------------------------------------- changes

class CheckpointChanges:
    """What one publish changes in the checkpoint files, with what they held before, so
    that it can be made after the renames (forward) or undone before they are (backward),
    any number of times: each change sets a value, and a file already holding it is left
    alone. Kept in the publish's journal (`to_journal`)."""

    def __init__(self, logdir: Optional[str] = None):
        # offset file name -> {(topic, partition): [before, after]}; None: no entry
        self.offsets: Dict[str, Dict[Key, List[Optional[int]]]] = {}
        # a partition directory's file, relative to the log dir -> [before, after] text;
        # None: no file
        self.files: Dict[str, List[Optional[str]]] = {}
        # offset files that were missing: undoing removes them again when left empty
        self.created: List[str] = []
        self.touched = False  # any partition published or dropped
        self._found: Dict[str, Optional[Dict[Key, int]]] = {}
        if logdir is not None:
            for name in OFFSET_FILES:
                self._found[name] = read_offsets(os.path.join(logdir, name))
            self.created = [name for name in WRITTEN_OFFSET_FILES if self._found[name] is None]

    def published(self, topic: str, partition: int, log_end: int, recreated: bool) -> None:
        """The partition holds committed data up to `log_end`; `recreated`: its directory
        is new (a new topic, or an overwrite). The recovery point, which claims the data
        below it reached the disk, stays where it was: the writer does not fsync segments,
        so a broker recovering after an unclean shutdown checks what was written."""
        self.touched = True
        self._set(HIGH_WATERMARK_FILE, (topic, partition), log_end)
        if recreated:
            for name in (RECOVERY_POINT_FILE, LOG_START_FILE, CLEANER_FILE):
                self._set(name, (topic, partition), None)

    def dropped(self, topic: str, partition: int) -> None:
        """An overwrite removes the partition."""
        self.touched = True
        for name in OFFSET_FILES:
            self._set(name, (topic, partition), None)

    def _set(self, name: str, key: Key, after: Optional[int]) -> None:
        before = (self._found.get(name) or {}).get(key)
        if before is not None or after is not None:
            self.offsets.setdefault(name, {})[key] = [before, after]

    def partition_file(self, relative: str, before: Optional[bytes],
                       after: Optional[bytes]) -> None:
        """A file of an existing partition directory goes from `before` to `after`."""
        if before != after:
            self.files[relative] = [None if before is None else before.decode("utf-8"),
                                    None if after is None else after.decode("utf-8")]

    # ----------------------------------------------------------------- journal
    def to_journal(self) -> dict:
        return {
            "offsets": {name: [[topic, partition, before, after] for (topic, partition),
                               (before, after) in sorted(entries.items())]
                        for name, entries in self.offsets.items()},
            "files": {path: values for path, values in sorted(self.files.items())},
            "created": list(self.created),
            "touched": self.touched,
        }

    @classmethod
    def from_journal(cls, data: Optional[dict]) -> "CheckpointChanges":
        """The changes a journal holds (none for a journal without them)."""
        changes = cls()
        if data:
            changes.offsets = {name: {(topic, int(partition)): [before, after]
                                      for topic, partition, before, after in entries}
                               for name, entries in data.get("offsets", {}).items()}
            changes.files = {path: list(values) for path, values in data.get("files", {}).items()}
            changes.created = list(data.get("created", []))
            changes.touched = bool(data.get("touched"))
        return changes

    # ------------------------------------------------------------------- apply
    def apply(self, logdir: str, forward: bool,
              after_rename: Optional[Callable[[], None]] = None) -> None:
        """Make the changes (`forward`, once every rename is done) or undo them (before
        any rename is undone). Forward, the partition directories' files go first, then
        the shared files in OFFSET_FILES order; backward, everything in reverse."""
        if not self.touched:
            return
        if forward:
            self._apply_files(logdir, 1, after_rename)
            self._apply_offsets(logdir, 1, after_rename)
        else:
            self._apply_offsets(logdir, 0, after_rename)
            self._apply_files(logdir, 0, after_rename)

    def _apply_files(self, logdir: str, side: int, after_rename) -> None:
        for relative, values in sorted(self.files.items()):
            path = os.path.join(logdir, relative)
            wanted = values[side]
            if wanted is None:
                remove_file(path)
            elif read_optional(path) == wanted.encode("utf-8"):
                remove_if_there(temporary_name(path))  # a killed update's
            else:
                replace_file(path, wanted.encode("utf-8"))
                if after_rename is not None:
                    after_rename()

    def _apply_offsets(self, logdir: str, side: int, after_rename) -> None:

        # Only this write changes its partitions' entries, and files are replaced whole:
        # a look without the lock tells whether there is anything to do. Undoing a publish
        # whose checkpoints were never reached (the usual rollback) then needs no lock
        # file, so no room on a full disk.
        if all(self._file_update(logdir, name, side)[0] == "keep" for name in OFFSET_FILES):
            return
        with checkpoints_lock(logdir):
            for name in OFFSET_FILES if side == 1 else reversed(OFFSET_FILES):
                action, path, wanted = self._file_update(logdir, name, side)
                if action == "remove":
                    remove_file(path)
                elif action == "replace":
                    replace_file(path, format_offset_checkpoint(wanted))
                    if after_rename is not None:
                        after_rename()
                elif path is not None:
                    remove_if_there(temporary_name(path))  # a killed update's

    def _file_update(self, logdir: str, name: str, side: int
                     ) -> Tuple[str, Optional[str], Dict[Key, int]]:
        """("keep", "replace" or "remove", the file's path, its entries as wanted) for
        offset file `name`, as it is now; path None when this write has nothing there."""
        forward = side == 1
        changes = self.offsets.get(name, {})
        must_exist = forward and name in WRITTEN_OFFSET_FILES
        if not changes and not must_exist:
            return "keep", None, {}
        path = os.path.join(logdir, name)
        found = read_offsets(path)
        wanted = dict(found or {})
        for key, values in changes.items():
            if values[side] is None:
                wanted.pop(key, None)
            else:
                wanted[key] = values[side]
        if found is None:
            return ("replace" if must_exist or wanted else "keep"), path, wanted
        if not forward and name in self.created and not wanted:
            return "remove", path, wanted  # it was not there before this write
        return ("keep" if found == wanted else "replace"), path, wanted


def relative_partition_file(topic: str, partition: int, name: str) -> str:
    return os.path.join(partition_dir_name(topic, partition), name)
