"""FrozenLake as text: walk a generated frozen lake to the goal without falling into a hole."""

from __future__ import annotations

from collections import deque
from typing import Any, Literal

import numpy as np

from agentgym.core import Env
from agentgym.envs.games.offsets import offset_words
from agentgym.messages import Message
from agentgym.tools import tool

Direction = Literal["left", "down", "right", "up"]
MOVES: dict[str, tuple[int, int]] = {"left": (0, -1), "down": (1, 0), "right": (0, 1), "up": (-1, 0)}
SIZES = {"easy": 4, "medium": 6, "hard": 8}
TURN_LIMITS = {"easy": 12, "medium": 24, "hard": 40}
_SLIPS = {"left": ("down", "up"), "right": ("down", "up"), "up": ("left", "right"), "down": ("left", "right")}

SYSTEM_PROMPT = """You are on a frozen lake drawn as a grid: P is you, G the goal, H a hole, . safe ice.
Reach G without stepping into an H. Each turn, call the move tool once with a direction (left, down, right or up).
Walking off the edge leaves you where you are."""


class FrozenLakeEnv(Env):
    """A grid of ice and holes with a random start and goal joined by a safe path.

    Difficulty sets the size (easy 4x4, medium 6x6, hard 8x8). With ``slippery=True`` a move goes the
    intended way with probability 1/3 and to either side with 1/3 each, as in Gymnasium's FrozenLake.
    Reward 1 at the goal; a hole ends the episode with 0. With ``describe=True`` every view of the lake
    ends with a line giving the goal's offset and what lies on each side, which a small model reads far
    more easily than the grid.
    """

    difficulties = ("easy", "medium", "hard")
    execution = "inline"
    max_tool_calls = 1
    forkable = "native"
    """Forked by a deep copy: the episode is plain Python state and ``self.np_random``."""

    def __init__(self, *, slippery: bool = False, hole_fraction: float = 0.2, describe: bool = False,
                 **kwargs: Any) -> None:
        """``hole_fraction`` is the share of squares that are holes, before a safe path is ensured."""
        super().__init__(**kwargs)
        if not 0.0 <= hole_fraction < 0.6:
            raise ValueError(f"hole_fraction must be in [0, 0.6), got {hole_fraction}")
        self.slippery = slippery
        self.hole_fraction = hole_fraction
        self.describe = describe
        self.size = SIZES["easy"]
        self.holes: frozenset[tuple[int, int]] = frozenset()
        self.start = self.goal = self.position = (0, 0)
        self._success_chance: np.ndarray | None = None

    def turn_limit(self, difficulty: str) -> int:
        """Twice the longest allowed shortest path, and three times that on slippery ice."""
        return TURN_LIMITS[difficulty] * (3 if self.slippery else 1)

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.size = SIZES[difficulty]
        self._generate(max_path=TURN_LIMITS[difficulty] - 2)
        self.position = self.start
        self._success_chance = None
        return [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=self.render_text())]

    @tool
    def move(self, direction: Direction) -> str:
        """Move one square on the lake.

        Args:
            direction: One of left, down, right, up.
        """
        taken = direction
        if self.slippery:
            taken = (direction, *_SLIPS[direction])[int(self.np_random.integers(3))]
        row, col = self.position[0] + MOVES[taken][0], self.position[1] + MOVES[taken][1]
        note = f"You moved {taken}." if taken == direction else f"You tried to move {direction} but slid {taken}."
        if not (0 <= row < self.size and 0 <= col < self.size):
            note = f"You tried to move {taken} but the edge of the lake is there; you stay."
        else:
            self.position = (row, col)
        if self.position in self.holes:
            self.finish(success=False)
            return f"{note} You fell into a hole. Game over.\n{self.render_text()}"
        if self.position == self.goal:
            self.finish(success=True)
            return f"{note} You reached the goal!\n{self.render_text()}"
        return f"{note}\n{self.render_text()}"

    def oracle_action(self) -> str:
        return self.format_call("move", direction=self._best_move())

    def render_text(self) -> str:
        """One line per row, cells separated by spaces so that every cell is its own token."""
        grid = "\n".join(" ".join(self._cell((r, c)) for c in range(self.size)) for r in range(self.size))
        return f"{grid}\n{self._description()}" if self.describe else grid

    def _description(self) -> str:
        """Where the goal lies from here and what each move would step onto, e.g.
        ``Goal: 2 down, 1 left. Left: ice. Down: hole. Right: edge. Up: ice.``"""
        offset = offset_words(self.goal[0] - self.position[0], self.goal[1] - self.position[1])
        sides = []
        for direction in MOVES:
            target = self._target(self.position, direction)
            kind = "edge" if target == self.position else {"P": "ice", ".": "ice", "H": "hole", "G": "goal"}[
                self._cell(target)]
            sides.append(f"{direction.capitalize()}: {kind}.")
        return f"Goal: {offset}. {' '.join(sides)}"

    def _cell(self, cell: tuple[int, int]) -> str:
        return "P" if cell == self.position else "G" if cell == self.goal else "H" if cell in self.holes else "."

    def _generate(self, max_path: int) -> None:
        """Draw holes, start and goal until the shortest safe path is 2..``max_path`` moves long."""
        cells = [(r, c) for r in range(self.size) for c in range(self.size)]
        while True:
            start_index, goal_index = self.np_random.choice(len(cells), size=2, replace=False)
            self.start, self.goal = cells[start_index], cells[goal_index]
            holes = self.np_random.random(len(cells)) < self.hole_fraction
            self.holes = frozenset(c for c, h in zip(cells, holes) if h and c not in (self.start, self.goal))
            distance = self._distances().get(self.start)
            if distance is not None and 2 <= distance <= max_path:
                return

    def _distances(self) -> dict[tuple[int, int], int]:
        """Moves from each safe square to the goal (breadth-first search backwards from the goal)."""
        distances = {self.goal: 0}
        queue = deque([self.goal])
        while queue:
            r, c = queue.popleft()
            for dr, dc in MOVES.values():
                nxt = (r + dr, c + dc)
                if 0 <= nxt[0] < self.size and 0 <= nxt[1] < self.size and nxt not in self.holes and nxt not in distances:
                    distances[nxt] = distances[(r, c)] + 1
                    queue.append(nxt)
        return distances

    def _best_move(self) -> str:
        """The shortest-path move, or on slippery ice the move that maximises the chance to arrive."""
        if not self.slippery:
            distances = self._distances()
            return min(MOVES, key=lambda d: distances.get(self._target(self.position, d), self.size**2))
        if self._success_chance is None:
            self._success_chance = self._success_probabilities()
        value = self._success_chance
        return max(MOVES, key=lambda d: sum(value[self._target(self.position, t)] for t in (d, *_SLIPS[d])))

    def _success_probabilities(self, sweeps: int = 500) -> np.ndarray:
        """Value iteration for the (slightly discounted) probability of reaching the goal when slipping."""
        value = np.zeros((self.size, self.size))
        value[self.goal] = 1.0
        for _ in range(sweeps):
            previous = value.copy()
            for r in range(self.size):
                for c in range(self.size):
                    if (r, c) == self.goal or (r, c) in self.holes:
                        continue
                    value[r, c] = 0.999 * max(
                        sum(value[self._target((r, c), t)] for t in (d, *_SLIPS[d])) / 3 for d in MOVES
                    )
            if np.abs(value - previous).max() < 1e-6:
                break
        return value

    def _target(self, cell: tuple[int, int], direction: str) -> tuple[int, int]:
        r, c = cell[0] + MOVES[direction][0], cell[1] + MOVES[direction][1]
        return (r, c) if 0 <= r < self.size and 0 <= c < self.size else cell
