"""A small Countdown, LATR's own task at the tiny model's scale: make a target from three numbers with + - *.

One turn: the agent writes one line of work, then calls ``answer`` with the expression, for example::

    7-2=5, 5*3=15
    answer(expression="(7-2)*3")

The numbers are drawn from 1-9 and shown in ascending order; the target is ``(a op b) op c`` for a random order
and random operators, redrawn until it is at least 1. Any expression that uses each number once (only + - *,
parentheses and those numbers) and equals the target is right: reward 1. The oracle writes one canonical answer
per task, which is what the SFT warm start learns: ``solution="first"`` (the default), the first ``(x op y) op z``
that makes the target, the numbers' orders and then the operators (+ - *) taken in order, a rule read off the
prompt; ``"drawn"``, the generator's own draw, which the prompt does not show (the sweep's tries 1-3).

It lives here, not among the bundled environments, because the tiny model's tokenizer is trained on what the
bundled environments print: a new one would change every tiny model.
"""

from __future__ import annotations

import ast
import itertools
import operator
from collections import Counter
from typing import Any, Literal

import agentgym
from agentgym import Env, Message, tool
from agentgym.errors import ToolError

ENV_ID = "bench/Countdown-v0"
OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul}
_NODES = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}
SYSTEM_PROMPT = """Make the target from the three numbers, using each exactly once with + - * and parentheses.
Write one line of work, then call answer once with the expression, e.g. answer(expression="(7-2)*3")."""


class CountdownEnv(Env):
    """Three numbers from 1-9 and a target made from them; one answer (see the module doc)."""

    difficulties = ("easy",)
    execution = "inline"
    default_max_turns = 1
    forkable = "native"
    """Forked by a deep copy: the episode is plain Python state."""

    def __init__(self, solution: Literal["first", "drawn"] = "first", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if solution not in ("first", "drawn"):
            raise ValueError(f"solution must be 'first' or 'drawn', not {solution!r}")
        self.canonical = solution
        self.numbers: tuple[int, ...] = ()
        self.target = 0
        self.solution = ""
        self.work = ""

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        while True:
            a, b, c = (int(n) for n in self.np_random.integers(1, 10, size=3))
            first, second = (str(op) for op in self.np_random.choice(list(OPERATORS), size=2))
            middle = OPERATORS[first](a, b)
            target = OPERATORS[second](middle, c)
            if target >= 1 and middle >= 1:
                break
        self.numbers, self.target = tuple(sorted((a, b, c))), target
        if self.canonical == "first":
            a, first, b, second, c = _first_solution(self.numbers, target)
            middle = OPERATORS[first](a, b)
        self.solution = f"({a}{first}{b}){second}{c}"
        self.work = f"{a}{first}{b}={middle}, {middle}{second}{c}={target}"
        numbers = " ".join(map(str, self.numbers))
        return [Message(role="system", content=SYSTEM_PROMPT),
                Message(role="user", content=f"Numbers: {numbers}. Target: {target}.")]

    @tool
    def answer(self, expression: str) -> str:
        """Give the expression that makes the target; the episode ends.

        Args:
            expression: The three numbers, each once, with + - * and parentheses, e.g. "(7-2)*3".
        """
        try:
            value, used = _evaluate(expression)
        except ValueError as exc:
            self.finish(success=False)
            raise ToolError(str(exc)) from None
        if Counter(used) != Counter(self.numbers):
            self.finish(success=False)
            return f"Wrong: use each of {', '.join(map(str, self.numbers))} exactly once (you used {used})."
        self.finish(success=value == self.target)
        return "Correct!" if value == self.target else f"Wrong: {expression} = {value}, not {self.target}."

    def oracle_action(self) -> str:
        return f"{self.work}\n{self.format_call('answer', expression=self.solution)}"

    def render_text(self) -> str:
        return f"Numbers: {' '.join(map(str, self.numbers))}. Target: {self.target}."


def _first_solution(numbers: tuple[int, ...], target: int) -> tuple[int, str, int, str, int]:
    """The first ``(x op y) op z`` (orders of ``numbers``, then operators, each in order) that makes ``target``
    with ``x op y`` at least 1, as ``(x, op, y, op, z)``."""
    for x, y, z in itertools.permutations(numbers):
        for first, second in itertools.product(OPERATORS, repeat=2):
            middle = OPERATORS[first](x, y)
            if middle >= 1 and OPERATORS[second](middle, z) == target:
                return x, first, y, second, z
    raise ValueError(f"no (x op y) op z of {numbers} makes {target}")


def _evaluate(expression: str) -> tuple[int, list[int]]:
    """The value of an expression of integers with + - * and parentheses, and the numbers it uses, in order."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"{expression!r} is not an expression") from None
    used: list[int] = []

    def value(node: ast.expr) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            used.append(node.value)
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _NODES:
            return int(OPERATORS[_NODES[type(node.op)]](value(node.left), value(node.right)))
        raise ValueError(f"{expression!r} may hold only whole numbers, + - * and parentheses")

    if len(expression) > 40:
        raise ValueError("the expression is too long; use the three numbers once each")
    return value(tree.body), used


def register() -> str:
    """Register the task under :data:`ENV_ID` (once per process); its id."""
    if ENV_ID not in {spec.id for spec in agentgym.list_envs("bench")}:
        agentgym.register(ENV_ID, f"{__name__}:CountdownEnv", tags=("bench", "math", "single-turn"),
                          description="Make a target from three numbers with + - * (LATR's task, small).")
    return ENV_ID
