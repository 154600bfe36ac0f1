"""Calculator: solve an arithmetic word problem with a calculator tool, then give one answer."""

from __future__ import annotations

from typing import Any

from agentgym.core import Env
from agentgym.envs.tools.arithmetic import (
    ExpressionError,
    Problem,
    answers_match,
    evaluate,
    format_number,
    generate_problem,
    parse_number,
)
from agentgym.errors import ToolError
from agentgym.messages import Message
from agentgym.tools import tool

SYSTEM_PROMPT = """Solve the word problem. Do the arithmetic with the calculator tool: it takes one expression
with + - * / // % ** and parentheses, and the functions sqrt, abs, round(x, digits), min and max.
When you know the result, call the answer tool with the number. You may answer only once."""


class CalculatorEnv(Env):
    """Multi-step arithmetic word problems (shopping, travel, recipes, discounts, interest, ...).

    The agent must call ``calculator`` at least once (with ``require_calculator=True``, the default)
    and then ``answer``; reward 1 only for a correct final answer, within a cent. Difficulty sets the
    number of operations: easy one, medium two or three, hard four or five.
    """

    difficulties = ("easy", "medium", "hard")
    execution = "inline"
    default_max_turns = 8
    forkable = "native"
    """Forked by a deep copy: the episode is plain Python state and ``self.np_random``."""

    def __init__(self, *, require_calculator: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.require_calculator = require_calculator
        self.problem: Problem | None = None
        self.results: list[str] = []

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.problem = generate_problem(self.np_random, difficulty)
        self.results = []
        return [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=self.problem.question)]

    @tool
    def calculator(self, expression: str) -> str:
        """Evaluate an arithmetic expression and return its value.

        Args:
            expression: For example "(12.5 * 4 + 3) / 2" or "round(19.99 * 0.85, 2)".
        """
        try:
            value = format_number(evaluate(expression))
        except ExpressionError as exc:
            raise ToolError(str(exc)) from None
        self.results.append(value)
        return value

    @tool
    def answer(self, value: float | str) -> str:
        """Give your final answer; the episode ends.

        Args:
            value: The number that answers the question, e.g. 1234.5.
        """
        assert self.problem is not None
        try:
            given = parse_number(value) if isinstance(value, str) else float(value)
        except ValueError:
            raise ToolError(f"{value!r} is not a number; answer with digits only, e.g. 1234.5") from None
        correct = answers_match(given, self.problem.answer)
        if correct and self.require_calculator and not self.results:
            self.finish(success=False)
            return "The number is right, but you did not use the calculator tool, which this task requires."
        self.finish(success=correct)
        return "Correct!" if correct else f"Incorrect: the answer was {format_number(self.problem.answer)}."

    def oracle_action(self) -> str:
        assert self.problem is not None
        if not self.results:
            return self.format_call("calculator", expression=self.problem.expression)
        return self.format_call("answer", value=self.problem.answer)

    def render_text(self) -> str:
        if self.problem is None:
            return ""
        return "\n".join([self.problem.question, *(f"calculator -> {r}" for r in self.results)])
