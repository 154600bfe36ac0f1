"""Sokoban levels: procedural generation of solvable puzzles and an optimal solver.

Generation follows Racanière et al. (2017) and gym-sokoban: carve a random room, put every box on a target,
then play backwards (the player walks and pulls boxes). Undoing the backward play solves the level, so every
level is solvable; the solver then measures the optimal solution to keep it within the difficulty's move cap.

Internally a square ``(row, col)`` is the index ``row * width + col`` and a box layout is a bit mask over
those indices. The wall border keeps every neighbour of an open square inside the grid.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from agentgym.seeding import pick

Position = tuple[int, int]

DIRECTIONS: dict[str, Position] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}

# (is box, is player, is target) -> character of a floor square; walls are "#".
_SYMBOLS = {
    (False, False, False): " ",
    (False, False, True): ".",
    (True, False, False): "$",
    (True, False, True): "*",
    (False, True, False): "@",
    (False, True, True): "+",
}
_FLOOR_CHARACTERS = {symbol: key for key, symbol in _SYMBOLS.items()}


@dataclass(frozen=True)
class Level:
    """A Sokoban level: walls, targets and the start state; positions are (row, col), the border is wall."""

    walls: frozenset[Position]
    targets: frozenset[Position]
    boxes: frozenset[Position]
    player: Position
    height: int
    width: int

    def __post_init__(self) -> None:
        if self.height < 3 or self.width < 3:
            raise ValueError(f"a level needs at least 3 rows and 3 columns, got {self.height}x{self.width}")
        squares = {*self.walls, *self.targets, *self.boxes, self.player}
        outside = sorted(p for p in squares if not (0 <= p[0] < self.height and 0 <= p[1] < self.width))
        if outside:
            raise ValueError(f"positions {outside} lie outside the {self.height}x{self.width} grid")
        border = {(r, c) for r in range(self.height) for c in (0, self.width - 1)}
        border |= {(r, c) for r in (0, self.height - 1) for c in range(self.width)}
        if not border <= self.walls:
            raise ValueError(f"the outer border must be wall; open squares at {sorted(border - self.walls)}")
        if not self.boxes or len(self.boxes) != len(self.targets):
            raise ValueError(
                f"need as many targets as boxes, at least one; got {len(self.targets)} and {len(self.boxes)}"
            )
        if self.walls & (self.targets | self.boxes | {self.player}):
            raise ValueError("targets, boxes and the player must stand on floor, not on walls")
        if self.player in self.boxes:
            raise ValueError(f"the player and a box share the square {self.player}")

    def render(self, boxes: frozenset[Position] | None = None, player: Position | None = None) -> str:
        """The level in standard Sokoban text, with the start state unless ``boxes``/``player`` are given."""
        boxes = self.boxes if boxes is None else boxes
        player = self.player if player is None else player
        return "\n".join(
            "".join(self._symbol((r, c), boxes, player) for c in range(self.width))
            for r in range(self.height)
        )

    def _symbol(self, square: Position, boxes: frozenset[Position], player: Position) -> str:
        """The text character for one square."""
        if square in self.walls:
            return "#"
        return _SYMBOLS[square in boxes, square == player, square in self.targets]

    @classmethod
    def parse(cls, text: str) -> Level:
        """Read a rectangular level in standard Sokoban text (the inverse of ``render``)."""
        rows = text.strip("\r\n").splitlines()
        widths = sorted({len(row) for row in rows})
        if not rows:
            raise ValueError("the level text is empty")
        if len(widths) > 1:
            raise ValueError(f"all rows must have the same width; got widths {widths}")
        walls: set[Position] = set()
        targets: set[Position] = set()
        boxes: set[Position] = set()
        players: list[Position] = []
        for r, row in enumerate(rows):
            for c, char in enumerate(row):
                if char == "#":
                    walls.add((r, c))
                    continue
                if char not in _FLOOR_CHARACTERS:
                    allowed = "'#', " + ", ".join(repr(symbol) for symbol in _FLOOR_CHARACTERS)
                    raise ValueError(f"unknown character {char!r} at row {r}, column {c}; expected {allowed}")
                is_box, is_player, is_target = _FLOOR_CHARACTERS[char]
                if is_box:
                    boxes.add((r, c))
                if is_player:
                    players.append((r, c))
                if is_target:
                    targets.add((r, c))
        if len(players) != 1:
            raise ValueError(f"expected exactly one player ('@' or '+'), found {len(players)}")
        return cls(frozenset(walls), frozenset(targets), frozenset(boxes), players[0], len(rows), widths[0])

    def solved(self, boxes: frozenset[Position]) -> bool:
        """Whether every target holds a box."""
        return boxes == self.targets


def apply_move(
    level: Level, boxes: frozenset[Position], player: Position, direction: str
) -> tuple[frozenset[Position], Position, bool]:
    """Move the player one square, pushing a single box; returns (boxes, player, whether anything moved)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; expected one of {sorted(DIRECTIONS)}")
    dr, dc = DIRECTIONS[direction]
    ahead = (player[0] + dr, player[1] + dc)
    if ahead in level.walls:
        return boxes, player, False
    if ahead in boxes:
        beyond = (ahead[0] + dr, ahead[1] + dc)
        if beyond in level.walls or beyond in boxes:
            return boxes, player, False
        boxes = (boxes - {ahead}) | {beyond}
    return boxes, ahead, True


@dataclass(frozen=True)
class Difficulty:
    """Generation parameters: outer room size (walls included), box count, cap on the optimal solution."""

    size: int
    boxes: int
    max_moves: int


DIFFICULTIES: dict[str, Difficulty] = {
    "easy": Difficulty(size=6, boxes=1, max_moves=20),
    "medium": Difficulty(size=7, boxes=2, max_moves=35),
    "hard": Difficulty(size=8, boxes=3, max_moves=50),
}
MAX_SOLUTION_MOVES: dict[str, int] = {name: params.max_moves for name, params in DIFFICULTIES.items()}
MIN_SOLUTION_MOVES = 3
"""Levels solvable in fewer moves are rejected as trivial."""

# Room carving as in gym-sokoban: 3x3 stamps along a random walk turning with probability _TURN_PROBABILITY.
_STAMPS = np.array(
    [
        [[0, 0, 0], [1, 1, 1], [0, 0, 0]],
        [[0, 1, 0], [0, 1, 0], [0, 1, 0]],
        [[0, 0, 0], [1, 1, 0], [0, 1, 0]],
        [[0, 0, 0], [1, 1, 0], [1, 1, 0]],
        [[0, 0, 0], [0, 1, 1], [0, 1, 0]],
    ],
    dtype=bool,
)
_TURN_PROBABILITY = 0.35
_LONGEST_PULL_RUN = 3
_PULLS_PER_BOX = 10


def generate(rng: np.random.Generator, difficulty: str) -> Level:
    """A solvable level whose optimal solution has MIN_SOLUTION_MOVES to ``max_moves`` moves.

    The level depends only on the state of ``rng``; candidates are drawn until one passes those checks.
    """
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"unknown difficulty {difficulty!r}; expected one of {sorted(DIFFICULTIES)}")
    params = DIFFICULTIES[difficulty]
    while True:
        level = _candidate(rng, params)
        if level is None:
            continue
        solution = solve(level)
        if solution is not None and MIN_SOLUTION_MOVES <= len(solution) <= params.max_moves:
            return level


def solve(level: Level, max_nodes: int = 200_000) -> list[str] | None:
    """A fewest-moves solution as direction names, or None if unsolvable within ``max_nodes`` expanded states.

    A* over pushes: a state is the box layout and the player's square; an edge walks the player to a box and
    pushes it (cost: the walk plus one). The heuristic, each box's push distance to its nearest target summed,
    is consistent, and boxes are never pushed onto dead squares from which no target can be reached.
    """
    width = level.width
    steps = [dr * width + dc for dr, dc in DIRECTIONS.values()]
    is_open = [(r, c) not in level.walls for r in range(level.height) for c in range(width)]
    targets = [r * width + c for r, c in level.targets]
    push_distance = _push_distances(is_open, targets, steps)
    boxes, goal = _mask_of(r * width + c for r, c in level.boxes), _mask_of(targets)
    if any(push_distance[box] < 0 for box in _bits(boxes)):
        return None
    start = (boxes, level.player[0] * width + level.player[1])
    best_cost = {start: 0}
    came_from: dict[tuple[int, int], tuple[tuple[int, int], int]] = {}
    frontier = [(sum(push_distance[box] for box in _bits(boxes)), 0, *start)]
    expanded = 0
    while frontier:
        estimate, negative_cost, boxes, player = heapq.heappop(frontier)
        cost = -negative_cost
        if cost > best_cost[boxes, player]:
            continue
        if boxes == goal:
            return _replay(start, (boxes, player), came_from, is_open, steps)
        expanded += 1
        if expanded > max_nodes:
            return None
        remaining = estimate - cost
        walk = _walk_distances(is_open, boxes, player, steps)
        for box in _bits(boxes):
            for step in steps:
                stand, destination = box - step, box + step
                if walk[stand] < 0 or push_distance[destination] < 0 or boxes >> destination & 1:
                    continue
                state = (boxes ^ (1 << box) ^ (1 << destination), box)
                new_cost = cost + walk[stand] + 1
                if new_cost < best_cost.get(state, new_cost + 1):
                    best_cost[state] = new_cost
                    came_from[state] = ((boxes, player), step)
                    new_estimate = new_cost + remaining - push_distance[box] + push_distance[destination]
                    heapq.heappush(frontier, (new_estimate, -new_cost, *state))
    return None


def _candidate(rng: np.random.Generator, params: Difficulty) -> Level | None:
    """One attempt: carve a room, put boxes on targets, play backwards; None if no start state came of it."""
    size = params.size
    steps = [dr * size + dc for dr, dc in DIRECTIONS.values()]
    is_open = _carve_room(rng, size).ravel().tolist()
    floor = [square for square, open_ in enumerate(is_open) if open_]
    if len(floor) < params.boxes + 2:
        return None
    chosen = rng.choice(len(floor), size=params.boxes + 1, replace=False)
    targets = [floor[i] for i in chosen[:-1]]
    start = _play_backwards(rng, is_open, steps, targets, floor[chosen[-1]], _PULLS_PER_BOX * params.boxes)
    if start is None:
        return None
    boxes, player = start
    walk = _walk_distances(is_open, boxes, player, steps)
    reachable = [square for square, distance in enumerate(walk) if distance >= 0]
    player = pick(rng, reachable)
    return Level(
        walls=frozenset(divmod(square, size) for square, open_ in enumerate(is_open) if not open_),
        targets=frozenset(divmod(square, size) for square in targets),
        boxes=frozenset(divmod(square, size) for square in _bits(boxes)),
        player=divmod(player, size),
        height=size,
        width=size,
    )


def _carve_room(rng: np.random.Generator, size: int) -> np.ndarray:
    """Open floor (a boolean size x size grid) stamped along a random walk; connected, with a wall border."""
    is_open = np.zeros((size, size), dtype=bool)
    position = rng.integers(1, size - 1, size=2)
    moves = np.array(list(DIRECTIONS.values()))
    move = moves[rng.integers(len(moves))]
    for _ in range(4 * size):
        if rng.random() < _TURN_PROBABILITY:
            move = moves[rng.integers(len(moves))]
        position = np.clip(position + move, 1, size - 2)
        row, col = position
        is_open[row - 1 : row + 2, col - 1 : col + 2] |= _STAMPS[rng.integers(len(_STAMPS))]
    is_open[[0, -1], :] = False
    is_open[:, [0, -1]] = False
    return is_open


def _play_backwards(
    rng: np.random.Generator,
    is_open: list[bool],
    steps: list[int],
    targets: list[int],
    player: int,
    pulls: int,
) -> tuple[int, int] | None:
    """Play backwards from the solved state, ``pulls`` times walking to a random box and pulling it up to
    _LONGEST_PULL_RUN squares; the (boxes, player) seen farthest from solved (by summed push distances) with
    no box on a target, or None if there was none."""
    push_distance = _push_distances(is_open, targets, steps)
    boxes = _mask_of(targets)
    farthest: tuple[int, int] | None = None
    best_distance = 0
    for _ in range(pulls):
        walk = _walk_distances(is_open, boxes, player, steps)
        options = [
            (box, step)
            for box in _bits(boxes)
            for step in steps
            if walk[box + step] >= 0 and is_open[box + 2 * step] and not boxes >> (box + 2 * step) & 1
        ]
        if not options:
            break
        box, step = pick(rng, options)
        stand = box + step
        for _ in range(rng.integers(1, _LONGEST_PULL_RUN + 1)):
            if not is_open[stand + step] or boxes >> (stand + step) & 1:
                break
            boxes ^= (1 << box) | (1 << stand)
            box, stand = stand, stand + step
        player = stand
        distances = [push_distance[box] for box in _bits(boxes)]
        if min(distances) > 0 and sum(distances) > best_distance:
            farthest, best_distance = (boxes, player), sum(distances)
    return farthest


def _walk_distances(is_open: list[bool], boxes: int, source: int, steps: list[int]) -> list[int]:
    """Walking distance from ``source`` to every square around the boxes; -1 where the player cannot go."""
    distance = [-1] * len(is_open)
    distance[source] = 0
    frontier, depth = [source], 0
    while frontier:
        depth += 1
        reached: list[int] = []
        for square in frontier:
            for step in steps:
                neighbour = square + step
                if distance[neighbour] < 0 and is_open[neighbour] and not boxes >> neighbour & 1:
                    distance[neighbour] = depth
                    reached.append(neighbour)
        frontier = reached
    return distance


def _push_distances(is_open: list[bool], targets: list[int], steps: list[int]) -> list[int]:
    """Fewest pushes taking a lone box from each square to a target, found by pulling back; -1 if dead."""
    distance = [-1] * len(is_open)
    for target in targets:
        distance[target] = 0
    queue = deque(targets)
    while queue:
        square = queue.popleft()
        for step in steps:
            previous = square - step
            if distance[previous] < 0 and is_open[previous] and is_open[previous - step]:
                distance[previous] = distance[square] + 1
                queue.append(previous)
    return distance


def _replay(
    start: tuple[int, int],
    goal: tuple[int, int],
    came_from: dict[tuple[int, int], tuple[tuple[int, int], int]],
    is_open: list[bool],
    steps: list[int],
) -> list[str]:
    """The player's moves for the chain of pushes ending in ``goal``, walking shortest paths between them."""
    pushes: list[tuple[tuple[int, int], int, int]] = []
    state = goal
    while state != start:
        parent, step = came_from[state]
        pushes.append((parent, state[1], step))  # after a push the player stands where the box was
        state = parent
    moves: list[int] = []
    for (boxes, player), box, step in reversed(pushes):
        moves += _walk_path(is_open, boxes, player, box - step, steps)
        moves.append(step)
    names = dict(zip(steps, DIRECTIONS, strict=True))
    return [names[step] for step in moves]


def _walk_path(is_open: list[bool], boxes: int, source: int, destination: int, steps: list[int]) -> list[int]:
    """The steps of a shortest walk from ``source`` to a reachable ``destination`` around the boxes."""
    distance = _walk_distances(is_open, boxes, destination, steps)
    path: list[int] = []
    while source != destination:
        step = next(step for step in steps if distance[source + step] == distance[source] - 1)
        path.append(step)
        source += step
    return path


def _mask_of(squares: Iterable[int]) -> int:
    """The box mask with the given square indices set."""
    mask = 0
    for square in squares:
        mask |= 1 << square
    return mask


def _bits(mask: int) -> list[int]:
    """The square indices set in a box mask, in increasing order."""
    squares: list[int] = []
    while mask:
        lowest = mask & -mask
        squares.append(lowest.bit_length() - 1)
        mask ^= lowest
    return squares
