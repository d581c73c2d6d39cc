"""The tiered-storage cluster of ../shared/fixtures/tiered-cluster: its manifest and the
paths a reader is given (the brokers' dirs, the remote store, the metadata partitions)."""
import json
import os

from support.fixtures import tiered_cluster_root

ROOT = tiered_cluster_root()
with open(os.path.join(ROOT, "manifest.json"), encoding="utf-8") as handle:
    MANIFEST = json.load(handle)
INPUTS = MANIFEST["reader_inputs"]
BROKERS = [os.path.join(ROOT, name) for name in INPUTS["broker_dirs"]]
STORE = os.path.join(ROOT, INPUTS["remote_storage"])
METADATA = [os.path.join(ROOT, name) for name in INPUTS["remote_log_metadata_partitions"]]
USER_PARTITIONS = [name for name, p in MANIFEST["partitions"].items() if not p["internal"]]
TIERED_PARTITIONS = [name for name in USER_PARTITIONS
                     if "remote_segments" in MANIFEST["partitions"][name]]
