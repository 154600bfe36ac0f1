"""How long a command and the processes it starts live.

- **A signal stops a command as Ctrl-C does.** Inside :func:`command_process` (the CLI's entry point), SIGTERM and
  SIGHUP run whatever handler SIGINT has at that moment: Python's raises :class:`KeyboardInterrupt`, ``asyncio.run``'s
  cancels its main task, uvicorn's begins its shutdown. ``finally`` blocks and context managers then close the
  sandboxes, browsers, worker pools and Ray that the command opened, and the exit status is 128 + the signal's
  number (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP). A signal ignored when the command started (``nohup``'s
  SIGHUP) stays ignored.
- **Workers end with their command.** A pool's worker process starts with :func:`worker_init`: SIGTERM comes to it
  when its parent ends, however it ended (a parent-death signal), and a stop signal unwinds the call it runs, which
  :func:`run_in_worker` then turns into the worker's exit.
- **Every process a command starts knows the command.** :data:`COMMAND_ENV` names the command's process, so what a
  worker makes (a sandbox, a browser) can be reaped once the command is gone, even while the worker lives on.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, TypeVar

_T = TypeVar("_T")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""The signals that stop a command as Ctrl-C (SIGINT) does."""
COMMAND_ENV = "AGENTGYM_COMMAND"
"""Set by :func:`command_process` to the command's :func:`process_label` and inherited by every process it starts."""
_PR_SET_PDEATHSIG = 1
"""``prctl`` option: the signal this process gets when its parent ends (``<linux/prctl.h>``)."""

_Handler = Callable[[int, FrameType | None], Any] | int | None
"""What ``signal.getsignal`` returns: a Python function, ``SIG_DFL`` or ``SIG_IGN``, or ``None`` (set outside Python)."""


def process_label(pid: int | None = None) -> str:
    """A process (this one by default) as ``host:pid:start``, where ``start``, its start time in clock ticks since
    boot, tells a reused pid apart. Raises ``OSError`` where ``/proc`` does not tell it (not Linux) or it is gone."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def process_alive(label: str) -> bool:
    """Whether the process a :func:`process_label` names still runs; one on another host counts as alive."""
    host, _, rest = label.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname():
        return True
    try:
        return _start_time(int(pid)) == start
    except (ValueError, OSError):
        return False


def command_label() -> str | None:
    """The :func:`process_label` of the agentgym command this process runs under (itself, or the command that
    started it); ``None`` outside a command (a script that uses the library)."""
    return os.environ.get(COMMAND_ENV) or None


@contextlib.contextmanager
def command_process() -> Iterator[None]:
    """Run the code inside as an agentgym command (in the main thread): the processes it starts inherit
    :data:`COMMAND_ENV`, SIGTERM and SIGHUP stop it as Ctrl-C does, and after one of them the exit status is 128
    + its number, however the code inside ended. Leaving, it puts back what it changed (a test runs commands in its
    own process)."""
    previous = os.environ.get(COMMAND_ENV)
    with contextlib.suppress(OSError):  # no /proc: nothing will be reaped by the command's label
        os.environ[COMMAND_ENV] = process_label()
    received: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        interrupt = signal.getsignal(signal.SIGINT)
        if not callable(interrupt):  # SIGINT ignored (a job started in the background) or left to the kernel
            raise KeyboardInterrupt
        interrupt(signal.SIGINT, frame)

    replaced = _install(dict.fromkeys(STOP_SIGNALS, stop))
    try:
        yield
    finally:
        _install(replaced)
        if previous is None:
            os.environ.pop(COMMAND_ENV, None)
        else:
            os.environ[COMMAND_ENV] = previous
        if received:
            sys.exit(128 + received[0])


@contextlib.contextmanager
def stop_handlers_kept() -> Iterator[None]:
    """Put back the handlers of :data:`STOP_SIGNALS` that the code inside replaced, and hand them a stop signal that
    came meanwhile: ``ray.init`` puts on SIGTERM a handler that raises ``SystemExit(15)``, which would stop a
    command without asyncio's orderly cancellation or its exit status."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept: dict[int, _Handler] = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        yield
    except SystemExit as exc:
        signum = exc.code if isinstance(exc.code, int) else None
        handler = kept.get(signum) if signum is not None else None
        if signum is not None and callable(handler):
            _install(kept)
            handler(signum, None)  # raises as it does for the signal itself
        raise
    finally:
        _install(kept)


def worker_init(parent: int) -> None:
    """The initializer of a worker process that ``parent`` started (a process pool's): the worker gets SIGTERM when
    its parent ends, and the first of SIGTERM, SIGHUP and SIGINT raises :class:`SystemExit` (128 + its number), so
    that the call it runs unwinds and closes what it opened; the later ones are ignored while it does."""
    die_with_parent(parent)

    def stop(signum: int, frame: FrameType | None) -> None:
        for ignored in (*STOP_SIGNALS, signal.SIGINT):
            signal.signal(ignored, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    _install(dict.fromkeys((*STOP_SIGNALS, signal.SIGINT), stop))


def run_in_worker(function: Callable[..., _T], *args: Any) -> _T:
    """``function(*args)`` in a pool worker started with :func:`worker_init`. When a stop signal ended the call,
    the worker exits once the call has unwound: a process pool would otherwise send the exception back and keep the
    worker waiting for its next call, which never comes once its parent is gone."""
    try:
        return function(*args)
    except SystemExit as stop:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(stop.code if isinstance(stop.code, int) else 1)


def die_with_parent(parent: int, signum: int = signal.SIGTERM) -> None:
    """Have the kernel send ``signum`` to this process when its parent ends (Linux; nothing elsewhere), and send
    it now where ``parent`` has already gone. The kernel sends it when the *thread* that started this process ends:
    start such processes from a thread that outlives them (the main thread)."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os.kill(os.getpid(), signum)


def _install(handlers: dict[int, _Handler]) -> dict[int, _Handler]:
    """Put each handler on its signal, leaving alone a signal that is ignored (inherited so) and a handler that is
    not Python's to set (``None``); return the handlers replaced, to put back the same way."""
    replaced = {}
    for signum, handler in handlers.items():
        current = signal.getsignal(signum)
        if handler is not None and current is not signal.SIG_IGN:
            replaced[signum] = current
            signal.signal(signum, handler)
    return replaced


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (field 22 of ``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[19]
