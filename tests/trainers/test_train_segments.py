"""A whole run on a model whose chat template rewrites earlier turns (Qwen3's rule): every multi-turn episode
trains in token segments, each under the exact context it was sampled under."""

from __future__ import annotations

from agentgym.evaluation.records import ROLLOUTS, RolloutRecord
from tests.qwen3_style import qwen3_style_model
from tests.trainers.test_train import _config, _train, _train_records


def test_a_run_trains_on_a_qwen3_style_template_with_each_token_under_its_own_context(tiny_model_dir, tmp_path):
    model = qwen3_style_model(tiny_model_dir, tmp_path / "qwen3")
    config, result = _train(_config(tmp_path / "run", model, trainer={"steps": 2},
                                     context={"strategy": "drop", "budget": 2000}, eval={"episodes": 8}))
    assert result.steps == 2
    assert all(r["train/agent_tokens"] > 0 for r in _train_records(config.run_dir))
    records = [RolloutRecord.model_validate_json(line)
               for line in (config.run_dir / ROLLOUTS).read_text().splitlines()]
    trained = [r for r in records if r.outcome == "trained"]
    assert trained and all(r.trajectory.segments for r in trained)  # two turns: the second is a fresh rendering
    fresh = []
    for r in trained:
        t = r.trajectory
        assert len(r.trainer_logprobs) == len(t.token_ids)
        assert all(agent or value == 0 for value, agent in zip(r.trainer_logprobs, t.loss_mask, strict=True))
        fresh += [abs(mine - behaviour) for mine, behaviour, version in
                  zip(r.trainer_logprobs, t.logprobs, t.versions, strict=True) if version == r.step - 1]
    # the trainer's logprob of each token the step's own weights sampled is the sampler's: the same context
    assert len(fresh) > 50 and sum(fresh) / len(fresh) < 1e-3
