"""A whole run of the decoupled trainer with the ``vllm`` engine (vLLM's CPU build here): rollouts sampled by
vLLM, weights sent back to it after every step, and the policy still learns."""

from __future__ import annotations

import importlib.util

import pytest

from agentgym.metrics_log import read_metrics
from tests.trainers.test_train import STEPS, _batches, _config, _eval_records, _train, _train_records
from tests.trainers.test_train_latr import EAGER

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(300)]  # vLLM starts in ~45 s, longer on a busy machine


def test_a_run_on_the_vllm_engine_learns(tiny_model_dir, tmp_path):
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("needs vLLM: bash scripts/setup.sh vllm")
    config, result = _train(_config(tmp_path / "run", tiny_model_dir, engine={"name": "vllm"}))
    records = _train_records(config.run_dir)
    assert result.steps == STEPS and [r["step"] for r in records] == list(range(1, STEPS + 1))
    # vLLM sampled under each published version: the trainer's forward agrees with its behaviour logprobs
    assert all(r["train/mismatch_k3_fresh"] < 1e-6 for r in records if "train/mismatch_k3_fresh" in r)
    assert max(r["rollout/staleness_max"] for r in records) <= config.trainer.async_ratio
    evals = _eval_records(config.run_dir)
    before, after = evals[0]["eval/reward_mean"], evals[-1]["eval/reward_mean"]
    assert after > before + 0.005, (before, after)
    assert all(r.get("eval/infra_errors", 0) == 0 for r in read_metrics(config.run_dir))


def test_a_latr_run_on_the_vllm_engine_trains_on_full_groups(tiny_model_dir, tmp_path):
    """Trees grown by vLLM (forks as requests on the cached prefix) train like the torch engine's: full groups,
    every token with its logprob and version, tree tokens marked, behaviour logprobs the trainer's."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("needs vLLM: bash scripts/setup.sh vllm")
    config, result = _train(_config(tmp_path / "run", tiny_model_dir, engine={"name": "vllm"}, trainer={"steps": 2},
                                    eval={"episodes": 0}, rollout={"sampling": "latr", "latr": EAGER}))
    assert result.steps == 2
    records = _train_records(config.run_dir)
    for record in records:
        assert record["rollout/tree_groups"] > 0 and record["rollout/tree_branches"] > 0
        assert 0 < record["rollout/tree_token_fraction"] <= 1
        assert record["rollout/errored"] == 0
        assert abs(record["train/mismatch_k3"]) < 1e-3  # tree tokens: the untempered logprob, at temperature 1
    for batch in _batches(config.run_dir):
        assert len(batch["seeds"]) == config.trainer.groups_per_step * config.trainer.group_size
