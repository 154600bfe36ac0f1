"""Keyboard tasks: enter and edit text, passwords, a login form, a keyboard-only form, copy and paste,
shortcuts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import ClassVar

import numpy as np

from agentgym.envs.gui.widgets.oracle import (
    Action,
    Element,
    Step,
    click_on,
    double_click,
    drag,
    fill,
    key,
    type_text,
)
from agentgym.envs.gui.widgets.task import Episode, PageState, WidgetTask, sample, share
from agentgym.envs.gui.widgets.words import (
    CODE_CHARACTERS,
    CONTENT,
    FIELDS,
    FIRST_NAMES,
    ITEMS,
    LAST_NAMES,
    LETTERS,
    SYMBOLS,
    TOPICS,
    code,
    sentence,
)
from agentgym.seeding import pick


def _fields(values: dict[str, str], kind: str = "text") -> str:
    """Labelled text fields, each a ``data-field`` named by its label and holding its value."""
    return "".join(
        f'<label>{label} <input type="{kind}" data-field="{label}" value="{escape(value)}"></label>'
        for label, value in values.items()
    )


def _words(rng: np.random.Generator, count: int) -> str:
    return " ".join(sample(rng, CONTENT, count))


def _typing(values: dict[str, str], role: str = "textbox") -> list[Step]:
    """The moves that click each empty field and type its value."""
    return [
        step
        for label, value in values.items()
        for step in (click_on(role, label), lambda _, v=value: type_text(v))
    ]


def _submitted(state: PageState, expected: dict[str, object]) -> float:
    """The share of ``expected`` form values right in the last submission (0 when nothing was sent)."""
    sent = state.events("submit")
    if not sent:
        return 0.0
    last = json.loads(sent[-1])
    return share([last.get(name) == value for name, value in expected.items()])


class EnterText(WidgetTask):
    """Type the given text into the named field and leave the others empty. ``easy``: one field, one word;
    ``medium``: three fields, two words; ``hard``: four fields, text with capitals, digits and symbols."""

    name = "EnterText"
    description = "Type the text the instruction gives into the field it names."
    COUNTS: ClassVar[dict[str, int]] = {"easy": 1, "medium": 3, "hard": 4}

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        labels = sample(rng, FIELDS, self.COUNTS[difficulty])
        target = pick(rng, labels)
        if difficulty == "hard":
            text = f"{pick(rng, ITEMS)} {code(rng, 4)}-{rng.integers(10, 100)}{pick(rng, SYMBOLS)}"
        else:
            text = _words(rng, 1 if difficulty == "easy" else 2)
        body = f'<div class="form">{_fields(dict.fromkeys(labels, ""))}</div>'
        return Episode(f'Type "{text}" into the {target} field.', body, (target, text))

    def score(self, episode: Episode, state: PageState) -> float:
        target, text = episode.answer
        return float(all(value == (text if label == target else "") for label, value in state.fields.items()))

    def plan(self, episode: Episode) -> Sequence[Step]:
        target, text = episode.answer
        return _typing({target: text})


class EditText(WidgetTask):
    """Replace the text of the named fields; a change to any other field scores 0. ``easy``: one field;
    ``medium``: two, one to edit; ``hard``: three, two to edit (half the reward each)."""

    name = "EditText"
    description = "Replace the text already in the named fields with the text the instruction gives."
    SIZES: ClassVar[dict[str, tuple[int, int]]] = {"easy": (1, 1), "medium": (2, 1), "hard": (3, 2)}
    """Fields, and fields to edit."""

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        count, edits = self.SIZES[difficulty]
        labels = sample(rng, FIELDS, count)
        start = {label: _words(rng, 2) for label in labels}
        targets = {
            label: f"{pick(rng, FIRST_NAMES)} {pick(rng, LAST_NAMES)}" for label in sample(rng, labels, edits)
        }
        wanted = " and ".join(f'{label} with "{text}"' for label, text in targets.items())
        body = f'<div class="form">{_fields(start)}</div>'
        return Episode(f"Replace the text in {wanted}.", body, (start, targets))

    def score(self, episode: Episode, state: PageState) -> float:
        start, targets = episode.answer
        if any(state.fields[label] != value for label, value in start.items() if label not in targets):
            return 0.0
        return share([state.fields[label] == text for label, text in targets.items()])

    def plan(self, episode: Episode) -> Sequence[Step]:
        _, targets = episode.answer
        return [step for label, text in targets.items() for step in fill("textbox", label, text)]


class EnterPassword(WidgetTask):
    """Enter a password twice (half the reward per field). ``easy``: 5 small letters; ``medium``: 8 letters
    and digits; ``hard``: 10 characters with symbols, and the current password first (a third each)."""

    name = "EnterPassword"
    description = "Enter the password the instruction gives in both password fields."

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        alphabet = {
            "easy": LETTERS,
            "medium": LETTERS + CODE_CHARACTERS,
            "hard": LETTERS + CODE_CHARACTERS + SYMBOLS,
        }
        length = {"easy": 5, "medium": 8, "hard": 10}[difficulty]
        password = code(rng, length, alphabet[difficulty])
        if difficulty == "hard":
            old = code(rng, 8, LETTERS)
            values = {"Current password": old, "New password": password, "Confirm new password": password}
            instruction = f'Change your password from "{old}" to "{password}" (type the new one twice).'
        else:
            values = {"Password": password, "Confirm password": password}
            instruction = f'Enter the password "{password}" in both fields.'
        body = f'<div class="form">{_fields(dict.fromkeys(values, ""), "password")}</div>'
        return Episode(instruction, body, values)

    def score(self, episode: Episode, state: PageState) -> float:
        return share([state.fields[label] == value for label, value in episode.answer.items()])

    def plan(self, episode: Episode) -> Sequence[Step]:
        return _typing(episode.answer)


class LoginForm(WidgetTask):
    """Log in through a form: the reward is the share of the form's values right in the last submission (0 if
    the form was never sent). ``easy``: user name and password; ``medium``: also tick "Remember me"; ``hard``:
    also a security code."""

    name = "LoginForm"
    description = "Fill in a login form with the credentials the instruction gives and send it."
    scripts = ("forms.js",)

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        user = f"{pick(rng, FIRST_NAMES).lower()}.{pick(rng, LAST_NAMES).lower()}"
        expected: dict[str, object] = {"username": user, "password": code(rng, 8, LETTERS + CODE_CHARACTERS)}
        instruction = f'Log in as "{user}" with the password "{expected["password"]}"'
        fields = (
            '<label>Username <input type="text" name="username" autocomplete="off"></label>'
            '<label>Password <input type="password" name="password" autocomplete="off"></label>'
        )
        if difficulty == "hard":
            expected["code"] = code(rng, 6, "0123456789")
            instruction += f", with the security code {expected['code']}"
            fields += '<label>Security code <input type="text" name="code" autocomplete="off"></label>'
        if difficulty != "easy":
            expected["remember"] = True
            instruction += ', and tick "Remember me"'
            fields += '<label class="check"><input type="checkbox" name="remember"> Remember me</label>'
        body = f'<form class="form">{fields}<button type="submit">Log in</button></form>'
        return Episode(instruction + ".", body, expected)

    def score(self, episode: Episode, state: PageState) -> float:
        return _submitted(state, episode.answer)

    def plan(self, episode: Episode) -> Sequence[Step]:
        expected = episode.answer
        typed = {"Username": expected["username"], "Password": expected["password"]}
        if "code" in expected:
            typed["Security code"] = expected["code"]
        ticks = [click_on("checkbox", "Remember me")] if "remember" in expected else []
        return [*_typing(typed), *ticks, click_on("button", "Log in")]


class KeyboardForm(WidgetTask):
    """Fill a form and send it with Enter; it has no button, and the first field has the focus. The reward is
    the share of fields right in the last submission. ``easy``: one field; ``medium``: two (Tab to the next);
    ``hard``: three."""

    name = "KeyboardForm"
    description = "Fill a form from the keyboard, moving with Tab, and send it by pressing Enter."
    scripts = ("forms.js",)
    COUNTS: ClassVar[dict[str, int]] = {"easy": 1, "medium": 2, "hard": 3}

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        labels = sample(rng, FIELDS, self.COUNTS[difficulty])
        values = {label: _words(rng, 1) for label in labels}
        inputs = "".join(
            f'<label>{label} <input type="text" name="{label}"{" autofocus" * (i == 0)}></label>'
            for i, label in enumerate(labels)
        )
        body = (
            f'<form class="form" data-enter-submits>{inputs}'
            '<p class="hint">Press Enter to send; Tab moves to the next field. There is no button.</p></form>'
        )
        wanted = ", ".join(f'{label} "{value}"' for label, value in values.items())
        return Episode(f"Fill in {wanted}, then press Enter to send the form.", body, values)

    def score(self, episode: Episode, state: PageState) -> float:
        return _submitted(state, episode.answer)

    def plan(self, episode: Episode) -> Sequence[Step]:
        steps: list[Step] = []
        for value in episode.answer.values():
            if steps:
                steps.append(lambda _: key("Tab"))
            steps.append(lambda _, v=value: type_text(v))
        return [*steps, lambda _: key("Enter")]


class CopyPaste(WidgetTask):
    """Copy text shown on the page and paste it into the Answer field: 1 when it arrived there by pasting, 0.5
    when it was typed by hand. The page keeps its own clipboard (Chromium's is shared by every page).
    ``easy``: a code in a read-only field (click, select all, copy); ``medium``: a code on a line of its own
    among sentences (double-click selects it); ``hard``: the sentence that mentions a given word (drag across
    the line to select it)."""

    name = "CopyPaste"
    description = (
        "Select text on the page, copy it with ctrl+c and paste it into the answer field with ctrl+v."
    )
    scripts = ("clipboard.js",)
    LINE_HALF_WIDTH = 226
    """Half the width of a line of text (``.lines p``), less two pixels: where a drag across a line starts and
    ends."""

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        answer = '<div class="form"><label>Answer <input type="text" data-field="Answer"></label></div>'
        if difficulty == "easy":
            text = code(rng, 8)
            source = (
                f'<div class="form"><label>Code <input type="text" readonly value="{text}"></label></div>'
            )
            return Episode(
                'Copy the code from the "Code" field and paste it into the Answer field.',
                source + answer,
                (difficulty, text),
            )
        lines = [sentence(rng, 5) for _ in range(3)]
        if difficulty == "medium":
            text = code(rng, 8)
            lines.insert(int(rng.integers(4)), text)
            instruction = "Copy the code in bold and paste it into the Answer field."
        else:
            topics = sample(rng, TOPICS, 3)
            lines = [f"{line[:-1]} {topic}." for line, topic in zip(lines, topics)]
            text = pick(rng, lines)
            word = text.split()[-1].rstrip(".")
            instruction = f'Copy the sentence with the word "{word}" and paste it into the Answer field.'
        paragraphs = "".join(
            f'<p class="code">{line}</p>' if line == text and difficulty == "medium" else f"<p>{line}</p>"
            for line in lines
        )
        return Episode(instruction, f'<div class="lines">{paragraphs}</div>' + answer, (difficulty, text))

    def score(self, episode: Episode, state: PageState) -> float:
        _, text = episode.answer
        if " ".join(state.fields["Answer"].split()) != text:
            return 0.0
        return 1.0 if any(" ".join(p.split()) == text for p in state.events("paste")) else 0.5

    def plan(self, episode: Episode) -> Sequence[Step]:
        difficulty, text = episode.answer
        select: list[Step] = {
            "easy": [click_on("textbox", "Code"), lambda _: key("ctrl+a")],
            "medium": [lambda view: double_click(view.get("text", text).point)],
            "hard": [lambda view: _across(view.get("text", text), self.LINE_HALF_WIDTH)],
        }[difficulty]
        return [*select, lambda _: key("ctrl+c"), click_on("textbox", "Answer"), lambda _: key("ctrl+v")]


def _across(line: Element, half_width: int) -> Action:
    """A drag from the left end of a line of text to its right end, which selects all of it."""
    return drag((line.x - half_width, line.y), (line.x + half_width, line.y))


class PressShortcut(WidgetTask):
    """Run a command through its keyboard shortcut, listed on the page; only the first combination pressed
    counts. ``easy``: 2 commands with Ctrl; ``medium``: 4, also Ctrl+Shift; ``hard``: 6, also Alt."""

    name = "PressShortcut"
    description = "Press the keyboard shortcut of the command the instruction names (the page lists them)."
    scripts = ("shortcuts.js",)
    SHORTCUTS: ClassVar[tuple[dict[str, str], ...]] = (
        {
            "Save": "ctrl+s",
            "Open": "ctrl+o",
            "Bold": "ctrl+b",
            "Italic": "ctrl+i",
            "Underline": "ctrl+u",
            "Find": "ctrl+f",
            "Undo": "ctrl+z",
            "Insert link": "ctrl+k",
            "Centre text": "ctrl+e",
        },
        {
            "Save as": "ctrl+shift+s",
            "Export": "ctrl+shift+e",
            "Word count": "ctrl+shift+c",
            "Bullet list": "ctrl+shift+l",
            "Redo": "ctrl+shift+z",
        },
        {"Insert date": "alt+shift+d", "Help": "alt+h", "View menu": "alt+v", "Comment": "alt+m"},
    )
    """Commands by kind: Ctrl, Ctrl+Shift, Alt."""
    KINDS: ClassVar[dict[str, int]] = {"easy": 1, "medium": 2, "hard": 3}

    def generate(self, rng: np.random.Generator, difficulty: str) -> Episode:
        commands = {
            name: kind[name]
            for kind in self.SHORTCUTS[: self.KINDS[difficulty]]
            for name in sample(rng, list(kind), 2)
        }
        names = sample(rng, list(commands), len(commands))
        target = pick(rng, names)
        legend = "".join(
            f'<li data-command="{n}" data-combo="{commands[n]}">{n} <kbd>'
            f"{'+'.join(part.capitalize() for part in commands[n].split('+'))}</kbd></li>"
            for n in names
        )
        body = (
            f'<ul class="shortcuts">{legend}</ul>'
            f'<div class="document">{sentence(rng, 12)} {sentence(rng, 10)}</div><div class="status"></div>'
        )
        return Episode(f'Use the keyboard shortcut for "{target}".', body, commands[target])

    def score(self, episode: Episode, state: PageState) -> float:
        pressed = state.events("shortcut")
        return float(bool(pressed) and pressed[0] == episode.answer)

    def plan(self, episode: Episode) -> Sequence[Step]:
        return [lambda _: key(episode.answer)]
