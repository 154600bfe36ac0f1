"""LATR trees on an engine that continues prompts but cannot fork a running sequence (vLLM), driven from outside it.

Greedy decoding is deterministic, so a branch's next greedy tokens do not depend on what the other branches do:
each live branch reads ahead a chunk of greedy positions in one request (each position's token, the untempered
top-k and the engine's version), the chunks of every branch that has run out in parallel, and
:class:`~agentgym.inference.tree.TreeSearch` is fed position by position from them. A fork starts a branch whose
first chunk is a new request on the prompt, the parent's tokens before the fork and the candidate, so the engine's
prefix cache serves the prefix it shares with its parent; a pruned branch's read-ahead is dropped. When the tree
phase ends, each unfinished branch goes on with one ordinary request sampled with the request's settings (the rest
of its ``max_tokens``), and its response is its tree tokens followed by the sampled ones.

A tree token's logprob is its log-probability under the *untempered* distribution (softmax of the raw logits, no
nucleus), the number a greedy request's logprobs give; it equals the sampling distribution's only at temperature 1
with ``top_p`` 1. A candidate forks only if it surely lies in the sampling nucleus (:func:`nucleus_size`). A weight
update during the tree phase ends it (as on the torch engine), and so does the engine closing (every branch then
ends with ``abort``).
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Collection, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar

from agentgym.inference.tree import ExitBatch, LatrParams, TreeSearch, branch_seed
from agentgym.inference.types import (
    FinishReason,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
    TreeResult,
)

CHUNK = 16
"""Greedy positions a branch reads ahead per request: more means fewer rounds, and more read past a prune."""
T = TypeVar("T")


@dataclass(frozen=True)
class GreedyChunk:
    """A greedy request's response with what the tree needs at each of its positions."""

    result: GenerationResult
    """Its tokens, their untempered logprobs, versions and finish reason."""
    tops: list[tuple[list[int], list[float]]]
    """Per token, the top-k token ids and their untempered logprobs, largest first (the token itself first)."""
    cached_tokens: int
    """Prompt tokens that the engine's prefix cache served."""


class GreedySource(Protocol):
    """What the driver needs of an engine: greedy chunks with their top-k, and ordinary sampled requests."""

    @property
    def version(self) -> int:
        """The policy version of the current weights."""
        ...

    async def greedy_chunk(self, request: GenerationRequest, top_k: int) -> GreedyChunk:
        """Continue ``request`` (temperature 0) with the untempered top ``top_k`` at each position."""
        ...

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Sample one response to ``request``."""
        ...


class _Position(NamedTuple):
    """One read-ahead greedy position of a branch."""

    ids: list[int]
    logprobs: list[float]
    version: int


@dataclass
class _BranchTrack:
    """What the driver keeps of a branch: its tree tokens' logprobs and versions, and its read-ahead."""

    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    ahead: deque[_Position] = field(default_factory=deque)
    stops: FinishReason | None = None
    """How the engine ended the branch after its last read-ahead position (``None``: it could go on)."""
    finish: FinishReason | None = None
    """How the branch ended during the tree phase."""
    requested: bool = False


@dataclass
class _Counts:
    """The tree's counters, as :class:`~agentgym.inference.types.TreeResult` reports them."""

    tree_tokens: int = 0
    decoded_tokens: int = 0
    fork_prompt_tokens: int = 0
    fork_cached_tokens: int = 0


def nucleus_size(probs: Sequence[float], temperature: float, top_p: float, vocab_size: int) -> int:
    """How many of the top candidates (untempered probabilities ``probs``, largest first) surely lie in the nucleus
    of ``softmax(logits / temperature)`` (:mod:`agentgym.inference.sampling`: those with less than ``top_p`` of the
    mass before them), knowing only the top-k. The tempered normaliser is bounded from below by the top-k's terms
    plus the least the rest of the mass can add (spread evenly at temperature < 1, at the k-th's probability
    otherwise), so the mass before each candidate is bounded from above: exact at temperature 1."""
    if temperature == 0 or top_p >= 1.0:
        return len(probs)
    power = 1.0 / temperature
    rest = max(1.0 - sum(probs), 0.0)
    others = vocab_size - len(probs)
    if rest == 0.0 or others <= 0:
        least = 0.0
    elif power > 1.0:
        least = others * (rest / others) ** power
    else:
        least = rest * probs[-1] ** (power - 1.0)
    terms = [p**power for p in probs]
    normaliser = sum(terms) + least
    before, size = 0.0, 0
    for term in terms:
        if before / normaliser >= top_p:
            break
        before += term
        size += 1
    return size


async def _together(calls: Sequence[Coroutine[Any, Any, T]]) -> list[T]:
    """Run ``calls`` at once; the first failure cancels the others and is raised as it is."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
    except BaseExceptionGroup as failures:
        raise failures.exceptions[0] from None
    return [task.result() for task in tasks]


async def grow_tree(
    engine: GreedySource,
    request: GenerationRequest,
    params: LatrParams,
    width: int,
    *,
    eos_ids: Collection[int],
    vocab_size: int,
    math_ids: Collection[int] = frozenset(),
    batch: ExitBatch | None = None,
) -> TreeResult:
    """Grow a LATR tree of at most ``width`` branches from ``request`` on ``engine`` (see the module doc);
    ``math_ids`` are the tokens at which a fork is never pruned, ``batch`` the engine's trees (``exit_scope``)."""
    sampling = request.sampling
    search = TreeSearch(params, width, eos_ids, sampling.max_tokens, math_ids, batch)
    tracks = {0: _BranchTrack()}
    counts = _Counts()
    version = engine.version
    try:
        while not search.exited:
            await _read_ahead(engine, request, search, tracks, counts)
            if engine.version != version:  # checked after the read-ahead: no tree token comes from the new weights
                break
            if any(track.stops == "abort" for track in tracks.values()):
                for index in search.live():
                    tracks[index].finish = "abort"
                break
            for index in search.live():  # a chunk with nothing to read: the engine ended the branch where it was
                if not tracks[index].ahead and tracks[index].stops is not None:
                    tracks[index].finish = tracks[index].stops
                    search.finish(index)
            if not search.exited:
                _step(search, tracks, counts, sampling, vocab_size)
    finally:
        search.end()  # ended here, however the loop was left: out of its exit batch too
    return await _sample_on(engine, request, search, tracks, counts)


async def _read_ahead(
    engine: GreedySource,
    request: GenerationRequest,
    search: TreeSearch,
    tracks: dict[int, _BranchTrack],
    counts: _Counts,
) -> None:
    """Fetch a greedy chunk, in parallel, for every live branch that has read all its positions."""
    sampling = request.sampling
    count = min(CHUNK, sampling.max_tokens - search.step, search.params.forced_exit - search.step)
    needy = [index for index in search.live() if not tracks[index].ahead and tracks[index].stops is None]
    greedy = SamplingParams(temperature=0.0, max_tokens=count, stop=sampling.stop)
    chunks = await _together([engine.greedy_chunk(GenerationRequest(
        prompt_ids=[*request.prompt_ids, *search.branches[index].tokens], images=request.images, sampling=greedy,
        session=request.session), search.params.top_k) for index in needy])
    for index, fetched in zip(needy, chunks, strict=True):
        track = tracks[index]
        tokens = fetched.result.token_ids
        if index != 0 and not track.requested:
            counts.fork_prompt_tokens += fetched.result.prompt_tokens
            counts.fork_cached_tokens += fetched.cached_tokens
        track.requested = True
        counts.decoded_tokens += len(tokens)
        track.ahead.extend(_Position(ids, logprobs, v) for (ids, logprobs), v
                             in zip(fetched.tops, fetched.result.versions, strict=True))
        ran_out = fetched.result.finish_reason == "length" and len(tokens) == count
        track.stops = None if ran_out else fetched.result.finish_reason


def _step(
    search: TreeSearch, tracks: dict[int, _BranchTrack], counts: _Counts, sampling: SamplingParams, vocab_size: int
) -> None:
    """Feed one read-ahead position of every live branch to the search and carry out its forks and prunes."""
    positions = {index: tracks[index].ahead.popleft() for index in search.live()}
    probs = {index: [math.exp(value) for value in position.logprobs] for index, position in positions.items()}
    decision = search.advance(
        {index: (position.ids, probs[index]) for index, position in positions.items()},
        allowed={index: set(position.ids[: nucleus_size(probs[index], sampling.temperature, sampling.top_p,
                                                          vocab_size)]) for index, position in positions.items()},
    )
    counts.tree_tokens += len(positions) + len(decision.forks)
    counts.decoded_tokens += len(decision.forks)
    for child, parent, token in decision.forks:
        position, source = positions[parent], tracks[parent]
        tracks[child] = _BranchTrack(logprobs=[*source.logprobs, position.logprobs[position.ids.index(token)]],
                                   versions=[*source.versions, position.version])
    for index, position in positions.items():
        track = tracks[index]
        track.logprobs.append(position.logprobs[0])
        track.versions.append(position.version)
        if not track.ahead and track.stops is not None and index in search.branches:
            track.finish = track.stops
            if not search.branches[index].done:
                search.finish(index)
    for index in decision.pruned:
        del tracks[index]


async def _sample_on(
    engine: GreedySource, request: GenerationRequest, search: TreeSearch, tracks: dict[int, _BranchTrack],
    counts: _Counts,
) -> TreeResult:
    """Sample each surviving unfinished branch on from its tree tokens, in parallel, and put the tree together."""
    sampling = request.sampling
    eos = search.eos_ids
    going = [index for index, branch in search.branches.items() if not branch.done and tracks[index].finish is None]

    def rest(index: int) -> GenerationRequest:
        """The request that samples branch ``index`` on (the root with the request's seed, a fork with its own)."""
        tokens = search.branches[index].tokens
        seed = sampling.seed if sampling.seed is None or index == 0 else branch_seed(sampling.seed, index)
        return GenerationRequest(prompt_ids=[*request.prompt_ids, *tokens], images=request.images,
                                 session=request.session,
                                 sampling=sampling.model_copy(update={"max_tokens": sampling.max_tokens - len(tokens),
                                                                      "seed": seed}))

    sampled_on = await _together([engine.generate(rest(index)) for index in going])
    samples = dict(zip(going, sampled_on, strict=True))
    results = {}
    for index, branch in sorted(search.branches.items()):
        track, tree = tracks[index], len(branch.tokens)
        if index in samples:
            sampled = samples[index]
            counts.decoded_tokens += len(sampled.token_ids)
            tokens, finish = [*branch.tokens, *sampled.token_ids], sampled.finish_reason
            logprobs, versions = [*track.logprobs, *sampled.logprobs], [*track.versions, *sampled.versions]
        else:
            tokens, logprobs, versions = branch.tokens, track.logprobs, track.versions
            finish = track.finish or ("stop" if tokens and tokens[-1] in eos else "length")
        results[index] = GenerationResult(
            request_id=f"{request.request_id}-{index}", token_ids=tokens, logprobs=logprobs, versions=versions,
            finish_reason=finish, prompt_tokens=len(request.prompt_ids),
            tree_chosen=[True] * tree + [False] * (len(tokens) - tree))
    return TreeResult.grown(search, results, tree_tokens=counts.tree_tokens, decoded_tokens=counts.decoded_tokens,
                            fork_prompt_tokens=counts.fork_prompt_tokens, fork_cached_tokens=counts.fork_cached_tokens)
