"""The four policies a trace runs under: solo disaggregation, co-located (verl-style) time-sharing, RollMux
(admission into co-execution groups, round-robin within each), and a fixed partition into groups (the
brute-force optimum's, see ``optimal.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from agentgym.trainers.mux.plan import Admission, Profile

from .cluster import GroupRun, Lease, Process
from .dispatch import Sim
from .jobs import Job


class Solo:
    """Standard disaggregation: each job holds a rollout pool and a training pool of its own for its lifetime,
    one idle while the other works."""

    name = "solo"

    def start(self, sim: Sim, job: Job) -> bool:
        if not sim.ledger.fits(job.rollout_gpus, job.train_gpus):
            return False
        sim.env.process(self._run(sim, job, sim.ledger.take(sim.env.now, job.rollout_gpus, job.train_gpus)))
        return True

    def _run(self, sim: Sim, job: Job, lease: Lease) -> Process:
        yield sim.env.timeout(job.solo_seconds)
        sim.ledger.give(sim.env.now, lease)
        sim.done(job)


def colocated_seconds(job: Job, speed: float, switch_seconds: float) -> float:
    """A job's time co-located on its training GPUs: each step's rollout rescaled from its rollout pool to
    those GPUs (linear in the GPU count, ``speed`` times as fast per GPU), then its training, with a switch at
    each of the step's two changes of phase."""
    scale = job.rollout_gpus / (job.train_gpus * speed)
    return math.fsum(s.rollout * scale + s.train + 2 * switch_seconds for s in job.steps)


class Colocated:
    """Co-located (verl-style): rollout and training time-share the job's training GPUs (H800s), back to back;
    no H20 is used."""

    name = "colocated"

    def start(self, sim: Sim, job: Job) -> bool:
        if not sim.ledger.fits(0, job.train_gpus):
            return False
        sim.env.process(self._run(sim, job, sim.ledger.take(sim.env.now, 0, job.train_gpus)))
        return True

    def _run(self, sim: Sim, job: Job, lease: Lease) -> Process:
        speed, switch = sim.knobs.colocated_rollout_speed, sim.knobs.colocated_switch_seconds
        yield sim.env.timeout(colocated_seconds(job, speed, switch))
        sim.ledger.give(sim.env.now, lease)
        sim.done(job)


class _Groups:
    """Open co-execution groups by key, each with the lease on its pools, given back when its last member ends."""

    def __init__(self) -> None:
        self.open: dict[object, tuple[GroupRun, Lease]] = {}

    def join(self, sim: Sim, key: object, job: Job) -> None:
        """``job`` into the group ``key``, opened on a new lease where it is not open."""
        if key not in self.open:
            lease = sim.ledger.take(sim.env.now, job.rollout_gpus, job.train_gpus)
            self.open[key] = (GroupRun(sim.env, sim.knobs, lambda j: self._left(sim, key, j)), lease)
        self.open[key][0].join(job)

    def _left(self, sim: Sim, key: object, job: Job) -> None:
        group, lease = self.open[key]
        if not group.members:
            sim.ledger.give(sim.env.now, lease)
            del self.open[key]
        self.left(job)
        sim.done(job)

    def left(self, job: Job) -> None:
        """Called as ``job`` ends, before the queue is looked at again."""


class RollMux(_Groups):
    """RollMux: each arriving job goes where ``Admission`` puts it (the group where it adds the least cost
    within every member's SLO and the host memory, or a new pool pair while the fleet has one free), one
    admission per pool size; round-robin within each group; early release of rollout tails per the knobs.
    Admission plans on each job's phase-time quantile."""

    name = "rollmux"

    def __init__(self) -> None:
        super().__init__()
        self.admissions: dict[tuple[int, int], Admission] = {}
        self.profiles: dict[str, Profile] = {}
        self.sizes: dict[str, tuple[int, int]] = {}

    def start(self, sim: Sim, job: Job) -> bool:
        size = (job.rollout_gpus, job.train_gpus)
        if size not in self.admissions:
            self.admissions[size] = Admission(sim.fleet.pools(*size))
        admission = self.admissions[size]
        admission.max_groups = None if sim.ledger.fits(*size) else 0  # no new group without free GPUs
        if job.id not in self.profiles:
            self.profiles[job.id] = job.profile(sim.knobs.quantile, sim.knobs.switch_seconds)
        profile = self.profiles[job.id]
        decision = admission.place(job.id, profile)
        if decision.group is None:
            return False
        self.sizes[job.id] = size
        self.join(sim, (size, decision.group), job)
        return True

    def left(self, job: Job) -> None:
        self.admissions[self.sizes.pop(job.id)].remove(job.id)


class Partition(_Groups):
    """Jobs in fixed groups (lists of job ids): a group opens when its first member starts and the fleet has
    its pools free."""

    name = "partition"

    def __init__(self, groups: Sequence[Sequence[str]], name: str = "partition") -> None:
        super().__init__()
        self.name = name
        self.block = {job: index for index, group in enumerate(groups) for job in group}

    def start(self, sim: Sim, job: Job) -> bool:
        key = self.block[job.id]
        if key not in self.open and not sim.ledger.fits(job.rollout_gpus, job.train_gpus):
            return False
        self.join(sim, key, job)
        return True
