"""Progress bars as a user at a terminal sees them (issue #45's first-hour list): describe,
verify, lag and write draw one on stderr while they work and erase it before printing
their result; a pipe, a file or --json output never gets one. Each command runs as the
user runs it, `python -m segmentlog_datasource`, with its stdout and stderr on a
pseudo-terminal (or stdout on a pipe), on the Kafka-written fixtures."""
import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from support.fixtures import internal_topics_kafka4_root

ERASE_LINE = b"\x1b[2K"


def on_terminal(*args, cwd, stdout_pipe=False):
    """(exit status, what the terminal got, what the pipe got) of a segmentlog command
    whose stderr (and stdout, unless `stdout_pipe`) is a 120-column pseudo-terminal."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    environment = {name: value for name, value in os.environ.items()
                   if name not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE",
                                   "TTY_INTERACTIVE", "NO_COLOR")}
    environment["TERM"] = "xterm-256color"
    process = subprocess.Popen(
        [sys.executable, "-m", "segmentlog_datasource", *map(str, args)], cwd=str(cwd),
        stdin=slave, stdout=subprocess.PIPE if stdout_pipe else slave, stderr=slave,
        env=environment)
    os.close(slave)
    terminal = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every end of the terminal is closed
            break
        if not data:
            break
        terminal += data
    os.close(master)
    piped = process.stdout.read() if stdout_pipe else b""
    assert process.wait(timeout=300) == 0, terminal.decode(errors="replace")
    return terminal, piped


def bar_lines(terminal: bytes):
    """The progress bar's renderings: each redraw erases the line it draws on."""
    text = terminal.decode("utf-8", errors="replace")
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text.replace("\x1b[2K", "\n@bar "))
    return [line[5:].strip() for line in plain.splitlines() if line.startswith("@bar ")
            and line[5:].strip()]


def test_describe_draws_a_bar_on_a_terminal_and_erases_it(kafka_logdir, tmp_path):
    terminal, _ = on_terminal("describe", kafka_logdir, cwd=tmp_path)
    drawn = [line for line in bar_lines(terminal) if line.startswith("describing")]
    assert drawn, terminal
    # the last drawing has read every segment: done is the total
    done = re.search(r"([\d.]+)/([\d.]+) (kB|MB)", drawn[-1])
    assert done and done.group(1) == done.group(2), drawn[-1]
    # erased (the cursor goes up over it) before the tables, which are whole
    text = terminal.decode("utf-8", errors="replace")
    assert text.index("\x1b[1A") < text.index("segmentlog: ")
    assert "as a consumer reads it" in text


@pytest.mark.parametrize("command", ["describe", "verify"])
def test_no_bar_when_stdout_is_a_pipe_or_json(kafka_logdir, tmp_path, command):
    terminal, piped = on_terminal(command, kafka_logdir, cwd=tmp_path, stdout_pipe=True)
    assert ERASE_LINE not in terminal + piped and b"\x1b" not in piped
    assert piped.startswith(b"segmentlog: " if command == "describe" else b"")
    terminal, _ = on_terminal(command, kafka_logdir, "--json", cwd=tmp_path)
    assert ERASE_LINE not in terminal
    json.loads(terminal.decode())  # nothing but the document


def test_verify_and_lag_draw_their_steps(kafka_logdir, tmp_path):
    verified, _ = on_terminal("verify", kafka_logdir, cwd=tmp_path)
    assert any(line.startswith("verifying") for line in bar_lines(verified)), verified
    lag, _ = on_terminal("lag", internal_topics_kafka4_root(), cwd=tmp_path)
    steps = {line.split(" ", 1)[0] for line in bar_lines(lag)}
    assert {"reading", "finding"} <= steps, bar_lines(lag)
    assert b"segmentlog lag: " in lag


def test_write_draws_its_input_then_its_publish(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"n": n}) + "\n" for n in range(25_000)))
    terminal, _ = on_terminal("write", tmp_path / "logdir", source, "--topic", "events",
                              "--partitions", 2, cwd=tmp_path)
    steps = [line.split(" ", 2)[:2] for line in bar_lines(terminal)]
    assert ["writing", "events"] in steps and ["publishing", "events"] in steps, steps
    assert b"wrote 25000 records to " in terminal
    _, piped = on_terminal("write", tmp_path / "logdir", source, "--topic", "events",
                           cwd=tmp_path, stdout_pipe=True)
    assert piped.startswith(b"wrote 25000 records to ") and b"\x1b" not in piped
