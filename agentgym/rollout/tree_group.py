"""A group's tree episodes (LATR for multi-turn agents): episodes that fork where the policy is unsure.

The group's tree starts as one episode. Turn by turn, every live episode answers with a tree of the engine's
(:meth:`~agentgym.inference.types.TreeEngine.generate_tree`, branching on the action's uncertain tokens): its
own answer is the first branch, and each other branch becomes a new episode forked from it before this turn (the
environment copied where it forks natively, else replayed and checked: :func:`agentgym.afork_episode`), while
the group has fewer than ``width`` episodes. A child is compared with its parent ``turn_window`` turns after its
birth, by what each decided since the fork: a turn's decision is its parsed calls (names and arguments, whatever
the call format), so two texts that make the same moves are the same decision. When the child's decisions stayed
close to its parent's (:func:`~agentgym.inference.similarity.look_alike` over decisions, one per turn: at the
default window of 2 and edit threshold of 0.4, only identical ones), or it sees what its parent sees, it is pruned
with its descendants. The tree phase ends when the group is full and every child is older than the window, or
at ``forced_turn``; each episode then plays on by ordinary sampling.

Whatever ends the group abnormally (a replay that diverges, the engine shutting down, the episode time limit)
marks every unfinished episode ``error`` with its cause, as :func:`~agentgym.episode.run_episode` does. The
caller fills the rest of the group with fresh stochastic episodes, never with copies.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from agentgym.core import Env
from agentgym.episode import EpisodeLoop, Timeouts
from agentgym.episode_fork import afork_episode
from agentgym.errors import ContextLimit, EpisodeTimeout
from agentgym.inference.similarity import look_alike
from agentgym.inference.tree import LatrParams
from agentgym.messages import Message
from agentgym.policies.lm import LMPolicy, TokenSession
from agentgym.rollout.config import TreeRollout
from agentgym.rollout.pool import EnvPool
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory, Turn

TurnCalls = tuple[tuple[str, str], ...]
"""What the agent decided in one turn: its calls as (name, arguments as sorted JSON), in order; none for a turn
whose text held no call that could be read."""


def turn_calls(turn: Turn) -> TurnCalls:
    """The calls of ``turn``: the same for any text, in any call format, that makes the same calls."""
    return tuple((call.name, json.dumps(call.arguments, sort_keys=True, default=str)) for call in turn.tool_calls)


def decided_alike(mine: Sequence[Turn], theirs: Sequence[Turn], settings: LatrParams) -> bool:
    """Whether a child's turns since its fork decided as its parent's did, by the measures ``settings`` gives
    thresholds to (:func:`~agentgym.inference.similarity.look_alike`, over decisions rather than tokens)."""
    return look_alike([turn_calls(turn) for turn in mine], [turn_calls(turn) for turn in theirs],
                      edit=settings.prune_threshold, suffix=settings.suffix_match_threshold,
                      rouge=settings.rouge_l_threshold)


@dataclass
class _Member:
    """One episode of the tree: its environment, session and record, and where it forked from."""

    env: Env
    session: TokenSession
    episode: EpisodeLoop
    parent: int | None
    birth: int
    """The turn whose answer was its first own one (0 for the root)."""
    observations: list[list[Message]] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    done: bool = False
    children: list[int] = field(default_factory=list)

    @property
    def trajectory(self) -> Trajectory:
        return self.episode.trajectory


async def play_tree_group(pool: EnvPool, policy: LMPolicy, task: Task, *, seed: tuple[int, ...], width: int,
                          settings: TreeRollout, timeouts: Timeouts | None = None) -> list[Trajectory]:
    """Play ``task`` as a tree of at most ``width`` episodes (see the module doc) with environments from
    ``pool``; their trajectories, the root's first. ``info["tree"]`` counts the episodes forked (``made``) and
    pruned, and the engine trees' forks and prunes within turns (``token_forks``, ``token_pruned``)."""
    tree = _Tree(pool, policy, task, seed, settings, timeouts or Timeouts())
    try:
        async with asyncio.timeout(tree.timeouts.episode):
            await tree.grow(width)
            await asyncio.gather(*(tree.play_on(member) for member in tree.members.values() if not member.done))
    except TimeoutError:
        tree.fail(EpisodeTimeout("episode", tree.timeouts.episode or 0.0))
    except Exception as exc:  # noqa: BLE001 - an infrastructure failure: recorded on every unfinished episode
        tree.fail(exc)
    finally:
        tree.close()
    return [tree.members[index].trajectory for index in sorted(tree.members)]


class _Tree:
    """The members of one tree and its counts."""

    def __init__(self, pool: EnvPool, policy: LMPolicy, task: Task, seed: tuple[int, ...], settings: TreeRollout,
                 timeouts: Timeouts) -> None:
        self.pool, self.policy, self.task, self.seed = pool, policy, task, seed
        self.settings, self.timeouts = settings, timeouts
        self.members: dict[int, _Member] = {}
        self.made = self.pruned = self.turn = 0
        self.token_forks = self.token_pruned = 0
        """Forks and prunes within turns: the engine trees' own (``made`` and ``pruned`` count episodes)."""
        self.decoded = 0
        """Tokens decoded for the tree: its engine trees' (pruned branches and lookaheads included, a shared
        prefix once) and its episodes' sampled continuations."""
        self.started = time.perf_counter()

    async def grow(self, width: int) -> None:
        """The tree phase: the root's reset, then turns of trees until the phase ends."""
        env = self.pool.acquire()
        root = _Member(env, self.policy.start(env, self._rng(0)), self._episode(env, self._trajectory()), None, 0)
        self.members[0] = root
        root.episode.phase = "reset"
        opening, _ = await env.areset(**self.task.reset_kwargs())
        root.trajectory.messages.extend(opening)
        root.observations.append(opening)
        while not self._over(width):
            await self._turn(width)

    async def play_on(self, member: _Member) -> None:
        """Finish a member's episode by ordinary sampling; a full context ends it as the context policy says."""
        observation = member.observations[-1]
        before = sum(member.session.tokens.loss_mask)
        try:
            while not member.done:
                tick = time.perf_counter()
                member.episode.phase = "policy"
                action = await member.session.act(observation)
                member.done = await member.episode.apply(action, time.perf_counter() - tick)
                observation = member.trajectory.turns[-1].observation
        except ContextLimit as exc:
            member.done = True
            exc.end(member.trajectory)
        finally:
            self.decoded += sum(member.session.tokens.loss_mask) - before

    def fail(self, exc: BaseException) -> None:
        """Mark every unfinished episode as failed by ``exc``."""
        for member in self.members.values():
            if not member.done:
                member.episode.fail(exc)

    def close(self) -> None:
        """Record each session's tokens and the tree's counts, and give the environments back."""
        for member in self.members.values():
            member.trajectory.info["tree"] = {"made": self.made, "pruned": self.pruned, "turns": self.turn,
                                            "decoded": self.decoded, "token_forks": self.token_forks,
                                            "token_pruned": self.token_pruned}
            member.episode.record(member.session)
            member.trajectory.timings["total_seconds"] = time.perf_counter() - self.started
            member.trajectory.timings["policy_seconds"] = sum(t.policy_seconds for t in member.trajectory.turns)
            member.trajectory.timings["env_seconds"] = sum(t.env_seconds for t in member.trajectory.turns)
            self.pool.release(member.env, healthy=member.trajectory.status != "error")

    async def _turn(self, width: int) -> None:
        """One turn of the tree phase: every live member's tree, the forks it makes room for, every step, pruning."""
        live = [index for index, member in self.members.items() if not member.done]
        room = width - len(self.members)
        tick = time.perf_counter()
        for index in live:
            self.members[index].episode.phase = "policy"
        trees = await asyncio.gather(*(self.members[index].session.grow(self.members[index].observations[-1],
                                                                     self.settings, 1 + room) for index in live))
        seconds = time.perf_counter() - tick
        chosen = {}
        self.decoded += sum(tree.decoded_tokens for tree in trees)
        self.token_forks += sum(tree.made for tree in trees)
        self.token_pruned += sum(tree.pruned for tree in trees)
        for index, grown in zip(live, trees, strict=True):
            chosen[index] = grown.branches[0].result
            for branch in grown.branches[1:]:
                if len(self.members) >= width:
                    break
                self.made += 1
                self.members[self.made] = await self._fork(index)
                self.members[index].children.append(self.made)
                chosen[self.made] = branch.result
        for index, result in chosen.items():
            member = self.members[index]
            action = member.session.take(result)
            member.actions.append(action)
            member.done = await member.episode.apply(action, seconds)
            member.observations.append(member.trajectory.turns[-1].observation)
        self.turn += 1
        for index in self._look_alikes():
            self.pruned += len(self._remove(index))

    async def _fork(self, index: int) -> _Member:
        """A new member in member ``index``'s state before its answer this turn (environment forked, record copied)."""
        parent = self.members[index]
        env = await afork_episode(parent.env if parent.env.forkable == "native" else self.pool.acquire,
                                  seed=self.task.seed, actions=parent.actions, observations=parent.observations,
                                  options=self.task.reset_kwargs()["options"])
        trajectory = parent.trajectory.model_copy(deep=True)
        trajectory.info.update(branch=self.made, parent=index, fork_turn=self.turn)
        return _Member(env, parent.session.fork(self._rng(self.made)), self._episode(env, trajectory), index, self.turn,
                     observations=list(parent.observations), actions=list(parent.actions))

    def _look_alikes(self) -> list[int]:
        """Children ``turn_window`` turns old that stayed close to their parent: decisions since the fork alike
        (:func:`decided_alike`), or (where the settings say so) the same observation now."""
        doomed = []
        for index, member in self.members.items():
            parent = self.members.get(member.parent) if member.parent is not None else None
            if parent is None or self.turn - member.birth != self.settings.turn_window or member.done or parent.done:
                continue
            alike = decided_alike(member.trajectory.turns[member.birth:], parent.trajectory.turns[member.birth:],
                                  self.settings)
            same = self.settings.prune_same_observation and member.observations[-1] == parent.observations[-1]
            if alike or same:
                doomed.append(index)
        return doomed

    def _remove(self, index: int) -> list[int]:
        """Drop a member and its descendants (their environments back to the pool); the ids removed."""
        member = self.members.pop(index, None)
        if member is None:
            return []
        self.pool.release(member.env, healthy=True)
        removed = [index]
        for child in member.children:
            removed += self._remove(child)
        return removed

    def _over(self, width: int) -> bool:
        """Whether the tree phase has ended."""
        if self.turn >= self.settings.forced_turn or all(member.done for member in self.members.values()):
            return True
        full = len(self.members) >= round(width * self.settings.exit_fill)
        return full and all(self.turn - member.birth > self.settings.turn_window
                            for member in self.members.values() if member.parent is not None)

    def _rng(self, branch: int) -> np.random.Generator:
        """The policy randomness of the tree's episode ``branch``, from the group's seed."""
        return np.random.default_rng([*self.seed, self.task.seed, branch])

    def _trajectory(self) -> Trajectory:
        trajectory = Trajectory(env_id=self.task.env_id, task=self.task)
        trajectory.info["seed"] = [*self.seed, self.task.seed]
        trajectory.info.update(branch=0, parent=None, fork_turn=0)
        return trajectory

    def _episode(self, env: Env, trajectory: Trajectory) -> EpisodeLoop:
        return EpisodeLoop(env, trajectory, self.timeouts)
