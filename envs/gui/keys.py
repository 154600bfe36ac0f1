"""Key combinations as agents write them ("ctrl+s", "Control+Shift+T", "Enter") and as each screen sends them.

An agent may write a combination the way xdotool, Playwright or a person does; :func:`parse_combo` reads any
of those into canonical key names, which :func:`playwright_combo` and :func:`xdotool_combo` spell for the
browser and the X desktop.
"""

from __future__ import annotations

from agentgym.errors import ToolError

KEYS: dict[str, tuple[str, str]] = {
    "ctrl": ("Control", "ctrl"),
    "shift": ("Shift", "shift"),
    "alt": ("Alt", "alt"),
    "super": ("Meta", "super"),
    "enter": ("Enter", "Return"),
    "tab": ("Tab", "Tab"),
    "escape": ("Escape", "Escape"),
    "backspace": ("Backspace", "BackSpace"),
    "delete": ("Delete", "Delete"),
    "space": ("Space", "space"),
    "up": ("ArrowUp", "Up"),
    "down": ("ArrowDown", "Down"),
    "left": ("ArrowLeft", "Left"),
    "right": ("ArrowRight", "Right"),
    "home": ("Home", "Home"),
    "end": ("End", "End"),
    "pageup": ("PageUp", "Prior"),
    "pagedown": ("PageDown", "Next"),
    "insert": ("Insert", "Insert"),
    **{f"f{n}": (f"F{n}", f"F{n}") for n in range(1, 13)},
}
"""Canonical key name -> (Playwright's name, xdotool's keysym)."""
ALIASES = {
    "control": "ctrl", "ctl": "ctrl", "meta": "super", "cmd": "super", "win": "super", "return": "enter",
    "esc": "escape", "del": "delete", "arrowup": "up", "arrowdown": "down", "arrowleft": "left",
    "arrowright": "right", "prior": "pageup", "next": "pagedown", "page_up": "pageup", "page_down": "pagedown",
    "pgup": "pageup", "pgdn": "pagedown", "ins": "insert",
}
MODIFIERS = frozenset({"ctrl", "shift", "alt", "super"})
_PUNCTUATION_KEYSYMS = {
    "-": "minus", "=": "equal", "[": "bracketleft", "]": "bracketright", ";": "semicolon", "'": "apostrophe",
    ",": "comma", ".": "period", "/": "slash", "\\": "backslash", "`": "grave",
}
"""The printable keys other than letters and digits, as xdotool names them."""


def parse_combo(text: str) -> tuple[str, ...]:
    """The canonical names of a combination such as "ctrl+s" or "Control+Shift+ArrowUp": modifiers first, then
    one key (a named key or a single printable character). Raises :class:`ToolError` naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ToolError('a key combination looks like "Enter", "ctrl+a" or "ctrl+shift+t"')
    stripped = text.strip()
    parts = ["+"] if stripped == "+" else stripped.split("+")
    if stripped.endswith("++"):
        parts = [*stripped[:-2].split("+"), "+"]
    names = [_name(part) for part in parts]
    *modifiers, key = names
    if any(name not in MODIFIERS for name in modifiers):
        raise ToolError(f"in {text!r} only the last key may be other than ctrl, shift, alt or super")
    if len(set(modifiers)) != len(modifiers):
        raise ToolError(f"{text!r} names a modifier twice")
    return (*modifiers, key)


def playwright_combo(keys: tuple[str, ...]) -> str:
    """``keys`` as Playwright's ``keyboard.press`` takes them ("Control+S")."""
    return "+".join(KEYS[key][0] if key in KEYS else key for key in keys)


def xdotool_combo(keys: tuple[str, ...]) -> str:
    """``keys`` as ``xdotool key`` takes them ("ctrl+s")."""
    return "+".join(KEYS[key][1] if key in KEYS else _PUNCTUATION_KEYSYMS.get(key, key) for key in keys)


def _name(part: str) -> str:
    char = part.strip()
    if len(char) == 1 and char.isprintable():
        return char.lower() if char.isalpha() else char
    key = char.lower()
    key = ALIASES.get(key, key)
    if key not in KEYS:
        raise ToolError(f"unknown key {part!r}; keys are single characters or one of {', '.join(KEYS)}")
    return key
