"""Pointing tasks: click a button or a link, double-click a file, use a context menu, find an item down a
list."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import ClassVar

import numpy as np

from agentgym.envs.gui.widgets.oracle import (
    DONE,
    Action,
    Elements,
    Step,
    click,
    click_on,
    double_click,
    right_click,
    scroll_to,
)
from agentgym.envs.gui.widgets.task import Episode, PageState, WidgetTask, only, sample
from agentgym.envs.gui.widgets.words import (
    ACTIONS,
    FILE_STEMS,
    FILE_TYPES,
    FILLER,
    FIRST_NAMES,
    ITEMS,
    LAST_NAMES,
)
from agentgym.seeding import pick


class ClickButton(WidgetTask):
    """Click the named button; clicking any other one fails the task. Buttons sit at random cells of a 4x6
    grid: ``easy`` 2 of them, ``medium`` 5, ``hard`` 12."""

    name = "ClickButton"
    description = "Click the button the instruction names, among others scattered on the page."
    COUNTS: ClassVar[dict[str, int]] = {"easy": 2, "medium": 5, "hard": 12}

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        labels = sample(rng, ACTIONS, self.COUNTS[difficulty])
        target = pick(rng, labels)
        cells = rng.choice(24, size=len(labels), replace=False)
        buttons = "".join(
            f'<button data-log="{escape(label)}" style="grid-area: {cell // 4 + 1} / {cell % 4 + 1}">'
            f"{escape(label)}</button>"
            for label, cell in zip(labels, cells)
        )
        return Episode(f'Click the "{target}" button.', f'<div class="scatter">{buttons}</div>', target)

    def score(self, episode: Episode, state: PageState) -> float:
        return only(state.events("click"), episode.answer)

    def plan(self, episode: Episode) -> Sequence[Step]:
        return [click_on("button", episode.answer)]


class ClickLink(WidgetTask):
    """Click the named link inside running text; clicking another link fails the task. ``easy``: 2 links in
    one paragraph; ``medium``: 4 in two; ``hard``: 8 in three."""

    name = "ClickLink"
    description = "Click the link the instruction names inside paragraphs of text."
    LAYOUT: ClassVar[dict[str, tuple[int, int]]] = {"easy": (1, 2), "medium": (2, 4), "hard": (3, 8)}
    """Paragraphs and links."""

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        paragraphs, count = self.LAYOUT[difficulty]
        links = sample(rng, ITEMS, count)
        target = pick(rng, links)
        body = "".join(
            f"<p>{_paragraph(rng, list(part))}</p>" for part in np.array_split(np.array(links), paragraphs)
        )
        return Episode(f'Click the link "{target}".', body, target)

    def score(self, episode: Episode, state: PageState) -> float:
        return only(state.events("click"), episode.answer)

    def plan(self, episode: Episode) -> Sequence[Step]:
        return [click_on("link", episode.answer)]


def _paragraph(rng: np.random.Generator, links: list[str]) -> str:
    words = [FILLER[i] for i in rng.integers(len(FILLER), size=14)]
    words[0] = words[0].capitalize()
    for position, link in sorted(
        zip(rng.choice(len(words), size=len(links), replace=False), links), reverse=True
    ):
        words.insert(int(position), f'<a href="#" data-log="{escape(link)}">{escape(link)}</a>')
    return " ".join(words) + "."


class DoubleClickItem(WidgetTask):
    """Open the named file by double-clicking it (a single click only selects it); opening another file fails
    the task. ``easy``: 3 files; ``medium``: 6; ``hard``: 12 that share three stems (``report-2.pdf``)."""

    name = "DoubleClickItem"
    description = "Open the file the instruction names by double-clicking it."
    scripts = ("files.js",)
    COUNTS: ClassVar[dict[str, int]] = {"easy": 3, "medium": 6, "hard": 12}

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        files = _file_names(rng, self.COUNTS[difficulty], similar=difficulty == "hard")
        target = pick(rng, files)
        return Episode(f'Open the file "{target}" by double-clicking it.', _file_grid(files), target)

    def score(self, episode: Episode, state: PageState) -> float:
        return only(state.events("open"), episode.answer)

    def plan(self, episode: Episode) -> Sequence[Step]:
        return [lambda view: double_click(view.get("option", episode.answer).point)]


class ContextMenu(WidgetTask):
    """Right-click the named file and choose the named command from its menu. The first command chosen is
    scored: half for the right file, half for the right command. ``easy``: 2 files, 3 commands; ``medium``: 4
    and 5; ``hard``: 8 and 8."""

    name = "ContextMenu"
    description = "Right-click a file and choose the command the instruction names from its context menu."
    scripts = ("files.js",)
    COMMANDS = ("Open", "Rename", "Duplicate", "Move", "Copy link", "Share", "Download", "Delete")
    SIZES: ClassVar[dict[str, tuple[int, int]]] = {"easy": (2, 3), "medium": (4, 5), "hard": (8, 8)}
    """Files and commands."""

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        file_count, command_count = self.SIZES[difficulty]
        files = _file_names(rng, file_count, similar=False)
        commands = [
            self.COMMANDS[i] for i in sorted(rng.choice(len(self.COMMANDS), command_count, replace=False))
        ]
        target = (pick(rng, files), pick(rng, commands))
        menu = "".join(f'<div role="menuitem">{escape(command)}</div>' for command in commands)
        body = _file_grid(files) + f'<div role="menu" hidden>{menu}</div>'
        return Episode(f'Right-click "{target[0]}" and choose "{target[1]}".', body, target)

    def score(self, episode: Episode, state: PageState) -> float:
        commands = state.events("command")
        if not commands:
            return 0.0
        file, _, command = commands[0].partition(": ")
        return ((file == episode.answer[0]) + (command == episode.answer[1])) / 2

    def plan(self, episode: Episode) -> Sequence[Step]:
        file, command = episode.answer
        return [lambda view: right_click(view.get("option", file).point), click_on("menuitem", command)]


def _file_names(rng: np.random.Generator, count: int, *, similar: bool) -> list[str]:
    """``count`` different file names; ``similar``: from three stems with numbers (``report-4.pdf``)."""
    if not similar:
        return [f"{stem}.{pick(rng, FILE_TYPES)}" for stem in sample(rng, FILE_STEMS, count)]
    stems = sample(rng, FILE_STEMS, 3)
    variants = rng.choice(len(stems) * 6, size=count, replace=False)
    return [f"{stems[v // 6]}-{v % 6 + 1}.{pick(rng, FILE_TYPES)}" for v in variants]


def _file_grid(files: list[str]) -> str:
    tiles = "".join(
        f'<div role="option" aria-selected="false" data-selectable data-file="{escape(f)}">{escape(f)}</div>'
        for f in files
    )
    return f'<div class="files" role="listbox" aria-label="Files">{tiles}</div><div class="status"></div>'


class ScrollToItem(WidgetTask):
    """Find the named contact in an alphabetical list that scrolls, and click it; clicking another contact
    fails the task. ``easy``: 20 contacts, the target past the 10th; ``medium``: 50, past the 15th; ``hard``:
    120, past the 50th."""

    name = "ScrollToItem"
    description = "Scroll a list of contacts to find the one the instruction names, and click it."
    SIZES: ClassVar[dict[str, tuple[int, int]]] = {"easy": (20, 10), "medium": (50, 15), "hard": (120, 50)}
    """Contacts, and the first index the target may have."""
    ITEM_HEIGHT = 28

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        count, first = self.SIZES[difficulty]
        pairs = rng.choice(len(FIRST_NAMES) * len(LAST_NAMES), size=count, replace=False)
        names = sorted(
            f"{FIRST_NAMES[p // len(LAST_NAMES)]} {LAST_NAMES[p % len(LAST_NAMES)]}" for p in pairs
        )
        target = names[int(rng.integers(first, count))]
        items = "".join(
            f'<div role="option" aria-selected="false" data-selectable data-log="{escape(name)}">'
            f"{escape(name)}</div>"
            for name in names
        )
        body = f'<div class="scroller" role="listbox" aria-label="Contacts">{items}</div>'
        return Episode(f'Scroll the contacts to "{target}" and click it.', body, (names, target))

    def score(self, episode: Episode, state: PageState) -> float:
        return only(state.events("click"), episode.answer[1])

    def oracle(self, episode: Episode, view: Elements, moves: int) -> Action:
        names, target = episode.answer
        item = view.find("option", target)
        if item is not None:
            return DONE if "selected" in item.states else click(item.point)
        return scroll_to(view, "Contacts", names, target, self.ITEM_HEIGHT)
