"""MiniWoB++'s tasks (from the ``miniwob`` package, ``agentgym[miniwob]``) as ``miniwob/<task>-v0``."""

from __future__ import annotations

import importlib.util


def register_miniwob_envs() -> None:
    """Register every task of the installed ``miniwob`` package; none when it is not installed."""
    if importlib.util.find_spec("miniwob") is None:
        return
    from agentgym.envs.miniwob.page import tasks
    from agentgym.registration import ADAPTED, register

    for task, nondeterministic in tasks().items():
        register(
            f"miniwob/{task}-v0",
            "agentgym.envs.miniwob.env:MiniwobEnv",
            kwargs={"task": task},
            tags=("miniwob", "browser", ADAPTED, "multi-turn"),
            description=f"MiniWoB++'s {task} task in Chromium, scored by the page (actions='elements' or 'pixels').",
            nondeterministic=nondeterministic,
        )
