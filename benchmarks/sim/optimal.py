"""The brute-force optimum of a small instance of jobs of one size, over the design space admission searches:
every partition of the jobs into co-execution groups, and of each group's members onto rollout nodes (a member on
a node of its own is rollout scaling), that keeps each node's residency and each member's SLO; the cheapest kept
(branch and bound; fine to about 10 jobs)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from agentgym.trainers.mux.estimate import Member, Model, Profile, step_times
from agentgym.trainers.mux.plan import Machines, Rules

from .config import Fleet, Knobs
from .jobs import Job

Bins = list[list[int]]
"""A group: the members (indices) of each of its rollout nodes; all of them share its training nodes."""


def _members(bins: Sequence[Sequence[Profile]]) -> list[Member]:
    """A group's members pinned to its rollout nodes (each of a bin's ``rollout_nodes`` nodes) and its shared
    training nodes."""
    out = []
    for index, bin in enumerate(bins):
        for profile in bin:
            width = profile.rollout_nodes
            out.append(Member(profile, tuple(range(index * width, (index + 1) * width)),
                              tuple(range(profile.train_nodes))))
    return out


def slowest_step(bins: Sequence[Sequence[Profile]], model: Model) -> float:
    """Seconds per step of a group's slowest member, as admission estimates it (:func:`step_times`)."""
    return max(step_times(_members(bins), model))


def feasible(bins: Sequence[Sequence[Profile]], machines: Machines, rules: Rules) -> bool:
    """Whether the group keeps every node's residency and host memory and every member's SLO, as admission
    judges it (its step-time model and SLO margin)."""
    members = _members(bins)
    cap = machines.max_resident if machines.max_resident is not None else math.inf
    times = step_times(members, rules.model)
    return (len(members) <= cap and all(len(bin) <= cap for bin in bins)
            and sum(m.profile.memory_gb for m in members) <= machines.node_memory_gb
            and all(t * (1 + rules.slo_margin) <= m.profile.budget * (1 + 1e-9)
                    for t, m in zip(times, members, strict=True)))


def group_cost(bins: Sequence[Sequence[Profile]], machines: Machines, model: Model) -> float:
    """Dollars of one step of a group's slowest member (all members make as many steps, so a group holds its
    nodes that long per step): its nodes' price over that step."""
    size = bins[0][0]
    return machines.cost_per_second(len(bins) * size.rollout_nodes, size.train_nodes) * slowest_step(bins, model)


def optimal_groups(jobs: Sequence[Job], fleet: Fleet, knobs: Knobs) -> tuple[list[list[list[str]]], float]:
    """The feasible grouping of ``jobs`` (one size, as many steps each) of least cost per step, as lists of
    rollout nodes' members, and that cost. Adding a member never speeds another nor loosens a limit, so a branch
    stops as soon as a group turns infeasible or the groups so far cost at least the best whole grouping. Without
    ``knobs.rules.rollout_scaling`` every group has one rollout node."""
    if len({(job.rollout_gpus, job.train_gpus) for job in jobs}) > 1:
        raise ValueError("the brute-force optimum takes jobs of one size")
    machines, model = fleet.machines(), knobs.rules.model
    profiles = [job.profile(knobs, fleet) for job in jobs]
    groups: list[Bins] = []
    best: tuple[float, list[Bins]] = (math.inf, [])

    def of(bins: Bins) -> list[list[Profile]]:
        return [[profiles[i] for i in bin] for bin in bins]

    def cost() -> float:
        return sum(group_cost(of(bins), machines, model) for bins in groups)

    def place(index: int) -> None:
        nonlocal best
        so_far = cost()
        if so_far >= best[0]:
            return
        if index == len(jobs):
            best = (so_far, [[list(bin) for bin in bins] for bins in groups])
            return
        for bins in groups:
            for bin in bins:
                bin.append(index)
                if feasible(of(bins), machines, knobs.rules):
                    place(index + 1)
                bin.pop()
            if knobs.rules.rollout_scaling:
                bins.append([index])
                if feasible(of(bins), machines, knobs.rules):
                    place(index + 1)
                bins.pop()
        groups.append([[index]])
        place(index + 1)
        groups.pop()

    place(0)
    return [[[jobs[i].id for i in bin] for bin in bins] for bins in best[1]], best[0]

