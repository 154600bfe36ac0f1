"""Key combinations: every spelling an agent may use reads into canonical names, which spell back for
Playwright and xdotool; anything else is refused with a ToolError the agent can read."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgym.envs.gui.keys import ALIASES, KEYS, MODIFIERS, parse_combo, playwright_combo, xdotool_combo
from agentgym.errors import ToolError

ORDER = ("ctrl", "shift", "alt", "super")
NAMED = sorted(KEYS)
CHARACTERS = string.ascii_lowercase + string.digits + string.punctuation
modifiers = st.lists(st.sampled_from(ORDER), unique=True).map(lambda found: [m for m in ORDER if m in found])
combos = st.tuples(modifiers, st.sampled_from(NAMED) | st.sampled_from(CHARACTERS)).map(
    lambda c: (*c[0], c[1])
)


def respell(name: str, draw_case: int) -> str:
    """``name`` in another case (a single character stays as it is, except letters)."""
    return name.upper() if draw_case == 1 else name.capitalize() if draw_case == 2 else name


@given(combos)
def test_canonical_names_read_back_as_themselves(keys):
    assert parse_combo("+".join(keys)) == keys


@given(combos.filter(lambda keys: "+" not in keys), st.integers(0, 2), st.sampled_from(["+", " + ", "+ "]))
def test_case_and_spaces_around_plus_do_not_matter(keys, case, joiner):
    assert parse_combo(joiner.join(respell(key, case) for key in keys)) == keys


@given(combos)
def test_the_playwright_spelling_reads_back(keys):
    assert parse_combo(playwright_combo(keys)) == keys


@given(
    st.tuples(
        modifiers, st.sampled_from(NAMED) | st.sampled_from(string.ascii_lowercase + string.digits)
    ).map(lambda c: (*c[0], c[1]))
)
def test_the_xdotool_spelling_reads_back_for_named_keys_letters_and_digits(keys):
    assert parse_combo(xdotool_combo(keys)) == keys


@given(st.sampled_from(sorted(ALIASES.items())), st.integers(0, 2))
def test_aliases_read_as_their_key(alias, case):
    spelling, name = alias
    assert parse_combo(respell(spelling, case)) == (name,)


@given(
    st.text(alphabet=string.ascii_letters, min_size=2, max_size=12).filter(
        lambda t: t.lower() not in KEYS and t.lower() not in ALIASES
    )
)
def test_unknown_key_names_are_refused(name):
    with pytest.raises(ToolError, match="unknown key"):
        parse_combo(f"ctrl+{name}")


@given(st.sampled_from(CHARACTERS.replace("+", "")), st.sampled_from(sorted(MODIFIERS)))
def test_a_modifier_after_another_key_is_refused(key, modifier):
    with pytest.raises(ToolError, match="only the last key"):
        parse_combo(f"{key}+{modifier}+x")


@given(st.sampled_from(sorted(MODIFIERS)), st.sampled_from(CHARACTERS))
def test_a_modifier_twice_is_refused(modifier, key):
    with pytest.raises(ToolError, match="twice"):
        parse_combo(f"{modifier}+{modifier}+{key}")


@given(st.text(alphabet=" \t\n", max_size=4))
def test_blank_combinations_are_refused(text):
    with pytest.raises(ToolError, match="looks like"):
        parse_combo(text)


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("ctrl+s", ("ctrl", "s")),
        ("Control+Shift+T", ("ctrl", "shift", "t")),
        ("Enter", ("enter",)),
        ("Return", ("enter",)),
        ("ctrl + a", ("ctrl", "a")),
        ("cmd+ArrowUp", ("super", "up")),
        ("ctrl++", ("ctrl", "+")),
        ("+", ("+",)),
        ("alt+F4", ("alt", "f4")),
        ("PgDn", ("pagedown",)),
    ],
)
def test_examples(text, keys):
    assert parse_combo(text) == keys


@pytest.mark.parametrize("text", ["", "ctrl+", "ctrl+ctrl+a", "a+b", "hyper+x", "ctrl+shift+enter+x", "++"])
def test_refused_examples(text):
    with pytest.raises(ToolError):
        parse_combo(text)


def test_spellings_for_each_screen():
    assert playwright_combo(("ctrl", "shift", "t")) == "Control+Shift+t"
    assert playwright_combo(("super", "space")) == "Meta+Space"
    assert playwright_combo(("ctrl", "+")) == "Control++"
    assert xdotool_combo(("ctrl", "enter")) == "ctrl+Return"
    assert xdotool_combo(("ctrl", "-")) == "ctrl+minus"
    assert xdotool_combo(("pagedown",)) == "Next"
