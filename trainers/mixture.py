"""What a run trains on: one environment, a weighted list of them, or a suite's train split (``env:``).

Each becomes a list of :class:`Source`: an environment with its keyword arguments, sampling weight and
difficulty levels, whose train tasks are generated (seed ``seed_start + position``) or, from a suite, taken
from the suite's train split in file order, level by level, starting over when a level's tasks run out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag, ValidationInfo, field_validator

from agentgym.config import Config
from agentgym.parsers import resolve_parser
from agentgym.policies.context import ContextPolicy
from agentgym.suites import load_suite
from agentgym.tasks import SPLIT_SEED_BASE, Task


class EnvEntry(Config):
    """One environment trained on, with its train tasks' levels and its share of them."""

    id: str
    kwargs: dict[str, Any] = Field(default_factory=dict)
    difficulties: list[str | None] = Field(default_factory=lambda: [None])
    """Difficulty levels cycled through by its tasks (null: the env's default); a curriculum moves the mix."""
    weight: float = Field(1.0, gt=0)
    """Its share of the train tasks, relative to the other environments' weights."""
    seed_start: int = Field(0, ge=0)
    """Its train tasks take seeds of the train split from here (plus the task's position)."""
    context: ContextPolicy | None = None
    """Its episodes' context policy, in place of the run's ``context``."""

    @field_validator("difficulties")
    @classmethod
    def _some(cls, levels: list[str | None]) -> list[str | None]:
        if not levels or len(set(levels)) != len(levels):
            raise ValueError("name at least one level, each once (null for the environment's default)")
        return levels


class SuiteMixture(Config):
    """Every environment of a suite, on the suite's train split."""

    suite: str
    """A bundled suite (``games-v0``) or a suite folder."""
    weights: dict[str, float] = Field(default_factory=dict)
    """Sampling weight by environment id (1 for those not named)."""
    kwargs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Keyword arguments by environment id."""

    @field_validator("suite")
    @classmethod
    def _has_train_tasks(cls, suite: str) -> str:
        if not load_suite(suite).split("train"):
            raise ValueError(f"suite {suite} has no train tasks")
        return suite

    @field_validator("weights", "kwargs")
    @classmethod
    def _names_the_suites_envs(cls, named: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if "suite" not in info.data:
            return named  # the suite itself was refused
        suite = load_suite(info.data["suite"])
        envs = {t.env_id for t in suite.split("train")}
        if unknown := sorted(set(named) - envs):
            raise ValueError(f"names {', '.join(unknown)}, not in {suite.name}'s train split ({', '.join(sorted(envs))})")
        if info.field_name == "weights" and any(w <= 0 for w in named.values()):
            raise ValueError("weights must be positive")
        return named


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict) and "suite" in value:
        return "suite"
    return "one"


EnvField = Annotated[
    Annotated[EnvEntry, Tag("one")] | Annotated[list[EnvEntry], Tag("list")] | Annotated[SuiteMixture, Tag("suite")],
    Discriminator(_kind),
]
"""``env:`` of a train config: ``{id, ...}``, a list of them, or ``{suite: NAME, ...}``."""


@dataclass(frozen=True)
class Source:
    """One environment of a run's mixture and where its train tasks come from."""

    id: str
    kwargs: dict[str, Any]
    weight: float
    difficulties: tuple[str | None, ...]
    seed_start: int = 0
    pool: dict[str | None, tuple[Task, ...]] | None = None
    """A suite's train tasks by level, in file order; ``None``: tasks are generated."""
    context: ContextPolicy | None = None
    """Its episodes' context policy (None: the run's)."""

    def task(self, difficulty: str | None, position: int, drawn: int) -> Task:
        """The train task at ``position``, the ``drawn``-th of its level handed out so far."""
        if self.pool is None:
            seed = SPLIT_SEED_BASE["train"] + self.seed_start + position
            return Task(env_id=self.id, seed=seed, difficulty=difficulty, split="train")
        tasks = self.pool[difficulty]
        return tasks[drawn % len(tasks)]


def sources(env: EnvEntry | list[EnvEntry] | SuiteMixture) -> list[Source]:
    """The environments ``env:`` names, in order; a list naming one id twice is refused."""
    if isinstance(env, SuiteMixture):
        suite = load_suite(env.suite)
        by_env: dict[str, dict[str | None, list[Task]]] = {}
        for task in suite.split("train"):
            by_env.setdefault(task.env_id, {}).setdefault(task.difficulty, []).append(task)
        return [Source(env_id, env.kwargs.get(env_id, {}), env.weights.get(env_id, 1.0), tuple(levels),
                       pool={level: tuple(tasks) for level, tasks in levels.items()})
                for env_id, levels in by_env.items()]
    entries = env if isinstance(env, list) else [env]
    ids = [e.id for e in entries]
    if len(set(ids)) != len(ids):
        raise ValueError(f"env names {sorted({i for i in ids if ids.count(i) > 1})} more than once; "
                         "give each environment one entry (several levels go in its difficulties)")
    return [Source(e.id, e.kwargs, e.weight, tuple(e.difficulties), e.seed_start, context=e.context)
            for e in entries]


def with_parser(env: Any, model: str) -> Any:
    """A raw ``env:`` section with each ``parser: auto`` in its kwargs replaced by the format ``model``'s chat
    template declares (:func:`~agentgym.parsers.resolve_parser`)."""
    if isinstance(env, list):
        return [with_parser(entry, model) for entry in env]
    if not isinstance(env, dict) or not isinstance(env.get("kwargs"), dict):
        return env
    if "suite" in env:
        kwargs = {env_id: resolve_parser(given, model, f"env.kwargs.{env_id}.parser") if isinstance(given, dict)
                  else given for env_id, given in env["kwargs"].items()}
        return {**env, "kwargs": kwargs}
    return {**env, "kwargs": resolve_parser(env["kwargs"], model, "env.kwargs.parser")}

