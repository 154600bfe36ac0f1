"""Faults for the chaos benchmark: environments and a policy wrapper that fail on purpose, seeded.

:class:`ChaosPolicy` wraps any policy. When an episode starts it draws that episode's fault (or none)
from the episode's own random generator, which the scheduler seeds per attempt, so a retried episode
draws afresh and the same run draws the same faults. It hands environment faults to the environment
(a :class:`FaultyEnv`), which plays them at reset, at a step or at close, and plays policy faults
itself. Every fault is written to a :class:`FaultLog`, with whether it struck.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym import Env, Message
from agentgym.core import StepResult
from agentgym.envs.tools.shell import ShellEnv
from agentgym.policies import Policy, PolicySession
from agentgym.sandboxes import local_sandbox
from agentgym.trajectory import Trajectory
from benchmarks.perf.long_tail_env import LongTailLake

EXPECTED_CAUSE: dict[str | None, str | None] = {
    None: None,
    "step_slow": None,
    "close_raises": None,
    "step_raises": "env:InjectedFault",
    "step_hangs": "timeout:turn",
    "step_blocks": "timeout:turn",
    "reset_raises": "reset:InjectedFault",
    "reset_hangs": "timeout:episode",
    "sandbox_dies": "env:Sandbox",
    "start_raises": "policy:InjectedFault",
    "act_raises": "policy:InjectedFault",
    "act_hangs": "timeout:turn",
}
"""Each fault kind and the ``error_cause`` a trajectory it struck must carry (a prefix of it; ``None``: the
episode must not end as an error). Faults that strike at a step or an answer do so at one turn."""
FAULTS = tuple(kind for kind in EXPECTED_CAUSE if kind is not None)
STEP_FAULTS = ("step_raises", "step_hangs", "step_blocks", "step_slow", "sandbox_dies")


class InjectedFault(RuntimeError):
    """A failure the benchmark injected; its message names the episode, the one trace of an episode
    whose policy never started."""

    def __init__(self, fault: Fault, what: str) -> None:
        super().__init__(f"episode {fault.episode}: {what} (injected {fault.kind})")


@dataclass(frozen=True)
class Fault:
    """What goes wrong in one episode: ``kind`` (``None``: nothing) at turn ``turn``."""

    episode: int
    kind: str | None
    turn: int


@dataclass(frozen=True)
class Latencies:
    """How long the time-based faults take, in seconds: a slow step stays within the turn limit, a
    blocked one runs past it in a worker thread (which outlives the episode until it returns)."""

    slow: float
    blocked: float


class FaultPlan:
    """Draws one fault per episode: kind ``k`` with probability ``rates[k]``, none otherwise, at a turn
    drawn uniformly from ``1..turns``."""

    def __init__(self, rates: dict[str, float], turns: int) -> None:
        unknown = set(rates) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; choose from: {', '.join(FAULTS)}")
        if any(rate < 0 for rate in rates.values()) or sum(rates.values()) > 1:
            raise ValueError(f"fault rates must be non-negative and sum to at most 1, got {rates}")
        self.kinds = [*rates, None]
        self.weights = [*rates.values(), 1.0 - sum(rates.values())]
        self.turns = turns

    def draw(self, rng: np.random.Generator, episode: int) -> Fault:
        kind = self.kinds[int(rng.choice(len(self.kinds), p=self.weights))]
        return Fault(episode, kind, int(rng.integers(1, self.turns, endpoint=True)))


class FaultLog:
    """Which episodes started with which fault, and which faults struck."""

    def __init__(self) -> None:
        self.started: dict[int, str | None] = {}
        self.struck: dict[int, str | None] = {}
        """By episode; a close that raises is not here: it strikes after its episode, on an instance
        the rollout gives back, and is counted in :attr:`closes_raised`."""
        self.closes_raised = 0
        self._ids = itertools.count()

    def next_episode(self) -> int:
        return next(self._ids)

    def start(self, fault: Fault) -> None:
        self.started[fault.episode] = fault.kind

    def strike(self, fault: Fault) -> None:
        if fault.kind == "close_raises":
            self.closes_raised += 1
        else:
            self.struck[fault.episode] = fault.kind

    def counts(self) -> dict[str, dict[str, int]]:
        """Per fault kind (``none`` for healthy episodes): episodes started with it and faults that struck."""
        started, struck = Counter(self.started.values()), Counter(self.struck.values())
        struck["close_raises"] = self.closes_raised
        return {kind or "none": {"started": started[kind], "struck": struck[kind]}
                for kind in [None, *FAULTS] if started[kind]}


HEALTHY = Fault(-1, None, 0)


class FaultyEnv(Env):
    """Mixin: plays the fault :meth:`inject` gave it for the coming episode."""

    def __init__(self, *, latencies: Latencies, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.latencies = latencies
        self.fault = HEALTHY
        self.log: FaultLog | None = None

    def inject(self, fault: Fault, log: FaultLog) -> None:
        """Arm ``fault`` for the next episode (and for this instance's close)."""
        self.fault, self.log = fault, log

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[list[Message], dict[str, Any]]:
        if self.fault.kind == "reset_raises":
            self._strike()
            raise InjectedFault(self.fault, "the environment could not reset")
        if self.fault.kind == "reset_hangs":
            self._strike()
            await asyncio.Event().wait()
        return await super().areset(seed=seed, options=options)

    async def astep(self, action: str) -> StepResult:
        if self.fault.kind in STEP_FAULTS and self.fault.turn == self.turn + 1:
            self._strike()
            await self._misbehave()
        return await super().astep(action)

    async def aclose(self) -> None:
        """Close for real, then raise if armed to (a close that reports a failure)."""
        await super().aclose()
        if self.fault.kind == "close_raises":
            self._strike()
            raise InjectedFault(self.fault, "the environment's close failed")

    async def die(self) -> None:
        """What ``sandbox_dies`` does; only sandboxed environments can."""
        raise NotImplementedError(f"{type(self).__name__} has no sandbox to kill")

    async def _misbehave(self) -> None:
        kind = self.fault.kind
        if kind == "step_raises":
            raise InjectedFault(self.fault, "the environment's step failed")
        if kind == "step_hangs":
            await asyncio.Event().wait()
        elif kind == "step_blocks":  # a synchronous call stuck past the limit, where this env runs its hooks
            if self.execution == "inline":
                await asyncio.to_thread(time.sleep, self.latencies.blocked)
            else:
                await self._call(time.sleep, self.latencies.blocked)
        elif kind == "step_slow":
            await asyncio.sleep(self.latencies.slow)
        elif kind == "sandbox_dies":
            await self.die()

    def _strike(self) -> None:
        assert self.log is not None
        self.log.strike(self.fault)


class ChaosLake(FaultyEnv, LongTailLake):
    """FrozenLake with long-tailed step times (``perf/LongTailLake-v0``) and injected faults, whose hooks run
    on a thread of its own (as a library bound to one thread needs)."""

    execution = "pinned"


class ChaosShell(FaultyEnv, ShellEnv):
    """Shell on the ``local`` sandbox backend with injected faults; ``sandbox_dies`` kills the episode's
    sandbox from outside while a command runs in it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(backend="local", **kwargs)

    async def die(self) -> None:
        """Start a long command, then kill every process of the sandbox and delete its state, as a crash
        of the host side or a reaper would (with the backend's own removal); the command ends killed or
        refused, and the episode's next use of the sandbox fails."""
        sandbox = self.sandbox
        doomed = asyncio.create_task(sandbox.exec(["sleep", "30"], timeout=30))
        try:
            await asyncio.sleep(0.05)
            await asyncio.to_thread(local_sandbox._destroy, sandbox.id)
        finally:
            doomed.cancel()
            await asyncio.gather(doomed, return_exceptions=True)


class ChaosPolicy:
    """Wraps ``inner``: each episode draws its fault from ``plan`` (see the module) and logs it in ``log``."""

    def __init__(self, inner: Policy, plan: FaultPlan, log: FaultLog) -> None:
        self.inner, self.plan, self.log = inner, plan, log
        self.name = f"chaos-{inner.name}"
        self.engine = getattr(inner, "engine", None)

    def start(self, env: FaultyEnv, rng: np.random.Generator) -> PolicySession:
        fault = self.plan.draw(rng, self.log.next_episode())
        self.log.start(fault)
        env.inject(fault, self.log)
        if fault.kind == "start_raises":
            self.log.strike(fault)
            raise InjectedFault(fault, "the policy could not start")
        return _ChaosSession(self.inner.start(env, rng), fault, self.log)


class _ChaosSession:
    def __init__(self, inner: PolicySession, fault: Fault, log: FaultLog) -> None:
        self.inner, self.fault, self.log = inner, fault, log
        self.turn = 0

    async def act(self, observation: list[Message]) -> str:
        self.turn += 1
        if self.turn == self.fault.turn and self.fault.kind in ("act_raises", "act_hangs"):
            self.log.strike(self.fault)
            if self.fault.kind == "act_raises":
                raise InjectedFault(self.fault, "the policy failed to answer")
            await asyncio.Event().wait()
        return await self.inner.act(observation)

    def record(self, trajectory: Trajectory) -> None:
        self.inner.record(trajectory)
        trajectory.info["chaos"] = {"episode": self.fault.episode, "fault": self.fault.kind}
