"""The brute-force optimum of a small instance: every partition of its jobs into co-execution groups that keep
host memory and each member's SLO, the cheapest kept (branch and bound over set partitions; fine to about 10)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from agentgym.trainers.mux.plan import PoolPair, Profile, cycle_time

from .config import Fleet
from .jobs import Job


def feasible(members: Sequence[Profile], pools: PoolPair) -> bool:
    """Whether ``members`` may share ``pools``: their states fit its host memory and the group's cycle is within
    every member's SLO times its solo step."""
    return (sum(m.memory_gb for m in members) <= pools.memory_gb
            and cycle_time(members) <= min(m.budget for m in members) * (1 + 1e-9))


def group_cost(members: Sequence[Profile], pools: PoolPair) -> float:
    """Dollars of one meta-iteration of a group: its pools' price over its cycle (each member makes one step)."""
    return pools.cost_per_second * cycle_time(members)


def optimal_groups(jobs: Sequence[Job], fleet: Fleet, quantile: float = 0.9,
                   switch_seconds: float = 0.0) -> tuple[list[list[str]], float]:
    """The feasible partition of ``jobs`` (a group holds jobs of one size) of least cost per meta-iteration, and
    that cost. Adding a member never lowers a group's cycle nor loosens its SLO budget, so a branch stops as
    soon as a group turns infeasible or the groups so far cost at least the best whole partition."""
    profiles = [job.profile(quantile, switch_seconds) for job in jobs]
    pools = [fleet.pools(job.rollout_gpus, job.train_gpus) for job in jobs]
    blocks: list[list[int]] = []
    best: tuple[float, list[list[int]]] = (math.inf, [])

    def cost() -> float:
        return sum(group_cost([profiles[i] for i in block], pools[block[0]]) for block in blocks)

    def place(index: int) -> None:
        nonlocal best
        so_far = cost()
        if so_far >= best[0]:
            return
        if index == len(jobs):
            best = (so_far, [list(block) for block in blocks])
            return
        for block in blocks:
            if pools[block[0]] == pools[index] and \
                    feasible([profiles[i] for i in (*block, index)], pools[index]):
                block.append(index)
                place(index + 1)
                block.pop()
        blocks.append([index])
        place(index + 1)
        blocks.pop()

    place(0)
    return [[jobs[i].id for i in block] for block in best[1]], best[0]
