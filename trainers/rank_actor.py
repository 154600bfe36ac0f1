"""One rank of a distributed trainer, as a Ray actor: it joins the process group, loads the model and trains its
share of each step with its own :class:`Learner`."""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from agentgym.trainers.batch import Share
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.learner import Learner, load_model, resolve_device


class TrainerRank:
    """Rank ``rank`` of ``config.trainer.world_size``; :meth:`join` makes it ready, the rest is :class:`Learner`'s."""

    def __init__(self, config: TrainConfig, rank: int) -> None:
        self.config, self.rank = config, rank
        self.learner: Learner | None = None

    def rendezvous(self) -> str:
        """A ``tcp://`` address on this node where rank 0 gathers the others (called on rank 0)."""
        import ray

        with socket.socket() as probe:
            probe.bind(("", 0))
            port = probe.getsockname()[1]
        return f"tcp://{ray.util.get_node_ip_address()}:{port}"

    def join(self, rendezvous: str, source: str) -> dict[str, Any]:
        """Join the process group (gloo on CPU, nccl on GPU; every collective times out after
        ``trainer.collective_timeout``), load the model from ``source``; return where this rank runs."""
        trainer = self.config.trainer
        if self.config.engine.threads is not None:
            torch.set_num_threads(self.config.engine.threads)
        device = resolve_device(trainer.device)
        if device.type == "cuda":  # Ray shows a rank its own GPUs only: the first is this rank's
            device = torch.device("cuda", device.index or 0)
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=rendezvous, rank=self.rank,
                                world_size=trainer.world_size, timeout=timedelta(seconds=trainer.collective_timeout))
        torch.manual_seed(trainer.seed)
        self.learner = Learner(load_model(source, self.config, device), self.config)
        import ray

        return {"rank": self.rank, "pid": os.getpid(), "node": socket.gethostname(),
                "node_id": ray.get_runtime_context().get_node_id(), "device": str(device)}

    def train(self, share: Share) -> tuple[dict[str, float], dict[int, list[float]]]:
        """This rank's metrics of the step and its rows' trainer logprobs (:attr:`Learner.trainer_logprobs`)."""
        learner = self._learner()
        return learner.train(share.to(learner.device)), learner.trainer_logprobs

    def skip(self) -> dict[str, float]:
        return self._learner().skip()

    def weights(self) -> dict[str, torch.Tensor] | None:
        """The whole weights on the CPU (rank 0; ``None`` on the others): the driver may have no GPU."""
        weights = self._learner().weights()
        return None if weights is None else {name: tensor.cpu() for name, tensor in weights.items()}

    def offload(self) -> None:
        self._learner().offload()

    def onload(self) -> None:
        self._learner().onload()

    def save(self, folder: str) -> None:
        self._learner().save(Path(folder))

    def restore(self, checkpoint: str, scheduler: dict[str, Any], version: int) -> None:
        self._learner().restore(Path(checkpoint), scheduler, version)

    def scheduler_state(self) -> dict[str, Any]:
        return self._learner().scheduler_state()

    def leave(self) -> None:
        """Leave the process group (before the actor is ended)."""
        if dist.is_initialized():
            dist.destroy_process_group()

    def _learner(self) -> Learner:
        if self.learner is None:
            raise RuntimeError("TrainerRank.join was not called")
        return self.learner
