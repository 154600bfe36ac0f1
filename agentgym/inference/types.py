"""What passes between the rollout and an inference engine: requests, results and the engine protocol.

Engines work on token ids (token-in, token-out): the rollout renders the conversation with the
model's chat template once, appends each observation's ids, and never re-tokenises history. Every
generated token comes back with its behaviour log-probability (see :mod:`agentgym.inference.sampling`
for exactly which distribution) and the policy version that sampled it.

An engine that can hand out tokens as they are sampled is also a :class:`StreamingEngine`;
:func:`stream_generation` streams from any engine, as one chunk at the end from one that cannot.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentgym.inference.tree import LatrParams, TreeSearch
from agentgym.messages import ImagePart, ToolCall

FinishReason = Literal["stop", "length", "abort"]
_request_ids = itertools.count()


class SamplingParams(BaseModel):
    """How to sample one response."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(1.0, ge=0.0)
    """Softmax temperature; 0 means greedy (the logprob is then that of the argmax under temperature 1)."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling: keep the smallest set of tokens whose probability reaches ``top_p``."""
    max_tokens: int = Field(256, ge=1)
    """The most tokens to generate."""
    stop: tuple[str, ...] = ()
    """Stop once the decoded response ends with one of these strings (the end-of-turn token always stops)."""
    seed: int | None = None
    """Seed of this request's own random stream: the same seeded request samples the same tokens,
    alone or batched with others."""


class GenerationRequest(BaseModel):
    """A prompt as token ids and how to continue it."""

    model_config = ConfigDict(frozen=True)

    prompt_ids: list[int] = Field(min_length=1)
    images: list[ImagePart] = []
    """The conversation's images, in the order their placeholders stand in ``prompt_ids`` (the chat template
    writes one per image part). An engine serving a vision-language model passes them to it; an engine of a
    text-only model leaves them out, and the model reads what the template wrote in their place."""
    sampling: SamplingParams = SamplingParams()
    request_id: str = Field(default_factory=lambda: f"req-{next(_request_ids)}")
    session: str | None = None
    """The conversation this request continues (one episode's turns share it): an engine with replicas sends
    a session's requests to one replica, whose prefix cache holds the conversation."""


class GenerationResult(BaseModel):
    """The tokens generated for one request, aligned one entry per token."""

    request_id: str
    token_ids: list[int]
    logprobs: list[float]
    """Behaviour log-probability of each token under the distribution it was sampled from."""
    versions: list[int]
    """The policy version (weights) that sampled each token; it changes mid-response when a weight
    update interrupts the request and it continues under the new weights."""
    finish_reason: FinishReason
    """``stop``: end-of-turn token or a stop string; ``length``: ``max_tokens`` reached; ``abort``: the
    engine was shut down or the request cancelled."""
    prompt_tokens: int
    tree_chosen: list[bool] = Field(default_factory=list)
    """Which tokens a tree phase chose instead of sampling (a branch's top token, or the candidate it forked
    on), one entry per token; empty when every token was sampled. Their ``logprobs`` are still those of the
    sampling distribution on the torch engine, so an off-policy correction sees both what was chosen and how likely
    it was; the vLLM engine records those of the untempered distribution (``softmax(logits)``), which are the same
    at temperature 1 without a nucleus."""

    @model_validator(mode="after")
    def _aligned(self) -> GenerationResult:
        if not len(self.token_ids) == len(self.logprobs) == len(self.versions):
            raise ValueError("token_ids, logprobs and versions must have the same length")
        if self.tree_chosen and len(self.tree_chosen) != len(self.token_ids):
            raise ValueError("tree_chosen must be empty or have one entry per token")
        return self


class TreeBranch(BaseModel):
    """One branch of a tree rollout: its whole response (the prefix it shares with its parent included) and
    where it came from."""

    result: GenerationResult
    branch: int
    """Its id in the tree: 0 for the root, then in the order the forks were made."""
    parent: int | None
    fork_at: int
    """The response position of its first own token (0 for the root)."""


class TreeResult(BaseModel):
    """What a tree rollout of one prompt produced (:meth:`TreeEngine.generate_tree`)."""

    branches: list[TreeBranch]
    """The surviving branches, by id; at most the tree's width."""
    made: int
    """Forks made (pruned ones included)."""
    pruned: int
    """Branches pruned as look-alikes of their parent."""
    suppressed: int
    """Candidates that passed the branch rule but found the tree full."""
    tree_tokens: int
    """Tokens decoded during the tree phase, over every branch (pruned ones included)."""
    decoded_tokens: int
    """Tokens decoded for this prompt in all, over every branch (pruned ones included)."""
    fork_prompt_tokens: int = 0
    """Prompt tokens of each forked branch's first greedy request, where an engine sends a fork as a new request on
    the prefix it shares with its parent (vLLM); 0 where a fork copies its parent's KV (torch)."""
    fork_cached_tokens: int = 0
    """... of which the engine's prefix cache served: the forks' hit rate is ``fork_cached_tokens /
    fork_prompt_tokens``."""

    @classmethod
    def grown(cls, search: TreeSearch, results: Mapping[int, GenerationResult], *, tree_tokens: int,
              decoded_tokens: int, fork_prompt_tokens: int = 0, fork_cached_tokens: int = 0) -> TreeResult:
        """The tree ``search`` grew, with ``results`` holding the whole response of each surviving branch by id."""
        branches = [TreeBranch(result=results[index], branch=index, parent=branch.parent, fork_at=branch.birth)
                    for index, branch in sorted(search.branches.items())]
        return cls(branches=branches, made=search.made, pruned=search.pruned, suppressed=search.suppressed,
                   tree_tokens=tree_tokens, decoded_tokens=decoded_tokens, fork_prompt_tokens=fork_prompt_tokens,
                   fork_cached_tokens=fork_cached_tokens)


class GenerationChunk(BaseModel):
    """The tokens of one streamed response sampled since its previous chunk (see :class:`StreamingEngine`);
    the chunks of a response, concatenated, hold the token ids, logprobs and versions of its result."""

    request_id: str
    token_ids: list[int]
    logprobs: list[float]
    versions: list[int]
    finish_reason: FinishReason | None = None
    """Set on the last chunk only, as :attr:`GenerationResult.finish_reason`."""
    prompt_tokens: int
    tree_chosen: list[bool] = Field(default_factory=list)
    """As :attr:`GenerationResult.tree_chosen`, for this chunk's tokens (empty when every one was sampled)."""

    @classmethod
    def of(cls, result: GenerationResult) -> GenerationChunk:
        """A whole result as the one chunk of a response that was not streamed."""
        return cls(**result.model_dump())


class EngineStats(BaseModel):
    """Counters an engine keeps since it started (or since :meth:`InferenceEngine.reset_stats`)."""

    busy_seconds: float = 0.0
    """Wall time during which at least one request was being computed."""
    wall_seconds: float = 0.0
    requests: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    """Prompt tokens whose KV came from the prefix cache instead of a prefill."""
    generated_tokens: int = 0
    weight_updates: int = 0
    interrupted: int = 0
    """Requests that were in flight during a weight update and continued under the new weights."""

    @property
    def busy_fraction(self) -> float:
        return self.busy_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0


@runtime_checkable
class InferenceEngine(Protocol):
    """An engine that continues token-id prompts; any number of ``generate`` calls may be in flight.

    Cancelling the task that awaits ``generate`` drops the request and frees what it held.
    """

    name: str

    @property
    def version(self) -> int:
        """The policy version of the current weights; 0 for the weights the engine was built with."""
        ...

    @property
    def tokenizer(self) -> Any:
        """The Hugging Face tokenizer that defines the ids (and carries the chat template)."""
        ...

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Generate one response to ``request``."""
        ...

    async def update_weights(
        self, weights: Mapping[str, Any] | str | Path, *, version: int | None = None
    ) -> int:
        """Load new weights (a state dict or a checkpoint folder) without restarting; requests in
        flight are interrupted and continue under them. Returns the new version (``version`` or +1)."""
        ...

    def stats(self) -> EngineStats:
        """Counters since start or the last :meth:`reset_stats`."""
        ...

    def reset_stats(self) -> None:
        """Start counting afresh (for measuring one phase)."""
        ...

    async def close(self) -> None:
        """Stop, aborting requests in flight; safe to call twice."""
        ...


@runtime_checkable
class StreamingEngine(InferenceEngine, Protocol):
    """An engine that can also hand out a response's tokens as they are sampled (the torch engine)."""

    def stream(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        """Generate one response to ``request``, yielding its tokens in chunks as they are sampled; the last
        chunk carries the finish reason. Leaving the iteration early (``break``, ``aclose()``, or cancelling
        the task iterating) drops the request like cancelling ``generate``; a failure raises from it."""
        ...


@runtime_checkable
class TreeEngine(InferenceEngine, Protocol):
    """An engine that can grow LATR trees (:mod:`agentgym.inference.tree`): the torch engine forks a row of its
    batch by copying its KV; the vLLM engine sends a fork as a new request on the shared prefix."""

    async def generate_tree(self, request: GenerationRequest, params: LatrParams, width: int) -> TreeResult:
        """Grow a tree of at most ``width`` branches from ``request``'s prompt (greedy, branching and pruning by
        ``params``), then sample each branch on with ``request.sampling``."""
        ...


@runtime_checkable
class SleepingEngine(InferenceEngine, Protocol):
    """An engine that can hand its device to a colocated trainer between steps (torch, vLLM and their Ray
    replicas): what a trainer drives."""

    async def sleep(self) -> None:
        """Free the device (weights and KV cache leave it; requests in flight wait) until :meth:`wake_up`."""
        ...

    async def wake_up(self) -> None:
        """Take the device back and go on generating; requests interrupted by :meth:`sleep` continue."""
        ...


async def stream_generation(
    engine: InferenceEngine, request: GenerationRequest
) -> AsyncGenerator[GenerationChunk, None]:
    """``request``'s tokens as ``engine`` samples them: through :meth:`StreamingEngine.stream` where the engine
    has it, else one chunk holding the whole result once ``generate`` returns."""
    if isinstance(engine, StreamingEngine):
        async with contextlib.aclosing(engine.stream(request)) as chunks:
            async for chunk in chunks:
                yield chunk
    else:
        yield GenerationChunk.of(await engine.generate(request))


class ChatResult(BaseModel):
    """An assistant reply from a chat endpoint."""

    content: str
    """The assistant's text, without the tool calls."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@runtime_checkable
class ChatEngine(Protocol):
    """An engine that answers whole conversations (an OpenAI-compatible endpoint); for evaluation,
    where token ids are not available."""

    name: str

    async def chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], sampling: SamplingParams
    ) -> ChatResult:
        """One assistant reply to OpenAI-format ``messages`` with OpenAI-format ``tools``."""
        ...

    async def close(self) -> None:
        """Release the connection; safe to call twice."""
        ...
