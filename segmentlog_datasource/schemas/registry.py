"""The replay core of a schema registry: Schema Registry's `_schemas` records applied in
offset order, as its reader (KafkaStoreReaderThread and KafkaStoreMessageHandler) applies
them:

- a SCHEMA record registers its subject's version, or replaces it (`deleted: true`: a soft
  delete; the schema still resolves by id, as the registry serves it to deserializers);
  one whose id the registry already holds with another schema text is ignored;
- a SCHEMA key with a null value (a tombstone) removes that version (a hard delete);
- DELETE_SUBJECT marks the subject's versions up to its `version` deleted;
- CLEAR_SUBJECT removes the subject's soft-deleted versions, as if tombstoned;
- CONFIG keeps the compatibility level by subject (and the global one), MODE the mode;
  a tombstone of either removes it; NOOP, CONTEXT and ASSOC records change nothing here;
- a record the registry's serializer cannot deserialize (a key or value that is not
  JSON, not an object, or not of its keytype's fields; a SCHEMA key's magic byte other
  than 0 or 1) is skipped, what was stored under its key staying, as the reader logs and
  skips it; the replay lists it (SchemaRegistry.skipped) and warns
  (UnreadableSchemasRecordWarning), and a value whose schema id only it held fails as an
  unknown id. A record the reader stops on (no key, a keytype it does not know) is an
  error, naming its offset.

Ids and versions for writing follow the registry too: the next id is one more than the
largest id any SCHEMA record held, the next version one more than the subject's largest
version still stored (soft-deleted ones included).

Pure: no reading. decode/registry.py loads registries through the read layer for reads;
the writer replays its log dir's `_schemas` partition with
writer/framed.py's registry_from_partition_dir.
"""
import warnings
from dataclasses import replace
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

from ..errors import InvalidOptionError, RecordDecodeError, SchemaNotFoundError, did_you_mean
from . import registry_records as records
from .registry_records import SchemaReference

SCHEMAS_TOPIC = "_schemas"  # Schema Registry's kafkastore.topic, by default
SCHEMA_TYPES = (records.AVRO, records.JSON, records.PROTOBUF)  # those it ships providers of
DEFAULT_COMPATIBILITY = "BACKWARD"  # the registry's default compatibility level
DEFAULT_MODE = "READWRITE"
LATEST = -1  # a version that means the subject's latest, as in the registry's API


class UnreadableSchemasRecordWarning(RuntimeWarning):
    """Records of a `_schemas` topic that Schema Registry's reader cannot deserialize,
    skipped by the replay as the registry skips them: the message names the topic and
    each record's offset and why."""


@dataclass(frozen=True)
class RegisteredSchema:
    id: int
    subject: str
    version: int
    schema_type: str  # "AVRO" | "JSON" | "PROTOBUF"
    schema: str  # the schema text as registered
    references: Tuple[SchemaReference, ...] = ()
    deleted: bool = False  # soft-deleted

    def __str__(self):
        deleted = ", soft-deleted" if self.deleted else ""
        return f"subject {self.subject!r} version {self.version} (id {self.id}{deleted})"


def _registered(value: records.SchemaValue) -> RegisteredSchema:
    return RegisteredSchema(value.id, value.subject, value.version, value.schema_type,
                            value.schema, value.references, value.deleted)


def _listed(items, limit: int = 20) -> str:
    items = [str(item) for item in items]
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


class SchemaRegistry:
    """The schemas of a registry by id and by subject and version. `source` says where
    they were read from, for messages."""

    def __init__(self, source: str = "a schema registry"):
        self.source = source
        self._versions: Dict[str, Dict[int, RegisteredSchema]] = {}
        # The (subject, version)s registered with each id, first first; an entry whose
        # version was removed or now holds another id is passed over.
        self._id_keys: Dict[int, List[Tuple[str, int]]] = {}
        self._max_id = 0
        self._compatibility: Dict[Optional[str], str] = {}  # None: the global level
        self._modes: Dict[Optional[str], str] = {}
        # (offset, why) of each SCHEMA record Schema Registry would refuse: it logs and
        # skips them, and so does the replay.
        self.ignored: List[Tuple[Optional[int], str]] = []
        # (offset, why) of each record its serializer cannot deserialize, skipped alike
        self.skipped: List[Tuple[Optional[int], str]] = []

    # -- lookups --------------------------------------------------------------------

    def by_id(self, schema_id: int) -> RegisteredSchema:
        """The schema a deserializer gets for `schema_id` (soft-deleted ones too): the
        first subject version registered with it that the registry still holds."""
        for subject, version in self._id_keys.get(schema_id, ()):
            schema = self._versions.get(subject, {}).get(version)
            if schema is not None and schema.id == schema_id:
                return schema
        held = sorted({s.id for versions in self._versions.values() for s in versions.values()})
        what = f"it holds ids {_listed(held)}" if held else "it holds no schema"
        raise SchemaNotFoundError(f"schema id {schema_id} is not in {self.source}: "
                                  f"{what}{self._skipped_note()}")

    def skipped_records(self, limit: int = 10) -> str:
        """"the record at offset 5" / "3 records, at offsets 5, 9, 12": those skipped."""
        offsets = [str(offset) for offset, _ in self.skipped]
        if len(offsets) == 1:
            return f"the record at offset {offsets[0]}"
        return f"{len(offsets)} records, at offsets {_listed(offsets, limit)}"

    def _skipped_note(self) -> str:
        """What a lookup's error adds when records were skipped: they may have held it."""
        if not self.skipped:
            return ""
        return (f"; {self.skipped_records()} that Schema Registry cannot read "
                f"{'was' if len(self.skipped) == 1 else 'were'} skipped, as it skips them")

    def _subject_versions(self, subject: str) -> Dict[int, RegisteredSchema]:
        versions = self._versions.get(subject)
        if not versions:
            subjects = self.subjects(include_deleted=True)
            known = f"its subjects are {_listed(subjects)}" if subjects else \
                "it holds no subject"
            raise SchemaNotFoundError(f"no subject {subject!r} in {self.source}"
                                      f"{did_you_mean(subject, subjects)}: {known}"
                                      f"{self._skipped_note()}")
        return versions

    def latest(self, subject: str) -> RegisteredSchema:
        """The subject's latest version that is not deleted."""
        versions = self._subject_versions(subject)
        live = [v for v, s in versions.items() if not s.deleted]
        if not live:
            raise SchemaNotFoundError(
                f"subject {subject!r} in {self.source} has no version that is not deleted "
                f"(soft-deleted: versions {_listed(sorted(versions))})")
        return versions[max(live)]

    def version(self, subject: str, version: int) -> RegisteredSchema:
        """The subject's `version`, soft-deleted or not (as references resolve); -1: the
        latest not deleted."""
        if version == LATEST:
            return self.latest(subject)
        versions = self._subject_versions(subject)
        if version not in versions:
            raise SchemaNotFoundError(
                f"subject {subject!r} in {self.source} has no version {version}: its "
                f"versions are {_listed(sorted(versions))}")
        return versions[version]

    def versions(self, subject: str, include_deleted: bool = False) -> List[RegisteredSchema]:
        """The subject's versions in order ([] for a subject the registry does not hold)."""
        versions = self._versions.get(subject, {})
        return [versions[v] for v in sorted(versions)
                if include_deleted or not versions[v].deleted]

    def subjects(self, include_deleted: bool = False) -> List[str]:
        """Subjects with a version not deleted (any version, with include_deleted)."""
        return sorted(subject for subject, versions in self._versions.items()
                      if versions and (include_deleted
                                       or any(not s.deleted for s in versions.values())))

    def named_references(self, schema: RegisteredSchema) -> Dict[str, RegisteredSchema]:
        """The schemas `schema` references, transitively, by the name it refers to them
        with: dependencies before what depends on them, each name once (the first
        reference to it wins), as Schema Registry's clients resolve them."""
        resolved: Dict[str, RegisteredSchema] = {}
        visited = set()

        def resolve(referrer: RegisteredSchema):
            for reference in referrer.references:
                try:
                    target = self.version(reference.subject, reference.version)
                except SchemaNotFoundError as missing:
                    raise SchemaNotFoundError(
                        f"{referrer} references {reference.name!r} as subject "
                        f"{reference.subject!r} version {reference.version}, which is "
                        f"missing: {missing.reason}") from None
                if reference.name in visited:
                    continue
                visited.add(reference.name)
                resolve(target)
                resolved.setdefault(reference.name, target)

        resolve(schema)
        return resolved

    def references_of(self, schema: RegisteredSchema) -> List[RegisteredSchema]:
        """named_references' schemas, dependencies first."""
        return list(self.named_references(schema).values())

    def next_id(self) -> int:
        """The id Schema Registry gives the next new schema."""
        return self._max_id + 1

    def next_version(self, subject: str) -> int:
        """The version Schema Registry gives the subject's next new schema."""
        return max(self._versions.get(subject, {}), default=0) + 1

    def compatibility(self, subject: Optional[str] = None) -> str:
        """The compatibility level new versions of `subject` are checked at: its own,
        else the global one, else BACKWARD (None: the global level)."""
        if subject in self._compatibility:
            return self._compatibility[subject]
        return self._compatibility.get(None, DEFAULT_COMPATIBILITY)

    def mode(self, subject: Optional[str] = None) -> str:
        if subject in self._modes:
            return self._modes[subject]
        return self._modes.get(None, DEFAULT_MODE)

    def __len__(self):
        return sum(len(versions) for versions in self._versions.values())

    # -- replay ---------------------------------------------------------------------

    def register(self, schema: RegisteredSchema, offset: Optional[int] = None) -> bool:
        """Stores `schema` under its subject and version, replacing what was there; False
        (and nothing stored) when its id is held by another schema text, as Schema
        Registry refuses such a record."""
        try:
            holder = self.by_id(schema.id)
        except SchemaNotFoundError:
            holder = None
        if holder is not None and holder.schema != schema.schema:
            self.ignored.append((offset, f"{schema} has the id of {holder} with another "
                                         f"schema text"))
            return False
        self._max_id = max(self._max_id, schema.id)
        self._versions.setdefault(schema.subject, {})[schema.version] = schema
        keys = self._id_keys.setdefault(schema.id, [])
        if (schema.subject, schema.version) not in keys:
            keys.append((schema.subject, schema.version))
        return True

    def _remove(self, subject: str, version: int):
        versions = self._versions.get(subject)
        if versions is not None:
            versions.pop(version, None)
            if not versions:
                del self._versions[subject]

    def apply(self, record: records.RegistryRecord, offset: Optional[int] = None) -> None:
        """One `_schemas` record, replayed after those before it."""
        key, value = record.key, record.value
        if key.key_type == records.SCHEMA:
            if value is None:
                self._remove(key.subject, key.version)
            else:
                self.register(_registered(value), offset)
        elif value is None:
            if key.key_type == records.CONFIG:
                self._compatibility.pop(key.subject, None)
            elif key.key_type == records.MODE:
                self._modes.pop(key.subject, None)
        elif key.key_type == records.DELETE_SUBJECT:
            versions = self._versions.get(value.subject, {})
            for version in range(1, value.version + 1):
                schema = versions.get(version)
                if schema is not None and not schema.deleted:
                    versions[version] = replace(schema, deleted=True)
        elif key.key_type == records.CLEAR_SUBJECT:
            for version, schema in list(self._versions.get(value.subject, {}).items()):
                if schema.deleted:
                    self._remove(value.subject, version)
        elif key.key_type == records.CONFIG:
            # Keyed as the registry stores it: by the key's subject.
            if value.compatibility_level is None:
                self._compatibility.pop(key.subject, None)
            else:
                self._compatibility[key.subject] = value.compatibility_level
        elif key.key_type == records.MODE:
            if value.mode is None:
                self._modes.pop(key.subject, None)
            else:
                self._modes[key.subject] = value.mode


# -- loaders ------------------------------------------------------------------------


def registry_from_records(rows: Iterable[tuple], topic: str = SCHEMAS_TOPIC,
                          partition: int = 0, source: Optional[str] = None
                          ) -> SchemaRegistry:
    """A registry from `_schemas` records in offset order: (offset, key, value) with key
    and value as bytes (value None: a tombstone), or as a decoded RegistryKey and value.
    A record Schema Registry's reader cannot deserialize is skipped as the reader skips
    it, listed in `skipped` and in an UnreadableSchemasRecordWarning; one the reader
    stops on raises RecordDecodeError naming its offset."""
    registry = SchemaRegistry(source or f"the {topic} topic")
    for offset, key, value in rows:
        if isinstance(key, records.RegistryKey):
            record = records.RegistryRecord(key, value)
        else:
            try:
                record = records.decode_record(key, value)
            except records.StopsTheReader as failure:
                raise failure.at(topic, partition, offset) from None
            except RecordDecodeError as failure:
                registry.skipped.append((offset, failure.reason))
                continue
        registry.apply(record, offset)
    if registry.skipped:
        reasons = "; ".join(f"offset {offset}: {reason}"
                            for offset, reason in registry.skipped[:10])
        more = f"; and {len(registry.skipped) - 10} more" if len(registry.skipped) > 10 \
            else ""
        warnings.warn(UnreadableSchemasRecordWarning(
            f"{registry.source}: Schema Registry's reader cannot deserialize "
            f"{registry.skipped_records()} of {topic}-{partition}, and skips "
            f"{'it' if len(registry.skipped) == 1 else 'them'}; so does this replay, and "
            f"a value whose schema id only such a record held fails as an unknown id "
            f"({reasons}{more})"), stacklevel=2)
    return registry


# -- subject naming -----------------------------------------------------------------

TOPIC_NAME, RECORD_NAME, TOPIC_RECORD_NAME = \
    "TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"
SUBJECT_STRATEGIES = (TOPIC_NAME, RECORD_NAME, TOPIC_RECORD_NAME)
STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."


def parse_subject_strategy(raw, option: str = "subjectNameStrategy") -> str:
    """A subject name strategy's simple name from Confluent's class name, simple or
    full (io.confluent.kafka.serializers.subject.TopicNameStrategy); None: the default,
    TopicNameStrategy. Names are compared without case."""
    if raw is None or not str(raw).strip():
        return TOPIC_NAME
    text = str(raw).strip()
    simple = text[len(STRATEGY_PACKAGE):] if text.lower().startswith(STRATEGY_PACKAGE) \
        else text
    for strategy in SUBJECT_STRATEGIES:
        if simple.lower() == strategy.lower():
            return strategy
    raise InvalidOptionError.for_value(
        option, raw, ", ".join(SUBJECT_STRATEGIES) + " (Confluent's class names, simple "
        f"or with their package {STRATEGY_PACKAGE.rstrip('.')}); TopicNameStrategy by default")



def subject_for(strategy, topic: str, is_key: bool, record_name: Optional[str] = None
                ) -> str:
    """The subject a serializer with this strategy registers a topic's key or value
    schema under: TopicNameStrategy `<topic>-key` / `<topic>-value`, RecordNameStrategy
    `<record name>`, TopicRecordNameStrategy `<topic>-<record name>`, the record name
    being the schema's fully qualified name."""
    strategy = parse_subject_strategy(strategy)
    if strategy == TOPIC_NAME:
        return f"{topic}-key" if is_key else f"{topic}-value"
    if not record_name:
        raise InvalidOptionError(
            f"{strategy} names the subject after the {'key' if is_key else 'value'}'s "
            f"record schema's fully qualified name, and none is given: it applies to "
            f"record schemas only", "subjectNameStrategy")
    if strategy == RECORD_NAME:
        return record_name
    return f"{topic}-{record_name}"
