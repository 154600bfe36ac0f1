"""tools/PythonSandbox-v0 and tools/Shell-v0: task generators and checks on the host, then whole episodes in
local sandboxes (skipped where the local backend cannot run)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import agentgym
from agentgym import Task, TextPolicy, run_episode
from agentgym.cli import cli
from agentgym.envs import sandbox_io
from agentgym.envs.sandbox_io import OUTPUT_CHARS, describe
from agentgym.envs.tools import python_sandbox, shell
from agentgym.envs.tools.python_sandbox import PythonSandboxEnv, answers_match
from agentgym.envs.tools.shell import ShellEnv, Snapshot
from agentgym.sandboxes import ExecResult, SandboxError, backend_module

DIFFICULTIES = ("easy", "medium", "hard")
HOST_PYTHON = "/usr/bin/python3"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


# -- on the host, no sandbox ------------------------------------------------------------------------------

@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_python_tasks_are_deterministic_and_their_programs_print_the_answer(difficulty, tmp_path):
    for seed in range(15):
        task = python_sandbox.generate_task(np.random.default_rng(seed), difficulty)
        assert task == python_sandbox.generate_task(np.random.default_rng(seed), difficulty)
        workdir = tmp_path / str(seed)
        workdir.mkdir()
        _write(workdir, task.files)
        ran = subprocess.run([HOST_PYTHON, "-c", task.program], cwd=workdir, capture_output=True, text=True,
                             check=False, timeout=60)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == task.answer, task.question


def test_python_tasks_vary_with_the_seed():
    for difficulty in DIFFICULTIES:
        tasks = [python_sandbox.generate_task(np.random.default_rng(seed), difficulty) for seed in range(20)]
        assert len({(task.question, *task.files.values()) for task in tasks}) == 20
        assert len({task.answer for task in tasks}) >= 10


def test_answers_match_numbers_within_tolerance_and_text_exactly():
    number = python_sandbox.Task("q", "1234.50", "", tolerance=python_sandbox.CENTS)
    assert answers_match("1234.5", number) and answers_match(" 1,234.51 ", number)
    assert not answers_match("1234.6", number) and not answers_match("nan", number)
    assert not answers_match("twelve", number) and not answers_match("inf", number)
    integer = python_sandbox.Task("q", "42", "")
    assert answers_match("42", integer) and answers_match("42.0", integer)
    assert not answers_match("43", integer)
    text = python_sandbox.Task("q", "north", "", tolerance=None)
    assert answers_match("  north\n", text)
    assert not answers_match("North", text) and not answers_match("north.", text)


def test_describe_cuts_long_output_and_says_so():
    result = ExecResult(exit_code=1, stdout="x" * 10_000, stderr="y" * 9_000 + "Error: last", timed_out=False,
                        duration=0.1)
    text = describe(result, 10)
    assert text.startswith("Exit status: 1")
    assert "x" * OUTPUT_CHARS in text and "x" * (OUTPUT_CHARS + 1) not in text
    assert "only the first" in text and "only the last" in text and text.endswith("Error: last")
    timed_out = describe(ExecResult(124, "", "", True, 10.0), 10)
    assert timed_out.startswith("Timed out") and "stdout: (empty)" in timed_out


def test_task_files_travel_as_one_tar_with_fixed_times(tmp_path):
    files = {"b/x.txt": "x\n", "a/deep/er/y.csv": "1,2\n", "a/z.md": "héllo", "top.txt": ""}
    archive = tmp_path / "files.tar"
    archive.write_bytes(sandbox_io._tar(files))
    (tmp_path / "out").mkdir()
    subprocess.run(["tar", "-x", "--no-same-owner", "-f", str(archive)], cwd=tmp_path / "out", check=True)
    for name, text in files.items():
        assert (tmp_path / "out" / name).read_text() == text
    for path in [tmp_path / "out" / name for name in ("a", "a/deep", "a/deep/er", "b", *files)]:
        assert path.stat().st_mtime == sandbox_io.FILE_TIME, path


class _Answers:
    """A stand-in sandbox whose every command exits with ``code`` and prints ``stdout`` and ``stderr``."""

    id = "fake"

    def __init__(self, code: int, stdout: str, stderr: str = "") -> None:
        self.result = ExecResult(code, stdout, stderr, timed_out=False, duration=0.0)
        self.ran: tuple[object, object] | None = None

    async def exec(self, cmd: list[str], *, timeout: float, stdin: str | None = None) -> ExecResult:
        self.ran = (cmd, stdin)
        return self.result


def test_read_back_gives_the_probe_its_request_and_returns_its_json_or_says_why_not():
    sandbox = _Answers(0, '{"files": {"a": "x"}}')
    assert asyncio.run(sandbox_io.read_back(sandbox, "PROBE", {"limit": 5})) == {"files": {"a": "x"}}
    assert sandbox.ran == (["python3", "-I", "-c", "PROBE"], '{"limit": 5}')
    for code, stdout in ((1, "{}"), (0, "Traceback (most recent call last)"), (0, "")):
        with pytest.raises(sandbox_io.ReadBackError, match="could not read the files back from sandbox fake: x*denied$") as raised:
            asyncio.run(sandbox_io.read_back(_Answers(code, stdout, "x" * 400 + "denied"), "PROBE", {}))
        assert len(raised.value.stderr) == 300 and raised.value.stderr.endswith("denied")
        assert isinstance(raised.value, SandboxError)


def _host_snapshot(root: Path, task: shell.Task) -> Snapshot:
    reads = sorted({p for part in task.parts for p in part.reads})
    lists = sorted({p for part in task.parts for p in part.lists})
    request = {"files": reads, "dirs": lists, "limit": shell.READ_LIMIT, "count": shell.LIST_LIMIT}
    ran = subprocess.run([HOST_PYTHON, "-c", shell._PROBE], cwd=root, input=json.dumps(request),
                         capture_output=True, text=True, check=True, timeout=60)
    found = json.loads(ran.stdout)
    return Snapshot({p: found["files"].get(p) for p in reads}, {p: found["dirs"].get(p) for p in lists})


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_shell_tasks_score_zero_untouched_and_one_after_the_oracle_command(difficulty, tmp_path):
    for seed in range(15):
        task = shell.generate_task(np.random.default_rng(seed), difficulty)
        again = shell.generate_task(np.random.default_rng(seed), difficulty)
        assert (again.files, again.command, shell.instructions(again)) == (task.files, task.command,
                                                                           shell.instructions(task))
        assert len(task.parts) == (2 if difficulty == "hard" else 1)
        root = tmp_path / str(seed)
        root.mkdir()
        _write(root, task.files)
        untouched = _host_snapshot(root, task)
        assert [part.score(untouched) for part in task.parts] == [0.0] * len(task.parts), task.command
        ran = subprocess.run(["bash", "-c", task.command], cwd=root, capture_output=True, text=True,
                             check=False, timeout=60)
        assert ran.returncode == 0 and not ran.stderr, (task.command, ran.stderr)
        done = _host_snapshot(root, task)
        assert [part.score(done) for part in task.parts] == [1.0] * len(task.parts), shell.instructions(task)


def test_shell_fix_gives_partial_credit_and_nothing_when_other_lines_change():
    rng = np.random.default_rng(3)
    files: dict[str, str] = {}
    part = shell._fix_json(rng, files, True)
    original = json.loads(files["config/service.json"])
    wanted = {(s, k): json.loads(v) for s, k, v in _targets(part.instruction)}
    fixed = json.loads(json.dumps(original))
    (section, key), value = next(iter(wanted.items()))
    fixed[section][key] = value
    assert part.score(Snapshot({"config/service.json": json.dumps(fixed)}, {})) == pytest.approx(1 / 3)
    other = next((s, k) for s in fixed for k in fixed[s] if (s, k) not in wanted)
    fixed[other[0]][other[1]] = "changed"
    assert part.score(Snapshot({"config/service.json": json.dumps(fixed)}, {})) == 0.0
    assert part.score(Snapshot({"config/service.json": "{not json"}, {})) == 0.0


def _targets(instruction: str) -> list[tuple[str, str, str]]:
    listed = instruction.split("wrong: ")[1].split(". Fix")[0]
    return [(name.split(".")[0], name.split(".")[1], value)
            for name, value in (item.split(" must be ") for item in listed.split(", "))]


# -- episodes in local sandboxes --------------------------------------------------------------------------

def _episode(env: agentgym.Env, seed: int, difficulty: str) -> tuple[float, dict]:
    env.reset(seed=seed, options={"difficulty": difficulty})
    total, terminated, truncated, info = 0.0, False, False, {}
    while not (terminated or truncated):
        _, reward, terminated, truncated, info = env.step(env.oracle_action())
        assert info["action_error"] is None
        total += reward
    return total, info


def _run(env: agentgym.Env, source: str) -> str:
    """What the environment's command tool answers to ``source``."""
    call = env.format_call("bash", command=source) if isinstance(env, ShellEnv) else \
        env.format_call("run_python", code=source)
    observation, *_ = env.step(call)
    return observation[0].text


@pytest.mark.parametrize("env_class", [PythonSandboxEnv, ShellEnv])
def test_the_oracle_solves_every_difficulty(local, env_class):
    env = env_class(backend="local")
    try:
        for difficulty in DIFFICULTIES:
            for seed in (0, 1):
                reward, info = _episode(env, seed, difficulty)
                assert info["success"] and reward == 1.0 and env.turn == 2, (difficulty, seed)
    finally:
        env.close()


def test_python_oracle_answers_what_its_program_printed(local):
    env = PythonSandboxEnv(backend="local")
    try:
        env.reset(seed=4, options={"difficulty": "medium"})
        observation, *_ = env.step(env.oracle_action())
        printed = observation[0].text.split("stdout:\n")[1].split("\nstderr:")[0].strip()
        assert printed == env.task.answer
        assert env.oracle_action() == env.format_call("answer", value=printed)
    finally:
        env.close()


def test_python_wrong_answer_fails_and_agent_errors_are_tool_results(local):
    env = PythonSandboxEnv(backend="local")
    try:
        env.reset(seed=1, options={"difficulty": "hard"})
        observation, reward, terminated, _, info = env.step(env.format_call("run_python", code="1 / 0"))
        assert not terminated and info["action_error"] is None and reward == 0.0
        assert observation[0].text.startswith("Exit status: 1") and "ZeroDivisionError" in observation[0].text
        listing = _run(env, "import os; print(sorted(os.listdir()))")
        assert "customers.csv" in listing or "access.log" in listing
        observation, reward, terminated, _, info = env.step(env.format_call("answer", value="not the answer"))
        assert terminated and reward == 0.0 and not info["success"]
        assert observation[0].text.startswith("Incorrect")
    finally:
        env.close()


def test_a_program_that_loops_forever_times_out_and_the_episode_goes_on(local):
    env = PythonSandboxEnv(backend="local", time_limit=1)
    try:
        env.reset(seed=0)
        loop = env.format_call("run_python", code="while True:\n    pass")
        observation, _, terminated, truncated, info = env.step(loop)
        assert observation[0].text.startswith("Timed out: stopped after 1 s")
        assert not (terminated or truncated) and info["action_error"] is None
        env.step(env.format_call("run_python", code=env.task.program))
        _, reward, terminated, _, info = env.step(env.oracle_action())
        assert terminated and reward == 1.0 and info["success"]
    finally:
        env.close()


def test_a_shell_command_that_hangs_times_out_and_the_episode_goes_on(local):
    env = ShellEnv(backend="local", time_limit=1)
    try:
        env.reset(seed=0)
        observation, _, terminated, _, _ = env.step(env.format_call("bash", command="echo started; sleep 60"))
        assert observation[0].text.startswith("Timed out") and "started" in observation[0].text
        assert not terminated
        observation, _, terminated, _, info = env.step(env.format_call("bash", command="no-such-command"))
        assert "Exit status: 127" in observation[0].text and not terminated and info["action_error"] is None
    finally:
        env.close()


def test_shell_untouched_files_fail_and_half_a_hard_task_earns_half(local):
    env = ShellEnv(backend="local")
    try:
        env.reset(seed=2, options={"difficulty": "easy"})
        observation, reward, terminated, _, info = env.step(env.format_call("submit"))
        assert terminated and reward == 0.0 and not info["success"]
        assert observation[0].text.startswith("Not everything is done")
        env.reset(seed=2, options={"difficulty": "hard"})
        env.step(env.format_call("bash", command=env.task.parts[0].command))
        _, reward, terminated, _, info = env.step(env.format_call("submit"))
        assert terminated and reward == pytest.approx(0.5) and not info["success"]
    finally:
        env.close()


def test_shell_find_with_a_wrong_path_fails(local):
    env = ShellEnv(backend="local")
    try:
        for seed in range(20):
            env.reset(seed=seed, options={"difficulty": "easy"})
            if "answer.txt" in env.task.parts[0].reads:
                break
        env.step(env.format_call("bash", command="echo docs/nowhere.md > answer.txt"))
        _, reward, terminated, _, info = env.step(env.format_call("submit"))
        assert terminated and reward == 0.0 and not info["success"]
    finally:
        env.close()


@pytest.mark.parametrize(("env_class", "write", "look", "before", "after"), [
    (PythonSandboxEnv, "open('left.txt', 'w').write('x'); open('/tmp/left', 'w').write('x')",
     "import os; print(os.path.exists('left.txt'), os.path.exists('/tmp/left'))", "True True", "False False"),
    (ShellEnv, "echo x > left.txt; echo x > /tmp/left", "ls left.txt /tmp/left 2>/dev/null | wc -l", "2",
     "0"),
])
def test_nothing_carries_over_from_one_episode_to_the_next(local, env_class, write, look, before, after):
    env = env_class(backend="local")
    try:
        env.reset(seed=0)
        first = env.sandbox.id
        _run(env, write)
        assert f"stdout:\n{before}\n" in _run(env, look)
        env.reset(seed=0)
        assert env.sandbox.id != first
        assert f"stdout:\n{after}\n" in _run(env, look)
    finally:
        env.close()


@pytest.mark.parametrize("env_class", [PythonSandboxEnv, ShellEnv])
def test_close_leaves_no_sandbox_behind(local, env_class):
    env = env_class(backend="local")
    env.reset(seed=0)
    env.step(env.oracle_action())
    (pool,) = env._pools.values()
    ours = {env.sandbox.id, *(s.id for s in pool._idle), *(s.id for s in pool._leased)}
    env.close()
    env.close()
    assert pool.live == 0
    assert not ours & set(backend_module("local").live())


class _KillsTheSandbox(TextPolicy):
    """Closes the episode's sandbox under the environment, then runs a program."""

    async def act(self, env, messages, rng):
        await env.sandbox.close()
        return env.format_call("run_python", code="print(1)")


def test_a_sandbox_failure_is_an_error_not_a_tool_result(local):
    env = PythonSandboxEnv(backend="local")
    try:
        env.reset(seed=0)
        asyncio.run(env.sandbox.close())
        with pytest.raises(SandboxError):
            env.step(env.format_call("run_python", code="print(1)"))
    finally:
        env.close()

    async def play() -> agentgym.Trajectory:
        episode_env = PythonSandboxEnv(backend="local")
        try:
            task = Task(env_id="tools/PythonSandbox-v0", seed=0)
            return await run_episode(episode_env, _KillsTheSandbox(), task)
        finally:
            await episode_env.aclose()

    trajectory = asyncio.run(play())
    assert trajectory.status == "error" and "closed" in trajectory.error


@pytest.mark.parametrize("env_id", ["tools/PythonSandbox-v0", "tools/Shell-v0"])
def test_agentgym_check_passes(local, env_id):
    result = CliRunner().invoke(cli, ["check", env_id, "--episodes", "2"])
    assert result.exit_code == 0, result.output
    assert "pass" in result.output


# -- what the agent does to its own sandbox is its own outcome, on both backends --------------------------

WRECKS = {
    "kill every process it can": {ShellEnv: "kill -9 -1",
                                  PythonSandboxEnv: "import os, signal\nos.kill(-1, signal.SIGKILL)"},
    "fill the disk past its limit": {ShellEnv: "head -c 3000M /dev/zero > fill; echo $? >&2; rm fill",
                                     PythonSandboxEnv: "import os\n"
                                                       "try:\n"
                                                       "    with open('fill', 'wb') as f:\n"
                                                       "        for _ in range(3000):\n"
                                                       "            f.write(bytes(1 << 20))\n"
                                                       "finally:\n"
                                                       "    os.remove('fill')"},
}
"""Commands that wreck the sandbox they run in; the disk is emptied again at the end, so that the next
command (the Python one is written to the disk first) can run."""
ENV_IDS = {ShellEnv: "tools/Shell-v0", PythonSandboxEnv: "tools/PythonSandbox-v0"}


class _Script(TextPolicy):
    """Sends ``commands`` to the environment's command tool, one a turn, then gives up (submits, or answers
    wrongly), or with ``repeat`` sends the last command again until the episode ends; ``before(env, turn)``
    runs before each turn's action (a hand from outside the sandbox)."""

    def __init__(self, *commands: str, repeat: bool = False, before=None) -> None:
        self.commands, self.repeat, self.before, self.turn = commands, repeat, before, 0

    async def act(self, env, messages, rng):
        if self.before is not None:
            await self.before(env, self.turn)
        self.turn += 1
        if self.turn > len(self.commands) and not self.repeat:
            if isinstance(env, ShellEnv):
                return env.format_call("submit")
            return env.format_call("answer", value="not the answer")
        source = self.commands[min(self.turn, len(self.commands)) - 1]
        if isinstance(env, ShellEnv):
            return env.format_call("bash", command=source)
        return env.format_call("run_python", code=source)


def _play(env_class: type, policy: TextPolicy, backend: str) -> agentgym.Trajectory:
    """One episode through :func:`run_episode`, the path evaluation and training play every episode by."""
    async def play() -> agentgym.Trajectory:
        env = env_class(backend=backend, pool_size=1)
        try:
            task = Task(env_id=ENV_IDS.get(env_class, "tools/Shell-v0"), seed=0)
            return await run_episode(env, policy, task)
        finally:
            await env.aclose()

    return asyncio.run(play())


@pytest.mark.parametrize("env_class", [ShellEnv, PythonSandboxEnv])
@pytest.mark.parametrize("wreck", list(WRECKS))
def test_an_agent_that_wrecks_its_own_sandbox_reads_what_happened_and_is_scored(backend, wreck, env_class):
    """``kill -9 -1``, or a disk filled past ``disk_mb``: a result the agent reads, never an infrastructure
    error, and the episode goes on to be scored."""
    still_here = "echo still here" if env_class is ShellEnv else "print('still here')"
    trajectory = _play(env_class, _Script(WRECKS[wreck][env_class], still_here), backend)
    assert trajectory.status == "ok", trajectory.error
    assert not trajectory.success and trajectory.reward == 0.0 and len(trajectory.turns) == 3
    wrecked, after, end = (turn.observation[0].text for turn in trajectory.turns)
    assert wrecked.startswith("Exit status:"), wrecked
    if wreck == "fill the disk past its limit":
        assert "No space left on device" in wrecked, wrecked
    assert after.startswith("Exit status: 0") and "still here" in after, after
    assert end.startswith("Not everything is done" if env_class is ShellEnv else "Incorrect"), end


@pytest.mark.parametrize("command", ["chmod 000 /work", "setsid -f sh -c 'while :; do sleep 60 & done'"])
def test_a_shell_agent_that_keeps_its_files_from_being_read_fails_its_episode(backend, command):
    """A work dir closed to its own user, or every process slot taken by what the agent left running (which
    ``local`` ends with the command): when the check cannot read the files, that is the agent's failure, not
    an infrastructure error."""
    trajectory = _play(ShellEnv, _Script(command), backend)
    assert trajectory.status == "ok", trajectory.error
    assert not trajectory.success and trajectory.reward == 0.0 and len(trajectory.turns) == 2
    end = trajectory.turns[-1].observation[0].text
    unreadable, scored = "Error: your files could not be read back", "Not everything is done"
    if "chmod" in command:
        assert end.startswith(unreadable), end
    elif backend == "docker":  # whether the loop holds the last process slot as the check runs is a race
        assert end.startswith((unreadable, scored)), end
    else:
        assert end.startswith(scored), end


class _ShellOnItsMemory(ShellEnv):
    """Shell whose work dir takes from its memory limit (``disk_mb=None``): filling it can bring the docker
    sandbox down, as an agent could wherever the kernel kills the whole sandbox for its memory (gVisor)."""

    sandbox_spec = ShellEnv.sandbox_spec.model_copy(update={"disk_mb": None})


@pytest.mark.docker
def test_a_sandbox_the_agent_brought_down_ends_its_episode_as_its_failure(docker_engine):
    policy = _Script("head -c 3000M /dev/zero > fill", "echo still here", repeat=True)
    trajectory = _play(_ShellOnItsMemory, policy, "docker")
    assert trajectory.status == "ok", trajectory.error
    assert not trajectory.success and trajectory.reward == 0.0
    assert 2 <= len(trajectory.turns) <= 5  # the sandbox went down within a few commands, and that ended it
    last = trajectory.turns[-1]
    assert last.observation[0].text.startswith("Error: the sandbox was brought down by what ran in it")
    assert "memory" in last.action_error


async def _remove_from_outside(env, turn: int) -> None:
    """On the first turn: remove the episode's sandbox from outside a second later, while a command runs."""
    if turn:
        return
    sandbox_id = env.sandbox.id
    if env.backend == "docker":
        from agentgym.sandboxes.docker_engine import client

        def remove() -> None:
            client().api.remove_container(sandbox_id, force=True)
    else:
        from agentgym.sandboxes.local_sandbox import _destroy

        def remove() -> None:
            _destroy(sandbox_id)
    loop = asyncio.get_running_loop()
    loop.call_later(1.0, lambda: loop.run_in_executor(None, remove))


def test_a_sandbox_removed_from_outside_mid_episode_is_an_infrastructure_error(backend):
    trajectory = _play(ShellEnv, _Script("sleep 8; echo done", before=_remove_from_outside), backend)
    assert trajectory.status == "error", trajectory.turns
    assert trajectory.error.startswith("SandboxDied during env"), trajectory.error
