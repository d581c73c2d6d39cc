"""The cluster's state from KRaft's metadata records, replayed as Kafka's image classes
(org.apache.kafka.image: TopicsDelta, ClusterDelta, ConfigurationsDelta, FeaturesDelta,
...) replay them.

Records are applied in offset order (a snapshot's records first, when starting from one).
The rules are Kafka's:
- PARTITION_CHANGE_RECORD changes only what it carries: a null isr / replicas /
  removingReplicas / addingReplicas / directories / ELR keeps the old value, leader -2 keeps
  the leader (any other value, -1 included, sets it and bumps the leader epoch),
  leaderRecoveryState -1 keeps it; every change bumps the partition epoch. Directories
  that are absent or all MIGRATING (the zero uuid) read as MIGRATING for every replica.
- CONFIG_RECORD sets a config of a resource; a null value deletes it.
- REMOVE_TOPIC_RECORD removes the topic, its partitions and its configs.
- BROKER_REGISTRATION_CHANGE_RECORD: fenced -1 unfences, 1 fences, 0 keeps;
  inControlledShutdown 1 sets it, 0 keeps; non-empty logDirs replace the broker's.
  FENCE_/UNFENCE_BROKER_RECORD (older metadata versions) fence and unfence. The broker
  epoch a change names must be the registered one.
- PARTITION_RECORD's eligibleLeaderReplicas / lastKnownElr, absent (before version 2) or
  null, are empty lists. CLEAR_ELR_RECORD empties both lists of every partition of the
  topic it names, or of every topic when its topicName is empty; a partition whose lists
  are already empty is left alone (its partition epoch stays), any other is changed as a
  PARTITION_CHANGE_RECORD setting them would change it (its partition epoch bumped). A
  topic name no topic has is an error.
- PRODUCER_IDS_RECORD sets the next producer id (the image keeps nothing else of it).
- FEATURE_LEVEL_RECORD sets a feature's level; level 0 removes a feature (except
  metadata.version, whose level is always kept). One for kraft.version changes nothing
  (KAFKA-18979: Kafka skips it); kraft.version is KRaft's, set by the KRaftVersion control
  records of the log and of snapshots, and counts among the features from level 1 on, as
  in the finalized features a broker reports. The VotersRecord control records give the
  quorum's voters (a static quorum, kraft.version 0, has none: its voters are configured).
- BEGIN/END/ABORT_TRANSACTION_RECORD bracket a metadata transaction: an aborted one's
  records are undone, and a state asked for inside an open one is the state before it
  began (Kafka publishes only whole transactions).
"""
import copy
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ...errors import SegmentLogError
from .messages import ZERO_UUID, uuid_bytes
from .topics import DecodedRecord

NO_LEADER_CHANGE = -2
NO_LEADER_RECOVERY_CHANGE = -1
MIGRATING_DIRECTORY = ZERO_UUID  # DirectoryId.MIGRATING
METADATA_VERSION_FEATURE = "metadata.version"
KRAFT_VERSION_FEATURE = "kraft.version"

# metadata.version's feature levels by the names Kafka 4.2's MetadataVersion gives them
# (3.3-IV3, level 7, is the oldest it knows; 4.3-IV0 is not yet stable in 4.2).
METADATA_VERSIONS = {
    7: "3.3-IV3", 8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0",
    13: "3.6-IV1", 14: "3.6-IV2", 15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3",
    19: "3.7-IV4", 20: "3.8-IV0", 21: "3.9-IV0", 22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2",
    25: "4.0-IV3", 26: "4.1-IV0", 27: "4.1-IV1", 28: "4.2-IV0", 29: "4.2-IV1", 30: "4.3-IV0",
}


def metadata_version_name(level: Optional[int]) -> Optional[str]:
    """The name (4.2-IV1) of a metadata.version feature level; None for one Kafka 4.2 does
    not know."""
    return METADATA_VERSIONS.get(level)

# ConfigResource.Type ids
CONFIG_RESOURCE_TYPES = {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER",
                         16: "CLIENT_METRICS", 32: "GROUP"}
TOPIC_RESOURCE = 2


class MetadataReplayError(SegmentLogError):
    """A metadata record that cannot apply to the state before it (Kafka's image classes
    reject it alike): a change to an unknown partition or broker, a wrong broker epoch."""


@dataclass
class PartitionState:
    partition: int
    replicas: List[int]
    isr: List[int]
    removing_replicas: List[int]
    adding_replicas: List[int]
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int
    directories: List[str]
    eligible_leader_replicas: List[int] = field(default_factory=list)
    last_known_elr: List[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"partition": self.partition, "replicas": list(self.replicas),
                "isr": list(self.isr), "removingReplicas": list(self.removing_replicas),
                "addingReplicas": list(self.adding_replicas), "leader": self.leader,
                "leaderRecoveryState": self.leader_recovery_state,
                "leaderEpoch": self.leader_epoch, "partitionEpoch": self.partition_epoch,
                "directories": list(self.directories),
                "eligibleLeaderReplicas": list(self.eligible_leader_replicas),
                "lastKnownElr": list(self.last_known_elr)}


@dataclass
class TopicState:
    name: str
    topic_id: str
    partitions: Dict[int, PartitionState] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "topicId": self.topic_id,
                "partitions": [self.partitions[p].to_dict() for p in sorted(self.partitions)]}


@dataclass
class BrokerState:
    broker_id: int
    epoch: int
    incarnation_id: str
    endpoints: List[dict]
    features: List[dict]
    rack: Optional[str]
    fenced: bool
    in_controlled_shutdown: bool
    is_migrating_zk_broker: bool
    log_dirs: List[str]

    def to_dict(self) -> dict:
        return {"brokerId": self.broker_id, "brokerEpoch": self.epoch,
                "incarnationId": self.incarnation_id,
                "endPoints": copy.deepcopy(self.endpoints),
                "features": copy.deepcopy(self.features), "rack": self.rack,
                "fenced": self.fenced, "inControlledShutdown": self.in_controlled_shutdown,
                "isMigratingZkBroker": self.is_migrating_zk_broker,
                "logDirs": list(self.log_dirs)}


@dataclass
class ControllerState:
    controller_id: int
    incarnation_id: str
    zk_migration_ready: bool
    endpoints: List[dict]
    features: List[dict]

    def to_dict(self) -> dict:
        return {"controllerId": self.controller_id, "incarnationId": self.incarnation_id,
                "zkMigrationReady": self.zk_migration_ready,
                "endPoints": copy.deepcopy(self.endpoints),
                "features": copy.deepcopy(self.features)}


def _sorted_uuids(uuids: List[str]) -> List[str]:
    """In Uuid.compareTo's order: most then least significant bits, as signed longs."""
    def key(text):
        raw = uuid_bytes(text)
        return (int.from_bytes(raw[:8], "big", signed=True),
                int.from_bytes(raw[8:], "big", signed=True))
    return sorted(uuids, key=key)


def _directories(directories: Optional[List[str]], replica_count: int) -> List[str]:
    """PartitionRegistration.defaultToMigrating: none, or all MIGRATING, is MIGRATING for
    every replica."""
    if not directories or all(d == MIGRATING_DIRECTORY for d in directories):
        return [MIGRATING_DIRECTORY] * replica_count
    return list(directories)


QuotaEntity = Tuple[Tuple[str, Optional[str]], ...]  # ((entityType, entityName), ...) sorted


@dataclass
class ClusterImage:
    """The cluster as of `offset` (the last metadata record applied; -1: none)."""

    offset: int = -1
    topics: Dict[str, TopicState] = field(default_factory=dict)  # by topic id
    configs: Dict[Tuple[int, str], Dict[str, str]] = field(default_factory=dict)
    brokers: Dict[int, BrokerState] = field(default_factory=dict)
    controllers: Dict[int, ControllerState] = field(default_factory=dict)
    features: Dict[str, int] = field(default_factory=dict)
    # {"nextProducerId": n}: all of a PRODUCER_IDS_RECORD Kafka's ProducerIdsImage keeps
    # (the broker that asked for the block is not kept: a snapshot writes -1 for it)
    producer_ids: Optional[dict] = None
    acls: Dict[str, dict] = field(default_factory=dict)  # by ACL id
    client_quotas: Dict[QuotaEntity, Dict[str, float]] = field(default_factory=dict)
    scram_credentials: Dict[Tuple[str, int], dict] = field(default_factory=dict)
    delegation_tokens: Dict[str, dict] = field(default_factory=dict)
    zk_migration_state: Optional[int] = None
    kraft_version: int = 0  # the last KRaftVersion control record's (0: none)
    voters: Optional[List[dict]] = None  # the last VotersRecord's voters (None: none)
    snapshot: Optional[str] = None  # the snapshot file the replay started from

    # ---------------------------------------------------------------- lookups
    def topic(self, name: str) -> Optional[TopicState]:
        for topic in self.topics.values():
            if topic.name == name:
                return topic
        return None

    def topic_configs(self, name: str) -> Dict[str, str]:
        return dict(self.configs.get((TOPIC_RESOURCE, name), {}))

    @property
    def metadata_version(self) -> Optional[str]:
        """metadata.version by name (4.2-IV1), None before its record or for a level Kafka
        4.2 does not know."""
        return metadata_version_name(self.features.get(METADATA_VERSION_FEATURE))

    def finalized_features(self) -> Dict[str, int]:
        """The features and their levels as a broker reports them finalized: the feature
        level records' (metadata.version included) and kraft.version from level 1 on."""
        features = dict(self.features)
        if self.kraft_version > 0:
            features[KRAFT_VERSION_FEATURE] = self.kraft_version
        return dict(sorted(features.items()))

    # ---------------------------------------------------------------- replay
    def apply(self, record: DecodedRecord, offset: int) -> None:
        """Apply one decoded metadata record (a type this library does not know is
        skipped: it cannot be applied)."""
        if record.known and record.value is not None:
            handler = _HANDLERS.get(record.record_type)
            if handler is not None:
                handler(self, record.value, offset)
        self.offset = offset

    def apply_control(self, record: DecodedRecord, offset: int) -> None:
        """Apply one decoded KRaft control record: KRAFT_VERSION sets kraft.version,
        KRAFT_VOTERS the voters; the others (leader changes, snapshot headers and footers,
        transaction markers) change nothing of the cluster's metadata."""
        if record.known and record.value is not None:
            if record.record_type == "KRAFT_VERSION":
                self.kraft_version = record.value["kRaftVersion"]
            elif record.record_type == "KRAFT_VOTERS":
                self.voters = copy.deepcopy(record.value["voters"])
        self.offset = offset

    def to_dict(self) -> dict:
        configs: Dict[str, Dict[str, Dict[str, str]]] = {}
        for (kind, name), values in sorted(self.configs.items()):
            configs.setdefault(CONFIG_RESOURCE_TYPES.get(kind, str(kind)), {})[name] = \
                dict(sorted(values.items()))
        topics = sorted(self.topics.values(), key=lambda topic: topic.name)
        return {
            "offset": self.offset,
            "snapshot": self.snapshot,
            "topics": {topic.name: topic.to_dict() for topic in topics},
            "configs": configs,
            "brokers": {b: self.brokers[b].to_dict() for b in sorted(self.brokers)},
            "controllers": {c: self.controllers[c].to_dict()
                            for c in sorted(self.controllers)},
            "features": self.finalized_features(),
            "metadataVersion": self.metadata_version,
            "kraftVersion": self.kraft_version,
            "voters": copy.deepcopy(self.voters),
            "producerIds": dict(self.producer_ids) if self.producer_ids else None,
            "acls": [dict(self.acls[i]) for i in sorted(self.acls)],
            "clientQuotas": [{"entity": [{"entityType": t, "entityName": n} for t, n in e],
                              "quotas": dict(sorted(q.items()))}
                             for e, q in sorted(self.client_quotas.items(),
                                                key=lambda item: repr(item[0]))],
            "scramCredentials": [{"name": n, "mechanism": m,
                                  "iterations": c["iterations"]}
                                 for (n, m), c in sorted(self.scram_credentials.items())],
            "delegationTokens": [dict(self.delegation_tokens[t], renewers=list(
                self.delegation_tokens[t]["renewers"])) for t in sorted(self.delegation_tokens)],
            "zkMigrationState": self.zk_migration_state,
        }


def _fail(offset: int, kind: str, reason: str):
    raise MetadataReplayError(f"__cluster_metadata offset {offset}: {kind}: {reason}")


def _partition(image: ClusterImage, value: dict, offset: int, kind: str) -> PartitionState:
    topic = image.topics.get(value["topicId"])
    if topic is None or value["partitionId"] not in topic.partitions:
        _fail(offset, kind, f"no partition {value['partitionId']} of topic id "
                            f"{value['topicId']}")
    return topic.partitions[value["partitionId"]]


def _topic_record(image, value, offset):
    image.topics[value["topicId"]] = TopicState(value["name"], value["topicId"])


def _partition_record(image, value, offset):
    topic = image.topics.get(value["topicId"])
    if topic is None:
        _fail(offset, "PARTITION_RECORD", f"no topic with id {value['topicId']}")
    topic.partitions[value["partitionId"]] = PartitionState(
        value["partitionId"], list(value["replicas"]), list(value["isr"]),
        list(value["removingReplicas"]), list(value["addingReplicas"]), value["leader"],
        value.get("leaderRecoveryState", 0), value["leaderEpoch"], value["partitionEpoch"],
        _directories(value.get("directories"), len(value["replicas"])),
        list(value.get("eligibleLeaderReplicas") or []),
        list(value.get("lastKnownElr") or []))


def _merge_partition(partition: PartitionState, value: dict) -> None:
    """PartitionRegistration.merge."""
    if value.get("replicas") is not None:
        partition.replicas = list(value["replicas"])
    directories = value.get("directories")
    partition.directories = _directories(
        partition.directories if directories is None else directories,
        len(partition.replicas))
    for name, attribute in (("isr", "isr"), ("removingReplicas", "removing_replicas"),
                            ("addingReplicas", "adding_replicas"),
                            ("eligibleLeaderReplicas", "eligible_leader_replicas"),
                            ("lastKnownElr", "last_known_elr")):
        if value.get(name) is not None:
            setattr(partition, attribute, list(value[name]))
    leader = value.get("leader", NO_LEADER_CHANGE)
    if leader != NO_LEADER_CHANGE:
        partition.leader = leader
        partition.leader_epoch += 1
    recovery = value.get("leaderRecoveryState", NO_LEADER_RECOVERY_CHANGE)
    if recovery != NO_LEADER_RECOVERY_CHANGE:
        partition.leader_recovery_state = recovery
    partition.partition_epoch += 1


def _partition_change_record(image, value, offset):
    _merge_partition(_partition(image, value, offset, "PARTITION_CHANGE_RECORD"), value)


def _clear_elr_record(image, value, offset):
    name = value["topicName"]
    if name:
        topic = image.topic(name)
        if topic is None:
            _fail(offset, "CLEAR_ELR_RECORD", f"no topic named {name!r}")
        topics = [topic]
    else:
        topics = list(image.topics.values())
    for topic in topics:
        for partition in topic.partitions.values():
            if partition.eligible_leader_replicas or partition.last_known_elr:
                _merge_partition(partition, {"eligibleLeaderReplicas": [],
                                             "lastKnownElr": []})


def _remove_topic_record(image, value, offset):
    topic = image.topics.pop(value["topicId"], None)
    if topic is None:
        _fail(offset, "REMOVE_TOPIC_RECORD", f"no topic with id {value['topicId']}")
    image.configs.pop((TOPIC_RESOURCE, topic.name), None)


def _config_record(image, value, offset):
    resource = (value["resourceType"], value["resourceName"])
    if value["value"] is None:
        configs = image.configs.get(resource)
        if configs is not None:
            configs.pop(value["name"], None)
            if not configs:
                del image.configs[resource]
    else:
        image.configs.setdefault(resource, {})[value["name"]] = value["value"]


def _register_broker_record(image, value, offset):
    image.brokers[value["brokerId"]] = BrokerState(
        value["brokerId"], value["brokerEpoch"], value["incarnationId"],
        copy.deepcopy(value["endPoints"]), copy.deepcopy(value["features"]), value["rack"],
        value["fenced"], value.get("inControlledShutdown", False),
        value.get("isMigratingZkBroker", False),
        _sorted_uuids(value.get("logDirs") or []))


def _unregister_broker_record(image, value, offset):
    image.brokers.pop(value["brokerId"], None)


def _registered(image, broker_id: int, epoch: int, offset: int, kind: str) -> BrokerState:
    broker = image.brokers.get(broker_id)
    if broker is None:
        _fail(offset, kind, f"broker {broker_id} is not registered")
    if broker.epoch != epoch:
        _fail(offset, kind, f"broker epoch {epoch} is not broker {broker_id}'s current "
                            f"epoch, {broker.epoch}")
    return broker


def _fence_broker_record(image, value, offset):
    _registered(image, value["id"], value["epoch"], offset, "FENCE_BROKER_RECORD").fenced = True


def _unfence_broker_record(image, value, offset):
    _registered(image, value["id"], value["epoch"], offset,
                "UNFENCE_BROKER_RECORD").fenced = False


def _broker_registration_change_record(image, value, offset):
    kind = "BROKER_REGISTRATION_CHANGE_RECORD"
    broker = _registered(image, value["brokerId"], value["brokerEpoch"], offset, kind)
    fenced = value.get("fenced", 0)
    if fenced not in (-1, 0, 1):
        _fail(offset, kind, f"unknown value {fenced} for fenced (-1, 0 or 1)")
    shutdown = value.get("inControlledShutdown", 0)
    if shutdown not in (0, 1):
        _fail(offset, kind, f"unknown value {shutdown} for inControlledShutdown (0 or 1)")
    if fenced:
        broker.fenced = fenced == 1
    if shutdown:
        broker.in_controlled_shutdown = True
    if value.get("logDirs"):
        broker.log_dirs = _sorted_uuids(value["logDirs"])


def _register_controller_record(image, value, offset):
    image.controllers[value["controllerId"]] = ControllerState(
        value["controllerId"], value["incarnationId"], value["zkMigrationReady"],
        copy.deepcopy(value["endPoints"]), copy.deepcopy(value["features"]))


def _feature_level_record(image, value, offset):
    if value["name"] == KRAFT_VERSION_FEATURE:
        return  # KAFKA-18979: kraft.version is the KRaftVersion control records'
    if value["featureLevel"] == 0 and value["name"] != METADATA_VERSION_FEATURE:
        image.features.pop(value["name"], None)
    else:
        image.features[value["name"]] = value["featureLevel"]


def _producer_ids_record(image, value, offset):
    image.producer_ids = {"nextProducerId": value["nextProducerId"]}


def _access_control_entry_record(image, value, offset):
    image.acls[value["id"]] = dict(value)


def _remove_access_control_entry_record(image, value, offset):
    if image.acls.pop(value["id"], None) is None:
        _fail(offset, "REMOVE_ACCESS_CONTROL_ENTRY_RECORD", f"no ACL with id {value['id']}")


def _client_quota_record(image, value, offset):
    entity = tuple(sorted((e["entityType"], e["entityName"]) for e in value["entity"]))
    if value["remove"]:
        quotas = image.client_quotas.get(entity)
        if quotas is not None:
            quotas.pop(value["key"], None)
            if not quotas:
                del image.client_quotas[entity]
    else:
        image.client_quotas.setdefault(entity, {})[value["key"]] = value["value"]


def _user_scram_credential_record(image, value, offset):
    image.scram_credentials[(value["name"], value["mechanism"])] = dict(value)


def _remove_user_scram_credential_record(image, value, offset):
    image.scram_credentials.pop((value["name"], value["mechanism"]), None)


def _delegation_token_record(image, value, offset):
    image.delegation_tokens[value["tokenId"]] = dict(value)


def _remove_delegation_token_record(image, value, offset):
    image.delegation_tokens.pop(value["tokenId"], None)


def _zk_migration_state_record(image, value, offset):
    image.zk_migration_state = value["zkMigrationState"]


_HANDLERS = {
    "TOPIC_RECORD": _topic_record,
    "PARTITION_RECORD": _partition_record,
    "PARTITION_CHANGE_RECORD": _partition_change_record,
    "CLEAR_ELR_RECORD": _clear_elr_record,
    "REMOVE_TOPIC_RECORD": _remove_topic_record,
    "CONFIG_RECORD": _config_record,
    "REGISTER_BROKER_RECORD": _register_broker_record,
    "UNREGISTER_BROKER_RECORD": _unregister_broker_record,
    "FENCE_BROKER_RECORD": _fence_broker_record,
    "UNFENCE_BROKER_RECORD": _unfence_broker_record,
    "BROKER_REGISTRATION_CHANGE_RECORD": _broker_registration_change_record,
    "REGISTER_CONTROLLER_RECORD": _register_controller_record,
    "FEATURE_LEVEL_RECORD": _feature_level_record,
    "PRODUCER_IDS_RECORD": _producer_ids_record,
    "ACCESS_CONTROL_ENTRY_RECORD": _access_control_entry_record,
    "REMOVE_ACCESS_CONTROL_ENTRY_RECORD": _remove_access_control_entry_record,
    "CLIENT_QUOTA_RECORD": _client_quota_record,
    "USER_SCRAM_CREDENTIAL_RECORD": _user_scram_credential_record,
    "REMOVE_USER_SCRAM_CREDENTIAL_RECORD": _remove_user_scram_credential_record,
    "DELEGATION_TOKEN_RECORD": _delegation_token_record,
    "REMOVE_DELEGATION_TOKEN_RECORD": _remove_delegation_token_record,
    "ZK_MIGRATION_STATE_RECORD": _zk_migration_state_record,
}


class MetadataReplay:
    """Applies records in offset order, with metadata transactions: result() is the
    state Kafka would publish after the last record applied."""

    def __init__(self, image: Optional[ClusterImage] = None):
        self.image = image if image is not None else ClusterImage()
        self._before_transaction: Optional[ClusterImage] = None

    def apply(self, record: DecodedRecord, offset: int) -> None:
        kind = record.record_type
        if kind == "BEGIN_TRANSACTION_RECORD":
            if self._before_transaction is not None:
                _fail(offset, kind, "a metadata transaction is already open")
            self._before_transaction = copy.deepcopy(self.image)
        elif kind == "ABORT_TRANSACTION_RECORD":
            if self._before_transaction is None:
                _fail(offset, kind, "no metadata transaction is open")
            self.image, self._before_transaction = self._before_transaction, None
        elif kind == "END_TRANSACTION_RECORD":
            if self._before_transaction is None:
                _fail(offset, kind, "no metadata transaction is open")
            self._before_transaction = None
        self.image.apply(record, offset)

    def apply_control(self, record: DecodedRecord, offset: int) -> None:
        """A KRaft control record: KRaft's own state, outside metadata transactions (an
        aborted one does not undo it, an open one does not hide it)."""
        self.image.apply_control(record, offset)
        if self._before_transaction is not None:
            self._before_transaction.kraft_version = self.image.kraft_version
            self._before_transaction.voters = copy.deepcopy(self.image.voters)

    @property
    def in_transaction(self) -> bool:
        return self._before_transaction is not None

    def result(self) -> ClusterImage:
        """The state after the last record applied; inside an open transaction, the state
        before it began (its records are not published until it ends)."""
        if self._before_transaction is not None:
            return copy.deepcopy(self._before_transaction)
        return self.image


def replay(records, image: Optional[ClusterImage] = None) -> ClusterImage:
    """The state after (offset, DecodedRecord) pairs, applied in order."""
    replayer = MetadataReplay(image)
    for offset, record in records:
        replayer.apply(record, offset)
    return replayer.result()
