"""What a new user meets first on the command line: tables in a narrow terminal (split
tables repeat the columns that name a row), a path that is a symbolic link loop, a dump
past the end of the log or of a file that is not there, write errors in the command's own
words, every command of a directory with nothing to work on (and lag and share-groups of
a group with nothing to show), lag --at as consumer_lag's at, and a write into a
directory of other data. In-process through click's CliRunner, on the Kafka-written
fixtures or copies in tmp_path. Exit statuses: 0 ok, 1 damaged, 2 usage error."""
import json
import os
import re

import pytest
from click.testing import CliRunner

from segmentlog_datasource.cli import main
from support.fixtures import broker_disks_root, internal_topics_kafka4_root

USAGE = 2


def run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env)


def numeric_tokens(text):
    """Every run of characters that holds a digit (a set: split tables repeat the
    partition column, and a wrapped title splits the path, not a number)."""
    return {token for token in re.findall(r"[\w.,:@/-]+", text) if re.search(r"\d", token)}


@pytest.fixture
def logdir(kafka_logdir, monkeypatch):
    monkeypatch.chdir(kafka_logdir)  # a short path in the tables' titles
    return "."


# ------------------------------------------------------------------ describe

@pytest.mark.parametrize("columns", [80, 140])
def test_describe_never_crops_a_number_in_a_narrow_terminal(logdir, columns):
    narrow = run("describe", logdir, env={"COLUMNS": str(columns)})
    wide = run("describe", logdir, env={"COLUMNS": "400"})
    assert narrow.exit_code == wide.exit_code == 0, narrow.output
    assert max(len(line) for line in narrow.output.splitlines()) <= columns
    assert "…" not in narrow.output
    tokens = numeric_tokens(narrow.output)
    # the numbers the report saw cropped: plain-0's offsets and bytes, bigoffset-0's LSO
    assert {"0..370", "237,915", "11589939041", "8589938834..11589939040"} <= tokens
    assert tokens == numeric_tokens(wide.output)


def test_write_reports_its_offsets_whole_in_a_narrow_terminal(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"n": n}) + "\n" for n in range(120)))
    result = run("write", tmp_path / "logdir", source, "--topic", "events", "--partitions",
                 1, env={"COLUMNS": "24"})
    assert result.exit_code == 0, result.output
    assert "0..119" in numeric_tokens(result.output) and "…" not in result.output


# ------------------------------------------------------- a symbolic link loop

@pytest.mark.parametrize("command", ["describe", "verify", "dump"])
def test_a_path_that_is_a_symbolic_link_loop_is_a_usage_error_naming_it(tmp_path, command):
    loop = tmp_path / "kafka-logs"
    os.symlink(loop, loop)
    result = run(command, loop)
    assert result.exit_code == USAGE, result.output
    assert result.output.splitlines()[-1] == (
        f"Error: {loop}: a symbolic link loop (too many levels of symbolic links): fix or "
        f"remove the link, or give the log dir's own path")


def test_a_symbolic_link_loop_inside_a_log_dir_is_named(tmp_path):
    loop = tmp_path / "orders-0"
    os.symlink(loop, loop)
    result = run("verify", tmp_path)
    assert result.exit_code == USAGE, result.output
    assert f"Error: {loop}: a symbolic link loop" in result.output


def test_a_write_to_a_symbolic_link_loop_is_a_usage_error(tmp_path):
    loop = tmp_path / "kafka-logs"
    os.symlink(loop, loop)
    source = tmp_path / "in.jsonl"
    source.write_text('{"n": 1}\n')
    result = run("write", loop, source, "--topic", "t", "--partitions", 1)
    assert result.exit_code == USAGE, result.output
    assert f"Error: {loop}: a symbolic link loop" in result.output


# ------------------------------------------------------ dump past the end

def test_dump_from_an_offset_past_the_log_end_says_what_the_log_holds(logdir):
    result = run("dump", "plain-0", "--offset", 10000)
    assert result.exit_code == 0, result.output
    assert result.output == ("Nothing to dump in plain-0 at or after offset 10000: it holds "
                             "offsets 0..370 (log end offset 371)\n")
    as_json = json.loads(run("dump", "plain-0", "--offset", 10000, "--json").output)
    assert (as_json["kind"], as_json["offset"], as_json["log_start_offset"],
            as_json["log_end_offset"]) == ("nothing", 10000, 0, 371)


def test_dump_from_a_time_after_the_last_record_says_the_latest_timestamp(logdir):
    result = run("dump", "plain-0", "--timestamp", 1800000000000)
    assert result.exit_code == 0, result.output
    assert result.output == (
        "Nothing to dump in plain-0 at or after timestamp 1800000000000 "
        "(2027-01-15T08:00:00.000Z): it holds offsets 0..370, the latest timestamp "
        "1700000013211 (2023-11-14T22:13:33.211Z) (log end offset 371)\n")


def test_dump_of_a_log_dir_from_an_offset_dumps_the_partitions_that_reach_it(logdir):
    result = run("dump", logdir, "--offset", 600, "--json")
    assert result.exit_code == 0, result.output
    items = [json.loads(line) for line in result.output.splitlines()]
    batches = {(i["file"].split(os.sep)[-2]) for i in items if i["kind"] == "batch"}
    nothing = {f"{i['topic']}-{i['partition']}": i["log_end_offset"] for i in items
               if i["kind"] == "nothing"}
    assert "codec-gzip-0" in batches and "plain-0" not in batches  # 0..696 and 0..370
    assert nothing["plain-0"] == 371 and "codec-gzip-0" not in nothing


@pytest.mark.parametrize("name", ["00000000000000099999.log", "00000000000000099999.index"])
def test_dump_of_a_segment_file_that_is_not_there_says_no_such_file_and_which_are(
        logdir, name):
    result = run("dump", f"plain-0/{name}")
    assert result.exit_code == USAGE, result.output
    partition = os.path.abspath("plain-0")
    assert result.output.splitlines()[-1] == (
        f"Error: {partition}/{name}: no such file: {partition} holds the segments "
        f"00000000000000000000.log to 00000000000000000326.log (a segment's files are named "
        f"by its base offset; to dump from offset 99999, give the partition directory and "
        f"--offset 99999)")


def test_dump_of_a_checkpoint_file_that_is_not_there_says_no_such_file(logdir):
    result = run("dump", "plain-0/leader-epoch-checkpoint")
    assert result.exit_code == USAGE, result.output
    assert result.output.splitlines()[-1] == \
        f"Error: {os.path.abspath('plain-0/leader-epoch-checkpoint')}: no such file"
    result = run("dump", "nothere/00000000000000000000.log")
    assert result.output.splitlines()[-1] == (
        f"Error: {os.path.abspath('nothere/00000000000000000000.log')}: no such file (and "
        f"no directory {os.path.abspath('nothere')})")


@pytest.mark.parametrize("option", ["--offset", "--timestamp"])
def test_a_negative_offset_or_timestamp_is_a_usage_error(logdir, option):
    result = run("dump", "plain-0", option, -5)
    assert result.exit_code == USAGE
    assert f"Invalid value for '{option}': -5 is not in the range x>=0" in result.output


# ------------------------------------------------ write, in the command's words

@pytest.fixture
def rows(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text('{"user": "a", "p": 5}\n{"user": "b", "p": 0}\n')
    return source


def write_error(result):
    assert result.exit_code == USAGE, result.output
    message = result.output.splitlines()[-1]
    # the Spark writer's words, which the command line does not have
    for foreign in ("numPartitions", "mode", "overwrite", "df.drop", "option 'topic'"):
        assert foreign not in message, message
    return message


def test_write_errors_speak_of_the_commands_options(tmp_path, rows):
    logdir = tmp_path / "logdir"
    assert write_error(run("write", logdir, rows, "--topic", "t")) == (
        f"Error: topic 't' does not exist in {logdir}: give --partitions N to create it "
        f"with N partitions")
    assert run("write", logdir, rows, "--topic", "t", "--partitions", 2).exit_code == 0
    assert write_error(run("write", logdir, rows, "--topic", "t", "--partitions", 3)) == (
        f"Error: --partitions 3, but topic 't' in {logdir} has 2 partitions: write appends, "
        f"which keeps a topic's partition count; leave out --partitions")
    message = write_error(run("write", logdir, rows, "--topic", "t", "--partition-field", "p"))
    assert message == (
        "Error: Invalid value for --partition-field: row 1: field 'p' holds partition 5, "
        "but topic 't' has partitions 0..1; without --partition-field rows are placed by "
        "key, as Kafka's producer places them")
    described = json.loads(run("describe", logdir, "--json").output)
    assert sum(part["records"] for part in described["partitions"]) == 2  # the first write


@pytest.mark.parametrize("topic", ["bad topic", ".hidden", "t" * 250])
def test_a_topic_name_kafka_does_not_allow_is_a_usage_error(tmp_path, rows, topic):
    message = write_error(run("write", tmp_path / "logdir", rows, "--topic", topic,
                              "--partitions", 1))
    assert message.startswith("Error: --topic: topic name ")
    assert not (tmp_path / "logdir").exists()


# ------------------------------- a -future copy, being moved between log dirs

FUTURE = "orders-0.41de7ceed9cb418d0a5ac006cac13f0b-future"
MOVING = ("a copy of the partition that the broker is moving into this log dir from another "
          "of its log dirs (kafka-reassign-partitions with log_dirs, or kafka-log-dirs), "
          "swapped in for the current copy once it has caught up")


def last_note(output):
    """The last note of `output`, its lines (wrapped to the terminal) joined."""
    return " ".join(output[output.rindex("note: "):].split())


@pytest.fixture
def broker_0(monkeypatch):
    monkeypatch.chdir(os.path.join(broker_disks_root(), "broker-0"))
    return "."


def test_describe_and_dump_read_a_future_copy_named_and_say_what_it_is(broker_0):
    described = run("describe", FUTURE, env={"COLUMNS": "100"})
    assert described.exit_code == 0, described.output
    assert last_note(described.output) == (
        f"note: {FUTURE} is orders-0's -future directory: {MOVING}; read as partition "
        f"orders-0")
    as_json = json.loads(run("describe", FUTURE, "--json").output)
    (part,) = as_json["partitions"]
    # a prefix of orders-0 (the fixture's README); the log dir's checkpoints are those of
    # the current orders-0 beside it, not this copy's
    assert (part["topic"], part["partition"], part["first_offset"], part["log_end_offset"],
            part["high_watermark"]) == ("orders", 0, 0, 233, None)
    assert part["directory"].endswith(FUTURE) and as_json["notes"] == [
        f"{FUTURE} is orders-0's -future directory: {MOVING}; read as partition orders-0"]
    dumped = run("dump", FUTURE)
    assert dumped.exit_code == 0, dumped.output
    assert dumped.stdout.splitlines()[0] == \
        f"Dumping {os.path.abspath(FUTURE)}/00000000000000000000.log"
    assert dumped.stdout.count("baseOffset: ") == 36
    assert dumped.stderr == (f"note: {FUTURE} is orders-0's -future directory: {MOVING}; "
                             f"read as partition orders-0\n")


def test_describe_of_a_log_dir_says_how_to_read_the_future_copy_it_passes_over(broker_0):
    described = run("describe", broker_0, env={"COLUMNS": "100"})
    assert described.exit_code == 0, described.output
    assert max(len(line) for line in described.output.splitlines()) <= 100
    assert last_note(described.output) == (
        f"note: ./{FUTURE} is not shown: orders-0's -future directory, {MOVING}; name it to "
        f"read it (segmentlog describe ./{FUTURE})")
    partitions = json.loads(run("describe", broker_0, "--json").output)["partitions"]
    assert [len(p["replicas"]) for p in partitions if p["topic"] == "orders"] == [1, 1, 1]


# ----------------------------------------- a command that finds nothing to work on

NOTHING = "holds no partition (no <topic>-<partition> directory, and no segment file)"


@pytest.mark.parametrize("holds", [[], ["meta.properties", "replication-offset-checkpoint"]],
                         ids=["empty", "bookkeeping-only"])
@pytest.mark.parametrize("command, says", [
    ("describe", "Error: nothing to describe: {path} " + NOTHING),
    ("dump", "Error: nothing to dump: {path} " + NOTHING),
    ("verify", "Error: nothing to verify: {path} " + NOTHING + ", so nothing was checked"),
    ("lag", "Error: no __consumer_offsets partition under {path}: it is read from a broker's "
            "log dir holding __consumer_offsets-<n> directories"),
    ("share-groups", "Error: no __share_group_state partition under {path}: it is read "
                     "from a broker's log dir holding __share_group_state-<n> directories"),
])
def test_every_command_that_finds_nothing_is_a_usage_error_naming_the_path(
        tmp_path, holds, command, says):
    for name in holds:
        (tmp_path / name).write_text("0\n0\n" if name.endswith("checkpoint") else "")
    for extra in ([], ["--json"]) if command != "dump" else ([], ["--json"], ["--records"]):
        result = run(command, tmp_path, *extra)
        assert result.exit_code == USAGE, result.output
        assert result.output.splitlines()[-1] == says.format(path=tmp_path)
        assert "valid" not in result.output and "┏" not in result.output


@pytest.mark.parametrize("command, says", [
    (["lag", "--group", "biling"],
     "Error: nothing to show: group 'biling' has no committed offsets in the "
     "__consumer_offsets partitions under {path} (the groups with committed offsets there: "
     "analytics, audit, billing, legacy-etl, regex-app, stream-etl, txn-app, wordcount)"),
    (["lag", "--at", "2025-10-09T08:00:00Z"],
     "Error: nothing to show: the __consumer_offsets partitions under {path} hold no "
     "committed offsets written by 2025-10-09T08:00:00.000Z"),
    (["share-groups", "--group", "share-ap"],
     "Error: nothing to show: group 'share-ap' has no share-group state in the "
     "__share_group_state partitions under {path} (the groups with share-group state "
     "there: share-app)"),
])
def test_lag_and_share_groups_that_find_no_group_are_usage_errors_naming_what_is_there(
        command, says):
    path = internal_topics_kafka4_root()
    for extra in ([], ["--json"]):
        result = run(command[0], path, *command[1:], *extra)
        assert result.exit_code == USAGE, result.output
        assert result.output.splitlines()[-1] == says.format(path=path)


# ------------------------------------------------ a directory of other data

def test_write_refuses_a_directory_of_other_data_naming_what_is_there(tmp_path, rows):
    parquet = tmp_path / "orders.parquet"
    parquet.mkdir()
    for name in ("_SUCCESS", "part-00000-5b1c.snappy.parquet"):
        (parquet / name).write_bytes(b"")
    result = run("write", parquet, rows, "--topic", "t1", "--partitions", 1)
    assert result.exit_code == USAGE, result.output
    assert result.output.splitlines()[-1] == (
        f"Error: {parquet} is not a Kafka log dir: it holds '_SUCCESS', "
        f"'part-00000-5b1c.snappy.parquet' and no <topic>-<partition> directory, and a read "
        f"of it fails. Write into a new or empty directory, or into a log dir")
    assert sorted(os.listdir(parquet)) == ["_SUCCESS", "part-00000-5b1c.snappy.parquet"]


# ------------------------------------- split tables carry the columns that name a row

def tables(output):
    """The tables of `output` as (whether it continues the one before, header names,
    rows of cells); a header wrapped over several lines is joined per column."""
    found, heading, header, rows, inside = [], [], [], [], False
    for line in output.splitlines():
        if line.startswith("┏"):
            inside, header, rows = True, [], []
        elif not inside:
            heading.append(line)
        elif line.startswith("┃"):
            cells = [cell.strip() for cell in line.strip("┃").split("┃")]
            header = cells if not header else [f"{a} {b}".strip()
                                               for a, b in zip(header, cells)]
        elif line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
        elif line.startswith("└"):
            found.append(("(continued)" in " ".join(heading), header, rows))
            inside, heading = False, []
    return found


def split_tables(output):
    """Each table with its continuations: a list of (header, rows) per table."""
    whole = []
    for continued, header, rows in tables(output):
        if continued:
            whole[-1].append((header, rows))
        else:
            whole.append([(header, rows)])
    return whole


def written(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"n": n}) + "\n" for n in range(40)))
    return ["write", tmp_path / "logdir", source, "--topic", "events", "--partitions", 3]


@pytest.mark.parametrize("command, columns, keys", [
    (lambda tmp: ["lag", internal_topics_kafka4_root()], 80, [["group", "topic", "partition"]]),
    (lambda tmp: ["share-groups", internal_topics_kafka4_root()], 80,
     [["group", "topic", "partition"]]),
    (lambda tmp: ["describe"] + [os.path.join(broker_disks_root(), f"broker-{n}")
                                 for n in range(3)],
     60, [["partition"], ["partition"], ["partition", "copy"]]),
    (written, 24, [["topic", "partition"]]),
], ids=["lag", "share-groups", "describe", "write"])
def test_every_split_table_repeats_the_columns_that_name_its_rows(tmp_path, command,
                                                                   columns, keys):
    result = run(*command(tmp_path), env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    whole = split_tables(result.output)
    assert [len(parts) > 1 for parts in whole] == [True] * len(keys), result.output
    for parts, named in zip(whole, keys):
        names = []
        for header, rows in parts:
            assert set(named) <= set(header), (header, named)
            # a row's key cells, its first line's (a cell of two lines leaves them empty)
            names.append([keyed for keyed in ([row[header.index(k)] for k in named]
                                              for row in rows) if any(keyed)])
        # each continued row says which row it continues, in the first table's order
        assert names == [names[0]] * len(parts) and len(names[0]) > 1


# ------------------------------------------------- lag --at, as consumer_lag's at

def test_lag_at_takes_iso_8601_as_consumer_lag_does_and_names_itself_otherwise():
    path = internal_topics_kafka4_root()
    as_of = {json.loads(run("lag", path, "--json", "--at", at).output)["as_of"]
             for at in ("1760000106488", "2025-10-09T08:55:06.488Z",
                        "2025-10-09T10:55:06.488+02:00", "2025-10-09T08:55:06.488")}
    assert as_of == {1760000106488}  # a time without Z or an offset is UTC
    result = run("lag", path, "--at", "yesterday")
    assert result.exit_code == USAGE
    assert result.output.splitlines()[-1] == (
        "Error: --at: 'yesterday' is neither epoch milliseconds nor an ISO 8601 time such as "
        "2026-11-25T03:00:00Z or 2026-11-25T03:00:00+01:00 (without Z or an offset, a time "
        "is UTC)")
