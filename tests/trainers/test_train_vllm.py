"""A whole run of the decoupled trainer with the ``vllm`` engine (vLLM's CPU build here): rollouts sampled by
vLLM, weights sent back to it after every step, and the policy still learns."""

from __future__ import annotations

import importlib.util

import pytest

from agentgym.metrics_log import read_metrics
from tests.trainers.test_train import STEPS, _config, _eval_records, _train, _train_records

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
