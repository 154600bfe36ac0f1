"""MCP servers as environments: the example issue tracker on both sandbox backends, the function-based
``McpEnv`` over a test server, and the rules for tool errors, crashes, kills and timeouts."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mcp")

import agentgym
from agentgym import Task, TextPolicy, run_episode
from agentgym.envs.mcp.client import McpServerError
from agentgym.envs.mcp.env import McpEnv, McpEpisode, McpTask, python_server
from agentgym.sandboxes import SandboxUnavailable, backend_module

COUNTER = {"script": str(Path(__file__).with_name("mcp_servers") / "counter.py")}


@pytest.fixture(autouse=True)
def _packages_visible_to_local_sandboxes(request: pytest.FixtureRequest) -> None:
    """A local sandbox mounts this interpreter's packages for the servers: where other users of the host cannot
    read them (a checkout under a closed home), the local tests skip, naming the closed folder."""
    callspec = getattr(request.node, "callspec", None)
    if "local" in request.fixturenames or (callspec is not None and callspec.params.get("backend") == "local"):
        try:
            backend_module("local").check(python_server(COUNTER["script"]).spec)
        except SandboxUnavailable as exc:
            pytest.skip(str(exc))


def counter_task(rng: np.random.Generator, difficulty: str) -> McpTask:
    target = int(rng.integers(2, 6))
    return McpTask(f"Raise the counter from 0 to {target}.", data=target)


async def counter_verifier(episode: McpEpisode) -> bool:
    return int(await episode.client.read_resource("counter://value")) == episode.task.data


def counter_env(**kwargs) -> McpEnv:
    return McpEnv(server={**COUNTER, **kwargs.pop("server", {})}, tasks=counter_task, verifier=counter_verifier,
                  backend="local", **kwargs)


def _play_oracle(env: agentgym.Env, seed: int, difficulty: str) -> tuple[float, dict]:
    env.reset(seed=seed, options={"difficulty": difficulty})
    total, over, info = 0.0, False, {}
    while not over:
        _, reward, terminated, truncated, info = env.step(env.oracle_action())
        assert info["action_error"] is None
        total, over = total + reward, terminated or truncated
    return total, info


def test_the_example_servers_oracle_solves_every_difficulty(backend):
    env = agentgym.make("mcp/IssueTracker-v0", backend=backend)
    try:
        for difficulty in env.difficulties:
            for seed in range(3):
                total, info = _play_oracle(env, seed, difficulty)
                assert (total, info["success"]) == (1.0, True), (difficulty, seed, env.task.prompt)
    finally:
        env.close()


def test_the_agent_sees_the_servers_tools_with_their_own_schemas(local):
    env = agentgym.make("mcp/IssueTracker-v0", backend="local", parser="pythonic")
    try:
        tools = {spec.name: spec for spec in env.tools}
        assert list(tools) == ["list_issues", "search_issues", "get_issue", "close_issue", "add_label", "assign",
                               "submit"]
        listing = tools["list_issues"].parameters["properties"]
        assert listing["state"]["enum"] == ["open", "closed", "all"] and listing["state"]["default"] == "open"
        assert tools["get_issue"].description.startswith("Show one issue in full")
        assert tools["get_issue"].parameters["required"] == ["issue_id"]
        messages, _ = env.reset(seed=1)
        assert "issue-tracker server" in messages[0].content and messages[1].role == "user"
        assert env.format_call("get_issue", issue_id=7) == "get_issue(issue_id=7)"
    finally:
        env.close()


def test_a_failed_tool_call_is_an_observation_and_the_episode_goes_on(local):
    env = agentgym.make("mcp/IssueTracker-v0", backend="local", parser="hermes")
    try:
        env.reset(seed=2, options={"difficulty": "easy"})
        cases = {
            '{"name": "get_issue", "arguments": {"issue_id": 99999}}': "there is no issue #99999",
            '{"name": "close_issue", "arguments": {"issue_id": "abc"}}': "'issue_id': 'abc' is not of type 'integer'",
            '{"name": "close_issue", "arguments": {}}': "'issue_id' is a required property",
            '{"name": "delete_everything", "arguments": {}}': "unknown tool 'delete_everything'",
        }
        for call, error in cases.items():
            observation, reward, terminated, truncated, info = env.step(f"<tool_call>{call}</tool_call>")
            assert error in observation[0].text and error in info["action_error"]
            assert (reward, terminated) == (0.0, False)
        assert [call.is_error for call in env.calls] == [True]  # only the call the server itself refused
        while not (terminated or truncated):
            _, reward, terminated, truncated, info = env.step(env.oracle_action())
        assert (reward, info["success"]) == (1.0, True)
    finally:
        env.close()


def test_a_verifier_function_judges_the_servers_final_state(local):
    env = counter_env()
    try:
        env.reset(seed=0)
        target = env.task.data
        for _ in range(target):
            env.step(env.format_call("increment"))
        _, reward, terminated, _, info = env.step(env.format_call("submit", answer="done"))
        assert (reward, terminated, info["success"]) == (1.0, True, True)
        assert [(call.name, call.result) for call in env.calls][-1] == ("increment", f"The counter is {target}.")
        env.reset(seed=0)  # a fresh server: the count starts again from 0
        env.step(env.format_call("increment", by=target + 1))
        _, reward, *_ = env.step(env.format_call("submit", answer="done"))
        assert reward == 0.0
    finally:
        env.close()


def test_tasks_and_verifier_may_be_named_by_module_path(local):
    env = McpEnv(server=COUNTER, tasks="tests.envs.test_mcp_env:counter_task",
                 verifier="tests.envs.test_mcp_env:counter_verifier", backend="local")
    try:
        env.reset(seed=3)
        env.step(env.format_call("increment", by=env.task.data))
        assert env.step(env.format_call("submit", answer="ok"))[1] == 1.0
    finally:
        env.close()


class _Scripted(TextPolicy):
    """Does something to the server, then calls a tool, each turn."""

    def __init__(self, before, tool: str, **arguments) -> None:
        self.before, self.tool, self.arguments = before, tool, arguments

    async def act(self, env, messages, rng):
        await self.before(env)
        return env.format_call(self.tool, **self.arguments)


async def _kill(env: McpEnv) -> None:
    await env.client.process.kill()
    await env.client.process.wait(10)


async def _nothing(env: McpEnv) -> None:
    pass


def _episode(env: McpEnv, before, tool: str = "increment", **arguments) -> agentgym.Trajectory:
    async def play() -> agentgym.Trajectory:
        try:
            return await run_episode(env, _Scripted(before, tool, **arguments), Task(env_id="test/Counter-v0", seed=0))
        finally:
            await env.aclose()

    return asyncio.run(play())


def test_a_killed_server_is_an_infrastructure_error(backend):
    env = McpEnv(server=COUNTER, tasks=counter_task, verifier=counter_verifier, backend=backend)
    trajectory = _episode(env, _kill)
    assert trajectory.status == "error"
    assert "MCP server" in trajectory.error and "status 137" in trajectory.error


async def _kill_everything_from_a_shell(env: McpEnv) -> None:
    """What an agent given a shell could do to the server: kill every process it may signal (the shell too)."""
    await env.sandbox.exec("pkill -9 python3; pkill -9 -f counter; kill -9 -1", timeout=20)


def test_the_agents_shell_cannot_kill_the_server(backend):
    """The server is a service of the environment, run as another user than the agent's commands."""
    env = McpEnv(server=COUNTER, tasks=counter_task, verifier=counter_verifier, backend=backend, max_turns=3)
    trajectory = _episode(env, _kill_everything_from_a_shell)
    assert trajectory.status != "error", trajectory.error
    assert [turn.observation[0].text for turn in trajectory.turns] == [f"The counter is {n}." for n in (1, 2, 3)]


def test_a_server_that_crashes_in_a_tool_is_an_infrastructure_error(local):
    trajectory = _episode(counter_env(), _nothing, "crash")
    assert trajectory.status == "error"
    assert "MCP server failed on tools/call crash" in trajectory.error and "status 3" in trajectory.error


def test_a_server_that_does_not_answer_in_time_is_an_infrastructure_error(local):
    """A request's timeout does not bound the server's start, which may take longer on a busy machine."""
    trajectory = _episode(counter_env(server={"timeout": 2.0}), _nothing, "stall", seconds=30)
    assert trajectory.status == "error" and "did not answer tools/call stall within 2 s" in trajectory.error
    quick = _episode(counter_env(server={"timeout": 2.0}), _nothing, "stall", seconds=0.1)
    assert quick.status != "error" and quick.turns[0].observation[0].text == "done waiting"


def test_a_server_that_does_not_start_in_time_says_so(local):
    # It never exits by itself: the start gives up on it and stops it, rather than waiting for it to end.
    silent = {"command": ["python3", "-c", "import time; time.sleep(10**6)"], "start_timeout": 1.0}
    with pytest.raises(McpServerError, match="did not finish starting within 1 s"):
        McpEnv(server=silent, tasks=counter_task, verifier=counter_verifier, backend="local")


def test_a_server_that_cannot_start_says_why(local):
    broken = {"command": ["python3", "-c", "import sys; sys.exit('this server is broken')"], "timeout": 10}
    with pytest.raises(McpServerError, match="this server is broken"):
        McpEnv(server=broken, tasks=counter_task, verifier=counter_verifier, backend="local")


def test_a_server_tool_named_submit_is_refused(local):
    with tempfile.TemporaryDirectory() as folder:  # directly under /tmp, so the sandbox may mount it
        Path(folder).chmod(0o755)
        script = Path(folder) / "submitting.py"
        script.write_text("from mcp.server.mcpserver import MCPServer\napp = MCPServer('s')\n"
                          "@app.tool()\ndef submit(answer: str) -> str:\n    'Take over.'\n    return answer\n"
                          "app.run()\n")
        script.chmod(0o644)
        with pytest.raises(McpServerError, match="tool named 'submit'"):
            McpEnv(server={"script": str(script)}, tasks=counter_task, verifier=counter_verifier, backend="local")


def test_agentgym_eval_runs_the_oracle_and_random_through_the_rollout(local, tmp_path):
    from click.testing import CliRunner

    from agentgym.cli import cli

    rates = {}
    for policy in ("oracle", "random"):
        result = CliRunner().invoke(cli, ["eval", "mcp/IssueTracker-v0", "--policy", policy, "--episodes", "6",
                                          "--concurrency", "3", "--out", str(tmp_path / policy)])
        assert result.exit_code == 0, result.output
        summary = json.loads((tmp_path / policy / "summary.json").read_text())
        assert summary["infra_errors"] == 0
        rates[policy] = summary["success_rate"]
    assert rates["oracle"] == 1.0 and rates["random"] < 0.5
