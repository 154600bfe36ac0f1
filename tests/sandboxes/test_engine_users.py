"""The Docker engine that agentgym starts outlives its starter while another process still uses it, and the last
user stops it: a test run (or command) that started the engine used to stop it under another one using it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from agentgym.sandboxes import SandboxUnavailable
from agentgym.sandboxes.docker_engine import docker_module, engine_answers, ensure_engine

pytestmark = pytest.mark.docker

USER = textwrap.dedent("""
    import sys
    from agentgym.sandboxes.docker_engine import engine_answers, ensure_engine
    engine = ensure_engine()
    print("joined", engine.started, flush=True)
    sys.stdin.readline()
    print("answers", engine_answers(), flush=True)
    engine.stop()
    print("after", engine_answers(), flush=True)
""")


def _dockerd_running() -> bool:
    return subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True).returncode == 0


def test_the_last_user_of_a_started_engine_stops_it_not_its_starter() -> None:
    try:
        docker_module()
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    if engine_answers():
        pytest.skip("a Docker engine runs already: this test needs to start its own")
    try:
        starter = ensure_engine()
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    assert starter.started
    other = subprocess.Popen([sys.executable, "-c", USER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdin is not None
        assert other.stdout.readline().split() == ["joined", "False"]  # it found the engine running
        starter.stop()  # the starter leaves first: the engine stays for the other user
        assert engine_answers() and _dockerd_running()
        other.stdin.write("go\n")
        other.stdin.flush()
        assert other.stdout.readline().split() == ["answers", "True"]
        assert other.stdout.readline().split() == ["after", "False"]  # the last user stopped it
        assert other.wait(60) == 0
        assert not _dockerd_running()
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
        starter.stop()
