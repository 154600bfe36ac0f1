"""What a widget task is: a seeded generator of pages, a validator of the page's state, and an oracle.

A task draws an :class:`Episode` (the instruction, the HTML of the task area, what counts as solved) from the
episode's generator; the page records what happened in it (``agentgym.log``) and keeps each widget's value on
an element with a ``data-field`` attribute, which :data:`STATE_SCRIPT` reads into a :class:`PageState` for
:meth:`WidgetTask.score`. The oracle (see :mod:`agentgym.envs.gui.widgets.oracle`) answers each screen with
the next move, through the same tools an agent has."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from agentgym.envs.gui.widgets.oracle import DONE, Action, Elements, Step

STATE_SCRIPT = """() => ({
  log: agentgym.log,
  fields: Object.fromEntries([...document.querySelectorAll("[data-field]")].map((el) => [el.dataset.field,
    "value" in el.dataset ? el.dataset.value
      : el.type === "checkbox" || el.type === "radio" ? el.checked : el.value])),
})"""
"""Reads the page's event log and the value of every ``data-field`` element (its ``data-value`` where it
has one, else whether it is ticked, else its ``value``)."""


@dataclass(frozen=True)
class Episode:
    """One generated task: what the agent is told, the HTML of the task area, and the ``answer`` the validator
    and the oracle work from (its type is the task's own)."""

    instruction: str
    body: str
    answer: Any


@dataclass(frozen=True)
class PageState:
    """What the validator reads from the page: the events in order and each field's value."""

    log: list[tuple[str, str]]
    fields: dict[str, Any]

    @classmethod
    def of(cls, raw: dict[str, Any]) -> PageState:
        """The state from :data:`STATE_SCRIPT`'s result."""
        return cls(log=[(kind, detail) for kind, detail in raw["log"]], fields=dict(raw["fields"]))

    def events(self, kind: str) -> list[str]:
        """The details of the events of one kind, in order."""
        return [detail for event, detail in self.log if event == kind]


class WidgetTask:
    """A MiniWoB-style task. A subclass names itself, lists the scripts its page runs (files in ``pages/``),
    and writes :meth:`generate`, :meth:`score` and either :meth:`plan` (a fixed sequence of moves) or
    :meth:`oracle` (a move chosen from what the screen shows)."""

    name: ClassVar[str]
    description: ClassVar[str]
    """One line: what the agent has to do."""
    scripts: ClassVar[tuple[str, ...]] = ()

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        """An episode of ``difficulty`` drawn from ``rng``."""
        raise NotImplementedError

    def score(self, episode: Episode, state: PageState) -> float:
        """The reward in [0, 1] for the page's state; 1 only when the task is solved."""
        raise NotImplementedError

    def plan(self, episode: Episode) -> Sequence[Step]:
        """The oracle's moves in order, before ``done``."""
        raise NotImplementedError

    def oracle(self, episode: Episode, view: Elements, moves: int) -> Action:
        """The oracle's next move on the screen ``view``, after ``moves`` moves that ran."""
        steps = self.plan(episode)
        return steps[moves](view) if moves < len(steps) else DONE


def sample(rng: np.random.Generator, pool: Sequence[str], count: int) -> list[str]:
    """``count`` different entries of ``pool`` in random order."""
    return [pool[i] for i in rng.choice(len(pool), size=count, replace=False)]


def listing(names: Sequence[str]) -> str:
    """``A``, ``A and B``, ``A, B and C``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def share(parts: Sequence[bool]) -> float:
    """The share of ``parts`` that hold (a reward from several independent parts)."""
    return sum(parts) / len(parts)


def only(events: Sequence[str], target: str) -> float:
    """1 when ``target`` happened and nothing else did (a click task: the right one, no wrong one), else 0."""
    return float(bool(events) and set(events) == {target})
