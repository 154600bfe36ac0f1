"""Environments whose tools are an MCP server's (``agentgym[mcp]``): the server runs over stdio in the
episode's sandbox (``docker`` or ``local``, from the shared pool), and the agent sees its tools with their
own names, descriptions and JSON schemas, through the usual tool-call parsers, plus ``submit``. The server is
spawned as the sandbox's service (:meth:`~agentgym.sandboxes.Sandbox.spawn`): another user than the agent's
commands, so that an environment which also gives the agent a shell cannot have it killed from there.

The env author supplies the task and the reward, in a subclass (:meth:`McpEnv.make_task`,
:meth:`McpEnv.verify`, :meth:`McpEnv.oracle_action`) or as functions (``tasks=``, ``verifier=``; a function
or its ``module:name``). A task may write files to the work dir before the server starts (its initial
state); the verifier gets the transcript of tool calls, the submitted answer and the live session, through
which it reads the server's final state (a resource, a tool, a file).

A tool's own failure (the server's ``isError`` result) is an error observation the agent can correct; a
server that exits, breaks the protocol or does not answer in time ends the episode as ``error``.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import site
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import mcp_types as types
import numpy as np

from agentgym.envs.mcp.client import McpClient, McpServerError
from agentgym.envs.sandboxed import SandboxEnv
from agentgym.errors import ToolError
from agentgym.messages import Message
from agentgym.sandboxes import backend_module
from agentgym.sandboxes.base import SandboxSpec
from agentgym.tools import ToolSpec, tool

SITE_PACKAGES = "/opt/agentgym/site-packages"
"""Where :func:`python_server` shows the host's Python packages (the ``mcp`` SDK among them) inside."""
SERVER_DIR = "/opt/agentgym/server"
"""Where :func:`python_server` shows the server script's folder inside."""
SUBMIT = "submit"
SYSTEM_PROMPT = """You complete the user's request with the tools of the {name} server.{instructions}
When the request is done, call {submit}(answer) once: answer is what the request asks you to find, or a short
note of what you did. The episode then ends and your work is checked."""


@dataclass(frozen=True)
class McpServer:
    """How to start an MCP server on stdio in a sandbox: its argv, environment and working directory, the
    sandbox it needs (image, limits, read-only mounts), how long it may take to answer a request (``timeout``)
    and to start, its imports and the MCP handshake included (``start_timeout``)."""

    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    spec: SandboxSpec = field(default_factory=SandboxSpec)
    timeout: float = 30.0
    start_timeout: float = 60.0


def python_server(script: str | Path, *args: str, spec: SandboxSpec | None = None, timeout: float = 30.0,
                  start_timeout: float = 60.0) -> McpServer:
    """A server written in Python with the ``mcp`` SDK, run by the sandbox's ``python3`` from ``script``:
    the script's folder and this interpreter's packages are mounted read-only, so the sandbox needs only a
    Python of the same minor version (the ``agentgym/python`` image, or the host's for ``local``)."""
    script = Path(script).resolve()
    packages = [path for path in {*site.getsitepackages(), str(Path(importlib.util.find_spec("mcp").origin).parents[1])}
                if Path(path).is_dir()]
    inside = [f"{SITE_PACKAGES}/{index}" for index in range(len(packages))]
    base = spec or SandboxSpec(image="agentgym/python", memory_mb=256, pids=64)
    mounts = {**base.mounts, str(script.parent): SERVER_DIR, **dict(zip(sorted(packages), inside))}
    return McpServer(command=("python3", f"{SERVER_DIR}/{script.name}", *args),
                     env={"PYTHONPATH": ":".join(inside), "PYTHONDONTWRITEBYTECODE": "1"},
                     spec=base.model_copy(update={"mounts": mounts}), timeout=timeout, start_timeout=start_timeout)


@dataclass
class McpTask:
    """One episode's request (``prompt``), the files the work dir starts with (the server's initial
    state), and what the verifier and the oracle need to know (``data``, never shown to the agent)."""

    prompt: str
    files: dict[str, str] = field(default_factory=dict)
    data: Any = None


@dataclass(frozen=True)
class McpCall:
    """One tool call of the transcript: what the agent sent and what the server answered."""

    name: str
    arguments: dict[str, Any]
    result: str
    is_error: bool


@dataclass
class McpEpisode:
    """What a verifier judges: the task, the transcript, the submitted answer, and the live server."""

    task: McpTask
    calls: list[McpCall]
    answer: str
    client: McpClient


TaskMaker = Callable[[np.random.Generator, str], McpTask]
Verifier = Callable[[McpEpisode], "float | bool | Awaitable[float | bool]"]


class McpEnv(SandboxEnv):
    """An environment made of an MCP server (see the module). Give ``server``, ``tasks`` and ``verifier``
    (or override :meth:`make_task` and :meth:`verify`); the server's tools are listed once per process."""

    server: ClassVar[McpServer | None] = None
    """The server a subclass runs; ``server=`` given to the constructor takes its place."""
    execution = "inline"
    default_max_turns = 12

    def __init__(self, *, server: McpServer | Mapping[str, Any] | None = None, tasks: TaskMaker | str | None = None,
                 verifier: Verifier | str | None = None, **kwargs: Any) -> None:
        chosen = server if server is not None else type(self).server
        if chosen is None:
            raise ValueError(f"{type(self).__name__} needs an MCP server: pass server= or set the class's server")
        self.server = chosen if isinstance(chosen, McpServer) else _server_from_mapping(chosen)
        self.sandbox_spec = self.server.spec
        super().__init__(**kwargs)
        self._tasks, self._verifier = _resolve(tasks), _resolve(verifier)
        listing = _server_tools(self.server, self.backend)
        self.server_name, self.instructions = listing.name, listing.instructions
        if any(spec.name == SUBMIT for spec in listing.tools):
            raise McpServerError(f"the server has a tool named {SUBMIT!r}, which agentgym keeps for ending an episode")
        self._tools = {**{spec.name: ("_relay", spec) for spec in listing.tools}, SUBMIT: self._tools[SUBMIT]}
        self._tool_specs = tuple(spec for _, spec in self._tools.values())
        self.task: McpTask | None = None
        self.calls: list[McpCall] = []
        """This episode's tool calls so far."""
        self.client: McpClient | None = None

    # -- what an env author writes --------------------------------------------------------------------

    def make_task(self, rng: np.random.Generator, difficulty: str) -> McpTask:
        """This episode's task, drawn from ``rng``; by default the ``tasks`` function given."""
        if self._tasks is None:
            raise NotImplementedError(f"{type(self).__name__} needs tasks= or a make_task() override")
        return self._tasks(rng, difficulty)

    async def verify(self, episode: McpEpisode) -> float | bool:
        """The episode's reward (1 or ``True`` is a success); by default the ``verifier`` function given."""
        if self._verifier is None:
            raise NotImplementedError(f"{type(self).__name__} needs verifier= or a verify() override")
        verdict = self._verifier(episode)
        return await verdict if isinstance(verdict, Awaitable) else verdict

    # -- the episode ----------------------------------------------------------------------------------

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        await self._stop_server()
        self.task, self.calls = self.make_task(self.np_random, difficulty), []
        sandbox = await self.start_sandbox()
        for path, text in self.task.files.items():
            await sandbox.write_file(path, text)
        process = await sandbox.spawn(list(self.server.command), env=dict(self.server.env), cwd=self.server.cwd)
        self.client = await McpClient.start(process, timeout=self.server.timeout,
                                          start_timeout=self.server.start_timeout)
        instructions = f" {self.instructions.strip()}" if self.instructions else ""
        system = SYSTEM_PROMPT.format(name=self.server_name, instructions=instructions, submit=SUBMIT)
        return [Message(role="system", content=system), Message(role="user", content=self.task.prompt)]

    async def _run_tool(self, name: str, fn: Callable[..., Any], arguments: dict[str, Any]) -> Any:
        if name != SUBMIT:
            arguments = {"name": name, "arguments": arguments}
        return await super()._run_tool(name, fn, arguments)

    async def _relay(self, name: str, arguments: dict[str, Any]) -> str:
        """Call the server's tool ``name``; its failure is the agent's error, the server's is infrastructure."""
        assert self.client is not None
        result = await self.client.call_tool(name, arguments)
        text = _text(result)
        self.calls.append(McpCall(name, arguments, text, result.is_error))
        if result.is_error:
            raise ToolError(text)
        return text

    @tool
    async def submit(self, answer: str) -> str:
        """Finish: give what the request asked for, or a short note of what you did; your work is then checked.

        Args:
            answer: The answer asked for, e.g. "3", or "done".
        """
        assert self.task is not None and self.client is not None
        verdict = await self.verify(McpEpisode(self.task, list(self.calls), answer, self.client))
        reward = float(verdict)
        self.finish(success=reward >= 1.0, reward=reward)
        return "The request is done." if reward >= 1.0 else "The request is not done as asked."

    def render_text(self) -> str:
        return self.task.prompt if self.task is not None else ""

    async def aclose(self) -> None:
        await self._stop_server()
        await super().aclose()

    def close(self) -> None:
        if self.client is not None:
            self._run_sync(self._stop_server())
        super().close()

    async def _stop_server(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.close()


@dataclass(frozen=True)
class _Listing:
    name: str
    instructions: str | None
    tools: tuple[ToolSpec, ...]


_LISTINGS: dict[str, _Listing] = {}


def _server_tools(server: McpServer, backend: str) -> _Listing:
    """The server's name, instructions and tools, from one run of it in a sandbox of its own (once per
    process for each server and backend)."""
    key = json.dumps([list(server.command), dict(server.env), server.cwd, server.spec.model_dump(), backend])
    if key not in _LISTINGS:
        _LISTINGS[key] = _run_apart(lambda: _list_tools(server, backend))
    return _LISTINGS[key]


async def _list_tools(server: McpServer, backend: str) -> _Listing:
    """Start ``server`` in a sandbox of its own, list what it offers, and stop it."""
    async with await backend_module(backend).create(server.spec) as sandbox:
        process = await sandbox.spawn(list(server.command), env=dict(server.env), cwd=server.cwd)
        client = await McpClient.start(process, timeout=server.timeout, start_timeout=server.start_timeout)
        try:
            tools = await client.list_tools()
        finally:
            await client.close()
    assert client.server is not None
    return _Listing(client.server.server_info.name, client.server.instructions,
                    tuple(ToolSpec.from_json_schema(t.name, t.description or "", t.input_schema) for t in tools))


def _run_apart(coroutine: Callable[[], Awaitable[_Listing]]) -> _Listing:
    """Run ``coroutine`` to its end on an event loop of its own (in a thread when one runs here)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine())
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(coroutine())).result()


def _server_from_mapping(config: Mapping[str, Any]) -> McpServer:
    """An :class:`McpServer` from plain values (a registration's kwargs): ``script`` (with ``args``) for
    :func:`python_server`, else ``command``, ``env``, ``cwd``, ``spec``, ``timeout`` and ``start_timeout``."""
    config = dict(config)
    spec = SandboxSpec(**config.pop("spec")) if "spec" in config else None
    if "script" in config:
        return python_server(config.pop("script"), *config.pop("args", ()), spec=spec, **config)
    return McpServer(command=tuple(config.pop("command")), spec=spec or SandboxSpec(), **config)


def _resolve(function: Callable[..., Any] | str | None) -> Callable[..., Any] | None:
    """A function, or the one a ``module:name`` string names."""
    if not isinstance(function, str):
        return function
    module, _, name = function.partition(":")
    return getattr(importlib.import_module(module), name)


def _text(result: types.CallToolResult) -> str:
    """A tool result as the agent reads it: its text parts, else its structured content as JSON."""
    texts = [part.text for part in result.content if isinstance(part, types.TextContent)]
    if texts:
        return "\n".join(texts)
    if result.structured_content is not None:
        return json.dumps(result.structured_content)
    return f"({len(result.content)} non-text part(s))" if result.content else "(no output)"
