"""A plain iterator over rollout trajectories, for code that is not asynchronous."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from agentgym.policies import Policy
from agentgym.rollout.background import BackgroundLoop
from agentgym.rollout.config import RolloutConfig
from agentgym.rollout.scheduler import RolloutScheduler
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory


def iterate_rollouts(
    env_id: str,
    policy: Policy,
    tasks: Iterable[Task],
    config: RolloutConfig | None = None,
    *,
    env_kwargs: dict[str, Any] | None = None,
) -> Iterator[Trajectory]:
    """Yield trajectories as they finish, while the asynchronous rollout runs on a background thread.

    Leaving the loop early stops the rollout (episodes in flight are cancelled) and joins the thread.
    """
    scheduler = RolloutScheduler(env_id, policy, config, env_kwargs=env_kwargs)
    with BackgroundLoop() as background:
        run = background.submit(scheduler.run(tasks))
        try:
            while (trajectory := background.run(scheduler.stream.get())) is not None:
                yield trajectory
            run.result()  # raises what stopped the rollout, if anything did
        finally:
            if not run.done():
                background.call(scheduler.stop)
                background.run(drain(scheduler))
                run.result()


async def drain(scheduler: RolloutScheduler) -> None:
    """Keep the stream moving so stopping producers are never blocked on a full stream."""
    while await scheduler.stream.get() is not None:
        pass
