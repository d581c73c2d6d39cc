"""Publishing a commit: the renames that make staged partitions visible.

* new segments of an existing partition: each segment's indexes before its `.log`;
* a partition of a topic the write creates: the whole directory at once;
* an overwritten partition: an atomic exchange of the directories where the kernel has
  one, the old directory going to the staging area's trash (deleted with it);
* a partition an overwrite drops (fewer partitions): moved to the trash.

Every rename is planned before the first one runs and written to a journal in the
staging directory (fsynced, renamed into place). A failure undoes the renames done so far
in reverse. A process killed in between undoes nothing, so whoever next finds the journal
(`recover`: the next write, once the owner is gone, or the job's own abort) finishes the
publish, or rolls it back when the journal says a rollback had begun. Each step is
recognised as done or not by the inode at its source and destination, so recovery can
run (and be killed) any number of times.

The journal also holds the publish's checkpoint changes (checkpointing.py): made once
every rename is done, whoever finishes the publish; undone before any rename is undone.
"""
import fcntl
import json
import os
import signal
import time
import uuid
from abc import ABC, abstractmethod
from typing import List, Optional

from ..format.log import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, \
    partition_dir_name, segment_file_name

# The journal (in the staging directory while publishing runs), the rollback mark beside
# it and the publish token in the log dir: readers rely on them too.
from ..format.pending import JOURNAL, PUBLISH_TOKEN, ROLLBACK

from .checkpointing import CheckpointChanges
from .errors import SPACE_ERRNOS, ConcurrentWriteError, WriteError, raise_out_of_space
from .fsops import fsync_dir, remove_if_there, rename_exchange

JOURNAL_VERSION = 1
# Test hook: the process SIGKILLs itself right after its Nth publishing rename (kill tests),
# a checkpoint file's replacement counting as one.
KILL_HOOK = "SEGMENTLOG_TEST_KILL_AT_STEP"
# Test hook: the process stops itself (SIGSTOP) right after its Nth publishing rename, for
# readers to look at a publish in progress; SIGCONT lets it go on.
STOP_HOOK = "SEGMENTLOG_TEST_STOP_AT_STEP"


def _step_hook(name: str) -> Optional[int]:
    value = os.environ.get(name)
    return int(value) if value and value.strip().isdigit() else None


class PublishAction(ABC):
    """One publishing unit; `steps` plans its renames (checking what it can beforehand)."""

    @abstractmethod
    def steps(self) -> List[dict]:
        ...


def _ino(path: str) -> Optional[int]:
    try:
        return os.lstat(path).st_ino
    except FileNotFoundError:
        return None


def _move(source: str, destination: str) -> dict:
    ino = _ino(source)
    if ino is None:
        raise WriteError(f"{source} is missing; cannot publish it")
    return {"kind": "move", "from": source, "to": destination, "ino": ino}


class _Runner:
    """Carries out steps (paths relative to the log dir), counting renames for the hook."""

    def __init__(self, logdir: str):
        self.logdir = logdir
        self.renames = 0
        self.kill_at = _step_hook(KILL_HOOK)
        self.stop_at = _step_hook(STOP_HOOK)

    def _path(self, relative: str) -> str:
        return os.path.join(self.logdir, relative)

    def _done_rename(self):
        self.renames += 1
        if self.kill_at is not None and self.renames == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.stop_at is not None and self.renames == self.stop_at:
            os.kill(os.getpid(), signal.SIGSTOP)

    def rename(self, source: str, destination: str) -> None:
        if os.path.lexists(destination):  # never replace what someone else put there
            raise ConcurrentWriteError(f"{destination} appeared while this write ran")
        os.rename(source, destination)
        self._done_rename()

    def exchange(self, a: str, b: str) -> bool:
        if not rename_exchange(a, b):
            return False
        self._done_rename()
        return True

    def _broken(self, step, where):
        raise WriteError(
            f"cannot {where} the publishing step {json.dumps(step)} in {self.logdir}: its files "
            f"are neither where the step started nor where it ends (changed by hand?)"
        )

    def forward(self, step: dict) -> None:
        if step["kind"] == "move":
            source, destination = self._path(step["from"]), self._path(step["to"])
            if _ino(destination) == step["ino"]:
                return
            if _ino(source) != step["ino"]:
                self._broken(step, "finish")
            self.rename(source, destination)
            return
        staged, target, trash = (self._path(step[k]) for k in ("staged", "target", "trash"))
        new, old = step["new"], step["old"]
        if _ino(target) == new:
            if _ino(staged) == old:  # exchanged, old directory not yet in the trash
                self.rename(staged, trash)
            return
        if _ino(target) == old and _ino(staged) == new:
            if self.exchange(staged, target):  # readers see old or new, never neither
                self.rename(staged, trash)
                return
            self.rename(target, trash)
        if _ino(target) is None and _ino(trash) == old and _ino(staged) == new:
            self.rename(staged, target)
            return
        self._broken(step, "finish")

    def backward(self, step: dict) -> None:
        if step["kind"] == "move":
            source, destination = self._path(step["from"]), self._path(step["to"])
            if _ino(source) == step["ino"]:
                return
            if _ino(destination) != step["ino"]:
                self._broken(step, "undo")
            self.rename(destination, source)
            return
        staged, target, trash = (self._path(step[k]) for k in ("staged", "target", "trash"))
        new, old = step["new"], step["old"]
        if _ino(target) == old:
            return
        if _ino(target) == new and _ino(trash) == old and _ino(staged) is None:
            self.rename(trash, staged)  # back to the exchanged state, then swap back
        if _ino(target) == new and _ino(staged) == old:
            if self.exchange(staged, target):
                return
            self.rename(staged, trash)
            self.rename(target, staged)
        if _ino(target) is None and _ino(trash) == old:
            self.rename(trash, target)
            return
        self._broken(step, "undo")


def _write_journal(path: str, data: dict) -> int:
    """Write `data` to `path` atomically and durably; returns an fd holding its flock."""
    temporary = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
    except OSError as exc:
        raise_out_of_space(exc, path)
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held while publishing: recovery waits for it
        payload = json.dumps(data).encode("utf-8")
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.rename(temporary, path)
        fsync_dir(os.path.dirname(path))
    except BaseException as exc:
        os.close(fd)
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise_out_of_space(exc, path)
        raise
    return fd


def _new_publish_token(logdir: str, staging_dir: str, job_id: str) -> None:
    """Replace the log dir's publish token, after the journal and before any rename: a
    reader whose listing this publish overlaps sees the token change and lists again
    (format/pending.py). Written in the staging directory first, so that a kill leaves
    nothing beside the token. Not fsynced: it matters to readers running now, not after
    a crash."""
    path = os.path.join(logdir, PUBLISH_TOKEN)
    temporary = os.path.join(staging_dir, f"publish-token-{uuid.uuid4().hex[:8]}")
    try:
        fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        try:
            os.write(fd, json.dumps({"job": job_id, "token": uuid.uuid4().hex}).encode())
        finally:
            os.close(fd)
        os.rename(temporary, path)
    except BaseException as exc:
        remove_if_there(temporary)
        raise_out_of_space(exc, path)
        raise


def _mark_rollback(staging_dir: str) -> None:
    """Best effort where space is short: a rollback killed without its mark is finished
    forwards by recovery instead, which leaves each partition whole too."""
    try:
        fd = os.open(os.path.join(staging_dir, ROLLBACK), os.O_CREAT | os.O_WRONLY, 0o644)
    except OSError as exc:
        if exc.errno in SPACE_ERRNOS:  # no inode left; the undo itself needs none
            return
        raise
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(staging_dir)


def _finish_journal(staging_dir: str, fd: int) -> None:
    """The publish is settled: the journal goes first, so nothing replays it."""
    try:
        os.unlink(os.path.join(staging_dir, JOURNAL))
        try:
            os.unlink(os.path.join(staging_dir, ROLLBACK))
        except FileNotFoundError:
            pass
    finally:
        os.close(fd)


def publish(actions: List[PublishAction], staging_dir: str, logdir: str, job_id: str = "",
            checkpoints: Optional[CheckpointChanges] = None) -> None:
    """Apply every action in order, then the checkpoint changes, journaled; on failure
    undo what was applied and re-raise."""
    if checkpoints is None:
        checkpoints = CheckpointChanges()
    steps = []
    for action in actions:
        steps.extend(action.steps())
    relative = [{k: (os.path.relpath(v, logdir) if k in ("from", "to", "staged", "target",
                                                         "trash") else v)
                 for k, v in step.items()} for step in steps]
    fd = _write_journal(os.path.join(staging_dir, JOURNAL),
                        {"version": JOURNAL_VERSION, "job": job_id, "steps": relative,
                         "checkpoints": checkpoints.to_journal()})
    try:
        _new_publish_token(logdir, staging_dir, job_id)
    except BaseException:
        _finish_journal(staging_dir, fd)  # nothing renamed yet
        raise
    runner = _Runner(logdir)
    done = 0
    try:
        for step in relative:
            runner.forward(step)
            done += 1
        checkpoints.apply(logdir, forward=True, after_rename=runner._done_rename)
    except BaseException as exc:
        try:
            _mark_rollback(staging_dir)
            checkpoints.apply(logdir, forward=False)  # nothing claimed is unpublished
            for step in reversed(relative[:done + 1]):  # the failed step may be half done
                runner.backward(step)
        except BaseException as undo_error:
            os.close(fd)  # the journal stays: the next recovery rolls back the rest
            if not isinstance(exc, Exception) or not isinstance(undo_error, Exception):
                raise
            # (moving a file back can need room too: a directory block on ext4)
            raise WriteError(
                f"publishing into {logdir} failed ({exc}), and undoing the renames done so "
                f"far failed too ({undo_error}). The journal {os.path.join(staging_dir, JOURNAL)} "
                f"stays: aborting the write undoes the rest, and so does the next write in "
                f"{logdir} once this process is gone"
            ) from undo_error
        _finish_journal(staging_dir, fd)
        raise_out_of_space(exc, logdir, "publishing into")  # undone: the log is as it was
        raise
    _finish_journal(staging_dir, fd)


def has_journal(staging_dir: str) -> bool:
    return os.path.exists(os.path.join(staging_dir, JOURNAL))


def recover(staging_dir: str, logdir: str, roll_back: bool = False,
            wait_seconds: float = 60.0) -> Optional[str]:
    """Settle an interrupted publish in `staging_dir`: finish it, or undo it when the
    journal says a rollback had begun or `roll_back` asks for it (the job's own abort).
    Returns "forward", "back" or None (no journal). Raises WriteError if a step can be
    neither finished nor undone; the journal then stays."""
    path = os.path.join(staging_dir, JOURNAL)
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a live process is publishing or recovering it
                if time.monotonic() > deadline:
                    raise ConcurrentWriteError(
                        f"{path} stays locked: another process is still publishing that write"
                    ) from None
                time.sleep(0.05)
                continue
            if os.fstat(fd).st_nlink == 0:
                continue  # settled meanwhile (or replaced): look again
            with os.fdopen(os.dup(fd), "rb") as handle:
                journal = json.loads(handle.read().decode("utf-8"))
            backward = roll_back or os.path.exists(os.path.join(staging_dir, ROLLBACK))
            runner = _Runner(logdir)
            runner.kill_at = runner.stop_at = None  # the hooks are for publishing
            checkpoints = CheckpointChanges.from_journal(journal.get("checkpoints"))
            if backward:
                _mark_rollback(staging_dir)
                checkpoints.apply(logdir, forward=False)
                for step in reversed(journal["steps"]):
                    runner.backward(step)
            else:
                for step in journal["steps"]:
                    runner.forward(step)
                checkpoints.apply(logdir, forward=True)  # the publish is complete only now
            os.unlink(path)
            try:
                os.unlink(os.path.join(staging_dir, ROLLBACK))
            except FileNotFoundError:
                pass
            return "back" if backward else "forward"
        finally:
            os.close(fd)


def trash_path(staging_dir: str, topic: str, partition: int) -> str:
    """Where a replaced or dropped partition directory goes; creates the trash directory."""
    trash = os.path.join(staging_dir, "trash")
    os.makedirs(trash, exist_ok=True)
    return os.path.join(trash, partition_dir_name(topic, partition))


class NewPartitionDir(PublishAction):
    """A partition directory of a topic the write creates."""

    def __init__(self, staged: str, target: str):
        self.staged, self.target = staged, target

    def steps(self):
        if os.path.lexists(self.target):
            raise ConcurrentWriteError(f"{self.target} appeared while this write ran")
        return [_move(self.staged, self.target)]


class ReplacePartitionDir(PublishAction):
    """Overwrite: swap the new partition directory in, the old one out to the trash."""

    def __init__(self, staged: str, target: str, trash: str):
        self.staged, self.target, self.trash = staged, target, trash

    def steps(self):
        new, old = _ino(self.staged), _ino(self.target)
        if new is None or old is None:
            raise ConcurrentWriteError(f"{self.target} disappeared while this write ran")
        return [{"kind": "replace", "staged": self.staged, "target": self.target,
                 "trash": self.trash, "new": new, "old": old}]


class RemovePartitionDir(PublishAction):
    """A partition an overwrite with fewer partitions no longer has."""

    def __init__(self, target: str, trash: str):
        self.target, self.trash = target, trash

    def steps(self):
        return [_move(self.target, self.trash)]


class AppendSegments(PublishAction):
    """New segments of an existing partition: indexes first, then the .log.

    A reader listing the directory only sees a segment once its .log is there, and by
    then its indexes are complete. An empty last segment with the same base offset (one
    that never got data) is moved aside first (restored on undo).
    """

    def __init__(self, staged: str, target: str, bases: List[int]):
        self.staged, self.target, self.bases = staged, target, bases

    def steps(self):
        steps = []
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
                        steps.append(_move(path, os.path.join(aside, os.path.basename(path))))
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
                name = segment_file_name(base, suffix)
                steps.append(_move(os.path.join(self.staged, name),
                                   os.path.join(self.target, name)))
        return steps
