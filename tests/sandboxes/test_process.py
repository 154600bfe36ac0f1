"""Long-lived processes in sandboxes (``Sandbox.spawn``) and read-only mounts, on every backend."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import pytest

from agentgym.sandboxes import SandboxClosed, SandboxSpec, SandboxUnavailable, backend_module
from tests.sandboxes.conftest import run


async def _read_until(process, marker: bytes, timeout: float = 20) -> bytes:
    data = b""
    async with asyncio.timeout(timeout):
        while marker not in data:
            chunk = await process.read()
            if not chunk:
                break
            data += chunk
    return data


def test_a_spawned_process_talks_over_its_pipes_and_exits_when_its_input_ends(sandbox_of):
    sandbox = sandbox_of()

    async def talk():
        process = await sandbox.spawn("echo started >&2; while read line; do echo \"got $line\"; done; exit 7",
                                      env={"X": "y"})
        replies = []
        for word in ("one", "two"):
            await process.write(f"{word}\n".encode())
            replies.append(await _read_until(process, b"\n"))
        await process.close_stdin()
        rest = await _read_until(process, b"never")
        return replies, rest, await process.wait(20), process.stderr

    replies, rest, status, stderr = run(talk())
    assert replies == [b"got one\n", b"got two\n"]
    assert (rest, status, stderr) == (b"", 7, "started\n")


def test_a_killed_process_reports_the_kill_and_refuses_input(sandbox_of):
    """Killed right after its start, too: a kill racing the sandbox's own start-up must still end it."""
    sandbox = sandbox_of()

    async def kill():
        process = await sandbox.spawn(["sleep", "300"])
        await process.kill()
        status = await process.wait(20)
        with pytest.raises(BrokenPipeError):
            await process.write(b"hello\n")
        async with asyncio.timeout(20):
            return status, await process.read()

    for _ in range(10):
        assert run(kill()) == (137, b"")


def test_a_spawned_service_runs_as_another_user_whom_the_commands_cannot_kill(sandbox_of):
    """An environment's service (an MCP server) lives on whatever the agent's shell does to every process it may
    signal, and shares the work dir's files with the commands."""
    sandbox = sandbox_of()
    run(sandbox.write_file("state.txt", "from a command\n"))

    async def attack():
        service = await sandbox.spawn("id -u; id -g; cat state.txt; echo by the service >> state.txt;"
                                      " while read line; do echo \"got $line\"; done")
        seen = await _read_until(service, b"from a command\n")
        commands = await sandbox.exec("id -u; id -g; kill -9 -1; pkill -9 -f 'read line'; pkill -9 -u 1001; true",
                                      timeout=20)
        assert service.returncode is None, service.stderr
        await service.write(b"ping\n")
        answer = await _read_until(service, b"got ping\n")
        await service.close_stdin()
        assert await _read_until(service, b"never") == b"" and await service.wait(20) == 0
        return seen, commands, answer

    seen, commands, answer = run(attack())
    assert seen.split(b"\n")[:2] == [b"1001", b"1000"]
    assert commands.stdout.split("\n")[:2] == ["1000", "1000"], commands
    assert answer == b"got ping\n"
    assert run(sandbox.read_file("state.txt")) == "from a command\nby the service\n"


def test_closing_the_sandbox_ends_its_processes_and_refuses_new_ones(sandbox_of):
    sandbox = sandbox_of()

    async def close():
        process = await sandbox.spawn("echo running; exec sleep 300")
        assert await _read_until(process, b"running\n") == b"running\n"
        await sandbox.close()
        ended = await _read_until(process, b"never")
        with pytest.raises(SandboxClosed):
            await sandbox.spawn(["true"])
        return ended, await process.wait(20)

    ended, status = run(close())
    assert ended == b"" and status is not None and status != 0


def test_mounts_are_seen_read_only_at_their_place_inside(sandbox_of):
    with tempfile.TemporaryDirectory() as folder:  # directly under /tmp: every user can reach it
        shared = Path(folder)
        shared.chmod(0o755)
        (shared / "tool.txt").write_text("from the host\n")
        (shared / "tool.txt").chmod(0o644)
        sandbox = sandbox_of(mounts={str(shared): "/opt/shared"})
        assert run(sandbox.exec(["cat", "/opt/shared/tool.txt"], timeout=10)).stdout == "from the host\n"
        written = run(sandbox.exec("echo x > /opt/shared/new.txt", timeout=10))
        assert written.exit_code != 0 and not (shared / "new.txt").exists()
        run(sandbox.close())


def test_a_local_mount_that_other_users_cannot_reach_is_refused_with_the_reason():
    try:
        backend_module("local").check()
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    with tempfile.TemporaryDirectory() as folder:
        Path(folder).chmod(0o755)
        closed = Path(folder) / "closed"
        (closed / "inside").mkdir(parents=True)
        closed.chmod(0o700)
        backend_module("local").check(SandboxSpec(mounts={folder: "/opt/x"}))
        with pytest.raises(SandboxUnavailable, match=f"{closed} is closed to other users"):
            backend_module("local").check(SandboxSpec(mounts={str(closed / "inside"): "/opt/x"}))
    with pytest.raises(ValueError, match="absolute"):
        SandboxSpec(mounts={"relative/path": "/opt/x"})


def test_a_stopped_process_exits_at_the_end_of_its_input_and_is_gone_from_the_host(sandbox_of):
    sandbox = sandbox_of()

    async def spawn_and_stop():
        process = await sandbox.spawn(["cat"])
        await process.write(b"x\n")
        assert await _read_until(process, b"\n") == b"x\n"
        return await process.stop(grace=5)

    assert run(spawn_and_stop()) == 0
    assert not any(Path("/proc", pid, "cmdline").read_bytes().startswith(b"cat\0")
                   for pid in os.listdir("/proc") if pid.isdigit() and _readable(pid))


def _readable(pid: str) -> bool:
    try:
        Path("/proc", pid, "cmdline").read_bytes()
        return True
    except OSError:
        return False
