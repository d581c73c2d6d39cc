"""A read with the decode layer's options: which topic it may read, its rows' schema and
its batches."""
import os
from dataclasses import replace
from typing import Iterable, Iterator, List

import pyarrow as pa

from ..errors import InvalidOptionError
from ..format.arrow import arrow_schema
from ..format.scan import ScanOptions
from ..read.fragments import Fragment, scan_fragments
from ..read.planning import Constraints, plan_fragments
from ..read.options import ReadOptions, TopicSelection, parse_bool, parse_read_options
from .options import DecodeOptions, parse_decode_options


class DecodedRead:
    """The decode options of one read (`decode`, `valueFormat`, `keyFormat`, `mode`...),
    applied to its plain parts. With valueFormat/keyFormat the registry is loaded and the
    reader schemas fixed here, when the read is planned (Spark pickles this object with
    its reader: the tasks decode with what the driver loaded)."""

    def __init__(self, options):
        self.decode: DecodeOptions = parse_decode_options(options)
        # Each decoder is imported by the reads that use it: a plain read's Spark workers
        # (a fresh process for each planning step) do without their modules.
        self.columns = None
        if self.decode.decoding:
            from .internal_topics import InternalTopicColumns

            self.columns = InternalTopicColumns(self.decode.topic, self.decode.permissive)
        self.framed = None
        if self.decode.framed:
            from .value_formats import FramedColumns

            self.framed = FramedColumns(self.decode, parse_read_options(options))

    def read_options(self, read: ReadOptions) -> ReadOptions:
        """`read` reading only the decoded topic: it alone when no topic is selected (an
        internal topic is otherwise passed over), and an error when another is. With
        valueFormat/keyFormat: the topics whose reader schemas were chosen."""
        if self.framed is not None:
            selection = read.selection
            if selection.topics is not None or selection.assigned is not None:
                return read
            return replace(read, selection=TopicSelection(topics=list(self.framed.topics)))
        if self.columns is None:
            return read
        topic = self.decode.topic.topic
        selection = read.selection
        option = self.decode.topic.option_value
        if selection.topics is not None:
            others = [t for t in selection.topics if t != topic]
            name = "subscribe"
        elif selection.assigned is not None:
            others = sorted({t for t, _ in selection.assigned if t != topic})
            name = "assign"
        elif selection.pattern is not None:
            others = [] if selection.pattern.fullmatch(topic) else [selection.pattern.pattern]
            name = "subscribePattern"
        else:
            others, name = [], None
        if others:
            raise InvalidOptionError(
                f"option {name!r} selects {', '.join(map(repr, others))}, but "
                f"decode={option} decodes the records of {topic} alone: select {topic!r} "
                f"or leave out {name!r}", name)
        if selection.assigned is not None or selection.topics is not None:
            return read
        return replace(read, selection=TopicSelection(
            topics=[topic], chosen_by=f"option 'decode' ({option}) reads the records of "
                                      f"{topic}"))

    def arrow_schema(self, base: pa.Schema) -> pa.Schema:
        if self.framed is not None:
            return self.framed.schema(base)
        return base if self.columns is None else self.columns.schema(base)

    def plan(self, read: ReadOptions, constraints: Constraints) -> List[Fragment]:
        """The read's fragments; a whole read of a topic with snapshot files (KRaft's
        metadata log) starts with them."""
        if self.columns is not None and self.decode.topic.has_snapshots:
            from ..read.cluster_metadata import plan_metadata_read

            return plan_metadata_read(read, constraints)
        return plan_fragments(read, constraints)

    def scan(self, fragments: Iterable[Fragment], options: ScanOptions
             ) -> Iterator[pa.RecordBatch]:
        """The rows of `fragments`, with the decoded columns."""
        if self.framed is not None:
            for batch in scan_fragments(fragments, options):
                yield self.framed.decode_batch(batch)
            return
        if self.columns is None:
            yield from scan_fragments(fragments, options)
            return
        from ..read.cluster_metadata import is_snapshot_fragment

        for fragment in fragments:
            snapshot = os.path.basename(fragment.log_path) \
                if is_snapshot_fragment(fragment) else None
            for batch in fragment.scan(options):
                yield self.columns.decode_batch(batch, snapshot)

    def batches(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Batches read from the log (no snapshot files), with the decoded columns."""
        if self.framed is not None:
            for batch in batches:
                yield self.framed.decode_batch(batch)
            return
        if self.columns is None:
            yield from batches
            return
        for batch in batches:
            yield self.columns.decode_batch(batch)


def plain_schema(options) -> pa.Schema:
    """The columns of a plain read with these options (before any decoded ones)."""
    return arrow_schema(parse_bool(options, "includeHeaders", False),
                        parse_bool(options, "includeMetadata", False),
                        parse_bool(options, "includeControlRecords", False))


def read_schema(options) -> pa.Schema:
    """Every column of a read with these options, decoded ones included."""
    return DecodedRead(options).arrow_schema(plain_schema(options))
