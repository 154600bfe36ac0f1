"""What the agent does to its own desktop is the agent's outcome. On the host: the read-back's probe on odd
files and past its budgets, and an incomplete read-back's score. In docker: whole gui/DesktopRunScript-v0
episodes whose agent breaks its desktop with the powers it has (its terminal, or a command run in the sandbox
as its user), each ending as its own result with status ``ok``; only a sandbox killed from outside is an
infrastructure ``error``. The episodes run a few at a time (most of each is waiting for the screen)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentgym import Task, TextPolicy, run_episode
from agentgym.envs.gui.desktop import episode as desktop_episode
from agentgym.envs.gui.desktop.env import DesktopEnv
from agentgym.envs.gui.desktop.episode import ENTRY_LIMIT, READ_LIMIT, State
from agentgym.envs.gui.desktop.tasks import TASKS
from agentgym.trajectory import Trajectory

# -- on the host ----------------------------------------------------------------------------------------------


def _probe(root: Path, **limits: int) -> dict[str, Any]:
    """What the read-back's probe prints for the tree at ``root`` under ``limits`` (the defaults are large)."""
    request = {"limit": READ_LIMIT, "count": ENTRY_LIMIT, "names": 1 << 18, "texts": 1 << 19, **limits}
    ran = subprocess.run([sys.executable, "-I", "-c", desktop_episode._PROBE], cwd=root, input=json.dumps(request),
                         capture_output=True, text=True, check=True, timeout=60)
    return json.loads(ran.stdout)


def _texts(found: dict[str, Any]) -> dict[str, str | None]:
    return {name: text for name, _, text in found["files"]}


def test_the_probe_reads_the_text_of_regular_files_only_and_stays_within_its_budgets(tmp_path):
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("bb\n" * 20)
    (tmp_path / ".hidden").write_text("not read")
    (tmp_path / "noise.bin").write_bytes(b"\xff" * 8)
    (tmp_path / "huge.txt").write_text("a" * (READ_LIMIT + 1))
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "link.txt").symlink_to("a.txt")
    (tmp_path / "folder").symlink_to("sub")
    (tmp_path / os.fsdecode(b"name\xff")).write_text("odd\n")
    found = _probe(tmp_path)
    assert found["complete"] and found["dirs"] == ["sub"]
    assert _texts(found) == {"a.txt": "a\n", "sub/b.txt": "bb\n" * 20, "noise.bin": None, "huge.txt": None,
                             "pipe": None, "loop1": None, "loop2": None, "link.txt": None, "folder": None,
                             "name\ufffd": "odd\n"}
    # texts go smallest first into their budget; past it they read as None and the listing stays whole
    budget = len(json.dumps("a\n")) + len(json.dumps("odd\n"))
    tight = _probe(tmp_path, texts=budget)
    assert tight["complete"] and {n for n, t in _texts(tight).items() if t is not None} == {"a.txt", "name\ufffd"}
    assert _texts(tight).keys() == _texts(found).keys()
    # more entries, or longer names, than the budget: incomplete
    assert not _probe(tmp_path, count=5)["complete"]
    assert not _probe(tmp_path, names=40)["complete"]


def test_an_incomplete_read_back_scores_nothing():
    episode = TASKS["DeleteFiles"].generate(np.random.default_rng(0), "easy")
    left = {path: text for path, text in episode.files.items() if path not in episode.changes}
    done = State(files=dict(left), modes=dict.fromkeys(left, 0o644), dirs=frozenset())
    assert episode.score(done)[:2] == (1.0, True)
    assert episode.score(dataclasses.replace(done, complete=False))[:2] == (0.0, False)


# -- on the desktop, in docker sandboxes -----------------------------------------------------------------------

PARALLEL = 4
CLICK = ("click", {"x": 500, "y": 400})
DONE = ("done", {})
ORACLE = None
"""The oracle's next action (RunScript's: type the command that does the task, then ``done``)."""
KILLED_FROM_OUTSIDE = "docker kill"
"""A "command" the policy runs on the host with the engine's API, not in the sandbox."""

MESS = r"""
set -e
mkfifo pipe
python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('socket')"
ln -s loop1 loop2 && ln -s loop2 loop1 && ln -s /dev/zero zeros && ln -s . itself
head -c 100000 /dev/urandom > noise.bin
printf 'text\n' > "$(printf 'name\377\376')" && printf 'text\n' > "$(printf 'new\nline')"
head -c 400000 /dev/zero | tr '\0' a > huge.txt
mkdir -p closed/inner && echo secret > closed/inner/file && chmod 000 closed
mkdir -p shut && echo secret > shut/file && chmod 0600 shut
d=deep; for i in $(seq 150); do d=$d/a-folder-name-that-is-forty-characters-long; done; mkdir -p "$d"
printf 'raise SystemExit("the probe ran the agent code")\n' > json.py
head -c 64M /dev/zero > /tmp/filler || true
cat /dev/zero > filler || true
[ "$(df --output=avail . | tail -1)" -lt 1024 ]  # KiB: a full ext4 keeps a few blocks for its bookkeeping
"""
"""Odd files the read-back must see through: a fifo, a socket, a symbolic link loop and links to a device and to
a folder, a binary file, names that are not UTF-8 or hold a line break, a file too large to read, folders the
agent closed to itself, a tree deeper than a path may be long, a ``json.py`` waiting for a probe that imports
from the work dir, and the work dir and /tmp full."""
HELPER_KILLER = r"""
rm /tmp/fb/Xvfb_screen0 && mkfifo /tmp/fb/Xvfb_screen0
setsid -f sh -c 'touch /tmp/up; while :; do pkill -KILL -f "bin/deskto[p] "; sleep 0.05; done' > /dev/null 2>&1
until [ -e /tmp/up ]; do :; done
"""
"""The screen's helper stuck on a fifo where the frame buffer was, and killed by a loop of the agent's (in a
session of its own, which outlives the command once it has made the file ``up``)."""
FORK_BOMB = r"""
setsid -f bash -c 'touch /tmp/up; while :; do sleep 1000 & done' > /dev/null 2>&1
until [ -e /tmp/up ]; do :; done
"""


@dataclass(frozen=True)
class Scenario:
    """A hostile episode: at turn ``i`` the policy runs ``moves[i][0]`` (a bash command in the sandbox as the
    agent, or nothing), then sends ``moves[i][1]`` (a call, or the oracle's action for ``None``); then what
    must come of it."""

    name: str
    moves: tuple[tuple[str | None, tuple[str, dict[str, Any]] | None], ...]
    status: str = "ok"
    reward: float = 0.0
    broken: bool | None = True
    """Whether the episode ends on an error observation that says the desktop no longer works (``None``:
    either; a fork bomb leaves a process slot free now and then, and the click may get it)."""


SCENARIOS = (
    Scenario("odd files are read through, and the task's are scored", ((None, ORACLE), (MESS, ORACLE)),
             reward=1.0, broken=False),
    Scenario("the work dir closed, then a click", (("chmod 000 /work", CLICK),)),
    Scenario("the work dir closed, then done", ((None, ORACLE), ("chmod 000 /work", DONE))),
    Scenario("kill -9 -1 typed into the terminal", ((None, ("type", {"text": "kill -9 -1\n"})), (None, CLICK))),
    Scenario("the X server killed", (("pkill -KILL Xvfb", CLICK),)),
    Scenario("the helper's files under /tmp removed", (("rm -rf /tmp/fb /tmp/xdg", CLICK),)),
    Scenario("the helper stuck and killed", ((HELPER_KILLER, CLICK),)),
    Scenario("the window manager killed and the work dir emptied",
             (("pkill -KILL jwm && rm -rf /work/*", CLICK), (None, DONE)), broken=False),
    Scenario("more files than are read back",
             ((None, ORACLE), (f"seq -f 'many/f%g' {ENTRY_LIMIT} | (mkdir many && xargs touch)", DONE)),
             broken=False),
    Scenario("a fork bomb", ((FORK_BOMB, CLICK), (None, DONE)), broken=None),
    Scenario("the container killed from outside", ((KILLED_FROM_OUTSIDE, CLICK),), status="error", broken=False),
)


class _Hostile(TextPolicy):
    """Plays a :class:`Scenario`'s moves."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.ran: list[tuple[int, str]] = []
        """The exit status and the end of stderr of each command run in the sandbox."""

    async def act(self, env: Any, messages: Any, rng: np.random.Generator) -> str:
        command, call = self.scenario.moves[min(env.turn, len(self.scenario.moves) - 1)]
        if command == KILLED_FROM_OUTSIDE:
            from agentgym.sandboxes.docker_engine import client

            client().api.kill(env.sandbox.id)
        elif command is not None:
            done = await env.sandbox.exec(["bash", "-c", command], timeout=60)
            self.ran.append((done.exit_code, done.stderr[-300:]))
        return env.oracle_action() if call is None else env.format_call(call[0], **call[1])


async def _play(scenario: Scenario, gate: asyncio.Semaphore) -> tuple[Trajectory, _Hostile]:
    policy = _Hostile(scenario)
    async with gate:
        env = DesktopEnv(task="RunScript", pool_size=0)
        try:
            played = await run_episode(env, policy, Task(env_id=env.task.env_id, seed=0, difficulty="easy"))
        finally:
            await env.aclose()
    return played, policy


def _outcome(played: Trajectory, scenario: Scenario) -> tuple[str, float, bool, bool | None]:
    """The status, reward and success, and whether the last turn said the desktop no longer works (``None``
    where the scenario allows either)."""
    last = (played.turns[-1].action_error or "") if played.turns else ""
    broken = None if scenario.broken is None else "no longer works" in last
    return played.status, played.reward, played.success, broken


@pytest.mark.docker
def test_what_the_agent_does_to_its_desktop_is_its_outcome_and_a_kill_from_outside_is_not(docker_engine):
    async def every() -> list[tuple[Trajectory, _Hostile]]:
        gate = asyncio.Semaphore(PARALLEL)
        return await asyncio.gather(*(_play(scenario, gate) for scenario in SCENARIOS))

    played = asyncio.run(every())
    wrong = []
    for scenario, (trajectory, policy) in zip(SCENARIOS, played, strict=True):
        wanted = (scenario.status, scenario.reward, scenario.reward == 1.0, scenario.broken)
        ran_as_planned = all(code == 0 for code, _ in policy.ran)
        if _outcome(trajectory, scenario) != wanted or not ran_as_planned:
            wrong.append((scenario.name, _outcome(trajectory, scenario), trajectory.error,
                          [turn.action_error for turn in trajectory.turns], policy.ran))
    assert not wrong, "\n".join(f"{name}: got {got}, error {error!r}, calls {errors}, commands {ran}"
                                 for name, got, error, errors, ran in wrong)
    killed = played[-1][0]
    assert "sandbox" in (killed.error or "").lower()
