"""Seeded draws for environment authors: every draw comes from the episode's ``numpy`` generator, so the
same seed always gives the same episode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def pick(rng: np.random.Generator, options: Sequence[T]) -> T:
    """One of ``options``, drawn uniformly from ``rng`` (one ``rng.integers`` call)."""
    return options[int(rng.integers(len(options)))]
