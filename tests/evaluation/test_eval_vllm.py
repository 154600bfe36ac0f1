"""``agentgym eval --engine vllm`` (vLLM's CPU build here): the command line starts vLLM on a model folder, plays
a suite token in, token out and scores it as the torch engine does."""

from __future__ import annotations

import importlib.util

import pytest

from agentgym.evaluation.records import RunFolder
from agentgym.suites import write_suite
from agentgym.tasks import TaskSet
from tests.evaluation.test_cli import agentgym, last_json

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(300)]  # vLLM starts in ~45 s, longer on a busy machine


def test_eval_on_the_vllm_engine_scores_as_the_torch_engine(tiny_model_dir, tmp_path):
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("needs vLLM: bash scripts/setup.sh vllm")
    tasks = [*TaskSet.generate("games/FrozenLake-v0", 4, split="test", difficulties=("easy", "medium")),
             *TaskSet.generate("tools/Calculator-v0", 2, split="test")]
    suite = write_suite(tmp_path / "mini-v0", "mini-v0", "FrozenLake and Calculator", TaskSet(tasks)).folder
    common = ["--suite", str(suite), "--model", str(tiny_model_dir), "--temperature", "0", "--max-tokens", "24",
              "--samples", "2", "--json", "--env-arg", "parser=pythonic"]
    torch = last_json(agentgym("eval", *common, "--engine", "torch", "--out", str(tmp_path / "torch")))
    vllm = last_json(agentgym("eval", *common, "--engine", "vllm", "--out", str(tmp_path / "vllm")))
    assert vllm["scored"] == torch["scored"] == 12 and vllm["infra_errors"] == 0
    assert (tmp_path / "vllm" / "report.md").is_file()
    # greedy decoding of the same float32 weights: the same actions, token for token
    episodes = [{k: ([t.action for t in r.trajectory.turns], r.trajectory.token_ids, r.reward)
                 for k, r in RunFolder(tmp_path / name).finished().items()} for name in ("torch", "vllm")]
    assert episodes[0] == episodes[1]
    for key in ("success_rate", "pass_at_k", "mean_reward", "mean_turns", "mean_tokens"):
        assert vllm[key] == torch[key], key
