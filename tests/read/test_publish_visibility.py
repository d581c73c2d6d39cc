"""Readers never see part of a segmentlog write (#22 A).

A write becomes visible when its publish journal goes; before that, a reader (batch
planning, the streaming source, the command line) reads the log as it was. Here writers
stop themselves (SIGSTOP, the test hook SEGMENTLOG_TEST_STOP_AT_STEP) after a chosen
publishing rename, alive and holding their journal, while this process reads; a writer
publishing in a loop races readers that list the log dir again and again. Kills at every
step are in tests/write/test_publish_kill.py, which reads each killed state the same way.
"""
import json
import os
import subprocess
import sys

from click.testing import CliRunner

from segmentlog_datasource.cli.main import main as cli_main
from segmentlog_datasource.format import discover_partitions
from segmentlog_datasource.format.pending import PUBLISH_TOKEN
from segmentlog_datasource.read.stream import LogStream, parse_stream_options
from segmentlog_datasource.writer import write_log
from segmentlog_datasource.writer.publish import STOP_HOOK

from support.children import run_script
from support.reading import read_values

SMALL = {"segment_bytes": 1024, "batch_size": 256}  # a few segments per partition
PARTITIONS = 4

ROWS = """
import pyarrow as pa

def rows(tag, per_partition, partitions):
    values, parts = [], []
    for partition in range(partitions):
        for i in range(per_partition):
            values.append(b"%s-p%d-%03d-" % (tag.encode(), partition, i) + b"x" * 50)
            parts.append(partition)
    return pa.table({"value": values, "partition": pa.array(parts, pa.int32())})
"""
exec(ROWS)

APPEND = ROWS + """
import sys
from segmentlog_datasource.writer import write_log
write_log(sys.argv[1], rows("job", 30, 4), topic="t", mode="append", segment_bytes=1024,
          batch_size=256)
"""

OVERWRITE_FEWER = ROWS + """
import sys
from segmentlog_datasource.writer import write_log
write_log(sys.argv[1], rows("new", 20, 2), topic="t", mode="overwrite", num_partitions=2,
          segment_bytes=1024, batch_size=256)
"""


def expected(*tables):
    found = {}
    for table in tables:
        for value, partition in zip(table.column("value").to_pylist(),
                                    table.column("partition").to_pylist()):
            found.setdefault(("t", partition), []).append(value)
    return found


def cli(*args):
    return CliRunner().invoke(cli_main, [str(a) for a in args], catch_exceptions=False)


def stream_available(path):
    stream = LogStream(parse_stream_options({"path": path}))
    return {tp: view.available for tp, view in stream.partitions_now().items()}


def seed(logdir):
    table = rows("old", 10, PARTITIONS)
    write_log(logdir, table, topic="t", num_partitions=PARTITIONS, **SMALL)
    return expected(table)


def renames_of_a_whole_append(tmp_path):
    """How many publishing steps the append takes: its new files, one rename each, and
    the high-watermark checkpoint's replacement."""
    logdir = str(tmp_path / "count")
    seed(logdir)
    before = {name: set(os.listdir(os.path.join(logdir, name)))
              for name in os.listdir(logdir) if name.startswith("t-")}
    done = run_script(APPEND, [logdir])
    assert done.returncode == 0, done.stderr
    return sum(len(set(os.listdir(os.path.join(logdir, name))) - files)
               for name, files in before.items()) + 1


def test_an_append_stopped_at_any_publishing_step_is_seen_as_before_until_it_ends(tmp_path):
    last = renames_of_a_whole_append(tmp_path)
    assert last > 12  # several segments in each of the four partitions
    job = expected(rows("job", 30, PARTITIONS))
    for step in (1, 3, last // 2, last - 1, last):
        logdir = str(tmp_path / f"log-{step}")
        before = seed(logdir)
        ends = {(log.topic, log.partition): log.end_offset()
                for log in discover_partitions([logdir])}
        looked = []

        def look():
            # the writer is alive, stopped after its `step`th rename, its journal in place
            assert read_values(logdir) == before, step
            assert read_values(logdir, readUpTo="logEnd") == before, step
            assert read_values(os.path.join(logdir, "t-3"), readUpTo="logEnd") == \
                {("t", 3): before[("t", 3)]}, step
            assert stream_available(logdir) == ends, step
            dumped = cli("dump", "--json", logdir)
            assert dumped.exit_code == 0, dumped.output
            assert sum(line.get("record_count", 0) for line in map(
                json.loads, dumped.output.splitlines())) == 10 * PARTITIONS, step
            verified = cli("verify", logdir)
            assert verified.exit_code == 0, verified.output
            described = cli("describe", logdir)
            assert "has not finished publishing; shown as the log was before it" in \
                described.output, described.output
            described = json.loads(cli("describe", "--json", logdir).output)
            assert len(described["unfinished_writes"]) == 1
            assert {p["partition"]: p["records"] for p in described["partitions"]} == \
                {p: 10 for p in range(PARTITIONS)}
            assert {(log.topic, log.partition): log.end_offset()
                    for log in discover_partitions([logdir])} == ends
            looked.append(step)

        done = run_script(APPEND, [logdir], env={STOP_HOOK: str(step)}, when_stopped=look)
        assert done.returncode == 0, done.stderr
        assert looked == [step]
        # once the journal is gone, the whole job at once
        assert read_values(logdir) == {key: before[key] + job[key] for key in before}
        assert "has not finished" not in cli("describe", logdir).output
        assert stream_available(logdir) == {key: end + 30 for key, end in ends.items()}


def test_an_overwrite_with_fewer_partitions_stopped_while_publishing_is_seen_as_before(
        tmp_path):
    for step in (1, 2, 3, 5):
        logdir = str(tmp_path / f"log-{step}")
        before = seed(logdir)
        looked = []

        def look():
            assert read_values(logdir) == before, step
            assert read_values(os.path.join(logdir, "t-3")) == {("t", 3): before[("t", 3)]}
            looked.append(step)

        done = run_script(OVERWRITE_FEWER, [logdir], env={STOP_HOOK: str(step)},
                          when_stopped=look)
        assert done.returncode == 0, done.stderr
        assert looked in ([step], [])  # [] once the step is past the publish's last
        assert read_values(logdir) == expected(rows("new", 20, 2))


RACE = ROWS + """
import sys
from segmentlog_datasource.writer import write_log
for job in range(int(sys.argv[2])):
    write_log(sys.argv[1], rows("job%02d" % job, 7, 4), topic="t", mode="append",
              segment_bytes=512, batch_size=128)
"""


JOBS = 10


def test_readers_racing_a_writer_see_whole_jobs_only(tmp_path):
    """Each job appends 7 records to each of 4 partitions (a dozen renames): every
    listing a reader makes while jobs publish holds the same jobs in every partition."""
    logdir = str(tmp_path / "log")
    write_log(logdir, rows("seed", 1, PARTITIONS), topic="t", num_partitions=PARTITIONS,
              segment_bytes=512, batch_size=128)
    writer = subprocess.Popen([sys.executable, "-c", RACE, logdir, str(JOBS)],
                              stderr=subprocess.PIPE, cwd=str(tmp_path))
    seen_jobs = set()
    try:
        while writer.poll() is None:
            for options in ({}, {"readUpTo": "logEnd"}):
                counts = {key: len(values) for key, values in read_values(logdir,
                                                                          **options).items()}
                assert len(set(counts.values())) == 1, counts  # the same jobs everywhere
                assert (counts[("t", 0)] - 1) % 7 == 0, counts  # whole jobs only
                seen_jobs.add((counts[("t", 0)] - 1) // 7)
    finally:
        writer.wait(60)
    assert writer.returncode == 0, writer.stderr.read().decode()
    assert len(seen_jobs) > 3  # the readers did overlap the publishes
    assert {len(v) for v in read_values(logdir).values()} == {1 + JOBS * 7}
    token = json.loads(open(os.path.join(logdir, PUBLISH_TOKEN)).read())
    assert set(token) == {"job", "token"}
