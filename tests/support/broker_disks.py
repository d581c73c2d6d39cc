"""The broker-disks fixtures: three brokers' log dirs of one cluster and what a consumer of
that cluster reads (manifest.json, written from Kafka's own reader), as rows to compare."""
import base64
import functools
import json
import os
import shutil

from support.fixtures import broker_disks_root

BROKERS = ("broker-0", "broker-1", "broker-2")


def root() -> str:
    return broker_disks_root()


def broker_dirs():
    return [os.path.join(root(), broker) for broker in BROKERS]


@functools.lru_cache(maxsize=None)
def manifest() -> dict:
    with open(os.path.join(root(), "manifest.json"), encoding="utf-8") as handle:
        return json.load(handle)


def _bytes(text):
    return None if text is None else base64.b64decode(text)


def row_of(record):
    """(offset, timestamp ms, key, value, headers) of a manifest record."""
    return (record["offset"], record["timestamp"], _bytes(record["key_b64"]),
            _bytes(record["value_b64"]),
            [(key, _bytes(value)) for key, value in record["headers"]])


def expected(name, isolation="read_uncommitted", lo=None, hi=None):
    """Rows of partition `name` a consumer reads, optionally within [lo, hi)."""
    key = "consumer_records" if isolation == "read_uncommitted" else "committed_records"
    return [row_of(r) for r in manifest()["partitions"][name][key]
            if (lo is None or r["offset"] >= lo) and (hi is None or r["offset"] < hi)]


def arrow_rows_by_partition(batches):
    """{"<topic>-<partition>": [(offset, timestamp ms, key, value, headers)]} of Arrow
    record batches read with headers."""
    import pyarrow as pa

    found = {}
    for batch in batches:
        columns = batch.to_pydict()
        micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
        for i in range(batch.num_rows):
            name = f"{columns['topic'][i]}-{columns['partition'][i]}"
            found.setdefault(name, []).append((
                columns["offset"][i], micros[i] // 1000, columns["key"][i], columns["value"][i],
                [(h["key"], h["value"]) for h in (columns["headers"][i] or [])]))
    return found


def writable_copy(target, brokers=BROKERS):
    """A writable copy of some brokers' dirs under `target`: their paths."""
    paths = []
    for broker in brokers:
        destination = os.path.join(str(target), broker)
        shutil.copytree(os.path.join(root(), broker), destination)
        for directory, dirs, files in os.walk(destination):
            os.chmod(directory, 0o755)
            for name in files:
                os.chmod(os.path.join(directory, name), 0o644)
        paths.append(destination)
    return paths
