"""gui/Desktop*-v0: task generators and checks on the host, then whole episodes on the X desktop in docker
sandboxes (the module's ``docker_engine`` finds the agentgym/desktop image by its content hash; it is built
before the tests, and these tests skip until it is)."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import zlib
from typing import Any

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_reset_seed_determinism

import agentgym
from agentgym import OraclePolicy, RandomPolicy, Task, TextPolicy, run_episode
from agentgym.envs.gui.desktop import episode as desktop_episode
from agentgym.envs.gui.desktop import file_tasks
from agentgym.envs.gui.desktop.env import DesktopEnv
from agentgym.envs.gui.desktop.episode import State, edit_score, lay_down, read_state
from agentgym.envs.gui.desktop.tasks import TAGS, TASKS, DesktopTask
from agentgym.messages import ImagePart
from agentgym.sandboxes import SandboxSpec, SandboxUnavailable, open_sandbox

DIFFICULTIES = ("easy", "medium", "hard")
PARALLEL = 4
"""Episodes played at once: most of an episode is waiting for the screen to settle."""


def _untouched(episode: desktop_episode.Episode) -> State:
    files: dict[str, str | None] = dict(episode.files)
    folders = {path.rpartition("/")[0] for path in files if "/" in path} | set(episode.dirs)
    return State(files=files, modes=dict.fromkeys(files, 0o644), dirs=frozenset(folders))


# -- on the host, no sandbox ------------------------------------------------------------------------------

def test_every_task_is_registered_with_the_desktop_entry_point():
    for task in TASKS.values():
        spec = agentgym.spec(task.env_id)
        assert spec.entry_point == "agentgym.envs.gui.desktop.env:DesktopEnv"
        assert spec.kwargs == {"task": task.name} and spec.tags == TAGS
    assert len(TASKS) >= 10


@pytest.mark.parametrize("name", sorted(TASKS))
def test_tasks_are_seeded_and_score_nothing_untouched(name):
    generate = TASKS[name].generate
    for difficulty in DIFFICULTIES:
        seen = set()
        for seed in range(8):
            episode = generate(np.random.default_rng(seed), difficulty)
            again = generate(np.random.default_rng(seed), difficulty)
            assert (again.instruction, again.files, again.plan) == (episode.instruction, episode.files, episode.plan)
            assert episode.plan[-1] == ("done", {})
            reward, success, parts, damaged = episode.score(_untouched(episode))
            assert (reward, success, damaged) == (0.0, False, []), episode.instruction
            assert all(0.0 <= part < 1.0 for part in parts)
            seen.add((episode.instruction, *episode.files.values()))
        assert len(seen) == 8, f"{name} {difficulty} hardly varies with the seed"


def test_edit_score_counts_the_lines_made_and_the_lines_broken():
    want = "a\nB\nc\nD\n"
    assert edit_score("a\nB\nc\nD\n", want, [1, 3]) == 1.0
    assert edit_score("a\nB\nc\nd\n", want, [1, 3]) == 0.5
    assert edit_score("x\nB\nc\nd\n", want, [1, 3]) == 0.25
    assert edit_score("a\nB\nc\nD\nextra\n", want, [1, 3]) == 0.75
    assert edit_score(None, want, [1, 3]) == 0.0


def test_the_file_manager_rows_are_folders_first_then_files_alphabetically():
    view = file_tasks.FolderView(["notes.txt", "agenda.md"], ["reports", "data"])
    rows = [view.row(name)[1] for name in ("data", "reports", "agenda.md", "notes.txt")]
    assert rows == [file_tasks.FIRST_ROW + file_tasks.ROW_HEIGHT * i for i in range(4)]


def test_open_file_is_checked_on_the_editors_window_title():
    episode = TASKS["OpenFile"].generate(np.random.default_rng(4), "medium")
    path = episode.instruction.split("/work/")[1].split(" in the text editor")[0]
    untouched = _untouched(episode)
    opened = dataclasses.replace(untouched, windows=(f"~/{path} - Mousepad", "reports"))
    edited = dataclasses.replace(untouched, windows=(f"*~/{path} - Mousepad",))
    other = next(p for p in episode.files if p != path)
    wrong = dataclasses.replace(untouched, windows=(f"~/{other} - Mousepad",))
    assert [episode.score(state)[:2] for state in (opened, edited, wrong, untouched)] == [
        (1.0, True), (1.0, True), (0.0, False), (0.0, False)]


def test_the_desktop_refuses_the_local_backend():
    with pytest.raises(SandboxUnavailable, match="only in docker"):
        DesktopEnv(task="WriteFile", backend="local")
    with pytest.raises(ValueError, match="unknown desktop task"):
        DesktopEnv(task="Solitaire")


# -- on the desktop, in docker sandboxes -------------------------------------------------------------------

def _last_words(played: Any) -> list[tuple[str, str | None, str]]:
    """What a failed episode's last turns did and were told (their actions, errors and the text answered)."""
    return [(turn.action[-200:], turn.action_error, " ".join(m.text for m in turn.observation)[-300:])
            for turn in played.turns[-3:]]


async def _play(env: DesktopEnv, policy: TextPolicy, seed: int, difficulty: str) -> Any:
    return await run_episode(env, policy, Task(env_id=env.task.env_id, seed=seed, difficulty=difficulty))


async def _play_all(jobs: list[tuple[str, str, TextPolicy, dict[str, Any]]], seed: int) -> list[Any]:
    """Play each (task, difficulty, policy, env kwargs) once, :data:`PARALLEL` at a time."""
    gate = asyncio.Semaphore(PARALLEL)

    async def one(name: str, difficulty: str, policy: TextPolicy, kwargs: dict[str, Any]) -> Any:
        async with gate:
            env = DesktopEnv(task=name, **kwargs)
            try:
                return await _play(env, policy, seed, difficulty)
            finally:
                await env.aclose()

    return await asyncio.gather(*(one(*job) for job in jobs))


@pytest.mark.docker
@pytest.mark.parametrize("every_difficulty", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_the_oracle_solves_every_task(docker_engine, every_difficulty):
    # the default run plays each task at one difficulty, taking turns (each difficulty comes up four times)
    jobs = [(name, difficulty, OraclePolicy(), {"accessibility": name != "MoveFiles"})
            for i, name in enumerate(TASKS) for difficulty in DIFFICULTIES
            if every_difficulty or difficulty == DIFFICULTIES[i % len(DIFFICULTIES)]]
    played = asyncio.run(_play_all(jobs, seed=1))
    failed = [(job[:2], t.status, t.error, t.reward, _last_words(t)) for job, t in zip(jobs, played, strict=True)
              if not t.success]
    assert not failed


@pytest.mark.docker
def test_a_random_policy_scores_far_below(docker_engine):
    names = ("WriteFile", "RenameFiles", "SortLines", "RunScript")
    jobs = [(name, "easy", RandomPolicy(), {"max_turns": 8}) for name in names]
    played = asyncio.run(_play_all(jobs, seed=2))
    assert all(t.status == "ok" for t in played), [t.error for t in played]
    assert sum(t.reward for t in played) / len(played) < 0.25
    assert not any(t.success for t in played)


def _png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the filtered scanlines of an 8-bit RGB PNG without interlacing."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(data):
        (size,) = struct.unpack(">I", data[at:at + 4])
        kind = data[at + 4:at + 8]
        chunks[kind] = chunks.get(kind, b"") + data[at + 8:at + 8 + size]
        at += 12 + size
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, colour, interlace) == (8, 2, 0)
    return width, height, zlib.decompress(chunks[b"IDAT"])


@pytest.mark.docker
def test_screenshots_are_pngs_of_the_configured_size_showing_the_application(docker_engine):
    env = DesktopEnv(task="SortLines", width=1280, height=800)
    try:
        observation, _ = env.reset(seed=0, options={"difficulty": "easy"})
        image = next(p for p in observation[-1].content if isinstance(p, ImagePart))
        width, height, raw = _png_pixels(env.image)
        assert (width, height) == (1280, 800) and image.data
        assert len(raw) == height * (1 + 3 * width)
        rows = [raw[y * (1 + 3 * width) + 1:(y + 1) * (1 + 3 * width)] for y in range(0, height, 8)]
        colours = {row[x:x + 3] for row in rows for x in range(0, 3 * width, 24)}
        assert len(colours) > 10, "the screen is (nearly) blank"
        assert '- window "~/' in observation[-1].text and "Mousepad\" [focused]" in observation[-1].text
        env.step(env.format_call("key", combo="ctrl+a"))
        env.step(env.format_call("type", text="changed"))
        assert _png_pixels(env.image)[:2] == (1280, 800) and _png_pixels(env.image)[2] != raw
        assert '- window "*~/' in env.elements
    finally:
        env.close()


@pytest.mark.docker
def test_text_no_key_can_type_is_an_error_observation_on_the_desktop(docker_engine):
    """A NUL byte once reached xdotool's argv and broke the desktop helper (an infrastructure error)."""
    from tests.envs.gui.test_gui_env import UNTYPABLE_TEXTS

    env = agentgym.make("gui/DesktopAddLines-v0")
    try:
        env.reset(seed=0)
        for text in UNTYPABLE_TEXTS:
            messages, _, terminated, _, info = env.step(env.format_call("type", text=text))
            assert "cannot type the control character" in messages[-1].text and not terminated
        messages, _, terminated, _, info = env.step('<tool_call>{"name": "type", "arguments": {"text": "\\udfff"}}</tool_call>')
        assert "lone surrogate" in messages[-1].text and not terminated
        messages, _, _, _, info = env.step(env.format_call("type", text="typed"))
        assert info["action_error"] is None
    finally:
        env.close()


@pytest.mark.docker
def test_the_same_seed_and_actions_give_the_same_screens(docker_engine):
    env = DesktopEnv(task="RenameFiles")
    try:
        seen = []
        for _ in range(2):
            env.reset(seed=3, options={"difficulty": "medium"})
            images = [env.image]
            for _ in range(4):
                env.step(env.oracle_action())
                images.append(env.image)
            seen.append(images)
        differing = [step for step, (first, second) in enumerate(zip(*seen, strict=True)) if first != second]
        assert not differing, f"the screens after steps {differing} differ"
        assert len(set(seen[0])) >= 3
    finally:
        env.close()


SLOW_FOLDER = 4000
"""Files in the folder of :func:`_slow_folder`: enough that the file manager reads it after it focuses its list."""


def _slow_folder(rng: np.random.Generator, difficulty: str) -> desktop_episode.Episode:
    """The file manager on a folder that takes long to read: thousands of ``.tmp`` files, whose type is guessed
    from their content."""
    files = {f"f{index:04d}.tmp": "A line of text.\n" for index in range(SLOW_FOLDER)}
    return desktop_episode.Episode(instruction="Look at the files.", files=files,
                                   apps=(desktop_episode.FILE_MANAGER,), check=lambda state: [0.0],
                                   plan=(("done", {}),))


@pytest.mark.docker
def test_the_file_manager_starts_in_one_state_however_long_its_folder_takes(docker_engine, monkeypatch):
    """PCManFM focuses its file list in idle time while a thread reads the folder. When the focus came first
    the list had no cursor row, so a first screen showed the cursor's frame on the first row or not by chance,
    and DeleteFiles (its .tmp files are read to type them) failed Gymnasium's reset check. Started, the list
    has its cursor on the first row however long the folder took, and ctrl+Home (which puts it there) changes
    nothing."""
    monkeypatch.setitem(TASKS, "SlowFolder", DesktopTask("SlowFolder", "-", _slow_folder))
    env = DesktopEnv(task="SlowFolder")
    try:
        env.reset(seed=0)
        first = env.image
        env.step(env.format_call("key", combo="ctrl+Home"))
        assert env.image == first, "the file manager started without its cursor on the first row"
    finally:
        env.close()


@pytest.mark.docker
@pytest.mark.parametrize("name", [pytest.param(name, marks=[] if name == "DeleteFiles" else pytest.mark.slow)
                                  for name in sorted(TASKS)])
def test_unseeded_resets_after_a_seeded_one_repeat(docker_engine, name):
    """Gymnasium's check: reset(seed=123), reset(), then both again; the two pairs of observations (text and
    screenshot) must be equal. DeleteFiles failed it on the file manager's start-up (see above)."""
    env = agentgym.make(TASKS[name].env_id)
    try:
        check_reset_seed_determinism(env)
    finally:
        env.close()


@pytest.mark.docker
def test_checks_give_partial_credit_on_files_in_a_sandbox(docker_engine):
    episode = TASKS["MoveFiles"].generate(np.random.default_rng(5), "medium")
    moving = sorted(episode.changes)
    target = episode.dirs[0]
    decoy = next(path for path in episode.keep if "/" not in path)
    assert len(moving) == 3

    async def check() -> tuple[float, bool, list[float], list[str]]:
        sandbox = await open_sandbox("docker", SandboxSpec(image="agentgym/desktop", memory_mb=256))
        try:
            await lay_down(sandbox, episode)
            command = f"mv {moving[0]} {target}/ && cp {moving[1]} {target}/ && rm {decoy}"
            done = await sandbox.exec(["sh", "-c", command], timeout=10)
            assert done.ok, done.stderr
            return episode.score(await read_state(sandbox))
        finally:
            await sandbox.close()

    reward, success, parts, damaged = asyncio.run(check())
    assert parts == [1.0, 0.5, 0.0] and damaged == [decoy]
    assert reward == pytest.approx((1.0 + 0.5 + 0.0) / 3 - 0.25) and not success

    script = TASKS["RunScript"].generate(np.random.default_rng(5), "easy")
    path = next(iter(script.files))
    state = State(files={**script.files, "result.txt": "wrong\n"}, modes={path: 0o755}, dirs=frozenset())
    assert script.score(state)[:3] == (0.5, False, [1.0, 0.0])


def _live_sandboxes() -> set[str]:
    from agentgym.sandboxes.docker_engine import client

    return {c["Names"][0].lstrip("/") for c in client().api.containers(all=True)}


@pytest.mark.docker
def test_closing_the_env_removes_its_sandbox(docker_engine):
    env = DesktopEnv(task="CreateFolders", pool_size=0)
    env.reset(seed=0)
    sandbox = env.sandbox.id
    assert sandbox in _live_sandboxes()
    env.close()
    assert sandbox not in _live_sandboxes()


class _KillsTheDesktop(TextPolicy):
    """Plays the oracle, but removes the sandbox's container before its second action."""

    async def act(self, env: Any, messages: Any, rng: np.random.Generator) -> str:
        if env.turn == 1:
            from agentgym.sandboxes.docker_engine import client

            client().api.remove_container(env.sandbox.id, force=True)
        return env.oracle_action()


@pytest.mark.docker
def test_a_dead_sandbox_is_an_infrastructure_error_and_the_next_episode_runs(docker_engine):
    async def both() -> tuple[Any, Any]:
        env = DesktopEnv(task="DeleteFiles")
        try:
            broken = await _play(env, _KillsTheDesktop(), 0, "medium")
            fine = await _play(env, OraclePolicy(), 0, "medium")
            return broken, fine
        finally:
            await env.aclose()

    broken, fine = asyncio.run(both())
    assert broken.status == "error" and "sandbox" in (broken.error or "").lower()
    assert fine.status == "ok" and fine.success
