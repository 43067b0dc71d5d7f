"""Where a command's progress goes: a live bar on a terminal (rich), plain lines in logs and
pipes, or only what matters with ``--quiet``.

``--json`` commands keep stdout for their one summary, so their progress goes to stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = ["Mode", "Reporter", "choose_mode"]

Mode = Literal["live", "plain", "quiet"]


def choose_mode(stream: TextIO, *, quiet: bool = False) -> Mode:
    """A live display only where someone watches a terminal; plain lines elsewhere."""
    if quiet:
        return "quiet"
    return "live" if stream.isatty() else "plain"


class Reporter:
    """Says what a command does. ``detail`` lines are left out with ``--quiet``;
    ``say`` lines (what was written, failures, the final table) never are."""

    def __init__(self, mode: Mode = "plain", stream: TextIO | None = None):
        self.mode = mode
        self._stream = stream  # None: whatever sys.stdout is when a line is said
        self._progress: Progress | None = None

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stdout

    def say(self, line: str) -> None:
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self.stream, flush=True)

    def detail(self, line: str) -> None:
        if self.mode != "quiet":
            self.say(line)

    @contextmanager
    def task(self, description: str, total: int | None) -> Iterator[_Task]:
        """A unit of work counted as it goes: a bar when live, nothing extra otherwise
        (plain and quiet output already say each step)."""
        if self.mode != "live" or self._progress is not None:
            yield _Task(None, None)
            return
        console = Console(file=self.stream, force_terminal=True)
        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=console, transient=True)
        self._progress = progress
        try:
            with progress:
                yield _Task(progress, progress.add_task(description, total=total))
        finally:
            self._progress = None


class _Task:
    def __init__(self, progress: Progress | None, task_id: object):
        self._progress = progress
        self._id = task_id

    def advance(self) -> None:
        if self._progress is not None:
            self._progress.advance(self._id)  # type: ignore[arg-type]
