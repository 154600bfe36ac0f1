"""The settings of a rollout, validated once."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentgym.episode import Timeouts
from agentgym.inference.tree import LatrParams


class TreeRollout(LatrParams):
    """LATR's settings within a turn (:class:`~agentgym.inference.tree.LatrParams`) and across turns."""

    turn_window: int = Field(2, ge=1)
    """Turns after a fork at which a child is compared with its parent."""
    forced_turn: int = Field(8, ge=1)
    """The tree phase ends after this many turns whatever its state."""
    prune_same_observation: bool = True
    """A child that sees what its parent sees after the window is pruned too, whatever its actions."""


class RolloutConfig(BaseModel):
    """How many episodes run at once, how they are grouped, how stale a trajectory may be, and whether a complete
    group's spares are carried over (``carry_over``) rather than cancelled."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int = Field(64, ge=1)
    """Episodes in flight at once, each at its own pace."""
    group_size: int = Field(1, ge=1)
    """Samples of each task kept (G): a group is G independent episodes of one task."""
    redundancy: int = Field(0, ge=0)
    """Extra episodes started per group; the first ``group_size`` to finish are kept, the rest cancelled (or, with
    ``carry_over``, carried over)."""
    max_retries: int = Field(2, ge=0)
    """Episodes per group that may be started again after an infrastructure error or a staleness drop."""
    max_staleness: int | None = Field(None, ge=0)
    """The most policy versions a kept trajectory's oldest token may lag the current weights; older
    ones are dropped. With ``batch_size`` it also bounds what may start (AReaL's rule)."""
    batch_size: int | None = Field(None, ge=1)
    """Trajectories the trainer consumes per weight update; episodes may start only while
    ``running + kept < (versions + max_staleness + 1) * batch_size``, counting the versions published
    since the rollout began and leaving out what groups that failed kept (no batch gets those)."""
    stream_size: int = Field(256, ge=1)
    """Finished trajectories the stream holds before producers wait (backpressure)."""
    relax_gc: bool = True
    """Freeze pre-existing objects and collect garbage less often while the rollout runs (see
    :mod:`agentgym.rollout.garbage_collection`); restored afterwards."""
    seed: int = 0
    """Seeds every episode's policy randomness together with its task seed."""
    timeouts: Timeouts = Timeouts()
    sampling: Literal["stochastic", "latr"] = "stochastic"
    """How a group's episodes are drawn: ``stochastic``, each on its own; ``latr``, ``round(G * η)`` of them
    grown as one tree that forks where the policy is unsure (:mod:`agentgym.rollout.tree_group`), the rest and
    any the tree fell short of sampled on their own."""
    latr: TreeRollout = TreeRollout()
    """LATR's settings, within a turn and across turns (used with ``sampling: latr``)."""
    carry_over: bool = False
    """Keep a complete group's spares that are still playing (APRIL): paused at their next turn, resumed first
    once the policy version advanced, in a carry group of their task (``GroupId(index, carry=n)``) filled up with fresh ones."""
    carry_over_limit: int = Field(64, ge=1)
    """Spares paused at once with ``carry_over``; one beyond it is cancelled as without."""
    carry_over_resume: Literal["next_version", "at_once"] = "next_version"
    """When a carried spare goes on: paused until the policy version advanced (APRIL's partial rollout), or
    ``at_once``, never pausing, under whatever weights the engine serves (its earlier tokens keep their versions)."""

    @model_validator(mode="after")
    def _admission_needs_staleness(self) -> RolloutConfig:
        if self.batch_size is not None and self.max_staleness is None:
            raise ValueError("batch_size bounds admission only together with max_staleness; set both")
        return self
