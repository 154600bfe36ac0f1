"""The settings of where a rollout runs: in this process (``local``) or on a Ray cluster (``ray``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agentgym.config import Config
from agentgym.rollout.config import TreeRollout


class RayConfig(Config):
    """The Ray cluster, its env workers and its engine replicas."""

    address: str | None = None
    """An existing cluster to join (``auto``: the one ``ray start`` began on this machine, ``host:port`` or
    ``ray://host:port``); null joins ``RAY_ADDRESS`` where it is set (as under ``ray job submit``), and otherwise
    starts a local Ray of the run's own, labelled with what this machine has (``chromium``, ``docker``), and
    stops it afterwards."""
    env_workers: int = Field(2, ge=1)
    """Env-worker actors; each plays many episodes at once on its own event loop, with its own env pool,
    sandbox pools and browser."""
    worker_cpus: float = Field(0.5, ge=0)
    """CPUs each env worker reserves (Ray's accounting: it places workers by it, and refuses more than a cluster
    has)."""
    worker_memory_mb: int = Field(0, ge=0)
    """Memory each env worker reserves (Ray places it on a node with that much free; 0: no reservation). Count
    what its episodes' environments hold: a browser context, sandboxes, solvers."""
    worker_resources: dict[str, float] = Field(default_factory=dict)
    """Custom resources each env worker asks for besides those its environment needs (an environment tagged
    ``browser`` asks for ``chromium``, one on a ``desktop`` for ``docker``): workers go only to nodes that
    offer them, e.g. ``ray start --resources='{"chromium": 1}'``."""
    engine_replicas: int = Field(1, ge=1)
    """Inference engine replicas (actors); each episode stays on one of them, and every replica gets the new
    weights after each step."""
    replica_cpus: float = Field(1.0, ge=0)
    """CPUs each engine replica reserves."""
    replica_memory_mb: int = Field(0, ge=0)
    """Memory each engine replica reserves (0: no reservation)."""
    replica_gpus: float = Field(0.0, ge=0)
    """GPUs each engine replica reserves (a vLLM replica needs one)."""
    replica_resources: dict[str, float] = Field(default_factory=dict)
    """Custom resources each engine replica asks for: replicas go only to nodes that offer them (a multiplexed
    job's engine asks for its group's rollout pool)."""


class BackendConfig(Config):
    """Where the episodes and the engine run."""

    backend: Literal["local", "ray"] = "local"
    """``local``: every episode on this process's event loop and the engine in-process; ``ray``: episodes in
    env-worker actors and the engine as replicas, on a local Ray or the cluster at ``ray.address``."""
    ray: RayConfig = RayConfig()
    sampling: Literal["stochastic", "latr"] = "stochastic"
    """How a group's episodes are drawn: ``stochastic``, each on its own; ``latr``, LATR's share of the group
    (``round(G * η)``) grown as one tree of episodes that fork where the policy is unsure."""
    latr: TreeRollout = TreeRollout()
    """LATR's settings, within a turn and across turns (for ``sampling: latr``)."""
    carry_over: bool = False
    """Keep a complete group's spares that are still playing, paused at their next turn, and resume them first
    once the weights changed, in an extra group of their task (APRIL's partial rollout; ``local`` backend only)."""
    carry_over_limit: int = Field(64, ge=1)
    """Spares paused at once with ``carry_over``; one beyond it is cancelled."""
    carry_over_resume: Literal["next_version", "at_once"] = "next_version"
    """``next_version``: a carried spare pauses until new weights are published; ``at_once``: it goes straight on in
    its carry group under the weights the engine serves, never holding a slot idle."""

    @model_validator(mode="after")
    def _carry_over_is_local(self) -> BackendConfig:
        if self.carry_over and self.backend == "ray":
            raise ValueError("carry_over: needs backend: local (an episode in a Ray env worker cannot be paused at a "
                             "turn boundary from the scheduler); set carry_over: false or backend: local")
        return self
