"""The ``ray`` backend: joins a Ray cluster (or starts a local one), and makes the rollout's env workers and the
engine's replicas there."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.cluster.config import RayConfig
from agentgym.errors import AgentGymError
from agentgym.inference import engine_spec, engines
from agentgym.lifetime import stop_handlers_kept
from agentgym.policies import Policy
from agentgym.registration import spec

if TYPE_CHECKING:
    from agentgym.cluster.engines import ReplicatedEngine
    from agentgym.cluster.env_workers import RayRunner

INSTALL = "pip install 'agentgym[ray]'"
MIB = 1 << 20


class RayBackend:
    """Env workers and engine replicas as Ray actors on the cluster at ``config.address`` or ``RAY_ADDRESS``
    (neither: a local Ray started here, labelled with what this machine has, and stopped by :meth:`close`).
    Workers are started on the first rollout that needs their placement and serve every later one."""

    name = "ray"

    def __init__(self, config: RayConfig) -> None:
        from agentgym.cluster.placement import Capacity

        self.started = connect(config.address)  # first: without Ray, nothing else is worth making
        self.config = config
        self.capacity = Capacity()
        self._workers: dict[tuple[tuple[str, float], ...], Any] = {}

    def runner(self, env_id: str, policy: Policy, env_kwargs: dict[str, Any] | None, *,
               close_timeout: float | None) -> RayRunner:
        """A runner whose episodes play in :meth:`workers` of ``env_id``."""
        from agentgym.cluster.env_workers import RayRunner

        return RayRunner(self.workers(env_id), spec(env_id), policy, env_kwargs, close_timeout=close_timeout)

    def workers(self, env_id: str) -> Any:
        """The env workers placed where ``env_id`` can run (on nodes offering the labels it needs and
        :attr:`config`'s ``worker_resources``), started on first use and shared by every rollout that needs
        the same placement."""
        from agentgym.cluster.env_workers import start_workers
        from agentgym.cluster.placement import env_resources

        resources = {**env_resources(spec(env_id)), **self.config.worker_resources}
        key = tuple(sorted(resources.items()))
        if key not in self._workers:
            count, memory = self.config.env_workers, self.config.worker_memory_mb * MIB
            self.capacity.reserve({"CPU": self.config.worker_cpus, "memory": memory, **resources}, count,
                                  f"{count} env workers of {env_id}")
            self._workers[key] = start_workers(count, {"num_cpus": self.config.worker_cpus, "memory": memory or None,
                                                       "resources": resources, "scheduling_strategy": "SPREAD"})
        return self._workers[key]

    def engine(self, name: str, model: str | Path, **engine_kwargs: Any) -> ReplicatedEngine:
        """:attr:`config`'s ``engine_replicas`` replicas of engine ``name`` on ``model``, as one engine."""
        from agentgym.cluster.engines import ReplicatedEngine

        if not engine_spec(name).replicable:
            replicable = ", ".join(other for other, spec in engines().items() if spec.replicable)
            raise AgentGymError(f"the ray backend runs replicas of an engine that can be replicated ({replicable}), "
                                f"not {name!r}")
        config = self.config
        count, memory = config.engine_replicas, config.replica_memory_mb * MIB
        options = {"num_cpus": config.replica_cpus, "num_gpus": config.replica_gpus, "memory": memory or None,
                   "resources": config.replica_resources}
        self.capacity.reserve({"CPU": config.replica_cpus, "GPU": config.replica_gpus, "memory": memory,
                               **config.replica_resources}, count, f"{count} {name} engine replicas")
        return ReplicatedEngine(name, model, replicas=count, options=options, **engine_kwargs)

    def close(self) -> None:
        """End the env workers, and stop the local Ray this backend started; safe to call twice."""
        import ray

        for workers in self._workers.values():
            workers.stop_probing()
            for worker in workers.actors:
                ray.kill(worker)
        self._workers.clear()
        if self.started:
            ray.shutdown()
            self.started = False


def connect(address: str | None) -> bool:
    """Join the Ray cluster at ``address`` or ``RAY_ADDRESS``, or (neither) start a local Ray labelled with what this
    machine has; return whether this call connected (the caller then calls ``ray.shutdown()``, which also stops a
    local Ray). Nothing where this process is connected already: the trainer's ranks and the ray backend share one."""
    try:
        import ray
    except ImportError:
        raise AgentGymError(f"the ray backend needs Ray: {INSTALL}") from None
    if ray.is_initialized():
        return False
    from agentgym.cluster.placement import local_labels

    address = address or os.environ.get("RAY_ADDRESS")
    # "local": a Ray of this run's own, even where another runs here or its address file outlived it
    where = {"address": address} if address else {"address": "local", "resources": local_labels(),
                                                  "include_dashboard": False}
    try:
        with stop_handlers_kept():  # SIGTERM stops the command as Ctrl-C does (ray.init puts sys.exit on it)
            ray.init(**where, logging_level=logging.WARNING, runtime_env={"env_vars": worker_env()})
    except BaseException:
        ray.shutdown()  # a start cut short (Ctrl-C, SIGTERM) leaves none of Ray's processes behind
        raise
    return True


def worker_env() -> dict[str, str]:
    """What the actors' processes need of this one's environment: where to import from (the working folder
    first, as for this process) and the Hugging Face offline switches."""
    paths = [os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {"PYTHONPATH": os.pathsep.join(paths)}
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env
