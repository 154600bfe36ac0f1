"""Dragging tasks: reorder a list (HTML5 drag and drop), move boxes onto zones, set sliders (pointer
events)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import ClassVar

import numpy as np

from agentgym.envs.gui.widgets.oracle import DONE, Action, Element, Elements, Step, click, drag
from agentgym.envs.gui.widgets.task import Episode, PageState, WidgetTask, listing, sample, share
from agentgym.envs.gui.widgets.words import COLOURS, ITEMS


class ReorderList(WidgetTask):
    """Drag the items of a list into the order asked for. An item dropped on the upper half of another goes
    before it, on the lower half after it. The reward is the share of the positions wrong at the start that
    are right at the end, less one for each position broken (at least 0). ``easy``: 3 items; ``medium``: 4;
    ``hard``: 6, to be sorted alphabetically (the order is not spelled out)."""

    name = "ReorderList"
    description = "Drag the items of a list (HTML5 drag and drop) into the order the instruction asks for."
    scripts = ("reorder.js",)
    COUNTS: ClassVar[dict[str, int]] = {"easy": 3, "medium": 4, "hard": 6}
    ITEM_HEIGHT = 34

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        items = sample(rng, ITEMS, self.COUNTS[difficulty])
        target = sorted(items) if difficulty == "hard" else items
        start = list(target)
        while start == target:
            start = [target[i] for i in rng.permutation(len(target))]
        rows = "".join(f'<li draggable="true" data-item="{item}">{item}</li>' for item in start)
        body = (
            f'<ul class="reorder" role="list" aria-label="Items" data-field="order" '
            f'data-value="{escape(json.dumps(start))}">{rows}</ul>'
        )
        instruction = (
            "Sort the list alphabetically (A at the top) by dragging its items."
            if difficulty == "hard"
            else f"Drag the items into this order, top to bottom: {', '.join(target)}."
        )
        return Episode(instruction, body, (start, target))

    def score(self, episode: Episode, state: PageState) -> float:
        start, target = episode.answer
        order = json.loads(state.fields["order"])
        wrong_at_start = sum(a != b for a, b in zip(start, target))
        wrong = sum(a != b for a, b in zip(order, target))
        return max(0.0, (wrong_at_start - wrong) / wrong_at_start)

    def oracle(self, episode: Episode, view: Elements, moves: int) -> Action:
        _, target = episode.answer
        rows = sorted(view.all("listitem"), key=lambda row: row.y)
        names = [row.name for row in rows]
        for index, item in enumerate(target):
            if names[index] != item:
                above = rows[index]
                return drag(rows[names.index(item)].point, (above.x, above.y - self.ITEM_HEIGHT // 4))
        return DONE


class DragToTarget(WidgetTask):
    """Move coloured boxes onto lettered zones with the pointer (pointer events, not HTML5 drag and drop); a
    box is in a zone when its centre is. ``easy``: one box, one zone; ``medium``: two of each, one box named;
    ``hard``: three of each, every box to its own zone (a third of the reward each)."""

    name = "DragToTarget"
    description = "Drag the named boxes onto the named target zones."
    scripts = ("drag.js",)
    SIZES: ClassVar[dict[str, tuple[int, int]]] = {"easy": (1, 1), "medium": (2, 1), "hard": (3, 3)}
    """Boxes (and zones), and boxes to move."""
    ZONE_SLOTS = ((205, 4), (335, 4), (205, 97), (335, 97), (205, 190), (335, 190))
    BOX_SLOTS = (
        (20, 30),
        (90, 30),
        (150, 30),
        (20, 130),
        (90, 130),
        (150, 130),
        (20, 220),
        (90, 220),
        (150, 220),
    )

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        count, moved = self.SIZES[difficulty]
        colours = sample(rng, list(COLOURS), count)
        zones = [chr(ord("A") + i) for i in range(count)]
        zone_slots = rng.choice(len(self.ZONE_SLOTS), size=count, replace=False)
        box_slots = rng.choice(len(self.BOX_SLOTS), size=count, replace=False)
        placed = [zones[i] for i in rng.permutation(count)]
        assignment = dict(list(zip(colours, placed))[:moved])
        board = "".join(
            f'<div class="zone" role="region" aria-label="Zone {zone}" data-zone="{zone}" style="left: '
            f'{self.ZONE_SLOTS[slot][0]}px; top: {self.ZONE_SLOTS[slot][1]}px">'
            f'<span aria-hidden="true">Zone {zone}</span></div>'
            for zone, slot in zip(zones, zone_slots)
        )
        board += "".join(
            f'<div class="box" role="img" aria-label="{colour} box" aria-grabbed="false" '
            f'data-field="{colour} box" data-value="" style="left: {self.BOX_SLOTS[slot][0]}px; '
            f'top: {self.BOX_SLOTS[slot][1]}px; background: {COLOURS[colour]}">'
            f'<span aria-hidden="true">{colour}</span></div>'
            for colour, slot in zip(colours, box_slots)
        )
        wanted = listing([f"the {colour} box into zone {zone}" for colour, zone in assignment.items()])
        return Episode(f"Drag {wanted}.", f'<div class="board">{board}</div>', assignment)

    def score(self, episode: Episode, state: PageState) -> float:
        return share([state.fields[f"{colour} box"] == zone for colour, zone in episode.answer.items()])

    def plan(self, episode: Episode) -> Sequence[Step]:
        return [
            lambda view, c=colour, z=zone: drag(
                view.get("img", f"{c} box").point, view.get("region", f"Zone {z}").point
            )
            for colour, zone in episode.answer.items()
        ]


class SetSlider(WidgetTask):
    """Set sliders to given values by pressing or dragging on their 300-pixel tracks (or with the arrow keys).
    ``easy``: one slider from 0 to 100 in steps of 10; ``medium``: 0 to 200 in steps of 5; ``hard``: two
    sliders from 0 to 200 in steps of 1 (half the reward each)."""

    name = "SetSlider"
    description = "Move the named sliders to the values the instruction gives."
    scripts = ("slider.js",)
    SIZES: ClassVar[dict[str, tuple[int, int, int]]] = {
        "easy": (1, 100, 10),
        "medium": (1, 200, 5),
        "hard": (2, 200, 1),
    }
    """Sliders, the largest value, and the step."""
    NAMES = ("Volume", "Brightness", "Speed", "Contrast")
    TRACK_WIDTH = 300

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        count, top, step = self.SIZES[difficulty]
        stops = top // step
        targets: dict[str, int] = {}
        rows = ""
        for name in sample(rng, self.NAMES, count):
            target, start = (int(v) * step for v in rng.choice(stops, size=2, replace=False))
            targets[name] = target
            rows += (
                f'<div class="slider-row"><span class="label">{name}</span>'
                f'<div class="slider" role="slider" tabindex="0" aria-label="{name}" aria-valuemin="0" '
                f'aria-valuemax="{top}" data-step="{step}" '
                f'data-field="{name}" data-value="{start}">'
                '<div class="fill"></div><div class="thumb"></div>'
                "</div><output></output></div>"
            )
        wanted = " and ".join(f"{name} to {value}" for name, value in targets.items())
        return Episode(f"Set {wanted}.", rows, (top, targets))

    def score(self, episode: Episode, state: PageState) -> float:
        _, targets = episode.answer
        return share([int(state.fields[name]) == value for name, value in targets.items()])

    def plan(self, episode: Episode) -> Sequence[Step]:
        top, targets = episode.answer
        return [
            lambda view, n=name, v=value: click(self._spot(view.get("slider", n), v / top))
            for name, value in targets.items()
        ]

    def _spot(self, slider: Element, fraction: float) -> tuple[int, int]:
        """The point of the track that stands for ``fraction`` of the range (the track's centre is listed)."""
        return slider.x - self.TRACK_WIDTH // 2 + round(fraction * self.TRACK_WIDTH), slider.y
