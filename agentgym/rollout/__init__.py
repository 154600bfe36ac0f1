"""Env-level asynchronous rollout: the scheduler, the trajectory stream, and model-backed policies."""

from agentgym.rollout.chat_policy import ChatPolicy
from agentgym.rollout.config import RolloutConfig
from agentgym.rollout.demonstrations import DemonstrationPolicy
from agentgym.rollout.iterate import iterate_rollouts
from agentgym.rollout.lm_policy import LMPolicy
from agentgym.rollout.metrics import RolloutMetrics
from agentgym.rollout.pool import EnvPool
from agentgym.rollout.render import ChatRenderer
from agentgym.rollout.scheduler import GroupResult, RolloutScheduler
from agentgym.rollout.stream import TrajectoryStream
from agentgym.rollout.tokens import TokenRecord

__all__ = [
    "ChatPolicy",
    "ChatRenderer",
    "DemonstrationPolicy",
    "EnvPool",
    "GroupResult",
    "LMPolicy",
    "RolloutConfig",
    "RolloutMetrics",
    "RolloutScheduler",
    "TokenRecord",
    "TrajectoryStream",
    "iterate_rollouts",
]
