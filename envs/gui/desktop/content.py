"""Generated names and text for the desktop tasks. File stems are plain lowercase words, none the start of
another, so that the file manager's sorting (folders first, then by name) is plain alphabetical order."""

from __future__ import annotations

import numpy as np

from agentgym.seeding import pick

STEMS = ("agenda", "budget", "contacts", "draft", "expenses", "forecast", "glossary", "holidays", "invoice",
         "journal", "kitchen", "ledger", "minutes", "notes", "outline", "payroll", "quotes", "recipes",
         "schedule", "tasks", "upgrade", "vendors", "wishlist", "yearbook", "zoning")
FOLDERS = ("archive", "backup", "clients", "data", "exports", "photos", "projects", "reports", "shared",
           "templates")
NOUNS = ("garden", "river", "window", "market", "teacher", "engine", "bridge", "letter", "planet", "forest",
         "ticket", "kettle", "harbor", "candle", "meadow", "lantern", "pocket", "saddle", "tunnel", "violin")
VERBS = ("finds", "keeps", "moves", "paints", "holds", "builds", "shows", "opens", "follows", "carries")
ADJECTIVES = ("quiet", "bright", "small", "heavy", "early", "golden", "narrow", "silver", "gentle", "rapid")
NOUN_SLOTS = (2, 6)
"""Where the nouns stand among the words of a :func:`words` sentence."""


def names(rng: np.random.Generator, pool: tuple[str, ...], count: int) -> list[str]:
    """``count`` different names from ``pool``, in a random order."""
    return [pool[int(i)] for i in rng.permutation(len(pool))[:count]]


def words(rng: np.random.Generator, *, avoid: tuple[str, ...] = ()) -> list[str]:
    """The words of a short sentence such as "The quiet garden keeps a narrow letter", nouns in ``avoid`` left
    out; nouns stand at :data:`NOUN_SLOTS`."""
    nouns = tuple(n for n in NOUNS if n not in avoid)
    return ["The", pick(rng, ADJECTIVES), pick(rng, nouns), pick(rng, VERBS), "a", pick(rng, ADJECTIVES),
            pick(rng, nouns)]


def sentence(rng: np.random.Generator, *, avoid: tuple[str, ...] = ()) -> str:
    """A short sentence (see :func:`words`) with its full stop."""
    return " ".join(words(rng, avoid=avoid)) + "."


def filler(rng: np.random.Generator) -> str:
    """A few lines of text for a file nobody needs to read."""
    return "\n".join(sentence(rng) for _ in range(int(rng.integers(1, 4)))) + "\n"
