"""The compiled encoder (fastpath/compiled_encode.py, _fastencode.c) is the pure encoder's
twin (v2_encode.encode_batches_python): both must give the same bytes and metadata.

Inputs: generated record columns (null, empty and large keys and values, headers with
null values and null lists, sliced and string columns, any timestamps, some rows in an
order of their own), every codec, both timestamp types, producer-filled and given batch
cuts; every partition of a write encoded at once from chunked columns (encode_groups);
Kafka's key hash of generated keys (the partitioner's compiled murmur2); and the records
of every Kafka-written magic-2 fixture batch, re-encoded with both, whose bytes must be Kafka's
where the writer's conventions allow (contiguous offsets; the producer fields, which a
non-idempotent writer leaves at -1, are set to the batch's before comparing).
"""
import os
import struct

import crc32c
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segmentlog_datasource.format import compression
from segmentlog_datasource.format.arrow import HEADER_TYPE
from segmentlog_datasource.format.fastpath import batch_encoder
from segmentlog_datasource.format.layout import (
    ATTR_TRANSACTIONAL, CREATE_TIME, LOG_APPEND_TIME, V2_CRC, V2_CRC_START, V2_HEADER_SIZE,
    V2_PRODUCER_ID,
)
from segmentlog_datasource.format.encode import encode_batches, encode_groups
from segmentlog_datasource.format.v2_encode import (
    RecordColumns, RecordTooLargeError, encode_batches_python, encode_groups_python,
    patch_batch_headers,
)
from segmentlog_datasource.writer.partitioner import key_hashes, murmur2_array, partitions_for_keys
from support.compiled import ENCODER_NOT_BUILT, NOT_BUILT, compiled_encode
from support.manifest import b64, load_manifest, partition_names

# A pure-Python install encodes with the twin alone; CI sets SEGMENTLOG_REQUIRE_FAST=1,
# and then a missing build fails.
pytestmark = pytest.mark.skipif(
    compiled_encode is None and not os.environ.get("SEGMENTLOG_REQUIRE_FAST"),
    reason=f"the compiled encoder is not built here ({ENCODER_NOT_BUILT}); build it with: "
           "python setup.py build_ext --inplace")

T0 = 1_700_000_000_000
CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4,
          compression.ZSTD]


def test_the_compiled_encoder_is_built_where_ci_requires_it():
    assert compiled_encode is not None, f"_fastencode does not import: {ENCODER_NOT_BUILT}"
    assert batch_encoder() is compiled_encode.encode_batches_compiled
    assert batch_encoder(use_fast_path=False) is encode_batches_python
    assert batch_encoder(grouped=True) is compiled_encode.encode_groups_compiled
    assert batch_encoder(use_fast_path=False, grouped=True) is encode_groups_python
    assert NOT_BUILT is None  # the decoder, which the same build makes


def assert_twins(columns, **options):
    """Both encoders' output, which must be the same; returns it."""
    pure = encode_batches_python(columns, **options)
    fast = compiled_encode.encode_batches_compiled(columns, **options)
    assert bytes(fast.data) == bytes(pure.data)
    for field in ("sizes", "record_counts", "max_timestamps", "first_rows"):
        assert np.array_equal(getattr(fast, field), getattr(pure, field)), field
    # The dispatcher's two choices are these two.
    chosen = encode_batches(columns, use_fast_path=False, **options)
    assert bytes(chosen.data) == bytes(pure.data)
    return fast


# ----------------------------------------------------------------- generated cases

payloads = st.one_of(st.none(), st.just(b""), st.binary(max_size=40),
                     st.binary(min_size=120, max_size=400))
header_lists = st.one_of(
    st.none(),
    st.lists(st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=12))),
             max_size=3))
records = st.lists(
    st.tuples(payloads, payloads, st.integers(-5000, 5000), header_lists),
    min_size=1, max_size=60)


@settings(max_examples=150, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(records, st.sampled_from(CODECS), st.sampled_from([0, 1, 100, 700, 16384]),
       st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]), st.integers(0, 3), st.booleans(),
       st.booleans(), st.one_of(st.none(), st.randoms(use_true_random=False)))
def test_generated_records_encode_alike(rows, codec, batch_size, timestamp_type, skip,
                                        as_strings, given_cuts, pick):
    keys = pa.array([k for k, _, _, _ in rows], pa.binary())
    values = pa.array([v for _, v, _, _ in rows], pa.binary())
    if as_strings:  # large and string columns go through as_binary
        keys = pa.array([None if k is None else k.hex() for k, _, _, _ in rows], pa.large_string())
    headers = None
    if any(h for _, _, _, h in rows):
        headers = pa.array([None if h is None else [{"key": k, "value": v} for k, v in h]
                            for _, _, _, h in rows], HEADER_TYPE)
    timestamps = T0 + np.array([t for _, _, t, _ in rows], dtype=np.int64)
    # Sliced columns: Arrow offsets into the buffers, not from 0.
    skip = min(skip, len(rows) - 1)
    columns = RecordColumns(keys.slice(skip), values.slice(skip), timestamps[skip:],
                            None if headers is None else headers.slice(skip))
    order = None
    if pick is not None:  # some of the rows, in an order of their own (a partition's)
        order = np.array(pick.sample(range(len(columns)), pick.randint(1, len(columns))))
    cuts = None
    if given_cuts:
        count = len(columns) if order is None else len(order)
        cuts = np.unique(np.concatenate(([0], np.arange(0, count, 7))))
    assert_twins(columns, codec=codec, batch_size=batch_size, timestamp_type=timestamp_type,
                 log_append_time=T0 + 99, batch_starts=cuts, rows=order)


def chunked(array, cuts):
    """`array` as a ChunkedArray cut at `cuts` (positions), empty chunks included."""
    bounds = [0] + sorted(min(c, len(array)) for c in cuts) + [len(array)]
    return pa.chunked_array([array.slice(a, b - a) for a, b in zip(bounds, bounds[1:])],
                            array.type)


@settings(max_examples=120, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(records, st.sampled_from(CODECS), st.sampled_from([0, 100, 700, 16384]),
       st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]), st.integers(1, 6),
       st.randoms(use_true_random=False), st.booleans())
def test_grouped_records_encode_alike(rows, codec, batch_size, timestamp_type, group_count,
                                      pick, chunk_keys_alike):
    """encode_groups: every group's records in one pass over chunked columns, as
    encode_batches gives each group's rows."""
    keys = pa.array([k for k, _, _, _ in rows], pa.binary())
    values = pa.array([v for _, v, _, _ in rows], pa.binary())
    headers = None
    if any(h for _, _, _, h in rows):
        headers = pa.array([None if h is None else [{"key": k, "value": v} for k, v in h]
                            for _, _, _, h in rows], HEADER_TYPE)
    timestamps = T0 + np.array([t for _, _, t, _ in rows], dtype=np.int64)
    n = len(rows)
    cuts = [pick.randint(0, n) for _ in range(pick.randint(0, 4))]
    key_cuts = cuts if chunk_keys_alike else [pick.randint(0, n)]
    columns = RecordColumns(chunked(keys, key_cuts), chunked(values, cuts), timestamps,
                            headers)
    groups = np.array([pick.randrange(group_count) for _ in range(n)], dtype=np.int64)
    options = dict(codec=codec, batch_size=batch_size, timestamp_type=timestamp_type,
                   log_append_time=T0 + 99)
    fast = compiled_encode.encode_groups_compiled(columns, groups, group_count, **options)
    pure = encode_groups_python(columns, groups, group_count, **options)
    assert len(fast) == len(pure) == group_count
    plain = RecordColumns(keys, values, timestamps, headers)
    for g in range(group_count):
        rows_of_g = np.flatnonzero(groups == g)
        if not len(rows_of_g):
            assert fast[g] is None and pure[g] is None
            continue
        alone = encode_batches_python(plain, rows=rows_of_g, **options)
        for encoded in (fast[g], pure[g]):
            assert bytes(encoded.data) == bytes(alone.data)
            for field in ("sizes", "record_counts", "max_timestamps", "first_rows"):
                assert np.array_equal(getattr(encoded, field), getattr(alone, field)), field
    chosen = encode_groups(columns, groups, group_count, use_fast_path=False, **options)
    assert [None if e is None else bytes(e.data) for e in chosen] == \
        [None if e is None else bytes(e.data) for e in pure]


def test_grouped_encoding_refuses_bad_group_numbers():
    columns = RecordColumns(pa.array([b"k"] * 3), pa.array([b"v"] * 3), np.full(3, T0))
    for encode in (encode_groups_python, compiled_encode.encode_groups_compiled):
        with pytest.raises(ValueError, match="out of range"):
            encode(columns, np.array([0, 2, 1]), 2)
        with pytest.raises(ValueError, match="one group number per record"):
            encode(columns, np.array([0, 1]), 2)


@settings(max_examples=60, derandomize=True, deadline=None, database=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=30), st.binary(min_size=1000,
                                                                        max_size=1100)),
                min_size=1, max_size=40), st.integers(0, 3))
def test_key_hashes_alike(keys, skip):
    array = pa.array(keys, pa.binary()).slice(min(skip, len(keys) - 1))
    assert np.array_equal(key_hashes(array), key_hashes(array, use_fast_path=False))
    assert np.array_equal(key_hashes(array), murmur2_array(array))
    for n in (1, 2, 3, 7, 1000, 2**31 - 1):  # partitions in the hashing pass, or after it
        partitions = partitions_for_keys(array, n)
        assert partitions.dtype == np.int64 and partitions.flags.writeable
        assert partitions.tolist() == partitions_for_keys(array, n, use_fast_path=False).tolist()
        assert partitions.tolist() == [(h & 0x7FFFFFFF) % n for h in key_hashes(array).tolist()]


def test_large_records_and_many_batches_encode_alike():
    rng = np.random.default_rng(3)
    n = 3000
    sizes = rng.choice([0, 5, 100, 3000], n)
    sizes[[10, 2000]] = [2_000_000, 300_000]  # batches of their own, past batch.size
    values = pa.array([rng.bytes(int(s)) if i % 13 else None for i, s in enumerate(sizes)])
    keys = pa.array([None if i % 7 == 0 else b"key-%d" % i for i in range(n)])
    timestamps = T0 + rng.integers(-10**9, 10**9, n)
    columns = RecordColumns(keys, values, timestamps)
    for codec in (compression.NONE, compression.LZ4):
        encoded = assert_twins(columns, codec=codec)
        assert len(encoded) > 100
    # offset deltas past one varint byte (64) and two (8192), in one batch
    tiny = RecordColumns(pa.nulls(20000, pa.binary()), pa.array([b""] * 20000),
                         np.full(20000, T0))
    assert_twins(tiny, batch_size=1 << 20)


def test_too_large_batches_fail_alike():
    large = np.random.default_rng(1).bytes(5000)  # does not compress below the limit
    columns = RecordColumns(pa.array([b"k"] * 3), pa.array([b"v" * 10, large, b"v"]),
                            np.full(3, T0))
    for codec in (compression.NONE, compression.GZIP):
        messages = []
        for encode in (encode_batches_python, compiled_encode.encode_batches_compiled):
            with pytest.raises(RecordTooLargeError) as caught:
                encode(columns, codec=codec, batch_size=0, max_batch_bytes=1000)
            messages.append(str(caught.value))
        assert messages[0] == messages[1] and "input row 1" in messages[0], messages


def test_null_header_keys_fail_alike():
    columns = RecordColumns(pa.array([b"k"]), pa.array([b"v"]), np.array([1]),
                            pa.array([[{"key": None, "value": b"1"}]], HEADER_TYPE))
    for use_fast_path in (True, False):
        with pytest.raises(ValueError, match="header key is null"):
            encode_batches(columns, use_fast_path=use_fast_path)


@pytest.mark.parametrize("instruction", [True, False])
def test_crc32c_of_the_compiled_encoder(instruction):
    module = compiled_encode._fastencode
    before = module.set_crc_instruction(instruction)
    try:
        data = np.random.default_rng(5).bytes(70_001)
        for start, end in [(0, 0), (0, 1), (3, 11), (1, 70_001), (7, 4099)]:
            assert module.crc32c(data[start:end]) == crc32c.crc32c(data[start:end])
    finally:
        module.set_crc_instruction(before)


# ------------------------------------------------------------------ Kafka's batches

def _fixture_batches(logdir):
    for name in partition_names(logdir):
        manifest = load_manifest(logdir, name)
        for segment in manifest["segments"]:
            path = os.path.join(logdir, name, segment["log_file"])
            with open(path, "rb") as handle:
                log = handle.read()
            for batch in segment["batches"]:
                if batch["magic"] == 2 and not batch["is_control"] and batch["records"]:
                    yield name, batch, log[batch["position"]:
                                           batch["position"] + batch["size_in_bytes"]]


def test_kafka_written_batches_reencode_alike_and_as_kafka_wrote_them(kafka_logdir):
    compared = same_as_kafka = 0
    for name, batch, kafka in _fixture_batches(kafka_logdir):
        records = batch["records"]
        log_append = batch["timestamp_type"] == "LogAppendTime"
        columns = RecordColumns.from_records(
            (b64(r["key"]), b64(r["value"]), r["timestamp"], [(k, b64(v)) for k, v in r["headers"]])
            for r in records)
        codec = compression.CODEC_IDS[batch["compression"]]
        encoded = assert_twins(
            columns, codec=codec, batch_starts=np.zeros(1, dtype=np.int64),
            timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME,
            log_append_time=batch["max_timestamp"])
        compared += 1
        contiguous = [r["offset"] for r in records] == list(range(
            batch["base_offset"], batch["last_offset"] + 1))  # compaction leaves gaps
        if log_append or not contiguous or name.startswith("compacted"):
            # Not in the manifest: the records' own create times, the offset gaps; the
            # cleaner's rewritten batches keep the deltas of records it removed.
            continue
        ours = bytearray(encoded.data)
        patch_batch_headers(ours, np.zeros(1, dtype=np.int64),
                            np.array([batch["base_offset"]]), batch["partition_leader_epoch"])
        # What a producer with an id would have set; then the CRC over it.
        struct.pack_into(">qhi", ours, V2_PRODUCER_ID, batch["producer_id"],
                         batch["producer_epoch"], batch["base_sequence"])
        if batch["is_transactional"]:
            ours[V2_CRC_START + 1] |= ATTR_TRANSACTIONAL
        struct.pack_into(">I", ours, V2_CRC, crc32c.crc32c(bytes(ours[V2_CRC_START:])))
        if codec == compression.NONE:
            assert bytes(ours) == kafka, f"{name}: batch at offset {batch['base_offset']}"
        else:  # compressors differ; the header and the records inside must not
            assert ours[V2_CRC_START:V2_HEADER_SIZE] == kafka[V2_CRC_START:V2_HEADER_SIZE]
            assert compression.decompress(codec, ours[V2_HEADER_SIZE:]) == \
                compression.decompress(codec, kafka[V2_HEADER_SIZE:])
        same_as_kafka += 1
    assert compared > 300 and same_as_kafka > 250, (compared, same_as_kafka)
