"""How far one square lies from another in words, for the games' text descriptions."""

from __future__ import annotations


def offset_words(rows: int, cols: int) -> str:
    """``rows`` down (negative: up) and ``cols`` right (negative: left) as words: ``2 down, 1 left``; ``here``
    when both are 0."""
    parts = [
        f"{abs(n)} {word}"
        for n, word in ((rows, "down" if rows > 0 else "up"), (cols, "right" if cols > 0 else "left"))
        if n
    ]
    return ", ".join(parts) or "here"
