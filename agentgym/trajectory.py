"""Trajectories: the record of one episode, from its messages down to the tokens a model produced."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from agentgym.messages import Message, ToolCall
from agentgym.tasks import Task

Status = Literal["ok", "error", "truncated"]
TRAJECTORY_FORMAT = 1
"""Bumped whenever a saved trajectory's fields change meaning."""


class Turn(BaseModel):
    """One exchange: the agent's text, the calls read from it, and what the environment answered."""

    action: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    observation: list[Message] = Field(default_factory=list)
    reward: float = 0.0
    action_error: str | None = None
    policy_seconds: float = 0.0
    env_seconds: float = 0.0


class Trajectory(BaseModel):
    """A whole episode.

    ``status`` is ``ok`` when the environment ended it, ``truncated`` at the turn limit, and ``error``
    when infrastructure failed (``error`` then holds the cause, and ``error_traceback`` where it was
    raised when an exception caused it; such a trajectory is never scored).
    The token fields are aligned one entry per token: ``loss_mask`` is 1 on tokens the agent
    generated, ``logprobs`` the behaviour log-probability of each generated token (0 elsewhere) and
    ``versions`` the policy version that sampled it (-1 elsewhere). Policies that work on text leave
    them empty.
    """

    format_version: int = TRAJECTORY_FORMAT
    env_id: str
    task: Task | None = None
    messages: list[Message] = Field(default_factory=list)
    turns: list[Turn] = Field(default_factory=list)
    token_ids: list[int] = Field(default_factory=list)
    loss_mask: list[int] = Field(default_factory=list)
    logprobs: list[float] = Field(default_factory=list)
    versions: list[int] = Field(default_factory=list)
    tree_chosen: list[bool] = Field(default_factory=list)
    """Per token, whether a tree rollout chose it instead of sampling it (empty when none did)."""
    segments: list[int] = Field(default_factory=list)
    """Where each token segment after the first starts (empty: one). A segment is a context the model saw whole;
    a template that rewrites earlier turns, or a context policy's compaction, starts the next from a fresh
    rendering."""
    reward: float = 0.0
    success: bool = False
    status: Status = "ok"
    error: str | None = None
    error_traceback: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _aligned(self) -> Trajectory:
        lengths = {len(self.token_ids), len(self.loss_mask), len(self.logprobs), len(self.versions)}
        if len(lengths) != 1:
            raise ValueError("token_ids, loss_mask, logprobs and versions must have the same length")
        if self.segments != sorted(set(self.segments)) or any(not 0 < s < len(self.token_ids) for s in self.segments):
            raise ValueError("segments must be increasing starts inside token_ids, after the first")
        if self.status == "error" and not self.error:
            raise ValueError("an error trajectory must say its cause in `error`")
        return self

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    def segment_spans(self) -> list[tuple[int, int]]:
        """Each token segment's ``(start, end)`` in ``token_ids``."""
        starts = [0, *self.segments]
        return list(zip(starts, [*self.segments, len(self.token_ids)], strict=True))


def has_signal(group: Sequence[Trajectory]) -> bool:
    """Whether a group's rewards differ (else its group-relative advantages are all 0)."""
    return len({t.reward for t in group}) > 1


def distinct_actions(group: Sequence[Trajectory]) -> int:
    """How many different action sequences a group's episodes took (1: they all walked alike)."""
    return len({tuple(turn.action for turn in t.turns) for t in group})
