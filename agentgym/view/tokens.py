"""Token colouring: an episode's tokens as text, each coloured by the behaviour's logprob, the trainer's, or the
importance ratio ``exp(trainer - behaviour)`` between them, with the policy version that sampled each span.

A record holds token ids, not text: the ids are turned into text by the run's tokenizer, loaded from its local
folder with ``transformers.AutoTokenizer`` the first time a token view asks for it (never from a hub); where it
cannot be loaded the ids are shown instead. Colours are buckets (CSS classes), so the page needs no inline style.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.trajectory import Trajectory

MODES = ("behaviour", "trainer", "ratio")
TOKENS_SHOWN = 8000
"""Tokens on one page of a token view."""
PROBABILITY_EDGES = (0.9, 0.7, 0.5, 0.3, 0.1, 0.03, 0.01)
"""Bucket ``i`` of a logprob holds the probabilities from ``PROBABILITY_EDGES[i]`` up (bucket 7: below 0.01)."""
LOG_RATIO_EDGES = (-1.0, -0.3, -0.1, -0.02, 0.02, 0.1, 0.3, 1.0)
"""Bucket ``i`` of a ratio holds the log ratios below ``LOG_RATIO_EDGES[i]`` (bucket 4: within ±0.02, about 1)."""


def probability_bucket(logprob: float) -> int:
    p = math.exp(min(0.0, logprob))
    return next((i for i, edge in enumerate(PROBABILITY_EDGES) if p >= edge), len(PROBABILITY_EDGES))


def ratio_bucket(log_ratio: float) -> int:
    return next((i for i, edge in enumerate(LOG_RATIO_EDGES) if log_ratio < edge), len(LOG_RATIO_EDGES))


@dataclass
class Token:
    """One token as shown: its text, and for an agent token its logprobs and colour buckets."""

    id: int
    text: str
    agent: bool
    behaviour: float | None = None
    trainer: float | None = None
    version: int = -1

    @property
    def ratio(self) -> float | None:
        if self.behaviour is None or self.trainer is None:
            return None
        return math.exp(max(-50.0, min(50.0, self.trainer - self.behaviour)))

    @property
    def classes(self) -> str:
        """``tok`` and the colour bucket of each mode (``b3 t5 r4``), or ``ctx`` for a token the agent did not write."""
        if not self.agent or self.behaviour is None:
            return "ctx"
        names = ["tok", f"b{probability_bucket(self.behaviour)}"]
        if self.trainer is not None:
            names += [f"t{probability_bucket(self.trainer)}", f"r{ratio_bucket(self.trainer - self.behaviour)}"]
        return " ".join(names)

    @property
    def title(self) -> str:
        """What hovering the token says."""
        if not self.agent or self.behaviour is None:
            return f"id {self.id}"
        parts = [f"id {self.id}", f"behaviour logprob {self.behaviour:.4f} (p {math.exp(self.behaviour):.3f})"]
        if self.trainer is not None:
            parts += [f"trainer logprob {self.trainer:.4f}", f"ratio {self.ratio:.4f}"]
        if self.version >= 0:
            parts.append(f"version {self.version}")
        return " · ".join(parts)


FOLD_OVER = 48
"""Context spans longer than this many tokens are folded, all but their last :data:`FOLD_KEEP` tokens."""
FOLD_KEEP = 12


@dataclass
class Span:
    """Consecutive tokens: the agent's of one policy version, or the context between them (``version`` -1); a long
    context span keeps its first tokens ``folded`` (shown on request) and the rest in ``tokens``."""

    version: int
    agent: bool
    tokens: list[Token] = field(default_factory=list)
    folded: list[Token] = field(default_factory=list)

    def fold(self) -> None:
        if not self.agent and len(self.tokens) > FOLD_OVER:
            self.folded, self.tokens = self.tokens[:-FOLD_KEEP], self.tokens[-FOLD_KEEP:]


@dataclass
class TokenView:
    """The tokens of one page of an episode, in spans, with what the page says about them."""

    spans: list[Span]
    total: int
    start: int
    stop: int
    trained: bool
    """The record has the trainer's logprobs (a trained rollout)."""
    texts: bool
    """The tokenizer gave the tokens' text (else the ids are shown)."""
    tokenizer_note: str
    agent_tokens: int
    versions: dict[int, int]
    """Agent tokens per policy version, over the whole episode."""
    mean_abs_log_ratio: float | None
    max_ratio: float | None
    min_ratio: float | None
    off_tokens: int
    """Agent tokens whose ratio is off 1 by more than 10% (log ratio beyond ±0.1)."""


class Tokenizers:
    """Tokenizers loaded from local folders the first time each is asked for; a folder that fails is not tried
    again."""

    def __init__(self) -> None:
        self._loaded: dict[Path, tuple[Any, str]] = {}
        self._lock = threading.Lock()

    def get(self, folder: Path | None) -> tuple[Any, str]:
        """The tokenizer of ``folder`` (None where it cannot be loaded) and a line that says which, or why not."""
        if folder is None:
            return None, "no tokenizer found for this run (token ids shown)"
        with self._lock:
            if folder not in self._loaded:
                self._loaded[folder] = _load(folder)
            return self._loaded[folder]


def _load(folder: Path) -> tuple[Any, str]:
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure to load leaves the ids shown, with the reason
        return None, f"the tokenizer in {folder} could not be loaded ({type(exc).__name__}: {exc}); token ids shown"
    return tokenizer, f"tokenizer: {folder}"


def token_texts(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """Each token's text (``[id]`` where the tokenizer has none, or there is no tokenizer)."""
    if tokenizer is None:
        return [f"[{i}]" for i in ids]
    try:
        pieces = tokenizer.convert_ids_to_tokens(list(ids))
        return [tokenizer.convert_tokens_to_string([piece]) if piece is not None else f"[{i}]"
                for i, piece in zip(ids, pieces, strict=True)]
    except Exception:  # noqa: BLE001 - a tokenizer that cannot take these ids leaves them shown as ids
        return [f"[{i}]" for i in ids]


def token_view(trajectory: Trajectory, trainer_logprobs: Sequence[float], tokenizer: Any, note: str, *,
               start: int = 0, shown: int = TOKENS_SHOWN) -> TokenView:
    """The tokens ``start`` to ``start + shown`` of ``trajectory`` in spans of one version each."""
    ids, mask, behaviour, versions = trajectory.token_ids, trajectory.loss_mask, trajectory.logprobs, trajectory.versions
    trained = len(trainer_logprobs) == len(ids) and bool(ids)
    start = max(0, min(start, max(0, len(ids) - 1)))
    stop = min(len(ids), start + shown)
    texts = token_texts(tokenizer, ids[start:stop])
    spans: list[Span] = []
    for i, text in zip(range(start, stop), texts, strict=True):
        agent = bool(mask[i])
        token = Token(ids[i], text, agent, behaviour[i] if agent else None,
                      trainer_logprobs[i] if agent and trained else None, versions[i] if agent else -1)
        version = token.version if agent else -1
        if not spans or spans[-1].version != version or spans[-1].agent != agent:
            spans.append(Span(version, agent))
        spans[-1].tokens.append(token)
    for span in spans:
        span.fold()
    counts: dict[int, int] = {}
    logs: list[float] = []
    for i, in_loss in enumerate(mask):
        if in_loss:
            counts[versions[i]] = counts.get(versions[i], 0) + 1
            if trained:
                logs.append(trainer_logprobs[i] - behaviour[i])
    return TokenView(
        spans=spans, total=len(ids), start=start, stop=stop, trained=trained, texts=tokenizer is not None,
        tokenizer_note=note, agent_tokens=sum(mask), versions=dict(sorted(counts.items())),
        mean_abs_log_ratio=sum(abs(x) for x in logs) / len(logs) if logs else None,
        max_ratio=math.exp(min(50.0, max(logs))) if logs else None,
        min_ratio=math.exp(max(-50.0, min(logs))) if logs else None,
        off_tokens=sum(abs(x) > 0.1 for x in logs))
