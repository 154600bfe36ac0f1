"""RollMux's planning arithmetic, shared by the Ray scheduler and the cluster simulator: a job's profile, the
round-robin cycle of a co-execution group, and the inter-group admission that places each new job where it adds
the least cost without breaking host-memory residency or any member's slowdown SLO.

A co-execution group owns one rollout pool and one training pool. Its round-robin schedule runs every member's
rollout once on the rollout pool and every member's training once on the training pool per meta-iteration, whose
length in steady state is ``max(sum of rollouts, sum of trainings, longest single job's rollout + training)``:
the busier pool, or one job's own dependency chain, whichever binds. Each member then makes one step per cycle,
so its slowdown against running alone on the same pools is ``cycle / (its rollout + its training)``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Profile:
    """What admission knows of a job: seconds per step of its rollout and its training on its group's pools, the
    host memory its resident states take (engine and learner, kept warm between phases), and its SLO (the most
    its step time may grow against running alone: co-run time <= ``slo`` x solo time)."""

    rollout: float
    train: float
    memory_gb: float = 0.0
    slo: float = 2.0
    typical: float | None = None
    """Seconds of its typical step alone, what its SLO is measured against (``None``: ``solo``). Planned phase
    times at a high quantile are above it: the cycle is estimated conservatively, the budget is not inflated."""

    def __post_init__(self) -> None:
        if self.rollout < 0 or self.train < 0 or self.rollout + self.train <= 0:
            raise ValueError(f"phase times must be >= 0 and not both 0, got rollout {self.rollout}, train {self.train}")
        if self.slo < 1:
            raise ValueError(f"an SLO is a slowdown bound >= 1, got {self.slo}")

    @property
    def solo(self) -> float:
        """Seconds per step alone on the pools: rollout, then training (a synchronous job's two phases)."""
        return self.rollout + self.train

    @property
    def budget(self) -> float:
        """The most seconds a co-run step may take: ``slo`` times its typical step alone."""
        return self.slo * (self.solo if self.typical is None else self.typical)

    @classmethod
    def from_samples(cls, rollout: Iterable[float], train: Iterable[float], *, quantile: float = 0.9,
                     memory_gb: float = 0.0, slo: float = 2.0) -> Profile:
        """A conservative profile from measured phase times: each phase at its ``quantile`` (RollMux plans on
        a high quantile of each phase's distribution, so a job's slow steps do not break its group's SLOs),
        its SLO budget on its mean step (the quantile would loosen the budget as much as it pads the cycle)."""
        rollout, train = list(rollout), list(train)
        planned = _quantile(rollout, quantile), _quantile(train, quantile)
        typical = statistics.fmean(rollout) + statistics.fmean(train)
        return cls(*planned, memory_gb=memory_gb, slo=slo, typical=typical)


def _quantile(samples: list[float], q: float) -> float:
    if not samples:
        raise ValueError("a phase needs at least one measured time")
    if len(samples) == 1:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[min(98, max(0, round(q * 100) - 1))]


def cycle_time(members: Iterable[Profile]) -> float:
    """Seconds of one round-robin meta-iteration of a group of ``members`` in steady state (0 for none)."""
    members = list(members)
    if not members:
        return 0.0
    return max(sum(m.rollout for m in members), sum(m.train for m in members), max(m.solo for m in members))


def slowdowns(members: Sequence[Profile]) -> list[float]:
    """Each member's step time in the group against alone: ``cycle / solo``."""
    cycle = cycle_time(members)
    return [cycle / m.solo for m in members]


@dataclass(frozen=True)
class PoolPair:
    """The machines a co-execution group owns: a rollout pool and a training pool, their prices, and the host
    memory in which the members' states stay resident."""

    rollout_gpus: int = 1
    train_gpus: int = 1
    rollout_price: float = 1.0
    """Per GPU-hour (or per core-hour on a CPU cluster)."""
    train_price: float = 1.0
    memory_gb: float = float("inf")

    @property
    def cost_per_second(self) -> float:
        return (self.rollout_gpus * self.rollout_price + self.train_gpus * self.train_price) / SECONDS_PER_HOUR


class Group:
    """A co-execution group: its pools and its members' profiles by job id, with the sums admission reads kept
    up to date (so a placement weighs each group in constant time)."""

    def __init__(self, id: int, pools: PoolPair) -> None:
        self.id, self.pools = id, pools
        self.members: dict[str, Profile] = {}
        self._sums()

    def add(self, job: str, profile: Profile) -> None:
        self.members[job] = profile
        self._sums()

    def discard(self, job: str) -> None:
        self.members.pop(job, None)
        self._sums()

    def _sums(self) -> None:
        members = self.members.values()
        self.rollout = sum(m.rollout for m in members)
        self.train = sum(m.train for m in members)
        self.longest = max((m.solo for m in members), default=0.0)
        self.memory_gb = sum(m.memory_gb for m in members)
        self.budget = min((m.budget for m in members), default=float("inf"))
        """The tightest member's SLO, in seconds per step: no cycle may exceed it."""

    @property
    def cycle(self) -> float:
        return max(self.rollout, self.train, self.longest)

    def cycle_with(self, profile: Profile) -> float:
        """The cycle once ``profile`` joins."""
        return max(self.rollout + profile.rollout, self.train + profile.train, self.longest, profile.solo)

    def cost_rate(self) -> float:
        """Dollars per member step: the pools' cost over one cycle, per step each member makes in it."""
        return self.pools.cost_per_second * self.cycle / len(self.members) if self.members else 0.0


@dataclass(frozen=True)
class Decision:
    """Where admission put a job: ``group`` (``new`` when it opened it), or ``None`` with the ``reason``."""

    job: str
    group: int | None
    new: bool = False
    reason: str = ""
    added_cost: float = 0.0
    """Dollars each of the job's steps adds to the bill: its group's cycle growth times the pools' price, or a
    whole new pool pair for its solo step (the least of the choices)."""


class Admission:
    """RollMux's inter-group scheduler: each new job goes to the group where it adds the least cost (the group's
    extra cost per cycle when it fits, a whole pool pair when it opens a group), never where the group's host
    memory would overflow or any member's co-run time would exceed its SLO times its solo time. A job that fits
    no group and finds no free pool pair is refused, with each group's reason (the first few)."""

    def __init__(self, pools: Sequence[PoolPair] | PoolPair, *, max_groups: int | None = None) -> None:
        """``pools``: the pool pairs available, one group each; or one shape that ``max_groups`` groups (no bound
        for ``None``) may take."""
        self._shapes = list(pools) if isinstance(pools, Sequence) else None
        self._shape = pools if isinstance(pools, PoolPair) else None
        self.max_groups = len(self._shapes) if self._shapes is not None else max_groups
        self.groups: dict[int, Group] = {}
        self._where: dict[str, int] = {}
        self._freed: list[int] = []
        """Indices of groups that emptied, reused lowest first before new ones."""

    def group_of(self, job: str) -> Group | None:
        index = self._where.get(job)
        return None if index is None else self.groups[index]

    def fits(self, group: Group, profile: Profile) -> str | None:
        """Why ``profile`` cannot join ``group`` (``None``: it can)."""
        if group.memory_gb + profile.memory_gb > group.pools.memory_gb:
            return (f"host memory: group {group.id} holds {group.memory_gb:.1f} GB of {group.pools.memory_gb:.1f}, "
                    f"the job needs {profile.memory_gb:.1f}")
        cycle = group.cycle_with(profile)
        if cycle <= min(group.budget, profile.budget) * (1 + 1e-9):
            return None
        members = [*group.members.items(), ("the new job", profile)]
        name, member = next((n, m) for n, m in members if cycle > m.budget * (1 + 1e-9))
        alone = member.solo if member.typical is None else member.typical
        return (f"SLO: in group {group.id} {name} would take {cycle:.1f} s a step, "
                f"{cycle / alone:.2f}x its {alone:.1f} s alone (SLO {member.slo:.2f}x)")

    def place(self, job: str, profile: Profile, *, group: int | None = None) -> Decision:
        """Admit ``job``: into ``group`` where given (a job re-registering after a scheduler restart keeps its
        group, fit or not), else where it adds the least cost. A refused job is not admitted."""
        if job in self._where:
            raise ValueError(f"job {job!r} is admitted already (group {self._where[job]})")
        if group is not None:
            return self._join(job, profile, self.groups.get(group) or self._open(group), new=group not in self.groups)
        best: tuple[float, Group] | None = None
        for candidate in self.groups.values():
            if candidate.memory_gb + profile.memory_gb <= candidate.pools.memory_gb and \
                    candidate.cycle_with(profile) <= min(candidate.budget, profile.budget) * (1 + 1e-9):
                added = candidate.pools.cost_per_second * (candidate.cycle_with(profile) - candidate.cycle)
                if best is None or added < best[0]:
                    best = (added, candidate)
        fresh = self._free_index()
        pools = None if fresh is None else self._pools(fresh)
        if pools is not None and profile.memory_gb <= pools.memory_gb and \
                (best is None or pools.cost_per_second * profile.solo <= best[0]):
            return self._join(job, profile, self._open(fresh), new=True, added=pools.cost_per_second * profile.solo)
        if best is not None:
            return self._join(job, profile, best[1], new=False, added=best[0])
        reasons = [reason for group in self.groups.values() if (reason := self.fits(group, profile))]
        if len(reasons) > 3:
            reasons = [*reasons[:3], f"and {len(reasons) - 3} more groups"]
        if pools is None:
            reasons.append(f"no free pools for a new group (all {self.max_groups} in use)")
        else:
            reasons.append(f"host memory: the job needs {profile.memory_gb:.1f} GB, a group has {pools.memory_gb:.1f}")
        return Decision(job, None, reason="; ".join(reasons))

    def remove(self, job: str) -> Group | None:
        """Take ``job`` out of its group (a finished, crashed or cancelled job); an emptied group frees its pools.
        Returns the group it left."""
        index = self._where.pop(job, None)
        if index is None:
            return None
        group = self.groups[index]
        group.discard(job)
        if not group.members:
            del self.groups[index]
            self._freed.append(index)
        return group

    def _join(self, job: str, profile: Profile, group: Group, *, new: bool, added: float = 0.0) -> Decision:
        group.add(job, profile)
        self._where[job] = group.id
        return Decision(job, group.id, new=new, added_cost=added)

    def _open(self, index: int) -> Group:
        if index in self._freed:
            self._freed.remove(index)
        self.groups[index] = group = Group(index, self._pools(index))
        return group

    def _pools(self, index: int) -> PoolPair:
        if self._shapes is not None:
            return self._shapes[index]
        assert self._shape is not None
        return self._shape

    def _free_index(self) -> int | None:
        """The lowest index no group holds, within ``max_groups``."""
        index = min(self._freed) if self._freed else len(self.groups)
        while index in self.groups:
            index += 1
        return index if self.max_groups is None or index < self.max_groups else None
