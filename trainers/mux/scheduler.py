"""The RollMux scheduler: admits jobs into co-execution groups and hands out each group's pool permits in turn.
``agentgym mux start`` runs it on a Ray cluster as a named, detached actor that Ray restarts when it dies; the
class itself is plain asyncio (its tests drive it without Ray)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from agentgym.trainers.mux.plan import Admission, PoolPair, Profile
from agentgym.trainers.mux.turnstile import Turnstile

Pool = Literal["rollout", "train"]
POOLS: tuple[Pool, Pool] = ("rollout", "train")
NAME, NAMESPACE = "agentgym-mux", "agentgym"
"""The scheduler actor's name and Ray namespace: one per cluster."""
PHASES_KEPT = 10_000
HEARTBEATS_PER_LEASE = 6
"""A job's heartbeats within one lease: a late one or two do not end it."""


@dataclass(frozen=True)
class PoolSpec:
    """A pool pair a group may take: the Ray resources that mark its two pools' nodes, and its prices and memory."""

    rollout_resource: str = "rollout_pool"
    train_resource: str = "train_pool"
    pair: PoolPair = field(default_factory=PoolPair)


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
        self.pools = [PoolSpec(p.get("rollout_resource", "rollout_pool"), p.get("train_resource", "train_pool"),
                               PoolPair(**p.get("pair", {}))) for p in (pools or [{}])]
        self.lease_seconds, self.start_grace = lease_seconds, start_grace
        self.admission = Admission([p.pair for p in self.pools])
        self.jobs: dict[str, Job] = {}
        self.left: dict[str, str] = {}
        """Jobs gone, with why: ``finished``, or the crash or refusal."""
        self.turnstiles: dict[tuple[int, Pool], Turnstile] = {}
        self.phases: list[Phase] = []
        self.started = time.time()
        self._reaper: asyncio.Task[None] | None = None

    async def register(self, name: str, profile: dict[str, float], *, steps: int, run_dir: str,
                       group: int | None = None, held: list[Pool] | None = None) -> dict[str, Any]:
        """Admit job ``name`` (:class:`Profile` fields in ``profile``); returns its ``group`` and the pools'
        ``resources``, or ``refused`` with the reason. A job already admitted gets its placement back; one that
        names its ``group`` and the permits it ``held`` (re-registering with a restarted scheduler) is put back."""
        self._start_reaper()
        job = self.jobs.get(name)
        if job is not None:
            if job.run_dir != run_dir:
                return {"refused": f"a job named {name} runs already (from {job.run_dir}); name this one otherwise "
                                   "with mux.job"}
            job.seen = time.time()
        else:
            decision = self.admission.place(name, Profile(**profile), group=group)
            if decision.group is None:
                self.left[name] = f"refused: {decision.reason}"
                return {"refused": decision.reason}
            job = self.jobs[name] = Job(name, Profile(**profile), decision.group, steps, run_dir)
            self.left.pop(name, None)
            for pool in POOLS:
                self._turnstile(job.group, pool).join(name)
        for pool in held or []:
            turnstile = self._turnstile(job.group, pool)
            turnstile.claim(name)
            if turnstile.holder == name and not self._open_phase(name, pool):
                self.phases.append(Phase(name, job.group, pool, time.time(), time.time()))
        spec = self.pools[job.group]
        return {"group": job.group, "resources": {"rollout": spec.rollout_resource, "train": spec.train_resource},
                "heartbeat_seconds": self.lease_seconds / HEARTBEATS_PER_LEASE}

    async def acquire(self, name: str, pool: Pool) -> bool:
        """Wait for ``name``'s turn on ``pool``; ``False`` where the job is unknown (it must register again)."""
        job = self._seen(name)
        if job is None:
            return False
        turnstile, asked = self._turnstile(job.group, pool), time.time()
        job.state = f"waiting for {pool}"
        await turnstile.acquire(name)
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
        job = self.jobs.pop(name, None)
        if job is None:
            return
        for pool in POOLS:
            self._end(name, pool)
            self._turnstile(job.group, pool).leave(name)
        self.admission.remove(name)
        for pool in POOLS:
            if not self._turnstile(job.group, pool).members:
                del self.turnstiles[(job.group, pool)]
        self.left[name] = reason

    async def status(self) -> dict[str, Any]:
        """When this instance started (a restarted one starts empty), jobs (step, phase, measured slowdown against
        solo, SLO), groups (members, cycle, pools), the jobs that left and why, and the recent phases."""
        self._start_reaper()
        now = time.time()
        jobs = []
        for job in self.jobs.values():
            seconds = job.step_seconds
            jobs.append({"job": job.name, "group": job.group, "state": job.state, "step": job.step, "steps": job.steps,
                         "run_dir": job.run_dir, "profile": asdict(job.profile), "step_seconds": seconds,
                         "slowdown": seconds / job.profile.solo if seconds is not None else None,
                         "planned_slowdown": self.admission.groups[job.group].cycle / job.profile.solo,
                         "slo": job.profile.slo, "seen_seconds_ago": now - job.seen})
        groups = [{"group": g.id, "members": list(g.members), "cycle_seconds": g.cycle, "memory_gb": g.memory_gb,
                   "pools": asdict(self.pools[g.id]),
                   "holders": {pool: self.turnstiles[(g.id, pool)].holder for pool in POOLS}}
                  for g in self.admission.groups.values()]
        return {"started": self.started, "uptime_seconds": now - self.started, "jobs": jobs, "groups": groups,
                "left": dict(self.left), "phases": [asdict(p) for p in self.phases]}

    def _seen(self, name: str) -> Job | None:
        job = self.jobs.get(name)
        if job is not None:
            job.seen, job.heard = time.time(), True
        return job

    def _turnstile(self, group: int, pool: Pool) -> Turnstile:
        return self.turnstiles.setdefault((group, pool), Turnstile())

    def _open_phase(self, name: str, pool: Pool) -> Phase | None:
        return next((p for p in reversed(self.phases) if p.job == name and p.pool == pool and p.end is None), None)

    def _end(self, name: str, pool: Pool) -> None:
        group = self.jobs[name].group if name in self.jobs else None
        if group is not None and self._turnstile(group, pool).release(name):
            phase = self._open_phase(name, pool)
            if phase is not None:
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
