"""The four policies a trace runs under: solo disaggregation, co-located (verl-style) time-sharing, RollMux
(admission into co-execution groups, round-robin on each node), and a fixed partition into groups (the
brute-force optimum's, see ``optimal.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from agentgym.trainers.mux.estimate import Profile
from agentgym.trainers.mux.plan import Admission, Group

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
    """Open co-execution groups by id, each with the leases on its nodes (its training nodes under ``"train"``,
    each rollout node under its id): a rollout node is given back when it has no member left, the rest when the
    group's last member ends."""

    def __init__(self) -> None:
        self.open: dict[int, GroupRun] = {}
        self.leases: dict[int, dict[object, Lease]] = {}

    def lease(self, sim: Sim, group: int, node: object, rollout_gpus: int, train_gpus: int) -> None:
        """Take a node (or the training nodes) for ``group`` now."""
        self.leases.setdefault(group, {})[node] = sim.ledger.take(sim.env.now, rollout_gpus, train_gpus)

    def run(self, sim: Sim, group: int, job: Job, rollout: Sequence[int], train: Sequence[int]) -> None:
        """Start ``job`` in ``group`` (opened where it is not) on those nodes."""
        if group not in self.open:
            self.open[group] = GroupRun(sim.env, sim.knobs, lambda j: self._left(sim, group, j))
        self.open[group].join(job, rollout, train)

    def give(self, sim: Sim, group: int, nodes: Sequence[object]) -> None:
        """Give back ``group``'s leases on ``nodes``."""
        for node in nodes:
            sim.ledger.give(sim.env.now, self.leases[group].pop(node))

    def _left(self, sim: Sim, group: int, job: Job) -> None:
        self.left(sim, group, job)
        if not self.open[group].members:
            self.give(sim, group, list(self.leases[group]))
            del self.open[group], self.leases[group]
        sim.done(job)

    def left(self, sim: Sim, group: int, job: Job) -> None:
        """Called as ``job`` ends, before its group's leases are looked at and the queue is looked at again."""


class _LedgerCapacity:
    """Admission's new nodes come from the simulated fleet's free GPUs."""

    def __init__(self, sim: Sim) -> None:
        self.sim, self.next = sim, 0

    def open(self, profile: Profile) -> int | None:
        gpus = self.sim.fleet.gpus_per_node
        if not self.sim.ledger.fits(profile.rollout_nodes * gpus, profile.train_nodes * gpus):
            return None
        self.next += 1
        return self.next - 1

    def can_grow(self, group: Group, rollout_nodes: int) -> bool:
        return self.sim.ledger.fits(rollout_nodes * self.sim.fleet.gpus_per_node, 0)

    def claim(self, group: int) -> None:
        """Not used: simulated groups are never rebuilt."""

    def close(self, group: int) -> None:
        """Nothing to do: the policy gives the group's leases back."""


class RollMux(_Groups):
    """RollMux: each arriving job goes where ``Admission`` puts it (direct packing or rollout scaling into the
    group where it adds the least cost within every member's SLO and every node's residency, or a new group while
    the fleet has its nodes free), per ``knobs.rules``; round-robin on each node; early release of rollout tails
    per the knobs. Admission plans on each job's phase-time quantile."""

    name = "rollmux"

    def __init__(self) -> None:
        super().__init__()
        self.admission: Admission | None = None
        self.profiles: dict[str, Profile] = {}
        self.kinds: dict[str, int] = {"packed": 0, "scaled": 0, "new": 0}
        """How many jobs each placement took."""

    def start(self, sim: Sim, job: Job) -> bool:
        if self.admission is None:
            self.admission = Admission(sim.fleet.machines(), sim.knobs.rules, _LedgerCapacity(sim))
        if job.id not in self.profiles:
            self.profiles[job.id] = job.profile(sim.knobs, sim.fleet)
        decision = self.admission.place(job.id, self.profiles[job.id])
        if decision.group is None or decision.kind is None:
            return False
        self.kinds[decision.kind] += 1
        gpus = sim.fleet.gpus_per_node
        if decision.new:
            self.lease(sim, decision.group, "train", 0, len(decision.train) * gpus)
        for node in decision.rollout if decision.new else decision.added:
            self.lease(sim, decision.group, node, gpus, 0)
        self.run(sim, decision.group, job, decision.rollout, decision.train)
        return True

    def left(self, sim: Sim, group: int, job: Job) -> None:
        assert self.admission is not None
        removed = self.admission.remove(job.id)
        if removed is not None and group in self.admission.groups:
            self.give(sim, group, removed[1])


class Partition(_Groups):
    """Jobs of one size in fixed groups: each group a list of its rollout nodes' members (job ids), all of a
    group's members sharing its training nodes. A group opens, with all its nodes, when its first member starts
    and the fleet has them free."""

    name = "partition"

    def __init__(self, groups: Sequence[Sequence[Sequence[str]]], name: str = "partition") -> None:
        super().__init__()
        self.name = name
        self.where = {job: (index, bin) for index, group in enumerate(groups) for bin, members in enumerate(group)
                      for job in members}
        self.bins = [len(group) for group in groups]

    def start(self, sim: Sim, job: Job) -> bool:
        index, bin = self.where[job.id]
        rollout_nodes, train_nodes = sim.fleet.nodes(job.rollout_gpus), sim.fleet.nodes(job.train_gpus)
        if index not in self.open:
            gpus = sim.fleet.gpus_per_node
            if not sim.ledger.fits(self.bins[index] * rollout_nodes * gpus, train_nodes * gpus):
                return False
            self.lease(sim, index, "train", 0, train_nodes * gpus)
            self.lease(sim, index, "rollout", self.bins[index] * rollout_nodes * gpus, 0)
        self.run(sim, index, job, range(bin * rollout_nodes, (bin + 1) * rollout_nodes), range(train_nodes))
        return True
