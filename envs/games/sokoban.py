"""Sokoban as text: push every box onto a target in a generated warehouse that is always solvable."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from agentgym.envs.games.sokoban_levels import (
    MAX_SOLUTION_MOVES,
    Level,
    Position,
    apply_move,
    generate,
    solve,
)

from agentgym.core import Env
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
    """

    difficulties = ("easy", "medium", "hard")
    execution = "inline"
    max_tool_calls = 1

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.level: Level | None = None
        self.boxes: frozenset[Position] = frozenset()
        self.player: Position = (0, 0)
        self._plan: list[str] = []
        self._plan_from: tuple[frozenset[Position], Position] | None = None

    def turn_limit(self, difficulty: str) -> int:
        return MAX_SOLUTION_MOVES[difficulty] + 10

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        if options:
            raise ValueError(f"unknown reset options for Sokoban: {sorted(options)}")
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
        return "" if self.level is None else self.level.render(boxes=self.boxes, player=self.player)

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
