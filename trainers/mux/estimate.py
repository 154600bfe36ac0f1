"""What admission knows of a job (its :class:`Profile`) and how long each member of a co-execution group takes a
step there (:func:`step_times`): the estimate every SLO check of RollMux's admission rests on."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Basis = Literal["mean", "quantile", "mixed"]
Model = Literal["shared", "lockstep"]
Pool = Literal["rollout", "train"]
Node = tuple[Pool, int]


@dataclass(frozen=True)
class Profile:
    """What admission knows of a job: seconds per step of its rollout and its training on its own nodes, its size
    in nodes of each pool, the host memory its resident states take on each training node it is pinned to, and
    its SLO (the most its step time may grow against running alone: co-run time <= ``slo`` x solo time).
    ``variability``: each phase's mean square over its squared mean (1 for a phase that always takes as long),
    which sets how long another job waits, on average, for the phase it finds running."""

    rollout: float
    train: float
    memory_gb: float = 0.0
    slo: float = 2.0
    typical: float | None = None
    """Seconds of the step alone its SLO is measured against (``None``: ``solo``, like for like)."""
    rollout_nodes: int = 1
    train_nodes: int = 1
    variability: tuple[float, float] = (1.0, 1.0)

    def __post_init__(self) -> None:
        if self.rollout < 0 or self.train < 0 or self.rollout + self.train <= 0:
            raise ValueError(f"phase times must be >= 0 and not both 0, got rollout {self.rollout}, train {self.train}")
        if self.slo < 1:
            raise ValueError(f"an SLO is a slowdown bound >= 1, got {self.slo}")
        if self.rollout_nodes < 1 or self.train_nodes < 1:
            raise ValueError(f"a job needs at least one node of each pool, got {self.rollout_nodes} rollout and "
                             f"{self.train_nodes} training nodes")

    @property
    def solo(self) -> float:
        """Seconds per step alone on its nodes: rollout, then training (a synchronous job's two phases)."""
        return self.rollout + self.train

    @property
    def budget(self) -> float:
        """The most seconds a co-run step may take: ``slo`` times its step alone."""
        return self.slo * (self.solo if self.typical is None else self.typical)

    @property
    def size(self) -> tuple[int, int]:
        return self.rollout_nodes, self.train_nodes

    def phase(self, pool: Pool) -> float:
        return self.rollout if pool == "rollout" else self.train

    def residual(self, pool: Pool) -> float:
        """Seconds left, on average, of this job's phase on ``pool`` that another job finds running:
        ``E[S^2] / 2 E[S]``."""
        return self.phase(pool) * self.variability[pool == "train"] / 2

    @classmethod
    def from_samples(cls, rollout: Iterable[float], train: Iterable[float], *, basis: Basis = "mean",
                     quantile: float = 0.9, overhead: float = 0.0, memory_gb: float = 0.0, slo: float = 2.0,
                     rollout_nodes: int = 1, train_nodes: int = 1) -> Profile:
        """A profile from measured phase times, planned on ``basis``: ``mean`` (each phase's mean, and the SLO on
        the mean step: what the SLO bounds, over a whole run), ``quantile`` (each phase at its ``quantile``, and
        the SLO on that step: like for like, as Weave plans both sides on worst-case phases), or ``mixed`` (the
        phases at the quantile, the SLO on the mean step: a longest member alone then shows a slowdown of its
        quantile over its mean). ``overhead`` (a switch between jobs) is added to each planned phase, never to the
        step alone the SLO is measured against."""
        rollout, train = list(rollout), list(train)
        if len(rollout) != len(train) or not rollout:
            raise ValueError(f"a profile needs paired phase times, got {len(rollout)} rollouts and {len(train)} "
                             "trainings")
        variability = (_variability([r + overhead for r in rollout]), _variability([t + overhead for t in train]))
        shared = {"memory_gb": memory_gb, "slo": slo, "rollout_nodes": rollout_nodes, "train_nodes": train_nodes,
                  "variability": variability}
        if basis == "quantile":
            planned = _quantile(rollout, quantile), _quantile(train, quantile)
            typical = sum(planned)
        else:
            planned = (_quantile(rollout, quantile), _quantile(train, quantile)) if basis == "mixed" \
                else (statistics.fmean(rollout), statistics.fmean(train))
            typical = statistics.fmean(rollout) + statistics.fmean(train)
        return cls(planned[0] + overhead, planned[1] + overhead, typical=typical, **shared)


def _quantile(samples: list[float], q: float) -> float:
    if len(samples) == 1:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[min(98, max(0, round(q * 100) - 1))]


def _variability(samples: list[float]) -> float:
    mean = statistics.fmean(samples)
    return statistics.fmean(s * s for s in samples) / (mean * mean) if mean > 0 else 1.0


@dataclass
class Member:
    """A member's profile and the nodes it is pinned to (node ids within its group)."""

    profile: Profile
    rollout: tuple[int, ...]
    train: tuple[int, ...]

    def nodes(self) -> tuple[Node, ...]:
        return (*(("rollout", n) for n in self.rollout), *(("train", n) for n in self.train))


def step_times(members: Sequence[Member], model: Model = "shared") -> list[float]:
    """Each member's expected seconds per step in a group.

    ``lockstep``: every member makes one step per meta-iteration, as long as the busiest node's phases or the
    longest member's step (Weave's round-robin schedule), among the members linked through shared nodes.

    ``shared``: the nodes serve whoever asks, in turn (as the scheduler's turnstiles and the simulator do), so a
    member runs at its own pace unless a node it uses is saturated. Step rates rise together until a member
    reaches its solo pace or a node it uses is busy all the time, which fixes the rates of its members (round
    robin gives each an equal share of phases there: progressive filling). A member then also waits, at each of
    its pools, on its most-waited node there, as in an M/G/1 queue: ``R / (1 - rho)``, where ``rho`` is the other
    members' share of the node's time and ``R`` that share times their phase's mean residual (``E[S^2] / 2 E[S]``),
    but never more than one phase of each other member (round robin serves each once before it comes back). Where
    no node is saturated at the members' own paces, the filling ends at once. A member's estimate is never more
    than its lockstep meta-iteration: phases that repeat alike fall into step and stop meeting (two balanced jobs
    alternate with no wait, where a queue would have them wait half the time). (A phase on several nodes that
    other members share in part waits longer than this: it starts only once all of them are free.)"""
    count = len(members)
    if not count:
        return []
    profiles = [m.profile for m in members]
    solo = [p.solo for p in profiles]
    phases = {"rollout": [p.rollout for p in profiles], "train": [p.train for p in profiles]}
    users: dict[Node, list[int]] = {}
    for j, member in enumerate(members):
        for node in member.nodes():
            users.setdefault(node, []).append(j)
    # Nodes of a pool that serve the same members behave alike: each such set counts once.
    owned: list[set[tuple[Pool, tuple[int, ...]]]] = [set() for _ in members]
    for (pool, _), ids in users.items():
        for j in ids:
            owned[j].add((pool, tuple(ids)))
    kinds = set().union(*owned)
    nodes = [(phases[pool], list(ids)) for pool, ids in kinds]
    lockstep = _lockstep(count, solo, nodes)
    if model == "lockstep":
        return lockstep
    rate = _filled(solo, nodes)
    busy = {pool: [r * t for r, t in zip(rate, phases[pool], strict=True)] for pool in ("rollout", "train")}
    found = {pool: [b * p.residual(pool) for b, p in zip(busy[pool], profiles, strict=True)]
             for pool in ("rollout", "train")}
    totals = {(pool, ids): (sum(busy[pool][i] for i in ids), sum(found[pool][i] for i in ids),
                            sum(phases[pool][i] for i in ids)) for pool, ids in kinds}
    times = []
    for j, mine in enumerate(owned):
        waits = {"rollout": 0.0, "train": 0.0}
        for node in mine:
            pool = node[0]
            load, residual, phase = totals[node]
            load, residual, phase = load - busy[pool][j], residual - found[pool][j], phase - phases[pool][j]
            waits[pool] = max(waits[pool], min(phase, residual / max(1e-9, 1 - load)))
        times.append(min(lockstep[j], max(1 / rate[j], solo[j] + waits["rollout"] + waits["train"])))
    return times


def _filled(solo: list[float], nodes: list[tuple[list[float], list[int]]]) -> list[float]:
    """Each member's steps a second by progressive filling (:func:`step_times`): its solo pace where no node is
    saturated at the members' own paces."""
    count = len(solo)
    rate = [1 / t for t in solo]
    if not any(sum(phase[j] * rate[j] for j in ids) > 1 + 1e-12 for phase, ids in nodes):
        return rate
    rate = [0.0] * count
    frozen = [False] * count
    while not all(frozen):
        step = min(1 / solo[j] - rate[j] for j in range(count) if not frozen[j])
        for phase, ids in nodes:
            rising = sum(phase[j] for j in ids if not frozen[j])
            if rising > 0:
                step = min(step, (1 - sum(phase[j] * rate[j] for j in ids)) / rising)
        step = max(step, 0.0)
        for j in range(count):
            if not frozen[j]:
                rate[j] += step
                frozen[j] = rate[j] * solo[j] >= 1 - 1e-12
        for phase, ids in nodes:
            if sum(phase[j] * rate[j] for j in ids) >= 1 - 1e-12:
                for j in ids:
                    frozen[j] = True
    return rate


def _lockstep(count: int, solo: list[float], nodes: list[tuple[list[float], list[int]]]) -> list[float]:
    """Each member's meta-iteration: members linked through shared nodes step together, as long as their
    busiest node's phases or their longest member's step."""
    link = list(range(count))

    def root(j: int) -> int:
        while link[j] != j:
            link[j] = link[link[j]]
            j = link[j]
        return j

    for _, ids in nodes:
        for j in ids[1:]:
            link[root(j)] = root(ids[0])
    cycle: dict[int, float] = {}
    for j in range(count):
        cycle[root(j)] = max(cycle.get(root(j), 0.0), solo[j])
    for phase, ids in nodes:
        cycle[root(ids[0])] = max(cycle[root(ids[0])], sum(phase[j] for j in ids))
    return [cycle[root(j)] for j in range(count)]
