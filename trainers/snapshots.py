"""Weight snapshots of the live policy versions, for exact ``pi_old`` logprobs of stale tokens."""

from __future__ import annotations

import copy

import torch
from transformers import PreTrainedModel

from agentgym.trainers.parallel import whole


class VersionSnapshots:
    """Keeps the trained weights of the last ``keep`` versions before the current one, on the model's device,
    and a spare model to run them in (its frozen weights, a LoRA run's base, are the model's for good). Memory:
    ``keep`` copies of the trained weights and one of the whole (on every rank, sharded or not: a rank runs its
    snapshots alone)."""

    def __init__(self, model: PreTrainedModel, keep: int) -> None:
        self.keep = keep
        self._weights: dict[int, dict[str, torch.Tensor]] = {}
        self._spare = copy.deepcopy(model).eval() if keep > 0 else None
        self._loaded: int | None = None

    def save(self, version: int, model: PreTrainedModel) -> None:
        """Remember ``model``'s weights as ``version`` (call before they change; under fsdp on every rank, since
        the shards are gathered) and forget those more than ``keep`` versions older, which no admitted
        trajectory can still hold."""
        if self.keep == 0:
            return
        self._weights[version] = {k: whole(p) for k, p in model.named_parameters() if p.requires_grad}
        for old in [v for v in self._weights if v < version - self.keep]:
            del self._weights[old]

    def to(self, device: torch.device | str) -> None:
        """Move the kept weights and the spare model to ``device``."""
        self._weights = {v: {k: t.to(device) for k, t in w.items()} for v, w in self._weights.items()}
        if self._spare is not None:
            self._spare.to(device)

    def __contains__(self, version: int) -> bool:
        return version in self._weights

    def model(self, version: int) -> PreTrainedModel:
        """The spare model holding ``version``'s weights."""
        if self._spare is None or version not in self._weights:
            raise KeyError(f"no snapshot of version {version} (kept: {sorted(self._weights)})")
        if self._loaded != version:
            self._spare.load_state_dict(self._weights[version], strict=False)
            self._loaded = version
        return self._spare
