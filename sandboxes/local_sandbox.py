"""The ``local`` backend: sandboxes made of Linux namespaces with bubblewrap, no container engine.

A sandbox is a private host work dir and ``/tmp`` plus limits. Every command is one ``bwrap`` process in
fresh user, pid, ipc, uts, cgroup and network namespaces that sees a read-only ``/usr``, a handful of ``/etc``
files, its own ``/proc`` and ``/dev``, ``/tmp`` and the work dir, as uid 1000 with no capabilities. The
command's pid namespace ends with it, so nothing it started outlives it. ``bwrap``, pid 1 inside, starts with
an empty environment and gives the command only ``PATH``, ``HOME``, ``LANG`` and what the caller passes: no
host variable can be read inside, not even in ``/proc/1/environ``. On the host each sandbox runs under a uid
of its own (``HOST_UID_BASE`` + its id), never root: root mapped into a user namespace could still write
``/proc/sys``. Spawned processes (an environment's services) are uid 1001 inside and run under a second host uid
(``HOST_SERVICE_UID_BASE`` + its id) in the commands' group: they share the work dir's files with the commands,
which cannot signal them (nor see them: each has a pid namespace of its own). Memory and processes are limited by an ``agentgym-<id>`` cgroup (v1 or v2), or by rlimits
where no cgroup is writable. The work dir and ``/tmp`` share one ext4 file system of ``spec.disk_mb`` MiB,
a sparse file loop-mounted on the host for the sandbox's life (:mod:`agentgym.sandboxes.disk`): past it a write fails with ENOSPC, and it
takes at most that on the host's disk (where none can be mounted, a ``disk_mb`` that was set is refused and
the default is dropped with a warning). Not enforced here: CPU share (``spec.cpus``); ``spec.image`` is
ignored (the host's ``/usr`` is the image). Needs root and bubblewrap.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from agentgym.sandboxes import disk
from agentgym.sandboxes.base import (
    HOST_SLACK,
    KILL_GRACE,
    TIMEOUT_EXIT,
    MiB,
    RawResult,
    Sandbox,
    SandboxSpec,
    made_in_thread,
    owner,
    owner_alive,
    timed_argv,
)
from agentgym.sandboxes.errors import (
    SandboxClosed,
    SandboxDied,
    SandboxError,
    SandboxStartError,
    SandboxUnavailable,
)
from agentgym.sandboxes.exec_server import CANNOT_START, Capture
from agentgym.sandboxes.process import SandboxProcess

STATE_DIR = Path(tempfile.gettempdir()) / "agentgym-sandboxes"
"""Holds one ``<id>`` directory per sandbox: ``owner``, ``etc`` (made-up files) and ``disk``, where the file
system in ``disk.img`` is mounted (a plain directory without a disk limit), holding ``work`` (the work dir)
and ``tmp`` (its ``/tmp``)."""
CGROUP_ROOT = Path("/sys/fs/cgroup")
HOST_UID_BASE = 1_800_000_000
"""Sandbox ``<id>`` (6 hex digits) runs its commands on the host as uid and gid ``HOST_UID_BASE + int(id, 16)``."""
HOST_SERVICE_UID_BASE = HOST_UID_BASE + (1 << 24)
"""Sandbox ``<id>`` runs its spawned services on the host as uid ``HOST_SERVICE_UID_BASE + int(id, 16)``, in the
group of its commands."""
SANDBOX_UID = 1000
"""The uid (and gid) of the commands inside."""
SERVICE_UID = 1001
"""The uid of the spawned services inside (their gid is the commands')."""
INSTALL = "apt-get install -y bubblewrap"
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

_HOST_ETC = ("ld.so.cache", "alternatives")
_NETWORK_ETC = ("resolv.conf", "ssl/certs", "ssl/openssl.cnf")
_STOP_WAIT = 10.0
_KILLED = 128 + signal.SIGKILL
_DESTROYED = "destroyed"
"""Written in a sandbox's state dir before its processes are killed, so a command they ran knows why it ended."""
_warned_no_cgroup = False


def _made_up_etc(workdir: str) -> dict[str, str]:
    return {
        "passwd": f"root:x:0:0:root:/root:/usr/sbin/nologin\nagent:x:{SANDBOX_UID}:{SANDBOX_UID}:agent:{workdir}:"
                  "/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        "group": f"root:x:0:\nagent:x:{SANDBOX_UID}:\nnogroup:x:65534:\n",
        "hosts": "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n",
    }


class LocalSandbox(Sandbox):
    """A bubblewrap sandbox: a host work dir, a host uid and cgroups of its own (see the module)."""

    backend = "local"

    def __init__(self, spec: SandboxSpec, sandbox_id: str, cgroups: Sequence[Path]) -> None:
        super().__init__(spec, sandbox_id)
        self._state = STATE_DIR / sandbox_id
        enter = functools.partial(_enter, tuple(str(group / "cgroup.procs") for group in cgroups),
                                  None if cgroups else (spec.memory_mb * MiB, spec.pids))
        group = _host_uid(sandbox_id)
        self._commands = _Launch(functools.partial(enter, group, group), _bwrap_argv(spec, self._state, SANDBOX_UID))
        self._services = _Launch(functools.partial(enter, _host_service_uid(sandbox_id), group),
                                 _bwrap_argv(spec, self._state, SERVICE_UID))

    async def expose(self, port: int) -> str:
        """``127.0.0.1:port``: a sandbox with ``network=True`` shares the host's network."""
        if not 0 < port < 65536:
            raise ValueError(f"not a port: {port}")
        if not self.spec.network:
            raise SandboxError(f"sandbox {self.id} has no network; create it with network=True to expose ports")
        return f"127.0.0.1:{port}"

    async def _exec(self, argv: list[str], *, timeout: float, stdin: bytes | None, env: dict[str, str],
                    cwd: str, limit: int) -> RawResult:
        started = time.monotonic()
        try:
            proc = await self._start(timed_argv(argv, timeout), env, cwd, stdin=stdin is not None)
        except OSError as exc:  # too long a command: the caller's doing, answered as a shell (and docker) would
            reason = f"cannot start the command: {exc.strerror}\n".encode()
            return RawResult(CANNOT_START, b"", reason, False, False)
        io = asyncio.gather(_capture(proc.stdout, limit), _capture(proc.stderr, limit), _feed(proc.stdin, stdin),
                            proc.wait())
        host_deadline = False
        try:
            async with asyncio.timeout(timeout + KILL_GRACE + HOST_SLACK):
                out, err, _, code = await asyncio.shield(io)
        except TimeoutError:
            host_deadline = True
            out, err, _, code = await self._stop(proc, io)
        except BaseException:
            with contextlib.suppress(BaseException):
                await self._stop(proc, io)
            raise
        if self.closed:
            raise SandboxClosed(f"sandbox {self.id} was closed while a command ran")
        if (self._state / _DESTROYED).exists() or not (self._state / "disk" / "work").is_dir():  # not its kill
            raise SandboxDied(f"sandbox {self.id} was destroyed while a command ran (reaped?)")
        exit_code, elapsed = 128 - code if code < 0 else code, time.monotonic() - started
        timed_out = host_deadline or (elapsed >= timeout and (
            exit_code == TIMEOUT_EXIT or (exit_code == _KILLED and elapsed >= timeout + KILL_GRACE)))
        return RawResult(exit_code, bytes(out.data), bytes(err.data), timed_out, out.truncated or err.truncated,
                         elapsed)

    async def _spawn(self, argv: list[str], *, env: dict[str, str], cwd: str) -> SandboxProcess:
        return LocalProcess(await self._start(argv, env, cwd, stdin=True, launch=self._services))

    async def _start(self, argv: list[str], env: dict[str, str], cwd: str, *, stdin: bool,
                     launch: _Launch | None = None) -> asyncio.subprocess.Process:
        """``argv`` started in the sandbox as a command (or as ``launch`` says), with pipes to its stdout and stderr
        (and its stdin if asked). An ``argv`` the kernel refuses as too long raises ``OSError`` (``E2BIG``); any
        other failure :class:`SandboxDied`."""
        if not (self._state / "disk" / "work").is_dir():
            raise SandboxDied(f"the work dir of sandbox {self.id} is gone (reaped?)")
        enter, bwrap = launch or self._commands
        environment = {"PATH": PATH, "HOME": self.spec.workdir, "LANG": "C.UTF-8", **env}
        command = [*bwrap, "--chdir", cwd, "--clearenv",
                   *(arg for item in environment.items() for arg in ("--setenv", *item)), "--", *argv]
        starting = asyncio.ensure_future(asyncio.create_subprocess_exec(  # bwrap is pid 1 inside: no host environment
            *command, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={}, preexec_fn=enter, start_new_session=True))
        try:
            return await asyncio.shield(starting)
        except asyncio.CancelledError:
            # asyncio's own kill of a start cut short takes the outer bwrap only, and then waits for the pipes
            # that the command, left running, holds: kill the namespace once the start is done instead
            starting.add_done_callback(_kill_started)
            raise
        except OSError as exc:
            if exc.errno == errno.E2BIG:
                raise
            raise SandboxDied(f"could not start a command in sandbox {self.id}: {exc}") from exc
        except subprocess.SubprocessError as exc:
            raise SandboxDied(f"could not start a command in sandbox {self.id}: {exc}") from exc

    async def _stop(self, proc: asyncio.subprocess.Process, io: asyncio.Future[list[Any]]) -> list[Any]:
        """Kill the command's pid namespace and collect what the command wrote."""
        _kill_namespace(proc)
        try:
            return await asyncio.wait_for(io, _STOP_WAIT)
        except TimeoutError:
            raise SandboxDied(f"a killed command of sandbox {self.id} did not stop") from None

    async def _close(self) -> None:
        await asyncio.to_thread(_destroy, self.id)


class _Launch(NamedTuple):
    """How a process of a sandbox starts: what its forked child runs before it becomes ``bwrap`` (the host uid it
    takes), and the ``bwrap`` command line (the uid it has inside)."""

    enter: Callable[[], None]
    bwrap: list[str]


class LocalProcess(SandboxProcess):
    """A process spawned in a local sandbox: its own ``bwrap``, whose pid namespace ends with it."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        super().__init__()
        self._proc = proc
        self._stderr_reader = asyncio.ensure_future(self._read_stderr())

    async def read(self) -> bytes:
        assert self._proc.stdout is not None
        chunk = await self._proc.stdout.read(1 << 16)
        if not chunk:
            self._release()
        return chunk

    async def write(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        if self.returncode is not None:
            raise BrokenPipeError(f"the process exited with status {self.returncode}")
        try:
            self._proc.stdin.write(data)
            await self._proc.stdin.drain()
        except ConnectionResetError as exc:
            raise BrokenPipeError(str(exc)) from exc

    async def close_stdin(self) -> None:
        assert self._proc.stdin is not None
        if not self._proc.stdin.is_closing():
            self._proc.stdin.close()

    async def kill(self) -> None:
        _kill_namespace(self._proc)

    async def wait(self, timeout: float) -> int | None:
        status = await super().wait(timeout)
        self._release()
        return status

    @property
    def returncode(self) -> int | None:
        code = self._proc.returncode
        return 128 - code if code is not None and code < 0 else code

    def _release(self) -> None:
        """Close the pipes once the process has exited and its output has been read to the end."""
        assert self._proc.stdout is not None
        if self._proc.returncode is not None and self._proc.stdout.at_eof():
            self._proc._transport.close()  # type: ignore[attr-defined]  # asyncio keeps it private

    async def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        while chunk := await self._proc.stderr.read(1 << 16):
            self._keep_stderr(chunk)


async def create(spec: SandboxSpec) -> LocalSandbox:
    """A new local sandbox for ``spec``. Raises :class:`SandboxUnavailable` without bubblewrap or root. Cancelled
    while it is being made, the sandbox is destroyed as soon as it exists."""
    await asyncio.to_thread(check, spec)
    return await made_in_thread(functools.partial(_make, spec), lambda sandbox: _destroy(sandbox.id))


def live() -> list[str]:
    """The ids of the local sandboxes on this host, whoever created them."""
    if not STATE_DIR.is_dir():
        return []
    return sorted(entry.name for entry in STATE_DIR.iterdir() if entry.is_dir() and not entry.name.startswith("."))


def reap(*, everything: bool = False) -> int:
    """Remove the local sandboxes whose creating process is gone (all of them with ``everything``): kill
    their processes, delete their cgroups and directories. Returns how many were removed."""
    removed = 0
    for sandbox_id in live():
        owner_file = STATE_DIR / sandbox_id / "owner"
        try:
            orphan = everything or not owner_alive(owner_file.read_text())
        except FileNotFoundError:
            orphan = everything  # still being created, or already being removed
        if orphan:
            _destroy(sandbox_id)
            removed += 1
    return removed


def check(spec: SandboxSpec | None = None) -> None:
    """Raise :class:`SandboxUnavailable` (naming the install step) unless sandboxes can be made here for
    ``spec``: any image (this backend runs the host's own programs), mounts that every user may read, a
    ``disk_mb`` that was set only where a file system can be mounted."""
    if spec is not None and spec.workdir_from_image:
        raise SandboxUnavailable("workdir_from_image needs an image: this backend runs the host's own programs; "
                                 "use the docker backend")
    _probe()
    if spec is not None:
        _disk_mb(spec)
        for host in spec.mounts:
            _check_mountable(Path(host))


@functools.cache
def _probe() -> None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(f"bubblewrap is not installed: {INSTALL}")
    if os.geteuid() != 0:
        raise SandboxUnavailable("the local sandbox backend needs root (each sandbox gets a host uid and cgroups"
                                 " of its own); run as root or use the docker backend")
    if not Path("/usr/bin/python3").exists():
        raise SandboxUnavailable("the local sandbox backend needs /usr/bin/python3: apt-get install -y python3")
    probe = subprocess.run(
        [bwrap, "--unshare-all", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), *_root_args(),
         "--", "/usr/bin/true"],
        check=False, capture_output=True, text=True, timeout=30,
        preexec_fn=functools.partial(_enter, (), None, HOST_UID_BASE, HOST_UID_BASE))
    if probe.returncode != 0:
        raise SandboxUnavailable(f"bubblewrap cannot create namespaces here ({probe.stderr.strip()}); {INSTALL} and"
                                 " allow unprivileged user namespaces (sysctl user.max_user_namespaces)")


def _disk_mb(spec: SandboxSpec) -> int | None:
    """MiB of the disk to mount for ``spec``, ``None`` for none (see :func:`agentgym.sandboxes.disk.disk_mb`)."""
    return disk.disk_mb(spec, disk.refusal(), backend="local",
                        instead="no disk limit: their work dir and /tmp can fill the host's disk")


def _check_mountable(path: Path) -> None:
    """Raise :class:`SandboxUnavailable` unless a sandbox's host uid can reach and read ``path``."""
    if not path.is_dir():
        raise SandboxUnavailable(f"mount {path} is not a directory here")
    for step in (*reversed(path.parents), path):
        if not step.stat().st_mode & stat.S_IXOTH:
            raise SandboxUnavailable(f"mount {path} cannot be seen from a local sandbox: {step} is closed to other"
                                     f" users (chmod o+rx {step}, or put the mounted files elsewhere)")


def _kill_namespace(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the first process of a command's pid namespace (the kernel then kills the rest of it), then
    the outer ``bwrap``: killing only the latter would leave the command running. The outer ``bwrap`` is
    stopped first, so that it cannot start the namespace between the look for its children and its kill."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGSTOP)
            _wait_stopped(proc.pid)
            for pid in _children(proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            proc.kill()


def _kill_started(starting: asyncio.Future[asyncio.subprocess.Process]) -> None:
    """Kill the command whose start nobody waits for any more, and close its pipes."""
    if not starting.cancelled() and starting.exception() is None:
        proc = starting.result()
        _kill_namespace(proc)
        proc._transport.close()  # type: ignore[attr-defined]  # asyncio keeps it private


def _wait_stopped(pid: int, timeout: float = 1.0) -> None:
    """Return once ``pid`` is stopped or gone (a signal takes effect when the process next runs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return
        if state in "tTZX":
            return
        time.sleep(0.0005)


def _children(pid: int) -> list[int]:
    """The host pids of ``pid``'s children."""
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat_line = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat_line.rpartition(")")[2].split()[1]) == pid:
                children.append(int(entry))
    return children


def _host_uid(sandbox_id: str) -> int:
    return HOST_UID_BASE + int(sandbox_id, 16)


def _host_service_uid(sandbox_id: str) -> int:
    return HOST_SERVICE_UID_BASE + int(sandbox_id, 16)


def _root_args() -> list[str]:
    """``/usr`` read-only and the top-level links into it (or the directories, on a host without merged /usr)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "sbin"):
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _bwrap_argv(spec: SandboxSpec, state: Path, uid: int) -> list[str]:
    """Everything of a sandbox's ``bwrap`` command line before ``--chdir``, for a process that is ``uid`` inside."""
    args = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--unshare-user", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL", "--uid", str(uid), "--gid", str(SANDBOX_UID),
            "--hostname", "agentgym", *_root_args()]
    if spec.network:
        args.append("--share-net")
    for name in (*_HOST_ETC, *(_NETWORK_ETC if spec.network else ())):
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    for name in _made_up_etc(spec.workdir):
        args += ["--ro-bind", str(state / "etc" / name), f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
             "--bind", str(state / "disk" / "tmp"), "/tmp", "--bind", str(state / "disk" / "work"), spec.workdir]
    for host, inside in spec.mounts.items():
        args += ["--ro-bind", host, inside]
    return [*args, "--remount-ro", "/"]


def _enter(procs: tuple[str, ...], rlimits: tuple[int, int] | None, uid: int, gid: int) -> None:
    """Run in the forked child before it becomes ``bwrap``: join the cgroups (or take rlimits), drop root for
    ``uid`` and ``gid``, and create files that the group may write (commands and services share them)."""
    pid = str(os.getpid()).encode()
    for path in procs:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, pid)
        finally:
            os.close(fd)
    if rlimits is not None:
        memory, pids = rlimits
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_NPROC, (pids, pids))
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    os.umask(0o002)


def _make(spec: SandboxSpec) -> LocalSandbox:
    """Claim an id, write the state dir, mount the disk, create the cgroups."""
    for _ in range(100):
        sandbox_id = secrets.token_hex(3)
        STATE_DIR.mkdir(mode=0o711, exist_ok=True)
        if STATE_DIR.is_symlink() or STATE_DIR.stat().st_uid != os.geteuid():
            raise SandboxStartError(f"{STATE_DIR} is not a directory of this user")
        try:
            (STATE_DIR / sandbox_id).mkdir(mode=0o711)
            break
        except (FileExistsError, FileNotFoundError):  # taken, or the last sandbox just removed STATE_DIR
            continue
    else:
        raise SandboxStartError(f"no free sandbox id in {STATE_DIR}")
    state = STATE_DIR / sandbox_id
    try:
        _write(state / "owner", owner())
        (state / "etc").mkdir(mode=0o755)
        for name, text in _made_up_etc(spec.workdir).items():
            _write(state / "etc" / name, text)
        if (disk_mb := _disk_mb(spec)) is not None:
            disk.mount(state, disk_mb)
        else:
            (state / "disk").mkdir(mode=0o755)
        for private, mode in ((disk.WORK, 0o770), (disk.TMP, 0o1770)):  # the commands' and services' only
            (state / "disk" / private).mkdir()
            os.chown(state / "disk" / private, _host_uid(sandbox_id), _host_uid(sandbox_id))
            (state / "disk" / private).chmod(mode)
        return LocalSandbox(spec, sandbox_id, _make_cgroups(sandbox_id, spec))
    except BaseException as exc:
        _destroy(sandbox_id)
        if isinstance(exc, OSError):
            raise SandboxStartError(f"could not create sandbox {sandbox_id}: {exc}") from exc
        raise


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a reader never sees part of it), readable by everyone."""
    temporary = path.with_name(f".{path.name}.new")
    temporary.write_text(text)
    temporary.chmod(0o644)
    temporary.rename(path)


def _make_cgroups(sandbox_id: str, spec: SandboxSpec) -> list[Path]:
    """The sandbox's limits as cgroups (v2, else v1); ``[]`` with a warning where none can be written."""
    global _warned_no_cgroup
    memory, pids = str(spec.memory_mb * MiB), str(spec.pids)
    name, v2 = f"agentgym-{sandbox_id}", (CGROUP_ROOT / "cgroup.controllers").exists()
    if v2:
        layout = {CGROUP_ROOT / name: {"memory.max": memory, "memory.swap.max": "0", "pids.max": pids}}
    else:
        layout = {CGROUP_ROOT / "memory" / name: {"memory.limit_in_bytes": memory,
                                                  "memory.memsw.limit_in_bytes": memory},
                  CGROUP_ROOT / "pids" / name: {"pids.max": pids}}
    try:
        if v2:
            (CGROUP_ROOT / "cgroup.subtree_control").write_text("+memory +pids")
        for group, limits in layout.items():
            group.mkdir()
            for key, value in limits.items():
                if key in ("memory.swap.max", "memory.memsw.limit_in_bytes") and not (group / key).exists():
                    continue  # no swap accounting on this kernel
                (group / key).write_text(value)
        return list(layout)
    except OSError as exc:
        _remove_cgroups(sandbox_id)
        if not _warned_no_cgroup:
            _warned_no_cgroup = True
            warnings.warn(f"no writable cgroup ({exc}): local sandboxes limit memory per process (RLIMIT_AS) and"
                          " processes per sandbox (RLIMIT_NPROC of its host uid) instead", RuntimeWarning,
                          stacklevel=2)
        return []


def _cgroups(sandbox_id: str) -> list[Path]:
    name = f"agentgym-{sandbox_id}"
    return [group for group in (CGROUP_ROOT / "memory" / name, CGROUP_ROOT / "pids" / name, CGROUP_ROOT / name)
            if group.is_dir()]


def _destroy(sandbox_id: str) -> None:
    """Mark the sandbox destroyed, kill every process of it, then delete its cgroups, unmount its disk, delete
    its state dir and an empty STATE_DIR."""
    with contextlib.suppress(OSError):
        (STATE_DIR / sandbox_id / _DESTROYED).touch()
    try:
        _kill_all(sandbox_id)
        _remove_cgroups(sandbox_id)
        disk.unmount(STATE_DIR / sandbox_id)
        shutil.rmtree(STATE_DIR / sandbox_id, onerror=_unless_gone)
    except OSError as exc:
        raise SandboxError(f"could not remove sandbox {sandbox_id}: {exc}") from exc
    with contextlib.suppress(OSError):
        STATE_DIR.rmdir()


def _unless_gone(function: object, path: str, exc_info: tuple) -> None:
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]


def _kill_all(sandbox_id: str) -> None:
    """SIGKILL the sandbox's processes until none is left (one that forks meanwhile is caught next round)."""
    uids, deadline = {_host_uid(sandbox_id), _host_service_uid(sandbox_id)}, time.monotonic() + _STOP_WAIT
    while pids := _members(sandbox_id, uids):
        if time.monotonic() > deadline:
            raise SandboxError(f"processes {sorted(pids)} of sandbox {sandbox_id} do not die")
        for pid in pids:
            _kill(pid, uids)
        time.sleep(0.01)


def _members(sandbox_id: str, uids: set[int]) -> set[int]:
    """The sandbox's live processes: its cgroups' members, or the host's processes running as its uids."""
    if groups := _cgroups(sandbox_id):
        pids: set[int] = set()
        for group in groups:
            with contextlib.suppress(FileNotFoundError):  # removed meanwhile by another close or reap
                pids.update(map(int, (group / "cgroup.procs").read_text().split()))
        return pids
    return {int(entry) for entry in os.listdir("/proc") if entry.isdigit() and _uid(int(entry)) in uids}


def _uid(pid: int) -> int | None:
    """The real uid of a live (not zombie) process, ``None`` when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return None if fields["State"].split()[0] == "Z" else int(fields["Uid"].split()[0])


def _kill(pid: int, uids: set[int]) -> None:
    """SIGKILL ``pid`` if it is still the sandbox's (a pidfd pins it, its uid proves it is no reused pid)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if _uid(pid) in uids:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass
    finally:
        os.close(pidfd)


def _remove_cgroups(sandbox_id: str) -> None:
    for group in _cgroups(sandbox_id):
        deadline = time.monotonic() + _STOP_WAIT
        while True:
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:  # busy for a moment after its last process died
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)


async def _capture(stream: asyncio.StreamReader, limit: int) -> Capture:
    """Read ``stream`` to its end, keeping the first ``limit`` bytes."""
    capture = Capture(limit)
    while chunk := await stream.read(1 << 16):
        capture.add(chunk)
    return capture


async def _feed(stream: asyncio.StreamWriter | None, data: bytes | None) -> None:
    """Write ``data`` to the command's stdin and close it; a command that does not read it is fine."""
    if stream is None or data is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stream.write(data)
        await stream.drain()
        stream.close()
