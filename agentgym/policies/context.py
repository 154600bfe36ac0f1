"""Context policies: what an engine-backed policy does when an episode's conversation outgrows the context.

Each observation may be cut to a per-turn budget (``observation_tokens``). When the whole prompt passes the total
budget, the oldest turns are summarised (each observation down to its first line and how much was left out) or
dropped (the agent's message and what answered it), never the system prompt or the task. A compacted conversation
is rendered afresh as a new token segment, so every trained token keeps the exact context it was sampled under.
An episode that still does not fit ends as ``overflow`` says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Literal

from pydantic import Field

from agentgym.config import Config
from agentgym.messages import Message, TextPart

Overflow = Literal["truncation", "failure", "penalty"]


class ContextPolicy(Config):
    """How a conversation is kept within the model's context (``context:`` of a run, or of one env entry)."""

    strategy: Literal["none", "summarise", "drop"] = "none"
    """Past ``budget``: ``summarise`` the oldest observations, then drop the oldest turns if that is not enough;
    ``drop`` the oldest turns at once; ``none``: keep everything until the context is full."""
    budget: int | None = Field(None, ge=16)
    """Prompt tokens that start compaction; default: the context less one response's ``sampling.max_tokens``."""
    compact_to: float = Field(0.75, gt=0, le=1)
    """A compaction shortens the prompt to this fraction of ``budget``, so that turns pass before the next one
    (each compaction starts a segment, a row the trainer computes in full)."""
    observation_tokens: int | None = Field(None, ge=8)
    """Per turn: an observation longer than this many tokens keeps its head and says how much was cut (the task,
    the first observation, is never cut)."""
    overflow: Overflow = "truncation"
    """An episode whose next prompt leaves no room for a response: ``truncation`` (status ``truncated``, reward so
    far), ``failure`` (status ``ok``, not a success, reward 0) or ``penalty`` (as failure, reward ``penalty``)."""
    penalty: float = -1.0
    """The reward of an episode that overflows under ``overflow: penalty``."""

    def cut(self, observation: list[Message], count: Callable[[str], int],
            head: Callable[[str, int], str]) -> list[Message]:
        """``observation`` with each message's text cut to ``observation_tokens`` (``count`` measures text in
        tokens; ``head`` keeps a text's first tokens)."""
        if self.observation_tokens is None:
            return observation
        return [_cut_message(m, self.observation_tokens, count, head) for m in observation]

    def compactions(self, history: list[Message]) -> Iterator[list[Message]]:
        """Ever shorter versions of ``history`` (system prompt and task first, then turns each opened by an
        assistant message), one turn compacted more at each; the newest turn is never touched."""
        if self.strategy == "none":
            return
        head, turns = _turns(history)
        if self.strategy == "summarise":
            for index in range(len(turns) - 1):
                turns[index] = [turns[index][0], *(_summary(m) for m in turns[index][1:])]
                yield [*head, *(m for turn in turns for m in turn)]
        while len(turns) > 1:
            turns.pop(0)
            yield [*head, *(m for turn in turns for m in turn)]


def _turns(history: list[Message]) -> tuple[list[Message], list[list[Message]]]:
    """The system prompt and task (everything before the first assistant message), and the turns after them."""
    first = next((i for i, m in enumerate(history) if m.role == "assistant"), len(history))
    turns: list[list[Message]] = []
    for message in history[first:]:
        if message.role == "assistant":
            turns.append([message])
        else:
            turns[-1].append(message)
    return history[:first], turns


def _summary(message: Message) -> Message:
    """An observation reduced to its first line and the number of lines and images left out, where that is shorter
    (one line, so a summary is its own summary)."""
    lines = message.text.splitlines()
    images = len(message.images)
    if len(lines) <= 1 and not images:
        return message
    left = [f"{len(lines) - 1} more lines"] if len(lines) > 1 else []
    left += [f"{images} images"] if images else []
    summary = f"{lines[0] if lines else ''} [earlier output: {' and '.join(left)} left out]"
    return message.model_copy(update={"content": summary}) if len(summary) < len(message.text) or images else message


def _cut_message(message: Message, limit: int, count: Callable[[str], int], head: Callable[[str, int], str]
                 ) -> Message:
    def cut(text: str) -> str:
        tokens = count(text)
        return text if tokens <= limit else f"{head(text, limit)}\n[{tokens - limit} more tokens cut]"

    if isinstance(message.content, str):
        return message.model_copy(update={"content": cut(message.content)})
    parts = [TextPart(text=cut(p.text)) if isinstance(p, TextPart) else p for p in message.content]
    return message.model_copy(update={"content": parts})
