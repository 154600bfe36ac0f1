"""Progress a person can follow wherever the output goes: a rich bar on a terminal, plain lines elsewhere
(a log file, a pipe, CI), where a live bar would show nothing until the end."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from types import TracebackType
from typing import Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

HEARTBEAT_SECONDS = 30.0
"""Off a terminal, the longest silence: after this long without a line, a line saying the work goes on."""


class LiveProgress:
    """Progress over ``total`` units on ``console``, with a description before the count and a status after it.

    On a terminal it is a rich bar. Elsewhere it prints lines ``description done/total elapsed status``: one when
    the count moves (at most one per ``every`` seconds, but always the last), one at once for
    ``update(..., flush=True)``, and ``description done/total elapsed  still running`` after ``heartbeat``
    seconds without one (its status is that of the last count, not news)."""

    def __init__(self, description: str, total: int, done: int = 0, *, console: Console, status: str = "",
                 every: float = 0.0, heartbeat: float = HEARTBEAT_SECONDS) -> None:
        self.description, self.total, self.done, self.status = description, total, done, status
        self._console, self._every, self._heartbeat = console, every, heartbeat
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._beats: threading.Thread | None = None
        self._started = self._printed = time.monotonic()
        self._unprinted = False
        self._bar: Progress | None = None
        if console.is_interactive or console.is_jupyter:
            self._bar = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[status]}", markup=False),
                                 console=console)
            self._task = self._bar.add_task(description, total=total, completed=done, status=status)

    def update(self, *, advance: int = 0, completed: int | None = None, description: str | None = None,
               status: str | None = None, flush: bool = False) -> None:
        """Move the count by ``advance`` (or to ``completed``) and replace the texts given."""
        with self._lock:
            before = self.done
            self.done = self.done + advance if completed is None else completed
            self.description = self.description if description is None else description
            self.status = self.status if status is None else status
            if self._bar is not None:
                self._bar.update(self._task, completed=self.done, description=self.description, status=self.status)
                return
            self._unprinted = True
            due = time.monotonic() - self._printed >= self._every or self.done >= self.total
            if flush or (self.done != before and due):
                self._print()

    def __enter__(self) -> Self:
        if self._bar is not None:
            self._bar.start()
            return self
        with self._lock:
            self._started = time.monotonic()
            self._print()
        self._beats = threading.Thread(target=self._beat, name="agentgym-progress", daemon=True)
        self._beats.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
            return
        self._stopped.set()
        if self._beats is not None:
            self._beats.join()
        with self._lock:
            if self._unprinted:
                self._print()

    def _beat(self) -> None:
        """Print the current line whenever ``heartbeat`` seconds pass without one, until stopped."""
        while True:
            with self._lock:
                quiet = time.monotonic() - self._printed
                if quiet >= self._heartbeat:
                    self._print(status="still running")
                    quiet = 0.0
            if self._stopped.wait(self._heartbeat - quiet):
                return

    def _print(self, status: str | None = None) -> None:
        """Print the current line, with ``status`` in place of the current one if given (with the lock held)."""
        self._printed = time.monotonic()
        self._unprinted = status is not None and self._unprinted
        status = self.status if status is None else status
        elapsed = timedelta(seconds=int(self._printed - self._started))
        line = f"{self.description} {self.done}/{self.total} {elapsed}"
        self._console.print(f"{line}  {status}" if status else line, markup=False, highlight=False, soft_wrap=True)


@contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """Hide transformers' "Loading weights" progress bar for the block (a model loaded under a live bar of
    ours); restore both libraries' settings after."""
    from huggingface_hub.utils.tqdm import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )
    from transformers.utils import logging as hf_logging

    transformers_on, hub_off = hf_logging.is_progress_bar_enabled(), are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        if transformers_on:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]  # turns the hub's on too: set back below
        (disable_progress_bars if hub_off else enable_progress_bars)()
