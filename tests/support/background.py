"""Programs that start with the test run and are checked at its end.

A few tests drive a whole program of their own: the notebook through a Jupyter kernel, the
demo script, an application on the standalone cluster, Spark drivers that are killed.
Each spends most of a minute starting JVMs and waiting on them, on one core at a time, and
so does most of the rest of the suite. Such a test names a starter with the `background`
marker:

    def start_demo(request):            # runs in the main thread when the run begins
        directory = ...                 # fixtures through request.getfixturevalue(...)
        return lambda: subprocess.run([...])   # the program: runs in the background thread

    @pytest.mark.background(starter=start_demo)
    def test_demo(background):
        done = background.result(start_demo)   # waits for it; re-raises what it raised

A program keeps its files in directories its starter made: tempfile's default directory is
not its own (a test may redirect it while the program runs). The conftest calls every
selected test's starters when the first test runs (under pytest-xdist, the first test of
the worker that runs the Spark group, which holds every test with such a marker), queues
their programs on one background thread, one at a time, and orders the tests that carry the
marker last, so that these programs overlap with the rest of the suite instead of
following it. A test run on its own (pytest -k ...) starts only its own.
"""
import concurrent.futures
import os
import threading

# Background programs yield the CPU to the suite's own tests (they fill its idle time):
# niceness is per thread on Linux, and the processes the thread starts inherit it.
BACKGROUND_NICENESS = 10


def _lower_priority():
    if not hasattr(os, "setpriority"):
        return  # not Linux: the programs run at the suite's priority
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Two workers leave no idle time to fill: a starved program's Spark would miss
        # the 10 s its Python workers get to connect back.
        return
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICENESS)
    except OSError:
        return  # not allowed: the programs run at the suite's priority


class Background:
    def __init__(self):
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="segmentlog-background",
            initializer=_lower_priority)
        self._jobs = {}
        self.started = False  # whether the run's programs were started (conftest.py)

    def start(self, starter, request):
        """Run `starter(request)` now and queue the program it returns (once per starter)."""
        if starter not in self._jobs:
            try:
                program = starter(request)
            except BaseException as exc:  # reported by the test that asks for it
                future = concurrent.futures.Future()
                future.set_exception(exc)
            else:
                future = self._pool.submit(program)
            self._jobs[starter] = future
        return self._jobs[starter]

    def result(self, starter, timeout=None):
        if starter not in self._jobs:
            raise LookupError(f"{starter!r} was not started: mark the test with "
                              "@pytest.mark.background(starter=...)")
        return self._jobs[starter].result(timeout)

    def close(self):
        self._pool.shutdown(wait=True, cancel_futures=True)
