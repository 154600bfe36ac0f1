"""The sandbox protocol: run commands and move files in an isolated place, with limits on everything.

A backend writes :meth:`Sandbox._exec` (run one argv under a time limit, capping each output stream)
and :meth:`Sandbox._close`; files travel through ``python3`` inside the sandbox, so every backend
reads and writes them the same way, with the sandbox's own view of paths and permissions.
"""

from __future__ import annotations

import abc
import asyncio
import base64
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal, Self, TypeVar, overload

from pydantic import Field, field_validator

from agentgym.config import Config
from agentgym.lifetime import command_label, process_alive, process_label
from agentgym.sandboxes.errors import SandboxClosed, SandboxDied, SandboxError
from agentgym.sandboxes.process import SandboxProcess

LABEL = "org.agentgym.sandbox"
"""Set on everything a backend creates (value ``1``), so :func:`agentgym.sandboxes.reap` finds it."""
OWNER_LABEL = "org.agentgym.owner"
"""The processes it belongs to (:func:`owner`): the one that created it and the agentgym command that one runs
under; either dead makes it an orphan."""
MiB = 1 << 20
_S = TypeVar("_S")


class SandboxSpec(Config):
    """What a sandbox is made from and the limits it runs under."""

    image: str = "agentgym/python"
    """The container image (docker backend); an agentgym image name resolves to its content-hash tag."""
    memory_mb: int = Field(512, ge=16)
    """Memory limit of everything running inside, in MiB; past it the kernel kills a process."""
    cpus: float = Field(1.0, gt=0)
    """CPU time share, in cores (docker backend)."""
    pids: int = Field(256, ge=8)
    """Most processes and threads alive at once inside (a fork bomb stops here)."""
    network: bool = False
    """Whether the sandbox may reach any network; off by default."""
    workdir: str = "/work"
    """The writable working directory (everything else is read-only)."""
    workdir_from_image: bool = False
    """The work dir starts as a copy of the files the image holds at that path (which the work dir's own mount
    hides): for images that ship a project there, such as a repository to fix (``docker`` backend only)."""
    disk_mb: int | None = Field(1024, ge=16)
    """MiB the work dir and ``/tmp`` hold together, on a disk of the sandbox's own that takes none of
    ``memory_mb``; past it a write fails with ENOSPC. Where no disk can be mounted, a value set here is refused and
    the default is dropped with a warning. ``None``: no disk of its own; the ``local`` backend then has no limit,
    the ``docker`` one keeps the files in memory, taking from ``memory_mb`` (filling them can get the sandbox
    killed)."""
    output_limit: int = Field(1 * MiB, ge=1024)
    """Bytes kept of each of stdout and stderr per command; the rest is discarded as it arrives."""
    file_limit: int = Field(16 * MiB, ge=1024)
    """The largest file :meth:`Sandbox.read_file` returns."""
    mounts: dict[str, str] = Field(default_factory=dict)
    """Host directories seen read-only inside, host path -> path inside (both absolute): programs or
    libraries a sandbox runs from the host, such as the Python packages an MCP server imports. The ``local``
    backend needs each to be readable by every user of the host."""

    @field_validator("mounts")
    @classmethod
    def _absolute(cls, mounts: dict[str, str]) -> dict[str, str]:
        for path in (*mounts, *mounts.values()):
            if not PurePosixPath(path).is_absolute():
                raise ValueError(f"mount paths must be absolute, got {path!r}")
        return mounts


@dataclass(frozen=True)
class ExecResult:
    """What a command did. ``truncated``: an output stream went past the limit and was cut there."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    duration: float
    """Seconds the caller waited for the answer."""
    truncated: bool = False
    run_seconds: float | None = None
    """Seconds the command itself ran, from its process's start to its exit, timed where it runs (``docker``: by the
    server in the container; ``local``: around its ``bwrap`` process); the rest of :attr:`duration` is the sandbox
    layer's own cost. ``None`` where the backend does not time it."""

    @property
    def ok(self) -> bool:
        """Exited with status 0 within its time."""
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class RawResult:
    """A backend's answer for one argv: exit status and the capped output bytes."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool
    truncated: bool
    seconds: float | None = None
    """How long the command ran, timed where it ran; ``None`` where the backend does not time it."""


TIMEOUT_EXIT = 124
"""The exit status of a command stopped by its time limit (as GNU ``timeout`` reports it)."""
KILL_GRACE = 1.0
"""Seconds between the polite and the forced stop of a command that ran out of time."""
HOST_SLACK = 10.0
"""Seconds past a command's limit after which the host gives up on the sandbox itself."""

_FILE_ERRORS: dict[str, type[OSError]] = {
    "FileNotFoundError": FileNotFoundError,
    "IsADirectoryError": IsADirectoryError,
    "NotADirectoryError": NotADirectoryError,
    "PermissionError": PermissionError,
    "FileExistsError": FileExistsError,
    "OSError": OSError,  # any other refusal, such as ENOSPC past ``disk_mb``
}
_READ = """
import base64, os, sys
path, limit = sys.argv[1], int(sys.argv[2])
try:
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size > limit:
            sys.stderr.write("TooLarge"); sys.exit(3)
        sys.stdout.write(base64.b64encode(f.read()).decode())
except OSError as e:
    sys.stderr.write(type(e).__name__ + ": " + str(e)); sys.exit(3)
"""
_WRITE = """
import errno, os, sys
path = sys.argv[1]
try:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(sys.stdin.buffer.read())
except OSError as e:
    name = "PermissionError" if e.errno == errno.EROFS else type(e).__name__
    sys.stderr.write(name + ": " + str(e)); sys.exit(3)
"""


class Sandbox(abc.ABC):
    """An isolated place to run untrusted commands: no network unless asked, a private writable work
    dir, limits on memory, processes and time. Every call raises a :class:`SandboxError` subclass when
    the sandbox itself fails; what the command did (exit status, output, timeout) is the result."""

    backend: str = ""

    def __init__(self, spec: SandboxSpec, sandbox_id: str) -> None:
        self.spec, self.id = spec, sandbox_id
        self.closed = False

    async def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float,
        stdin: str | bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        """Run ``cmd`` (an argv, or a string run by ``sh -c``) in ``cwd`` (default: the work dir, relative
        paths inside it). After ``timeout`` seconds its whole process tree is killed and ``timed_out`` is
        set; when it exits sooner, what it left running in its process group is killed then. A service
        meant to outlive the command starts in a session of its own (``setsid -f``), which the ``docker``
        backend keeps until :meth:`close` and the ``local`` one does not. Raises :class:`SandboxDied` when
        the sandbox stops answering, :class:`SandboxClosed` after :meth:`close`."""
        return await self._run(cmd, timeout=timeout, stdin=stdin, env=env, cwd=cwd, limit=self.spec.output_limit)

    async def spawn(self, cmd: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> SandboxProcess:
        """Start ``cmd`` (as :meth:`exec` takes it) and leave it running with its stdin and stdout open, for a
        program spoken to over pipes (an MCP server on stdio). It runs as a service: as another user than the
        commands (uid 1001 inside), in their group, so that it shares the work dir's files with them but no
        command can signal it. It has no time limit: it runs until it exits, is killed
        (:meth:`SandboxProcess.kill`) or the sandbox closes. Raises :class:`SandboxDied` when it cannot be
        started, :class:`SandboxClosed` after :meth:`close`."""
        if self.closed:
            raise SandboxClosed(f"sandbox {self.id} is closed")
        return await self._spawn(_argv(cmd), env=dict(env or {}), cwd=self._path(cwd or "."))

    @overload
    async def read_file(self, path: str, *, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, path: str, *, text: Literal[False]) -> bytes: ...

    async def read_file(self, path: str, *, text: bool = True) -> str | bytes:
        """The file at ``path`` (relative to the work dir), as UTF-8 text or bytes. Raises
        ``FileNotFoundError``, ``IsADirectoryError`` or ``PermissionError`` as the sandbox sees them,
        ``ValueError`` past ``spec.file_limit``, and ``UnicodeDecodeError`` for text that is not UTF-8."""
        limit = self.spec.file_limit
        result = await self._run(["python3", "-I", "-c", _READ, self._path(path), str(limit)], timeout=60,
                                 limit=limit * 4 // 3 + 8, cwd="/")
        self._raise_file_error(result, path)
        data = base64.b64decode(result.stdout)
        return data.decode() if text else data

    async def write_file(self, path: str, content: str | bytes) -> None:
        """Write ``content`` to ``path`` (relative to the work dir), creating parent directories. Raises
        ``PermissionError`` outside writable places, ``IsADirectoryError`` over a directory and ``OSError``
        when the disk is full (past ``spec.disk_mb``)."""
        result = await self._run(["python3", "-I", "-c", _WRITE, self._path(path)], timeout=60, stdin=content,
                                 limit=64 * 1024, cwd="/")
        self._raise_file_error(result, path)

    async def expose(self, port: int) -> str:
        """The ``host:port`` address at which the host reaches ``port`` inside (a web site, a desktop's VNC).
        Raises :class:`SandboxError` where the backend cannot."""
        raise SandboxError(f"the {self.backend} backend cannot expose ports")

    @property
    def alive(self) -> bool:
        """Whether the sandbox can still run commands, as far as is known without asking it (no I/O)."""
        return not self.closed

    async def close(self) -> None:
        """Stop everything running inside and remove what was created; safe to call twice."""
        if not self.closed:
            self.closed = True
            await self._close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- what a backend writes --------------------------------------------------------------------

    @abc.abstractmethod
    async def _exec(self, argv: list[str], *, timeout: float, stdin: bytes | None, env: dict[str, str],
                    cwd: str, limit: int) -> RawResult:
        """Run ``argv`` in ``cwd``; kill its whole process tree after ``timeout`` seconds; keep at most
        ``limit`` bytes of each stream. Raise :class:`SandboxDied` when the sandbox itself fails."""

    @abc.abstractmethod
    async def _close(self) -> None:
        """Kill everything inside and delete every resource this sandbox holds."""

    @abc.abstractmethod
    async def _spawn(self, argv: list[str], *, env: dict[str, str], cwd: str) -> SandboxProcess:
        """Start ``argv`` in ``cwd`` with pipes to its stdin, stdout and stderr; raise :class:`SandboxDied`
        when the sandbox cannot start it."""

    # -- plumbing ---------------------------------------------------------------------------------

    async def _run(self, cmd: str | Sequence[str], *, timeout: float, limit: int, stdin: str | bytes | None = None,
                   env: Mapping[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        if self.closed:
            raise SandboxClosed(f"sandbox {self.id} is closed")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        argv = _argv(cmd)
        data = stdin.encode() if isinstance(stdin, str) else stdin
        started = time.perf_counter()
        raw = await self._exec(argv, timeout=timeout, stdin=data, env=dict(env or {}),
                               cwd=self._path(cwd or "."), limit=limit)
        return ExecResult(
            exit_code=raw.exit_code,
            stdout=raw.stdout.decode(errors="replace"),
            stderr=raw.stderr.decode(errors="replace"),
            timed_out=raw.timed_out,
            duration=time.perf_counter() - started,
            truncated=raw.truncated,
            run_seconds=raw.seconds,
        )

    def _path(self, path: str) -> str:
        return str(PurePosixPath(self.spec.workdir) / path)

    def _raise_file_error(self, result: ExecResult, path: str) -> None:
        if result.ok:
            return
        if result.exit_code == 3 and result.stderr.startswith("TooLarge"):
            raise ValueError(f"{path} is larger than the sandbox's file_limit ({self.spec.file_limit} bytes)")
        name, _, message = result.stderr.partition(": ")
        if result.exit_code == 3 and name in _FILE_ERRORS:
            raise _FILE_ERRORS[name](message)
        raise SandboxDied(f"file transfer in sandbox {self.id} failed (exit {result.exit_code}): {result.stderr[:200]}")


def _argv(cmd: str | Sequence[str]) -> list[str]:
    """A command as an argv: a string runs under ``sh -c``."""
    argv = ["sh", "-c", cmd] if isinstance(cmd, str) else [str(a) for a in cmd]
    if not argv:
        raise ValueError("empty command")
    return argv


def timed_argv(argv: list[str], timeout: float) -> list[str]:
    """``argv`` under GNU ``timeout``: TERM to its process group after ``timeout`` s, KILL a second later;
    exit status :data:`TIMEOUT_EXIT` when it ran out of time."""
    return ["timeout", "-k", f"{KILL_GRACE:g}", f"{timeout:g}", *argv]


def owner() -> str:
    """This process as an owner label: its :func:`~agentgym.lifetime.process_label` (``host:pid:start``), then,
    after a comma, that of the agentgym command it runs under where that is another process (a worker of
    ``agentgym check``, a Ray worker of the command's local Ray)."""
    me, command = process_label(), command_label()
    return me if command in (None, me) else f"{me},{command}"


def owner_alive(label: str) -> bool:
    """Whether every process an :func:`owner` label names still runs: what a worker made is an orphan once the
    worker or its command is gone, since a worker left running by a dead command serves nobody."""
    return all(process_alive(part) for part in label.split(","))


async def made_in_thread(make: Callable[[], _S], discard: Callable[[_S], None]) -> _S:
    """What ``make()`` returns, made in a thread of the loop's executor. Cancelled meanwhile (an interrupted command,
    a timeout), what it makes is discarded as soon as it exists, so that nothing made for a caller that left is left
    behind."""
    lock = threading.Lock()
    made: list[_S] = []
    left = False

    def make_for_the_caller() -> _S:
        sandbox = make()
        with lock:
            if left:
                discard(sandbox)
            else:
                made.append(sandbox)
        return sandbox

    try:
        return await asyncio.to_thread(make_for_the_caller)
    except asyncio.CancelledError:
        with lock:
            left = True
        for sandbox in made:  # made already, its answer dropped with the call
            await asyncio.to_thread(discard, sandbox)
        raise


