"""RollMux's planning arithmetic, shared by the Ray scheduler and the cluster simulator: a job's profile, a
co-execution group's nodes and its members' step times, and the inter-group admission that places each new job
where it adds the least cost without breaking any node's residency or any member's slowdown SLO.

A co-execution group owns a training pool of nodes and one or more rollout nodes. Each member is pinned to as many
rollout nodes and training nodes as its size asks. A node runs the phases of the members pinned to it one at a
time, in turn, passing over a member that is not asking (work-conserving round-robin). Admission estimates each
member's seconds per step in the group (:func:`step_times`) and checks it against the member's SLO.

Admission tries, for each group, *direct packing* (onto the group's nodes as they are) and *rollout scaling*
(onto just enough new rollout nodes, sharing the training pool), and against them a *new group* sized for the
job; it takes the placement that adds the least to the bill net of the work it does (Weave/RollMux, OSDI'26,
§4.2; the departures are in docs/multiplexing.md).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from agentgym.trainers.mux.estimate import Member, Model, Node, Pool, Profile, step_times

SECONDS_PER_HOUR = 3600.0
Kind = Literal["packed", "scaled", "new"]


@dataclass(frozen=True)
class Machines:
    """The nodes groups are built of: GPUs per node, each pool's price per GPU-hour (or core-hour on a CPU
    cluster), a training node's host memory, and how many jobs one node may keep resident between phases."""

    gpus_per_node: int = 1
    rollout_price: float = 1.0
    train_price: float = 1.0
    node_memory_gb: float = math.inf
    max_resident: int | None = None
    """Jobs pinned to one node at most, of either pool (``None``: as many as its memory holds)."""

    def cost_per_second(self, rollout_nodes: int, train_nodes: int) -> float:
        """Dollars a second of that many nodes of each pool."""
        return self.gpus_per_node * (rollout_nodes * self.rollout_price + train_nodes * self.train_price) \
            / SECONDS_PER_HOUR


@dataclass(frozen=True)
class Rules:
    """How admission plans (each a switch, for the ablation)."""

    rollout_scaling: bool = True
    """Add rollout nodes to a group whose training pool has room (else only direct packing or a new group)."""
    mixed_sizes: bool = False
    """A job may join a group of another size, pinned to a subset of its nodes (else only groups of its size).
    Off by default: a multi-node phase whose nodes other members share in part waits for all of them at once,
    which :func:`step_times` does not estimate (docs/multiplexing.md gives the measured cost)."""
    model: Model = "shared"
    """How members' step times are estimated (:func:`step_times`)."""
    slo_margin: float = 0.1
    """The risk knob: each member's estimated step time, raised by this share, must stay within its SLO budget
    (the estimate misses by up to 6.5% where varying phases fall out of step: the least margin of benchmarks/sim's
    ``risk`` sweep that holds every SLO on every seed of both traces)."""
    weighed: int | None = 8
    """Groups weighed at most per job, the most promising first (``None``: every group the screen lets by)."""


class Capacity(Protocol):
    """Where new nodes come from: the ids of new groups and whether nodes can be had now."""

    def open(self, profile: Profile) -> int | None:
        """The id of a new group sized for ``profile`` (its nodes taken), or ``None`` where none can be had."""
        ...

    def can_grow(self, group: Group, rollout_nodes: int) -> bool:
        """Whether ``group`` may add that many rollout nodes now."""
        ...

    def claim(self, group: int) -> None:
        """Hold group id ``group`` (a group rebuilt as its jobs register again after a restart)."""
        ...

    def close(self, group: int) -> None:
        """Group ``group`` emptied: its nodes are free again."""
        ...


class Unbounded:
    """As many nodes as admission asks for: groups numbered from 0, the lowest free id first."""

    def __init__(self) -> None:
        self.used: set[int] = set()

    def open(self, profile: Profile) -> int | None:
        index = next(i for i in range(len(self.used) + 1) if i not in self.used)
        self.used.add(index)
        return index

    def can_grow(self, group: Group, rollout_nodes: int) -> bool:
        return True

    def claim(self, group: int) -> None:
        self.used.add(group)

    def close(self, group: int) -> None:
        self.used.discard(group)


@dataclass(frozen=True)
class Placement:
    """Where a job would go in a group: the existing rollout and training nodes it is pinned to, how many rollout
    nodes are added for it, every member's step time then (the job's under ``""``), and what it adds to the bill
    net of the work it does, in dollars a second."""

    kind: Kind
    rollout: tuple[int, ...]
    added: int
    train: tuple[int, ...]
    times: dict[str, float]
    added_cost: float


FIRST_FIT = 0.05
"""Admission takes the first placement (groups with the least-busy nodes first) whose added cost is within this
share of the job's own price of the best it could conceivably be (the job at its own pace, nobody slowed): as
Weave, which keeps the first placement of least cost among ties, since any packing into a bubble costs nothing."""
NEW = ""
"""The key of the job being placed among a placement's step times."""


class Group:
    """A co-execution group: its training nodes, its rollout nodes (more may be added), the members pinned to
    them with their estimated step times, and each node's utilisation and residents."""

    def __init__(self, id: int, machines: Machines, size: tuple[int, int], model: Model = "shared") -> None:
        """A group sized for a first job of ``size`` (rollout nodes, training nodes)."""
        self.id, self.machines, self.size, self.model = id, machines, size, model
        self.members: dict[str, Member] = {}
        self.times: dict[str, float] = {}
        self.value = 0.0
        """The work its members do a second (:meth:`value_per_second`)."""
        self.utilisation: dict[Node, float] = {}
        self.residents: dict[Node, int] = {}
        self.train_memory: dict[int, float] = {}
        for node in range(size[1]):
            self._add_node(("train", node))
            self.train_memory[node] = 0.0
        self.add_rollout_nodes(size[0])

    @property
    def rollout_nodes(self) -> list[int]:
        return [n for pool, n in self.utilisation if pool == "rollout"]

    @property
    def train_nodes(self) -> list[int]:
        return [n for pool, n in self.utilisation if pool == "train"]

    @property
    def cost_per_second(self) -> float:
        return self.machines.cost_per_second(len(self.rollout_nodes), len(self.train_nodes))

    @property
    def memory_gb(self) -> float:
        """Host memory taken on its fullest training node."""
        return max(self.train_memory.values())

    @property
    def budget(self) -> float:
        """Seconds per step of its tightest member's SLO (``inf`` while empty)."""
        return min((m.profile.budget for m in self.members.values()), default=math.inf)

    def value_per_second(self, times: dict[str, float], new: Profile | None = None) -> float:
        """The work its members do a second at these step ``times``, in dollars of each running alone on its own
        nodes."""
        profiles = {name: m.profile for name, m in self.members.items()}
        if new is not None:
            profiles[NEW] = new
        return sum(self.machines.cost_per_second(*p.size) * p.solo / times[name] for name, p in profiles.items())

    def add_rollout_nodes(self, count: int) -> tuple[int, ...]:
        """New, empty rollout nodes: their ids, the lowest free ones (a group's rollout ids never pass the most
        nodes it has held at once)."""
        ids = tuple(itertools.islice((n for n in itertools.count() if ("rollout", n) not in self.utilisation), count))
        for node in ids:
            self._add_node(("rollout", node))
        return ids

    def _add_node(self, node: Node) -> None:
        self.utilisation[node], self.residents[node] = 0.0, 0

    def placements(self, profile: Profile, rules: Rules, capacity: Capacity | None) -> list[Placement]:
        """Where ``profile`` may go in this group within every residency limit and every member's SLO: on the
        nodes it has (direct packing) or on just enough new rollout nodes, and on new rollout nodes of its own
        (rollout scaling, where ``rules`` and ``capacity`` allow); each on the least-busy nodes it may take."""
        if not rules.mixed_sizes and profile.size != self.size:
            return []
        cap = self.machines.max_resident
        room = sum(1 for (pool, _), count in self.residents.items()
                   if pool == "rollout" and (cap is None or count < cap))
        least = max(0, profile.rollout_nodes - room)
        out: list[Placement] = []
        for added in sorted({least, profile.rollout_nodes} if rules.rollout_scaling else {0}):
            if added and (capacity is None or not capacity.can_grow(self, added)):
                break
            floor = self.machines.cost_per_second(added, 0) - self.machines.cost_per_second(*profile.size)
            if out and min(p.added_cost for p in out) <= floor:
                break  # more new nodes cannot beat what fits already
            placement = self.candidate(profile, added)
            if placement is not None and not self.breaches(placement, profile, rules.slo_margin):
                out.append(placement)
        return out

    def breaches(self, placement: Placement, profile: Profile, margin: float = 0.0) -> list[tuple[str, float]]:
        """The members (``""``: the new job) whose step time under ``placement``, raised by ``margin``, passes
        their SLO budget, with that step time."""
        budgets = {name: m.profile.budget for name, m in self.members.items()} | {NEW: profile.budget}
        return [(name, t) for name, t in placement.times.items() if t * (1 + margin) > budgets[name] * (1 + 1e-9)]

    def candidate(self, profile: Profile, added: int = 0) -> Placement | None:
        """``profile`` on the least-busy nodes it may take with ``added`` new rollout nodes, whatever the SLOs
        (``None``: too few nodes may keep it resident)."""
        train = self._least_busy("train", profile.train_nodes, profile)
        rollout = self._least_busy("rollout", profile.rollout_nodes - added, profile)
        if train is None or rollout is None:
            return None
        fresh = tuple(-1 - k for k in range(added))
        names = [*self.members, NEW]
        members = [*self.members.values(), Member(profile, (*rollout, *fresh), train)]
        times = dict(zip(names, step_times(members, self.model), strict=True))
        rate = self.machines.cost_per_second(len(self.rollout_nodes) + added, len(self.train_nodes))
        added_cost = rate - self.cost_per_second - (self.value_per_second(times, profile) - self.value)
        return Placement("scaled" if added else "packed", rollout, added, train, times, added_cost)

    def _least_busy(self, pool: Pool, count: int, profile: Profile) -> tuple[int, ...] | None:
        """The ``count`` least-busy nodes of ``pool`` that may keep one more resident job (``None``: too few)."""
        cap = self.machines.max_resident
        eligible = [n for (kind, n), residents in self.residents.items() if kind == pool
                    and (cap is None or residents < cap)
                    and (pool != "train" or self.train_memory[n] + profile.memory_gb <= self.machines.node_memory_gb)]
        if len(eligible) < count:
            return None
        return tuple(sorted(eligible, key=lambda n: (self.utilisation[(pool, n)], n))[:count])

    def add(self, job: str, profile: Profile, placement: Placement) -> Member:
        """Pin ``job`` where ``placement`` says (adding its new rollout nodes)."""
        rollout = (*placement.rollout, *self.add_rollout_nodes(placement.added))
        member = self.members[job] = Member(profile, rollout, placement.train)
        for node in member.nodes():
            self.residents[node] += 1
        for node in member.train:
            self.train_memory[node] += profile.memory_gb
        self._estimate()
        return member

    def discard(self, job: str) -> tuple[int, ...]:
        """Unpin ``job``; the rollout nodes it leaves without residents are given up (their ids returned)."""
        member = self.members.pop(job, None)
        if member is None:
            return ()
        for node in member.nodes():
            self.residents[node] -= 1
        for node in member.train:
            self.train_memory[node] -= member.profile.memory_gb
        freed = tuple(n for n in member.rollout if self.residents[("rollout", n)] == 0)
        for n in freed:
            del self.utilisation[("rollout", n)], self.residents[("rollout", n)]
        self._estimate()
        return freed

    def _estimate(self) -> None:
        """The members' step times and each node's utilisation (its share of time busy) again."""
        self.times = dict(zip(self.members, step_times(list(self.members.values()), self.model), strict=True))
        self.value = self.value_per_second(self.times)
        self.utilisation = dict.fromkeys(self.utilisation, 0.0)
        for name, member in self.members.items():
            for node in member.nodes():
                self.utilisation[node] += member.profile.phase(node[0]) / self.times[name]

    def fresh_placement(self, profile: Profile) -> Placement:
        """The placement of a first member on this group's own nodes."""
        return Placement("new", tuple(self.rollout_nodes[:profile.rollout_nodes]), 0,
                         tuple(self.train_nodes[:profile.train_nodes]), {NEW: profile.solo}, 0.0)

    def summary(self, margin: float) -> tuple[float, ...]:
        """The figures admission screens groups on, in the order of :data:`SUMMARY`, with members' slack under
        the SLO ``margin``."""
        cap = self.machines.max_resident
        slack = {name: m.profile.budget / (1 + margin) - self.times[name] for name, m in self.members.items()}
        on: dict[Node, list[str]] = {}
        for name, member in self.members.items():
            for node in member.nodes():
                on.setdefault(node, []).append(name)
        row = []
        for pool in ("train", "rollout"):
            free = [n for (kind, n), count in self.residents.items() if kind == pool and (cap is None or count < cap)]
            waits = [sum(self.members[i].profile.phase(pool) / self.times[i] * self.members[i].profile.residual(pool)
                         for i in on.get((pool, n), [])) for n in free]
            slacks = [min((slack[i] for i in on.get((pool, n), [])), default=math.inf) for n in free]
            busy = [self.utilisation[(pool, n)] for n in free]
            phases = [sum(self.members[i].profile.phase(pool) for i in on.get((pool, n), [])) for n in free]
            budgets = [min((self.members[i].profile.budget / (1 + margin) for i in on.get((pool, n), [])),
                           default=math.inf) for n in free]
            row += [len(free), min(waits, default=math.inf), max(slacks, default=-math.inf), min(busy, default=math.inf),
                    min(phases, default=math.inf), max(budgets, default=-math.inf)]
        memory = max((self.machines.node_memory_gb - self.train_memory[n] for n in self.train_nodes
                      if cap is None or self.residents[("train", n)] < cap), default=-math.inf)
        loosest = max((m.profile.slo for m in self.members.values()), default=1.0)
        return (*row, memory, loosest, *self.size)


SUMMARY = ("train_room", "train_wait", "train_slack", "train_busy", "train_phases", "train_budget",
           "rollout_room", "rollout_wait", "rollout_slack", "rollout_busy", "rollout_phases", "rollout_budget",
           "memory_free", "loosest_slo", "rollout_size", "train_size")
"""A group's figures in :class:`_Table` (``Group.summary``): per pool how many nodes may keep one more job, the
least a job waits a step on such a node for the phases it finds running there, the most slack (SLO budget less
step time) the tightest member of such a node has left, the least utilisation among them, the least sum of the
phases pinned to one of them, and the loosest budget of a node's tightest member; the most host memory a training
node with room has free, its members' loosest SLO, and its first job's size."""


class _Table:
    """Every open group's :data:`SUMMARY`, a row each, so that one numpy pass rules out the groups a job cannot
    join and orders the rest by a lower bound of what it would add to the bill (admission then weighs only those
    that might beat the best found so far)."""

    def __init__(self) -> None:
        self.rows = np.zeros((16, len(SUMMARY)))
        self.ids = np.full(16, -1)
        self.row_of: dict[int, int] = {}

    def put(self, group: Group, margin: float) -> None:
        row = self.row_of.get(group.id)
        if row is None:
            free = np.flatnonzero(self.ids < 0)
            if not len(free):
                free = np.arange(len(self.ids), 2 * len(self.ids))
                self.rows = np.vstack([self.rows, np.zeros_like(self.rows)])
                self.ids = np.concatenate([self.ids, np.full(len(self.ids), -1)])
            row = self.row_of[group.id] = int(free[0])
        self.rows[row], self.ids[row] = group.summary(margin), group.id

    def drop(self, group: int) -> None:
        self.ids[self.row_of.pop(group)] = -1

    def screen(self, profile: Profile, rules: Rules, machines: Machines) -> list[tuple[float, int]]:
        """The groups ``profile`` might join, as (lower bound of the added cost, group id), cheapest first: at
        best it runs at its own pace, slowing nobody, on the nodes the group has or on new ones. Ruled out: too
        few nodes with room (or the wrong size, per ``rules``); a job that would wait past its own budget for the
        phases on the least-waited nodes, and one whose training phases alone, each found running by the others,
        would take more than the slack any training node's tightest member has left, unless the lockstep
        meta-iteration (which caps the estimate: complementary phases fall in step) fits those budgets; and a
        group whose least-busy nodes the job would load past its members' and its own loosest SLO (a node asked
        for ``u`` times the time it has slows some job of it ``u`` times or more)."""
        c = dict(zip(SUMMARY, self.rows.T, strict=True))
        roomy = c["rollout_room"] >= profile.rollout_nodes
        fits = (self.ids >= 0) & (c["train_room"] >= profile.train_nodes) & (c["memory_free"] >= profile.memory_gb)
        fits &= roomy if not rules.rollout_scaling else True
        if not rules.mixed_sizes:
            fits &= (c["rollout_size"] == profile.rollout_nodes) & (c["train_size"] == profile.train_nodes)
        if rules.model == "shared":
            budget = profile.budget / (1 + rules.slo_margin)
            rollout_wait = 0.0 if rules.rollout_scaling else c["rollout_wait"]
            cycle = np.maximum(profile.solo, profile.train + c["train_phases"])
            if not rules.rollout_scaling:
                cycle = np.maximum(cycle, profile.rollout + c["rollout_phases"])
            fits &= (profile.solo + c["train_wait"] + rollout_wait <= budget * (1 + 1e-9)) | (cycle <= budget * (1 + 1e-9))
            fits &= (profile.train / budget * profile.residual("train") <= c["train_slack"] * (1 + 1e-9)) | \
                (cycle <= c["train_budget"] * (1 + 1e-9))
        loosest = np.maximum(c["loosest_slo"], profile.slo) * (1 + 1e-9)
        fits &= c["train_busy"] + profile.train / profile.solo <= loosest
        if not rules.rollout_scaling:
            fits &= c["rollout_busy"] + profile.rollout / profile.solo <= loosest
        missing = np.maximum(0, profile.rollout_nodes - c["rollout_room"])
        bound = machines.cost_per_second(1, 0) * missing - machines.cost_per_second(*profile.size)
        rows = np.flatnonzero(fits)
        order = rows[np.lexsort((c["train_wait"][rows], bound[rows]))]
        return list(zip(bound[order].tolist(), self.ids[order].tolist(), strict=True))


@dataclass(frozen=True)
class AdmissionVerdict:
    """Where admission put a job: ``group`` (``kind`` ``new`` when it opened it), the node ids it is pinned to
    there, or ``None`` with the ``reason``."""

    job: str
    group: int | None
    kind: Kind | None = None
    reason: str = ""
    added_cost: float = 0.0
    """Dollars a second the placement adds to the bill, less the work it does at solo prices (0 for a new group,
    negative where the job fills idle time)."""
    rollout: tuple[int, ...] = ()
    train: tuple[int, ...] = ()
    added: tuple[int, ...] = ()
    """The rollout nodes added for it (rollout scaling), also in ``rollout``."""

    @property
    def new(self) -> bool:
        return self.kind == "new"


@dataclass
class Admission:
    """RollMux's inter-group scheduler: each new job goes to the group and nodes where it adds the least to the
    bill net of its work (direct packing, rollout scaling), or to a new group sized for it where that is no
    worse or nothing else fits. No node may overflow its residency and no member's estimated step may pass its
    SLO budget. A job that fits nowhere and finds no nodes for a new group is refused, with each group's reason
    (the first few)."""

    machines: Machines = field(default_factory=Machines)
    rules: Rules = field(default_factory=Rules)
    capacity: Capacity = field(default_factory=Unbounded)
    groups: dict[int, Group] = field(default_factory=dict)
    _where: dict[str, int] = field(default_factory=dict)
    _table: _Table = field(default_factory=_Table)

    def place(self, job: str, profile: Profile, *, group: int | None = None,
              rollout: Sequence[int] = ()) -> AdmissionVerdict:
        """Admit ``job``: into ``group`` where given, on the ``rollout`` node ids it names (a job re-registering
        after a scheduler restart keeps its group and nodes, fit or not), else where it adds the least cost. A
        refused job is not admitted."""
        if job in self._where:
            raise ValueError(f"job {job!r} is admitted already (group {self._where[job]})")
        if group is not None:
            return self._rejoin(job, profile, group, tuple(rollout))
        best: tuple[Placement, Group] | None = None
        slack = FIRST_FIT * self.machines.cost_per_second(*profile.size)
        for weighed, (bound, index) in enumerate(self._table.screen(profile, self.rules, self.machines)):
            if (best is not None and bound + slack >= best[0].added_cost) or weighed == self.rules.weighed:
                break
            candidate = self.groups[index]
            for placement in candidate.placements(profile, self.rules, self.capacity):
                if best is None or placement.added_cost < best[0].added_cost:
                    best = (placement, candidate)
        if (best is None or best[0].added_cost >= 0) and profile.memory_gb <= self.machines.node_memory_gb:
            index = self.capacity.open(profile)
            if index is not None:
                return self._join(job, profile, self._open(index, profile), None)
        if best is not None:
            return self._join(job, profile, best[1], best[0])
        return AdmissionVerdict(job, None, reason=self._refusal(profile))

    def remove(self, job: str) -> tuple[Group, tuple[int, ...]] | None:
        """Take ``job`` out of its group (a finished, crashed or cancelled job): the group it left and the rollout
        nodes that left it empty; an emptied group is closed."""
        index = self._where.pop(job, None)
        if index is None:
            return None
        group = self.groups[index]
        freed = group.discard(job)
        if group.members:
            self._table.put(group, self.rules.slo_margin)
        else:
            del self.groups[index]
            self._table.drop(index)
            self.capacity.close(index)
        return group, freed

    def _open(self, index: int, profile: Profile) -> Group:
        group = self.groups[index] = Group(index, self.machines, profile.size, self.rules.model)
        return group

    def _join(self, job: str, profile: Profile, group: Group, placement: Placement | None) -> AdmissionVerdict:
        placement = placement or group.fresh_placement(profile)
        member = group.add(job, profile, placement)
        self._where[job] = group.id
        self._table.put(group, self.rules.slo_margin)
        return AdmissionVerdict(job, group.id, placement.kind, added_cost=placement.added_cost, rollout=member.rollout,
                        train=member.train, added=member.rollout[len(placement.rollout):])

    def _rejoin(self, job: str, profile: Profile, index: int, rollout: tuple[int, ...]) -> AdmissionVerdict:
        group = self.groups.get(index)
        if group is None:
            self.capacity.claim(index)
            group = self._open(index, profile)
            if rollout:
                for node in group.rollout_nodes:
                    del group.utilisation[("rollout", node)], group.residents[("rollout", node)]
        for node in rollout:
            if ("rollout", node) not in group.utilisation:
                group._add_node(("rollout", node))
        mine = rollout or tuple(sorted(group.rollout_nodes,
                                       key=lambda n: group.utilisation[("rollout", n)])[:profile.rollout_nodes])
        train = sorted(group.train_nodes, key=lambda n: group.utilisation[("train", n)])[:profile.train_nodes]
        kind: Kind = "new" if not group.members else "packed"
        return self._join(job, profile, group, Placement(kind, mine, 0, tuple(train), {}, 0.0))

    def _refusal(self, profile: Profile) -> str:
        reasons = [self.why_not(group, profile) for group in list(self.groups.values())[:3]]
        if len(self.groups) > 3:
            reasons.append(f"and {len(self.groups) - 3} more groups")
        if profile.memory_gb > self.machines.node_memory_gb:
            reasons.append(f"host memory: the job needs {profile.memory_gb:.1f} GB a node, a node has "
                           f"{self.machines.node_memory_gb:.1f}")
        else:
            reasons.append("no free nodes for a new group")
        return "; ".join(reasons)

    def why_not(self, group: Group, profile: Profile) -> str:
        """Why ``profile`` cannot join ``group`` by direct packing (the first limit it meets)."""
        if not self.rules.mixed_sizes and profile.size != group.size:
            return f"size: group {group.id} holds jobs of {group.size}, the job is {profile.size}"
        packed = group.candidate(profile)
        if packed is None:
            cap = self.machines.max_resident
            full = [node for node, count in group.residents.items() if cap is not None and count >= cap]
            if full:
                return f"residency: {len(full)} of group {group.id}'s nodes keep {cap} jobs already"
            return (f"host memory: group {group.id}'s training nodes hold {group.memory_gb:.1f} GB of "
                    f"{self.machines.node_memory_gb:.1f}, the job needs {profile.memory_gb:.1f}")
        profiles = {name: m.profile for name, m in group.members.items()} | {NEW: profile}
        breached = group.breaches(packed, profile, self.rules.slo_margin)
        if not breached:
            return f"cost: group {group.id} would slow its members more than a group of the job's own costs"
        name, seconds = breached[0]
        member = profiles[name]
        alone = member.solo if member.typical is None else member.typical
        return (f"SLO: in group {group.id} {name or 'the new job'} would take {seconds:.1f} s a step, "
                f"{seconds / alone:.2f}x its {alone:.1f} s alone (SLO {member.slo:.2f}x)")
