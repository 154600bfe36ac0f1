"""Choosing tasks: check boxes, radio buttons, a custom drop-down, tabs, collapsible sections and a modal
dialog."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import ClassVar

import numpy as np

from agentgym.envs.gui.widgets.oracle import DONE, Action, Elements, Step, click, click_on, scroll_to
from agentgym.envs.gui.widgets.task import Episode, PageState, WidgetTask, listing, only, sample, share
from agentgym.envs.gui.widgets.words import ACTIONS, COLOURS, COUNTRIES, SECTIONS, sentence
from agentgym.seeding import pick


class ClickCheckboxes(WidgetTask):
    """Leave exactly the named boxes ticked. The reward is the share of the boxes that had to change which are
    right at the end, less one for each other box left wrong (at least 0). ``easy``: 3 boxes, 1 or 2 to tick;
    ``medium``: 5, 2 or 3, one box ticked at the start; ``hard``: 8, 3 to 5, three ticked at the start."""

    name = "ClickCheckboxes"
    description = "Tick exactly the check boxes the instruction names, unticking any others."
    SIZES: ClassVar[dict[str, tuple[int, tuple[int, int], int]]] = {
        "easy": (3, (1, 2), 0),
        "medium": (5, (2, 3), 1),
        "hard": (8, (3, 5), 3),
    }
    """Boxes, the range of boxes to tick, and boxes ticked at the start."""

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        count, (fewest, most), preticked = self.SIZES[difficulty]
        names = sample(rng, list(COLOURS), count)
        targets = sample(rng, names, int(rng.integers(fewest, most + 1)))
        ticked = set(sample(rng, [n for n in names if n != targets[0]], preticked))
        boxes = "".join(
            f'<label><input type="checkbox" data-field="{n}"{" checked" * (n in ticked)}> {n}</label>'
            for n in names
        )
        wanted = {n: n in targets for n in names}
        start = {n: n in ticked for n in names}
        instruction = f"Tick {listing(targets)}, and leave every other box unticked."
        return Episode(instruction, f"<fieldset><legend>Colours</legend>{boxes}</fieldset>", (wanted, start))

    def score(self, episode: Episode, state: PageState) -> float:
        wanted, start = episode.answer
        needed = sum(start[n] != wanted[n] for n in wanted)
        wrong = sum(state.fields[n] != wanted[n] for n in wanted)
        return max(0.0, (needed - wrong) / needed)

    def oracle(self, episode: Episode, view: Elements, moves: int) -> Action:
        wanted, _ = episode.answer
        for name, tick in wanted.items():
            box = view.get("checkbox", name)
            if ("checked" in box.states) != tick:
                return click(box.point)
        return DONE


class ChooseRadio(WidgetTask):
    """Choose the named option of a radio group. ``easy``: 3 options, none chosen; ``medium``: 5, another one
    chosen at the start; ``hard``: two groups of 4 (half the reward each), others chosen at the start."""

    name = "ChooseRadio"
    description = "Choose the radio option the instruction names in each group it names."
    GROUPS: ClassVar[dict[str, tuple[str, ...]]] = {
        "Size": ("Small", "Medium", "Large", "X-Large", "XX-Large"),
        "Shipping": ("Standard", "Express", "Overnight", "Pickup", "Freight"),
        "Payment": ("Card", "Cash", "Transfer", "Voucher", "Cheque"),
        "Plan": ("Free", "Basic", "Pro", "Business", "Enterprise"),
        "Seat": ("Window", "Aisle", "Middle", "Front row", "Exit row"),
    }
    SIZES: ClassVar[dict[str, tuple[int, int, bool]]] = {
        "easy": (1, 3, False),
        "medium": (1, 5, True),
        "hard": (2, 4, True),
    }
    """Groups, options per group, and whether another option is chosen at the start."""

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        groups, options, preselect = self.SIZES[difficulty]
        targets: dict[str, str] = {}
        body = ""
        for group in sample(rng, list(self.GROUPS), groups):
            drawn = set(sample(rng, self.GROUPS[group], options))
            choices = [c for c in self.GROUPS[group] if c in drawn]
            targets[group] = pick(rng, choices)
            others = [c for c in choices if c != targets[group]]
            start = pick(rng, others) if preselect else None
            radios = "".join(
                f'<label><input type="radio" name="{group}" data-field="{group}={c}"'
                f"{' checked' * (c == start)}> {c}</label>"
                for c in choices
            )
            body += f"<fieldset><legend>{group}</legend>{radios}</fieldset>"
        wanted = " and ".join(f'"{option}" for {group}' for group, option in targets.items())
        return Episode(f"Choose {wanted}.", body, targets)

    def score(self, episode: Episode, state: PageState) -> float:
        return share([state.fields[f"{group}={option}"] is True for group, option in episode.answer.items()])

    def oracle(self, episode: Episode, view: Elements, moves: int) -> Action:
        for option in episode.answer.values():
            radio = view.get("radio", option)
            if "checked" not in radio.states:
                return click(radio.point)
        return DONE


class CustomDropdown(WidgetTask):
    """Choose the named country in a drop-down made of a button and a list box (not a native ``select``).
    ``easy``: 4 countries; ``medium``: 8; ``hard``: 24, the target past the 8th, so the list must scroll."""

    name = "CustomDropdown"
    description = "Open a custom drop-down list and choose the option the instruction names."
    scripts = ("dropdown.js",)
    SIZES: ClassVar[dict[str, tuple[int, int]]] = {"easy": (4, 0), "medium": (8, 0), "hard": (24, 8)}
    """Options, and the first index the target may have."""
    ITEM_HEIGHT = 28

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        count, first = self.SIZES[difficulty]
        options = sorted(sample(rng, COUNTRIES, count))
        target = options[int(rng.integers(first, count))]
        items = "".join(f'<div role="option" aria-selected="false">{o}</div>' for o in options)
        body = (
            '<p>Where do you live?</p><div class="dropdown" data-field="Country" data-value="">'
            '<button role="combobox" aria-label="Country" aria-expanded="false">Choose a country</button>'
            f'<div role="listbox" aria-label="Countries" hidden>{items}</div></div>'
        )
        return Episode(f'Choose "{target}" in the Country drop-down.', body, (options, target))

    def score(self, episode: Episode, state: PageState) -> float:
        return float(state.fields["Country"] == episode.answer[1])

    def oracle(self, episode: Episode, view: Elements, moves: int) -> Action:
        options, target = episode.answer
        box = view.get("combobox", "Country")
        if box.value == target:
            return DONE
        if "expanded" not in box.states:
            return click(box.point)
        option = view.find("option", target)
        return (
            click(option.point) if option else scroll_to(view, "Countries", options, target, self.ITEM_HEIGHT)
        )


class NavigateTabs(WidgetTask):
    """Open the named tab and click the named button in its panel; a click on any other panel's button fails
    the task. The first tab is open at the start. ``easy``: 2 tabs of 2 buttons; ``medium``: 4 of 3; ``hard``:
    6 of 4, the same labels in several tabs."""

    name = "NavigateTabs"
    description = "Open the tab the instruction names and click the named button inside it."
    scripts = ("tabs.js",)
    SIZES: ClassVar[dict[str, tuple[int, int, int]]] = {
        "easy": (2, 2, 20),
        "medium": (4, 3, 12),
        "hard": (6, 4, 6),
    }
    """Tabs, buttons per tab, and how many labels the buttons are drawn from."""

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        count, buttons, labels = self.SIZES[difficulty]
        tabs = sample(rng, SECTIONS, count)
        panels = [sample(rng, ACTIONS[:labels], buttons) for _ in tabs]
        index = int(rng.integers(1, count))
        target = (tabs[index], pick(rng, panels[index]))
        header = "".join(
            f'<button role="tab" id="tab-{i}" aria-controls="panel-{i}" '
            f'aria-selected="{str(i == 0).lower()}">{tab}</button>'
            for i, tab in enumerate(tabs)
        )
        body = f'<div role="tablist" aria-label="Sections">{header}</div>' + "".join(
            f'<div role="tabpanel" id="panel-{i}" aria-label="{tab}"{" hidden" * (i > 0)}>'
            + "".join(f'<button data-log="{tab}/{b}">{b}</button>' for b in panel)
            + "</div>"
            for i, (tab, panel) in enumerate(zip(tabs, panels))
        )
        return Episode(f'Open the "{target[0]}" tab and click "{target[1]}" in it.', body, target)

    def score(self, episode: Episode, state: PageState) -> float:
        return only(state.events("click"), "/".join(episode.answer))

    def plan(self, episode: Episode) -> Sequence[Step]:
        tab, button = episode.answer
        return [click_on("tab", tab), click_on("button", button)]


class ExpandSection(WidgetTask):
    """Expand the named collapsible section and click the named link inside it; a click on another section's
    link fails the task. All sections start collapsed. ``easy``: 2 sections of 2 links; ``medium``: 4 of 3;
    ``hard``: 6 of 3, the same links in several sections."""

    name = "ExpandSection"
    description = "Expand the collapsible section the instruction names and click the named link inside it."
    scripts = ("accordion.js",)
    SIZES: ClassVar[dict[str, tuple[int, int, int]]] = {
        "easy": (2, 2, 20),
        "medium": (4, 3, 12),
        "hard": (6, 3, 5),
    }
    """Sections, links per section, and how many labels the links are drawn from."""

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        count, links, labels = self.SIZES[difficulty]
        sections = sample(rng, SECTIONS, count)
        contents = [sample(rng, ACTIONS[:labels], links) for _ in sections]
        index = int(rng.integers(count))
        target = (sections[index], pick(rng, contents[index]))
        body = (
            '<div class="accordion">'
            + "".join(
                f'<button class="head" id="head-{i}" aria-expanded="false" aria-controls="section-{i}">'
                f"{section}</button>"
                f'<div role="region" id="section-{i}" aria-labelledby="head-{i}" hidden>'
                + "".join(f'<a href="#" data-log="{section}/{link}">{link}</a>' for link in content)
                + "</div>"
                for i, (section, content) in enumerate(zip(sections, contents))
            )
            + "</div>"
        )
        return Episode(f'Expand the "{target[0]}" section and click "{target[1]}" in it.', body, target)

    def score(self, episode: Episode, state: PageState) -> float:
        return only(state.events("click"), "/".join(episode.answer))

    def plan(self, episode: Episode) -> Sequence[Step]:
        section, link = episode.answer
        return [click_on("button", section), click_on("link", link)]


class CloseDialog(WidgetTask):
    """Answer a modal dialog that covers the page with the named button. ``easy``: the dialog has one button;
    ``medium``: three; ``hard``: three, then a named button of the page must be clicked (half the reward
    each)."""

    name = "CloseDialog"
    description = "Close a modal dialog with the button the instruction names (then use the page behind it)."
    scripts = ("dialog.js",)
    DIALOGS: ClassVar[tuple[tuple[str, str, tuple[str, ...]], ...]] = (
        (
            "Cookies",
            "This site uses cookies to remember your settings.",
            ("Accept all", "Reject all", "Choose"),
        ),
        ("Unsaved changes", "Some of your changes are not saved yet.", ("Save", "Discard", "Keep editing")),
        ("Update ready", "A new version is ready to install.", ("Install now", "Later", "Skip this one")),
        ("Newsletter", "Get our news once a week by mail.", ("Subscribe", "No thanks", "Remind me")),
        ("Delete file?", "The file will be removed for good.", ("Delete", "Keep it", "Move to bin")),
    )
    DISMISS = ("OK", "Got it", "Close", "Dismiss")

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        title, text, choices = pick(rng, self.DIALOGS)
        buttons = [pick(rng, self.DISMISS)] if difficulty == "easy" else list(choices)
        answer = pick(rng, buttons)
        page = sample(rng, ACTIONS, 4)
        then = pick(rng, page) if difficulty == "hard" else None
        dialog = "".join(f'<button data-log="dialog/{b}">{b}</button>' for b in buttons)
        body = (
            '<div class="page-buttons">'
            + "".join(f'<button data-log="page/{b}">{b}</button>' for b in page)
            + f'</div><p>{sentence(rng, 12)}</p><div class="overlay"><div class="modal" role="dialog" '
            f'aria-label="{escape(title)}"><h3>{escape(title)}</h3><p>{escape(text)}</p>'
            f'<div class="actions">{dialog}</div></div></div>'
        )
        instruction = f'Answer the dialog with "{answer}"' + (
            f', then click "{then}" on the page.' if then else "."
        )
        return Episode(instruction, body, (answer, then))

    def score(self, episode: Episode, state: PageState) -> float:
        answer, then = episode.answer
        clicks = state.events("click")
        answered = [c.removeprefix("dialog/") for c in clicks if c.startswith("dialog/")] == [answer]
        if then is None:
            return float(answered)
        return share([answered, only([c for c in clicks if c.startswith("page/")], f"page/{then}") == 1.0])

    def plan(self, episode: Episode) -> Sequence[Step]:
        answer, then = episode.answer
        return [click_on("button", answer)] + ([click_on("button", then)] if then else [])
