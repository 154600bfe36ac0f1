"""The trained model as each strategy runs it: as it is (``single``), replicated with all-reduced gradients
(``ddp``), or sharded with FSDP2 (``fsdp``); and what differs between them: gradient sync, whole weights,
gradient norms and optimizer checkpoints."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel
from transformers import PreTrainedModel

from agentgym.algorithms import grad_norm

_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling")
"""Config fields of architectures that transform the output layer's logits (Gemma 2, Cohere, Granite)."""


class AgentLogits(nn.Module):
    """``[N, V]`` float logits predicting a batch's ``N`` agent tokens, as one module so that DDP and FSDP hook
    the whole pass. Only agent positions go through the output layer: prompts and observations are most of a
    multi-turn sequence, and for a small model the output layer and the softmax over the vocabulary are most
    of the work. ``packed``: the right-padded rows' tokens go in as one sequence whose position ids restart at
    each row, which transformers' attention masks per row (no padding computed)."""

    def __init__(self, model: PreTrainedModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, agent: torch.Tensor,
                packed: bool = False) -> torch.Tensor:
        model = self.model
        right_padded = bool((attention_mask[:, 1:] <= attention_mask[:, :-1]).all())  # pads only after each row
        real = attention_mask.bool()
        if packed:
            if not right_padded:
                raise ValueError("packing takes right-padded rows (as collate makes them)")
            row_starts = torch.cumsum(real.sum(-1), 0) - real.sum(-1)
            inputs = {"input_ids": input_ids[real][None], "position_ids": (real.long().cumsum(-1) - 1)[real][None],
                      "attention_mask": None, "use_cache": False}
        else:
            row_starts = torch.arange(input_ids.shape[0], device=agent.device) * input_ids.shape[1]
            # under causal attention no real token sees a pad that follows it: the mask changes nothing, and
            # without it attention takes its fused causal path
            inputs = {"input_ids": input_ids, "attention_mask": None if right_padded else attention_mask,
                      "use_cache": False}
        # each agent position's place among the pass's flattened positions, in row-major order
        places = (row_starts[:, None] + torch.arange(agent.shape[1], device=agent.device))[agent]
        if any(getattr(model.config, name, None) for name in _LOGIT_TRANSFORMS):
            return model(**inputs).logits.flatten(0, 1)[places].float()
        hidden = model.base_model(**inputs).last_hidden_state.flatten(0, 1)
        return model.get_output_embeddings()(hidden[places]).float()


def wrap(model: PreTrainedModel, strategy: str) -> nn.Module:
    """``model``'s :class:`AgentLogits` as ``strategy`` trains it (ddp and fsdp need the process group)."""
    policy = AgentLogits(model)
    if strategy == "ddp":
        device = next(model.parameters()).device
        return DistributedDataParallel(policy, device_ids=[device.index] if device.type == "cuda" else None)
    if strategy == "fsdp":
        for layer in _layers(model):  # each decoder layer gathers its weights only while it runs
            fully_shard(layer)
        fully_shard(policy)  # the embeddings, final norm and output layer: one group
    return policy


def _layers(model: PreTrainedModel) -> list[nn.Module]:
    for name in ("layers", "h", "blocks"):
        layers = getattr(model.base_model, name, None)
        if isinstance(layers, nn.ModuleList):
            return list(layers)
    return []


def world_size(policy: nn.Module) -> int:
    """Ranks whose gradients ``policy`` averages (1 unless wrapped for ddp or fsdp)."""
    distributed = isinstance(policy, DistributedDataParallel | FSDPModule)
    return dist.get_world_size() if distributed else 1


def gather_rows(policy: nn.Module, rows: list[Any]) -> list[Any]:
    """Every rank's ``rows``, concatenated in rank order (``rows`` itself on one process)."""
    if world_size(policy) == 1:
        return rows
    everyone: list[list[Any]] = [[] for _ in range(dist.get_world_size())]
    dist.all_gather_object(everyone, rows)
    return [row for rank in everyone for row in rank]


def is_writer(policy: nn.Module) -> bool:
    """Whether this process writes what one copy of the run holds (the model folder): rank 0, or the only one."""
    return world_size(policy) == 1 or dist.get_rank() == 0


@contextmanager
def gradient_sync(policy: nn.Module, enabled: bool) -> Iterator[None]:
    """Within it, backward passes reduce gradients across ranks only where ``enabled`` (the last micro-batch):
    the earlier ones accumulate locally."""
    if isinstance(policy, DistributedDataParallel) and not enabled:
        with policy.no_sync():
            yield
        return
    if isinstance(policy, FSDPModule):
        policy.set_requires_gradient_sync(enabled)
    yield


def clip_gradients(parameters: Iterable[nn.Parameter], max_norm: float | None) -> float:
    """The global L2 norm of the gradients (sharded ones included), and clip them to ``max_norm`` where given."""
    parameters = list(parameters)
    norm = grad_norm(parameters)
    if max_norm is not None and norm > max_norm:
        scale = max_norm / (norm + 1e-6)
        for p in parameters:
            if p.grad is not None:
                p.grad.mul_(scale)
    return norm


def whole(tensor: torch.Tensor) -> torch.Tensor:
    """A detached whole copy of ``tensor``; a shard is gathered from every rank (a collective)."""
    if isinstance(tensor, DTensor):
        return tensor.full_tensor().detach()
    return tensor.detach().clone()


def full_weights(policy: nn.Module, model: PreTrainedModel) -> dict[str, torch.Tensor] | None:
    """``model``'s whole state dict on rank 0 (on the CPU where sharded), ``None`` on the others; under fsdp every
    rank must call it, since the shards are gathered."""
    if isinstance(policy, FSDPModule):
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = get_model_state_dict(policy, options=options)
        prefix = "model."
        return {k.removeprefix(prefix): v for k, v in state.items()} if dist.get_rank() == 0 else None
    return model.state_dict() if is_writer(policy) else None


def save_optimizer(policy: nn.Module, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Every rank writes its part of the optimizer state, keyed by parameter name, with torch.distributed.checkpoint:
    any strategy and world size can load it."""
    state = {"optimizer": get_optimizer_state_dict(policy, optimizer)}
    with _one_process(policy):
        dcp.save(state, checkpoint_id=folder, no_dist=world_size(policy) == 1)


def load_optimizer(policy: nn.Module, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Load :func:`save_optimizer`'s state, resharded for this strategy and world size."""
    state: dict[str, Any] = {"optimizer": get_optimizer_state_dict(policy, optimizer)}
    with _one_process(policy):
        dcp.load(state, checkpoint_id=folder, no_dist=world_size(policy) == 1)
    set_optimizer_state_dict(policy, optimizer, state["optimizer"])


@contextmanager
def _one_process(policy: nn.Module) -> Iterator[None]:
    """Quiet torch.distributed.checkpoint's warning that a process with no peers saves or loads alone: meant here."""
    with warnings.catch_warnings():
        if world_size(policy) == 1:
            warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
        yield
