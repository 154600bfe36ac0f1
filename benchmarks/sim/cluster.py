"""The simulated cluster on SimPy: the fleet's free GPUs and its bill, a node's round-robin permit, and a
co-execution group running its members' steps on its nodes."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import simpy

from .config import Fleet, Knobs
from .jobs import Job

Process = Generator[simpy.Event, Any, None]


@dataclass
class Lease:
    """GPUs held from ``since`` until given back, billed for that time."""

    rollout_gpus: int
    train_gpus: int
    since: float


class Ledger:
    """The fleet's free GPUs of each type and the bill: every lease is charged its GPUs' price for the time it
    is held, busy or idle (what a disaggregated cluster pays for pools it reserves)."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.free_rollout, self.free_train = fleet.rollout_gpus, fleet.train_gpus
        self.dollars = 0.0
        self.gpu_hours = {"rollout": 0.0, "train": 0.0}

    def fits(self, rollout_gpus: int, train_gpus: int) -> bool:
        """Whether that many GPUs of each type are free."""
        return rollout_gpus <= self.free_rollout and train_gpus <= self.free_train

    def take(self, now: float, rollout_gpus: int, train_gpus: int) -> Lease:
        """Hold GPUs from ``now`` (they must fit)."""
        if not self.fits(rollout_gpus, train_gpus):
            raise RuntimeError(f"{rollout_gpus}+{train_gpus} GPUs do not fit in the free "
                               f"{self.free_rollout}+{self.free_train}")
        self.free_rollout -= rollout_gpus
        self.free_train -= train_gpus
        return Lease(rollout_gpus, train_gpus, now)

    def give(self, now: float, lease: Lease) -> None:
        """Give a lease's GPUs back at ``now`` and add its time to the bill."""
        self.free_rollout += lease.rollout_gpus
        self.free_train += lease.train_gpus
        hours = (now - lease.since) / 3600.0
        self.gpu_hours["rollout"] += lease.rollout_gpus * hours
        self.gpu_hours["train"] += lease.train_gpus * hours
        self.dollars += hours * (lease.rollout_gpus * self.fleet.rollout_price
                                 + lease.train_gpus * self.fleet.train_price)


class RoundRobinPool:
    """One pool's permit in a group, as ``trainers/mux/turnstile.py`` hands it out: while it is held, askers
    wait; a freed permit goes to the first waiting job after the last holder in join order (a job not asking is
    passed over, so the pool never idles while a member waits). ``busy`` logs each holding (job, start, end)."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.members: list[str] = []
        self.holder: str | None = None
        self.last: str | None = None
        """The job that held the permit before the current holder (or last, while free)."""
        self.busy: list[tuple[str, float, float]] = []
        self.tails: list[float] = []
        """When each rollout tail released early on this pool ends."""
        self._waiting: dict[str, simpy.Event] = {}
        self._since = 0.0

    def join(self, job: str) -> None:
        self.members.append(job)

    def leave(self, job: str) -> None:
        """Take ``job`` (neither holding nor waiting) out of the turn."""
        self.members.remove(job)

    def acquire(self, job: str) -> simpy.Event:
        """An event that fires when ``job`` holds the permit."""
        event = self.env.event()
        if self.holder is None:
            self._grant(job, event)
        else:
            self._waiting[job] = event
        return event

    def release(self, job: str) -> None:
        """``job`` gives the permit back; the next waiting member in turn takes it."""
        if self.holder != job:
            raise RuntimeError(f"{job} releases a permit {self.holder} holds")
        self.busy.append((job, self._since, self.env.now))
        self.holder, self.last = None, job
        start = self.members.index(job) + 1 if job in self.members else 0
        for k in range(len(self.members)):
            candidate = self.members[(start + k) % len(self.members)]
            if candidate in self._waiting:
                self._grant(candidate, self._waiting.pop(candidate))
                return

    def drag(self, seconds: float, share: float) -> float:
        """Extra seconds a phase of ``seconds`` starting now takes beside the tails still running: ``share`` of
        its overlap with each."""
        now = self.env.now
        self.tails = [end for end in self.tails if end > now]
        return share * sum(min(end - now, seconds) for end in self.tails)

    def _grant(self, job: str, event: simpy.Event) -> None:
        self.holder, self._since = job, self.env.now
        event.succeed()


class GroupRun:
    """A co-execution group's nodes and its members' step loops. Each node hands its permit round-robin among the
    members pinned to it; a phase takes the permits of all its nodes (in node order, so two phases never wait on
    each other), a warm-start switch first where a node last served another job. A step rolls out and, with
    early release, gives its rollout nodes up once ``knobs.release`` of the work has closed while its tail
    finishes beside the next rollout; then it trains. ``leave`` is called as each member ends."""

    def __init__(self, env: simpy.Environment, knobs: Knobs, leave: Callable[[Job], None]) -> None:
        self.env, self.knobs, self._leave = env, knobs, leave
        self.rollout: dict[int, RoundRobinPool] = {}
        self.train: dict[int, RoundRobinPool] = {}
        self.members: dict[str, Job] = {}

    def join(self, job: Job, rollout: Sequence[int] = (0,), train: Sequence[int] = (0,)) -> simpy.Process:
        """Start ``job``'s steps in the group now, pinned to the ``rollout`` and ``train`` node ids."""
        self.members[job.id] = job
        mine = ([self._node(self.rollout, n) for n in sorted(rollout)], [self._node(self.train, n) for n in sorted(train)])
        for pool in (*mine[0], *mine[1]):
            pool.join(job.id)
        return self.env.process(self._steps(job, *mine))

    def _node(self, pools: dict[int, RoundRobinPool], node: int) -> RoundRobinPool:
        return pools.setdefault(node, RoundRobinPool(self.env))

    def _steps(self, job: Job, rollout: list[RoundRobinPool], train: list[RoundRobinPool]) -> Process:
        release = self.knobs.release is not None
        for step in job.steps:
            tail = step.tail if release else 0.0
            yield from self._take(rollout, job)
            bulk = step.rollout - tail
            drag = max(pool.drag(bulk, self.knobs.tail_drag) for pool in rollout)
            yield self.env.timeout(self._switch(rollout, job) + bulk + drag)
            for pool in rollout:
                pool.release(job.id)
            if tail > 0:
                for pool in rollout:
                    pool.tails.append(self.env.now + tail)
                yield self.env.timeout(tail)
            yield from self._take(train, job)
            yield self.env.timeout(self._switch(train, job) + step.train)
            for pool in train:
                pool.release(job.id)
        for pool in (*rollout, *train):
            pool.leave(job.id)
        del self.members[job.id]
        self._leave(job)

    def _take(self, pools: list[RoundRobinPool], job: Job) -> Process:
        for pool in pools:
            yield pool.acquire(job.id)

    def _switch(self, pools: list[RoundRobinPool], job: Job) -> float:
        return self.knobs.switch_seconds if any(pool.last != job.id for pool in pools) else 0.0
