"""What a rollout did: counts that always add up, throughput, where the time went, staleness."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from agentgym.trajectory import Trajectory


class RolloutMetrics(BaseModel):
    """Every started episode ends exactly one way: ``started == finished + errored + cancelled + dropped``."""

    started: int = 0
    finished: int = 0
    """Kept and streamed (``ok`` or ``truncated``)."""
    errored: int = 0
    """Ended by an infrastructure failure (streamed with ``status="error"``, never scored)."""
    cancelled: int = 0
    """Redundant episodes stopped (or discarded) once their group had enough finishers, or carried over and
    discarded."""
    dropped: int = 0
    """Finished but too stale for the staleness bound (logged as ``rollout/dropped_stale``)."""
    retried: int = 0
    """Episodes started again to refill a group after an error or a drop."""
    groups_complete: int = 0
    groups_failed: int = 0
    generated_tokens: int = 0
    """Agent tokens of the episodes counted (a token a forked episode shares with its parent counts in each)."""
    decoded_tokens: int = 0
    """Agent tokens the engine decoded for them: each ordinary episode's own, and for each tree the engine's trees
    (pruned branches and lookaheads included, a shared prefix once) and its episodes' sampled continuations. What
    tree and stochastic sampling compare on as cost."""
    wall_seconds: float = 0.0
    """From the start of the rollout to its latest settled episode (to its end, once it has ended)."""
    policy_seconds: float = 0.0
    """Summed over episodes: time waiting for the policy (generation)."""
    env_seconds: float = 0.0
    """Summed over episodes: time in environment steps."""
    engine_busy: float | None = None
    """The engine's busy fraction over the rollout (its complement is the bubble); ``None`` without an engine."""
    engine_tokens: int | None = None
    """Tokens the engine generated since the rollout began, for every episode (cancelled, dropped and in flight
    ones too) and whatever else it served meanwhile; its excess over ``generated_tokens`` was thrown away or is
    still in flight. ``None`` without an engine."""
    staleness: dict[int, int] = Field(default_factory=dict)
    """Histogram of version lag (current version minus the oldest token's) of finished trajectories."""
    error_causes: dict[str, int] = Field(default_factory=dict)
    close_errors: int = 0
    """Environment instances whose close raised or outlasted the episode time limit (what they held may be
    left behind); their episodes are counted as they ended."""
    tree_groups: int = 0
    """Groups grown as a tree (``sampling: latr``)."""
    tree_branches: int = 0
    """Episodes forked in those trees (kept or pruned)."""
    tree_pruned: int = 0
    """Forked episodes pruned as look-alikes of their parent."""
    tree_refilled: int = 0
    """Episodes a tree fell short of, started afresh by sampling."""
    tree_tokens: int = 0
    """Agent tokens the trees chose rather than sampled (of ``generated_tokens``: a token a forked episode shares
    with its parent counts in each, as each trains on it)."""

    carried: int = 0
    """Spares of complete groups carried over (``carry_over``) instead of cancelled."""
    carried_kept: int = 0
    """Carried-over episodes that ended kept (of ``finished``)."""
    carried_tokens: int = 0
    """Agent tokens of those kept carried-over trajectories."""
    carry_discarded: int = 0
    """Carried-over episodes cancelled while paused, by :meth:`~agentgym.rollout.RolloutScheduler.stop` (of
    ``cancelled``)."""
    carry_buffer: int = 0
    """Carried-over episodes paused now, waiting for a carry group."""
    carry_buffer_peak: int = 0
    """The most carried-over episodes paused at once so far."""
    carry_paused_seconds: float = 0.0
    """Summed over settled carried-over episodes: time paused at a turn boundary."""
    carry_groups: int = 0
    """Carry groups opened (each adopting the carried-over episodes of one group)."""

    def buffered(self, paused: int) -> None:
        """The carry-over buffer now holds ``paused`` episodes."""
        self.carry_buffer = paused
        self.carry_buffer_peak = max(self.carry_buffer_peak, paused)

    def count_carried(self, trajectory: Trajectory, *, kept: bool) -> None:
        """Count a carried-over episode as it settles."""
        self.carry_paused_seconds += trajectory.timings.get("paused_seconds", 0.0)
        if kept:
            self.carried_kept += 1
            self.carried_tokens += sum(trajectory.loss_mask)

    def count_tree(self, trajectories: list[Trajectory]) -> None:
        """Count a tree and its forks and prunes."""
        tree = trajectories[0].info.get("tree", {}) if trajectories else {}
        self.tree_groups += 1
        self.tree_branches += int(tree.get("made", 0))
        self.tree_pruned += int(tree.get("pruned", 0))
        self.decoded_tokens += int(tree.get("decoded", 0))

    def count_finished(self, trajectory: Trajectory, lag: int) -> None:
        self.staleness[lag] = self.staleness.get(lag, 0) + 1
        self._add_time(trajectory)

    def count_error(self, trajectory: Trajectory) -> None:
        self.errored += 1
        cause = str(trajectory.info.get("error_cause", "unknown"))
        self.error_causes = dict(Counter(self.error_causes) + Counter({cause: 1}))
        self._add_time(trajectory)

    def _add_time(self, trajectory: Trajectory) -> None:
        tokens = sum(trajectory.loss_mask)
        self.generated_tokens += tokens
        if "tree" not in trajectory.info:  # a tree's tokens are counted once, by count_tree
            self.decoded_tokens += tokens
        self.tree_tokens += sum(trajectory.tree_chosen)
        self.policy_seconds += trajectory.timings.get("policy_seconds", 0.0)
        self.env_seconds += trajectory.timings.get("env_seconds", 0.0)

    @property
    def accounted(self) -> bool:
        """Whether every started episode is counted exactly once."""
        return self.started == self.finished + self.errored + self.cancelled + self.dropped

    @property
    def trajectories_per_second(self) -> float:
        return self.finished / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.wall_seconds if self.wall_seconds else 0.0

    def log_dict(self) -> dict[str, Any]:
        """Flat ``rollout/...`` keys for metric writers."""
        out: dict[str, Any] = {
            f"rollout/{k}": getattr(self, k)
            for k in ("started", "finished", "errored", "cancelled", "retried", "generated_tokens", "decoded_tokens",
                      "close_errors")
        }
        out["rollout/dropped_stale"] = self.dropped
        carry = ("carried", "carried_kept", "carried_tokens", "carry_discarded", "carry_buffer", "carry_buffer_peak",
                 "carry_paused_seconds", "carry_groups")
        if any(getattr(self, k) for k in carry):
            out.update({f"rollout/{k}": getattr(self, k) for k in carry})
        if self.tree_groups:
            out.update({f"rollout/{k}": getattr(self, k)
                        for k in ("tree_groups", "tree_branches", "tree_pruned", "tree_refilled", "tree_tokens")})
            out["rollout/tree_token_fraction"] = self.tree_tokens / self.generated_tokens if self.generated_tokens else 0.0
        out["rollout/trajectories_per_second"] = self.trajectories_per_second
        out["rollout/tokens_per_second"] = self.tokens_per_second
        if self.engine_busy is not None:
            out["rollout/engine_busy"] = self.engine_busy
        if self.engine_tokens is not None:
            out["rollout/engine_tokens"] = self.engine_tokens
        total = self.policy_seconds + self.env_seconds
        out["rollout/env_time_fraction"] = self.env_seconds / total if total else 0.0
        out.update({f"rollout/staleness/{lag}": n for lag, n in sorted(self.staleness.items())})
        out.update({f"rollout/errors/{cause}": n for cause, n in sorted(self.error_causes.items())})
        return out
