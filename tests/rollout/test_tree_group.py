"""A group's tree episodes: forks become episodes that share their parent's history to the fork and then go
their own way, look-alikes are pruned, and every token keeps its record (tree marks included)."""

from __future__ import annotations

import asyncio
import itertools
import json

import numpy as np
import pytest

import agentgym
from agentgym.inference.torch.engine import TorchEngine
from agentgym.inference.types import SamplingParams
from agentgym.messages import Message
from agentgym.policies.lm import LMPolicy
from agentgym.registration import _registry
from agentgym.rollout.config import TreeRollout
from agentgym.rollout.pool import EnvPool
from agentgym.rollout.tree_group import decided_alike, play_tree_group, turn_calls
from agentgym.tasks import Task
from agentgym.trajectory import Turn
from tests.conftest import CounterEnv

EAGER = TreeRollout(tau_abs=1e-4, tau_rel=1.0, turn_window=2, forced_turn=4)
"""Settings under which the untrained tiny model branches at every turn (its distributions are flat)."""


LAKE = {"parser": "pythonic", "max_turns": 6}


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    engine = TorchEngine(tiny_model_dir, seed=0)
    yield LMPolicy(engine, SamplingParams(temperature=1.0, max_tokens=10))
    asyncio.run(engine.close())


def play(policy: LMPolicy, width: int, settings: TreeRollout = EAGER, seed: int = 7):
    async def tree():
        pool = EnvPool("games/FrozenLake-v0", LAKE)
        try:
            return await play_tree_group(pool, policy, task, seed=(0, seed), width=width, settings=settings)
        finally:
            await pool.close()

    task = Task(env_id="games/FrozenLake-v0", seed=seed, difficulty="easy")
    return asyncio.run(tree())


def test_forked_episodes_share_their_parents_history_up_to_the_fork(policy):
    apart = EAGER.model_copy(update={"prune_threshold": None, "prune_same_observation": False})
    trajectories = play(policy, width=4, settings=apart)  # the untrained model's actions all fail alike
    assert 2 <= len(trajectories) <= 4
    root = trajectories[0]
    assert root.info["branch"] == 0 and root.info["tree"]["made"] >= len(trajectories) - 1
    for trajectory in trajectories:
        assert trajectory.status in ("ok", "truncated")
        assert len(trajectory.tree_chosen) == len(trajectory.token_ids) == len(trajectory.logprobs)
        assert any(trajectory.tree_chosen)  # the tree chose this episode's first tokens
    actions = [tuple(turn.action for turn in t.turns) for t in trajectories]
    assert len(set(actions)) == len(actions)  # each branch went its own way
    by_branch = {t.info["branch"]: t for t in trajectories}
    for child in trajectories[1:]:
        parent, turn = by_branch[child.info["parent"]], child.info["fork_turn"]
        assert [t.action for t in child.turns[:turn]] == [t.action for t in parent.turns[:turn]]
        assert child.turns[turn].action != parent.turns[turn].action  # its own answer at the fork
        assert child.token_ids[: child.info["prompt_lengths"][turn]] == parent.token_ids[: parent.info["prompt_lengths"][turn]]


def test_a_child_that_sees_what_its_parent_sees_is_pruned(policy):
    trajectories = play(policy, width=4)  # the untrained model's actions all fail alike: one observation
    tree = trajectories[0].info["tree"]
    assert tree["pruned"] > 0 and tree["made"] >= tree["pruned"] and len(trajectories) == 1 + tree["made"] - tree["pruned"]


def test_the_same_seed_grows_the_same_tree(policy):
    first = [[turn.action for turn in t.turns] for t in play(policy, width=3)]
    second = [[turn.action for turn in t.turns] for t in play(policy, width=3)]
    assert first == second


def test_a_forked_session_copies_the_record_and_keeps_its_replica(policy):
    env = agentgym.make("games/FrozenLake-v0", **LAKE)
    try:
        parent = policy.start(env, np.random.default_rng(0))
        parent.tokens.observe(env.reset(seed=1)[0])
        child = parent.fork(np.random.default_rng(1))
        assert child.id == parent.id  # routed to the replica whose cache holds their shared prefix
        assert child.tokens.token_ids == parent.tokens.token_ids and child.tokens is not parent.tokens
    finally:
        env.close()


def test_a_tree_counts_the_tokens_it_decoded(policy):
    alone = play(policy, width=1)  # no room to fork: the tree is one ordinary episode
    assert len(alone) == 1 and alone[0].info["tree"]["decoded"] == sum(alone[0].loss_mask) > 0
    forked = play(policy, width=4, settings=EAGER.model_copy(update={"prune_same_observation": False}))
    tree = forked[0].info["tree"]
    assert tree["made"] > 0 and tree["token_forks"] >= tree["made"]  # every forked episode was an engine fork
    assert 0 <= tree["token_pruned"] <= tree["token_forks"]
    assert forked[0].info["tree"]["decoded"] >= max(sum(t.loss_mask) for t in forked)


class Drifting(CounterEnv):
    """Its opening counts the resets made in this process: a replay cannot show its parent's first page."""

    resets = itertools.count()

    def setup(self, difficulty, options):
        return [*super().setup(difficulty, options), Message(role="user", content=f"reset {next(self.resets)}")]


def test_a_fork_whose_replay_diverges_fails_the_tree_naming_why(policy):
    spec = agentgym.register("test/Drifting-v0", f"{__name__}:Drifting", tags=("test",))
    try:
        async def tree():
            pool = EnvPool(spec.id, {"parser": "pythonic"})
            try:
                return await play_tree_group(pool, policy, Task(env_id=spec.id, seed=1), seed=(0, 1), width=3,
                                             settings=EAGER)
            finally:
                await pool.close()

        trajectories = asyncio.run(tree())
    finally:
        _registry.pop(spec.id, None)
    assert trajectories and all(t.status == "error" for t in trajectories)
    assert "diverged from the parent episode at the reset" in trajectories[0].error


# ---- pruning by decision: what the agent did, not the text around it ------------------------------------------


def turns(env_id: str, actions: list[str], parser: str = "pythonic", **kwargs) -> list[Turn]:
    """The turns a real ``env_id`` records for ``actions`` from its reset with seed 5."""
    env = agentgym.make(env_id, parser=parser, **kwargs)
    try:
        env.reset(seed=5)
        played = []
        for action in actions:
            observation, reward, _, _, info = env.step(action)
            played.append(Turn(action=action, tool_calls=info["tool_calls"], observation=observation, reward=reward))
        return played
    finally:
        env.close()


def hermes(name: str, **arguments) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def test_a_decision_is_the_same_whatever_the_call_format():
    up = [turn_calls(turn) for turn in turns("games/FrozenLake-v0", ['move(direction="up")', "move('up')",
                                                                   '  [move( direction = "up" )]  '])]
    up.append(turn_calls(turns("games/FrozenLake-v0", [hermes("move", direction="up")], parser="hermes")[0]))
    assert up == [(("move", '{"direction": "up"}'),)] * 4
    assert turn_calls(turns("games/FrozenLake-v0", ['move(direction="down")'])[0]) != up[0]
    assert turn_calls(turns("games/FrozenLake-v0", ["I would go up"])[0]) == ()  # no call read: no move made


# Per environment: the parent's actions, a child's that make the same calls in other words, a child's that differ.
DECISIONS = {
    "games/FrozenLake-v0": (['move(direction="right")', 'move(direction="down")'],
                            ["move('right')", '[move(direction="down")]'],
                            ['move(direction="right")', 'move(direction="up")']),
    "games/Sokoban-v0": (['move(direction="left")', 'move(direction="up")'],
                         ["move('left')", "move( 'up' )"],
                         ['move(direction="down")', 'move(direction="up")']),
    "tools/Calculator-v0": (['calculator(expression="12*7")', 'answer(value=84)'],
                            ["calculator('12*7')", "answer(84)"],
                            ['calculator(expression="12*7")', 'answer(value=85)']),
}


@pytest.mark.parametrize("env_id", sorted(DECISIONS))
def test_children_that_decided_alike_are_pruned_and_those_that_did_not_survive(env_id):
    """LATR's default thresholds, over decisions: at the default window of two turns the edit threshold (0.4)
    prunes only a child whose every move matched its parent's."""
    parent, same, other = (turns(env_id, actions) for actions in DECISIONS[env_id])
    settings = TreeRollout()
    assert [turn.action for turn in same] != [turn.action for turn in parent]  # other texts ...
    assert decided_alike(same, parent, settings)  # ... the same moves: pruned
    assert not decided_alike(other, parent, settings)  # one move of two differs: it survives
    assert decided_alike(other, parent, settings.model_copy(update={"prune_threshold": 0.6}))  # 0.5 < 0.6
    rouge = settings.model_copy(update={"prune_threshold": None, "rouge_l_threshold": 0.5})
    assert decided_alike(same, parent, rouge) and not decided_alike(other, parent, rouge)  # ROUGE-L 1.0 and 0.5


def test_every_child_compared_and_kept_decided_otherwise_than_its_parent(policy):
    """LATR's default thresholds in a played tree: the untrained model's texts rarely hold a call, so most children
    decide alike (nothing) and go; a child still playing at its window and kept must have moved otherwise."""
    settings = EAGER.model_copy(update={"prune_same_observation": False, "forced_turn": 5})
    pruned = 0
    for seed in (7, 8, 9):
        trajectories = play(policy, width=4, settings=settings, seed=seed)
        pruned += trajectories[0].info["tree"]["pruned"]
        by_branch = {t.info["branch"]: t for t in trajectories}
        for child in trajectories[1:]:
            parent, birth = by_branch[child.info["parent"]], child.info["fork_turn"]
            end = birth + settings.turn_window
            if len(child.turns) > end and len(parent.turns) > end:  # both played past the window: compared
                assert not decided_alike(child.turns[birth:end], parent.turns[birth:end], settings)
    assert pruned > 0
