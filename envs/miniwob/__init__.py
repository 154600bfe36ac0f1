"""MiniWoB++'s tasks (from the ``miniwob`` package, ``agentgym[miniwob]``) as ``miniwob/<task>-v0``."""

from __future__ import annotations

import importlib.util

REQUIRES = ("miniwob", "playwright")


def register_miniwob_envs() -> None:
    """Register every task of the installed ``miniwob`` package; without it, the family as unavailable."""
    from agentgym.registration import ADAPTED, register, register_unavailable_family

    if importlib.util.find_spec("miniwob") is None:
        register_unavailable_family("miniwob", "MiniWoB++'s web tasks in Chromium, scored by their pages.",
                                    requires=REQUIRES, extra="miniwob")
        return
    from agentgym.envs.miniwob.page import tasks

    for task, nondeterministic in tasks().items():
        register(
            f"miniwob/{task}-v0",
            "agentgym.envs.miniwob.env:MiniwobEnv",
            kwargs={"task": task},
            tags=("miniwob", "browser", ADAPTED, "multi-turn"),
            description=f"MiniWoB++'s {task} task in Chromium, scored by the page (actions='elements' or 'pixels').",
            nondeterministic=nondeterministic,
            requires=REQUIRES,
            extra="miniwob",
        )
