"""LATR's tree phase for one prompt, written once for every engine (Lookahead Tree-Based Rollouts, Oct 2025).

A prompt's tree starts as one branch, the root, decoded greedily. At each step every live branch looks at the
top-k tokens of its untempered next-token distribution: the top token stays with the branch, and a candidate
``i >= 1`` starts a new branch when ``p_i > tau_abs`` and ``p_0 - p_i < tau_rel`` (:func:`branch_tokens`), as
long as the tree has fewer than ``width`` branches. A child is compared with its parent over the tokens both
generated since the fork, at each lookahead age (20, 30 and 50 tokens by default): when they stayed close
(:mod:`agentgym.inference.similarity`: edit distance per token under its threshold by default; suffix match or
ROUGE-L as options), the child and its descendants are pruned. Spans that hold an end token, and forks at a math
token, are never pruned. The tree phase ends when the tree is full (or finished) and every branch is older than the
longest lookahead, or at the forced step; the engine then continues each branch by ordinary sampling.

:class:`TreeSearch` holds that state machine and decides; an engine feeds it each step's top-k and carries its
decisions out (the torch engine copies KV rows for a fork and drops rows it prunes).

Departures from LATR's code (``model/generation.py``, ``model/sample_filter.py``): by default the exit is decided
per prompt, not once for the whole batch, so a prompt's branches go on sampling while others still branch;
``exit_scope: batch`` decides it for the trees an engine grows together (an engine with continuous batching has
no batch-wide step: a tree that arrives while a batch waits joins it); a tree with fewer than ``width`` branches is not
filled with copies of its first branch: the caller adds fresh samples. A candidate outside the sampling
nucleus never branches (the policy could not have sampled it). LATR's math exemption filters its list of
comparisons but zips the result with the unfiltered list of branch ids, so its decisions can land on the wrong
branches; here each decision is taken on its own branch.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentgym.inference.similarity import look_alike

LATR_WIDTH_SCHEDULE = {0: 1.0, 10: 0.75, 20: 0.5, 80: 0.25, 200: 0.0}
"""LATR's η over training steps on Countdown: the share of each group grown as a tree."""


class LatrParams(BaseModel):
    """LATR's settings; the defaults are the paper's (``scripts/grpo-kt-countdown.sh``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    top_k: int = Field(2, ge=2)
    """Candidates looked at per step (``max_n_branch_per_token``): the top one and ``top_k - 1`` others."""
    tau_abs: float = Field(0.25, gt=0.0, lt=1.0)
    """A candidate branches only above this (untempered) probability."""
    tau_rel: float = Field(0.15, gt=0.0, le=1.0)
    """... and only when the top token is less than this much more likely."""
    lookahead: tuple[int, ...] = (20, 30, 50)
    """Ages (tokens since the fork) at which a child is compared with its parent."""
    prune_threshold: float | None = Field(0.4, gt=0.0, le=1.0)
    """A child whose edit distance to its parent, per token since the fork, is below this is pruned (``None``:
    not measured; LATR's ``rollout_filter_edit_dist_thres``)."""
    suffix_match_threshold: float | None = Field(None, ge=0.0, lt=1.0)
    """... or whose span ends as one of its parent's does, over more than this share of it (LATR's math runs: 0.2)."""
    rouge_l_threshold: float | None = Field(None, ge=0.0, lt=1.0)
    """... or whose ROUGE-L with its parent's span is above this (LATR's math runs: 0.5)."""
    keep_math_symbols: bool = True
    """A fork at a math token (its text, or its parent's there, only digits and ``+-*/\\<>=()[]{}_^&%$``) is
    never pruned: ``21+5`` and ``21+6`` are close in edits but not in value (LATR's ``keep_math_symbols``)."""
    exit_fill: float = Field(0.98, gt=0.0, le=1.0)
    """The tree counts as full at ``round(width * fill)`` branches (``return_nb_thres_init``) ..."""
    exit_fill_decay: float = Field(0.05, ge=0.0, le=1.0)
    """... less this share of ``exit_fill`` per ``max_tokens`` generated (``return_nb_thres_decay``)."""
    forced_exit: int = Field(512, ge=1)
    """The tree phase ends at this step whatever its state (``force_return_step``)."""
    exit_scope: Literal["prompt", "batch"] = "prompt"
    """``prompt``: each tree's phase ends when it is full and old; ``batch`` (LATR's code): a ready tree goes on
    branching until every tree the engine grows with it is ready, and they end together (:class:`ExitBatch`)."""
    width_schedule: dict[int, float] = Field(default_factory=lambda: dict(LATR_WIDTH_SCHEDULE))
    """η by training step: from each step on, ``round(group_size * η)`` of a group grow as one tree."""

    @field_validator("lookahead")
    @classmethod
    def _positive_ages(cls, ages: tuple[int, ...]) -> tuple[int, ...]:
        if not ages or min(ages) < 1:
            raise ValueError("lookahead needs at least one age, each at least 1 token")
        return tuple(sorted(set(ages)))

    @field_validator("width_schedule")
    @classmethod
    def _schedule(cls, schedule: dict[int, float]) -> dict[int, float]:
        if 0 not in schedule:
            raise ValueError("width_schedule must give η at step 0")
        if any(step < 0 for step in schedule) or any(not 0.0 <= eta <= 1.0 for eta in schedule.values()):
            raise ValueError("width_schedule maps steps >= 0 to η in [0, 1]")
        return dict(sorted(schedule.items()))

    def eta(self, step: int) -> float:
        """η at training ``step``: the value of the latest schedule entry at or before it."""
        return next(eta for start, eta in reversed(self.width_schedule.items()) if start <= step)

    def width(self, group_size: int, step: int) -> int:
        """How many of a group of ``group_size`` grow as a tree at training ``step`` (``round(G * η)``)."""
        return round(group_size * self.eta(step))


def branch_tokens(top_ids: Sequence[int], top_probs: Sequence[float], params: LatrParams) -> list[int]:
    """The candidates (after the top one) that start a branch: ``p_i > tau_abs`` and ``p_0 - p_i < tau_rel``,
    in rank order. ``top_probs`` are untempered and sorted, largest first."""
    first = top_probs[0]
    return [token for token, p in zip(top_ids[1:], top_probs[1:], strict=True)
            if p > params.tau_abs and first - p < params.tau_rel]


MATH_SYMBOLS = frozenset("+-*/\\<>=()[]{}_^&%$0123456789")
"""LATR's ``math_core_symbols``: a token made only of these (once stripped) is a math token."""


@functools.lru_cache(maxsize=4)
def math_token_ids(tokenizer: Any) -> frozenset[int]:
    """The ids of ``tokenizer``'s math tokens: their text, stripped, is not empty and is only :data:`MATH_SYMBOLS`
    (LATR tests ``text in math_core_symbols``, a substring test that also exempts whitespace and misses ``21``);
    computed once per tokenizer."""
    texts = tokenizer.batch_decode([[index] for index in range(len(tokenizer))])
    return frozenset(index for index, text in enumerate(texts) if text.strip() and set(text.strip()) <= MATH_SYMBOLS)


def branch_seed(seed: int, branch: int) -> int:
    """The seed a forked branch samples with once the tree phase ends, drawn from its root's seed and its id
    (the root keeps the request's own), so a tree is the same for the same seed on one engine."""
    return hash((seed, branch)) & (2**63 - 1)


class ExitBatch:
    """The trees an engine grows together, for ``exit_scope: batch``: a tree that joins goes into the current batch,
    or a new one once the current batch's trees have been told to end. A batch ends when every tree still in it is
    ready (full, with every branch past the longest lookahead); a tree that ends otherwise (forced, finished,
    stopped by the engine) leaves it. Thread-safe: a tree may join from the caller's thread while the engine's
    worker steps the others."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[int, dict[int, bool]] = {0: {}}
        """Per batch, whether each tree in it is ready, by the tree's ``id``."""
        self._fired: set[int] = set()
        self._current = 0

    def join(self, tree: TreeSearch) -> int:
        """Put ``tree`` in the current batch; the batch's number."""
        with self._lock:
            if self._current in self._fired:
                self._current += 1
                self._ready[self._current] = {}
            self._ready[self._current][id(tree)] = False
            return self._current

    def ready(self, tree: TreeSearch, batch: int, ready: bool) -> bool:
        """Record whether ``tree`` of ``batch`` is ready; whether the batch ends (now or before)."""
        with self._lock:
            members = self._ready[batch]
            members[id(tree)] = ready
            if all(members.values()):
                self._fired.add(batch)
            return batch in self._fired

    def leave(self, tree: TreeSearch, batch: int) -> None:
        """Take ``tree`` out of ``batch`` (its phase ended); a batch that has ended and emptied is forgotten."""
        with self._lock:
            members = self._ready.get(batch, {})
            members.pop(id(tree), None)
            if not members and batch != self._current:
                self._ready.pop(batch, None)
                self._fired.discard(batch)


@dataclass
class Branch:
    """One branch of a tree: its parent, the step it was born at and its whole response so far (the prefix it
    shares with its parent included)."""

    parent: int | None
    birth: int
    """The response position of its first own token (0 for the root)."""
    tokens: list[int]
    children: list[int] = field(default_factory=list)
    done: bool = False


@dataclass(frozen=True)
class Decision:
    """What one step of :meth:`TreeSearch.advance` decided."""

    forks: list[tuple[int, int, int]]
    """New branches as ``(child, parent, first token)``; the child shares the parent's tokens before it."""
    pruned: list[int]
    """Branches removed this step (a pruned child's descendants included)."""
    suppressed: int
    """Candidates that passed the rule but found the tree full."""


class TreeSearch:
    """LATR's tree phase for one prompt (see the module doc). Branch ids are stable: 0 is the root, each fork
    takes the next id, and a pruned id is never reused."""

    def __init__(self, params: LatrParams, width: int, eos_ids: Collection[int], max_tokens: int,
                 math_ids: Collection[int] = frozenset(), batch: ExitBatch | None = None) -> None:
        """``math_ids``: the tokenizer's :func:`math_token_ids`; ``batch``: the engine's trees, which this one joins
        under ``exit_scope: batch`` (without it, a tree is its own batch)."""
        if width < 1:
            raise ValueError(f"a tree needs a width of at least 1, got {width}")
        self.params = params
        self.width = width
        self.eos_ids = frozenset(eos_ids)
        self.math_ids = frozenset(math_ids) if params.keep_math_symbols else frozenset()
        """Tokens at which a fork is never pruned (:func:`math_token_ids`; none unless ``keep_math_symbols``)."""
        self.max_tokens = max_tokens
        self.branches: dict[int, Branch] = {0: Branch(parent=None, birth=0, tokens=[])}
        self.step = 0
        """Tokens every branch has (they advance in lockstep)."""
        self.exited = False
        self.made = 0
        self.pruned = 0
        self.suppressed = 0
        self._next_id = 1
        self._batch = batch if params.exit_scope == "batch" else None
        self._batch_number = self._batch.join(self) if self._batch is not None else 0

    def live(self) -> list[int]:
        """The branches still generating, in id order."""
        return [index for index, branch in self.branches.items() if not branch.done]

    def advance(self, tops: Mapping[int, tuple[Sequence[int], Sequence[float]]],
                allowed: Mapping[int, Collection[int]] | None = None) -> Decision:
        """One step: ``tops[b]`` is the top-k token ids and untempered probabilities of each live branch ``b``
        (largest first). Each branch takes its top token; candidates that pass the rule fork, candidate rank
        by rank and branch by branch, while the tree has room; look-alike children are pruned; the exit is
        checked. ``allowed[b]``, when given, holds the tokens branch ``b`` could have sampled (its nucleus):
        no other candidate forks."""
        if self.exited:
            raise RuntimeError("the tree phase has ended; sample the branches on")
        live = self.live()
        if set(tops) != set(live):
            raise ValueError(f"tops must cover exactly the live branches {live}, got {sorted(tops)}")
        passing = {index: set(branch_tokens(*tops[index], self.params)) for index in live}
        proposals = [(index, tops[index][0][rank]) for rank in range(1, self.params.top_k) for index in live
                     if rank < len(tops[index][0]) and tops[index][0][rank] in passing[index]
                     and (allowed is None or tops[index][0][rank] in allowed[index])]
        room = self.width - len(self.branches)
        kept, suppressed = proposals[: max(room, 0)], max(len(proposals) - max(room, 0), 0)
        forks = []
        for parent, token in kept:
            child = self._next_id
            self._next_id += 1
            self.branches[child] = Branch(parent=parent, birth=self.step,
                                          tokens=[*self.branches[parent].tokens, token])
            self.branches[parent].children.append(child)
            forks.append((child, parent, token))
        for index in live:
            self.branches[index].tokens.append(tops[index][0][0])
        self.step += 1
        for index, branch in self.branches.items():
            if not branch.done and (branch.tokens[-1] in self.eos_ids or len(branch.tokens) >= self.max_tokens):
                branch.done = True
        pruned = self._prune()
        self.made += len(forks)
        self.suppressed += suppressed
        if self._over():
            self._exit()
        return Decision(forks=forks, pruned=pruned, suppressed=suppressed)

    def end(self) -> None:
        """End the tree phase now (the engine can no longer step the branches together, or the caller left)."""
        self._exit()

    def finish(self, index: int) -> None:
        """Mark a branch done before its end token (the engine stopped it: a stop string, the context)."""
        self.branches[index].done = True
        if self._over():
            self._exit()

    def _prune(self) -> list[int]:
        """Remove children that stayed close to their parent at a lookahead age (:func:`look_alike`), unless they
        forked at a math token."""
        doomed: list[int] = []
        for index, branch in self.branches.items():
            age = self.step - branch.birth
            if branch.parent is None or age not in self.params.lookahead:
                continue
            parent = self.branches[branch.parent]
            if branch.done or parent.done:
                continue  # a span that ends is never pruned (LATR pads an ended row with its end token)
            mine, theirs = branch.tokens[branch.birth:], parent.tokens[branch.birth:]
            if mine[0] in self.math_ids or theirs[0] in self.math_ids:
                continue
            if look_alike(mine, theirs, edit=self.params.prune_threshold, suffix=self.params.suffix_match_threshold,
                          rouge=self.params.rouge_l_threshold):
                doomed.append(index)
        removed: list[int] = []
        for index in doomed:
            if index in self.branches:
                removed += self._remove(index)
        self.pruned += len(removed)
        return removed

    def _remove(self, index: int) -> list[int]:
        branch = self.branches.pop(index)
        if branch.parent is not None and branch.parent in self.branches:
            self.branches[branch.parent].children.remove(index)
        removed = [index]
        for child in branch.children:
            removed += self._remove(child)
        return removed

    def _over(self) -> bool:
        """Whether the tree phase ends now: forced or finished, or ready (full, with every branch older than the
        longest lookahead) and, under ``exit_scope: batch``, its batch ready too."""
        if self.step >= self.params.forced_exit or not self.live():
            return True
        fill = self.params.exit_fill - self.params.exit_fill_decay * self.step / self.max_tokens
        ready = len(self.branches) >= round(self.width * fill) and all(
            self.step - branch.birth > max(self.params.lookahead) for branch in self.branches.values())
        return ready if self._batch is None else self._batch.ready(self, self._batch_number, ready)

    def _exit(self) -> None:
        if not self.exited and self._batch is not None:
            self._batch.leave(self, self._batch_number)
        self.exited = True
