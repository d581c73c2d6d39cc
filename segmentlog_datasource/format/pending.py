"""Unfinished publishes of segmentlog writes, and the log as it was before them.

A segmentlog write makes its segments visible by renames (local log dirs) or PUTs (object
stores), each listed beforehand in a publish journal in the write's staging area
(`.segmentlog-staging-<job>/publish-journal.json`); the journal is removed once every
rename or PUT is done. That removal is the instant a write becomes visible to readers:
a reader that finds a journal reads the log as it was before that publish, whether the
publish is still running or its writer was killed (until the next write, or the write's
own abort, settles it).

A reader's listing takes time, so a publish can begin in the middle of it. Every
publish therefore first writes its journal, then replaces the log dir's publish token
(`.segmentlog-publishing`, a fresh random value), then renames or PUTs. A reader reads
the token, looks for journals, lists, and reads the token again: the same token means no
publish began in between, and one begun before has its journal seen by the look.

Journals come in two forms:
* local: `steps`, each a rename relative to the log dir: {"kind": "move", "from", "to",
  "ino"} (a file or directory, recognised by its inode), or {"kind": "replace",
  "staged", "target", "trash", "new", "old"} (an overwritten partition directory);
* object store: `objects`, each [final key, staged key, ETag of the empty object it
  replaces or None]; every final key was absent (or an empty segment) before.

This module only reads: a reader never writes to the log dir.
"""
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from ..errors import SegmentLogError
from ..storage import Store, TreeView

STAGING_PREFIX = ".segmentlog-staging-"  # a write's private area; readers skip dot-names
JOURNAL = "publish-journal.json"  # in the staging area while a publish runs
ROLLBACK = "publish-rollback"  # beside it: a rollback had begun
PUBLISH_TOKEN = ".segmentlog-publishing"  # in the log dir, replaced as each publish begins
REMOVING_MARK = "~removing-"  # a staging area being deleted (its publish settled)
# How many times a reader lists again when a publish began during its listing.
LISTING_ATTEMPTS = 20


@dataclass
class BeforePublishes:
    """What a reader changes in its listing of one log dir to see it as it was before the
    unfinished publishes: paths to skip, paths read from elsewhere, checkpoint entries and
    partition files as they were."""
    jobs: List[str] = field(default_factory=list)
    hidden: Set[str] = field(default_factory=set)
    # a partition directory (as the log dir names it) -> where its old copy is now
    moved: Dict[str, str] = field(default_factory=dict)
    # offset checkpoint name -> {(topic, partition): offset before, None: no entry}
    offsets: Dict[str, Dict[Tuple[str, int], Optional[int]]] = field(default_factory=dict)
    # partition directory (as the log dir names it) -> {file name: its bytes before, None:
    # no file}
    files: Dict[str, Dict[str, Optional[bytes]]] = field(default_factory=dict)

    def __bool__(self):
        return bool(self.jobs)

    def extra_dirs(self, logdir: str, store: Store) -> List[str]:
        """Partition directories the log dir held before, now moved away (dropped by an
        overwrite), as the log dir names them."""
        return sorted(path for path in self.moved if store.dirname(path) == logdir)

    def describe(self) -> str:
        return ", ".join(self.jobs)


def staging_journal_names(names: List[str]) -> List[str]:
    """The staging areas among a log dir's entries that may hold a journal."""
    return [name for name in names if name.startswith(STAGING_PREFIX)
            and REMOVING_MARK not in name]


def read_token(store: Store, logdir: str) -> Optional[bytes]:
    try:
        return store.read_optional(store.join(logdir, PUBLISH_TOKEN))
    except NotADirectoryError:  # a file given as the log dir: said by the listing
        return None


def _parse(data: bytes, path: str) -> dict:
    try:
        journal = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SegmentLogError(
            f"{path}: unreadable publish journal of a segmentlog write ({exc}); the next "
            f"write into this log dir settles it, or move the staging directory aside "
            f"once no write runs") from None
    if not isinstance(journal, dict):
        raise SegmentLogError(f"{path}: a publish journal must be a JSON object")
    return journal


def find_journals(store: Store, logdir: str, names: List[str]) -> List[Tuple[str, dict]]:
    """(staging area name, journal) of every unfinished publish in the log dir whose
    entries are `names`."""
    found = []
    for name in staging_journal_names(names):
        path = store.join(store.join(logdir, name), JOURNAL)
        data = store.read_optional(path)
        if data is not None:
            found.append((name, _parse(data, path)))
    return found


def _inode(path: str) -> Optional[int]:
    try:
        return os.lstat(path).st_ino
    except (FileNotFoundError, NotADirectoryError):
        return None


def before_publishes(store: Store, logdir: str, journals: List[Tuple[str, dict]]
                     ) -> BeforePublishes:
    """The log dir as it was before the journals' publishes (see BeforePublishes)."""
    view = BeforePublishes()
    for name, journal in journals:
        view.jobs.append(str(journal.get("job") or name[len(STAGING_PREFIX):]))
        if "objects" in journal:  # keys of the log dir's bucket
            bucket = store.to_fs(logdir).split("/", 1)[0]
            for final_key, _staged, _replaces in journal.get("objects") or []:
                view.hidden.add(store.to_uri(f"{bucket}/{final_key}"))
            continue
        staging = os.path.join(logdir, name)
        for step in journal.get("steps") or []:
            _add_step(view, logdir, staging, step)
        _add_checkpoints(view, logdir, journal.get("checkpoints") or {})
    return view


def _add_step(view: BeforePublishes, logdir: str, staging: str, step: dict) -> None:
    if step.get("kind") == "move":
        source, destination = (os.path.join(logdir, step[k]) for k in ("from", "to"))
        if os.path.commonpath([destination, staging]) == staging:
            # moved out of the log into the staging area (a dropped partition, an empty
            # segment set aside): before, it was where it came from
            if _inode(source) != step["ino"] and _inode(destination) == step["ino"]:
                if os.path.dirname(source) == logdir:
                    view.moved[source] = destination
            return
        if _inode(destination) == step["ino"]:  # moved in: before, it was not there
            view.hidden.add(destination)
        return
    if step.get("kind") == "replace":
        target = os.path.join(logdir, step["target"])
        if _inode(target) == step["old"]:
            return
        for place in ("staged", "trash"):
            where = os.path.join(logdir, step[place])
            if _inode(where) == step["old"]:
                view.moved[target] = where
                return
        view.hidden.add(target)  # the old copy is gone: not something to read as current


def _add_checkpoints(view: BeforePublishes, logdir: str, changes: dict) -> None:
    for name, entries in (changes.get("offsets") or {}).items():
        for topic, partition, before, _after in entries:
            view.offsets.setdefault(name, {})[(topic, int(partition))] = before
    for relative, (before, _after) in (changes.get("files") or {}).items():
        path = os.path.join(logdir, relative)
        view.files.setdefault(os.path.dirname(path), {})[os.path.basename(path)] = \
            None if before is None else before.encode("utf-8")


def listing_changed(message_path: str) -> SegmentLogError:
    return SegmentLogError(
        f"{message_path}: segmentlog writes began publishing during each of "
        f"{LISTING_ATTEMPTS} listings of this log dir, so no listing saw one state of it; "
        f"read again when the writes pause")


def tree_names(tree: TreeView, path: str) -> List[str]:
    try:
        return sorted(tree.names(path))
    except (FileNotFoundError, NotADirectoryError):
        return []
