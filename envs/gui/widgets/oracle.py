"""How the oracle sees and acts: the element list of an observation parsed into :class:`Elements`, and the
:class:`Action` (a tool call) of each move, made by the helpers below from points on the screen."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

_LINE = re.compile(
    r'^- (?P<role>[\w-]+) "(?P<name>(?:[^"\\]|\\.)*)"(?: \[(?P<states>.*)\])? '
    r"\((?P<x>\d+), (?P<y>\d+)\)$",
    re.MULTILINE,
)
_VALUE = re.compile(r'(?:^|, )value="(?P<value>(?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r"\\(.)")


@dataclass(frozen=True)
class Element:
    """One line of the element list: role, accessible name, state words, value and centre."""

    role: str
    name: str
    x: int
    y: int
    states: frozenset[str] = frozenset()
    value: str | None = None

    @property
    def point(self) -> tuple[int, int]:
        """The centre, where a click lands on the element."""
        return self.x, self.y


class Elements:
    """The element list of an observation, parsed for the oracle."""

    def __init__(self, text: str) -> None:
        self.items = [_element(match) for match in _LINE.finditer(text)]

    def find(self, role: str, name: str) -> Element | None:
        """The first element with this role and exact name, or ``None`` when none is visible."""
        return next((e for e in self.items if e.role == role and e.name == name), None)

    def get(self, role: str, name: str) -> Element:
        """The first element with this role and exact name; ``LookupError`` when none is visible."""
        found = self.find(role, name)
        if found is None:
            raise LookupError(f'no {role} "{name}" on the screen')
        return found

    def all(self, role: str) -> list[Element]:
        """Every visible element of this role, in page order."""
        return [e for e in self.items if e.role == role]


def _element(match: re.Match[str]) -> Element:
    states = match["states"] or ""
    value = _VALUE.search(states)
    words = _VALUE.sub("", states)
    return Element(
        role=match["role"],
        name=_ESCAPE.sub(r"\1", match["name"]),
        x=int(match["x"]),
        y=int(match["y"]),
        states=frozenset(w.strip() for w in words.split(",") if w.strip()),
        value=_ESCAPE.sub(r"\1", value["value"]) if value else None,
    )


@dataclass(frozen=True)
class Action:
    """A tool call of the oracle."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


Point = tuple[int, int]
Step = Callable[[Elements], Action]
"""One move of a plan, made from the screen as it is when the move is due."""
DONE = Action("done")


def click(point: Point) -> Action:
    """Left-click at ``point``."""
    return Action("click", {"x": point[0], "y": point[1]})


def double_click(point: Point) -> Action:
    """Double-click at ``point``."""
    return Action("double_click", {"x": point[0], "y": point[1]})


def right_click(point: Point) -> Action:
    """Right-click at ``point``."""
    return Action("right_click", {"x": point[0], "y": point[1]})


def type_text(text: str) -> Action:
    """Type ``text`` at the keyboard focus."""
    return Action("type", {"text": text})


def key(combo: str) -> Action:
    """Press a key combination such as ``ctrl+a``."""
    return Action("key", {"combo": combo})


def drag(start: Point, end: Point) -> Action:
    """Drag with the left button from ``start`` to ``end``."""
    return Action("drag", {"x1": start[0], "y1": start[1], "x2": end[0], "y2": end[1]})


def scroll(point: Point, dy: int) -> Action:
    """Scroll by ``dy`` pixels (down when positive) with the pointer at ``point``."""
    return Action("scroll", {"x": point[0], "y": point[1], "dx": 0, "dy": dy})


def click_on(role: str, name: str) -> Step:
    """The move that clicks the element with this role and name."""
    return lambda view: click(view.get(role, name).point)


def fill(role: str, name: str, text: str) -> list[Step]:
    """The moves that click a text field, select what is in it and type ``text`` over it."""
    return [click_on(role, name), lambda _: key("ctrl+a"), lambda _: type_text(text)]


def scroll_to(view: Elements, listbox: str, items: Sequence[str], target: str, item_height: int) -> Action:
    """Scroll the list box named ``listbox`` (showing some of ``items``, in order) until ``target`` is in
    view."""
    shown = [items.index(option.name) for option in view.all("option") if option.name in items]
    wanted = items.index(target)
    rows = wanted - max(shown) + 3 if wanted > max(shown) else wanted - min(shown) - 3
    return scroll(view.get("listbox", listbox).point, rows * item_height)
