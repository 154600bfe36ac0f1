"""Sokoban's text view: the optional description agrees with the grid it follows, after any moves."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym

from .views import views_after_moves

SIDES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
KINDS = {"#": "wall", "$": "box", "*": "box", ".": "target", " ": "floor"}


def _words(down: int, right: int) -> str:
    parts = [f"{abs(down)} {'down' if down > 0 else 'up'}"] * bool(down)
    parts += [f"{abs(right)} {'right' if right > 0 else 'left'}"] * bool(right)
    return ", ".join(parts) or "here"


def _expected_description(grid: list[str]) -> str:
    squares = {(r, c): symbol for r, line in enumerate(grid) for c, symbol in enumerate(line)}
    row, col = next(square for square, symbol in squares.items() if symbol in "@+")
    free = [square for square, symbol in squares.items() if symbol in ".+"]
    clauses = []
    for box in sorted(square for square, symbol in squares.items() if symbol == "$"):
        target = min(free, key=lambda t: (abs(t[0] - box[0]) + abs(t[1] - box[1]), t))
        clauses.append(f"Box: {_words(box[0] - row, box[1] - col)}; "
                       f"its target: {_words(target[0] - box[0], target[1] - box[1])}.")
        clauses += _push_clause(squares, box, target, (row, col))
    clauses += [f"{name.capitalize()}: {KINDS[squares[row + dr, col + dc]]}." for name, (dr, dc) in SIDES.items()]
    return " ".join(clauses)


def _push_clause(
    squares: dict, box: tuple[int, int], target: tuple[int, int], player: tuple[int, int]
) -> list[str]:
    """The push along the axis with more squares to go (rows first on a tie), else the other one, when the
    squares behind and in front of the box are open; the square behind is where to stand."""
    down, right = target[0] - box[0], target[1] - box[1]
    steps = [(abs(down), (down > 0) - (down < 0), 0), (abs(right), 0, (right > 0) - (right < 0))]
    for distance, dr, dc in sorted(steps, key=lambda step: -step[0]):
        behind, ahead = squares[box[0] - dr, box[1] - dc], squares[box[0] + dr, box[1] + dc]
        if distance and behind not in "#$*" and ahead not in "#$*":
            name = next(name for name, side in SIDES.items() if side == (dr, dc))
            return [f"Push {name} from: {_words(box[0] - dr - player[0], box[1] - dc - player[1])}."]
    return []


@given(seed=st.integers(0, 10_000), difficulty=st.sampled_from(["easy", "medium"]),
       moves=st.lists(st.sampled_from(list(SIDES)), max_size=8))
@settings(max_examples=40, deadline=None)
def test_the_description_matches_the_grid_after_any_moves(seed, difficulty, moves):
    for env, text in views_after_moves("games/Sokoban-v0", seed, difficulty, moves):
        *grid, description = text.splitlines()
        grid = grid[-env.level.height:]  # after a move, a line saying what it did comes first
        assert grid == env.level.render(boxes=env.boxes, player=env.player).splitlines()
        assert description == _expected_description(grid)


def test_a_described_level_reads_as_expected_and_the_oracle_still_solves_it():
    env = agentgym.make("games/Sokoban-v0", describe=True)
    observation, _ = env.reset(seed=1, options={"difficulty": "easy"})
    assert observation[-1].text.splitlines()[-1] == (
        "Box: 2 right; its target: 1 down, 2 left. Push left from: 3 right. "
        "Up: floor. Down: target. Left: wall. Right: floor."
    )
    terminated = False
    while not terminated:
        observation, reward, terminated, truncated, _ = env.step(env.oracle_action())
        assert not truncated
    assert reward == 1.0 and observation[-1].text.splitlines()[-1].startswith("Up: ")
    env.close()


def test_without_describe_the_view_is_the_grid_alone():
    env = agentgym.make("games/Sokoban-v0")
    observation, _ = env.reset(seed=1, options={"difficulty": "easy"})
    assert observation[-1].text == "######\n######\n#    #\n#@ $ #\n#. ###\n######"
    env.close()
