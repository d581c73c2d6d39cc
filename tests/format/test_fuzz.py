"""The short fuzz run of damaged segments and indexes (issue #9): no crash, no hang, and
either Kafka's rows (of the log, or of the active segment up to its damaged entry) or an
error naming the file and position. The model and the oracle are in support/fuzzing.py;
tests/fuzz_segments.py is the longer run.

Hypothesis draws the cases derandomized, so every run tries the same ones; each case
runs in a worker process (support.fuzzing.CaseRunner), so a crash or a hang fails the
case with its reproducer instead of killing pytest. The test run draws 100 cases (8 s;
300 took 24 s), nearly all of them damage to a `.log`, and then a seeded set of 24 cases of
damage to an index (`.index`, `.timeindex`, `.txnindex`, eight each, drawn by the same
model), which Hypothesis' first few hundred draws barely reach (the 300 drew no
`.txnindex`). SEGMENTLOG_FUZZ_EXAMPLES=N draws N cases instead of 100:
`SEGMENTLOG_FUZZ_EXAMPLES=1000 pytest tests/format/test_fuzz.py` is the longer sweep
beside tests/fuzz_segments.py.
"""
import json
import os
import shutil
import signal

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings, strategies  # noqa: E402

from support.fuzzing import (  # noqa: E402
    CaseRunner, Fixtures, HypothesisChooser, RandomChooser, damaged_copy, draw_case, judge, reproducer,
    run_case, visible_rows,
)
from support.manifest import expected_rows  # noqa: E402

# the test run's; tests/fuzz_segments.py runs for as long as it is given
CI_EXAMPLES = int(os.environ.get("SEGMENTLOG_FUZZ_EXAMPLES", "100"))
INDEX_CASES_EACH = 8  # damaged .index, .timeindex and .txnindex cases, seeded


@pytest.fixture(scope="module")
def fixtures(kafka_logdir):
    return Fixtures(kafka_logdir)


@pytest.fixture(scope="module")
def runner(kafka_logdir):
    runner = CaseRunner(kafka_logdir, timeout=30.0)
    yield runner
    runner.close()


@settings(max_examples=CI_EXAMPLES, derandomize=True, deadline=None, database=None,
          phases=[Phase.explicit, Phase.generate],  # a failing case is reported as drawn
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=strategies.data())
def test_damaged_logs_read_right_or_fail_naming_file_and_position(fixtures, runner, data):
    case = draw_case(HypothesisChooser(data), fixtures)
    result = runner.run(case)
    assert result["status"] == "ok", (
        f"{result['status']}: {result['detail']}\n{reproducer(case)}")


def index_damage_cases():
    """The first INDEX_CASES_EACH cases of each index file type that the model draws
    from seeds 0, 1, 2, ...: the same cases every run."""
    fixtures = Fixtures()
    wanted = {suffix: [] for suffix in (".index", ".timeindex", ".txnindex")}
    seed = 0
    while any(len(cases) < INDEX_CASES_EACH for cases in wanted.values()):
        case = draw_case(RandomChooser(seed), fixtures)
        suffix = os.path.splitext(case["edits"][0]["file"])[1]
        if len(wanted.get(suffix, [None] * INDEX_CASES_EACH)) < INDEX_CASES_EACH:
            wanted[suffix].append(case)
        seed += 1
        assert seed < 100_000, {suffix: len(cases) for suffix, cases in wanted.items()}
    return [case for cases in wanted.values() for case in cases]


def test_damaged_indexes_read_right_or_fail_naming_file_and_position(runner):
    cases = index_damage_cases()
    assert len({json.dumps(case, sort_keys=True) for case in cases}) == len(cases)
    for case in cases:
        result = runner.run(case)
        assert result["status"] == "ok", (
            f"{result['status']}: {result['detail']}\n{reproducer(case)}")


# ------------------------------------------------- the oracle and the runner themselves
def test_the_oracle_gives_kafkas_rows_for_every_undamaged_partition(fixtures):
    # Its model of visibility (aborted transactions, the last stable offset) must agree
    # with the manifests, which Kafka's reader wrote.
    for name in fixtures.names:
        part = fixtures[name]
        whole = [(b, 0) for b in part.batches]
        for isolation in ("read_uncommitted", "read_committed"):
            rows, end = visible_rows(part, whole, isolation, None)
            assert rows == expected_rows(part.manifest, isolation), (name, isolation)
            assert end == part.manifest["summary"]["log_end_offset"], name


def test_undamaged_partitions_pass_every_read(fixtures, tmp_path):
    for name in fixtures.names:
        part = fixtures[name]
        first, end = (part.manifest["summary"][k] for k in ("first_offset", "log_end_offset"))
        reads = [{"fast": fast, "isolation": isolation, "range": offset_range,
                  "failOnDataLoss": True}
                 for fast in (True, False)
                 for isolation in ("read_uncommitted", "read_committed")
                 for offset_range in (None, [first + (end - first) // 3, end - 1])]
        case = {"partition": name, "mutation": "none", "edits": [], "reads": reads}
        result = run_case(fixtures, case, str(tmp_path))
        assert result["status"] == "ok", (name, result["detail"])
        assert set(result["outcomes"]) == {"Kafka's rows"}, (name, result["outcomes"])


def test_the_oracle_rejects_missing_rows_and_errors_without_a_file(fixtures, tmp_path):
    from segmentlog_datasource.errors import CorruptLogError, SegmentLogError

    part = fixtures["plain-0"]
    # A damaged byte in the first segment: no prefix of the log may be returned.
    case = {"partition": "plain-0", "mutation": "a byte of the first batch's records",
            "edits": [{"file": part.segment_files[0], "op": "write", "position": 70,
                       "data": "ff"}], "reads": []}
    logdir = damaged_copy(part, case["edits"], str(tmp_path))
    read = {"fast": True, "isolation": "read_uncommitted", "range": None,
            "failOnDataLoss": True}
    problem, _ = judge(part, case, read, ("rows", []), logdir)
    assert problem.startswith("wrong rows without an error")
    log_path = os.path.join(logdir, "plain-0", part.segment_files[0])
    for error in (SegmentLogError("something is wrong"), ValueError(log_path),
                  CorruptLogError(log_path, None, "no position"),
                  CorruptLogError(log_path, 10**9, "past the end"),
                  CorruptLogError("/elsewhere/00000000000000000000.log", 0, "another file")):
        problem, _ = judge(part, case, read, ("error", error), logdir)
        assert problem is not None, error
    assert judge(part, case, read, ("error", CorruptLogError(log_path, 0, "bad")),
                 logdir) == (None, "error CorruptLogError")


def test_a_worker_killed_by_a_signal_is_a_crash_with_the_case(fixtures, kafka_logdir):
    runner = CaseRunner(kafka_logdir, timeout=30.0)
    try:
        case = {"partition": "plain-0", "mutation": "none", "edits": [],
                "reads": [{"fast": True, "isolation": "read_uncommitted", "range": None,
                           "failOnDataLoss": True}]}
        assert runner.run(case)["status"] == "ok"
        os.kill(runner.pid(), signal.SIGSEGV)
        result = runner.run(case)
        assert result["status"] == "crash" and "SIGSEGV" in result["detail"], result
        assert runner.run(case)["status"] == "ok"  # a fresh worker takes the next case
    finally:
        runner.close()


def test_a_case_that_does_not_finish_in_time_is_a_hang(kafka_logdir):
    runner = CaseRunner(kafka_logdir, timeout=0.001)
    try:
        case = {"partition": "txn-0", "mutation": "none", "edits": [],
                "reads": [{"fast": False, "isolation": "read_committed", "range": None,
                           "failOnDataLoss": True}]}
        result = runner.run(case)
        assert result["status"] == "hang", result
    finally:
        runner.close()


def test_the_fixtures_are_never_damaged(kafka_logdir, fixtures, tmp_path):
    part = fixtures["live-0"]
    before = {n: os.path.getsize(os.path.join(part.directory, n)) for n in part.files}
    edits = [{"file": part.last_log, "op": "resize", "size": 10}]
    damaged_copy(part, edits, str(tmp_path))
    assert {n: os.path.getsize(os.path.join(part.directory, n)) for n in part.files} == before
    shutil.rmtree(tmp_path / "logdir")
