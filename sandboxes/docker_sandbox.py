"""The ``docker`` backend: one locked-down container per sandbox, commands through a server inside it.

A container runs :mod:`agentgym.sandboxes.exec_server` under Docker's init with a read-only root,
``no-new-privileges``, memory (swap included), CPU and process limits, and no network unless the spec asks.
The server runs as root in the container with no capability but those it needs to start each command as
uid 1000 (``SETUID``, ``SETGID``) and to stop what a command left behind (``KILL``); commands run as uid
1000 with none, so nothing they do (``kill -9 -1`` included) reaches the server or the init. Spawned processes
(an environment's services, such as an MCP server) run as uid 1001 in the commands' group: they share the work
dir's files with the commands (both create files the group may write) but no command can signal them. The host
keeps the container's stdin and stdout attached and sends commands down that one stream, so a command costs a
fork inside, not a ``docker exec``; images need ``python3`` (files travel through it too). When the attachment
ends (the sandbox is closed, or the process that made it dies) the server exits and Docker removes the
container, so a crashed run leaves no container behind; ``reap`` removes what remains when that could not
happen (an engine that was down, another host's run) and the disks of dead owners.

The work dir and ``/tmp`` are on a disk of ``spec.disk_mb`` MiB of the host's (:mod:`agentgym.sandboxes.disk`:
a sparse ext4 image loop-mounted on the host, its ``work`` and ``tmp`` folders bound into the container), so
the container's memory limit is ``spec.memory_mb``: everything inside takes from it, its processes, ``/dev/shm``
and System V shared memory (each at most an eighth of it, up to :data:`SHM_MB`), and none of it goes to the
disk, where a write past ``disk_mb`` fails with ENOSPC. What is written to the disk passes through the page
cache, charged to the container but reclaimed as it reaches the disk. Where no disk can be mounted (not root,
no loop devices, an engine that does not see this host's mounts), a ``disk_mb`` that was set is refused and
the default is dropped with a warning; the work dir and ``/tmp`` are then tmpfs mounts that take from
``spec.memory_mb``, as with ``disk_mb=None``: filling them can get the sandbox killed for its memory limit.

When memory runs out, the kernel kills a command (each is its first pick), not the server. A container that
stops under a sandbox raises :class:`SandboxDied`, or :class:`SandboxKilledFromInside` when the kernel's log
shows that its own memory limit killed its init or its server (:mod:`agentgym.sandboxes.oom_kills`): a command
can lower its pick to the server's and make the server the largest process, or memory can be held where no
process owns it (shared memory, a disk in memory). Where the log cannot be read (not root), every death is the
infrastructure's. gVisor's ``runsc`` is used when the engine lists it (its kernel keeps no such order between
processes, and its deaths are the infrastructure's: the host's log does not name its processes);
``AGENTGYM_DOCKER_RUNTIME`` names another runtime (``runc`` forces the default).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import functools
import hashlib
import itertools
import json
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from agentgym.sandboxes import disk, exec_server
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
from agentgym.sandboxes.docker_engine import client, docker_module, engine_mount_refusal, ping
from agentgym.sandboxes.errors import (
    SandboxDied,
    SandboxError,
    SandboxKilledFromInside,
    SandboxStartError,
    SandboxUnavailable,
)
from agentgym.sandboxes.images import CACHE, image_tag, is_defined
from agentgym.sandboxes.oom_kills import memcg_oom_kills
from agentgym.sandboxes.process import SandboxProcess

AGENT_USER = "1000:1000"
"""The user every command runs as."""
SERVICE_USER = "1001:1000"
"""The user every spawned process (an environment's service) runs as: another uid, the commands' group."""
SERVER_USER = "0:0"
"""The user the container (its init and the exec server) runs as: not one the commands can signal."""
SERVER_CAPS = ["SETUID", "SETGID", "KILL"]
"""The server's only capabilities: start a command as :data:`AGENT_USER`, kill what it leaves behind."""
RUNTIME_ENV = "AGENTGYM_DOCKER_RUNTIME"
"""Names the container runtime to use (``runc``, ``runsc``, ...) instead of the automatic choice."""
STATE_DIR = Path(tempfile.gettempdir()) / "agentgym-docker"
"""Holds one folder per sandbox with a disk, named as its container: ``owner`` (:func:`owner` of its maker),
``disk.img`` and ``disk``, where that is mounted (see :mod:`agentgym.sandboxes.disk`)."""
WORKDIR_CACHE = CACHE / "workdirs"
"""The files of images whose sandboxes start with them in the work dir (``workdir_from_image``): one tar per image
and path, named by the image's id, so that a rebuilt image is read again."""
TMP_MB = 64
"""Without a disk: the most of the memory that ``/tmp``'s tmpfs may hold."""
SHM_MB = 64
"""The largest ``/dev/shm`` (a tmpfs) of a sandbox, and the most System V shared memory it may hold: each at most
an eighth of ``spec.memory_mb``, from which both take (they outlive the processes that filled them)."""
PAGE = 4096
"""Bytes of a memory page, the unit of ``kernel.shmall``."""
INODE_BYTES = 16 * 1024
"""Bytes of a tmpfs's size per inode it may hold (ext4's default ratio): empty files cost memory too."""
OWN_PROCESSES = ("docker-init", exec_server.NAME)
"""The names of the container's own processes (its init, the exec server), which run as root: the kernel killing
one of them for the container's memory limit kills the container."""
KILLED = 128 + 9
"""The exit status of ``timeout`` when the command needed the forced stop (it dies with its group)."""
SERVER_ENV = "AGENTGYM_EXEC_SERVER"
"""Carries the exec server's source into the container; the server takes it out of its environment."""
SERVER = ["python3", "-I", "-c", f"exec(__import__('os').environ.pop('{SERVER_ENV}'))", AGENT_USER]
"""The container's command, short enough to read in ``ps``; its argument is the user commands run as."""
REMOVE_WAIT = 30.0
"""Seconds to wait for a container that Docker is already removing."""
_KILL = 'for i in $(seq 100); do [ -s "$0" ] && exec kill -KILL "$(cat "$0")"; sleep 0.05; done'
"""Kills the spawned process whose pid file is ``$0``, waiting for a process just started to write it (run as
:data:`SERVICE_USER`, the only user that may)."""
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
        seconds = reply.get("seconds")
        return RawResult(exit_code, stdout, stderr, timed_out, bool(reply.get("truncated")),
                         float(seconds) if isinstance(seconds, int | float) else None)

    async def _close(self) -> None:
        self._channel.closing()
        try:
            await _blocking(_remove_all, self.id)
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
                await _blocking(_run_as_service, self._sandbox.id, ["sh", "-c", _KILL, self._pidfile])

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
    """Create and start a ``docker exec`` of ``argv`` as :data:`SERVICE_USER` with its stdin attached; its id and
    socket."""
    errors = docker_module().errors
    api = client().api
    try:
        exec_id = api.exec_create(container, argv, stdin=True, stdout=True, stderr=True, tty=False,
                                  environment={SERVER_ENV: "", **env}, workdir=cwd, user=SERVICE_USER)["Id"]
        return exec_id, api.exec_start(exec_id, socket=True)
    except (errors.DockerException, OSError) as exc:
        raise SandboxDied(f"could not start a process in sandbox {container}: {exc}") from exc


def _run_as_service(container: str, argv: list[str]) -> None:
    """Run ``argv`` to its end by ``docker exec`` as :data:`SERVICE_USER`."""
    errors = docker_module().errors
    api = client().api
    try:
        api.exec_start(api.exec_create(container, argv, environment={SERVER_ENV: ""}, user=SERVICE_USER)["Id"])
    except (errors.DockerException, OSError) as exc:
        raise SandboxDied(f"could not run {argv[0]} in sandbox {container}: {exc}") from exc


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
        sandbox = await asyncio.wrap_future(creating)
    except asyncio.CancelledError:
        creating.add_done_callback(_discard)
        raise
    if spec.workdir_from_image:
        try:
            await _fill_workdir(sandbox)
        except BaseException:
            await sandbox.close()
            raise
    return sandbox


async def _fill_workdir(sandbox: DockerSandbox) -> None:
    """Copy the files the image holds at the work dir's path into the work dir, as the commands' user."""
    files = await _blocking(_image_files, _image(sandbox.spec.image), sandbox.spec.workdir)
    result = await sandbox.exec(["tar", "-x", "--strip-components=1", "-f", "-"], timeout=600, stdin=files)
    if not result.ok:
        raise SandboxStartError(f"cannot copy {sandbox.spec.image}'s {sandbox.spec.workdir} into sandbox "
                                f"{sandbox.id}: {result.stderr[-300:]}")


def _image_files(image: str, path: str) -> bytes:
    """A tar of what ``image`` holds at ``path`` (its members under the folder's own name), read once per image
    and path and kept in :data:`WORKDIR_CACHE`."""
    docker = client()
    image_id = docker.images.get(image).id.removeprefix("sha256:")
    cached = WORKDIR_CACHE / f"{image_id[:32]}-{hashlib.sha256(path.encode()).hexdigest()[:12]}.tar"
    if cached.is_file():
        return cached.read_bytes()
    container = docker.api.create_container(image, "true", network_disabled=True,
                                            labels={LABEL: "1", OWNER_LABEL: owner()})
    try:
        stream, _ = docker.api.get_archive(container["Id"], path)
        data = b"".join(stream)
    except docker_module().errors.NotFound as exc:
        raise SandboxStartError(f"image {image} holds nothing at {path}, the work dir it should start with") from exc
    finally:
        docker.api.remove_container(container["Id"], force=True)
    WORKDIR_CACHE.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{uuid.uuid4().hex[:8]}.partial")
    partial.write_bytes(data)
    partial.replace(cached)
    return data


def check(spec: SandboxSpec | None = None) -> None:
    """Raise :class:`SandboxUnavailable` (naming the step to take) unless an engine answers, ``spec``'s image is
    present and its ``disk_mb``, if set, can be mounted."""
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
        _disk_mb(spec)


def live() -> list[str]:
    """The ids of agentgym's docker sandboxes present on the engine, whoever made them."""
    return [c["Names"][0].lstrip("/") for c in _labelled()]


def reap(*, everything: bool = False) -> int:
    """Remove the containers and disks of dead owners (or all of agentgym's with ``everything``); returns how many
    sandboxes that was. Without an engine, only disks are left to remove."""
    containers = {container["Names"][0].lstrip("/") for container in _labelled()
                  if everything or not owner_alive(container["Labels"].get(OWNER_LABEL, ""))}
    for name in containers:
        _remove(name)
    disks = {name for name in _disks() if everything or _disk_orphaned(name)}
    for name in disks - containers:
        with contextlib.suppress(SandboxUnavailable):
            _remove(name)  # a container whose engine went away for a while
    for name in disks:
        _remove_disk(name)
    return len(containers | disks)


async def _blocking(function: Callable[..., _T], *args: Any) -> _T:
    return await asyncio.get_running_loop().run_in_executor(_THREADS, functools.partial(function, *args))


def _create(spec: SandboxSpec) -> DockerSandbox:
    """Mount the disk, then make and start the container; what was made is removed when a step fails."""
    name = f"agentgym-{uuid.uuid4().hex[:12]}"
    binds = {host: {"bind": inside, "mode": "ro"} for host, inside in spec.mounts.items()}
    tmpfs: dict[str, str] = {}
    if (size_mb := _disk_mb(spec)) is None:
        work_mb, tmp_mb = memory_disk_sizes(spec)
        tmpfs = {spec.workdir: _tmpfs(work_mb, "uid=1000,gid=1000,mode=0775"), "/tmp": _tmpfs(tmp_mb, "mode=1777")}
    else:
        try:
            folder = _make_disk(name, size_mb)
        except OSError as exc:
            _remove_disk(name)
            raise SandboxStartError(f"cannot make the disk of sandbox {name}: {exc}") from exc
        binds |= {str(folder / disk.WORK): {"bind": spec.workdir, "mode": "rw"},
                  str(folder / disk.TMP): {"bind": "/tmp", "mode": "rw"}}
    try:
        return _start(spec, name, binds, tmpfs)
    except BaseException:
        _remove_disk(name)
        raise


def _start(spec: SandboxSpec, name: str, binds: dict[str, dict[str, str]], tmpfs: dict[str, str]) -> DockerSandbox:
    """Create and start container ``name`` with the work dir and ``/tmp`` from ``binds`` or ``tmpfs``."""
    docker = client()
    errors = docker_module().errors
    image = _image(spec.image)
    memory, shm_mb = f"{spec.memory_mb}m", shm_size(spec)
    host = docker.api.create_host_config(
        init=True, auto_remove=True, runtime=_runtime(), network_mode="bridge" if spec.network else "none",
        mem_limit=memory, memswap_limit=memory, nano_cpus=int(spec.cpus * 1e9), pids_limit=spec.pids,
        read_only=True, cap_drop=["ALL"], cap_add=SERVER_CAPS, security_opt=["no-new-privileges"],
        tmpfs=tmpfs, binds=binds, shm_size=f"{shm_mb}m",
        sysctls={"kernel.shmmax": str(shm_mb * MiB), "kernel.shmall": str(shm_mb * MiB // PAGE)},
        log_config={"type": "none", "config": {}})
    try:
        container = docker.api.create_container(
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
    died_inside = functools.partial(_died_of_its_memory_limit, container["Id"])
    return DockerSandbox(spec, name, _Channel(stream, name, max_frame=largest + 64 * 1024,
                                              died_inside=died_inside))


def shm_size(spec: SandboxSpec) -> int:
    """MiB of ``/dev/shm``, and the most System V shared memory: an eighth of ``spec.memory_mb``, at most
    :data:`SHM_MB`."""
    return min(SHM_MB, spec.memory_mb // 8)


def memory_disk_sizes(spec: SandboxSpec) -> tuple[int, int]:
    """MiB of the work dir's and of ``/tmp``'s tmpfs in a sandbox without a disk: each as big as its memory limit
    allows (``/tmp`` at most :data:`TMP_MB`)."""
    return spec.memory_mb, min(TMP_MB, spec.memory_mb)


def _tmpfs(size_mb: int, owner: str) -> str:
    """The options of a tmpfs mount of ``size_mb`` MiB (and an inode for each :data:`INODE_BYTES` of it)."""
    inodes = max(1024, size_mb * MiB // INODE_BYTES)
    return f"rw,nosuid,nodev,exec,size={size_mb}m,nr_inodes={inodes},{owner}"


def _disk_mb(spec: SandboxSpec) -> int | None:
    """MiB of the disk to mount for ``spec``, ``None`` for none (see :func:`agentgym.sandboxes.disk.disk_mb`)."""
    return disk.disk_mb(spec, disk.refusal() or engine_mount_refusal(), backend="docker",
                        instead="their work dir and /tmp are in memory, taking from memory_mb")


def _make_disk(name: str, size_mb: int) -> Path:
    """Claim ``STATE_DIR/name`` (its owner written first) and mount a disk of ``size_mb`` MiB there; the mounted
    folder, whose ``work`` belongs to the commands' user and group and whose ``tmp`` is everyone's."""
    state = STATE_DIR / name
    for _ in range(10):
        STATE_DIR.mkdir(mode=0o700, exist_ok=True)
        if STATE_DIR.is_symlink() or STATE_DIR.stat().st_uid != os.geteuid():
            raise OSError(f"{STATE_DIR} is not a directory of this user")
        try:
            state.mkdir(mode=0o700)
            break
        except FileNotFoundError:  # the last sandbox just removed STATE_DIR
            continue
    (state / ".owner").write_text(owner())
    (state / ".owner").rename(state / "owner")  # whole, or not there: reap never reads half of it
    disk.mount(state, size_mb)
    work, tmp = state / "disk" / disk.WORK, state / "disk" / disk.TMP
    work.mkdir()
    os.chown(work, *exec_server.parse_user(AGENT_USER))
    work.chmod(0o775)  # the services write there too, as the commands' group
    tmp.mkdir()
    tmp.chmod(0o1777)
    return state / "disk"


def _disks() -> list[str]:
    """The names of the sandboxes whose disk folders are on this host, whoever made them."""
    if not STATE_DIR.is_dir():
        return []
    return [entry.name for entry in STATE_DIR.iterdir() if entry.is_dir()]


def _disk_orphaned(name: str) -> bool:
    """Whether the process that made sandbox ``name``'s disk is gone (one still being made is not)."""
    try:
        return not owner_alive((STATE_DIR / name / "owner").read_text())
    except FileNotFoundError:
        return False


def _remove_disk(name: str) -> None:
    """Unmount sandbox ``name``'s disk and delete its folder (and an empty :data:`STATE_DIR`); none is fine."""
    state = STATE_DIR / name
    try:
        disk.unmount(state)
        shutil.rmtree(state, ignore_errors=False, onerror=_unless_gone)
    except OSError as exc:
        raise SandboxError(f"cannot remove the disk of sandbox {name}: {exc}") from exc
    with contextlib.suppress(OSError):
        STATE_DIR.rmdir()


def _unless_gone(function: object, path: str, exc_info: tuple[Any, ...]) -> None:
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]


def _remove_all(name: str) -> None:
    """Remove container ``name``, then its disk."""
    try:
        _remove(name)
    finally:
        _remove_disk(name)


def _died_of_its_memory_limit(container_id: str) -> bool:
    """Whether the container, whose stream ended, died of its own memory limit: the kernel's log says that the
    limit of its memory cgroup killed its init or its exec server (root processes, which no command can
    signal). An unreadable log means no: a death that nothing shows came from inside is the infrastructure's."""
    kills = memcg_oom_kills(container_id)
    return kills is not None and any(kill.uid == 0 and kill.task in OWN_PROCESSES for kill in kills)


def _close_attached(stream: Any) -> None:
    """Close an attachment from ``attach_socket``: the file object and the socket under it."""
    for closable in (stream, getattr(stream, "_sock", stream)):
        try:
            closable.close()
        except OSError:
            pass


def _discard(creating: Future[DockerSandbox]) -> None:
    """Remove the container and disk of a creation nobody waits for any more, and close its attached socket (runs
    in the creating thread)."""
    if not creating.cancelled() and creating.exception() is None:
        sandbox = creating.result()
        try:
            _remove_all(sandbox.id)
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
