"""One episode's token record: the conversation as the ids a model reads and writes, grown only at the end.

The opening messages are rendered with the chat template once; each later observation is appended as
the template's delta after the closed assistant turn; each response is appended as the ids that
produced it. ``loss_mask`` marks the agent's tokens, with their behaviour logprobs and the policy
versions that sampled them (``0.0`` and ``-1`` on every other token, and on demonstrated ones).
"""

from __future__ import annotations

from typing import Any

from agentgym.messages import ImagePart, Message
from agentgym.rollout.render import ChatRenderer
from agentgym.trajectory import Trajectory


class TokenRecord:
    """Token ids, loss mask, logprobs and versions of one episode, aligned one entry per token."""

    def __init__(self, renderer: ChatRenderer, tools: list[dict[str, Any]]) -> None:
        self.renderer, self.tools = renderer, tools
        self.token_ids: list[int] = []
        self.loss_mask: list[int] = []
        self.logprobs: list[float] = []
        self.versions: list[int] = []
        self.tree_chosen: list[bool] = []
        """Per token, whether a tree rollout chose it instead of sampling (empty until one did)."""
        self.prompt_lengths: list[int] = []
        """Length of the context at each turn (each a prefix of the next)."""
        self.images: list[ImagePart] = []
        """The conversation's images so far, in the order the template placed them in the ids."""
        self._close: list[int] = []

    def observe(self, observation: list[Message]) -> list[int]:
        """Append what the environment said (keeping its images) and the generation prompt; the context to
        answer."""
        messages = [m.to_openai() for m in observation]
        self.images.extend(image for message in observation for image in message.images)
        if self.token_ids:
            self._extend(self._close + self.renderer.observation_ids(messages))
        else:
            self._extend(self.renderer.prompt_ids(messages, self.tools))
        self.prompt_lengths.append(len(self.token_ids))
        return list(self.token_ids)

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
        return self.renderer.response_text(ids)

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
        trajectory.info["prompt_lengths"] = list(self.prompt_lengths)

    def copy(self) -> TokenRecord:
        """An independent copy (a forked episode's record goes on from its parent's)."""
        twin = TokenRecord(self.renderer, self.tools)
        for name in ("token_ids", "loss_mask", "logprobs", "versions", "tree_chosen", "prompt_lengths", "images",
                     "_close"):
            setattr(twin, name, list(getattr(self, name)))
        return twin

    def _extend(self, ids: list[int], logprobs: list[float] | None = None, versions: list[int] | None = None,
                *, agent: bool = False) -> None:
        self.token_ids.extend(ids)
        self.loss_mask.extend([int(agent)] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
        self.versions.extend(versions if versions is not None else [-1] * len(ids))
