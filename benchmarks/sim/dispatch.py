"""One policy's run of a trace: jobs arrive, wait in a queue until the policy can start them (first come first
served, a later job starting ahead of one that does not fit yet), run, and give their GPUs back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import simpy

from .cluster import Ledger, Process
from .config import Fleet, Knobs
from .jobs import Job
from .outcome import JobRecord, Outcome, work


class Policy(Protocol):
    name: str

    def start(self, sim: Sim, job: Job) -> bool:
        """Start ``job`` now if the fleet has room for it (calling ``sim.done`` when it ends); ``False`` keeps it
        queued."""
        ...


class Sim:
    """The clock, the fleet's ledger and the queue of one run."""

    def __init__(self, policy: Policy, fleet: Fleet, knobs: Knobs) -> None:
        self.policy, self.fleet, self.knobs = policy, fleet, knobs
        self.env = simpy.Environment()
        self.ledger = Ledger(fleet)
        self.queue: list[Job] = []
        self.records: dict[str, JobRecord] = {}

    def done(self, job: Job) -> None:
        """``job`` ended now (its GPUs already given back): record it and start what now fits."""
        self.records[job.id].finished = self.env.now
        self.dispatch()

    def dispatch(self) -> None:
        """Start every queued job the policy can start now, in arrival order."""
        for job in list(self.queue):
            if self.policy.start(self, job):
                self.queue.remove(job)
                self.records[job.id] = JobRecord(job, self.env.now)

    def arrivals(self, jobs: Sequence[Job]) -> Process:
        for job in sorted(jobs, key=lambda j: j.arrival):
            if job.arrival > self.env.now:
                yield self.env.timeout(job.arrival - self.env.now)
            self.queue.append(job)
            self.dispatch()


def simulate(policy: Policy, jobs: Sequence[Job], fleet: Fleet, knobs: Knobs) -> Outcome:
    """Run ``jobs`` under ``policy`` to the last one's end."""
    sim = Sim(policy, fleet, knobs)
    sim.env.process(sim.arrivals(jobs))
    sim.env.run()
    if sim.queue or len(sim.records) < len(jobs):
        raise RuntimeError(f"{policy.name}: {len(sim.queue)} jobs never fit the fleet "
                           f"({', '.join(j.id for j in sim.queue[:3])})")
    records = [sim.records[j.id] for j in jobs]
    return Outcome(policy.name, sim.ledger.dollars, sum(work(j, fleet) for j in jobs), records,
                   dict(sim.ledger.gpu_hours))
