"""Automatic prefix caching for the torch engine: the KV of finished requests, found again by token ids.

A finished request leaves the KV of its context (prompt + response, less the last sampled token whose
KV was never computed) as one *entry*. A new request reuses the longest cached run of tokens that
begins its prompt, taken from any entry (the KV of a token depends only on the tokens before it), so a
multi-turn episode's next turn, the samples of one task and prompts with a shared system prompt all
prefill only what is new. Entries are shared, never mutated (the batch copies what it reuses); an
entry that is a prefix of a newer one is dropped as redundant, and the least recently used entries
are evicted past ``capacity`` tokens. Entries are found through chained hashes of ``block``-token
blocks (as vLLM's automatic prefix caching does) and checked token by token, so a hash collision can
only cost a miss. The engine clears the cache when the weights change.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

KV = list[tuple[torch.Tensor, torch.Tensor]]
"""One ``(keys, values)`` pair per layer, each ``[1, kv_heads, tokens, head_dim]``."""


@dataclass(frozen=True)
class CachedPrefix:
    """The KV of the first ``length`` tokens of a prompt (views into a cache entry; never write to them)."""

    length: int
    layers: KV


@dataclass(eq=False)
class _Entry:
    ids: tuple[int, ...]
    layers: KV
    hashes: list[int]
    """Chained hash of each full block of ``ids``."""


class PrefixCache:
    """A least-recently-used cache of KV entries keyed by token ids, bounded by ``capacity`` tokens."""

    def __init__(self, capacity: int, block: int = 16) -> None:
        if capacity < 0:
            raise ValueError(f"prefix_cache_tokens must be 0 (off) or more, got {capacity}")
        self.capacity = capacity
        self.block = block
        self.tokens = 0
        """Tokens held by all entries together."""
        self._entries: OrderedDict[int, _Entry] = OrderedDict()  # least recently used first
        self._holders: dict[int, dict[int, None]] = {}  # block hash -> entries holding that block chain
        self._ending: dict[int, dict[int, None]] = {}  # block hash -> entries whose last full block it is
        self._next_key = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, ids: list[int], limit: int) -> CachedPrefix | None:
        """The longest cached KV of a prefix of ``ids[:limit]`` (at least one block long), or None."""
        hashes = self._chain(ids[:limit])
        depth = 0
        while depth < len(hashes) and hashes[depth] in self._holders:
            depth += 1
        if depth == 0:
            return None
        best_key, best = -1, 0
        ceiling = min(limit, (depth + 1) * self.block - 1)  # block ``depth`` matched nowhere in full
        for key in reversed(self._holders[hashes[depth - 1]]):  # same first ``depth`` blocks; extend
            entry = self._entries[key]
            end, length = min(len(entry.ids), ceiling), depth * self.block
            while length < end and entry.ids[length] == ids[length]:
                length += 1
            if length > best:
                best_key, best = key, length
            if best == ceiling:
                break
        entry = self._entries[best_key]
        if entry.ids[:best] != tuple(ids[:best]):  # a hash collision: not the tokens it claims
            return None
        self._entries.move_to_end(best_key)
        return CachedPrefix(best, [(k[:, :, :best], v[:, :, :best]) for k, v in entry.layers])

    def insert(self, ids: list[int], layers: KV) -> None:
        """Keep a copy of ``layers`` (the KV of ``ids``) as the most recent entry, dropping the entries
        it makes redundant and evicting the least recently used ones past the capacity."""
        if not self.block <= len(ids) <= self.capacity:
            return
        entry = _Entry(tuple(ids), layers, self._chain(ids))
        for key in self._holders.get(entry.hashes[-1], ()):  # an entry that already holds all of ``ids``
            if self._entries[key].ids[: len(ids)] == entry.ids:
                self._entries.move_to_end(key)
                return
        entry.layers = [(k.clone(), v.clone()) for k, v in layers]
        for digest in entry.hashes:  # entries that are a prefix of this one
            for key in list(self._ending.get(digest, ())):
                if entry.ids[: len(self._entries[key].ids)] == self._entries[key].ids:
                    self._remove(key)
        while self.tokens + len(ids) > self.capacity:
            self._remove(next(iter(self._entries)))
        key, self._next_key = self._next_key, self._next_key + 1
        self._entries[key] = entry
        self.tokens += len(ids)
        for digest in entry.hashes:
            self._holders.setdefault(digest, {})[key] = None
        self._ending.setdefault(entry.hashes[-1], {})[key] = None

    def clear(self) -> None:
        """Drop every entry (the weights changed: their KV is stale)."""
        self._entries.clear()
        self._holders.clear()
        self._ending.clear()
        self.tokens = 0

    def _remove(self, key: int) -> None:
        entry = self._entries.pop(key)
        self.tokens -= len(entry.ids)
        for digest in entry.hashes:
            _discard(self._holders, digest, key)
        _discard(self._ending, entry.hashes[-1], key)

    def _chain(self, ids: list[int]) -> list[int]:
        hashes, digest = [], 0
        for start in range(0, len(ids) - self.block + 1, self.block):
            digest = hash((digest, *ids[start : start + self.block]))
            hashes.append(digest)
        return hashes


def _discard(index: dict[int, dict[int, None]], digest: int, key: int) -> None:
    holders = index[digest]
    del holders[key]
    if not holders:
        del index[digest]
