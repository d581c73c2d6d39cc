"""Progress bars for the commands whose work can take more than a moment on a large log:
describe, verify, lag and write.

A bar is shown only on a terminal: on stderr, when stdout and stderr are both terminals
and the output is not --json (a pipe, a file or a JSON document never gets a control
character; rich's TTY_COMPATIBLE=0 and a dumb terminal keep it off too). It is transient:
it is drawn from the start of the work and gone when the work ends, before the command
prints its result. The work goes in phases (a scan of bytes, then a count of partitions),
each its own bar.
"""
import sys
from typing import Optional

from rich.console import Console
from rich.text import Text
from rich.progress import (
    BarColumn, DownloadColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn,
    TimeRemainingColumn,
)

BYTES = "bytes"


def shows_progress(as_json: bool = False) -> bool:
    """Whether a command shows a progress bar: on a terminal only (see the module's doc)."""
    if as_json or not (_is_tty(sys.stdout) and _is_tty(sys.stderr)):
        return False
    return Console(stderr=True).is_interactive


def _is_tty(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _Done(ProgressColumn):
    """How much is done: bytes as a download's (12.3/45.6 MB), other units as 3/7 and the
    unit's name."""

    def __init__(self):
        super().__init__()
        self.of_bytes, self.counted = DownloadColumn(), MofNCompleteColumn()

    def render(self, task):
        unit = task.fields.get("unit", "")
        if unit == BYTES:
            return self.of_bytes.render(task)
        if task.total is None:
            return Text(f"{task.completed:,.0f} {unit}" if unit else "")
        done = self.counted.render(task)
        done.append(f" {unit}")
        return done


class Work:
    """A command's progress (a context manager): `phase()` starts each step, `advance()`
    moves it on; nothing is drawn unless `shown`."""

    def __init__(self, shown: bool):
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), _Done(),
                                 TimeRemainingColumn(), console=Console(stderr=True),
                                 transient=True, disable=not shown)
        self.task = None

    def __enter__(self) -> "Work":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def phase(self, description: str, total: Optional[int], unit: str = BYTES) -> None:
        """A new step: `total` units of work (None: not known) under `description`."""
        if self.task is not None:
            self.progress.remove_task(self.task)
        self.task = self.progress.add_task(description, total=total, unit=unit)

    def describe(self, description: str) -> None:
        self.progress.update(self.task, description=description)

    def advance(self, amount: int) -> None:
        self.progress.advance(self.task, amount)

    def reach(self, completed: int) -> None:
        self.progress.update(self.task, completed=completed)

