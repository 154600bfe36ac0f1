"""What the simulated cluster is: its fleet (GPU counts, prices, host memory) and the phase model's knobs, each
default with the assumption behind it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from agentgym.trainers.mux.estimate import Basis
from agentgym.trainers.mux.plan import Machines, Rules


@dataclass(frozen=True)
class Fleet:
    """Two device types: rollout on H20s, training on H800s (the paper's testbed: 328 of each), billed per
    GPU-hour while held, in nodes of ``gpus_per_node``. A training node's host memory keeps the learner states
    (weights, gradients, optimizer: about 16 bytes a parameter) of the jobs pinned to it resident between turns,
    and no node keeps more than ``max_resident`` jobs (the paper: two to five; its simulations' default, five)."""

    rollout_gpus: int = 328
    train_gpus: int = 328
    rollout_price: float = 1.85
    """Dollars per H20 GPU-hour."""
    train_price: float = 5.28
    """Dollars per H800 GPU-hour."""
    gpus_per_node: int = 8
    node_memory_gb: float = 2048.0
    max_resident: int | None = 5

    def machines(self) -> Machines:
        """The nodes as admission sees them."""
        return Machines(self.gpus_per_node, self.rollout_price, self.train_price, self.node_memory_gb,
                        self.max_resident)

    def nodes(self, gpus: int) -> int:
        """Nodes a pool of ``gpus`` takes."""
        return math.ceil(gpus / self.gpus_per_node)

    def cost_per_second(self, rollout_gpus: int, train_gpus: int) -> float:
        """Dollars a second of that many GPUs of each type."""
        return (rollout_gpus * self.rollout_price + train_gpus * self.train_price) / 3600.0


@dataclass(frozen=True)
class Knobs:
    """The phase model. ``switch_seconds``: a warm-start switch (states from host memory onto the pool) at the
    start of a phase whose pool last served another job. ``release``: the share of a rollout's work after which
    it gives the rollout pool to the next job (``None``: held to the end), its tail running beside that job's
    rollout and slowing it by ``tail_drag`` of the overlap (the tail's requests keep that share of the pool).
    Co-located (verl-style): the job on its training GPUs, rollout then training back to back, the rollout
    ``colocated_rollout_speed`` times as fast per GPU as on the H20s (decode is memory-bound and the two have
    like bandwidth: 1.0), and ``colocated_switch_seconds`` at each change of phase (offload, onload, reshard).
    Both switches default to 2 s (a model's shard to or from host memory over PCIe), like for like.
    ``basis``: what admission plans each job's phases and SLO on (``Profile.from_samples``), ``quantile``: the
    phase-time quantile of the ``quantile`` and ``mixed`` bases; ``rules``: the placements admission may use, how
    it estimates step times, and its SLO margin."""

    switch_seconds: float = 2.0
    release: float | None = 0.8
    tail_drag: float = 0.2
    colocated_rollout_speed: float = 1.0
    colocated_switch_seconds: float = 2.0
    quantile: float = 0.9
    basis: Basis = "mean"
    rules: Rules = field(default_factory=Rules)
