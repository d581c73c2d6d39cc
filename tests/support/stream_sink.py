"""Helpers for the streaming sink tests (engine and Spark): what a log dir holds besides
its partitions, and the sink's record read as plain JSON."""
import glob
import json
import os

SINK_RECORD_GLOB = ".segmentlog-sink-*.json"


def leftovers(logdir):
    """Dot-names other than sink records and the publish token: staging areas, locks,
    half-written records."""
    return sorted(n for n in os.listdir(logdir)
                  if n.startswith(".") and n != ".segmentlog-publishing"
                  and not (n.startswith(".segmentlog-sink-") and n.endswith(".json")))


def sink_records(logdir):
    """{query id: record} for every sink record in the log dir."""
    records = {}
    for path in glob.glob(os.path.join(logdir, SINK_RECORD_GLOB)):
        with open(path) as handle:
            record = json.load(handle)
        records[record["query_id"]] = record
    return records


def tree_bytes(root):
    """{relative path: bytes} of every file under root except dot-names at its top."""
    found = {}
    for directory, dirs, files in os.walk(root):
        if directory == root:
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            files = [f for f in files if not f.startswith(".")]
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, root)] = handle.read()
    return found
