"""tests/fixtures/kafka-written, broker-disks, internal-topics and the other sets are exact
copies of the shared fixtures."""
import filecmp
import os

import pytest

from support.fixtures import (
    BUNDLED, BUNDLED_BROKER_DISKS, BUNDLED_INTERNAL_TOPICS, BUNDLED_INTERNAL_TOPICS_KAFKA4,
    BUNDLED_TIERED_CLUSTER, BUNDLED_TXN_V2)
from support.paths import CHECKOUT

SHARED = CHECKOUT.parent / "shared" / "fixtures" / "kafka-written"
SHARED_BROKER_DISKS = CHECKOUT.parent / "shared" / "fixtures" / "broker-disks"
SHARED_INTERNAL_TOPICS = CHECKOUT.parent / "shared" / "fixtures" / "internal-topics"
SHARED_INTERNAL_TOPICS_KAFKA4 = CHECKOUT.parent / "shared" / "fixtures" / "internal-topics-kafka4"
SHARED_TXN_V2 = CHECKOUT.parent / "shared" / "fixtures" / "txn-v2"
SHARED_TIERED_CLUSTER = CHECKOUT.parent / "shared" / "fixtures" / "tiered-cluster"


def relative_files(root):
    return sorted(os.path.relpath(os.path.join(directory, name), root)
                  for directory, _, files in os.walk(root) for name in files)


def test_the_bundled_copy_holds_every_case_with_its_manifest():
    names = relative_files(BUNDLED)
    partitions = {n.split(os.sep)[1] for n in names if n.startswith("logdir" + os.sep)
                  and n.count(os.sep) == 2}
    manifests = {n.split(os.sep)[1][: -len(".manifest.json")] for n in names
                 if n.endswith(".manifest.json")}
    assert "README.md" in names and len(partitions) == 14 and partitions == manifests


@pytest.mark.parametrize("bundled,shared", [(BUNDLED, SHARED),
                                            (BUNDLED_BROKER_DISKS, SHARED_BROKER_DISKS),
                                            (BUNDLED_INTERNAL_TOPICS, SHARED_INTERNAL_TOPICS),
                                            (BUNDLED_INTERNAL_TOPICS_KAFKA4,
                                             SHARED_INTERNAL_TOPICS_KAFKA4),
                                            (BUNDLED_TXN_V2, SHARED_TXN_V2),
                                            (BUNDLED_TIERED_CLUSTER, SHARED_TIERED_CLUSTER)],
                         ids=["kafka-written", "broker-disks", "internal-topics",
                              "internal-topics-kafka4", "txn-v2", "tiered-cluster"])
def test_the_bundled_copy_equals_the_shared_fixtures(bundled, shared):
    if not shared.is_dir():
        pytest.skip(f"no shared fixtures beside the checkout ({shared}) to compare the copy with")
    assert relative_files(bundled) == relative_files(shared)
    for name in relative_files(shared):
        assert filecmp.cmp(os.path.join(bundled, name), os.path.join(shared, name),
                           shallow=False), name


def test_the_bundled_broker_disks_hold_three_brokers_and_a_manifest():
    names = relative_files(BUNDLED_BROKER_DISKS)
    assert {"README.md", "manifest.json"} <= set(names)
    assert {n.split(os.sep)[0] for n in names if os.sep in n} == {
        "broker-0", "broker-1", "broker-2"}


def test_the_bundled_internal_topics_hold_each_partition_with_its_manifest():
    names = relative_files(BUNDLED_INTERNAL_TOPICS)
    partitions = {n.split(os.sep)[0] for n in names if os.sep in n}
    assert partitions == {"__consumer_offsets-0", "__consumer_offsets-1",
                          "__transaction_state-0", "__cluster_metadata-0"}
    assert {p + ".manifest.json" for p in partitions} | {"README.md"} <= set(names)


def test_the_bundled_kafka4_internal_topics_add_the_share_group_state():
    names = relative_files(BUNDLED_INTERNAL_TOPICS_KAFKA4)
    partitions = {n.split(os.sep)[0] for n in names if os.sep in n}
    assert partitions == {"__consumer_offsets-0", "__consumer_offsets-1",
                          "__transaction_state-0", "__cluster_metadata-0",
                          "__share_group_state-0"}
    assert {p + ".manifest.json" for p in partitions} | {"README.md"} <= set(names)
