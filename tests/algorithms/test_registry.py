"""The registries of policy losses and advantage estimators: a decorated function is one a config can name, it runs
in the frame every loss shares (correction, aggregation, metrics), and an unknown name is a bad value of its key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.algorithms import (
    ADVANTAGES,
    POLICY_LOSSES,
    CorrectionConfig,
    PolicyLossConfig,
    compute_advantages,
    dr_grpo,
    get_advantage_fn,
    get_policy_loss_fn,
    policy_loss,
    ppo_loss,
    register_advantage,
    register_policy_loss,
)
from agentgym.config import load_config
from agentgym.errors import ConfigError
from agentgym.trainers.config import TrainConfig


@pytest.fixture(scope="module")
def unclipped() -> Iterator[str]:
    """A policy loss ``unclipped`` (the plain importance-weighted policy gradient) while the test runs."""

    @register_policy_loss("unclipped")
    def loss(log_ratio: torch.Tensor, advantages: torch.Tensor, agent: torch.Tensor, config: PolicyLossConfig
             ) -> tuple[torch.Tensor, dict[str, float]]:
        return -advantages * log_ratio.exp(), {"train/plain": 1.0}

    yield "unclipped"
    del POLICY_LOSSES["unclipped"]


def test_the_bundled_functions_are_registered_under_their_names() -> None:
    assert list(ADVANTAGES) == ["grpo", "dr_grpo", "rloo", "mc_grpo", "reinforce_pp"]
    assert get_advantage_fn("dr_grpo") is dr_grpo
    assert list(POLICY_LOSSES) == ["ppo"] and get_policy_loss_fn("ppo") is ppo_loss
    assert PolicyLossConfig().name == "ppo"


def test_unknown_names_list_the_registered_ones() -> None:
    with pytest.raises(ValueError, match="unknown policy loss 'gspo'; choose one of: ppo"):
        get_policy_loss_fn("gspo")
    with pytest.raises(ValueError, match="unknown advantage estimator 'gae'; choose one of: grpo, dr_grpo"):
        get_advantage_fn("gae")


def test_a_name_is_taken_once(unclipped: str) -> None:
    with pytest.raises(ValueError, match="policy loss 'unclipped' is registered already"):
        register_policy_loss(unclipped)(ppo_loss)
    with pytest.raises(ValueError, match="advantage estimator 'grpo' is registered already"):
        register_advantage("grpo")(dr_grpo)


def test_an_unknown_name_in_a_config_is_a_bad_value_of_its_key(tmp_path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("output_dir: out\nmodel: {path: m}\nenv: {id: games/FrozenLake-v0}\n")
    with pytest.raises(ConfigError, match=r"^algorithm\.loss\.name: .*unknown policy loss 'gspo'; choose one of: ppo"):
        load_config(TrainConfig, config, ["algorithm.loss.name=gspo"])
    with pytest.raises(ConfigError, match=r"^algorithm\.advantage: .*unknown advantage estimator 'gae'; choose one"):
        load_config(TrainConfig, config, ["algorithm.advantage=gae"])
    assert load_config(TrainConfig, config).algorithm.loss.name == "ppo"


def test_a_registered_loss_and_estimator_are_what_a_config_names(unclipped: str, tmp_path) -> None:
    @register_advantage("sign")
    def sign(rewards: torch.Tensor, groups: object, valid: torch.Tensor | None = None) -> torch.Tensor:
        return torch.sign(rewards - 0.5)

    try:
        config = tmp_path / "run.yaml"
        config.write_text("output_dir: out\nmodel: {path: m}\nenv: {id: games/FrozenLake-v0}\n")
        loaded = load_config(TrainConfig, config, [f"algorithm.loss.name={unclipped}", "algorithm.advantage=sign"])
        assert (loaded.algorithm.loss.name, loaded.algorithm.advantage) == (unclipped, "sign")
        advantages = compute_advantages("sign", torch.tensor([1.0, 0.0]), [0, 0])
        torch.testing.assert_close(advantages, torch.tensor([1.0, -1.0]))
        _, metrics = policy_loss(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2), advantages[:1],
                                 torch.ones(1, 2), loaded.algorithm.loss)
        assert metrics["train/plain"] == 1.0 and "train/clip_fraction" not in metrics
    finally:
        del ADVANTAGES["sign"]


CORRECTIONS = [CorrectionConfig(), CorrectionConfig(tis=None, mask=(0.5, 2.0), level="sequence"),
               CorrectionConfig(tis=None, decoupled=True), CorrectionConfig(tis=1.5, level="geometric")]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.integers(0, 2**31), st.sampled_from(CORRECTIONS),
       st.sampled_from(["token-mean", "sequence-mean"]))
def test_a_registered_loss_runs_in_the_frame_ppo_runs_in(unclipped: str, rows: int, cols: int, seed: int,
                                                         correction: CorrectionConfig, aggregation: str) -> None:
    """Where no ratio reaches a clip bound, PPO's loss is the unclipped one: the registered loss, weighed by the same
    correction and aggregated the same way, gives the same loss, gradient and shared metrics."""
    generator = torch.Generator().manual_seed(seed)
    old = -torch.rand(rows, cols, generator=generator, dtype=torch.float64) * 4
    learner = old + (torch.rand(rows, cols, generator=generator, dtype=torch.float64) - 0.5)  # ratio in [0.6, 1.7]
    behaviour = old + torch.randn(rows, cols, generator=generator, dtype=torch.float64) * 0.5
    advantages = torch.randn(rows, generator=generator, dtype=torch.float64)
    mask = (torch.rand(rows, cols, generator=generator) < 0.7).to(torch.float64)
    results = []
    for name in ("ppo", unclipped):
        config = PolicyLossConfig(name=name, clip_low=0.5, clip_high=1.0, correction=correction, aggregation=aggregation)
        logprobs = learner.clone().requires_grad_()
        loss, metrics = policy_loss(logprobs, old, behaviour, advantages, mask, config)
        loss.backward()
        results.append((loss.detach(), logprobs.grad, {k: v for k, v in metrics.items() if k != "train/clip_fraction"}))
    (ppo, ppo_grad, ppo_metrics), (other, other_grad, other_metrics) = results
    torch.testing.assert_close(other, ppo, rtol=0, atol=1e-12)
    torch.testing.assert_close(other_grad, ppo_grad, rtol=0, atol=1e-12)
    assert other_metrics.pop("train/plain") == 1.0 and other_metrics == pytest.approx(ppo_metrics)
