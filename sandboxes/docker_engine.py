"""The Docker engine: find one that answers or start ``dockerd`` here (no systemd needed); a shared client."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from agentgym.sandboxes.errors import SandboxUnavailable

if TYPE_CHECKING:
    import docker

INSTALL_ENGINE = "apt-get install -y docker.io"
INSTALL_CLIENT = "pip install 'agentgym[docker]'"
START_TIMEOUT = 30.0
"""Seconds a started ``dockerd`` has to answer."""
STOP_TIMEOUT = 20.0
"""Seconds a stopping ``dockerd`` has before it is killed."""
API_TIMEOUT = 60
"""Seconds of the client's ordinary API calls (builds and imports have none)."""
POOL_SIZE = 64
"""Connections the shared client keeps open (each running command holds one)."""
PROBE_TIMEOUT = 5.0
"""Seconds a probe of whether the engine answers may take."""

_client: docker.DockerClient | None = None
_client_lock = threading.Lock()


USERS = Path(tempfile.gettempdir()) / "agentgym-docker-engine"
"""Every process using an engine through :func:`ensure_engine` holds a shared lock on this file; it holds the
pid of the ``dockerd`` agentgym started, if any (empty otherwise). The last user to leave stops that one."""


@dataclass
class EngineHandle:
    """A Docker engine that answers, used until :meth:`stop`: a ``dockerd`` that agentgym started is stopped by
    whichever of its users leaves last, the starter or not (another command or test run may still be using it
    when its starter ends); one found running is never stopped."""

    process: subprocess.Popen[bytes] | None = None
    log_dir: Path | None = None
    users: int | None = None
    """This handle's descriptor of :data:`USERS`, under a shared lock while it uses the engine."""
    started: bool = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.process is not None

    def stop(self) -> None:
        """Leave the engine: the last user stops an agentgym-started ``dockerd`` (killed after
        :data:`STOP_TIMEOUT`) and drops this process's client of it; any other user only leaves."""
        if self.users is not None:
            users, self.users = self.users, None
            try:
                if _try_lock(users, fcntl.LOCK_EX):
                    pid = _started_pid(users)
                    if pid is not None:
                        _drop_client()
                        _end(self.process, pid)
                        os.ftruncate(users, 0)
                elif self.process is not None:  # handed over: reaped here once the last user stops it
                    threading.Thread(target=self.process.wait, name="dockerd-reaper", daemon=True).start()
            finally:
                os.close(users)
        self.process = None
        if self.log_dir is not None:
            shutil.rmtree(self.log_dir, ignore_errors=True)
            self.log_dir = None


    def keep(self) -> None:
        """Leave the engine, and a ``dockerd`` this handle started running for good: no user stops that one
        (``agentgym sandbox build``). One found running is left to whoever started it."""
        if self.users is not None:
            users, self.users = self.users, None
            if self.process is not None:
                os.ftruncate(users, 0)
            os.close(users)
        self.process = None


def _join_users() -> int:
    """A descriptor of :data:`USERS` under a shared lock (the file made for every user where it is missing)."""
    users = os.open(USERS, os.O_RDWR | os.O_CREAT, 0o666)
    with contextlib.suppress(OSError):
        os.fchmod(users, 0o666)
    fcntl.flock(users, fcntl.LOCK_SH)
    return users


def _try_lock(users: int, kind: int) -> bool:
    try:
        fcntl.flock(users, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _started_pid(users: int) -> int | None:
    """The pid of the ``dockerd`` agentgym started, as :data:`USERS` holds it, where that process is still one."""
    text = os.pread(users, 32, 0).decode(errors="replace").strip()
    if not text.isdigit():
        return None
    try:
        comm = Path(f"/proc/{text}/comm").read_text().strip()
    except OSError:
        return None
    return int(text) if comm == "dockerd" else None


def _end(process: subprocess.Popen[bytes] | None, pid: int) -> None:
    """Terminate ``dockerd`` (our child ``process``, or one another user started), killed after
    :data:`STOP_TIMEOUT`, and wait until it is gone."""
    if process is not None and process.pid == pid:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    while _alive(pid):
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (an exited one its parent has not reaped yet does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def ensure_engine() -> EngineHandle:
    """A handle on a Docker engine that answers, starting ``dockerd`` in the background when none does (as
    root). Raises :class:`SandboxUnavailable` naming the install step when there is no engine to start."""
    docker = docker_module()
    users = _join_users()
    if _answers(docker):
        return EngineHandle(users=users)
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        os.close(users)
        raise SandboxUnavailable(f"no Docker engine answers and dockerd is not installed: {INSTALL_ENGINE}")
    if os.geteuid() != 0:
        os.close(users)
        raise SandboxUnavailable("no Docker engine answers; start one (dockerd needs root), or run "
                                 "`agentgym sandbox build` as root, which starts it")
    log_dir = Path(tempfile.mkdtemp(prefix="agentgym-dockerd-"))
    log = log_dir / "dockerd.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([dockerd], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    os.ftruncate(users, 0)
    os.pwrite(users, str(process.pid).encode(), 0)
    handle = EngineHandle(process, log_dir, users)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and process.poll() is None:
        if _answers(docker):
            return handle
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-800:]
    handle.stop()
    raise SandboxUnavailable(f"dockerd did not answer within {START_TIMEOUT:g} s; its log ends with:\n{tail}")


def client() -> docker.DockerClient:
    """The shared Docker client; raises :class:`SandboxUnavailable` when no engine answers."""
    global _client
    docker = docker_module()
    with _client_lock:
        if _client is None:
            try:
                _client = _from_env(docker, timeout=API_TIMEOUT, max_pool_size=POOL_SIZE)
            except (docker.errors.DockerException, OSError) as exc:
                raise SandboxUnavailable(f"no Docker engine answers ({exc}); start dockerd, or run "
                                         "`agentgym sandbox build`, which starts it") from exc
        return _client


def ping(docker_client: docker.DockerClient) -> None:
    """Ping the engine ``docker_client`` speaks to; raises ``docker.errors.DockerException`` or
    :class:`OSError` when it does not answer."""
    adapter = docker_client.api.get_adapter(docker_client.api.base_url)
    _check_socket(getattr(adapter, "socket_path", None))
    docker_client.ping()


def engine_mount_refusal() -> str | None:
    """Why a folder mounted on this host would not be seen by the engine's containers (``None`` when it would): the
    engine must listen on a unix socket of this host and run in this process's mount namespace. The process at the
    socket's other end is asked for by the socket's peer credentials."""
    address = _docker_host()
    if not address.startswith("http+unix://"):
        return f"the Docker engine at {address} is not on this host"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(PROBE_TIMEOUT)
            probe.connect(address.removeprefix("http+unix://"))
            pid, _, _ = struct.unpack("3i", probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        same = pid > 0 and os.readlink(f"/proc/{pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt")
    except OSError as exc:
        return f"cannot tell whether the Docker engine sees this host's mounts: {exc}"
    return None if same else "the Docker engine runs in another mount namespace, which does not see this host's mounts"


def _docker_host() -> str:
    """The engine's address (``DOCKER_HOST`` or the default), as docker-py parses it."""
    return str(docker_module().utils.parse_host(os.environ.get("DOCKER_HOST")))


def _drop_client() -> None:
    """Close the shared client: the engine it spoke to is going away, and the next :func:`client` finds out
    whether another answers."""
    global _client
    with _client_lock:
        stale, _client = _client, None
    if stale is not None:
        stale.close()


def engine_answers() -> bool:
    """Whether a Docker engine answers here (``False`` also without docker-py)."""
    try:
        return _answers(docker_module())
    except SandboxUnavailable:
        return False


def _answers(docker: ModuleType) -> bool:
    try:
        probe = _from_env(docker, timeout=PROBE_TIMEOUT)
        try:
            ping(probe)
        finally:
            probe.close()
    except (docker.errors.DockerException, OSError):
        return False
    return True


def _from_env(docker: ModuleType, **options: object) -> docker.DockerClient:
    """``docker.from_env(**options)``, which asks the engine its API version at once, after checking that the
    engine's unix socket (``DOCKER_HOST`` or the default) accepts a connection."""
    address = docker.utils.parse_host(os.environ.get("DOCKER_HOST"))
    _check_socket(address.removeprefix("http+unix://") if address.startswith("http+unix://") else None)
    return docker.from_env(**options)


def _check_socket(path: str | None) -> None:
    """Raise :class:`ConnectionError` unless the unix socket ``path`` (None: not a unix socket) accepts a
    connection. docker-py leaves its own socket unclosed when such a connect fails (a ResourceWarning,
    docker/docker-py#3356), so a refusing engine is found out here first, on a socket that is closed again."""
    if path is None:
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(PROBE_TIMEOUT)
        try:
            probe.connect(path)
        except OSError as exc:
            raise ConnectionError(f"cannot connect to the Docker engine at {path}: {exc}") from exc


def docker_module() -> ModuleType:
    """The ``docker`` package, imported only when a docker sandbox is wanted."""
    try:
        import docker
    except ImportError as exc:
        raise SandboxUnavailable(f"the Docker client library is not installed: {INSTALL_CLIENT}") from exc
    return docker
