"""Choosing a web environment's task: the one a reset option names by index, else one drawn at the
episode's difficulty."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

from agentgym.seeding import pick


class _Graded(Protocol):
    @property
    def difficulty(self) -> str: ...


TaskT = TypeVar("TaskT", bound=_Graded)


def choose_task(tasks: Sequence[TaskT], difficulty: str, options: dict[str, Any], rng: np.random.Generator,
                *, option: str = "task") -> TaskT:
    """``tasks[options[option]]`` when the reset names an index (an ``int``, not a ``bool``), else one of the
    tasks of ``difficulty`` drawn from ``rng``; a bad index is a :class:`ValueError` naming it."""
    if option not in options:
        return pick(rng, [task for task in tasks if task.difficulty == difficulty])
    index = options[option]
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(tasks):
        raise ValueError(f"{option} must be an index from 0 to {len(tasks) - 1} (an int), got {index!r}")
    return tasks[index]
