"""Which nodes an env worker may go to: custom resources used as labels. A node that has Chromium offers
``chromium``, one with a Docker engine ``docker`` (``ray start --resources='{"chromium": 1, "docker": 1}'``);
a worker of an environment that needs one asks for a sliver of it, so any number of workers fit on a labelled
node and none goes to a node without the label."""

from __future__ import annotations

import warnings
from importlib.metadata import entry_points

import ray

from agentgym.errors import AgentGymError
from agentgym.registration import EnvSpec

SLIVER = 0.001
"""How much of a label resource one worker asks for: a node labelled with 1 takes up to a thousand."""
NEEDS = {"browser": "chromium", "desktop": "docker"}
"""The label a node must offer for an environment with each tag."""
LABEL_GROUP = "agentgym.node_labels"
"""The entry-point group of label probes: each entry point is named for a label and loads a function that says
whether this machine offers it (the envs register ``chromium``, the sandboxes ``docker``)."""


def env_resources(spec: EnvSpec) -> dict[str, float]:
    """The label resources the workers of ``spec`` ask for, from its tags."""
    return {NEEDS[tag]: SLIVER for tag in spec.tags if tag in NEEDS}


class Capacity:
    """What this backend's actors reserve of the cluster, so that one asking for more than is left is refused
    at once (Ray would leave it waiting for ever)."""

    def __init__(self) -> None:
        self.reserved: dict[str, float] = {}

    def reserve(self, each: dict[str, float], count: int, who: str) -> None:
        """Count ``count`` actors asking for ``each`` (``CPU``, ``GPU``, labels), or raise
        :class:`AgentGymError` naming what the cluster lacks."""
        offered = ray.cluster_resources()  # type: ignore[no-untyped-call]
        wanted = {name: amount * count for name, amount in each.items() if amount > 0}
        short = {name: amount for name, amount in wanted.items()
                 if offered.get(name, 0.0) - self.reserved.get(name, 0.0) < amount - 1e-9}
        labels = sorted(name for name in short if name not in ("CPU", "GPU", "memory") and name not in offered)
        if labels:
            listed = ", ".join(f'"{name}": 1' for name in labels)
            raise AgentGymError(f"{who} need {', '.join(labels)}, which no node of the Ray cluster offers: start a "
                                f"node that has it with `ray start --resources='{{{listed}}}'`")
        if short:
            lacking = ", ".join(f"{_quantity(name, amount)} (of {_quantity(name, offered.get(name, 0.0))}, "
                                f"{_quantity(name, self.reserved.get(name, 0.0))} taken)" for name, amount in short.items())
            raise AgentGymError(f"{who} need {lacking}, more than the Ray cluster has left; ask for less "
                                "(rollout.ray.env_workers, worker_cpus, worker_memory_mb, engine_replicas, "
                                "replica_cpus, replica_memory_mb) or add nodes")
        for name, amount in wanted.items():
            self.reserved[name] = self.reserved.get(name, 0.0) + amount


def _quantity(name: str, value: float) -> str:
    return f"{value / (1 << 20):.0f} MiB of memory" if name == "memory" else f"{value:g} {name}"


def local_labels() -> dict[str, float]:
    """The labels this machine earns: those of :data:`LABEL_GROUP` whose probe says yes. A probe that cannot
    be loaded or raises earns nothing, with a warning."""
    labels = {}
    for probe in entry_points(group=LABEL_GROUP):
        try:
            if probe.load()():
                labels[probe.name] = 1.0
        except Exception as exc:  # noqa: BLE001 - a broken probe must not keep the cluster from starting
            warnings.warn(f"the node label probe {probe.name!r} ({probe.value}) failed: {exc}", stacklevel=2)
    return labels
