"""Oracle demonstrations recorded in the rollout's token format (the SFT warm start's data)."""

from __future__ import annotations

import asyncio

import pytest
from transformers import AutoTokenizer

from agentgym import OraclePolicy, TaskSet, evaluate, make
from agentgym.policies.demonstrations import DemonstrationPolicy
from agentgym.policies.render import ChatRenderer


@pytest.mark.parametrize("env_id", ["games/FrozenLake-v0", "tools/Calculator-v0"])
def test_oracle_demonstrations_are_token_exact_conversations(tiny_model_dir, env_id):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    policy = DemonstrationPolicy(OraclePolicy(), tokenizer)
    result = asyncio.run(evaluate(env_id, policy, TaskSet.generate(env_id, 6, split="train"), concurrency=3))
    renderer = ChatRenderer(tokenizer)
    eos = renderer.eos[0]
    env = make(env_id)
    tools = [t.to_openai() for t in env.tools]
    env.close()
    for trajectory in result.trajectories:
        assert trajectory.status == "ok" and trajectory.success
        last = max(i for i, m in enumerate(trajectory.messages) if m.role == "assistant")
        fresh = renderer.render([m.to_openai() for m in trajectory.messages[: last + 1]], tools)
        assert tokenizer.decode(trajectory.token_ids, skip_special_tokens=False) == fresh
        # the agent's tokens are exactly each action followed by the eos token
        agent = [i for i, m in enumerate(trajectory.loss_mask) if m]
        spans, start = [], agent[0]
        for a, b in zip(agent, agent[1:] + [None]):
            if b != a + 1:
                spans.append(trajectory.token_ids[start : a + 1])
                start = b
        assert [tokenizer.decode(s[:-1]) for s in spans] == [t.action for t in trajectory.turns]
        assert all(s[-1] == eos for s in spans)
        assert {trajectory.versions[i] for i in agent} == {-1}



def test_noisy_demonstrations_learn_only_the_oracle_recovering_from_random_moves(tiny_model_dir):
    """With ``noise``, some turns are random moves left out of the loss; every turn that is learnt is the
    oracle's move from the state the episode (its mistakes included) had reached."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    env_id, kwargs = "games/Sokoban-v0", {"describe": True}
    tasks = TaskSet.generate(env_id, 8, split="train", difficulties=["easy"])
    policy = DemonstrationPolicy(OraclePolicy(), tokenizer, noise=0.3)
    result = asyncio.run(evaluate(env_id, policy, tasks, concurrency=4, env_kwargs=kwargs))
    learnt_moves, random_moves = 0, 0
    for task, trajectory in zip(tasks, result.trajectories, strict=True):
        env = make(env_id, **kwargs)
        env.reset(**task.reset_kwargs())
        for turn, start in zip(trajectory.turns, trajectory.info["prompt_lengths"], strict=True):
            if trajectory.loss_mask[start]:
                assert turn.action == env.oracle_action()
                learnt_moves += 1
            else:
                random_moves += turn.action != env.oracle_action()
            env.step(turn.action)
        env.close()
    assert learnt_moves >= 40 and random_moves >= 5
    with pytest.raises(ValueError, match="noise"):
        DemonstrationPolicy(OraclePolicy(), tokenizer, noise=1.0)
