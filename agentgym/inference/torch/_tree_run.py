"""One LATR tree as the torch engine's worker tracks it: the search that decides (:mod:`agentgym.inference.tree`),
the results of its branches as they settle, and the future its caller awaits."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agentgym.inference.torch._futures import settle_future
from agentgym.inference.tree import TreeSearch
from agentgym.inference.types import GenerationResult, TreeResult


@dataclass(eq=False)
class TreeRun:
    """A tree in flight. Its branches are ordinary rows of the batch that share this object; the tree settles
    once every branch that was not pruned has settled."""

    search: TreeSearch
    seed: int
    """The root's seed; each child's generator is seeded from it and the child's id."""
    future: asyncio.Future[TreeResult]
    loop: asyncio.AbstractEventLoop
    results: dict[int, GenerationResult] = field(default_factory=dict)
    tree_tokens: int = 0
    decoded_tokens: int = 0
    cancelled: bool = False
    """Set by the caller that stopped waiting: every branch leaves at the next step."""
    settled: bool = False

    @property
    def branching(self) -> bool:
        """Whether the tree phase goes on (its branches are chosen by the search, not sampled)."""
        return not self.search.exited

    def settle_branch(self, branch: int, result: GenerationResult | None, error: BaseException | None) -> None:
        """Record how a branch ended; a failed branch fails the whole tree (its other branches leave)."""
        if self.settled:
            return
        if error is not None:
            self.cancelled = self.settled = True
            settle_future(self.loop, self.future, None, error)
            return
        assert result is not None
        self.results[branch] = result
        self.check_done()

    def check_done(self) -> None:
        """Settle the tree once every surviving branch has a result (after a settle or a prune)."""
        if self.settled or not set(self.search.branches) <= set(self.results):
            return
        self.settled = True
        settle_future(self.loop, self.future, TreeResult.grown(
            self.search, self.results, tree_tokens=self.tree_tokens, decoded_tokens=self.decoded_tokens), None)

