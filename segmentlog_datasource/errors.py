"""Errors of every layer. Each names the file and byte position, or the option, at fault."""
from typing import Optional


class SegmentLogError(Exception):
    """Base class of every error segmentlog raises."""


class CorruptLogError(SegmentLogError):
    """A segment or index file holds bytes that Kafka would not accept."""

    def __init__(self, path, position, reason):
        self.path = str(path) if path is not None else None
        self.position = position
        self.reason = reason
        where = self.path or "<buffer>"
        if position is not None:
            where = f"{where} at byte {position}"
        super().__init__(f"{where}: {reason}")

    @property
    def remedy(self) -> Optional[str]:
        """What a user can do about it, by the kind of file at fault."""
        path = self.path or ""
        if path.endswith((".index", ".timeindex")):
            return ("move the damaged index file aside: segmentlog then reads the segment "
                    "without it (as one split), and Kafka rebuilds it when it recovers the log")
        if path.endswith(".txnindex"):
            return ("copy the file again from another replica or a backup; without it "
                    "read_committed cannot tell which transactions aborted")
        return ("copy the segment again from another replica or a backup, or read only the "
                "offsets before and after the damage (startingOffsets/endingOffsets or an "
                "offset filter)")


class SegmentShrankError(CorruptLogError):
    """A segment file got shorter while it was read: nothing is damaged, it changed."""

    @property
    def remedy(self) -> Optional[str]:
        return None  # the message says to read it again


class CheckpointError(SegmentLogError):
    """A checkpoint file beside the segments (a log dir's offset checkpoints, a partition's
    leader-epoch-checkpoint or partition.metadata) that Kafka would refuse to load."""

    def __init__(self, path, line, reason):
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = self.path if line is None else f"{self.path} line {line}"
        super().__init__(f"{where}: {reason}; {self.remedy}")

    @property
    def remedy(self) -> str:
        if self.path.endswith("partition.metadata"):
            return "move the file aside: the partition is then read without a topic id"
        if self.path.endswith("leader-epoch-checkpoint"):
            return ("move the file aside: the copy then has no leader epochs, and among "
                    "several copies of the partition it is never taken for the leader's")
        return ("move the file aside: its partitions are then read from their first segment "
                "to their log end")


class UnsupportedFormatError(SegmentLogError):
    """Bytes that are valid Kafka but use something this library cannot decode here."""


class RecordDecodeError(SegmentLogError):
    """A record's key or value that its message definitions cannot decode: an unknown
    version, bytes that end early or are left over. The read names the topic, partition
    and offset; the format layer, which sees only bytes, names what it was decoding."""

    def __init__(self, reason: str, topic: Optional[str] = None,
                 partition: Optional[int] = None, offset: Optional[int] = None):
        self.reason = reason
        self.topic, self.partition, self.offset = topic, partition, offset
        where = "" if topic is None else f"{topic}-{partition} offset {offset}: "
        super().__init__(where + reason)

    def at(self, topic: str, partition: int, offset: int) -> "RecordDecodeError":
        """The same error, placed at a record of the log."""
        return type(self)(self.reason, topic, partition, offset)


class SchemaNotFoundError(RecordDecodeError):
    """A schema id, subject or version that the schema registry (the `_schemas` topic or
    export read) does not hold. A RecordDecodeError: a record whose schema id is unknown
    cannot be decoded, and fails (or in PERMISSIVE mode, nulls) like any undecodable
    record, placed at its topic, partition and offset. The message names the id or
    subject."""


class StoreError(SegmentLogError, OSError):
    """A store could not be listed or read (credentials, a missing bucket, the network).
    The message names the path and never holds a secret."""

    def __str__(self):
        return self.args[0] if self.args else ""


class InvalidOptionError(SegmentLogError, ValueError):
    """A read or write option is unknown or has a value that cannot be used."""

    def __init__(self, message: str, option: Optional[str] = None):
        self.option = option
        super().__init__(message)

    @classmethod
    def for_value(cls, option: str, value, accepted: str) -> "InvalidOptionError":
        return cls(f"option {option!r}: invalid value {value!r}; accepted: {accepted}", option)


class SparkReleaseError(SegmentLogError):
    """A feature asked for that the running Spark release does not have: the message names
    the feature and the release it needs (spark/compat.py)."""


def did_you_mean(name: str, known) -> str:
    """" (did you mean 'x'?)" naming the known option names closest to a misspelled one
    (compared without case, as Spark passes option names), or "" when none is close."""
    import difflib

    spelled = {str(candidate).lower(): str(candidate) for candidate in known}
    close = difflib.get_close_matches(str(name).lower(), list(spelled), n=3, cutoff=0.75)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(spelled[c]) for c in close) + "?)"


class WriteError(SegmentLogError):
    """Base class of every error the writer raises."""


class InvalidInputError(WriteError, ValueError):
    """The data to write has a column, type or value that cannot become a Kafka record
    (here, beside the other errors, because the schema languages of schemas/ raise it when
    a column's type has no schema)."""

