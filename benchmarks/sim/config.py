"""What the simulated cluster is: its fleet (GPU counts, prices, host memory) and the phase model's knobs, each
default with the assumption behind it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from agentgym.trainers.mux.plan import PoolPair


@dataclass(frozen=True)
class Fleet:
    """Two device types: rollout on H20s, training on H800s (the paper's testbed: 328 of each), billed per
    GPU-hour while held. A group's host memory is that of its training pool's nodes, where the learner states
    (weights, gradients, optimizer: about 16 bytes a parameter) stay resident between turns."""

    rollout_gpus: int = 328
    train_gpus: int = 328
    rollout_price: float = 1.85
    """Dollars per H20 GPU-hour."""
    train_price: float = 5.28
    """Dollars per H800 GPU-hour."""
    gpus_per_node: int = 8
    node_memory_gb: float = 2048.0

    def pools(self, rollout_gpus: int, train_gpus: int) -> PoolPair:
        """The pool pair of a group (or a solo job) of this size."""
        nodes = math.ceil(train_gpus / self.gpus_per_node)
        return PoolPair(rollout_gpus, train_gpus, self.rollout_price, self.train_price,
                        memory_gb=nodes * self.node_memory_gb)


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
    ``quantile``: the phase-time quantile admission plans on."""

    switch_seconds: float = 2.0
    release: float | None = 0.8
    tail_drag: float = 0.2
    colocated_rollout_speed: float = 1.0
    colocated_switch_seconds: float = 2.0
    quantile: float = 0.9
