"""Short-lived writer processes for the kill tests, forked from a server process.

A kill sweep runs a writer once per publishing step: dozens of processes, each of which
would pay for a Python start and the pyarrow, writer and boto3 imports (about half a
second) before its few milliseconds of work. The server (multiprocessing's forkserver)
imports them once; every child is a fresh fork of it, a real process of its own that a
SIGKILL ends as it would end a writer started from the shell.

    done = run_script(SCRIPT, ["/path/to/logdir"], env={KILL_HOOK: "3"})
    assert done.returncode in (0, -9), done.stderr

`when_stopped`: called each time the child stops itself with SIGSTOP (a writer's stop
hook), before the child is let go on. `returncode`, `stdout` and `stderr` mean what
subprocess.run's do: -9 for a SIGKILL, 1
for an exception (its traceback in stderr). The script runs as `__main__` with
`sys.argv[1:]` the given arguments and the given variables added to its environment.
"""
import multiprocessing
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass

# pandas: pyarrow imports it on its first conversion of Python objects (0.2 s a child).
# __main__: the parent's main module (pytest's), which a child would import again.
PRELOAD = ["__main__", "pyarrow", "pandas", "segmentlog_datasource.writer",
           "segmentlog_datasource.writer.stream", "boto3"]
_context = None


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


def _forkserver():
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def _child(script: str, argv: list, env: dict, out_path: str, err_path: str):
    for fd, path in ((1, out_path), (2, err_path)):
        target = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    os.environ.update(env)
    sys.argv = ["-c", *argv]
    exec(compile(script, "<child script>", "exec"), {"__name__": "__main__"})


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):  # gone, before or while it was read
        return "X"


def _serve_stops(process, when_stopped, timeout: float) -> None:
    """Each time the child stops itself (SIGSTOP), call `when_stopped()`, then let the
    child go on (SIGCONT), until it ends."""
    deadline = time.monotonic() + timeout
    while process.is_alive() and time.monotonic() < deadline:
        if _state(process.pid) == "T":
            try:
                when_stopped()
            finally:
                os.kill(process.pid, signal.SIGCONT)
        time.sleep(0.002)


def run_script(script: str, argv, env=None, timeout: float = 120, when_stopped=None) -> Done:
    with tempfile.TemporaryDirectory(prefix="segmentlog-child-") as directory:
        out_path, err_path = (os.path.join(directory, name) for name in ("out", "err"))
        for path in (out_path, err_path):
            open(path, "w").close()
        process = _forkserver().Process(
            target=_child, args=(script, [str(a) for a in argv], dict(env or {}), out_path,
                                 err_path))
        process.start()
        if when_stopped is not None:
            _serve_stops(process, when_stopped, timeout)
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise TimeoutError(f"the child did not finish within {timeout}s")
        with open(out_path) as out, open(err_path) as err:
            return Done(process.exitcode, out.read(), err.read())
