"""Evaluating models: the CLI on the torch engine, and a served model through the openai engine."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from agentgym import TaskSet, evaluate
from agentgym.inference import SamplingParams
from agentgym.inference.openai.engine import OpenAIEngine
from agentgym.policies.chat import ChatPolicy
from tests.inference.serving import thread_server

AGENTGYM = str(Path(sys.executable).with_name("agentgym"))


def agentgym(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([AGENTGYM, *args], capture_output=True, text=True, timeout=300)


def test_eval_runs_a_fresh_tiny_model_through_the_async_rollout(tiny_model_dir, tmp_path):
    # four turns an episode, not FrozenLake's 22 that an untrained model plays out: 4x less CPU for the same path
    done = agentgym("eval", "games/FrozenLake-v0", "--engine", "torch", "--model", str(tiny_model_dir),
                    "--episodes", "4", "--max-tokens", "8", "--concurrency", "4", "--env-arg", "max_turns=4",
                    "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stdout.strip().splitlines()[-1])
    assert scores["episodes"] == 4 and scores["infra_errors"] == 0 and scores["mean_tokens"] > 0
    assert f"games/FrozenLake-v0 · torch-{tiny_model_dir.name}" in done.stderr  # the progress bar
    episodes = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert all(e["trajectory"]["token_ids"] and sum(e["trajectory"]["loss_mask"]) == e["tokens"] > 0 for e in episodes)


def test_eval_refuses_a_policy_and_an_engine_together_or_an_engine_without_model(tmp_path):
    for args in (["--policy", "oracle", "--engine", "torch", "--model", "x"], ["--engine", "torch"],
                 ["--engine", "torch", "--model", str(tmp_path / "missing")]):
        done = agentgym("eval", "games/FrozenLake-v0", *args, "--episodes", "1", "--out", str(tmp_path))
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr


def test_a_served_model_is_evaluated_through_the_openai_engine(tiny_model_dir):
    with thread_server(tiny_model_dir, seed=0) as server:
        engine = OpenAIEngine(server.base_url, tiny_model_dir.name)
        policy = ChatPolicy(engine, SamplingParams(max_tokens=16))
        tasks = TaskSet.generate("tools/Calculator-v0", 3)

        async def main():
            try:
                return await evaluate("tools/Calculator-v0", policy, tasks, concurrency=3,
                                      env_kwargs={"max_turns": 2})
            finally:
                await engine.close()

        result = asyncio.run(main())
    assert result.summary.episodes == 3 and result.summary.infra_errors == 0
    for trajectory in result.trajectories:
        assert trajectory.num_turns >= 1 and trajectory.info["usage"]["completion_tokens"] > 0
        assert trajectory.token_ids == []  # a chat endpoint gives text, not token ids
