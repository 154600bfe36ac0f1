"""Who a sandbox belongs to: its owner label names the process that made it and the agentgym command that process
runs under, and ``reap`` takes a sandbox whose maker or command is gone, so a worker left running by a killed
command leaves nothing reap cannot find."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

from agentgym.lifetime import COMMAND_ENV, process_label
from agentgym.sandboxes import backend_module, reap
from agentgym.sandboxes.base import owner, owner_alive

WORKER = textwrap.dedent("""
    import asyncio, sys
    from agentgym.sandboxes import open_sandbox
    sandbox = asyncio.run(open_sandbox(sys.argv[1]))
    print(sandbox.id, flush=True)
    sys.stdin.read()  # a worker that lives on, its sandbox open, until the test ends it
""")


def test_an_owner_label_names_the_maker_and_its_command(monkeypatch):
    me, gone = process_label(), f"{socket.gethostname()}:{os.getpid()}:0"  # this pid, another start: ended
    monkeypatch.delenv(COMMAND_ENV, raising=False)
    assert owner() == me
    monkeypatch.setenv(COMMAND_ENV, me)  # the command itself
    assert owner() == me
    monkeypatch.setenv(COMMAND_ENV, gone)  # a worker of a command
    assert owner() == f"{me},{gone}"
    assert owner_alive(me) and not owner_alive(f"{me},{gone}") and not owner_alive(f"{gone},{me}")


def test_reap_takes_the_sandbox_of_a_live_worker_once_its_command_is_gone(backend):
    command = subprocess.Popen(["sleep", "300"])  # stands for the agentgym command that started the worker
    worker = subprocess.Popen([sys.executable, "-c", WORKER, backend], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, COMMAND_ENV: process_label(command.pid)})
    try:
        assert worker.stdout is not None
        sandbox_id = worker.stdout.readline().strip()
        module = backend_module(backend)
        reap((backend,))
        assert sandbox_id in module.live()  # its maker and its command run: not an orphan
        command.kill()
        command.wait()
        assert reap((backend,)) >= 1
        assert sandbox_id not in module.live() and worker.poll() is None
    finally:
        for process in (worker, command):
            process.kill()
            process.wait()
