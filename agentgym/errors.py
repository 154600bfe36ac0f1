"""The exceptions agentgym raises: one shallow hierarchy under :class:`AgentGymError`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentgym.trajectory import Trajectory


class AgentGymError(Exception):
    """Base class of every error agentgym raises on purpose."""


class RegistrationError(AgentGymError):
    """An environment id or spec is malformed, registered twice, or its entry point cannot load."""


class UnknownEnvError(RegistrationError, KeyError):
    """No environment is registered under the requested id; the message names the closest ids."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


class ToolError(AgentGymError):
    """Raised inside a tool for a mistake the agent made; the agent reads the message as the result."""


class ResetNeeded(AgentGymError):
    """``step`` was called before ``reset`` or after the episode ended."""


class EnvCheckError(AgentGymError):
    """An environment failed one of the conformance checks of :func:`agentgym.check_env`."""

    def __init__(self, check: str, message: str) -> None:
        super().__init__(f"[{check}] {message}")
        self.check = check
        self.reason = message


class ConfigError(AgentGymError, ValueError):
    """A configuration value is invalid; the message names the key."""


class EpisodeTimeout(AgentGymError, TimeoutError):
    """A nested time limit ran out: ``scope`` is ``episode``, ``turn`` or ``tool``."""

    def __init__(self, scope: str, seconds: float, what: str = "") -> None:
        super().__init__(f"{what or scope} timed out after {seconds:g} s")
        self.scope = scope


class ContextLimit(AgentGymError):
    """The conversation no longer fits the model's context; the episode ends as ``overflow`` says (a context
    policy's: ``truncation``, ``failure`` or ``penalty`` with that reward)."""

    def __init__(self, message: str, overflow: str = "truncation", penalty: float = -1.0) -> None:
        super().__init__(message)
        self.overflow, self.penalty = overflow, penalty

    def end(self, trajectory: Trajectory) -> None:
        """End ``trajectory`` as the overflow outcome says; ``info["overflow"]`` records which and why."""
        trajectory.info["overflow"] = {"outcome": self.overflow, "cause": str(self)}
        if self.overflow == "truncation":
            trajectory.status = "truncated"
            trajectory.info["truncated_by"] = str(self)
            return
        trajectory.success = False
        trajectory.reward = self.penalty if self.overflow == "penalty" else 0.0


class ForkError(AgentGymError):
    """An episode cannot be forked: its environment declares ``forkable = "no"`` (the message says why), or the
    parent cannot be rebuilt or replayed as given."""


class ReplayDiverged(ForkError):
    """Replaying a parent episode's seed and actions gave an observation the parent did not see: the environment
    is not deterministic there (a clock, a live site, a shared random generator), so no child can start in the
    parent's state. ``env_id`` is the environment, ``turn`` the turn that differed (0: the reset)."""

    def __init__(self, env_id: str, turn: int, diff: str) -> None:
        where = "the reset" if turn == 0 else f"turn {turn}"
        super().__init__(f"replaying {env_id} diverged from the parent episode at {where}:\n{diff}")
        self.env_id = env_id
        self.turn = turn
