"""Tasks: one reproducible episode of one environment (id, seed, difficulty, split), and sets of them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Field

Split = Literal["train", "test"]
SPLIT_SEED_BASE: dict[str, int] = {"train": 0, "test": 1_000_000_000}
"""Seeds of the train split start at 0 and of the test split at 10^9, so the splits never overlap."""


class Task(BaseModel):
    """One episode: ``make(env_id).reset(**task.reset_kwargs())`` always plays the same episode."""

    model_config = ConfigDict(frozen=True)
    env_id: str
    seed: int
    difficulty: str | None = None
    split: Split = "train"
    options: dict[str, Any] = Field(default_factory=dict)
    """Extra reset options the environment understands."""
    group: str | None = None
    """What the task is drawn from where an environment draws from several (a repository, say): reports break
    results down by it."""

    @property
    def id(self) -> str:
        """A stable, readable identifier, e.g. ``games/FrozenLake-v0:easy:1000000003``."""
        return f"{self.env_id}:{self.difficulty or 'default'}:{self.seed}"

    def reset_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``reset`` that start this task."""
        options = dict(self.options)
        if self.difficulty is not None:
            options["difficulty"] = self.difficulty
        return {"seed": self.seed, "options": options}


class TaskSet(Sequence[Task]):
    """An ordered, indexable collection of tasks with JSON-lines storage."""

    def __init__(self, tasks: Iterable[Task] = ()) -> None:
        self._tasks = tuple(tasks)

    @classmethod
    def generate(
        cls,
        env_id: str,
        n: int,
        *,
        split: Split = "train",
        start: int = 0,
        difficulties: Sequence[str | None] = (None,),
    ) -> TaskSet:
        """``n`` tasks with consecutive seeds of ``split`` from ``start``, cycling through ``difficulties``."""
        if n < 0:
            raise ValueError(f"n must be non-negative, got {n}")
        if not difficulties:
            raise ValueError("difficulties must name at least one level (None for the environment's default)")
        base = SPLIT_SEED_BASE[split] + start
        return cls(
            Task(env_id=env_id, seed=base + i, difficulty=difficulties[i % len(difficulties)], split=split)
            for i in range(n)
        )

    @overload
    def __getitem__(self, index: int) -> Task: ...
    @overload
    def __getitem__(self, index: slice) -> TaskSet: ...
    def __getitem__(self, index: int | slice) -> Task | TaskSet:
        return TaskSet(self._tasks[index]) if isinstance(index, slice) else self._tasks[index]

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaskSet) and self._tasks == other._tasks

    def __repr__(self) -> str:
        return f"TaskSet({len(self)} tasks)"

    def filter(self, *, split: Split | None = None, difficulty: str | None = None, env_id: str | None = None) -> TaskSet:
        """The tasks matching every given field."""
        return TaskSet(
            t
            for t in self._tasks
            if (split is None or t.split == split)
            and (difficulty is None or t.difficulty == difficulty)
            and (env_id is None or t.env_id == env_id)
        )

    def save(self, path: str | Path) -> None:
        """Write one JSON object per line."""
        Path(path).write_text("".join(t.model_dump_json() + "\n" for t in self._tasks))

    @classmethod
    def load(cls, path: str | Path) -> TaskSet:
        """Read a file written by :meth:`save`."""
        lines = Path(path).read_text().splitlines()
        return cls(Task.model_validate(json.loads(line)) for line in lines if line.strip())
