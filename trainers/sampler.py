"""The hand-out of train tasks by position over a mixture of environments, reproducible and resumable.

Position ``p``'s environment is drawn by weight with a generator seeded by ``(run seed, p)``, so which
environment a position holds never depends on timing, and over many positions each environment's share
follows its weight. Its level is the next of the environment's levels in turn, or, under a curriculum, drawn
from the environment's current mix. A task once handed out is remembered until the trainer consumes it:
a checkpoint saves those (with the counts and the curriculum), and a resumed run hands each out again
as it was, then goes on where the sampler stood.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from agentgym.tasks import Task
from agentgym.trainers.curriculum import SuccessWindow
from agentgym.trainers.mixture import Source

_LEVEL_DRAW = 1
"""Stream of a position's generator for its level (stream 0 draws its environment)."""


class TaskSampler:
    """Train tasks by position (:meth:`task`), drawn from ``sources`` by weight; thread-safe (the rollout
    draws on its loop while the trainer consumes and checkpoints)."""

    def __init__(self, sources: list[Source], seed: int, curriculum: SuccessWindow | None = None) -> None:
        self.sources = {source.id: source for source in sources}
        self.seed = seed
        self.curriculum = curriculum
        weights = np.array([source.weight for source in sources], dtype=float)
        self._ids = [source.id for source in sources]
        self._weights = weights / weights.sum()
        self.handed: dict[int, Task] = {}
        """Tasks handed out and not consumed yet, by position."""
        self.drawn: dict[str, int] = {}
        """Tasks handed out so far, by environment and by ``env|level``."""
        self._lock = threading.Lock()

    def task(self, position: int) -> Task:
        """The task at ``position``: the one handed out before, or a new draw."""
        with self._lock:
            if position not in self.handed:
                self.handed[position] = self._draw(position)
            return self.handed[position]

    def environment(self, position: int) -> str:
        """The environment position ``position`` holds (a function of the run's seed and the position)."""
        if len(self._ids) == 1:
            return self._ids[0]
        rng = np.random.default_rng([self.seed, position, 0])
        return self._ids[int(rng.choice(len(self._ids), p=self._weights))]

    def consume(self, position: int) -> None:
        """Forget the task at ``position``: trained on or passed, it is never handed out again."""
        with self._lock:
            self.handed.pop(position, None)

    def state(self) -> dict[str, Any]:
        with self._lock:
            return {"handed": {p: t.model_dump() for p, t in self.handed.items()}, "drawn": dict(self.drawn),
                    "curriculum": self.curriculum.state() if self.curriculum else None}

    def load_state(self, state: dict[str, Any]) -> None:
        """Take up a checkpoint's state: its handed-out tasks come back as they were."""
        with self._lock:
            self.handed = {int(p): Task.model_validate(t) for p, t in state["handed"].items()}
            self.drawn = dict(state["drawn"])
            if self.curriculum is not None and state.get("curriculum") is not None:
                self.curriculum.load_state(state["curriculum"])

    def _draw(self, position: int) -> Task:
        source = self.sources[self.environment(position)]
        count = self.drawn.get(source.id, 0)
        if self.curriculum is None:
            level = source.difficulties[count % len(source.difficulties)]
        else:
            level = self.curriculum.draw(source.id, np.random.default_rng([self.seed, position, _LEVEL_DRAW]))
        key = f"{source.id}|{level}"
        task = source.task(level, position, self.drawn.get(key, 0))
        self.drawn[source.id] = count + 1
        self.drawn[key] = self.drawn.get(key, 0) + 1
        return task
