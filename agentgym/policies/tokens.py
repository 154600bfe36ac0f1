"""One episode's token record: the conversation as the ids a model reads and writes, grown only at the end.

The opening messages are rendered with the chat template once; each later observation is appended as
the template's delta after the closed assistant turn; each response is appended as the ids that
produced it. ``loss_mask`` marks the agent's tokens, with their behaviour logprobs and the policy
versions that sampled them (``0.0`` and ``-1`` on every other token, and on demonstrated ones).

Where the template rewrites earlier turns, or the context policy compacts the conversation, the next prompt is
rendered afresh and starts a new *segment*: the ids go on growing at the end, each segment is a context the
engine saw whole, and the trainer takes each as a row of its own, so no token is trained under a context it was
not sampled under. Earlier responses appear again, untrained, in a later segment's prompt.
"""

from __future__ import annotations

from typing import Any

from agentgym.messages import ImagePart, Message
from agentgym.policies.context import ContextPolicy
from agentgym.policies.render import ChatRenderer
from agentgym.trajectory import Trajectory


class TokenRecord:
    """Token ids, loss mask, logprobs and versions of one episode, aligned one entry per token."""

    def __init__(self, renderer: ChatRenderer, tools: list[dict[str, Any]], context: ContextPolicy | None = None,
                 budget: int | None = None) -> None:
        self.renderer, self.tools = renderer, tools
        self.context = context or ContextPolicy()
        self.budget = budget
        """Prompt tokens past which the context policy compacts the conversation (None: never)."""
        self.token_ids: list[int] = []
        self.loss_mask: list[int] = []
        self.logprobs: list[float] = []
        self.versions: list[int] = []
        self.tree_chosen: list[bool] = []
        """Per token, whether a tree rollout chose it instead of sampling (empty until one did)."""
        self.prompt_lengths: list[int] = []
        """Length of the context at each turn (within a segment, each a prefix of the next)."""
        self.segments: list[int] = [0]
        """Where each segment starts in ``token_ids``."""
        self.history: list[Message] = []
        """The conversation as the current segment renders it (compacted where the context policy did)."""
        self.images: list[ImagePart] = []
        """The current segment's images, in the order the template placed them in the ids."""
        self._close: list[int] = []

    @property
    def context_ids(self) -> list[int]:
        """The current segment: the context the engine answers next."""
        return self.token_ids[self.segments[-1]:]

    def observe(self, observation: list[Message]) -> list[int]:
        """Append what the environment said (keeping its images) and the generation prompt, compacting the
        conversation past the budget; the context to answer."""
        if not self.token_ids:
            self._new_segment(observation)
        else:
            observation = self.context.cut(observation, lambda text: len(self.renderer.encode(text)),
                                           self.renderer.head)
            delta = self.renderer.observation_ids(_openai(self.history), _openai(observation), self.tools)
            if delta is None:
                self._new_segment(self.history + observation)
            else:
                self.history += observation
                self.images.extend(image for message in observation for image in message.images)
                self._extend(self._close + delta)
                self._close = []
        if self.budget is not None and len(self.context_ids) > self.budget:
            self._compact()
        self.prompt_lengths.append(len(self.context_ids))
        return self.context_ids

    def _compact(self) -> None:
        """Start a new segment from the first compaction of the conversation within ``compact_to`` of the budget
        (the most compact one if none is)."""
        assert self.budget is not None
        target = self.context.compact_to * self.budget
        shortest: tuple[list[Message], list[int]] | None = None
        for view in self.context.compactions(self.history):
            shortest = view, self.renderer.prompt_ids(_openai(view), self.tools)
            if len(shortest[1]) <= target:
                break
        if shortest is not None:
            self._new_segment(*shortest)

    def _new_segment(self, history: list[Message], ids: list[int] | None = None) -> None:
        """Close the current segment and open one rendering ``history`` afresh (as ``ids`` where given)."""
        self._extend(self._close)
        self._close = []
        self.history = list(history)
        self.images = [image for message in history for image in message.images]
        if self.token_ids:
            self.segments.append(len(self.token_ids))
        self._extend(ids if ids is not None else self.renderer.prompt_ids(_openai(history), self.tools))

    def respond(self, ids: list[int], logprobs: list[float] | None = None, versions: list[int] | None = None,
                *, learn: bool = True, tree_chosen: list[bool] | None = None) -> str:
        """Append the agent's response ids (a model's, with their logprobs and versions, or a
        demonstration's without; ``learn=False`` leaves them out of the loss); the agent's text.
        ``tree_chosen`` marks the ids a tree rollout chose."""
        start = len(self.token_ids)
        self._extend(ids, logprobs or [0.0] * len(ids), versions or [-1] * len(ids), agent=learn)
        if self.tree_chosen or any(tree_chosen or ()):
            self.tree_chosen += [False] * (start - len(self.tree_chosen))
            self.tree_chosen += list(tree_chosen) if tree_chosen else [False] * len(ids)
        self._close = self.renderer.close_ids(ids)
        text = self.renderer.response_text(ids)
        self.history.append(Message(role="assistant", content=text))
        return text

    def write(self, trajectory: Trajectory) -> None:
        """Close the last response the way the template would and copy the record into ``trajectory``."""
        self._extend(self._close)
        self._close = []
        trajectory.token_ids = list(self.token_ids)
        trajectory.loss_mask = list(self.loss_mask)
        trajectory.logprobs = list(self.logprobs)
        trajectory.versions = list(self.versions)
        if self.tree_chosen:
            trajectory.tree_chosen = self.tree_chosen + [False] * (len(self.token_ids) - len(self.tree_chosen))
        trajectory.segments = self.segments[1:]
        trajectory.info["prompt_lengths"] = list(self.prompt_lengths)

    def copy(self) -> TokenRecord:
        """An independent copy (a forked episode's record goes on from its parent's)."""
        twin = TokenRecord(self.renderer, self.tools, self.context, self.budget)
        for name in ("token_ids", "loss_mask", "logprobs", "versions", "tree_chosen", "prompt_lengths", "segments",
                     "history", "images", "_close"):
            setattr(twin, name, list(getattr(self, name)))
        return twin

    def _extend(self, ids: list[int], logprobs: list[float] | None = None, versions: list[int] | None = None,
                *, agent: bool = False) -> None:
        self.token_ids.extend(ids)
        self.loss_mask.extend([int(agent)] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
        self.versions.extend(versions if versions is not None else [-1] * len(ids))


def _openai(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.to_openai() for m in messages]
