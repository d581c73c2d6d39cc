"""Loading the Kafka-written fixtures' manifests (the expected values of the format tests).

A manifest (`<partition dir>.manifest.json`, beside the directory) records what Apache
Kafka's own reader code returned for the directory; see the fixtures' README.md. This
module only decodes it (base64 -> bytes, type names -> Spark's timestampType numbers);
it never derives anything from the code under test.
"""
import base64
import functools
import json
import os

# Spark's Kafka source reports timestampType as Kafka's TimestampType.id.
TIMESTAMP_TYPE_IDS = {"NoTimestampType": -1, "CreateTime": 0, "LogAppendTime": 1}


def b64(text):
    return None if text is None else base64.b64decode(text)


@functools.lru_cache(maxsize=None)
def load_manifest(logdir, name):
    with open(os.path.join(logdir, name + ".manifest.json"), encoding="utf-8") as handle:
        return json.load(handle)


def partition_names(logdir):
    """Names of the partition directories that have a manifest beside them."""
    return sorted(
        name for name in os.listdir(logdir)
        if os.path.isdir(os.path.join(logdir, name))
        and os.path.exists(os.path.join(logdir, name + ".manifest.json"))
    )


def expected_row(record, include_headers=True):
    """A manifest record as the row the reader should return (timestamp in ms)."""
    row = {
        "offset": record["offset"],
        "timestamp": record["timestamp"],
        "timestampType": TIMESTAMP_TYPE_IDS[record["timestamp_type"]],
        "key": b64(record["key"]),
        "value": b64(record["value"]),
    }
    if include_headers:
        row["headers"] = [(key, b64(value)) for key, value in record["headers"]]
    return row


def iter_batches(manifest):
    for segment in manifest["segments"]:
        for batch in segment["batches"]:
            yield segment, batch


def iter_records(manifest):
    """(segment, batch, record) for every record the manifest lists, in log order."""
    for segment, batch in iter_batches(manifest):
        for record in batch["records"]:
            yield segment, batch, record


def expected_rows(manifest, isolation="read_uncommitted", lo=None, hi=None, segment=None):
    """Data rows visible under `isolation`, with lo <= offset < hi, optionally of one segment.

    Control records (listed in the manifest with their raw key and value) are never data.
    """
    flag = "visible_" + isolation
    rows = []
    for seg, batch, record in iter_records(manifest):
        if segment is not None and seg["base_offset"] != segment:
            continue
        if batch["is_control"]:
            assert not record[flag], "the manifest shows a control record as visible"
            continue
        if not record[flag]:
            continue
        if lo is not None and record["offset"] < lo:
            continue
        if hi is not None and record["offset"] >= hi:
            continue
        rows.append(expected_row(record))
    return rows


def arrow_rows(batches, include_headers=True):
    """Rows of Arrow record batches in the same shape as `expected_row`.

    Timestamps are compared in epoch milliseconds; the column holds microseconds
    (ms * 1000) in UTC, which is checked here for every row.
    """
    import pyarrow as pa

    rows = []
    for batch in batches:
        ts_type = batch.schema.field("timestamp").type
        assert ts_type == pa.timestamp("us", tz="UTC"), ts_type
        micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
        offsets = batch.column("offset").to_pylist()
        types = batch.column("timestampType").to_pylist()
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        headers = batch.column("headers").to_pylist() if include_headers else None
        for i, offset in enumerate(offsets):
            assert micros[i] % 1000 == 0, (offset, micros[i])
            row = {
                "offset": offset,
                "timestamp": micros[i] // 1000,
                "timestampType": types[i],
                "key": keys[i],
                "value": values[i],
            }
            if include_headers:
                row["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            rows.append(row)
    return rows
