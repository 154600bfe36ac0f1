"""Training on tree rollouts (``rollout.sampling: latr``): every group still holds G trajectories (the tree's and
fresh ones where it fell short), every token keeps its logprob and version, the tree chose some of them, and the
torch engine's behaviour logprobs match the trainer's."""

from __future__ import annotations

import asyncio

import pytest
import torch

from agentgym.inference.torch.engine import TorchEngine
from agentgym.inference.types import SamplingParams
from agentgym.metrics_log import read_metrics
from agentgym.policies.lm import LMPolicy
from agentgym.rollout.config import TreeRollout
from agentgym.rollout.pool import EnvPool
from agentgym.rollout.tree_group import play_tree_group
from agentgym.tasks import Task
from agentgym.trainers.batch import collate
from tests.trainers.test_train import _batches, _config, _train

EAGER = {"tau_abs": 1e-4, "tau_rel": 1.0, "turn_window": 1, "forced_turn": 3}
"""Settings under which the untrained tiny model branches at once (its distributions are flat)."""


def test_a_latr_run_trains_on_full_groups_of_tree_and_fresh_episodes(tiny_model_dir, tmp_path):
    config, result = _train(_config(tmp_path / "run", tiny_model_dir, trainer={"steps": 3},
                                    eval={"episodes": 0}, rollout={"sampling": "latr", "latr": EAGER}))
    assert result.steps == 3
    records = [r for r in read_metrics(config.run_dir) if "train/loss" in r]
    assert len(records) == 3
    for record in records:
        assert record["rollout/tree_groups"] > 0 and record["rollout/tree_branches"] > 0
        assert 0 < record["rollout/tree_token_fraction"] <= 1
        assert record["rollout/decoded_tokens"] > 0
        assert abs(record["train/mismatch_k3"]) < 1e-4  # tree tokens keep the sampling distribution's logprobs
    for batch in _batches(config.run_dir):
        assert len(batch["seeds"]) == config.trainer.groups_per_step * config.trainer.group_size


def test_each_leaf_trains_as_a_full_trajectory_over_the_prefix_it_shares(tiny_model_dir):
    """A forked episode's row holds the tokens it shares with its parent, with the parent's loss mask, logprobs
    and versions there, and its own advantage: a shared token is trained once per leaf through it."""
    engine = TorchEngine(tiny_model_dir, seed=0)
    policy = LMPolicy(engine, SamplingParams(temperature=1.0, max_tokens=10))
    apart = TreeRollout(**{**EAGER, "forced_turn": 2, "prune_same_observation": False, "prune_threshold": None})

    async def tree():
        pool = EnvPool("games/FrozenLake-v0", {"parser": "pythonic", "max_turns": 4})
        try:
            return await play_tree_group(pool, policy, Task(env_id="games/FrozenLake-v0", seed=3, difficulty="easy"),
                                         seed=(0, 3), width=4, settings=apart)
        finally:
            await pool.close()
            await engine.close()

    trajectories = asyncio.run(tree())
    assert len(trajectories) > 1
    advantages = torch.arange(len(trajectories), dtype=torch.float32) - 1.5
    batch = collate(trajectories, advantages, pad_id=0)
    rows = [next(r for r in range(batch.rows) if batch.input_ids[r][batch.attention_mask[r] > 0].tolist() == t.token_ids)
            for t in trajectories]  # collate sorts the rows by length
    by_branch = {t.info["branch"]: i for i, t in enumerate(trajectories)}
    shared_agent_tokens = 0
    for i, child in enumerate(trajectories):
        if child.info["parent"] is None:
            continue
        parent = by_branch[child.info["parent"]]
        mine, theirs = rows[i], rows[parent]
        assert batch.advantages[mine] == advantages[i] and batch.advantages[theirs] == advantages[parent]
        shared = next(n for n, (a, b) in enumerate(zip(child.token_ids, trajectories[parent].token_ids, strict=False))
                      if a != b)
        assert shared >= child.info["prompt_lengths"][child.info["fork_turn"]]  # at least the context at the fork
        span = slice(0, shared - 1)  # per-token tensors describe the next token
        for name in ("loss_mask", "behaviour_logprobs", "versions"):
            assert torch.equal(getattr(batch, name)[mine, span], getattr(batch, name)[theirs, span])
        shared_agent_tokens += int(batch.loss_mask[mine, span].sum())
    assert shared_agent_tokens > 0  # some child shares trained tokens with its parent, and trains them again


@pytest.mark.parametrize("sampling", [["sampling.temperature=0.7"], ["sampling.top_p=0.9"]])
def test_latr_on_vllm_away_from_temperature_1_is_refused_naming_the_key(sampling):
    """vLLM's tree tokens carry untempered logprobs: right for the correction only at temperature 1, top_p 1."""
    from agentgym.config import load_config
    from agentgym.errors import ConfigError
    from agentgym.trainers.config import TrainConfig
    from tests.trainers.envs import VOWELS_ID

    base = ["output_dir=unused", "model.path=unused", f"env.id={VOWELS_ID}", "rollout.sampling=latr"]
    load_config(TrainConfig, None, [*base, "engine.name=vllm"])  # fits at temperature 1
    load_config(TrainConfig, None, [*base, *sampling])  # the torch engine records the sampling distribution's
    with pytest.raises(ConfigError, match=r"sampling\.temperature: LATR on the vllm engine"):
        load_config(TrainConfig, None, [*base, "engine.name=vllm", *sampling])
