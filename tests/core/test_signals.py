"""Every command that starts sandboxes, browsers, workers or Ray stops on SIGTERM, SIGINT and SIGHUP as on Ctrl-C
and leaves nothing behind: each runs as a user runs it (the installed script, in a session of its own), and once
what it starts runs, it gets the signal. It must then exit with status 128 + the signal's number, and within
:data:`LEFT_WITHIN` seconds of its exit nothing it started may be left: no process of its parent chain (listed
before the signal), no process that carries its :data:`~agentgym.lifetime.COMMAND_ENV` (one that left the chain,
such as Chromium's crash handler), no container labelled with it as owner, no local sandbox of it (nor its disk's
mount). How long the command itself takes to stop depends on the machine, so that wait is generous."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from agentgym.envs.web.orphans import BROWSER_SWITCH
from agentgym.lifetime import COMMAND_ENV, process_label
from agentgym.sandboxes.base import LABEL, OWNER_LABEL
from tests.signals import with_default_stop_signals

AGENTGYM = str(Path(sys.executable).with_name("agentgym"))
READY_WITHIN = 240.0
"""Seconds a command may take to start what it runs (imports, a model, containers, a browser)."""
STOPPED_WITHIN = 90.0
"""Seconds a command may take to exit once signalled (its clean-up runs on a machine that may be busy)."""
LEFT_WITHIN = 10.0
"""Seconds after the command's exit within which nothing it started may be left."""


@dataclass
class Command:
    """An ``agentgym`` command running in a session of its own, with its output in ``log``."""

    process: subprocess.Popen[bytes]
    label: str
    """The command's process as its sandboxes' owner labels name it."""
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def descendants(self) -> list[psutil.Process]:
        with contextlib.suppress(psutil.NoSuchProcess):
            return psutil.Process(self.process.pid).children(recursive=True)
        return []

    def wait_for(self, what: str, ready: Callable[[], Any]) -> Any:
        """Poll ``ready()`` until it gives something truthy, failing if the command exits first."""
        deadline = time.monotonic() + READY_WITHIN
        while time.monotonic() < deadline:
            if found := ready():
                return found
            assert self.process.poll() is None, f"exited {self.process.returncode} before {what}:\n{self.output()}"
            time.sleep(0.2)
        raise AssertionError(f"no {what} after {READY_WITHIN:g} s:\n{self.output()}")

    def stop(self, signum: int) -> int | None:
        """Send ``signum`` and wait for the exit; return the exit status once nothing the command started is
        left (else fail, naming what is)."""
        chain = self.descendants()
        self.process.send_signal(signum)
        try:
            status = self.process.wait(STOPPED_WITHIN)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running {STOPPED_WITHIN:g} s after {signum!r}:\n{self.output()}") from None
        left = self.left_after_exit(chain)
        assert not left, f"left {LEFT_WITHIN:g} s after the exit ({status}): {left}\n{self.output()}"
        return status

    def left_after_exit(self, chain: list[psutil.Process]) -> list[str]:
        """What the exited command started and still runs :data:`LEFT_WITHIN` seconds on (a process that exits on
        its own once its parent is gone, such as multiprocessing's resource tracker, is given that long)."""
        deadline = time.monotonic() + LEFT_WITHIN
        while (left := self.leftovers(chain)) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left

    def leftovers(self, chain: list[psutil.Process]) -> list[str]:
        processes = {p.pid: p for p in (*chain, *carrying(self.label)) if running(p)}
        return ([f"process {p.pid} {name(p)}" for p in processes.values()]
                + [f"container {c}" for c in containers_of(self.label)]
                + [f"local sandbox {s}" for s in local_sandboxes_of(self.label)])


@pytest.fixture
def agentgym(tmp_path: Path) -> Iterator[Callable[..., Command]]:
    """``agentgym(*args, env=None)`` starts the command; what a failed test leaves is killed and removed
    afterwards."""
    started: list[Command] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Command:
        log = tmp_path / f"command-{len(started)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(with_default_stop_signals([AGENTGYM, *args]), stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True, env=env)
        started.append(Command(process, process_label(process.pid), log))
        return started[-1]

    yield start
    for command in started:
        chain = command.descendants()
        if command.process.poll() is None:  # its group exists while it runs (the test failed): kill all of it
            os.killpg(command.process.pid, signal.SIGKILL)
            command.process.wait()
        for process in (*chain, *carrying(command.label)):
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        _remove_what_is_left(command.label)


def _remove_what_is_left(label: str) -> None:
    if names := containers_of(label):
        from agentgym.sandboxes.docker_engine import client

        for name in names:
            client().api.remove_container(name, force=True)
    if local_sandboxes_of(label):
        from agentgym.sandboxes import backend_module

        backend_module("local").reap()  # the command is gone: its sandboxes are orphans


def running(process: psutil.Process) -> bool:
    """Alive, a zombie (an exited process its new parent has not reaped yet) not counted."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def name(process: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return " ".join(process.cmdline())[:120]
    return "?"


def carrying(label: str) -> list[psutil.Process]:
    """The processes whose environment names command ``label`` (what it started, wherever it went since)."""
    marker = f"{COMMAND_ENV}={label}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(psutil.Process(int(entry.name)))
    return found


def containers_of(label: str) -> list[str]:
    """agentgym's containers that command ``label`` (or a worker of it) made."""
    from agentgym.sandboxes import SandboxUnavailable
    from agentgym.sandboxes.docker_engine import client

    try:
        listed = client().api.containers(all=True, filters={"label": f"{LABEL}=1"})
    except (SandboxUnavailable, OSError):  # no Docker here (the client library, or an engine): no container either
        return []
    return [c["Names"][0].lstrip("/") for c in listed if label in c["Labels"].get(OWNER_LABEL, "").split(",")]


def local_sandboxes_of(label: str) -> list[str]:
    """The local sandboxes that command ``label`` made, by their state dirs."""
    from agentgym.sandboxes.local_sandbox import STATE_DIR

    found = []
    for owner in STATE_DIR.glob("*/owner"):
        with contextlib.suppress(OSError):
            if label in owner.read_text().split(","):
                found.append(owner.parent.name)
    return found


def descendant_named(command: Command, part: str) -> list[psutil.Process]:
    return [p for p in command.descendants() if part in name(p)]


def printed(command: Command, pattern: str) -> re.Match[str] | None:
    return re.search(pattern, command.log.read_text(errors="replace"))


# -- worker processes ---------------------------------------------------------------------------------------------


@pytest.mark.docker
def test_check_stops_its_workers_and_their_containers_on_sigterm(docker_engine, agentgym):
    """The issue's case: SIGTERM to ``agentgym check`` left its worker running with its containers."""
    command = agentgym("check", "tools/Shell-v0", "--concurrency", "1")
    command.wait_for("container of its worker", lambda: containers_of(command.label))
    assert descendant_named(command, "multiprocessing")
    assert command.stop(signal.SIGTERM) == 128 + signal.SIGTERM


@pytest.mark.docker
def test_a_check_worker_whose_command_was_killed_stops_too(docker_engine, agentgym):
    """SIGKILL runs no clean-up in the command: its worker gets SIGTERM from the kernel and closes its sandboxes."""
    command = agentgym("check", "tools/Shell-v0", "--concurrency", "1")
    command.wait_for("container of its worker", lambda: containers_of(command.label))
    assert command.stop(signal.SIGKILL) == -signal.SIGKILL


def browsers_of(processes: list[psutil.Process]) -> set[str]:
    """The ids of the agentgym browsers whose Chromium processes are among ``processes``."""
    ids = set()
    for process in processes:
        with contextlib.suppress(psutil.Error):
            ids.update(arg.removeprefix(BROWSER_SWITCH) for arg in process.cmdline() if arg.startswith(BROWSER_SWITCH))
    return ids


@pytest.mark.browser
def test_a_check_worker_keeps_one_chromium_from_check_to_check_and_closes_it_at_the_end(agentgym):
    command = agentgym("check", "gui/ClickButton-v0", "gui/ChooseRadio-v0", "--concurrency", "1", "--only",
                       "gymnasium")
    seen: dict[int, psutil.Process] = {}
    browsers: set[str] = set()
    while command.process.poll() is None:
        descendants = command.descendants()
        seen.update((p.pid, p) for p in descendants)
        browsers |= browsers_of(descendants)
        time.sleep(0.1)
    assert command.process.returncode == 0, command.output()
    assert len(browsers) == 1, command.output()
    assert not command.left_after_exit(list(seen.values())), command.output()


@pytest.mark.browser
def test_check_closes_the_chromium_its_worker_keeps_on_sigterm(agentgym):
    command = agentgym("check", "gui/ClickButton-v0", "gui/ChooseRadio-v0", "--concurrency", "1")
    command.wait_for("Chromium", lambda: descendant_named(command, "chrom"))
    assert command.stop(signal.SIGTERM) == 128 + signal.SIGTERM


# -- sandboxes and browsers in the command's own process -----------------------------------------------------------


@pytest.mark.docker
def test_eval_removes_its_containers_on_ctrl_c(docker_engine, agentgym):
    command = agentgym("eval", "tools/Shell-v0", "--policy", "oracle", "--episodes", "50", "--out", "run")
    command.wait_for("container", lambda: containers_of(command.label))
    assert command.stop(signal.SIGINT) == 128 + signal.SIGINT


def test_eval_destroys_its_local_sandboxes_and_their_disks_on_sigterm(local, agentgym):
    command = agentgym("eval", "tools/Shell-v0", "--policy", "oracle", "--episodes", "50", "--out", "run",
                       "--env-arg", "backend=local")
    command.wait_for("local sandbox", lambda: local_sandboxes_of(command.label))
    assert command.stop(signal.SIGTERM) == 128 + signal.SIGTERM


@pytest.mark.browser
def test_eval_closes_its_chromium_on_sighup(agentgym):
    command = agentgym("eval", "gui/ClickButton-v0", "--policy", "oracle", "--episodes", "50", "--out", "run")
    command.wait_for("Chromium", lambda: descendant_named(command, "chrom"))
    assert command.stop(signal.SIGHUP) == 128 + signal.SIGHUP


@pytest.mark.docker
def test_train_removes_its_containers_on_sigterm(docker_engine, agentgym, tiny_model_dir, tmp_path):
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({
        "output_dir": str(tmp_path / "run"), "model": {"path": str(tiny_model_dir)},
        "env": {"id": "tools/Shell-v0", "kwargs": {"backend": "docker"}}, "sampling": {"max_tokens": 12},
        "trainer": {"steps": 50, "groups_per_step": 2, "group_size": 2, "concurrency": 4}, "eval": {"episodes": 0},
    }))
    command = agentgym("train", str(config))
    command.wait_for("container", lambda: containers_of(command.label))
    assert command.stop(signal.SIGTERM) == 128 + signal.SIGTERM


@pytest.mark.docker
def test_sft_removes_the_containers_of_its_demonstrations_on_sigterm(docker_engine, agentgym, tiny_model_dir,
                                                                     tmp_path):
    config = tmp_path / "sft.yaml"
    config.write_text(yaml.safe_dump({
        "model": str(tiny_model_dir), "output_dir": str(tmp_path / "run"),
        "data": {"env": "tools/Shell-v0", "env_kwargs": {"backend": "docker"}, "episodes": 200, "concurrency": 4},
    }))
    command = agentgym("sft", str(config))
    command.wait_for("container", lambda: containers_of(command.label))
    assert command.stop(signal.SIGTERM) == 128 + signal.SIGTERM


# -- servers ------------------------------------------------------------------------------------------------------


def test_serve_stops_on_sigterm(agentgym, tiny_model_dir):
    command = agentgym("serve", "--model", str(tiny_model_dir), "--port", "0")
    command.wait_for("server", lambda: printed(command, r"Uvicorn running on http://127\.0\.0\.1:\d+"))
    assert command.stop(signal.SIGTERM) == 128 + signal.SIGTERM


def test_view_stops_on_sighup(agentgym, tmp_path):
    from click.testing import CliRunner

    from agentgym.cli import cli

    done = CliRunner().invoke(cli, ["eval", "games/FrozenLake-v0", "--policy", "random", "--episodes", "2",
                                    "--out", str(tmp_path / "run")])
    assert done.exit_code == 0, done.output
    command = agentgym("view", str(tmp_path / "run"), "--port", "0")
    command.wait_for("viewer", lambda: printed(command, r"agentgym view: http://127\.0\.0\.1:\d+/"))
    assert command.stop(signal.SIGHUP) == 128 + signal.SIGHUP
