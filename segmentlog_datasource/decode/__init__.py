"""Decoded columns: records' bytes turned into typed columns, above the read layer.

`decode=consumerOffsets | transactionState | clusterMetadata` decodes Kafka's internal
topics with their message definitions (format/internal); the rows keep every column of a
plain read and gain `recordType`, `keyVersion`, `valueVersion`, `keyDecoded`,
`valueDecoded` and `deleted`.

`valueFormat` / `keyFormat` = avro | json decode Schema Registry framed values and keys
with schemas from the log's `_schemas` topic (or option `schemas`): the rows gain
`keyDecoded` / `valueDecoded` typed by the subject's latest schema (value_formats.py).
"""
from .options import DecodeOptions, parse_decode_options
from .reads import DecodedRead


def __getattr__(name):
    # Imported when first asked for: a plain read's Spark workers do without it.
    if name == "InternalTopicColumns":
        from .internal_topics import InternalTopicColumns

        return InternalTopicColumns
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["DecodeOptions", "DecodedRead", "InternalTopicColumns", "parse_decode_options"]
