"""The same isolation tests on every backend: each one fails if the isolation it names is broken."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from agentgym.sandboxes import SandboxClosed, backend_module, reap
from tests.sandboxes.conftest import run
from tests.waiting import until

CONNECT = textwrap.dedent("""
    import socket, sys
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
        print("connected")
    except OSError as e:
        print("refused", type(e).__name__)
""")
ENVIRONS = textwrap.dedent("""
    import json, os
    seen = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            seen[pid] = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
        except OSError:
            pass
    print(json.dumps(seen))
""")


def test_commands_run_with_output_exit_status_stdin_env_and_cwd(sandbox_of):
    sandbox = sandbox_of()
    code = "import sys, os; print(sys.stdin.read().upper(), os.environ['X'], os.getcwd()); sys.exit(3)"
    result = run(sandbox.exec(["python3", "-c", code], timeout=30, stdin="hello", env={"X": "y"}))
    assert (result.exit_code, result.stdout.strip(), result.timed_out) == (3, "HELLO y /work", False)
    run(sandbox.exec("mkdir -p sub", timeout=10))
    assert run(sandbox.exec("pwd; echo oops >&2", timeout=10, cwd="sub")).stdout.strip() == "/work/sub"
    assert run(sandbox.exec("echo oops >&2", timeout=10)).stderr == "oops\n"


def test_a_command_too_long_for_the_kernel_is_refused_like_a_shell_refuses_it(sandbox_of):
    """A megabyte in one argument passes Linux's per-argument limit: the command cannot start (exit 126, as a
    shell answers), which is the caller's doing, not a dead sandbox; the sandbox goes on."""
    sandbox = sandbox_of()
    result = run(sandbox.exec(["echo", "x" * (1 << 20)], timeout=10))
    assert result.exit_code == 126 and "Argument list too long" in result.stderr
    assert run(sandbox.exec("echo fine", timeout=10)).stdout == "fine\n"


def test_concurrent_commands_in_one_sandbox_each_get_their_own_answer(sandbox_of):
    sandbox = sandbox_of()

    async def many():
        return await asyncio.gather(*(sandbox.exec(f"sleep 0.$((N % 3)); echo $N; exit {i % 5}", timeout=30,
                                                   env={"N": str(i)}) for i in range(24)))

    results = run(many())
    assert [(r.stdout, r.exit_code) for r in results] == [(f"{i}\n", i % 5) for i in range(24)]


def test_files_round_trip_and_errors_are_the_builtin_ones(sandbox_of):
    sandbox = sandbox_of()
    run(sandbox.write_file("data/in.bin", bytes(range(256)) * 10))
    assert run(sandbox.read_file("data/in.bin", text=False)) == bytes(range(256)) * 10
    run(sandbox.write_file("note.txt", "héllo"))
    assert run(sandbox.exec("cat note.txt", timeout=10)).stdout == "héllo"
    with pytest.raises(FileNotFoundError):
        run(sandbox.read_file("missing.txt"))
    with pytest.raises(IsADirectoryError):
        run(sandbox.read_file("data"))
    with pytest.raises((PermissionError, OSError)):
        run(sandbox.write_file("/usr/evil", "x"))  # the root file system is read-only


def test_what_the_agent_leaves_in_its_work_dir_cannot_forge_or_void_a_file_transfer(sandbox_of):
    sandbox = sandbox_of()
    run(sandbox.write_file("answer.txt", "42"))
    forged = "def b64encode(data):\n    return b'Zm9yZ2Vk'\n"  # 'forged', were this module imported
    for module in ("base64", "os", "sys", "errno"):
        run(sandbox.write_file(f"{module}.py", forged))
    assert run(sandbox.read_file("answer.txt")) == "42"
    run(sandbox.write_file("answer.txt", "43"))
    assert run(sandbox.exec("cat answer.txt", timeout=10)).stdout == "43"

    assert run(sandbox.exec(f"chmod 000 {sandbox.spec.workdir}", timeout=10)).ok  # closed to the agent itself
    with pytest.raises(PermissionError):
        run(sandbox.read_file("answer.txt"))
    with pytest.raises(PermissionError):
        run(sandbox.write_file("answer.txt", "44"))


def test_no_network_neither_the_hosts_loopback_nor_outside(sandbox_of):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        sandbox = sandbox_of()
        for host, target_port in (("127.0.0.1", port), ("1.1.1.1", 53), ("pypi.org", 443)):
            result = run(sandbox.exec(["python3", "-c", CONNECT, host, str(target_port)], timeout=20))
            assert result.stdout.startswith("refused"), (host, result)
    finally:
        listener.close()


def test_the_hosts_files_are_invisible(sandbox_of, tmp_path):
    token = uuid.uuid4().hex
    secret = tmp_path / f"secret-{token}.txt"
    secret.write_text("the host's secret")
    home_secret = Path.home() / f".agentgym-secret-{token}"
    home_secret.write_text("the host's secret")
    try:
        sandbox = sandbox_of()
        for path in (secret, home_secret):
            with pytest.raises(FileNotFoundError):
                run(sandbox.read_file(str(path)))
        # by name, under whatever path a mount might show them (reading every file's content took 45 s)
        found = run(sandbox.exec(f"find / \\( -path /proc -o -path /sys \\) -prune -o -name '*{token}*' -print "
                                 "2>/dev/null | head -1", timeout=60))
        assert found.ok and found.stdout == ""
    finally:
        home_secret.unlink()


def test_no_process_inside_shows_the_hosts_environment(sandbox_of, monkeypatch):
    """Every environment readable inside (pid 1's included) is the sandbox's own: an API key in the host's
    environment must not reach the agent through exec, read_file or a spawned process."""
    secret = f"secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("AGENTGYM_TEST_API_KEY", secret)
    sandbox = sandbox_of()

    async def spawned() -> str:
        process = await sandbox.spawn(["python3", "-c", ENVIRONS])
        output = b""
        async with asyncio.timeout(30):
            while chunk := await process.read():
                output += chunk
        assert await process.wait(10) == 0, process.stderr
        return output.decode()

    def read(path: str) -> str:
        try:
            return run(sandbox.read_file(path, text=False)).decode(errors="replace")
        except PermissionError:  # docker's pid 1
            return ""

    seen = {"exec": json.loads(run(sandbox.exec(["python3", "-c", ENVIRONS], timeout=30)).stdout),
            "spawn": json.loads(run(spawned())),
            "read_file": {pid: read(f"/proc/{pid}/environ") for pid in ("1", "self")}}
    assert all(seen.values())  # each route read at least its own process's environment
    leaking = {route: [pid for pid, environ in environs.items() if secret in environ]
               for route, environs in seen.items()}
    assert leaking == {route: [] for route in seen}  # names the pids, never shows the host's environment


def test_memory_past_the_limit_kills_the_process_not_the_host(sandbox_of):
    sandbox = sandbox_of(memory_mb=256, disk_mb=64)
    hog = "b = bytearray(1 << 30); b[::4096] = b'x' * len(b[::4096]); print('allocated')"
    result = run(sandbox.exec(["python3", "-c", hog], timeout=60))
    assert result.exit_code != 0 and "allocated" not in result.stdout
    small = run(sandbox.exec(["python3", "-c", "b = bytearray(64 << 20); print('fine')"], timeout=30))
    assert small.stdout.strip() == "fine"  # the sandbox lives on after its process died


def test_a_fork_bomb_hits_the_pids_limit_and_the_host_stays_responsive(sandbox_of):
    sandbox = sandbox_of(pids=64)
    baseline = len(psutil.pids())
    counts: list[int] = []
    spawned: list[int] = []
    done = threading.Event()

    def probe() -> None:  # the host still starts processes, and holds at most the bomb's share more than before
        while not done.is_set():
            counts.append(len(psutil.pids()))
            spawned.append(subprocess.run(["true"]).returncode)
            time.sleep(0.05)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        bomb = "bomb() { bomb | bomb & }; bomb; sleep 2; ps -e --no-headers | wc -l"
        result = run(sandbox.exec(["bash", "-c", bomb], timeout=8))
    finally:
        done.set()
        prober.join()
    assert result.timed_out or result.exit_code != 0 or "retry" in result.stderr or "fork" in result.stderr
    assert spawned and set(spawned) == {0}
    assert max(counts) - baseline < 64 + 64, (baseline, max(counts))  # the limit, and what else the host runs
    after = run(sandbox.exec("ps -e --no-headers | wc -l", timeout=10))
    assert after.ok and int(after.stdout) < 10, after  # the bomb's processes are gone


def test_a_timeout_kills_the_whole_process_tree(sandbox_of):
    sandbox = sandbox_of()
    marker = str(900 + os.getpid() % 97)
    result = run(sandbox.exec(f"sleep {marker}1 & sleep {marker}2 & (sleep {marker}3 &); wait", timeout=1.5))
    assert result.timed_out and result.duration > 1.4  # not before its time; the sleeps would take hours
    until(lambda: run(sandbox.exec(f"ps -eo args | grep -c '^sleep {marker}' || true", timeout=10)).stdout.strip()
          == "0", "the timed-out command's sleeps are gone")
    on_host = [p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [""])[:1] == ["sleep"]
               and (p.info["cmdline"][1:2] or [""])[0].startswith(marker)]
    assert not on_host


def test_what_a_finished_command_left_running_is_killed_when_it_ends(sandbox_of):
    sandbox = sandbox_of()
    marker = str(800 + os.getpid() % 97)
    result = run(sandbox.exec(f"sleep {marker}1 & (sleep {marker}2 >/dev/null 2>&1 &); echo started", timeout=30))
    assert result.ok and result.stdout == "started\n" and result.duration < 60  # not after its sleeps' hours
    left = run(sandbox.exec(f"ps -eo args | grep -c '^sleep {marker}' || true", timeout=10))
    assert left.stdout.strip() == "0"


def test_a_gigabyte_of_output_is_capped_not_buffered(sandbox_of):
    sandbox = sandbox_of(output_limit=1 << 20)
    host = psutil.Process()
    rss_before = host.memory_info().rss
    result = run(sandbox.exec("head -c 1000000000 /dev/zero | tr '\\0' x; echo done >&2", timeout=120))
    assert result.exit_code == 0 and result.truncated
    assert len(result.stdout) == 1 << 20 and set(result.stdout) == {"x"}
    assert result.stderr == "done\n"
    assert host.memory_info().rss - rss_before < 200 << 20


def test_close_leaves_nothing_and_is_idempotent(sandbox_of, backend):
    sandbox = sandbox_of()
    run(sandbox.exec("setsid -f sleep 300", timeout=10))
    run(sandbox.close())
    run(sandbox.close())
    assert sandbox.id not in backend_module(backend).live()
    with pytest.raises(SandboxClosed):
        run(sandbox.exec("true", timeout=5))


def test_nothing_is_left_after_the_process_that_made_a_sandbox_is_killed(backend):
    orphan = sandbox_of_a_killed_process(backend)
    module = backend_module(backend)
    reap((backend,))
    assert orphan not in module.live()


def sandbox_of_a_killed_process(backend: str) -> str:
    """The id of a sandbox whose maker (a child process, running a service in it) was killed with SIGKILL."""
    script = textwrap.dedent(f"""
        import asyncio, os, signal
        from agentgym.sandboxes import open_sandbox
        async def main():
            sandbox = await open_sandbox({backend!r})
            await sandbox.exec("setsid -f sleep 300", timeout=10)
            print(sandbox.id, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        asyncio.run(main())
    """)
    child = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True,
                           timeout=120)
    assert child.returncode == -9, child.stderr
    return child.stdout.strip()
