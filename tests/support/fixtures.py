"""Where the Kafka-written fixtures are: SEGMENTLOG_FIXTURES, else the copies in tests/."""
import os

FIXTURES_ENV = "SEGMENTLOG_FIXTURES"
FIXTURES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "fixtures")
BUNDLED = os.path.join(FIXTURES_DIR, "kafka-written")
BUNDLED_BROKER_DISKS = os.path.join(FIXTURES_DIR, "broker-disks")
BUNDLED_INTERNAL_TOPICS = os.path.join(FIXTURES_DIR, "internal-topics")
BUNDLED_INTERNAL_TOPICS_KAFKA4 = os.path.join(FIXTURES_DIR, "internal-topics-kafka4")
BUNDLED_TXN_V2 = os.path.join(FIXTURES_DIR, "txn-v2")
BUNDLED_TIERED_CLUSTER = os.path.join(FIXTURES_DIR, "tiered-cluster")


def fixtures_root() -> str:
    """The fixtures' log dir: $SEGMENTLOG_FIXTURES (a set with a logdir/ inside, or a log
    dir itself), or the copy of ../shared/fixtures/kafka-written kept in tests/fixtures."""
    root = os.environ.get(FIXTURES_ENV) or BUNDLED
    return os.path.join(root, "logdir") if os.path.isdir(os.path.join(root, "logdir")) else root


def _set_beside_given(name: str, marker: str):
    """The fixture set `name` beside $SEGMENTLOG_FIXTURES's set (a fixtures/ folder holds
    them all), if it is there (it holds `marker`)."""
    given = os.environ.get(FIXTURES_ENV)
    if given:
        beside = os.path.join(os.path.dirname(os.path.abspath(given).rstrip(os.sep)), name)
        if os.path.isfile(os.path.join(beside, marker)):
            return beside
    return None


def broker_disks_root() -> str:
    """The three brokers' log dirs with their manifest: the broker-disks set beside
    $SEGMENTLOG_FIXTURES's set, else the copy of ../shared/fixtures/broker-disks kept in
    tests/fixtures."""
    return _set_beside_given("broker-disks", "manifest.json") or BUNDLED_BROKER_DISKS


def internal_topics_root() -> str:
    """The partitions of Kafka's internal topics with their manifests: the internal-topics
    set beside $SEGMENTLOG_FIXTURES's set, else the copy of
    ../shared/fixtures/internal-topics kept in tests/fixtures."""
    return _set_beside_given("internal-topics", "__consumer_offsets-0.manifest.json") \
        or BUNDLED_INTERNAL_TOPICS


def internal_topics_kafka4_root() -> str:
    """Kafka 4.2's internal topics with their manifests: the internal-topics-kafka4 set
    beside $SEGMENTLOG_FIXTURES's set, else the copy kept in tests/fixtures."""
    return _set_beside_given("internal-topics-kafka4", "__consumer_offsets-0.manifest.json") \
        or BUNDLED_INTERNAL_TOPICS_KAFKA4


def txn_v2_root() -> str:
    """Transactional partitions as a transaction-version-2 cluster writes them: the txn-v2
    set beside $SEGMENTLOG_FIXTURES's set, else the copy kept in tests/fixtures."""
    return _set_beside_given("txn-v2", "txv2-0.manifest.json") or BUNDLED_TXN_V2


def tiered_cluster_root() -> str:
    """A tiered-storage cluster (three brokers' log dirs, their remote store, the
    __remote_log_metadata partitions) with its manifest: the tiered-cluster set beside
    $SEGMENTLOG_FIXTURES's set, else the copy kept in tests/fixtures."""
    return _set_beside_given("tiered-cluster", "manifest.json") or BUNDLED_TIERED_CLUSTER
