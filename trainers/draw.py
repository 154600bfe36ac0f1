"""What a training step takes from the rollout: closed groups, in the order ``trainer.group_order`` says, drawn
until the step has its ``groups_per_step`` (under dynamic sampling, groups with signal)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from agentgym.errors import AgentGymError
from agentgym.rollout.background import BackgroundLoop
from agentgym.rollout.scheduler import RolloutScheduler
from agentgym.rollout.stream import ClosedGroup, TrajectoryStream
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.mux.turns import PoolTurns
from agentgym.trajectory import Trajectory, has_signal


@dataclass
class StepGroups:
    """The closed groups a step took from the rollout, by what the step does with them. A group's
    ``id.index`` is its task position; ``id.carried`` marks a carry-over group (``rollout.carry_over``: an extra
    group of an earlier position's task, outside the hand-out order)."""

    trained: list[ClosedGroup] = field(default_factory=list)
    dropped: list[ClosedGroup] = field(default_factory=list)
    """Groups whose rewards were all equal, left out by dynamic sampling."""
    failed: list[int] = field(default_factory=list)
    """Positions of groups that failed on infrastructure."""
    stale: list[ClosedGroup] = field(default_factory=list)
    """Groups with a member older than ``async_ratio`` versions by the step that would train it (kept in time, it
    waited for slower members of its group): left out, so no trained token breaks the staleness bound."""

    @property
    def closed(self) -> int:
        return len(self.trained) + len(self.dropped) + len(self.failed) + len(self.stale)


async def closed_groups(stream: TrajectoryStream, order: Iterator[int], *, in_order: bool
                        ) -> AsyncIterator[ClosedGroup]:
    """Every group of ``stream`` once closed: as groups close, or ``in_order`` of hand-out (``order`` is the
    positions in the order they were handed out). Carry-over groups are outside that order and come as they close."""
    handed: deque[int] = deque()  # positions handed out and not yet yielded
    closed: dict[int, ClosedGroup] = {}
    async for group in stream.closed_groups():
        if group.id.carried or not in_order:
            yield group
            continue
        while group.id.index not in handed:
            handed.append(next(order))
        closed[group.id.index] = group
        while handed and handed[0] in closed:
            yield closed.pop(handed.popleft())


def staleness(trajectories: list[Trajectory], version: int) -> int:
    """How many versions the oldest model-sampled token of ``trajectories`` lags ``version`` (0 without any)."""
    return max((version - min(v for v in t.versions if v >= 0) for t in trajectories if any(v >= 0 for v in t.versions)),
               default=0)


class GroupDrawer:
    """Draws each step's groups from ``groups`` (the rollout's, as :func:`closed_groups` gives them), giving the
    rollout back the budget of those it leaves out."""

    def __init__(self, config: TrainConfig, background: BackgroundLoop, groups: AsyncIterator[ClosedGroup],
                 rollout: Future[Any], scheduler: RolloutScheduler, console: Console, turns: PoolTurns | None) -> None:
        self.config, self.background, self.groups = config, background, groups
        self.rollout, self.scheduler, self.console, self.turns = rollout, scheduler, console, turns

    def draw(self, step: int, version: int) -> StepGroups:
        """Step ``step``'s ``groups_per_step`` complete groups (under dynamic sampling, with signal; none older than
        ``trainer.max_lag`` against the learner's ``version``), and those passed on the way."""
        wanted, algorithm = self.config.trainer.groups_per_step, self.config.algorithm
        limit = math.ceil(algorithm.dynamic_sampling_draws * wanted) if algorithm.dynamic_sampling else math.inf
        drawn = StepGroups()
        while len(drawn.trained) < wanted and drawn.closed < limit:
            try:
                group = self.background.run(anext(self.groups))
            except StopAsyncIteration:
                self.rollout.result()
                raise AgentGymError("the rollout ended before training did (every task group failed?)") from None
            if not group.complete:
                if not group.id.carried:  # a failed carry-over group is an extra: the scheduler counts it, no task is owed
                    drawn.failed.append(group.id.index)
            elif algorithm.dynamic_sampling and not has_signal(group.members):
                drawn.dropped.append(group)
                self.background.call(self.scheduler.release, len(group.members))
            elif staleness(group.members, version) > self.config.trainer.max_lag:
                drawn.stale.append(group)
                self.background.call(self.scheduler.release, len(group.members))
            else:
                drawn.trained.append(group)
            if self.turns is not None:
                self.turns.closed(len(drawn.trained), wanted)
        if len(drawn.trained) < wanted:
            self._short(drawn, step)
        return drawn

    def _short(self, drawn: StepGroups, step: int) -> None:
        """Dynamic sampling drew its bound of groups and found too few with signal: go on with those found,
        or, with none, stop the run saying why."""
        wanted = self.config.trainer.groups_per_step
        if drawn.trained:
            self.console.print(f"[yellow]step {step}: dynamic sampling found {len(drawn.trained)} of {wanted} "
                               f"groups with signal in {drawn.closed} drawn; training on those[/]")
            return
        rewards = [t.reward for group in drawn.dropped for t in group.members]
        seen = f"; their mean reward was {sum(rewards) / len(rewards):.2f}" if rewards else ""
        raise AgentGymError(
            f"step {step}: dynamic sampling gave up after {drawn.closed} groups (algorithm.dynamic_sampling_draws="
            f"{self.config.algorithm.dynamic_sampling_draws} x trainer.groups_per_step={wanted}): every one had "
            f"equal rewards within the group ({len(drawn.dropped)}) or failed ({len(drawn.failed)}){seen}. There is "
            "nothing to learn from: the tasks are all too hard or all too easy for this model; change env "
            "difficulties or raise algorithm.dynamic_sampling_draws")
