"""What the torch engine's worker tracks per request and per weight update, and how it hands results
back to the event loop that awaits them."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from agentgym.inference.torch._futures import settle_future
from agentgym.inference.torch._tree_run import TreeRun
from agentgym.inference.types import FinishReason, GenerationRequest, GenerationResult


@dataclass(eq=False)
class TrackedRequest:
    """One request as the worker tracks it."""

    request: GenerationRequest
    generator: torch.Generator
    future: asyncio.Future[GenerationResult]
    loop: asyncio.AbstractEventLoop
    stop_window: int
    """How many trailing tokens to decode to see a stop string (0: no stop strings)."""
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    cancelled: bool = False
    resolved: bool = False
    stream: asyncio.Queue[tuple[int, float, int] | None] | None = None
    """Where a streamed request's tokens go as they are sampled, as (id, logprob, version), then ``None``
    once the request is settled (``None`` for a request awaited whole)."""
    tree: TreeRun | None = None
    """The tree this sequence is a branch of: it settles through the tree, never through its own future."""
    branch: int = 0
    """Its branch id in :attr:`tree`."""
    tree_chosen: list[bool] = field(default_factory=list)
    """Per token of a branch, whether the tree phase chose it (empty outside a tree)."""
    pruned: bool = False

    @property
    def dropped(self) -> bool:
        """Whether the sequence leaves the batch at the next step unsettled: its caller went away, or its
        branch was pruned."""
        return self.cancelled or self.pruned or (self.tree is not None and self.tree.cancelled)

    def publish(self) -> None:
        """Hand the last sampled token to the stream, if the request streams (from the worker thread)."""
        if self.stream is not None:
            self._post(self.stream, (self.token_ids[-1], self.logprobs[-1], self.versions[-1]))

    def context(self) -> list[int]:
        return self.request.prompt_ids + self.token_ids

    def resolve(self, finish_reason: FinishReason) -> None:
        self._settle(
            GenerationResult(
                request_id=self.request.request_id,
                token_ids=self.token_ids,
                logprobs=self.logprobs,
                versions=self.versions,
                finish_reason=finish_reason,
                prompt_tokens=len(self.request.prompt_ids),
                tree_chosen=self.tree_chosen,
            ),
            None,
        )

    def fail(self, error: BaseException) -> None:
        self._settle(None, error)

    def _settle(self, result: GenerationResult | None, error: BaseException | None) -> None:
        if not self.resolved:
            self.resolved = True
            if self.tree is not None:
                self.tree.settle_branch(self.branch, result, error)
                return
            settle_future(self.loop, self.future, result, error)
            # after the future: a stream that reads the end finds the future settled
            if self.stream is not None:
                self._post(self.stream, None)

    def _post(
        self, stream: asyncio.Queue[tuple[int, float, int] | None], item: tuple[int, float, int] | None
    ) -> None:
        try:
            self.loop.call_soon_threadsafe(stream.put_nowait, item)
        except RuntimeError:  # the caller's event loop is closed: nobody is reading any more
            pass


@dataclass(eq=False)
class WeightUpdate:
    """A weight update waiting for the end of the current step."""

    state: Mapping[str, torch.Tensor]
    version: int | None
    future: asyncio.Future[int]
    loop: asyncio.AbstractEventLoop

    def settle(self, version: int | None, error: BaseException | None = None) -> None:
        settle_future(self.loop, self.future, version, error)
