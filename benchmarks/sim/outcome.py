"""What a simulated policy run comes to: each job's queueing and co-run slowdown, the bill, and the work done per
dollar."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from .config import Fleet
from .jobs import Job


@dataclass
class JobRecord:
    """A job's run: admitted at ``started`` (after ``waited`` seconds in the queue, counted apart from its SLO),
    done at ``finished``."""

    job: Job
    started: float
    finished: float = math.nan

    @property
    def waited(self) -> float:
        return self.started - self.job.arrival

    @property
    def slowdown(self) -> float:
        """Its mean step time from admission to its last step, over its mean step time alone on its own pools
        (the same steps): what its SLO bounds."""
        return (self.finished - self.started) / self.job.solo_seconds

    @property
    def slo_met(self) -> bool:
        return self.slowdown <= self.job.slo * (1 + 1e-9)


def work(job: Job, fleet: Fleet) -> float:
    """A job's work in dollars of solo disaggregation: its steps alone, on its own pool pair."""
    return fleet.cost_per_second(job.rollout_gpus, job.train_gpus) * job.solo_seconds


@dataclass
class Outcome:
    """One policy's run of a trace: its bill, the work it did (every job's solo dollars) and its jobs' records."""

    policy: str
    dollars: float
    work: float
    records: list[JobRecord]
    gpu_hours: dict[str, float] = field(default_factory=dict)

    @property
    def efficiency(self) -> float:
        """Work done per dollar (1.0 for solo disaggregation, which bills exactly the work)."""
        return self.work / self.dollars

    @property
    def slo_attainment(self) -> float:
        return sum(r.slo_met for r in self.records) / len(self.records)

    @property
    def jobs_per_pool(self) -> float:
        """Jobs running per training pool held, on average over the GPU-hours billed (1 without sharing)."""
        held = sum(r.job.train_gpus * (r.finished - r.started) for r in self.records) / 3600
        return held / self.gpu_hours["train"]

    def summary(self) -> dict[str, Any]:
        """The figures of the run, for the results file."""
        slowdowns = [r.slowdown for r in self.records]
        waits = [r.waited / 3600 for r in self.records]
        return {"dollars": round(self.dollars, 2), "work_dollars": round(self.work, 2),
                "efficiency": round(self.efficiency, 4), "slo_attainment": round(self.slo_attainment, 4),
                "slo_violations": [r.job.id for r in self.records if not r.slo_met],
                "slowdown_mean": round(statistics.fmean(slowdowns), 4), "slowdown_max": round(max(slowdowns), 4),
                "jobs_per_pool": round(self.jobs_per_pool, 3),
                "queue_wait_hours_mean": round(statistics.fmean(waits), 3),
                "queue_wait_hours_max": round(max(waits), 3),
                "makespan_hours": round(max(r.finished for r in self.records) / 3600, 2),
                "gpu_hours": {k: round(v, 1) for k, v in self.gpu_hours.items()}}
