"""The command server inside each docker sandbox: requests arrive on its stdin, answers leave on its stdout.

The docker backend starts this file as the container's command (its source in an environment variable) and keeps the
container's stdin and stdout attached, so a command costs one fork inside a running container instead of a
``docker exec`` (tens of milliseconds in the engine and the runtime). Standard library only: it runs on
the image's Python. Every message is a frame: a 4-byte big-endian length, then JSON, bytes as base64.

- request: ``{"id", "argv", "env", "cwd", "stdin" (base64 or null), "limit"}``
- answer: ``{"id", "exit", "stdout", "stderr", "truncated"}``; exit 126 with the reason on stderr when
  the command could not start (no such ``cwd``, no process left under the pids limit); ``{"id", "error"}``
  when the server itself failed

A command runs in a session of its own and ends when its process exits: what is left of its process group
then is killed (as if the command had had a pid namespace), and output still on its way is read for
``DRAIN`` seconds. A process that started a session of its own (``setsid``) lives on, and what it writes
later is read and dropped, so it never blocks on a full pipe. When stdin ends (the host closed it, or
died) the server exits, and with it the container.

Started with a ``uid:gid`` argument, the server runs as another user (root in the container, with no
capability but ``SETUID``, ``SETGID`` and ``KILL``) and every command runs as ``uid:gid``, with no
supplementary groups and no capability: what the commands do (``kill -9 -1`` included) cannot reach the
server. Each command also asks the kernel to pick it first when the sandbox runs out of memory
(``oom_score_adj`` :data:`OOM_SCORE_ADJ`), so that a memory hog is killed rather than the server, and creates
files that its group may write (umask ``002``): the sandbox's services run in that group. The server calls itself
:data:`NAME`, which the kernel's log gives when it kills it.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import signal
import struct
import sys
import time
from typing import Any

LENGTH = struct.Struct(">I")
DRAIN = 0.1
"""Seconds a finished command's pipes are still read for output that was on its way."""
CANNOT_START = 126
"""The exit status of a command that could not be started (as a shell reports it)."""
OOM_SCORE_ADJ = 1000
"""Every command's ``oom_score_adj``: the kernel's first pick when the sandbox runs out of memory."""
NAME = "agentgym-server"
"""The server's process name (its ``comm``, at most 15 bytes); its commands take their programs' names."""
_CHUNK = 64 * 1024


def frame(message: dict[str, Any]) -> bytes:
    """``message`` as one frame."""
    body = json.dumps(message).encode()
    return LENGTH.pack(len(body)) + body


def encode(data: bytes) -> str:
    """Bytes as the base64 text a frame carries."""
    return base64.b64encode(data).decode()


class Capture:
    """The first ``limit`` bytes of an output stream; past them ``truncated`` is set and the rest dropped."""

    def __init__(self, limit: int) -> None:
        self.data = bytearray()
        self.limit = limit
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if len(chunk) > room:
            self.truncated = True
        self.data += chunk[:max(room, 0)]


class _Command(asyncio.SubprocessProtocol):
    """One running command: its output captured as it arrives, and whether it exited."""

    def __init__(self, limit: int) -> None:
        loop = asyncio.get_running_loop()
        self.outputs = {1: Capture(limit), 2: Capture(limit)}
        self.exited = loop.create_future()
        self.drained = {1: loop.create_future(), 2: loop.create_future()}

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.outputs[fd].add(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd in self.drained:
            self.drained[fd].set_result(None)

    def process_exited(self) -> None:
        self.exited.set_result(None)


async def run(request: dict[str, Any], user: tuple[int, int] | None = None) -> dict[str, Any]:
    """Run one request's argv to its exit, as ``user`` (uid, gid) when given, and return its answer (without
    the id)."""
    data = None if request["stdin"] is None else base64.b64decode(request["stdin"])
    loop = asyncio.get_running_loop()
    pipe = asyncio.subprocess.PIPE
    started = time.monotonic()
    try:
        transport, command = await loop.subprocess_exec(
            lambda: _Command(request["limit"]), *request["argv"],
            stdin=asyncio.subprocess.DEVNULL if data is None else pipe, stdout=pipe, stderr=pipe,
            env={**os.environ, **request["env"]}, start_new_session=True,
            preexec_fn=functools.partial(_become, user, request["cwd"]))
    except OSError as exc:
        reason = f"cannot start the command in {request['cwd']}: {exc}\n".encode()
        return {"exit": CANNOT_START, "stdout": "", "stderr": encode(reason), "truncated": False}
    if data is not None:
        stdin = transport.get_pipe_transport(0)
        stdin.write(data)
        stdin.write_eof()
    await command.exited
    seconds = time.monotonic() - started
    try:
        os.killpg(transport.get_pid(), signal.SIGKILL)
    except ProcessLookupError:
        pass  # nothing was left
    await asyncio.wait(command.drained.values(), timeout=DRAIN)
    code = transport.get_returncode()
    out, err = command.outputs[1], command.outputs[2]
    answer = {"exit": code if code >= 0 else 128 - code, "stdout": encode(bytes(out.data)),
              "stderr": encode(bytes(err.data)), "truncated": out.truncated or err.truncated, "seconds": seconds}
    out.limit = err.limit = 0  # what background processes write from now on is read and dropped
    return answer


def _become(user: tuple[int, int] | None, cwd: str) -> None:
    """In a command's process before it starts: first pick of the OOM killer, then ``user`` (uid, gid) without
    supplementary groups (which drops every capability), then into ``cwd`` with that user's rights, creating
    files its group may write. A failure is told on the command's stderr and ends it with :data:`CANNOT_START`."""
    try:
        with open("/proc/self/oom_score_adj", "w") as adj:  # written as root: once the command runs as its
            adj.write(str(OOM_SCORE_ADJ))                     # user, /proc/self is no longer its to write
    except OSError:
        pass  # no /proc: the kernel picks by size alone
    try:
        if user is not None and user != (os.getuid(), os.getgid()):
            uid, gid = user
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        os.umask(0o002)
        os.chdir(cwd)
    except OSError as exc:
        os.write(2, f"cannot start the command in {cwd}: {exc}\n".encode())
        os._exit(CANNOT_START)


async def _answer(request: dict[str, Any], user: tuple[int, int] | None) -> None:
    try:
        answer = await run(request, user)
    except Exception as exc:  # noqa: BLE001 - an answer must always go back: the host waits for it
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    _write(frame({**answer, "id": request["id"]}))


def _write(data: bytes) -> None:
    """Write a whole frame to stdout; no await inside, so frames never interleave."""
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


async def serve(user: tuple[int, int] | None = None) -> None:
    """Answer requests from stdin until it ends, running the commands as ``user`` (uid, gid) when given."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", buffering=0))
    running: set[asyncio.Task[None]] = set()
    while True:
        try:
            (size,) = LENGTH.unpack(await reader.readexactly(LENGTH.size))
            request = json.loads(await reader.readexactly(size))
        except asyncio.IncompleteReadError:
            return
        task = asyncio.create_task(_answer(request, user))
        running.add(task)
        task.add_done_callback(running.discard)


def _watch_children_with_pidfds() -> None:
    """Before Python 3.12 asyncio waits for each child in a thread of its own; under a pids limit (a fork
    bomb) that thread cannot start. A pidfd needs no thread."""
    if sys.version_info < (3, 12):
        try:
            os.close(os.pidfd_open(os.getpid()))
        except (AttributeError, OSError):
            return
        asyncio.set_child_watcher(asyncio.PidfdChildWatcher())


def _name_self() -> None:
    """Call this process :data:`NAME` (where there is a ``/proc``)."""
    try:
        with open("/proc/self/comm", "w") as comm:
            comm.write(NAME)
    except OSError:
        pass


def parse_user(text: str) -> tuple[int, int]:
    """``uid:gid`` as numbers."""
    uid, _, gid = text.partition(":")
    return int(uid), int(gid or uid)


if __name__ == "__main__":
    _name_self()
    _watch_children_with_pidfds()
    asyncio.run(serve(parse_user(sys.argv[1]) if len(sys.argv) > 1 else None))
