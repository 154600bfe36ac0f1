"""A trainer of ``trainer.world_size`` ranks (DDP or FSDP2), launched and supervised by Ray.

The ranks are Ray actors in one placement group (packed, so they share nodes where they can), joined in one
torch.distributed process group. The driver deals each step's micro-batches out to them and merges their
metrics; rank 0 gathers the whole weights, which the driver publishes to the engines, and writes the model
of each checkpoint while every rank writes its part of the optimizer state.

A rank that dies fails the step: its peers' collectives fail when its connections close, or after
``trainer.collective_timeout`` where a node went silent, and the driver raises :class:`TrainerRankError`
naming the rank. Nothing of the failed step is applied; the run resumes from its last checkpoint.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from agentgym.cluster.backend import connect
from agentgym.errors import AgentGymError
from agentgym.trainers.batch import TrainBatch, shares
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.learner import merge_metrics
from agentgym.trainers.rank_actor import TrainerRank

PLACEMENT_TIMEOUT = 120.0
"""Seconds to wait for the cluster to make room for the ranks."""


class TrainerRankError(AgentGymError):
    """A trainer rank died, failed, or hung in a collective; the step it was in is not applied."""


class RankGroup:
    """The driver's handle on the ranks, with :class:`Learner`'s interface: ``step``, ``skip``, ``weights``,
    ``offload``, ``onload``, ``save``, ``restore``, ``scheduler_state``, ``version`` and ``trainer_logprobs``. Joins the Ray cluster at ``address`` (or starts
    a local one, stopped by :meth:`close`)."""

    def __init__(self, config: TrainConfig, source: str | Path, address: str | None = None) -> None:
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.config, self.version = config, 0
        self.trainer_logprobs: dict[tuple[int, int], list[float]] = {}
        trainer = config.trainer
        self._ranks: list[Any] = []
        self._group: Any = None
        self._started = connect(address)
        bundle = {**({"CPU": trainer.rank_cpus} if trainer.rank_cpus else {}),
                  **({"GPU": trainer.rank_gpus} if trainer.rank_gpus else {}), **trainer.rank_resources}
        try:
            self._group = placement_group([bundle] * trainer.world_size, strategy="PACK")
            ready, _ = ray.wait([self._group.ready()], timeout=PLACEMENT_TIMEOUT)
            if not ready:
                raise AgentGymError(f"trainer.world_size: the Ray cluster has no room for {trainer.world_size} ranks "
                                    f"of {bundle} each (it has {ray.cluster_resources()}); lower trainer.rank_cpus "
                                    "or trainer.rank_gpus, or add nodes")
            actor = ray.remote(TrainerRank)
            self._ranks = [
                actor.options(num_cpus=trainer.rank_cpus, num_gpus=trainer.rank_gpus,
                              resources=trainer.rank_resources, max_restarts=0,
                              scheduling_strategy=PlacementGroupSchedulingStrategy(self._group, placement_group_bundle_index=rank),
                              ).remote(config, rank)
                for rank in range(trainer.world_size)
            ]
            rendezvous = ray.get(self._ranks[0].rendezvous.remote())
            self.where: list[dict[str, Any]] = self._all("join", rendezvous, str(source))
        except BaseException:
            self.close()
            raise

    def step(self, batch: TrainBatch) -> dict[str, float]:
        """One optimizer step on ``batch``, each rank training its share; the step's merged metrics."""
        trainer = self.config.trainer
        dealt = shares(batch, trainer.micro_batch_size, len(self._ranks), trainer.max_tokens_per_micro_batch,
                       packed=trainer.sequence_packing)
        parts = self._each("train", [(share,) for share in dealt])
        self.version += 1
        self.trainer_logprobs = {row: values for _, rows in parts for row, values in rows.items()}
        return merge_metrics([metrics for metrics, _ in parts], batch)

    def skip(self) -> dict[str, float]:
        self.trainer_logprobs = {}
        metrics = self._all("skip")[0]
        self.version += 1
        return metrics

    def weights(self) -> dict[str, torch.Tensor]:
        """The whole model's state dict, gathered by rank 0."""
        return self._all("weights")[0]

    def offload(self) -> None:
        self._all("offload")

    def onload(self) -> None:
        self._all("onload")

    def save(self, folder: Path) -> None:
        self._all("save", str(folder))

    def restore(self, checkpoint: Path, scheduler: dict[str, Any], version: int) -> None:
        self._all("restore", str(checkpoint), scheduler, version)
        self.version = version

    def scheduler_state(self) -> dict[str, Any]:
        return self._all("scheduler_state")[0]

    def close(self) -> None:
        """End the ranks and their placement, and the local Ray started for them; safe to call twice."""
        import ray
        from ray.util.placement_group import remove_placement_group

        for rank in self._ranks:
            ray.kill(rank)
        self._ranks = []
        if self._group is not None:
            remove_placement_group(self._group)
            self._group = None
        if self._started:
            ray.shutdown()
            self._started = False

    def _all(self, method: str, *args: Any) -> list[Any]:
        return self._each(method, [args] * len(self._ranks))

    def _each(self, method: str, args: list[tuple[Any, ...]]) -> list[Any]:
        """Call ``method`` on every rank (rank ``i`` with the arguments ``args[i]``) and return their
        results in rank order; where one fails, wait up to the collective timeout for the others to fail as
        well, end them all, and raise naming each rank and what became of it."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        refs = {getattr(rank, method).remote(*a): i
                for i, (rank, a) in enumerate(zip(self._ranks, args, strict=True))}
        results: dict[int, Any] = {}
        failures: dict[int, str] = {}
        pending, deadline = list(refs), None
        while pending:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, pending = ray.wait(pending, num_returns=1, timeout=timeout)
            if not ready:
                break  # past the deadline: the rest are stuck
            rank = refs[ready[0]]
            try:
                results[rank] = ray.get(ready[0])
            except RayActorError:
                failures[rank] = f"died ({self._whereabouts(rank)} exited)"
            except RayTaskError as error:
                failures[rank] = f"failed: {_first_line(error.cause or error)}"
            if failures and deadline is None:
                deadline = time.monotonic() + self.config.trainer.collective_timeout
        if not failures:
            return [results[rank] for rank in range(len(self._ranks))]
        for ref in pending:
            failures[refs[ref]] = f"did not return within trainer.collective_timeout ({self._whereabouts(refs[ref])})"
        self.close()
        told = "; ".join(f"rank {rank} {what}" for rank, what in sorted(failures.items()))
        raise TrainerRankError(f"trainer {method} failed at version {self.version}: {told}")

    def _whereabouts(self, rank: int) -> str:
        where = getattr(self, "where", None)
        return f"pid {where[rank]['pid']} on {where[rank]['node']}" if where else "its process"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"
