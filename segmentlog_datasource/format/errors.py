"""Errors raised by the format core. Each names the file and byte position at fault."""


class SegmentLogError(Exception):
    """Base class of every error the format core raises."""


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


class UnsupportedFormatError(SegmentLogError):
    """Bytes that are valid Kafka but use something this library cannot decode here."""
