"""The ``docker`` backend: one locked-down container per sandbox, commands through ``docker exec``.

A container runs ``sleep infinity`` under Docker's init as uid 1000 with a read-only root, no
capabilities, ``no-new-privileges``, memory (swap included), CPU and process limits, and no network unless
the spec asks. The work dir and ``/tmp`` are size-limited tmpfs mounts: their pages count against the
memory limit, nothing is left on the host's disk, and any image and work dir work (what an image holds at
the work dir is hidden). gVisor's ``runsc`` is used when the engine lists it; ``AGENTGYM_DOCKER_RUNTIME``
names another (``runc`` forces the default).
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from agentgym.sandboxes.base import (
    HOST_SLACK,
    KILL_GRACE,
    LABEL,
    OWNER_LABEL,
    TIMEOUT_EXIT,
    RawResult,
    Sandbox,
    SandboxSpec,
    owner,
    owner_alive,
    timed_argv,
)
from agentgym.sandboxes.docker_engine import client, docker_module
from agentgym.sandboxes.errors import SandboxDied, SandboxError, SandboxStartError, SandboxUnavailable
from agentgym.sandboxes.images import image_tag, is_defined

AGENT_USER = "1000:1000"
RUNTIME_ENV = "AGENTGYM_DOCKER_RUNTIME"
"""Names the container runtime to use (``runc``, ``runsc``, ...) instead of the automatic choice."""
TMP_MB = 64
"""Size of each sandbox's ``/tmp`` (a tmpfs, counted against its memory limit)."""
KILLED = 128 + 9
"""The exit status of ``timeout`` when the command needed the forced stop (it dies with its group)."""
_CHUNK = 64 * 1024
_HEADER = struct.Struct(">BxxxI")
_THREADS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="agentgym-docker")
"""Where the blocking Docker calls wait: a command holds a thread while it runs, so not the loop's default
pool (a few threads, shared with synchronous environments)."""
_T = TypeVar("_T")


class DockerSandbox(Sandbox):
    """A sandbox in a Docker container; its id is the container's name."""

    backend = "docker"

    async def _exec(self, argv: list[str], *, timeout: float, stdin: bytes | None, env: dict[str, str],
                    cwd: str, limit: int) -> RawResult:
        return await _blocking(self._exec_blocking, argv, timeout, stdin, env, cwd, limit)

    async def _close(self) -> None:
        await _blocking(_remove, self.id)

    async def expose(self, port: int) -> str:
        """``ip:port`` of ``port`` on the container's bridge address, which the host reaches directly (nothing
        is published on the host's interfaces); only for sandboxes made with ``network=True``."""
        if not self.spec.network:
            raise SandboxError(f"sandbox {self.id} has no network; only a network=True sandbox exposes ports")
        if self.closed:
            raise SandboxError(f"sandbox {self.id} is closed")
        networks = (await _blocking(self._inspect))["NetworkSettings"]["Networks"]
        addresses = [n["IPAddress"] for n in networks.values() if n.get("IPAddress")]
        if not addresses:
            raise SandboxDied(f"sandbox {self.id} has no network address")
        return f"{addresses[0]}:{port}"

    def _exec_blocking(self, argv: list[str], timeout: float, stdin: bytes | None, env: dict[str, str],
                       cwd: str, limit: int) -> RawResult:
        errors = docker_module().errors
        api = client().api
        started = time.monotonic()
        deadline = started + timeout + KILL_GRACE + HOST_SLACK
        try:
            exec_id = api.exec_create(self.id, timed_argv(argv, timeout), stdin=True, environment=env,
                                      workdir=cwd)["Id"]
            stream = api.exec_start(exec_id, socket=True)
        except (errors.DockerException, OSError) as exc:
            raise SandboxDied(f"sandbox {self.id} cannot run commands: {exc}") from exc
        connection = getattr(stream, "_sock", stream)
        try:
            feeder = threading.Thread(target=_feed, args=(connection, stdin), daemon=True) if stdin else None
            if feeder is None:
                _feed(connection, b"")
            else:
                feeder.start()
            stdout, stderr = _read_frames(connection, limit, deadline, self.id)
            if feeder is not None:
                feeder.join(max(0.0, deadline - time.monotonic()))
        finally:
            stream.close()
            connection.close()
        exit_code = self._exit_code(exec_id, deadline)
        elapsed = time.monotonic() - started
        if exit_code >= 128 and not self._running():
            raise SandboxDied(f"sandbox {self.id} stopped while running {argv[:3]}")
        timed_out = elapsed >= timeout and (exit_code == TIMEOUT_EXIT
                                            or (exit_code == KILLED and elapsed >= timeout + KILL_GRACE))
        return RawResult(exit_code, bytes(stdout.data), bytes(stderr.data), timed_out,
                         stdout.truncated or stderr.truncated)

    def _exit_code(self, exec_id: str, deadline: float) -> int:
        """The exit status of a finished exec (its stream can end a moment before Docker records it)."""
        errors = docker_module().errors
        while True:
            try:
                state = client().api.exec_inspect(exec_id)
            except (errors.DockerException, OSError) as exc:
                raise SandboxDied(f"sandbox {self.id} lost a command: {exc}") from exc
            if not state["Running"]:
                if state["ExitCode"] is None:
                    raise SandboxDied(f"sandbox {self.id} lost a command (no exit status)")
                return int(state["ExitCode"])
            if time.monotonic() > deadline:
                raise SandboxDied(f"sandbox {self.id} did not report a command's exit status in time")
            time.sleep(0.01)

    def _inspect(self) -> dict[str, Any]:
        errors = docker_module().errors
        try:
            return client().api.inspect_container(self.id)
        except (errors.DockerException, OSError) as exc:
            raise SandboxDied(f"sandbox {self.id} is gone: {exc}") from exc

    def _running(self) -> bool:
        try:
            return bool(self._inspect()["State"]["Running"])
        except SandboxDied:
            return False


async def create(spec: SandboxSpec) -> DockerSandbox:
    """A new running container made from ``spec``. Raises :class:`SandboxUnavailable` when the engine or the
    image is missing, :class:`SandboxStartError` when the container does not start. Cancelled while the
    container is being made, the container is removed as soon as it exists."""
    creating = _THREADS.submit(_create, spec)
    try:
        return await asyncio.wrap_future(creating)
    except asyncio.CancelledError:
        creating.add_done_callback(_discard)
        raise


def check(spec: SandboxSpec | None = None) -> None:
    """Raise :class:`SandboxUnavailable` (naming the step to take) unless an engine answers and ``spec``'s
    image is present."""
    docker = client()
    if spec is not None:
        image = _image(spec.image)
        try:
            docker.images.get(image)
        except docker_module().errors.ImageNotFound as exc:
            raise SandboxUnavailable(f"image {image} is not present here: docker pull {image}") from exc


def live() -> list[str]:
    """The ids of agentgym's docker sandboxes present on the engine, whoever made them."""
    return [c["Names"][0].lstrip("/") for c in _labelled()]


def reap(*, everything: bool = False) -> int:
    """Remove the containers of dead owners (or all of agentgym's with ``everything``); returns how many.
    Nothing to do when no engine runs."""
    removed = 0
    for container in _labelled():
        if everything or not owner_alive(container["Labels"].get(OWNER_LABEL, "")):
            _remove(container["Id"])
            removed += 1
    return removed


async def _blocking(function: Callable[..., _T], *args: Any) -> _T:
    return await asyncio.get_running_loop().run_in_executor(_THREADS, functools.partial(function, *args))


def _create(spec: SandboxSpec) -> DockerSandbox:
    docker = client()
    errors = docker_module().errors
    image = _image(spec.image)
    name = f"agentgym-{uuid.uuid4().hex[:12]}"
    mounts = "rw,nosuid,nodev,exec,size={}m,{}"
    try:
        container = docker.containers.create(
            image, ["sleep", "infinity"], name=name, detach=True, init=True, user=AGENT_USER,
            working_dir=spec.workdir, environment={"HOME": spec.workdir, "LANG": "C.UTF-8"},
            labels={LABEL: "1", OWNER_LABEL: owner()}, runtime=_runtime(),
            network_mode="bridge" if spec.network else "none",
            mem_limit=f"{spec.memory_mb}m", memswap_limit=f"{spec.memory_mb}m",
            nano_cpus=int(spec.cpus * 1e9), pids_limit=spec.pids,
            read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            tmpfs={spec.workdir: mounts.format(spec.memory_mb, "uid=1000,gid=1000,mode=0755"),
                   "/tmp": mounts.format(min(TMP_MB, spec.memory_mb), "mode=1777")},
        )
    except errors.ImageNotFound as exc:
        raise SandboxUnavailable(f"image {image} is not present here: docker pull {image}") from exc
    except (errors.DockerException, OSError) as exc:
        raise SandboxStartError(f"cannot create a container from {image}: {exc}") from exc
    try:
        container.start()
    except (errors.DockerException, OSError) as exc:
        _remove(name)
        raise SandboxStartError(f"container {name} from {image} did not start: {exc}") from exc
    return DockerSandbox(spec, name)


def _discard(creating: Future[DockerSandbox]) -> None:
    """Remove the container of a creation nobody waits for any more (runs in the creating thread)."""
    if not creating.cancelled() and creating.exception() is None:
        _remove(creating.result().id)


def _image(image: str) -> str:
    """An agentgym image name as its content tag; any other image as given."""
    return image_tag(image) if is_defined(image) else image


@functools.cache
def _engine_runtimes() -> frozenset[str]:
    return frozenset(client().info().get("Runtimes", {}))


def _runtime() -> str | None:
    chosen = os.environ.get(RUNTIME_ENV)
    if chosen:
        return chosen
    return "runsc" if "runsc" in _engine_runtimes() else None


def _labelled() -> list[dict[str, Any]]:
    """agentgym's containers as the engine lists them (one call: no inspection that races a removal)."""
    try:
        docker = client()
    except SandboxUnavailable:
        return []
    try:
        return docker.api.containers(all=True, filters={"label": f"{LABEL}=1"})
    except (docker_module().errors.DockerException, OSError) as exc:
        raise SandboxError(f"cannot list the docker sandboxes: {exc}") from exc


def _remove(name: str) -> None:
    """Remove container ``name`` and what it holds; one already gone (or going) is fine."""
    errors = docker_module().errors
    try:
        client().api.remove_container(name, force=True)
    except errors.NotFound:
        pass
    except errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise SandboxDied(f"cannot remove sandbox {name}: {exc}") from exc
    except (errors.DockerException, OSError) as exc:
        raise SandboxDied(f"cannot remove sandbox {name}: {exc}") from exc


def _feed(connection: socket.socket, data: bytes) -> None:
    """Send a command's stdin, then end it (the command sees end of file); a command gone early is fine."""
    try:
        if data:
            connection.sendall(data)
        connection.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class _Capture:
    """The first ``limit`` bytes of one output stream; the rest is counted as cut and dropped."""

    def __init__(self, limit: int) -> None:
        self.data = bytearray()
        self.limit = limit
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if len(chunk) > room:
            self.truncated = True
        self.data += chunk[:room] if room > 0 else b""


def _read_frames(connection: socket.socket, limit: int, deadline: float, sandbox_id: str) -> tuple[
        _Capture, _Capture]:
    """Read Docker's multiplexed stream (8-byte header: stream, size; then the payload) to its end, keeping
    at most ``limit`` bytes per stream and never holding more than one chunk of the rest."""
    captures = {1: _Capture(limit), 2: _Capture(limit)}

    def receive(size: int) -> bytes:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SandboxDied(f"sandbox {sandbox_id} did not finish a command in time")
        connection.settimeout(remaining)
        try:
            return connection.recv(size)
        except TimeoutError as exc:
            raise SandboxDied(f"sandbox {sandbox_id} did not finish a command in time") from exc
        except OSError as exc:
            raise SandboxDied(f"sandbox {sandbox_id} lost a command's output: {exc}") from exc

    while True:
        header = b""
        while len(header) < _HEADER.size:
            chunk = receive(_HEADER.size - len(header))
            if not chunk:
                if header:
                    raise SandboxDied(f"sandbox {sandbox_id} cut a command's output mid-frame")
                return captures[1], captures[2]
            header += chunk
        kind, size = _HEADER.unpack(header)
        capture = captures.get(kind, captures[1])
        while size:
            chunk = receive(min(size, _CHUNK))
            if not chunk:
                raise SandboxDied(f"sandbox {sandbox_id} cut a command's output mid-frame")
            capture.add(chunk)
            size -= len(chunk)
