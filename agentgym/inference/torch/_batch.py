"""The running batch of the torch engine: left-padded rows that share one KV cache.

Rows join (a prefilled cohort is merged in) and leave (their rows are index-selected away) between
decode steps. ``mask[b, j]`` says whether cache column ``j`` of row ``b`` holds a real token, and
every forward gets explicit ``position_ids``, so left padding does not change what a row computes.
The cache holds each row's context except its last sampled token, which the next decode step feeds.
A prefill may start from cached prefixes (:mod:`agentgym.inference.torch._prefix_cache`): it computes only
each row's remaining tokens, at their true positions, after that row's cached KV.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from transformers import DynamicCache, PreTrainedModel
from transformers.cache_utils import DynamicLayer

from agentgym.inference.torch._prefix_cache import KV, CachedPrefix


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
        cls,
        model: PreTrainedModel,
        contexts: list[list[int]],
        device: torch.device,
        cached: list[CachedPrefix | None] | None = None,
    ) -> tuple[KVBatch, torch.Tensor]:
        """Run ``contexts`` through ``model``, each after the KV of its ``cached`` prefix (if any), so only
        the rest is computed; returns the batch and each row's last logits."""
        cached = cached or [None] * len(contexts)
        done = [prefix.length if prefix is not None else 0 for prefix in cached]
        ids, new_mask = _left_padded([context[n:] for context, n in zip(contexts, done, strict=True)])
        past = max(done)
        past_mask = _left_padded([[1] * n for n in done], width=past)[1]
        ids, mask = ids.to(device), torch.cat([past_mask, new_mask], dim=1).to(device)
        offsets = torch.tensor(done, dtype=torch.long, device=device)[:, None]
        positions = (new_mask.to(device).cumsum(-1) - 1).clamp_(min=0) + offsets
        cache = DynamicCache(ddp_cache_data=_stack(cached, past) if past else None, config=model.config)
        for layer in cache.layers:
            if type(layer) is not DynamicLayer:
                raise TypeError(
                    "the torch engine batches only full-attention caches (DynamicLayer); this model's cache "
                    f"has {type(layer).__name__} layers: serve it with the vllm engine instead"
                )
        out = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            **{_cache_keyword(type(model).forward): cache},
            logits_to_keep=1,
        )
        batch = cls(cache, mask, mask.sum(-1))
        if past:
            batch._close_gaps()
        return batch, out.logits[:, -1, :]

    def decode(self, model: PreTrainedModel, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per row (``[B]``) and return the next-token logits (``[B, V]``)."""
        self.mask = torch.cat([self.mask, self.mask.new_ones((len(self), 1))], dim=1)
        out = model(
            input_ids=tokens[:, None],
            attention_mask=self.mask,
            position_ids=self.next_pos[:, None],
            use_cache=True,
            **{_cache_keyword(type(model).forward): self.cache},
        )
        self.next_pos = self.next_pos + 1
        logits: torch.Tensor = out.logits
        return logits[:, -1, :]

    def row_kv(self, row: int, length: int) -> KV:
        """Views of the KV of the last ``length`` tokens of ``row`` (its real tokens end the row)."""
        width = self.mask.shape[1]
        return [
            (keys[row : row + 1, :, width - length :], values[row : row + 1, :, width - length :])
            for _, keys, values in self._layers()
        ]

    def select(self, rows: list[int]) -> KVBatch | None:
        """Keep only ``rows`` (in that order), dropping padding columns no kept row needs; None when empty."""
        if not rows:
            return None
        index = torch.tensor(rows, dtype=torch.long, device=self.mask.device)
        mask = self.mask.index_select(0, index)
        first = int(mask.any(dim=0).to(torch.int8).argmax())
        for layer, keys, values in self._layers():
            layer.keys = keys.index_select(0, index)[:, :, first:]
            layer.values = values.index_select(0, index)[:, :, first:]
        self.mask = mask[:, first:]
        self.next_pos = self.next_pos.index_select(0, index)
        return self

    def fork(self, rows: list[int]) -> KVBatch:
        """Append a copy of each of ``rows`` (its KV, mask and next position) after the batch's rows: a forked
        sequence goes on from its parent's cache with nothing recomputed."""
        index = torch.tensor(rows, dtype=torch.long, device=self.mask.device)
        for layer, keys, values in self._layers():
            layer.keys = torch.cat([keys, keys.index_select(0, index)])
            layer.values = torch.cat([values, values.index_select(0, index)])
        self.mask = torch.cat([self.mask, self.mask.index_select(0, index)])
        self.next_pos = torch.cat([self.next_pos, self.next_pos.index_select(0, index)])
        return self

    def merge(self, other: KVBatch) -> KVBatch:
        """Append the rows of ``other`` after this batch's rows, left-padding the shorter of the two."""
        width = max(self.mask.shape[1], other.mask.shape[1])
        layers = zip(self._layers(), other._layers(), strict=True)
        for (layer, keys, values), (_, their_keys, their_values) in layers:
            layer.keys = torch.cat([_pad_left(keys, width), _pad_left(their_keys, width)], dim=0)
            layer.values = torch.cat([_pad_left(values, width), _pad_left(their_values, width)], dim=0)
        self.mask = torch.cat(
            [_pad_left(self.mask, width, dim=1), _pad_left(other.mask, width, dim=1)], dim=0
        )
        self.next_pos = torch.cat([self.next_pos, other.next_pos])
        return self

    def _close_gaps(self) -> None:
        """Move each row's real columns to the right end (a cached prefix and its new tokens were apart)
        and drop the padding columns no row needs."""
        order = self.mask.argsort(dim=1, stable=True)[:, -int(self.next_pos.max()) :]
        self.mask = self.mask.gather(1, order)
        for layer, keys, values in self._layers():
            index = order[:, None, :, None].expand(-1, keys.shape[1], -1, keys.shape[3])
            layer.keys = keys.gather(2, index)
            layer.values = values.gather(2, index)

    def _layers(self) -> Iterator[tuple[DynamicLayer, torch.Tensor, torch.Tensor]]:
        """Each cache layer with its keys and values (full-attention layers, filled: :meth:`prefill` lets
        no other kind in)."""
        for layer in self.cache.layers:
            assert isinstance(layer, DynamicLayer) and layer.keys is not None and layer.values is not None
            yield layer, layer.keys, layer.values


@functools.cache
def _cache_keyword(forward: Callable[..., Any]) -> str:
    """The keyword the model's ``forward`` takes its KV cache by: ``cache`` in newer ``transformers`` (where
    ``past_key_values`` still works but warns that it is deprecated), ``past_key_values`` before."""
    return "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"


def _left_padded(rows: list[list[int]], width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` right-aligned in a ``[len(rows), width]`` tensor of zeros, and the mask of what they fill."""
    width = max(map(len, rows)) if width is None else width
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for row, values in enumerate(rows):
        if values:
            ids[row, width - len(values) :] = torch.tensor(values, dtype=torch.long)
            mask[row, width - len(values) :] = 1
    return ids, mask


def _stack(cached: list[CachedPrefix | None], width: int) -> KV:
    """The cached prefixes as one left-padded ``[rows, heads, width, dim]`` pair per layer (zeros for none)."""
    some = next(prefix for prefix in cached if prefix is not None)
    layers = []
    for layer, (keys, values) in enumerate(some.layers):
        empty_k = keys.new_zeros((1, keys.shape[1], width, keys.shape[3]))
        empty_v = values.new_zeros((1, values.shape[1], width, values.shape[3]))
        layers.append(
            (
                torch.cat(
                    [_pad_left(p.layers[layer][0], width) if p is not None else empty_k for p in cached]
                ),
                torch.cat(
                    [_pad_left(p.layers[layer][1], width) if p is not None else empty_v for p in cached]
                ),
            )
        )
    return layers


def _pad_left(tensor: torch.Tensor, width: int, dim: int = 2) -> torch.Tensor:
    """Zero-pad ``tensor`` on the left of ``dim`` (a cache's sequence axis by default) up to ``width``."""
    missing = width - tensor.shape[dim]
    if missing == 0:
        return tensor
    pad = [0, 0] * (tensor.dim() - 1 - dim) + [missing, 0]
    return F.pad(tensor, pad)
