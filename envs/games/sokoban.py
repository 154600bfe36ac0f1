"""Sokoban as text: push every box onto a target in a generated warehouse that is always solvable."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from agentgym.core import Env
from agentgym.envs.games.offsets import offset_words
from agentgym.envs.games.sokoban_levels import (
    DIRECTIONS,
    MAX_SOLUTION_MOVES,
    Level,
    Position,
    apply_move,
    generate,
    solve,
)
from agentgym.messages import Message
from agentgym.tools import tool

Direction = Literal["up", "down", "left", "right"]
SYSTEM_PROMPT = """You are the warehouse keeper in Sokoban. The map uses: # wall, @ you, $ box, . target,
* box on a target, + you on a target. Push every box onto a target. You push a box by walking into it;
you cannot pull boxes or push two at once. Each turn, call the move tool once with up, down, left or right."""


class SokobanEnv(Env):
    """Generated Sokoban levels (Racanière et al. 2017 style, solvable by construction).

    Difficulty sets the room and box count (easy: 6x6 with 1 box, medium: 7x7 with 2, hard: 8x8 with
    3) and caps the optimal solution (20, 35, 50 moves); the turn limit is that cap plus 10.
    Reward 1 when every box is on a target. The oracle replays an optimal solution from the current state.
    With ``describe=True`` every view of the warehouse ends with a line giving where each box off a target
    lies, where its nearest free target lies from it, and what each move would run into: a small model
    reads that far more easily than the grid.
    """

    difficulties = ("easy", "medium", "hard")
    execution = "inline"
    max_tool_calls = 1
    forkable = "native"
    """Forked by a deep copy: the episode is plain Python state and ``self.np_random``."""

    def __init__(self, *, describe: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.describe = describe
        self.level: Level | None = None
        self.boxes: frozenset[Position] = frozenset()
        self.player: Position = (0, 0)
        self._plan: list[str] = []
        self._plan_from: tuple[frozenset[Position], Position] | None = None

    def turn_limit(self, difficulty: str) -> int:
        return MAX_SOLUTION_MOVES[difficulty] + 10

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.level = generate(self.np_random, difficulty)
        self.boxes, self.player = self.level.boxes, self.level.player
        self._plan, self._plan_from = [], None
        return [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=self.render_text())]

    @tool
    def move(self, direction: Direction) -> str:
        """Walk one square, pushing a box if one is in the way.

        Args:
            direction: One of up, down, left, right.
        """
        assert self.level is not None
        before = self.boxes
        self.boxes, self.player, moved = apply_move(self.level, self.boxes, self.player, direction)
        if not moved:
            note = f"You cannot move {direction}: a wall or a blocked box is in the way."
        elif self.boxes != before:
            note = f"You pushed a box {direction}."
        else:
            note = f"You moved {direction}."
        if self.level.solved(self.boxes):
            self.finish(success=True)
            return f"{note} Every box is on a target. Solved!\n{self.render_text()}"
        return f"{note}\n{self.render_text()}"

    def oracle_action(self) -> str:
        return self.format_call("move", direction=self._next_move())

    def render_text(self) -> str:
        if self.level is None:
            return ""
        grid = self.level.render(boxes=self.boxes, player=self.player)
        return f"{grid}\n{self._description()}" if self.describe else grid

    def _description(self) -> str:
        """Each box off a target from here, its nearest free target from it, and each side's square, e.g.
        ``Box: 1 up, 2 left; its target: 2 left. Push left from: 1 up, 1 left. Up: floor. Down: wall. Left:
        box. Right: target.``: where to stand for the push that brings it nearer its target."""
        assert self.level is not None
        (row, col), free = self.player, self.level.targets - self.boxes
        clauses = []
        for box in sorted(self.boxes - self.level.targets):
            target = min(free, key=lambda t: (abs(t[0] - box[0]) + abs(t[1] - box[1]), t))
            clauses.append(
                f"Box: {offset_words(box[0] - row, box[1] - col)}; "
                f"its target: {offset_words(target[0] - box[0], target[1] - box[1])}."
            )
            push = self._push_toward(box, target)
            if push:
                direction, (stand_row, stand_col) = push
                clauses.append(f"Push {direction} from: {offset_words(stand_row - row, stand_col - col)}.")
        for direction, (down, right) in DIRECTIONS.items():
            square = (row + down, col + right)
            kind = (
                "wall" if square in self.level.walls
                else "box" if square in self.boxes
                else "target" if square in self.level.targets
                else "floor"
            )
            clauses.append(f"{direction.capitalize()}: {kind}.")
        return " ".join(clauses)

    def _push_toward(self, box: Position, target: Position) -> tuple[str, Position] | None:
        """The push that moves ``box`` toward ``target`` along the axis with more squares to go (rows on a
        tie), or along the other axis if that push is blocked, and the square to push it from; None when
        neither push can be made. Plain geometry, not the solver: the box may still need to go around."""
        assert self.level is not None
        rows, cols = target[0] - box[0], target[1] - box[1]
        axes = sorted([(rows, "down" if rows > 0 else "up"), (cols, "right" if cols > 0 else "left")],
                      key=lambda axis: -abs(axis[0]))
        blocked = self.level.walls | self.boxes
        for distance, direction in axes:
            down, right = DIRECTIONS[direction]
            stand, onto = (box[0] - down, box[1] - right), (box[0] + down, box[1] + right)
            if distance and stand not in blocked and onto not in blocked:
                return direction, stand
        return None

    def _next_move(self) -> str:
        """The next move of an optimal solution from the current state, re-planned if the state moved on."""
        assert self.level is not None
        state = (self.boxes, self.player)
        if not self._plan or self._plan_from != state:
            self._plan = solve(dataclasses.replace(self.level, boxes=self.boxes, player=self.player)) or []
            if not self._plan:
                raise RuntimeError("the oracle found no solution from this state: a box is stuck")
        direction = self._plan.pop(0)
        boxes, player, _ = apply_move(self.level, self.boxes, self.player, direction)
        self._plan_from = (boxes, player)
        return direction
