"""A schema registry read offline: from Schema Registry's own `_schemas` topic in the log,
or from a JSON export of a registry.

The replay core (SchemaRegistry, registry_from_records: how `_schemas` records are
applied, ids and versions for writing) is schemas/registry.py, shared with
the writer; its names are re-exported here. The loaders here read through the read layer.
"""
import json
from dataclasses import replace
from typing import Dict, List, Tuple

from ..errors import InvalidOptionError, RecordDecodeError, SegmentLogError
from ..schemas import registry_records as records
from ..schemas.registry import (  # the replay core, shared with the writer
    SCHEMAS_TOPIC, RegisteredSchema, SchemaRegistry, UnreadableSchemasRecordWarning,
    _listed, _registered, parse_subject_strategy, registry_from_records, subject_for,
)
from ..schemas.registry_records import SchemaReference

__all__ = [
    "SCHEMAS_TOPIC", "SchemaReference", "RegisteredSchema", "SchemaRegistry",
    "UnreadableSchemasRecordWarning", "registry_from_records", "registry_from_log",
    "registry_from_export", "load_registry", "parse_subject_strategy", "subject_for",
]


class _NoSchemasLog(SegmentLogError):
    """No registry topic under the paths given."""


def _schemas_partition(paths: List[str], read, any_topic: bool):
    """The partition log of the registry's topic under `paths`: `_schemas`, or
    with `any_topic` the one topic the paths hold whatever its name (Schema Registry's
    kafkastore.topic can be set to another)."""
    from ..read.replicas import consumer_partitions

    logs = consumer_partitions(paths, read.store)
    topics = sorted({log.topic for log in logs})
    if SCHEMAS_TOPIC in topics:
        topic = SCHEMAS_TOPIC
    elif any_topic and len(topics) == 1:
        topic = topics[0]
    else:
        held = f"topics found: {_listed(topics)}" if topics else "no partition directories"
        raise _NoSchemasLog(f"no {SCHEMAS_TOPIC} topic under {', '.join(paths)} ({held})")
    chosen = [log for log in logs if log.topic == topic]
    partitions = sorted(log.partition for log in chosen)
    if partitions != [0]:
        raise SegmentLogError(
            f"the {topic} topic under {', '.join(paths)} has partitions "
            f"{_listed(partitions)}; Schema Registry keeps its schemas in one partition, "
            f"0, and refuses a topic with any other")
    return chosen[0]


def _default_read(paths: List[str]):
    from ..read.options import parse_read_options

    return parse_read_options({"paths": json.dumps(list(paths))})


def registry_from_log(paths, read_options=None, any_topic: bool = False) -> SchemaRegistry:
    """A registry replayed from the `_schemas` topic (partition 0) under `paths` (log
    dirs, or the partition directory itself), read through the read layer with the
    read's store, checksum, readUpTo and inflation settings: to the high watermark by
    default, as a consumer reads it. `read_options`: the ReadOptions of the read the
    registry serves (None: the defaults). Records Schema Registry cannot deserialize are
    skipped as it skips them, with an UnreadableSchemasRecordWarning naming them."""
    from ..read.fragments import scan_fragments, scan_options
    from ..read.options import OffsetSpec, TopicSelection
    from ..read.planning import Constraints, offset_ranges, plan_ranges

    paths = [paths] if isinstance(paths, str) else list(paths)
    base = read_options if read_options is not None else _default_read(paths)
    log = _schemas_partition(paths, base, any_topic)
    topic = log.topic
    # The registry's own consumer: every record from the start, read_uncommitted, no
    # limits of the user's read (its offsets and row limits are for its topics).
    read = replace(base, paths=paths, selection=TopicSelection(assigned=[(topic, 0)]),
                   starting=OffsetSpec("earliest"), ending=OffsetSpec("latest"),
                   read_committed=False, include_headers=False, include_metadata=False,
                   include_control_records=False, max_records_per_partition=None,
                   min_partitions=None)
    rows = []
    fragments = plan_ranges([log], offset_ranges(read, [log]), read, Constraints())
    for batch in scan_fragments(fragments, scan_options(read)):
        rows.extend(zip(batch.column("offset").to_pylist(), batch.column("key").to_pylist(),
                        batch.column("value").to_pylist()))
    rows.sort(key=lambda row: row[0])
    return registry_from_records(rows, topic, 0,
                                 f"the {topic} topic under {', '.join(paths)}")


def registry_from_export(path: str, store_config=None) -> SchemaRegistry:
    """A registry from a JSON export: a list of {"id", "subject", "version", "schema",
    ["schemaType"] (default AVRO), ["references"], ["deleted"]}, as Schema Registry's
    GET /schemas gives. `path`: local, a file: URI or a store URI."""
    from ..storage import resolve

    store, resolved = resolve(path, store_config, "schemas")
    data = store.read_optional(resolved)
    if data is None:
        raise InvalidOptionError(f"option 'schemas': no file {resolved}", "schemas")
    try:
        entries = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SegmentLogError(f"{resolved}: not a JSON export of a schema registry "
                              f"({exc})") from None
    if not isinstance(entries, list):
        raise SegmentLogError(f"{resolved}: a schema registry export is a JSON list of "
                              f"schemas, not a {type(entries).__name__}")
    registry = SchemaRegistry(f"the schema registry export {resolved}")
    seen: Dict[Tuple[str, int], int] = {}
    for number, entry in enumerate(entries):
        where = f"{resolved}: entry {number}"
        if not isinstance(entry, dict):
            raise SegmentLogError(f"{where} is {entry!r}, not an object")
        try:
            schema = _registered(records.decode_schema_value(entry, None, "entry"))
            if (schema.subject, schema.version) in seen:
                raise RecordDecodeError(
                    f"subject {schema.subject!r} version {schema.version} is entry "
                    f"{seen[schema.subject, schema.version]} too")
            seen[schema.subject, schema.version] = number
            if not registry.register(schema):
                raise RecordDecodeError(registry.ignored[-1][1])
        except RecordDecodeError as failure:
            raise SegmentLogError(f"{where}: {failure.reason}") from None
    return registry


SCHEMAS_ACCEPTED = (
    "a path to a Schema Registry _schemas log (a log dir holding _schemas-0, or the "
    "partition directory), or a path to a JSON export of a registry ending in .json; "
    "left out: the _schemas topic under the loaded paths")


def load_registry(schemas_option, loaded_paths, read_options=None) -> SchemaRegistry:
    """The registry the `schemas` read option names: the `_schemas` topic under the
    loaded paths when it is absent, a `_schemas` log, or a JSON export (`.json`)."""
    paths = [loaded_paths] if isinstance(loaded_paths, str) else list(loaded_paths or [])
    if schemas_option is None or (isinstance(schemas_option, str)
                                  and not schemas_option.strip()):
        try:
            return registry_from_log(paths, read_options)
        except _NoSchemasLog as missing:
            raise SegmentLogError(
                f"decoding values needs their schemas, and there is {missing}: give option "
                f"'schemas' ({SCHEMAS_ACCEPTED.split('; left out')[0]})") from None
    if not isinstance(schemas_option, str):
        raise InvalidOptionError.for_value("schemas", schemas_option, SCHEMAS_ACCEPTED)
    text = schemas_option.strip()
    store_config = read_options.store if read_options is not None else None
    if text.lower().endswith(".json"):
        return registry_from_export(text, store_config)
    from ..storage import resolve

    store, resolved = resolve(text, store_config, "schemas")
    tree = store.tree(resolved)
    problem = None
    if not tree.isdir(resolved):
        entry = tree.entry(resolved)
        problem = "a file that is not a .json export" if entry is not None \
            else "no such directory or file"
    if problem is None:
        try:
            return registry_from_log([resolved], read_options, any_topic=True)
        except _NoSchemasLog as missing:
            problem = str(missing)
    raise InvalidOptionError(f"option 'schemas' is {schemas_option!r}: {problem}; "
                             f"accepted: {SCHEMAS_ACCEPTED}", "schemas")
