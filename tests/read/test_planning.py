"""Planning into fragments: lookups on a generated log of hundreds of segments, and cuts
of the Kafka-written fixtures."""
import os

import pyarrow as pa
import pytest

from segmentlog_datasource.errors import InvalidOptionError
from segmentlog_datasource.format.log import PartitionLog
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments
from segmentlog_datasource.writer import write_log

RECORDS = 60_000
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def many_segments(tmp_path_factory):
    """Two partitions of 30,000 records each, in about 200 segments each."""
    logdir = str(tmp_path_factory.mktemp("many-segments"))
    ids = list(range(RECORDS))
    table = pa.table({
        "key": pa.array([b"k%d" % i for i in ids], pa.binary()),
        "value": pa.array([b"value-%06d-" % i + b"x" * 40 for i in ids], pa.binary()),
        "partition": pa.array([i % 2 for i in ids], pa.int32()),
        "timestamp": pa.array([BASE_TS + i for i in ids], pa.timestamp("ms", tz="UTC")),
    })
    write_log(logdir, table, topic="events", num_partitions=2, batch_size=1024,
              segment_bytes=8192, index_interval_bytes=1024)
    return logdir


def plan(logdir, constraints=None, **options):
    return plan_fragments(parse_read_options({"path": logdir, **options}),
                       constraints or Constraints())


def test_the_log_has_hundreds_of_segments(many_segments):
    for partition in (0, 1):
        log = PartitionLog.open(os.path.join(many_segments, f"events-{partition}"))
        assert len(log.segments) >= 150
        assert log.end_offset() == RECORDS // 2


def test_point_lookup_plans_one_split_of_a_few_kb(many_segments):
    log = PartitionLog.open(os.path.join(many_segments, "events-1"))
    for target in (0, 1, 12_345, 29_999):
        c = Constraints()
        c.restrict_topics(["events"])
        c.restrict_partitions([1])
        c.restrict_offsets(low=target, high=target + 1)
        fragments = plan(many_segments, c)
        assert len(fragments) == 1, target
        fragment = fragments[0]
        segment = log.segments[log.segment_index_for(target)]
        assert fragment.log_path == segment.log_path
        # From the index entry below the target to the entry after the one above it.
        assert fragment.bytes <= 3 * 1024 + 2 * 1100, (target, fragment.bytes)
        assert fragment.bytes < segment.size or segment.size <= 3 * 1024 + 2 * 1100


def test_offset_range_plans_only_the_segments_it_spans(many_segments):
    c = Constraints()
    c.restrict_partitions([0])
    c.restrict_offsets(low=10_000, high=10_500)
    fragments = plan(many_segments, c)
    log = PartitionLog.open(os.path.join(many_segments, "events-0"))
    first, last = log.segment_index_for(10_000), log.segment_index_for(10_499)
    assert [s.log_path for s in fragments] == [seg.log_path for seg in log.segments[first:last + 1]]
    total = sum(seg.size for seg in log.segments)
    assert sum(s.bytes for s in fragments) < total / 50


def test_timestamp_lower_bound_skips_older_segments(many_segments):
    c = Constraints()
    c.restrict_partitions([0])
    c.restrict_timestamps(low_us=(BASE_TS + 50_000) * 1000)
    fragments = plan(many_segments, c)
    full = plan(many_segments, Constraints(partitions=frozenset([0])))
    assert 0 < len(fragments) < len(full) / 4
    # Records with timestamps >= BASE_TS + 50000 have offsets >= 25000 in partition 0.
    log = PartitionLog.open(os.path.join(many_segments, "events-0"))
    assert fragments[0].log_path == log.segments[log.segment_index_for(25_000)].log_path or \
        fragments[0].log_path == log.segments[log.segment_index_for(25_000) - 1].log_path


# One of each kind: a point, a list of points, a time window (ranges and one-sided
# bounds are planned by the same code: tests/spark/test_read.py reads them pushed)
@pytest.mark.parametrize("condition", [
    "partition = 1 AND offset = 12345",
    "partition = 0 AND offset IN (5, 9999, 29999, 40000)",
    "timestamp >= timestamp_millis(1700000055000) AND timestamp < timestamp_millis(1700000055100)",
])
def test_pushed_lookups_equal_a_full_scan_then_filter(spark, pushdown, many_segments, condition):
    def rows():
        df = spark.read.format("segmentlog").load(many_segments).where(condition)
        return sorted((r.partition, r.offset, bytes(r.value), r.timestamp) for r in df.collect())

    pushdown(True)
    pushed = rows()
    pushdown(False)
    scanned = rows()
    assert pushed == scanned and pushed


def test_small_segments_share_spark_partitions(many_segments):
    from segmentlog_datasource.read.planning import group_fragments

    read = parse_read_options({"path": many_segments})
    fragments = plan_fragments(read, Constraints())
    groups = group_fragments(fragments, read)
    assert len(fragments) >= 300 and len(groups) < len(fragments) / 20
    assert [s for group in groups for s in group] == fragments  # same fragments, same order
    spread = parse_read_options({"path": many_segments, "minPartitions": "40"})
    assert len(group_fragments(plan_fragments(spread, Constraints()), spread)) >= 40
    per_records = parse_read_options({"path": many_segments, "maxRecordsPerPartition": "100"})
    assert len(group_fragments(plan_fragments(per_records, Constraints()), per_records)) == \
        len(plan_fragments(per_records, Constraints()))


def _batches(logdir, **options):
    """The Arrow batches a read of `logdir` with these options hands Spark, in order."""
    from segmentlog_datasource.read.fragments import scan_fragments, scan_options
    from segmentlog_datasource.read.planning import group_fragments

    read = parse_read_options({"path": logdir, **options})
    return [batch for group in group_fragments(plan_fragments(read, Constraints()), read)
            for batch in scan_fragments(group, scan_options(read))]


def test_max_records_per_batch_cuts_the_arrow_batches_only(many_segments):
    default, cut = _batches(many_segments), _batches(many_segments, maxRecordsPerBatch="50")
    # a segment holds about 130 records; a batch ends with the Kafka batch (of 1 KiB, under
    # 20 records here) that brings it to 50
    assert max(batch.num_rows for batch in default) > 100
    assert 50 <= max(batch.num_rows for batch in cut) < 70 and len(cut) > len(default)
    assert pa.Table.from_batches(cut).equals(pa.Table.from_batches(default))
    for bad in ("0", "-5", "many"):
        with pytest.raises(InvalidOptionError, match="'maxRecordsPerBatch'.*positive integer"):
            parse_read_options({"path": many_segments, "maxRecordsPerBatch": bad})


def test_max_records_per_batch_through_spark(spark, many_segments):
    def totals(**options):
        return tuple(spark.read.format("segmentlog").options(**options).load(many_segments)
                     .selectExpr("count(*)", "sum(offset)", "sum(length(value))").first())

    assert totals(maxRecordsPerBatch="7") == totals() == \
        (RECORDS, 2 * sum(range(RECORDS // 2)), sum(len(b"value-%06d-" % i) + 40
                                                    for i in range(RECORDS)))


def test_offset_in_list_plans_one_lookup_per_value(many_segments):
    c = Constraints()
    c.restrict_partitions([0])
    c.restrict_offsets(values=[5, 9_999, 29_999, 40_000])  # 40000 is past the log end
    fragments = plan(many_segments, c)
    log = PartitionLog.open(os.path.join(many_segments, "events-0"))
    wanted = [log.segments[log.segment_index_for(v)].log_path for v in (5, 9_999, 29_999)]
    assert [s.log_path for s in fragments] == wanted
    assert all(s.bytes <= 3 * 1024 + 2 * 1100 for s in fragments)
    near = Constraints()
    near.restrict_partitions([0])
    near.restrict_offsets(values=[100, 101, 102])  # one segment, one merged range
    assert len(plan(many_segments, near)) == 1


def test_a_log_growing_after_planning_reads_as_planned(tmp_path):
    from segmentlog_datasource.format.scan import ScanOptions

    logdir = str(tmp_path / "growing")
    first = pa.table({"value": pa.array([b"a%d" % i for i in range(500)], pa.binary())})
    write_log(logdir, first, topic="live", num_partitions=1, segment_bytes=4096, batch_size=512)
    fragments = plan(logdir)
    more = pa.table({"value": pa.array([b"b%d" % i for i in range(500)], pa.binary())})
    write_log(logdir, more, topic="live", segment_bytes=4096, batch_size=512)  # new segments
    rows = [row for fragment in fragments
            for batch in fragment.scan(ScanOptions())
            for row in batch.column("value").to_pylist()]
    assert rows == [b"a%d" % i for i in range(500)]
    assert len(PartitionLog.open(os.path.join(logdir, "live-0")).segments) > len(fragments)


def test_bytes_appended_to_the_active_segment_after_planning_are_not_read(kafka_logdir_copy):
    from segmentlog_datasource.format.scan import ScanOptions

    partition_dir = os.path.join(kafka_logdir_copy, "live-0")
    fragments = plan(partition_dir)
    with open(os.path.join(partition_dir, "00000000000000000093.log"), "ab") as log:
        log.write(b"\xff" * 5000)  # a broker still writing: not there when planned
    offsets = [o for fragment in fragments for batch in fragment.scan(ScanOptions())
               for o in batch.column("offset").to_pylist()]
    assert offsets == list(range(155))


# ----------------------------------------------------- on the Kafka-written fixtures

def _plan(kafka_logdir, **options):
    options.setdefault("path", kafka_logdir)
    constraints = options.pop("constraints", Constraints())
    return plan_fragments(parse_read_options(options), constraints)


def test_point_lookup_plans_one_small_fragment(kafka_logdir):
    constraints = Constraints()
    constraints.restrict_topics(["compacted"])
    constraints.restrict_offsets(low=600, high=601)
    fragments = _plan(kafka_logdir, constraints=constraints)
    assert len(fragments) == 1
    fragment = fragments[0]
    assert os.path.basename(fragment.log_path) == "00000000000000000594.log"
    full = _plan(kafka_logdir, subscribe="compacted")
    assert len(full) == 12
    assert fragment.bytes <= os.path.getsize(fragment.log_path)


def test_one_fragment_per_segment_and_index_ranges(kafka_logdir):
    whole = _plan(kafka_logdir, subscribe="plain")
    assert len(whole) == 12  # 4 segments in each of plain-0, plain-1, plain-2
    cut = _plan(kafka_logdir, subscribe="plain", maxPartitionBytes="8192")
    assert len(cut) > len(whole)
    for fragment in cut:  # fragments start on offset index entries or segment starts
        log = PartitionLog.open(os.path.dirname(fragment.log_path))
        segment = next(s for s in log.segments if s.log_path == fragment.log_path)
        assert fragment.start_position == 0 or \
            fragment.start_position in segment.offset_index.positions
    covered = {}
    for fragment in cut:
        covered.setdefault(fragment.log_path, []).append(
            (fragment.start_position, fragment.end_position))
    for path, ranges in covered.items():
        ranges.sort()
        assert ranges[0][0] == 0 and ranges[-1][1] == os.path.getsize(path)
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))


def test_min_partitions_adds_fragments(kafka_logdir):
    assert len(_plan(kafka_logdir, subscribe="plain", minPartitions="30")) >= 30
