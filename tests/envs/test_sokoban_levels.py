"""Sokoban levels: generated levels solvable within their caps, the rules, the text format, the solver."""

from __future__ import annotations

import time
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.envs.games.sokoban_levels import (
    DIFFICULTIES,
    DIRECTIONS,
    MAX_SOLUTION_MOVES,
    MIN_SOLUTION_MOVES,
    Level,
    apply_move,
    generate,
    solve,
)

SEEDS = range(200)


def replay(level: Level, moves: list[str]) -> tuple[frozenset[tuple[int, int]], tuple[int, int]]:
    """Play moves from the start state, checking that each one changes something."""
    boxes, player = level.boxes, level.player
    for move in moves:
        boxes, player, changed = apply_move(level, boxes, player, move)
        assert changed, f"move {move!r} did nothing"
    return boxes, player


def fewest_moves(level: Level) -> int | None:
    """Fewest moves by brute-force breadth-first search with apply_move: a reference for the solver."""
    start = (level.boxes, level.player)
    depth = {start: 0}
    queue = deque([start])
    while queue:
        boxes, player = state = queue.popleft()
        if level.solved(boxes):
            return depth[state]
        for direction in DIRECTIONS:
            new_boxes, new_player, changed = apply_move(level, boxes, player, direction)
            if changed and (new_boxes, new_player) not in depth:
                depth[new_boxes, new_player] = depth[state] + 1
                queue.append((new_boxes, new_player))
    return None


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_generated_levels_are_solvable_within_the_cap(difficulty: str) -> None:
    started = time.thread_time()  # this thread's CPU time, which a busy neighbour does not inflate
    levels = [generate(np.random.default_rng(seed), difficulty) for seed in SEEDS]
    assert time.thread_time() - started < 10, "generation is far slower than a few ms per level"
    params = DIFFICULTIES[difficulty]
    for level in levels:
        assert (level.height, level.width) == (params.size, params.size)
        assert len(level.boxes) == params.boxes
        assert not level.boxes & level.targets, "every box starts off its target"
        solution = solve(level)
        assert solution is not None
        assert MIN_SOLUTION_MOVES <= len(solution) <= MAX_SOLUTION_MOVES[difficulty]
        boxes, _ = replay(level, solution)
        assert level.solved(boxes)
    assert len(set(levels)) > 0.9 * len(levels), "seeds should give different levels"


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_generation_is_deterministic_per_seed(difficulty: str) -> None:
    for seed in range(20):
        first, second = (generate(np.random.default_rng(seed), difficulty) for _ in range(2))
        assert first == second


@pytest.mark.parametrize(
    ("difficulty", "seeds"), [("easy", range(100)), ("medium", range(100)), ("hard", range(10))]
)
def test_solutions_are_optimal(difficulty: str, seeds: range) -> None:
    for seed in seeds:
        level = generate(np.random.default_rng(seed), difficulty)
        solution = solve(level)
        assert solution is not None and len(solution) == fewest_moves(level)


def test_move_caps_and_difficulty_names() -> None:
    assert MAX_SOLUTION_MOVES == {"easy": 20, "medium": 35, "hard": 50}
    with pytest.raises(ValueError, match="'easy', 'hard', 'medium'"):
        generate(np.random.default_rng(0), "impossible")


@settings(max_examples=60, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1), difficulty=st.sampled_from(sorted(DIFFICULTIES)))
def test_render_parse_round_trip(seed: int, difficulty: str) -> None:
    level = generate(np.random.default_rng(seed), difficulty)
    text = level.render()
    assert Level.parse(text) == level
    assert Level.parse(text + "\n").render() == text
    solution = solve(level)
    assert solution is not None
    boxes, player = replay(level, solution)
    solved = Level.parse(level.render(boxes, player))
    assert (solved.walls, solved.targets) == (level.walls, level.targets)
    assert (solved.boxes, solved.player) == (boxes, player)


def test_render_uses_the_standard_symbols() -> None:
    walls = frozenset((r, c) for r in range(4) for c in range(7) if r in (0, 3) or c in (0, 6))
    level = Level(
        walls=walls,
        targets=frozenset({(1, 4), (1, 5), (2, 1)}),
        boxes=frozenset({(1, 2), (1, 5), (2, 3)}),
        player=(2, 1),
        height=4,
        width=7,
    )
    assert level.render() == "#######\n# $ .*#\n#+ $  #\n#######"
    assert level.render(player=(1, 1)) == "#######\n#@$ .*#\n#. $  #\n#######"
    assert Level.parse(level.render()) == level


CORRIDOR = Level.parse("#####\n#@$.#\n#   #\n#####")


def test_apply_move_walks_and_pushes() -> None:
    level = CORRIDOR
    assert apply_move(level, level.boxes, level.player, "up") == (level.boxes, (1, 1), False)
    assert apply_move(level, level.boxes, level.player, "left") == (level.boxes, (1, 1), False)
    assert apply_move(level, level.boxes, level.player, "down") == (level.boxes, (2, 1), True)
    boxes, player, changed = apply_move(level, level.boxes, level.player, "right")
    assert (boxes, player, changed) == (frozenset({(1, 3)}), (1, 2), True)
    assert level.solved(boxes)
    assert apply_move(level, boxes, player, "right") == (boxes, (1, 2), False), "no pushing into a wall"


def test_apply_move_cannot_push_two_boxes_or_pull() -> None:
    level = Level.parse("#######\n#@$$ .#\n#    .#\n#######")
    assert apply_move(level, level.boxes, level.player, "right") == (level.boxes, (1, 1), False)
    level = Level.parse("######\n#$@ .#\n######")
    assert apply_move(level, level.boxes, level.player, "right") == (level.boxes, (1, 3), True)


def test_apply_move_rejects_unknown_direction() -> None:
    with pytest.raises(ValueError, match="unknown direction"):
        apply_move(CORRIDOR, CORRIDOR.boxes, CORRIDOR.player, "north")


def test_solve_hand_made_levels() -> None:
    assert solve(Level.parse("#####\n#@$.#\n#####")) == ["right"]
    assert solve(Level.parse("#####\n#@* #\n#####")) == []
    around = Level.parse("#######\n#.    #\n#  $  #\n#    @#\n#######")
    solution = solve(around)
    assert solution is not None and len(solution) == fewest_moves(around)
    assert around.solved(replay(around, solution)[0])


@pytest.mark.parametrize(
    "text",
    [
        "#####\n#$  #\n#  @#\n#  .#\n#####",  # box stuck in a corner off its target
        "#######\n#.   .#\n# $$  #\n# $$  #\n#.  @.#\n#######",  # four boxes frozen in a block
    ],
)
def test_solve_returns_none_when_unsolvable(text: str) -> None:
    assert solve(Level.parse(text)) is None


def test_solve_respects_the_node_budget() -> None:
    level = generate(np.random.default_rng(0), "hard")
    assert solve(level, max_nodes=0) is None
    assert solve(level) is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("#####\n#@$.#\n####", "same width"),
        ("#####\n#@$x#\n#####", "unknown character 'x'"),
        ("#####\n#@$.#\n#@  #\n#####", "exactly one player"),
        ("#####\n#@$. \n#####", "border"),
        ("######\n#@$$.#\n######", "as many targets as boxes"),
        ("####\n#@.#\n####", "as many targets as boxes"),
    ],
)
def test_parse_rejects_bad_text(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Level.parse(text)
