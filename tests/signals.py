"""Signals as a test sends them, whatever the runner inherited. A runner started with ``nohup`` ignores SIGHUP and
one started in the background of a script ignores SIGINT; an ignored signal stays ignored across ``fork`` and
``exec``, and agentgym, as Python does, leaves an inherited ``SIG_IGN`` alone (``nohup agentgym train`` must
survive its terminal). A test that stops something with a signal first gives that signal its default action."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator

_RESET_AND_EXEC = """import os, signal, sys
for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(signum, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])"""


def with_default_stop_signals(argv: list[str]) -> list[str]:
    """``argv`` run with SIGINT, SIGTERM and SIGHUP at their default actions (SIGINT: Python's KeyboardInterrupt once
    the command's interpreter starts); the command replaces the short Python that resets them, keeping its pid."""
    return [sys.executable, "-c", _RESET_AND_EXEC, *argv]


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within, SIGINT raises KeyboardInterrupt in this process's main thread, as it does in a terminal."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
