"""A long-lived process in a sandbox with its stdin and stdout open, for programs spoken to over pipes (an
MCP server on stdio, a REPL): what :meth:`Sandbox.spawn` returns. Its stderr is kept, the last part only."""

from __future__ import annotations

import abc
import asyncio
import collections

STDERR_KEPT = 16 * 1024
"""Bytes of a process's stderr kept (the most recent ones), for the error that reports its exit."""


class SandboxProcess(abc.ABC):
    """One process started in a sandbox. :meth:`read` gives its stdout as it comes, :meth:`write` feeds its
    stdin; writing to a process that has exited raises ``BrokenPipeError``. Closing the sandbox kills it."""

    def __init__(self) -> None:
        self._stderr: collections.deque[bytes] = collections.deque()
        self._stderr_size = 0

    @abc.abstractmethod
    async def read(self) -> bytes:
        """The next bytes the process wrote to stdout; ``b""`` once stdout has ended."""

    @abc.abstractmethod
    async def write(self, data: bytes) -> None:
        """Send ``data`` to the process's stdin."""

    @abc.abstractmethod
    async def close_stdin(self) -> None:
        """End the process's input (a stdio server then exits on its own)."""

    @abc.abstractmethod
    async def kill(self) -> None:
        """Stop the process at once (SIGKILL); one already gone is fine."""

    @property
    @abc.abstractmethod
    def returncode(self) -> int | None:
        """The exit status (``128 + signal`` for a killed process) once it is known to have exited."""

    async def wait(self, timeout: float) -> int | None:
        """The exit status, waiting up to ``timeout`` seconds for it; ``None`` while it still runs."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self.returncode is None and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        return self.returncode

    async def stop(self, grace: float = 2.0) -> int | None:
        """End the process the polite way: close its input, give it ``grace`` seconds, then kill it."""
        if self.returncode is None:
            try:
                await self.close_stdin()
            except OSError:
                pass
            if await self.wait(grace) is None:
                await self.kill()
        return await self.wait(grace)

    @property
    def stderr(self) -> str:
        """The last :data:`STDERR_KEPT` bytes the process wrote to stderr, as text."""
        return b"".join(self._stderr).decode(errors="replace")

    def _keep_stderr(self, chunk: bytes) -> None:
        self._stderr.append(chunk)
        self._stderr_size += len(chunk)
        while self._stderr_size - len(self._stderr[0]) >= STDERR_KEPT:
            self._stderr_size -= len(self._stderr.popleft())
