"""Training on tree rollouts (``rollout.sampling: latr``): every group still holds G trajectories (the tree's and
fresh ones where it fell short), every token keeps its logprob and version, the tree chose some of them, and the
torch engine's behaviour logprobs match the trainer's."""

from __future__ import annotations

from agentgym.metrics_log import read_metrics
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
