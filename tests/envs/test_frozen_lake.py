"""FrozenLake's text view: a cell per space-separated symbol, and the optional description agrees with it."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym

from .views import views_after_moves

SIDES = {"left": (0, -1), "down": (1, 0), "right": (0, 1), "up": (-1, 0)}
KINDS = {".": "ice", "H": "hole", "G": "goal"}


def _grid(text: str) -> list[list[str]]:
    return [line.split(" ") for line in text.splitlines() if re.fullmatch(r"[.PHG]( [.PHG])*", line)]


def _find(grid: list[list[str]], symbol: str) -> tuple[int, int] | None:
    return next(((r, c) for r, row in enumerate(grid) for c, cell in enumerate(row) if cell == symbol), None)


def _expected_description(grid: list[list[str]]) -> str:
    (row, col), goal = _find(grid, "P"), _find(grid, "G")
    down, right = goal[0] - row, goal[1] - col
    offset = [f"{abs(down)} {'down' if down > 0 else 'up'}"] * bool(down)
    offset += [f"{abs(right)} {'right' if right > 0 else 'left'}"] * bool(right)
    sides = []
    for name, (dr, dc) in SIDES.items():
        r, c = row + dr, col + dc
        inside = 0 <= r < len(grid) and 0 <= c < len(grid)
        sides.append(f"{name.capitalize()}: {KINDS[grid[r][c]] if inside else 'edge'}.")
    return f"Goal: {', '.join(offset)}. {' '.join(sides)}"


@given(seed=st.integers(0, 10_000), difficulty=st.sampled_from(["easy", "medium"]),
       moves=st.lists(st.sampled_from(list(SIDES)), max_size=8))
@settings(max_examples=60, deadline=None)
def test_the_description_matches_the_grid_after_any_moves(seed, difficulty, moves):
    for env, text in views_after_moves("games/FrozenLake-v0", seed, difficulty, moves):
        grid = _grid(text)
        assert len(grid) == env.size and all(len(row) == env.size for row in grid)
        assert text.splitlines()[-1] == _expected_description(grid)


def test_without_describe_the_view_is_the_grid_alone():
    env = agentgym.make("games/FrozenLake-v0")
    observation, _ = env.reset(seed=3, options={"difficulty": "easy"})
    assert observation[-1].text == ". P H .\n. H . H\n. . . .\nG . . ."
    env.close()
