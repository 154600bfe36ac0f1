"""Value pickers: a calendar with month navigation, and number fields with minus and plus buttons."""

from __future__ import annotations

import calendar
import datetime
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from agentgym.envs.gui.widgets.oracle import DONE, Action, Elements, Step, click, fill
from agentgym.envs.gui.widgets.task import Episode, PageState, WidgetTask, sample, share


class PickDate(WidgetTask):
    """Pick a date in a calendar that opens from a read-only field. 1 for the right date, 0.5 for another day
    of the right month. The calendar opens on a month of its own; the target is ``easy``: in that month;
    ``medium``: 1 or 2 months away; ``hard``: 3 to 7 months away, either way."""

    name = "PickDate"
    description = "Open a calendar, move to the right month and pick the date the instruction gives."
    scripts = ("calendar.js",)
    SHIFTS: ClassVar[dict[str, tuple[int, int]]] = {"easy": (0, 0), "medium": (1, 2), "hard": (3, 7)}
    """The fewest and most months between the calendar's first month and the target."""

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        fewest, most = self.SHIFTS[difficulty]
        year, month = int(rng.integers(2015, 2031)), int(rng.integers(1, 13))
        months = year * 12 + month - 1 + int(rng.integers(fewest, most + 1)) * int(rng.choice([-1, 1]))
        shown = datetime.date(months // 12, months % 12 + 1, 1)
        target = shown.replace(day=int(rng.integers(1, calendar.monthrange(shown.year, shown.month)[1] + 1)))
        body = (
            '<div class="datepicker form"><label>Date <input type="text" readonly data-field="Date" '
            f'placeholder="YYYY-MM-DD"></label><div class="calendar" role="dialog" aria-label="Calendar" '
            f'data-year="{year}" data-month="{month}" hidden><div class="cal-head">'
            '<button data-turn="-1" aria-label="Previous month">&lsaquo;</button><h3></h3>'
            '<button data-turn="1" aria-label="Next month">&rsaquo;</button></div>'
            '<div class="cal-grid"></div></div></div>'
        )
        return Episode(f"Pick {_spoken(target)} in the Date field's calendar.", body, target)

    def score(self, episode: Episode, state: PageState) -> float:
        picked, target = state.fields["Date"], episode.answer.isoformat()
        return 1.0 if picked == target else 0.5 if picked[:7] == target[:7] else 0.0

    def oracle(self, episode: Episode, view: Elements, moves: int) -> Action:
        target: datetime.date = episode.answer
        field = view.get("textbox", "Date")
        if field.value == target.isoformat():
            return DONE
        day = view.find("button", _spoken(target))
        if day is not None:
            return click(day.point)
        shown = next((_month(h.name) for h in view.all("heading") if _month(h.name) is not None), None)
        if shown is None:
            return click(field.point)
        later = (target.year, target.month) > shown
        return click(view.get("button", "Next month" if later else "Previous month").point)


def _spoken(day: datetime.date) -> str:
    """``March 7, 2024``: how the instruction and the calendar's day buttons name a date."""
    return f"{calendar.month_name[day.month]} {day.day}, {day.year}"


def _month(heading: str) -> tuple[int, int] | None:
    """(year, month) of a calendar heading such as ``March 2024``; ``None`` for any other text."""
    name, _, year = heading.partition(" ")
    if name not in calendar.month_name[1:] or not year.isdigit():
        return None
    return int(year), list(calendar.month_name).index(name)


class NumberSpinner(WidgetTask):
    """Set number fields that have minus and plus buttons and also take typing. ``easy``: one field, a few
    steps up; ``medium``: one field, a far value; ``hard``: two fields (half the reward each)."""

    name = "NumberSpinner"
    description = (
        "Set the number fields the instruction names to its values, with their buttons or by typing."
    )
    scripts = ("spinner.js",)
    NAMES = ("Adults", "Children", "Rooms", "Nights")
    COUNTS: ClassVar[dict[str, int]] = {"easy": 1, "medium": 1, "hard": 2}

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        targets: dict[str, int] = {}
        rows = ""
        for name in sample(rng, self.NAMES, self.COUNTS[difficulty]):
            start = int(rng.integers(0, 6))
            targets[name] = (
                start + int(rng.integers(1, 5)) if difficulty == "easy" else int(rng.integers(10, 61))
            )
            rows += (
                f'<div class="spinner"><span class="label">{name}</span>'
                f'<button aria-label="Decrease {name}" data-step="-1">&minus;</button>'
                f'<input type="text" role="spinbutton" aria-label="{name}" inputmode="numeric" '
                f'data-field="{name}" data-min="0" data-max="99" value="{start}">'
                f'<button aria-label="Increase {name}" data-step="1">+</button></div>'
            )
        wanted = " and ".join(f"{name} to {value}" for name, value in targets.items())
        return Episode(f"Set {wanted}.", rows, (difficulty, targets))

    def score(self, episode: Episode, state: PageState) -> float:
        _, targets = episode.answer
        return share([state.fields[name].strip() == str(value) for name, value in targets.items()])

    def oracle(self, episode: Episode, view: Elements, moves: int) -> Action:
        difficulty, targets = episode.answer
        if difficulty == "easy":
            for name, value in targets.items():
                if view.get("spinbutton", name).value != str(value):
                    return click(view.get("button", f"Increase {name}").point)
            return DONE
        return super().oracle(episode, view, moves)

    def plan(self, episode: Episode) -> Sequence[Step]:
        _, targets = episode.answer
        return [step for name, value in targets.items() for step in fill("spinbutton", name, str(value))]
