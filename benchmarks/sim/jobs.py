"""The simulated jobs: each a synchronous RL run with its own per-step phase times, size, host memory and SLO,
and the seeded traces they come in (a cluster trace shaped like the paper's, and small all-at-once instances)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentgym.trainers.mux.estimate import Profile

from .config import Fleet, Knobs
from .phases import Shape

BYTES_PER_PARAM = 16.0
"""Learner states resident in host memory: bf16 weights and gradients, fp32 master weights and Adam's moments."""


@dataclass(frozen=True)
class Step:
    """One step's solo phase seconds on the job's own pools; ``tail``: the end of the rollout, after its
    early-release share of the work has closed."""

    rollout: float
    train: float
    tail: float = 0.0

    @property
    def solo(self) -> float:
        return self.rollout + self.train


@dataclass(frozen=True)
class Job:
    """A job: when it arrives, its pools' sizes (H20s for rollout, H800s for training), its steps, the host
    memory its states take and its SLO (co-run step time at most ``slo`` x solo)."""

    id: str
    arrival: float
    rollout_gpus: int
    train_gpus: int
    steps: tuple[Step, ...]
    memory_gb: float = 0.0
    slo: float = 2.0
    shape: str = ""

    @property
    def solo_seconds(self) -> float:
        """Seconds alone on its pools: every step's rollout then training."""
        return math.fsum(s.solo for s in self.steps)

    def profile(self, knobs: Knobs, fleet: Fleet) -> Profile:
        """What admission plans on: the job's steps, each phase with the warm-start switch a shared node costs
        it, planned on ``knobs.basis``; its size in nodes and its states' host memory on each training node."""
        train_nodes = fleet.nodes(self.train_gpus)
        return Profile.from_samples([s.rollout for s in self.steps], [s.train for s in self.steps],
                                    basis=knobs.basis, quantile=knobs.quantile, overhead=knobs.switch_seconds,
                                    memory_gb=self.memory_gb / train_nodes, slo=self.slo,
                                    rollout_nodes=fleet.nodes(self.rollout_gpus), train_nodes=train_nodes)


@dataclass(frozen=True)
class Size:
    """A job size: GPUs in each of its pools, its model's parameters (billions), its weight in the mix, and the
    mean step time alone of a job of this size (its recipe's: model, batch and response length set it)."""

    gpus: int
    params_b: float
    weight: float
    step_seconds: float = 300.0


@dataclass(frozen=True)
class TraceSpec:
    """A cluster trace: ``jobs`` arriving as a Poisson process, each lasting a log-normal number of hours alone
    (median, sigma, clipped), with a size from ``sizes`` (pools of equal GPU counts on both sides), a mean step
    time around its size's (log-normal, ``step_spread`` sigma; or, with ``step_seconds`` set, log-uniform in that
    range whatever the size), and an SLO uniform in ``slo``. A job's steps are drawn from one
    measured shape, scaled to its mean step, their distance from the mean scaled by ``spread``;
    ``rollout_share`` (a range), when set, rescales each job's phases to a rollout share drawn from it (keeping
    the spread), else the shapes' own ratios stand."""

    jobs: int = 200
    interarrival_seconds: float = 1800.0
    hours_median: float = 6.0
    hours_sigma: float = 0.6
    hours_range: tuple[float, float] = (1.0, 24.0)
    step_seconds: tuple[float, float] | None = None
    step_spread: float = 0.15
    sizes: tuple[Size, ...] = field(default_factory=lambda: (
        Size(8, 7.0, 0.45, 240.0), Size(16, 14.0, 0.30, 360.0), Size(32, 32.0, 0.18, 540.0),
        Size(64, 72.0, 0.07, 900.0)))
    slo: tuple[float, float] = (1.0, 2.0)
    rollout_share: tuple[float, float] | None = None
    spread: float = 1.0
    """How far each step lies from its shape's mean, as a share of the measured distance (0.5: halved)."""


def generate_trace(spec: TraceSpec, shapes: Sequence[Shape], seed: int = 0) -> list[Job]:
    """The seeded jobs of ``spec``, in arrival order, each drawn on one of ``shapes``."""
    if not shapes:
        raise ValueError("a trace needs at least one measured shape")
    rng = random.Random(seed)
    jobs, now = [], 0.0
    for index in range(spec.jobs):
        now += rng.expovariate(1.0 / spec.interarrival_seconds) if index else 0.0
        size = rng.choices(spec.sizes, weights=[s.weight for s in spec.sizes])[0]
        low, high = spec.hours_range
        hours = min(high, max(low, rng.lognormvariate(math.log(spec.hours_median), spec.hours_sigma)))
        step = step_time(spec, size, rng)
        shape = rng.choice(shapes)
        share = rng.uniform(*spec.rollout_share) if spec.rollout_share else None
        steps = draw_steps(shape, step, max(1, round(hours * 3600 / step)), rng, rollout_share=share,
                           spread=spec.spread)
        jobs.append(Job(f"job{index:04d}", now, size.gpus, size.gpus, steps,
                        memory_gb=size.params_b * BYTES_PER_PARAM, slo=rng.uniform(*spec.slo), shape=shape.name))
    return jobs


def step_time(spec: TraceSpec, size: Size, rng: random.Random) -> float:
    """A job's mean step time alone: around its size's, or anywhere in ``spec.step_seconds`` where that is set."""
    if spec.step_seconds is not None:
        return math.exp(rng.uniform(*map(math.log, spec.step_seconds)))
    return size.step_seconds * rng.lognormvariate(0.0, spec.step_spread)


def draw_steps(shape: Shape, step_seconds: float, count: int, rng: random.Random, *,
               rollout_share: float | None = None, spread: float = 1.0) -> tuple[Step, ...]:
    """``count`` steps resampled from ``shape`` (whole measured steps, so a step's two phases stay paired), each
    phase's distance from its mean scaled by ``spread``, scaled to a mean of ``step_seconds``, the rollout's
    share rescaled to ``rollout_share`` when given."""
    scale_r = scale_t = 1.0
    if rollout_share is not None:
        scale_r = rollout_share / shape.rollout_share
        scale_t = (1.0 - rollout_share) / (1.0 - shape.rollout_share)
    mean_r, mean_t = shape.rollout_share, 1.0 - shape.rollout_share
    steps = []
    for _ in range(count):
        i = rng.randrange(len(shape.rollout))
        rollout = (mean_r + spread * (shape.rollout[i] - mean_r)) * scale_r * step_seconds
        train = (mean_t + spread * (shape.train[i] - mean_t)) * scale_t * step_seconds
        steps.append(Step(rollout, train, shape.tail * rollout))
    return tuple(steps)


def small_instance(shapes: Sequence[Shape], jobs: int, steps: int, seed: int, *, gpus: int = 8,
                   memory_gb: float = 112.0, spec: TraceSpec | None = None) -> list[Job]:
    """``jobs`` jobs of one size, all submitted at once, each ``steps`` steps long (so a group's members end
    together and a partition's cost is its groups' cycles): the instances the brute-force optimum is run on."""
    spec = spec or TraceSpec()
    rng = random.Random(seed)
    size = next((s for s in spec.sizes if s.gpus == gpus), Size(gpus, 7.0, 1.0))
    out = []
    for index in range(jobs):
        shape = rng.choice(shapes)
        step = step_time(spec, size, rng)
        share = rng.uniform(*spec.rollout_share) if spec.rollout_share else None
        out.append(Job(f"job{index}", 0.0, gpus, gpus, draw_steps(shape, step, steps, rng, rollout_share=share,
                                                                 spread=spec.spread),
                       memory_gb=memory_gb, slo=rng.uniform(*spec.slo), shape=shape.name))
    return out
