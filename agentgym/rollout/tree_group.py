"""A group's tree episodes (LATR for multi-turn agents): episodes that fork where the policy is unsure.

The group's tree starts as one episode. Turn by turn, every live episode answers with a tree of the engine's
(:meth:`~agentgym.inference.types.TreeEngine.generate_tree`, branching on the action's uncertain tokens): its
own answer is the first branch, and each other branch becomes a new episode forked from it before this turn (the
environment copied where it forks natively, else replayed and checked: :func:`agentgym.afork_episode`), while
the group has fewer than ``width`` episodes. A child is compared with its parent ``turn_window`` turns after its
birth: when its actions since the fork are within the edit threshold of the parent's (over their tokens), or it
sees what its parent sees, it is pruned with its descendants. The tree phase ends when the group is full and
every child is older than the window, or at ``forced_turn``; each episode then plays on by ordinary sampling.

The caller fills the rest of the group with fresh stochastic episodes, never with copies.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from pydantic import Field

from agentgym.core import Env
from agentgym.episode import Timeouts, _Episode
from agentgym.episode_fork import afork_episode
from agentgym.inference.tree import LatrParams, edit_distance
from agentgym.messages import Message
from agentgym.policies.lm import LMPolicy, TokenSession
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory


class TreeRollout(LatrParams):
    """LATR's settings within a turn (:class:`~agentgym.inference.tree.LatrParams`) and across turns."""

    turn_window: int = Field(2, ge=1)
    """Turns after a fork at which a child is compared with its parent."""
    forced_turn: int = Field(8, ge=1)
    """The tree phase ends after this many turns whatever its state."""
    prune_same_observation: bool = True
    """A child that sees what its parent sees after the window is pruned too, whatever its actions."""


@dataclass
class _Seat:
    """One episode of the tree: its environment, session and record, and where it forked from."""

    env: Env
    session: TokenSession
    episode: _Episode
    parent: int | None
    birth: int
    """The turn whose answer was its first own one (0 for the root)."""
    observations: list[list[Message]] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    action_ids: list[list[int]] = field(default_factory=list)
    done: bool = False
    children: list[int] = field(default_factory=list)

    @property
    def trajectory(self) -> Trajectory:
        return self.episode.trajectory


async def play_tree_group(make_env: Callable[[], Env], policy: LMPolicy, task: Task, *, seed: tuple[int, ...],
                          width: int, settings: TreeRollout, timeouts: Timeouts | None = None) -> list[Trajectory]:
    """Play ``task`` as a tree of at most ``width`` episodes (see the module doc); their trajectories, the root's
    first. ``make_env`` gives a fresh environment for a fork that replays."""
    timeouts = timeouts or Timeouts()
    root_env = make_env()
    root = _Seat(root_env, policy.start(root_env, _rng(task, seed, 0)), _Episode(root_env, _trajectory(task, seed, 0), timeouts),
                 parent=None, birth=0)
    opening, _ = await root_env.areset(**task.reset_kwargs())
    root.trajectory.messages.extend(opening)
    root.observations.append(opening)
    seats = {0: root}
    made = pruned = 0
    turn = 0
    while not _over(seats, width, settings, turn):
        live = [index for index, seat in seats.items() if not seat.done]
        room = width - len(seats)
        tick = time.perf_counter()
        trees = await asyncio.gather(*(seats[i].session.grow(seats[i].observations[-1], settings, 1 + room)
                                       for i in live))
        seconds = time.perf_counter() - tick
        chosen = {}
        for index, branches in zip(live, trees, strict=True):
            chosen[index] = branches[0].result
            for branch in branches[1:]:
                if len(seats) >= width:
                    break
                child = made + 1
                seats[child] = await _fork(seats, index, make_env, task, _rng(task, seed, child), turn, timeouts)
                seats[child].trajectory.info.update(branch=child, parent=index, fork_turn=turn)
                seats[index].children.append(child)
                chosen[child] = branch.result
                made += 1
        for index, result in chosen.items():
            seat = seats[index]
            action = seat.session.take(result)
            seat.actions.append(action)
            seat.action_ids.append(result.token_ids)
            seat.done = await seat.episode.apply(action, seconds)
            seat.observations.append(seat.trajectory.turns[-1].observation)
        turn += 1
        for index in _look_alikes(seats, turn, settings):
            pruned += len(_remove(seats, index))
    for seat in seats.values():
        seat.trajectory.info["tree"] = {"made": made, "pruned": pruned, "turns": turn}
    await asyncio.gather(*(_play_on(seat) for seat in seats.values() if not seat.done))
    for seat in seats.values():
        seat.episode.record(seat.session)
    return [seats[index].trajectory for index in sorted(seats)]


def _rng(task: Task, seed: tuple[int, ...], branch: int) -> np.random.Generator:
    """The policy randomness of a tree's episode ``branch``, from the group's seed."""
    return np.random.default_rng([*seed, task.seed, branch])


def _trajectory(task: Task, seed: tuple[int, ...], branch: int) -> Trajectory:
    trajectory = Trajectory(env_id=task.env_id, task=task)
    trajectory.info["seed"] = [*seed, task.seed]
    trajectory.info.update(branch=branch, parent=None, fork_turn=0)
    return trajectory


async def _fork(seats: dict[int, _Seat], index: int, make_env: Callable[[], Env], task: Task,
                rng: np.random.Generator, turn: int, timeouts: Timeouts) -> _Seat:
    """A new seat in seat ``index``'s state before its answer at ``turn`` (environment forked, record copied)."""
    parent = seats[index]
    options = task.reset_kwargs()["options"]
    env = await afork_episode(parent.env if parent.env.forkable == "native" else make_env, seed=task.seed,
                              actions=parent.actions, observations=parent.observations, options=options)
    trajectory = parent.trajectory.model_copy(deep=True)
    return _Seat(env, parent.session.fork(rng), _Episode(env, trajectory, timeouts), parent=index, birth=turn,
                 observations=list(parent.observations), actions=list(parent.actions),
                 action_ids=list(parent.action_ids))


def _look_alikes(seats: dict[int, _Seat], turn: int, settings: TreeRollout) -> list[int]:
    """Children ``turn_window`` turns old that stayed close to their parent: actions since the fork within the
    edit threshold over their tokens, or the same observation now."""
    doomed = []
    for index, seat in seats.items():
        parent = seats.get(seat.parent) if seat.parent is not None else None
        if parent is None or turn - seat.birth != settings.turn_window or seat.done or parent.done:
            continue
        mine = [t for ids in seat.action_ids[seat.birth:] for t in ids]
        theirs = [t for ids in parent.action_ids[seat.birth:] for t in ids]
        close = edit_distance(mine, theirs) / max(len(mine), len(theirs), 1) < settings.prune_threshold
        same = settings.prune_same_observation and seat.observations[-1] == parent.observations[-1]
        if close or same:
            doomed.append(index)
    return doomed


def _remove(seats: dict[int, _Seat], index: int) -> list[int]:
    """Drop a seat and its descendants (their environments closed); the ids removed."""
    seat = seats.pop(index, None)
    if seat is None:
        return []
    seat.env.close()
    removed = [index]
    for child in seat.children:
        removed += _remove(seats, child)
    return removed


def _over(seats: dict[int, _Seat], width: int, settings: TreeRollout, turn: int) -> bool:
    """Whether the tree phase ends before ``turn``."""
    if turn >= settings.forced_turn or all(seat.done for seat in seats.values()):
        return True
    full = len(seats) >= round(width * settings.exit_fill)
    return full and all(turn - seat.birth > settings.turn_window for seat in seats.values() if seat.parent is not None)


async def _play_on(seat: _Seat) -> None:
    """Finish a seat's episode by ordinary sampling."""
    observation = seat.observations[-1]
    while not seat.done:
        tick = time.perf_counter()
        action = await seat.session.act(observation)
        seat.done = await seat.episode.apply(action, time.perf_counter() - tick)
        observation = seat.trajectory.turns[-1].observation

