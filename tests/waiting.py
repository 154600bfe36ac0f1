"""Waiting for an outcome, never for a time: a test polls for what it waits for, with a deadline far past what a
busy machine needs, and fails naming what never came (see docs/testing.md, "Rules for tests that do not flake")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

PATIENCE = 60.0
"""Seconds a test waits for an outcome before it fails: far more than any needs on a machine held busy, and within
pytest's limit of 120 s a test."""


def until(condition: Callable[[], T], what: str, *, timeout: float = PATIENCE, every: float = 0.02) -> T:
    """Poll ``condition`` until it returns something true, and return that; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        time.sleep(every)
    return value


async def until_async(condition: Callable[[], T], what: str, *, timeout: float = PATIENCE, every: float = 0.005) -> T:
    """:func:`until` on an event loop: the loop runs on between polls."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        await asyncio.sleep(every)
    return value
