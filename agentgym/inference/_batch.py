"""The running batch of the torch engine: left-padded rows that share one KV cache.

Rows join (a prefilled cohort is merged in) and leave (their rows are index-selected away) between
decode steps. ``mask[b, j]`` says whether cache column ``j`` of row ``b`` holds a real token, and
every forward gets explicit ``position_ids``, so left padding does not change what a row computes.
The cache holds each row's context except its last sampled token, which the next decode step feeds.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import DynamicCache, PreTrainedModel
from transformers.cache_utils import DynamicLayer


class KVBatch:
    """Rows of a left-padded batch with their KV cache and the position of each row's next token."""

    def __init__(self, cache: DynamicCache, mask: torch.Tensor, next_pos: torch.Tensor) -> None:
        self.cache = cache
        self.mask = mask
        self.next_pos = next_pos

    def __len__(self) -> int:
        return self.mask.shape[0]

    @classmethod
    def prefill(
        cls, model: PreTrainedModel, contexts: list[list[int]], device: torch.device
    ) -> tuple[KVBatch, torch.Tensor]:
        """Run ``contexts`` (left-padded) through ``model``; returns the batch and each row's last logits."""
        width = max(len(ids) for ids in contexts)
        ids = torch.zeros((len(contexts), width), dtype=torch.long)
        mask = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, context in enumerate(contexts):
            ids[row, width - len(context) :] = torch.tensor(context, dtype=torch.long)
            mask[row, width - len(context) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp_(min=0)
        cache = DynamicCache(config=model.config)
        out = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        for layer in cache.layers:
            if type(layer) is not DynamicLayer:
                raise TypeError(
                    "the torch engine batches only full-attention caches (DynamicLayer); this model's cache "
                    f"has {type(layer).__name__} layers: serve it with the vllm engine instead"
                )
        return cls(cache, mask, mask.sum(-1)), out.logits[:, -1, :]

    def decode(self, model: PreTrainedModel, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per row (``[B]``) and return the next-token logits (``[B, V]``)."""
        self.mask = torch.cat([self.mask, self.mask.new_ones((len(self), 1))], dim=1)
        out = model(
            input_ids=tokens[:, None],
            attention_mask=self.mask,
            position_ids=self.next_pos[:, None],
            past_key_values=self.cache,
            use_cache=True,
        )
        self.next_pos = self.next_pos + 1
        return out.logits[:, -1, :]

    def select(self, rows: list[int]) -> KVBatch | None:
        """Keep only ``rows`` (in that order), dropping padding columns no kept row needs; None when empty."""
        if not rows:
            return None
        index = torch.tensor(rows, dtype=torch.long, device=self.mask.device)
        mask = self.mask.index_select(0, index)
        first = int(mask.any(dim=0).to(torch.int8).argmax())
        for layer in self.cache.layers:
            layer.keys = layer.keys.index_select(0, index)[:, :, first:]
            layer.values = layer.values.index_select(0, index)[:, :, first:]
        self.mask = mask[:, first:]
        self.next_pos = self.next_pos.index_select(0, index)
        return self

    def merge(self, other: KVBatch) -> KVBatch:
        """Append the rows of ``other`` after this batch's rows, left-padding the shorter of the two."""
        width = max(self.mask.shape[1], other.mask.shape[1])
        for mine, theirs in zip(self.cache.layers, other.cache.layers, strict=True):
            mine.keys = torch.cat([_pad_left(mine.keys, width), _pad_left(theirs.keys, width)], dim=0)
            mine.values = torch.cat([_pad_left(mine.values, width), _pad_left(theirs.values, width)], dim=0)
        self.mask = torch.cat(
            [_pad_left(self.mask, width, dim=1), _pad_left(other.mask, width, dim=1)], dim=0
        )
        self.next_pos = torch.cat([self.next_pos, other.next_pos])
        return self


def _pad_left(tensor: torch.Tensor, width: int, dim: int = 2) -> torch.Tensor:
    """Zero-pad ``tensor`` on the left of ``dim`` (a cache's sequence axis by default) up to ``width``."""
    missing = width - tensor.shape[dim]
    if missing == 0:
        return tensor
    pad = [0, 0] * (tensor.dim() - 1 - dim) + [missing, 0]
    return F.pad(tensor, pad)
