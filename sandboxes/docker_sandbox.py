"""The ``docker`` backend: one locked-down container per sandbox, commands through a server inside it.

A container runs :mod:`agentgym.sandboxes.exec_server` under Docker's init with a read-only root,
``no-new-privileges``, memory (swap included), CPU and process limits, and no network unless the spec asks.
The server runs as root in the container with no capability but those it needs to start each command as
uid 1000 (``SETUID``, ``SETGID``) and to stop what a command left behind (``KILL``); commands run as uid
1000 with none, so nothing they do (``kill -9 -1`` included) reaches the server or the init. The host keeps
the container's stdin and stdout attached and sends commands down that one stream, so a command costs a
fork inside, not a ``docker exec``; images need ``python3`` (files travel through it too). When the
attachment ends (the sandbox is closed, or the process that made it dies) the server exits and Docker
removes the container, so a crashed run leaves nothing behind; ``reap`` removes what remains when that
could not happen (an engine that was down, another host's run).

The work dir, ``/tmp`` and ``/dev/shm`` are size-limited tmpfs mounts: nothing is left on the host's disk,
and any image and work dir work (what an image holds at the work dir is hidden). What they hold, and System
V shared memory, stays in memory after the processes that wrote it are gone, so the container's memory limit
is ``spec.memory_mb`` plus all of it (``spec.disk_mb`` for the work dir and ``/tmp`` together,
:data:`SHM_MB` each for ``/dev/shm`` and System V segments): a full disk is an error the writing command
sees (ENOSPC), never an out-of-memory kill, and when memory runs out the kernel kills a command (they are
its first pick), not the server. With ``disk_mb=None`` all of it takes from ``spec.memory_mb`` instead (the
work dir as big as that): filling it can get the sandbox killed for its memory limit.

A container that stops under a sandbox raises :class:`SandboxDied`, or :class:`SandboxKilledFromInside` when
the engine reports that it died of its own memory limit (an out-of-memory kill in it just before it
stopped, and no kill from outside). gVisor's ``runsc`` is used when the engine lists it (its kernel keeps
no such order between processes: a sandbox out of memory may die whole); ``AGENTGYM_DOCKER_RUNTIME`` names
another runtime (``runc`` forces the default).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import functools
import itertools
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from agentgym.sandboxes import exec_server
from agentgym.sandboxes.base import (
    HOST_SLACK,
    KILL_GRACE,
    LABEL,
    OWNER_LABEL,
    TIMEOUT_EXIT,
    MiB,
    RawResult,
    Sandbox,
    SandboxSpec,
    owner,
    owner_alive,
    timed_argv,
)
from agentgym.sandboxes.docker_engine import client, docker_module, ping
from agentgym.sandboxes.errors import (
    SandboxDied,
    SandboxError,
    SandboxKilledFromInside,
    SandboxStartError,
    SandboxUnavailable,
)
from agentgym.sandboxes.images import image_tag, is_defined
from agentgym.sandboxes.process import SandboxProcess

AGENT_USER = "1000:1000"
"""The user every command runs as."""
SERVER_USER = "0:0"
"""The user the container (its init and the exec server) runs as: not one the commands can signal."""
SERVER_CAPS = ["SETUID", "SETGID", "KILL"]
"""The server's only capabilities: start a command as :data:`AGENT_USER`, kill what it leaves behind."""
RUNTIME_ENV = "AGENTGYM_DOCKER_RUNTIME"
"""Names the container runtime to use (``runc``, ``runsc``, ...) instead of the automatic choice."""
TMP_MB = 64
"""The most of ``spec.disk_mb`` that goes to ``/tmp`` (at most a quarter of it); the rest is the work
dir's."""
SHM_MB = 64
"""Size of each sandbox's ``/dev/shm`` (a tmpfs), and the most System V shared memory it may hold (which
would outlive the processes that made it); both are added to its memory limit."""
PAGE = 4096
"""Bytes of a memory page, the unit of ``kernel.shmall``."""
INODE_BYTES = 16 * 1024
"""Bytes of a tmpfs's size per inode it may hold (ext4's default ratio): empty files cost memory too."""
DEATH_WAIT = 5.0
"""Seconds the engine has to report the end of a container whose stream ended."""
OOM_WINDOW = 10.0
"""Seconds before a container's end within which an out-of-memory kill in it counts as the cause."""
KILLED = 128 + 9
"""The exit status of ``timeout`` when the command needed the forced stop (it dies with its group)."""
SERVER_ENV = "AGENTGYM_EXEC_SERVER"
"""Carries the exec server's source into the container; the server takes it out of its environment."""
SERVER = ["python3", "-I", "-c", f"exec(__import__('os').environ.pop('{SERVER_ENV}'))", AGENT_USER]
"""The container's command, short enough to read in ``ps``; its argument is the user commands run as."""
REMOVE_WAIT = 30.0
"""Seconds to wait for a container that Docker is already removing."""
_KILL = 'for i in $(seq 100); do [ -s "$0" ] && exec kill -KILL "$(cat "$0")"; sleep 0.05; done'
"""Kills the spawned process whose pid file is ``$0``, waiting for a process just started to write it."""
_THREADS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="agentgym-docker")
"""Where the blocking Docker calls wait, not the loop's default pool (a few threads, shared with
synchronous environments)."""
_T = TypeVar("_T")


class DockerSandbox(Sandbox):
    """A sandbox in a Docker container; its id is the container's name."""

    backend = "docker"

    def __init__(self, spec: SandboxSpec, sandbox_id: str, channel: _Channel) -> None:
        super().__init__(spec, sandbox_id)
        self._channel = channel

    @property
    def alive(self) -> bool:
        """Open, and its server still attached."""
        return not self.closed and self._channel.failure is None

    async def _exec(self, argv: list[str], *, timeout: float, stdin: bytes | None, env: dict[str, str],
                    cwd: str, limit: int) -> RawResult:
        request = {"argv": timed_argv(argv, timeout), "env": env, "cwd": cwd, "limit": limit,
                   "stdin": None if stdin is None else exec_server.encode(stdin)}
        started = time.monotonic()
        answer = await _blocking(self._channel.submit, request)
        try:
            reply = await asyncio.wait_for(asyncio.wrap_future(answer), timeout + KILL_GRACE + HOST_SLACK)
        except TimeoutError as exc:
            raise SandboxDied(f"sandbox {self.id} did not finish a command in time") from exc
        elapsed = time.monotonic() - started
        if "error" in reply:
            raise SandboxDied(f"sandbox {self.id} failed to run a command: {reply['error']}")
        try:
            exit_code = int(reply["exit"])
            stdout, stderr = base64.b64decode(reply["stdout"]), base64.b64decode(reply["stderr"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SandboxDied(f"sandbox {self.id} sent a garbled answer: {exc!r}") from exc
        timed_out = elapsed >= timeout and (exit_code == TIMEOUT_EXIT
                                            or (exit_code == KILLED and elapsed >= timeout + KILL_GRACE))
        return RawResult(exit_code, stdout, stderr, timed_out, bool(reply.get("truncated")))

    async def _close(self) -> None:
        self._channel.closing()
        try:
            await _blocking(_remove, self.id)
        finally:
            self._channel.close()

    async def _spawn(self, argv: list[str], *, env: dict[str, str], cwd: str) -> SandboxProcess:
        pidfile = f"/tmp/.agentgym-process-{uuid.uuid4().hex[:12]}"
        wrapped = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', pidfile, *argv]
        exec_id, stream = await _blocking(_start_exec, self.id, wrapped, env, cwd)
        return DockerProcess(self, exec_id, stream, pidfile)

    async def expose(self, port: int) -> str:
        """``ip:port`` of ``port`` on the container's bridge address, which the host reaches directly (nothing
        is published on the host's interfaces); only for sandboxes made with ``network=True``."""
        if not self.spec.network:
            raise SandboxError(f"sandbox {self.id} has no network; only a network=True sandbox exposes ports")
        if self.closed:
            raise SandboxError(f"sandbox {self.id} is closed")
        errors = docker_module().errors
        try:
            attrs = await _blocking(client().api.inspect_container, self.id)
        except (errors.DockerException, OSError) as exc:
            raise SandboxDied(f"sandbox {self.id} is gone: {exc}") from exc
        addresses = [n["IPAddress"] for n in attrs["NetworkSettings"]["Networks"].values() if n.get("IPAddress")]
        if not addresses:
            raise SandboxDied(f"sandbox {self.id} has no network address")
        return f"{addresses[0]}:{port}"


class DockerProcess(SandboxProcess):
    """A process spawned in a container by ``docker exec``, its streams on the exec's attached socket (read
    by a thread). It writes its pid to ``pidfile`` as it starts, so that a kill reaches it inside."""

    def __init__(self, sandbox: DockerSandbox, exec_id: str, stream: Any, pidfile: str) -> None:
        super().__init__()
        self._sandbox, self._exec_id, self._stream, self._pidfile = sandbox, exec_id, stream, pidfile
        self._socket = getattr(stream, "_sock", stream)
        self._loop = asyncio.get_running_loop()
        self._stdout: asyncio.Queue[bytes] = asyncio.Queue()
        self._returncode: int | None = None
        self._stdout_ended = False
        threading.Thread(target=self._receive, name=f"agentgym-{sandbox.id}-process", daemon=True).start()

    async def read(self) -> bytes:
        if self._stdout_ended and self._stdout.empty():
            return b""
        chunk = await self._stdout.get()
        self._stdout_ended = self._stdout_ended or not chunk
        return chunk

    async def write(self, data: bytes) -> None:
        if self._returncode is not None:
            raise BrokenPipeError(f"the process exited with status {self._returncode}")
        await _blocking(self._socket.sendall, data)

    async def close_stdin(self) -> None:
        with contextlib.suppress(OSError):
            await _blocking(self._socket.shutdown, socket.SHUT_WR)

    async def kill(self) -> None:
        if self._returncode is None and self._sandbox.alive:
            with contextlib.suppress(SandboxError):
                await self._sandbox.exec(["sh", "-c", _KILL, self._pidfile], timeout=10)

    @property
    def returncode(self) -> int | None:
        return self._returncode

    def _receive(self) -> None:
        """Hand the stdout frames to the loop and keep the stderr ones until the stream ends; then learn the
        exit status (a container removed meanwhile counts as a kill)."""
        from docker.utils.socket import SocketError, frames_iter

        try:
            for kind, chunk in frames_iter(self._socket, tty=False):
                self._to_loop(self._stdout.put_nowait if kind == 1 else self._keep_stderr, chunk)
        except (OSError, SocketError):
            pass
        finally:
            _close_attached(self._stream)
            status = _exit_status(self._exec_id)
            self._to_loop(self._ended, status)

    def _ended(self, status: int) -> None:
        self._returncode = status
        self._stdout.put_nowait(b"")

    def _to_loop(self, function: Callable[[Any], None], value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody reads any more
            self._loop.call_soon_threadsafe(function, value)


def _start_exec(container: str, argv: list[str], env: dict[str, str], cwd: str) -> tuple[str, Any]:
    """Create and start a ``docker exec`` of ``argv`` with its stdin attached; its id and socket."""
    errors = docker_module().errors
    api = client().api
    try:
        exec_id = api.exec_create(container, argv, stdin=True, stdout=True, stderr=True, tty=False,
                                  environment={SERVER_ENV: "", **env}, workdir=cwd,
                                  user=AGENT_USER)["Id"]
        return exec_id, api.exec_start(exec_id, socket=True)
    except (errors.DockerException, OSError) as exc:
        raise SandboxDied(f"could not start a process in sandbox {container}: {exc}") from exc


def _exit_status(exec_id: str) -> int:
    """The exit status of a finished exec; one whose container is gone was killed with it."""
    errors = docker_module().errors
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            state = client().api.exec_inspect(exec_id)
        except (errors.DockerException, OSError):
            return KILLED
        if not state.get("Running"):
            return int(state.get("ExitCode") or 0)
        time.sleep(0.02)
    return KILLED


class _Channel:
    """The host's end of a container's attached stdin and stdout: requests go out as frames, answers are
    matched back to them by id in a reader thread. When the stream ends, or carries anything but answers
    of at most ``max_frame`` bytes, every waiting request fails: with :class:`SandboxKilledFromInside` when
    the stream ended and ``died_inside()`` says the container died of what ran in it, else with
    :class:`SandboxDied`."""

    def __init__(self, stream: Any, name: str, max_frame: int, died_inside: Callable[[], bool] | None = None
                 ) -> None:
        self.name, self.max_frame = name, max_frame
        self.failure: str | None = None
        self._failure_type: type[SandboxDied] = SandboxDied
        self._died_inside = died_inside
        self._stream = stream
        self._socket = getattr(stream, "_sock", stream)
        self._sending = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._ids = itertools.count()
        self._errors: collections.deque[bytes] = collections.deque(maxlen=16)
        threading.Thread(target=self._receive, name=f"agentgym-{name}", daemon=True).start()

    def submit(self, request: dict[str, Any]) -> Future[dict[str, Any]]:
        """Send ``request``; the future holds its answer, or :class:`SandboxDied` when none can come."""
        answer: Future[dict[str, Any]] = Future()
        with self._lock:
            if self.failure is not None:
                raise self._failure_type(self.failure)
            request_id = next(self._ids)
            self._pending[request_id] = answer
        try:
            with self._sending:
                self._socket.sendall(exec_server.frame({**request, "id": request_id}))
        except OSError as exc:
            self._fail(f"cannot send a command: {exc}")
        return answer

    def closing(self) -> None:
        """The host is closing the sandbox: waiting requests fail now, and the end of the stream that follows
        is not looked into."""
        self._fail("the sandbox is closed")

    def close(self) -> None:
        """End the attachment (the server sees end of input); waiting requests fail."""
        self.closing()
        _close_attached(self._stream)

    def _receive(self) -> None:
        from docker.utils.socket import SocketError, frames_iter

        reason, ended = "its container stopped", True
        buffer = bytearray()
        try:
            for kind, chunk in frames_iter(self._socket, tty=False):
                if kind != 1:
                    self._errors.append(chunk)
                    continue
                buffer += chunk
                while len(buffer) >= exec_server.LENGTH.size:
                    (size,) = exec_server.LENGTH.unpack_from(buffer)
                    if size > self.max_frame:
                        raise ValueError(f"an answer of {size} bytes is past the {self.max_frame}-byte limit")
                    if len(buffer) < exec_server.LENGTH.size + size:
                        break
                    reply = json.loads(buffer[exec_server.LENGTH.size:exec_server.LENGTH.size + size])
                    del buffer[:exec_server.LENGTH.size + size]
                    self._resolve(reply)
        except (OSError, ValueError, KeyError, TypeError, SocketError) as exc:
            reason, ended = f"its stream broke: {exc}", False
        inside = ended and self.failure is None and self._died_inside is not None and self._died_inside()
        if inside:
            reason = "it ran out of memory: the kernel killed it for its own memory limit"
        said = b"".join(self._errors).decode(errors="replace").strip()
        self._fail(reason + (f" (it said: {said[-500:]})" if said else ""), inside=inside)

    def _resolve(self, reply: dict[str, Any]) -> None:
        with self._lock:
            answer = self._pending.pop(reply.pop("id", None), None)
        if answer is not None:
            try:
                answer.set_result(reply)
            except InvalidStateError:
                pass  # nobody waits for it any more

    def _fail(self, reason: str, *, inside: bool = False) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = f"sandbox {self.name} cannot run commands: {reason}"
                self._failure_type = SandboxKilledFromInside if inside else SandboxDied
            waiting = list(self._pending.values())
            self._pending.clear()
        for answer in waiting:
            try:
                answer.set_exception(self._failure_type(self.failure))
            except InvalidStateError:
                pass


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
    try:
        ping(docker)
    except (docker_module().errors.DockerException, OSError) as exc:  # requests' errors are OSErrors
        raise SandboxUnavailable(f"the Docker engine stopped answering ({exc}); start dockerd, or run "
                                 "`agentgym sandbox build`, which starts it") from exc
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
    since = int(time.time()) - 1  # the engine's events about it start after this
    work_mb, tmp_mb = disk_sizes(spec)
    memory = f"{memory_limit(spec)}m"
    host = docker.api.create_host_config(
        init=True, auto_remove=True, runtime=_runtime(), network_mode="bridge" if spec.network else "none",
        mem_limit=memory, memswap_limit=memory, nano_cpus=int(spec.cpus * 1e9), pids_limit=spec.pids,
        read_only=True, cap_drop=["ALL"], cap_add=SERVER_CAPS, security_opt=["no-new-privileges"],
        tmpfs={spec.workdir: _tmpfs(work_mb, "uid=1000,gid=1000,mode=0755"),
               "/tmp": _tmpfs(tmp_mb, "mode=1777")},
        shm_size=f"{SHM_MB}m", sysctls={"kernel.shmmax": str(SHM_MB * MiB),
                                        "kernel.shmall": str(SHM_MB * MiB // PAGE)},
        binds={host: {"bind": inside, "mode": "ro"} for host, inside in spec.mounts.items()},
        log_config={"type": "none", "config": {}})
    try:
        docker.api.create_container(
            image, SERVER, name=name, user=SERVER_USER, working_dir=spec.workdir, stdin_open=True,
            detach=False,
            environment={"HOME": spec.workdir, "LANG": "C.UTF-8", SERVER_ENV: _server_source()},
            labels={LABEL: "1", OWNER_LABEL: owner()}, host_config=host)
    except errors.ImageNotFound as exc:
        raise SandboxUnavailable(f"image {image} is not present here: docker pull {image}") from exc
    except (errors.DockerException, OSError) as exc:
        raise SandboxStartError(f"cannot create a container from {image}: {exc}") from exc
    stream = None
    try:
        stream = docker.api.attach_socket(name, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        docker.api.start(name)
    except (errors.DockerException, OSError) as exc:
        if stream is not None:
            _close_attached(stream)
        _remove(name)
        raise SandboxStartError(f"container {name} from {image} did not start: {exc}") from exc
    largest = max(spec.output_limit, spec.file_limit) * 2 * 4 // 3  # two streams, as base64
    died_inside = functools.partial(_died_of_its_memory_limit, name, since)
    return DockerSandbox(spec, name, _Channel(stream, name, max_frame=largest + 64 * 1024,
                                              died_inside=died_inside))


def disk_sizes(spec: SandboxSpec) -> tuple[int, int]:
    """MiB of the work dir's and of ``/tmp``'s tmpfs: ``spec.disk_mb`` shared out (``/tmp`` takes
    :data:`TMP_MB` of it, at most a quarter), or with ``disk_mb=None`` each as big as the memory limit
    allows."""
    if spec.disk_mb is None:
        return spec.memory_mb, min(TMP_MB, spec.memory_mb)
    tmp_mb = min(TMP_MB, spec.disk_mb // 4)
    return spec.disk_mb - tmp_mb, tmp_mb


def memory_limit(spec: SandboxSpec) -> int:
    """MiB of the container's memory limit: ``spec.memory_mb`` plus what may be held in memory without a
    process, counted against it: the tmpfs mounts and System V shared memory. With ``disk_mb=None`` all of
    that takes from ``spec.memory_mb``, and filling it can get the sandbox killed for its memory limit."""
    return spec.memory_mb if spec.disk_mb is None else spec.memory_mb + 2 * SHM_MB + spec.disk_mb


def _tmpfs(size_mb: int, owner: str) -> str:
    """The options of a tmpfs mount of ``size_mb`` MiB (and an inode for each :data:`INODE_BYTES` of it)."""
    inodes = max(1024, size_mb * MiB // INODE_BYTES)
    return f"rw,nosuid,nodev,exec,size={size_mb}m,nr_inodes={inodes},{owner}"


def _died_of_its_memory_limit(name: str, since: int) -> bool:
    """Whether container ``name``, whose stream ended, died of its own memory limit: the engine reports its
    end (``die``) with an out-of-memory kill in it at most :data:`OOM_WINDOW` seconds apart, and no kill from
    outside (``docker kill``, ``stop``, ``rm -f``). An engine that does not say (it is gone, or reports no end
    within :data:`DEATH_WAIT` s) means no: a death that nothing shows came from inside is the
    infrastructure's. Read up to the container's removal, which follows its end, so that an out-of-memory
    report that arrives just after the end still counts."""
    errors = docker_module().errors
    ooms: list[int] = []
    killed, ended = False, None
    try:
        events = client().api.events(since=since, until=int(time.time() + DEATH_WAIT) + 1, decode=True,
                                     filters={"type": "container", "container": name})
    except (errors.DockerException, OSError):
        return False
    try:
        for event in events:
            action, when = event.get("Action") or event.get("status"), int(event["timeNano"])
            if action == "oom":
                ooms.append(when)
            elif action == "kill":
                killed = True
            elif action == "die":
                ended = when
            elif action == "destroy":
                ended = ended or when
                break
    except (errors.DockerException, OSError, KeyError, TypeError, ValueError):
        return False
    finally:
        events.close()
    return ended is not None and not killed and any(abs(ended - oom) <= OOM_WINDOW * 1e9 for oom in ooms)


def _close_attached(stream: Any) -> None:
    """Close an attachment from ``attach_socket``: the file object and the socket under it."""
    for closable in (stream, getattr(stream, "_sock", stream)):
        try:
            closable.close()
        except OSError:
            pass


def _discard(creating: Future[DockerSandbox]) -> None:
    """Remove the container of a creation nobody waits for any more, and close its attached socket (runs in
    the creating thread)."""
    if not creating.cancelled() and creating.exception() is None:
        sandbox = creating.result()
        try:
            _remove(sandbox.id)
        finally:
            sandbox._channel.close()


@functools.cache
def _server_source() -> str:
    return Path(exec_server.__file__).read_text()


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
    """Remove container ``name`` and what it holds, returning once it is gone; one already gone is fine, and
    one Docker is already removing (it stopped, and removes itself) is waited for."""
    errors = docker_module().errors
    deadline = time.monotonic() + REMOVE_WAIT
    try:
        client().api.remove_container(name, force=True)
    except errors.NotFound:
        return
    except errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise SandboxDied(f"cannot remove sandbox {name}: {exc}") from exc
        while time.monotonic() < deadline:
            try:
                client().api.inspect_container(name)
            except errors.NotFound:
                return
            time.sleep(0.05)
        raise SandboxDied(f"sandbox {name} was still being removed after {REMOVE_WAIT:g} s") from exc
    except (errors.DockerException, OSError) as exc:
        raise SandboxDied(f"cannot remove sandbox {name}: {exc}") from exc
