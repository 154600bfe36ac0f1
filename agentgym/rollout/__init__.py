"""Env-level asynchronous rollout: the scheduler, the env pool, the trajectory stream and the token records\n(the policies that drive the episodes are in :mod:`agentgym.policies`)."""

from agentgym.policies.render import ChatRenderer
from agentgym.policies.tokens import TokenRecord
from agentgym.rollout.config import RolloutConfig
from agentgym.rollout.group_id import GroupId
from agentgym.rollout.iterate import iterate_rollouts
from agentgym.rollout.metrics import RolloutMetrics
from agentgym.rollout.pool import EnvPool
from agentgym.rollout.scheduler import GroupResult, RolloutScheduler
from agentgym.rollout.stream import TrajectoryStream

__all__ = [
    "ChatRenderer",
    "EnvPool",
    "GroupId",
    "GroupResult",
    "RolloutConfig",
    "RolloutMetrics",
    "RolloutScheduler",
    "TokenRecord",
    "TrajectoryStream",
    "iterate_rollouts",
]
