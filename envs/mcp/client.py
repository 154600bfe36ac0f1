"""A client of one MCP server running in a sandbox: the stdio transport over a :class:`SandboxProcess`, and the
``mcp`` SDK's ``ClientSession`` over it, held open by a task of its own.

The session lives in one task because the SDK's task groups must be left by the task that entered them,
while an environment starts a server in one episode's task and stops it in another's. Any task may call
:meth:`McpClient.call_tool` meanwhile. A server that exits, answers garbage or does not answer in time
raises :class:`McpServerError`, which ends an episode as an infrastructure error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.message import SessionMessage

from agentgym.errors import AgentGymError
from agentgym.sandboxes.process import SandboxProcess

MAX_LINE = 16 * 1024 * 1024
"""The longest message a server may send (one line of JSON-RPC); past it the connection fails."""

EXIT_WAIT = 2.0
"""Seconds a failed request waits for the server's exit status, so that the error can name it."""


class McpServerError(AgentGymError):
    """The MCP server failed (exited, broke the protocol, timed out): infrastructure, not the agent's doing."""


@contextlib.asynccontextmanager
async def process_transport(process: SandboxProcess) -> AsyncIterator[tuple[Any, Any]]:
    """MCP's stdio transport over ``process``: newline-delimited JSON-RPC messages on its stdin and stdout.
    Yields the (read, write) stream pair a ``ClientSession`` takes; the read stream ends with stdout."""
    incoming_writer, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def read() -> None:
        async with incoming_writer:
            buffer = b""
            while chunk := await process.read():
                *lines, buffer = (buffer + chunk).split(b"\n")
                if len(buffer) > MAX_LINE:
                    await incoming_writer.send(McpServerError(f"the server sent a line of over {MAX_LINE} bytes"))
                    return
                for line in lines:
                    if line.strip():
                        await incoming_writer.send(_parse(line))

    async def write() -> None:
        async with outgoing_reader:
            try:
                async for message in outgoing_reader:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.write(text.encode() + b"\n")
            except OSError:
                await incoming_writer.aclose()  # the server is gone: the session sees the end of its input

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        try:
            yield incoming, outgoing
        finally:
            tasks.cancel_scope.cancel()
            await outgoing.aclose()
            await incoming.aclose()


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return McpServerError(f"the server sent something that is not JSON-RPC: {line[:200]!r} ({exc})")


class McpClient:
    """An initialized session with the MCP server of ``process``; :meth:`close` ends it and the process."""

    def __init__(self, process: SandboxProcess, *, timeout: float) -> None:
        self.process, self.timeout = process, timeout
        self.server: types.InitializeResult | None = None
        """What the server said of itself when the session started (name, version, instructions)."""
        self._session: ClientSession | None = None
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, process: SandboxProcess, *, timeout: float, start_timeout: float) -> McpClient:
        """Connect to the server of ``process`` and initialize the session within ``start_timeout`` seconds;
        its requests then get ``timeout`` each."""
        client = cls(process, timeout=timeout)
        client._task = asyncio.create_task(client._hold(), name="mcp-session")
        try:
            async with asyncio.timeout(start_timeout):
                await asyncio.shield(client._ready)
        except BaseException as exc:
            await client.close()
            if isinstance(exc, TimeoutError):
                raise client._failure(f"did not finish starting within {start_timeout:g} s") from None
            raise
        return client

    async def list_tools(self) -> list[types.Tool]:
        """Every tool the server offers (all pages)."""
        tools, cursor = [], None
        while True:
            page = await self._request(self._live().list_tools(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None), "tools/list")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """The server's result of calling tool ``name``; a tool's own failure is a result with ``is_error``."""
        return await self._request(self._live().call_tool(name, arguments), f"tools/call {name}")

    async def read_resource(self, uri: str) -> str:
        """The text of resource ``uri`` (its text parts joined)."""
        result = await self._request(self._live().read_resource(uri), f"resources/read {uri}")
        return "".join(part.text for part in result.contents if isinstance(part, types.TextResourceContents))

    async def close(self) -> None:
        """End the session and the server process (closing its input first, as MCP's shutdown asks)."""
        self._stop.set()
        if not self._ready.done():
            await self.process.stop()  # the handshake waits on the server: its end is what ends the wait
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        if self._ready.done() and not self._ready.cancelled():
            self._ready.exception()  # a failed start is reported by start(), not as an exception never retrieved
        await self.process.stop()

    async def _hold(self) -> None:
        """Open the transport and the session, initialize, and keep them open until :meth:`close`."""
        try:
            async with process_transport(self.process) as (read, write), ClientSession(read, write) as session:
                self.server = await session.initialize()
                self._session = session
                self._ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                if isinstance(exc, Exception):
                    await self.process.wait(EXIT_WAIT)
                self._ready.set_exception(self._failure(f"failed to start ({_describe(exc)})"))
            if not isinstance(exc, Exception):
                raise
        finally:
            self._session = None

    def _live(self) -> ClientSession:
        if self._session is None or self.process.returncode is not None:
            raise self._failure("is not running")
        return self._session

    async def _request(self, call: Any, what: str) -> Any:
        """Await one request, turning every way it can fail into :class:`McpServerError`."""
        try:
            async with asyncio.timeout(self.timeout + 1):
                return await call
        except TimeoutError:
            raise self._failure(f"did not answer {what} within {self.timeout:g} s") from None
        except Exception as exc:
            await self.process.wait(EXIT_WAIT)  # a server that closed the connection is likely exiting
            raise self._failure(f"failed on {what} ({_describe(exc)})") from exc

    def _failure(self, what: str) -> McpServerError:
        status = self.process.returncode
        said = self.process.stderr.strip()
        ended = f"; it exited with status {status}" if status is not None else ""
        return McpServerError(f"the MCP server {what}{ended}" + (f"; its stderr ends: {said[-800:]}" if said else ""))


def _describe(exc: BaseException) -> str:
    """An exception as ``Type: message``, the first one inside a task group's exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
