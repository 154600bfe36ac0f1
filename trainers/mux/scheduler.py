"""The RollMux scheduler: admits jobs into co-execution groups and hands out each group's pool permits in turn.
``agentgym mux start`` runs it on a Ray cluster as a named, detached actor that Ray restarts when it dies; the
class itself is plain asyncio (its tests drive it without Ray)."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from agentgym.trainers.mux.estimate import Pool, Profile
from agentgym.trainers.mux.plan import Admission, Group, Machines
from agentgym.trainers.mux.turnstile import Turnstile

POOLS: tuple[Pool, Pool] = ("rollout", "train")
NAME, NAMESPACE = "agentgym-mux", "agentgym"
"""The scheduler actor's name and Ray namespace: one per cluster."""
PHASES_KEPT = 10_000
HEARTBEATS_PER_LEASE = 6
"""A job's heartbeats within one lease: a late one or two do not end it."""


@dataclass(frozen=True)
class PoolSpec:
    """The nodes a group may take: the Ray resources that mark its rollout nodes (one rollout pool each, taken
    as rollout scaling asks) and its training pool, and the host memory of a node."""

    rollout_resources: tuple[str, ...] = ("rollout_pool",)
    train_resource: str = "train_pool"
    memory_gb: float = math.inf

    @classmethod
    def of(cls, spec: dict[str, Any]) -> PoolSpec:
        return cls(tuple(spec.get("rollout_resources", ("rollout_pool",))), spec.get("train_resource", "train_pool"),
                   float(spec.get("memory_gb", math.inf)))


class _Specs:
    """Admission's capacity: a new group takes the first free spec with rollout resources enough for its first
    job, and grows (rollout scaling) up to that spec's rollout resources; rollout node ``i`` of a group is its
    spec's rollout resource ``i``."""

    def __init__(self, specs: list[PoolSpec]) -> None:
        self.specs, self.used = specs, set[int]()

    def open(self, profile: Profile) -> int | None:
        index = next((i for i, spec in enumerate(self.specs) if i not in self.used
                      and len(spec.rollout_resources) >= profile.rollout_nodes and profile.train_nodes == 1), None)
        if index is not None:
            self.used.add(index)
        return index

    def can_grow(self, group: Group, rollout_nodes: int) -> bool:
        return len(group.rollout_nodes) + rollout_nodes <= len(self.specs[group.id].rollout_resources)

    def claim(self, group: int) -> None:
        self.used.add(group)

    def close(self, group: int) -> None:
        self.used.discard(group)


@dataclass
class Phase:
    """A job's turn on a pool: when the permit was granted and given back (``None`` while held)."""

    job: str
    group: int
    pool: Pool
    asked: float
    """When the job asked for the permit (the round-robin order is judged among those waiting)."""
    start: float
    end: float | None = None


@dataclass
class Job:
    """What the scheduler knows of an admitted job."""

    name: str
    profile: Profile
    group: int
    steps: int
    run_dir: str
    step: int = 0
    state: str = "admitted"
    seen: float = field(default_factory=time.time)
    heard: bool = False
    """Whether the job itself has spoken yet (``agentgym mux submit`` admits it before its process starts)."""
    step_times: list[float] = field(default_factory=list)
    """When each step the scheduler heard of was reported."""

    @property
    def step_seconds(self) -> float | None:
        """Measured seconds per step over the last few steps (``None`` before two reports)."""
        recent = self.step_times[-6:]
        return (recent[-1] - recent[0]) / (len(recent) - 1) if len(recent) > 1 else None


class MuxScheduler:
    """Admission into groups (:class:`~agentgym.trainers.mux.plan.Admission`), a :class:`Turnstile` per pool of
    each group, and a lease per job: a job not heard from (heartbeat, acquire, release) for ``lease_seconds``
    (``start_grace`` before its first word) has crashed; it leaves its group and its permits go to the next."""

    def __init__(self, pools: list[dict[str, Any]] | None = None, *, lease_seconds: float = 30.0,
                 start_grace: float = 300.0) -> None:
        """``pools``: the groups' :class:`PoolSpec` fields, one a group (default: one group on ``rollout_pool``
        and ``train_pool``)."""
        self.pools = [PoolSpec.of(p) for p in (pools or [{}])]
        self.lease_seconds, self.start_grace = lease_seconds, start_grace
        self.admission = Admission(Machines(node_memory_gb=min(p.memory_gb for p in self.pools)),
                                   capacity=_Specs(self.pools))
        self.jobs: dict[str, Job] = {}
        self.left: dict[str, str] = {}
        """Jobs gone, with why: ``finished``, or the crash or refusal."""
        self.turnstiles: dict[tuple[int, Pool, int], Turnstile] = {}
        """Each group's permit of each of its nodes, by (group, pool, node)."""
        self.phases: list[Phase] = []
        self.started = time.time()
        self._reaper: asyncio.Task[None] | None = None

    async def register(self, name: str, profile: dict[str, Any], *, steps: int, run_dir: str,
                       group: int | None = None, held: list[Pool] | None = None,
                       rollout: str | None = None) -> dict[str, Any]:
        """Admit job ``name`` (:class:`Profile` fields in ``profile``); returns its ``group`` and the
        ``resources`` of its rollout node and training pool, or ``refused`` with the reason. A job already
        admitted gets its placement back; one that names its ``group``, its ``rollout`` resource and the permits
        it ``held`` (re-registering with a restarted scheduler) is put back there."""
        self._start_reaper()
        job = self.jobs.get(name)
        if job is not None:
            if job.run_dir != run_dir:
                return {"refused": f"a job named {name} runs already (from {job.run_dir}); name this one otherwise "
                                   "with mux.job"}
            job.seen = time.time()
        else:
            nodes = self._node_ids(group, rollout)
            decision = self.admission.place(name, Profile(**profile), group=group, rollout=nodes)
            if decision.group is None:
                self.left[name] = f"refused: {decision.reason}"
                return {"refused": decision.reason}
            job = self.jobs[name] = Job(name, Profile(**profile), decision.group, steps, run_dir)
            self.left.pop(name, None)
            for key in self._keys(name):
                self._turnstile(key).join(name)
        for pool in held or []:
            for key in self._keys(name, pool):
                turnstile = self._turnstile(key)
                turnstile.claim(name)
                if turnstile.holder == name and not self._open_phase(name, pool):
                    self.phases.append(Phase(name, job.group, pool, time.time(), time.time()))
        spec = self.pools[job.group]
        member = self.admission.groups[job.group].members[name]
        return {"group": job.group, "resources": {"rollout": spec.rollout_resources[member.rollout[0]],
                                                  "train": spec.train_resource},
                "heartbeat_seconds": self.lease_seconds / HEARTBEATS_PER_LEASE}

    def _node_ids(self, group: int | None, rollout: str | None) -> tuple[int, ...]:
        """The rollout node id of a re-registering job's ``rollout`` resource in its ``group``."""
        if group is None or rollout is None or group >= len(self.pools):
            return ()
        resources = self.pools[group].rollout_resources
        return (resources.index(rollout),) if rollout in resources else ()

    def _keys(self, name: str, pool: Pool | None = None) -> list[tuple[int, Pool, int]]:
        """The turnstiles of job ``name``'s nodes (of ``pool``, or both), in node order."""
        job = self.jobs[name]
        member = self.admission.groups[job.group].members[name]
        return [(job.group, kind, n) for kind, n in member.nodes() if pool is None or kind == pool]

    async def acquire(self, name: str, pool: Pool) -> bool:
        """Wait for ``name``'s turn on ``pool``; ``False`` where the job is unknown (it must register again)."""
        job = self._seen(name)
        if job is None:
            return False
        asked = time.time()
        job.state = f"waiting for {pool}"
        for key in self._keys(name, pool):
            await self._turnstile(key).acquire(name)
        if self._open_phase(name, pool) is None:
            self.phases.append(Phase(name, job.group, pool, asked, time.time()))
            del self.phases[:-PHASES_KEPT]
        job.state = pool
        return True

    async def release(self, name: str, pool: Pool) -> bool:
        """Give ``pool``'s permit back; ``False`` where the job is unknown."""
        job = self._seen(name)
        if job is None:
            return False
        self._end(name, pool)
        job.state = "between phases"
        return True

    async def heartbeat(self, name: str, step: int) -> bool:
        """``name`` is alive and at ``step``; ``False`` where it is unknown (it must register again)."""
        job = self._seen(name)
        if job is None:
            return False
        if step > job.step:
            job.step_times.append(time.time())
            del job.step_times[:-50]
        job.step = step
        return True

    async def leave(self, name: str, reason: str = "finished") -> None:
        """Take ``name`` out of its group (it ended: ``finished``, or why not); its permits go to the next."""
        if name not in self.jobs:
            return
        keys = self._keys(name)
        for pool in POOLS:
            self._end(name, pool)
        for key in keys:
            self._turnstile(key).leave(name)
            if not self._turnstile(key).members:
                del self.turnstiles[key]
        self.jobs.pop(name)
        self.admission.remove(name)
        self.left[name] = reason

    async def status(self) -> dict[str, Any]:
        """When this instance started (a restarted one starts empty), jobs (step, phase, measured slowdown against
        solo, SLO), groups (members, cycle, pools), the jobs that left and why, and the recent phases."""
        self._start_reaper()
        now = time.time()
        jobs = []
        for job in self.jobs.values():
            seconds = job.step_seconds
            group = self.admission.groups[job.group]
            jobs.append({"job": job.name, "group": job.group, "state": job.state, "step": job.step, "steps": job.steps,
                         "run_dir": job.run_dir, "profile": asdict(job.profile), "step_seconds": seconds,
                         "slowdown": seconds / job.profile.solo if seconds is not None else None,
                         "planned_slowdown": group.times[job.name] / job.profile.solo,
                         "rollout_resource": self.pools[job.group].rollout_resources[group.members[job.name].rollout[0]],
                         "slo": job.profile.slo, "seen_seconds_ago": now - job.seen})
        groups = [{"group": g.id, "members": list(g.members), "step_seconds": dict(g.times), "memory_gb": g.memory_gb,
                   "pools": asdict(self.pools[g.id]),
                   "holders": {f"{self._resource(g.id, pool, node)}": turnstile.holder
                               for (index, pool, node), turnstile in self.turnstiles.items() if index == g.id}}
                  for g in self.admission.groups.values()]
        return {"started": self.started, "uptime_seconds": now - self.started, "jobs": jobs, "groups": groups,
                "left": dict(self.left), "phases": [asdict(p) for p in self.phases]}

    def _seen(self, name: str) -> Job | None:
        job = self.jobs.get(name)
        if job is not None:
            job.seen, job.heard = time.time(), True
        return job

    def _turnstile(self, key: tuple[int, Pool, int]) -> Turnstile:
        return self.turnstiles.setdefault(key, Turnstile())

    def _resource(self, group: int, pool: Pool, node: int) -> str:
        spec = self.pools[group]
        return spec.rollout_resources[node] if pool == "rollout" else spec.train_resource

    def _open_phase(self, name: str, pool: Pool) -> Phase | None:
        return next((p for p in reversed(self.phases) if p.job == name and p.pool == pool and p.end is None), None)

    def _end(self, name: str, pool: Pool) -> None:
        if name not in self.jobs:
            return
        released = [self._turnstile(key).release(name) for key in self._keys(name, pool)]
        phase = self._open_phase(name, pool)
        if any(released) and phase is not None:
            phase.end = time.time()

    def _start_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        """End the jobs whose lease ran out."""
        while True:
            await asyncio.sleep(min(1.0, self.lease_seconds / 4))
            now = time.time()
            for job in list(self.jobs.values()):
                silent = now - job.seen
                limit = self.lease_seconds if job.heard else max(self.lease_seconds, self.start_grace)
                if silent > limit:
                    await self.leave(job.name, f"crashed: not heard from for {silent:.0f} s (lease {limit:.0f} s)")
