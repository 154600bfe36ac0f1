"""What only the local (bubblewrap) backend must show: how little of the host a sandbox sees, who it runs as,
and that nothing it starts outlives :meth:`close`. The shared isolation tests are in test_isolation.py."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import textwrap
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from agentgym.sandboxes import (
    Sandbox,
    SandboxClosed,
    SandboxDied,
    SandboxError,
    SandboxUnavailable,
    disk,
    local_sandbox,
    reap,
)
from agentgym.sandboxes.base import MiB
from tests.sandboxes.conftest import mounts_under, run
from tests.sandboxes.test_isolation import sandbox_of_a_killed_process
from tests.waiting import PATIENCE

LOOK = textwrap.dedent("""
    import json, os, sys
    print(json.dumps({"exists": [p for p in sys.argv[1:] if os.path.lexists(p)], "root": sorted(os.listdir("/")),
                      "etc": sorted(os.listdir("/etc")), "tmp": os.listdir("/tmp"),
                      "users": [line.split(":")[0] for line in open("/etc/passwd")]}))
""")
WRITE = textwrap.dedent("""
    import sys
    for path in sys.argv[1:]:
        try:
            with open(path, "a") as f:
                f.write("x")
            print("wrote", path)
        except OSError as e:
            print("refused", path, type(e).__name__)
""")


@pytest.fixture
def backend() -> str:
    """Only the local backend (overrides the parametrized fixture of conftest.py)."""
    try:
        local_sandbox.check()
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    return "local"


def sleeping(marker: str) -> list[psutil.Process]:
    """The live (not zombie) host processes running ``sleep <marker>``."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        if process.info["cmdline"] == ["sleep", marker] and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


def mounts_of(sandbox_id: str) -> list[str]:
    """The host's mounts and loop devices that belong to the sandbox."""
    return mounts_under(local_sandbox.STATE_DIR / sandbox_id)


def host_disk_use(sandbox_id: str) -> int:
    """Bytes that the sandbox's state takes on the host's file system (what is mounted inside it not counted)."""
    state = local_sandbox.STATE_DIR / sandbox_id
    device = state.stat().st_dev
    return sum(path.lstat().st_blocks * 512 for path in (state, *state.rglob("*")) if path.lstat().st_dev == device)


async def until(condition: Callable[[], object], seconds: float = PATIENCE) -> None:
    """Poll ``condition`` (run in a thread) until it is true; fail after ``seconds``."""
    for _ in range(int(seconds / 0.1)):
        if await asyncio.to_thread(condition):
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"{condition} never became true")


def test_the_hosts_directories_and_the_repository_are_out_of_sight(sandbox_of, tmp_path):
    on_host_tmp = tmp_path / f"host-{uuid.uuid4().hex}"
    on_host_tmp.write_text("host")
    hidden = ["/root", "/home", "/opt", "/srv", "/var", "/mnt", "/media", "/boot", "/run", "/sys", "/work/main",
              str(on_host_tmp), str(local_sandbox.STATE_DIR), str(Path(__file__).resolve())]
    sandbox = sandbox_of()
    seen = json.loads(run(sandbox.exec(["python3", "-c", LOOK, *hidden], timeout=30)).stdout)
    assert seen["exists"] == []
    assert set(seen["root"]) <= {"bin", "dev", "etc", "lib", "lib64", "proc", "sbin", "tmp", "usr", "work"}
    assert set(seen["etc"]) <= {"alternatives", "group", "hosts", "ld.so.cache", "nsswitch.conf", "passwd"}
    assert seen["tmp"] == [] and seen["users"] == ["root", "agent", "nobody"]


def test_runs_as_uid_1000_without_capabilities_and_not_as_root_on_the_host(sandbox_of):
    sandbox = sandbox_of()
    result = run(sandbox.exec("id -u; id -g; grep Cap /proc/self/status", timeout=10))
    lines = result.stdout.split("\n")
    assert lines[:2] == ["1000", "1000"]
    caps = dict(line.split(":") for line in lines[2:] if line)
    assert set(caps) >= {"CapEff", "CapPrm", "CapBnd"} and all(int(value, 16) == 0 for value in caps.values())

    marker = str(700 + os.getpid() % 97)

    async def on_the_host() -> list[int]:
        command = asyncio.ensure_future(sandbox.exec(f"sleep {marker}", timeout=30))
        await until(lambda: sleeping(marker))
        uids = [process.uids().real for process in sleeping(marker)]
        command.cancel()
        with pytest.raises(asyncio.CancelledError):
            await command
        return uids

    uids = run(on_the_host())
    assert uids and 0 not in uids
    assert not sleeping(marker)


def test_nothing_outside_the_work_dir_and_tmp_is_writable(sandbox_of):
    sandbox = sandbox_of()
    name = f"evil-{uuid.uuid4().hex}"
    targets = [f"/{name}", f"/usr/{name}", f"/usr/bin/{name}", f"/bin/{name}", f"/etc/{name}", "/etc/passwd",
               f"/dev/{name}", f"/proc/{name}", "/proc/sys/kernel/hostname", "/proc/sys/vm/drop_caches"]
    result = run(sandbox.exec(["python3", "-c", WRITE, *targets, "/work/ok.txt", "/tmp/ok.txt"], timeout=30))
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["refused"] * len(targets) + ["wrote", "wrote"], lines
    assert not any(Path(target).exists() for target in targets if name in target)
    assert run(sandbox.exec("cat /work/ok.txt /tmp/ok.txt", timeout=10)).stdout == "xx"  # both persist


def test_two_sandboxes_do_not_see_each_others_files(sandbox_of):
    first, second = sandbox_of(), sandbox_of()
    name = f"mine-{uuid.uuid4().hex}"
    run(first.write_file(f"{name}.txt", "first's"))
    run(first.exec(f"echo first > /tmp/{name}.tmp", timeout=10))
    with pytest.raises(FileNotFoundError):
        run(second.read_file(f"{name}.txt"))
    found = run(second.exec(f"find / -path /proc -prune -o -name '{name}*' -print 2>/dev/null; ls /tmp", timeout=60))
    assert found.stdout == ""
    assert run(first.read_file(f"{name}.txt")) == "first's"


def test_expose_reaches_a_server_inside_a_networked_sandbox(sandbox_of):
    with pytest.raises(SandboxError, match="no network"):
        run(sandbox_of().expose(8000))
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    sandbox = sandbox_of(network=True)
    page = f"served from inside {uuid.uuid4().hex}"
    run(sandbox.write_file("site/index.html", page))

    async def fetch() -> str:
        server = asyncio.ensure_future(sandbox.exec(["python3", "-m", "http.server", str(port), "--bind",
                                                     "127.0.0.1"], timeout=60, cwd="site"))
        address = await sandbox.expose(port)
        body: list[str] = []

        def get() -> bool:
            try:
                with urllib.request.urlopen(f"http://{address}/index.html", timeout=2) as response:
                    body.append(response.read().decode())
                return True
            except OSError:
                return False

        await until(get)
        await sandbox.close()
        with pytest.raises(SandboxClosed):
            await server
        return body[0]

    assert run(fetch()) == page


def test_close_kills_a_process_that_escaped_with_setsid(sandbox_of):
    sandbox = sandbox_of()
    marker = str(800 + os.getpid() % 97)

    _close_kills_escapees(sandbox, f"setsid sleep {marker} & (setsid sleep {marker} &); sleep 300", marker, 2)


def test_a_command_killed_with_its_sandbox_raises_sandbox_died_not_exit_137(sandbox_of):
    """A sandbox destroyed under a running command (reaped, or its owner's cleanup) is an infrastructure
    failure: the agent must not read the SIGKILL as its command's exit status."""
    sandbox = sandbox_of()
    marker = str(900 + os.getpid() % 97)

    async def destroy_midway() -> None:
        command = asyncio.create_task(sandbox.exec(f"sleep {marker}", timeout=60))
        await until(lambda: sleeping(marker))
        await asyncio.to_thread(local_sandbox._destroy, sandbox.id)
        with pytest.raises(SandboxDied, match="destroyed"):
            await command

    run(destroy_midway())


def test_reap_removes_the_sandbox_of_a_killed_process(backend):
    orphan = sandbox_of_a_killed_process(backend)
    assert orphan in local_sandbox.live() and mounts_of(orphan)
    assert reap((backend,)) >= 1
    assert orphan not in local_sandbox.live() and not mounts_of(orphan)


def test_writing_past_disk_mb_fails_inside_with_enospc_and_the_sandbox_lives_on(sandbox_of):
    sandbox = sandbox_of(disk_mb=32)
    full = run(sandbox.exec("head -c 48M /dev/zero > big; head -c 1M /dev/zero > /tmp/more", timeout=60))
    assert full.exit_code != 0 and full.stderr.count("No space left on device") == 2, full
    assert host_disk_use(sandbox.id) <= 32 * MiB
    with pytest.raises(OSError, match="No space left on device"):
        run(sandbox.write_file("more.bin", b"x" * MiB))
    after = run(sandbox.exec("rm big && echo fine > small && cat small", timeout=30))
    assert after.stdout == "fine\n"


def test_close_unmounts_the_disk(sandbox_of):
    sandbox = sandbox_of(disk_mb=16)
    assert mounts_of(sandbox.id)
    run(sandbox.close())
    assert not mounts_of(sandbox.id)


def test_a_removal_racing_another_removal_of_the_same_sandbox_succeeds(sandbox_of, monkeypatch):
    """The sandbox's owner closing it while an outside cleanup removes it: whichever unmounts second finds the disk
    gone between its check and its ``umount``, and that is done, not a failure."""
    sandbox = sandbox_of(disk_mb=16)
    host_tool = disk._run_host

    def the_other_removal_unmounts_first(argv: list[str]) -> None:
        if argv[0] == "umount":
            host_tool(argv)
        host_tool(argv)

    monkeypatch.setattr(disk, "_run_host", the_other_removal_unmounts_first)
    run(sandbox.close())
    assert not mounts_of(sandbox.id) and sandbox.id not in local_sandbox.live()


def test_where_no_disk_can_be_mounted_a_set_disk_mb_is_refused_and_the_default_warns(sandbox_of, monkeypatch):
    monkeypatch.setattr(disk, "refusal", lambda: "mount: permission denied")
    monkeypatch.setattr(disk, "_warned", set())
    with pytest.raises(SandboxUnavailable, match="disk_mb=64"):
        sandbox_of(disk_mb=64)
    with pytest.warns(RuntimeWarning, match="no disk limit"):
        sandbox = sandbox_of()
    assert run(sandbox.exec("echo fine > f && cat f", timeout=10)).stdout == "fine\n"
    assert not mounts_of(sandbox.id)


def test_without_a_writable_cgroup_rlimits_bound_memory_and_processes(sandbox_of, monkeypatch, tmp_path):
    monkeypatch.setattr(local_sandbox, "CGROUP_ROOT", tmp_path / "no-cgroups")
    monkeypatch.setattr(local_sandbox, "_warned_no_cgroup", False)
    with pytest.warns(RuntimeWarning, match="RLIMIT_NPROC"):
        sandbox = sandbox_of(memory_mb=256, pids=16)
    big = run(sandbox.exec(["python3", "-c", "b = bytearray(1 << 30); print('allocated')"], timeout=30))
    assert big.exit_code != 0 and "allocated" not in big.stdout
    many = run(sandbox.exec("for i in $(seq 40); do sleep 5 & done; wait; echo done", timeout=30))
    assert "fork" in many.stderr or "Resource temporarily unavailable" in many.stderr, many
    marker = str(600 + os.getpid() % 97)

    _close_kills_escapees(sandbox, f"setsid sleep {marker} & sleep 300", marker, 1)


def _close_kills_escapees(sandbox: Sandbox, command: str, marker: str, escapees: int) -> None:
    """Run ``command`` until ``escapees`` ``sleep MARKER`` processes exist, close the sandbox under it, and
    check that they die and the running command ends with :class:`SandboxClosed`."""

    async def escape_then_close() -> None:
        running = asyncio.ensure_future(sandbox.exec(command, timeout=60))
        await until(lambda: len(sleeping(marker)) == escapees)
        await sandbox.close()
        await until(lambda: not sleeping(marker))
        with pytest.raises(SandboxClosed):
            await running

    run(escape_then_close())
    assert not sleeping(marker)
