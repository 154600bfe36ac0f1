"""Tests for the Calculator environment's arithmetic: safe evaluator, number helpers, problem generator."""

import ast
import math
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.envs.tools import arithmetic
from agentgym.envs.tools.arithmetic import (
    DIFFICULTIES,
    ExpressionError,
    Problem,
    answers_match,
    evaluate,
    format_number,
    generate_problem,
    parse_number,
)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 4 - 3", 3),
        ("2 * 3 ** 2", 18),
        ("2 ** 3 ** 2", 512),
        ("-2 ** 2", -4),
        ("(-2) ** 2", 4),
        ("--3", 3),
        ("+4 - -4", 8),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("7.5 // 2", 3.0),
        ("7 % 3", 1),
        ("-7 % 3", 2),
        ("7 / 2", 3.5),
        ("-7 / 2", -3.5),
        ("2 ** -2", 0.25),
        ("2 ** 0.5", math.sqrt(2)),
        ("1.5e3 + 0.25", 1500.25),
        ("  12 * 34  ", 408),
        ("10 ** 15", 10**15),
        ("sqrt(144) + 1", 13),
        ("sqrt(2)", math.sqrt(2)),
        ("abs(-3.5) * 2", 7.0),
        ("round(2.675, 2)", 2.68),
        ("round(2.5)", 3),
        ("round(-2.5)", -3),
        ("round(1 / 3, 4)", 0.3333),
        ("min(4, 2.5, 9)", 2.5),
        ("max(4, 2.5, 9) - 1", 8),
        ("round((3 * 18.75 + 22.40) / 6, 2)", 13.11),
    ],
)
def test_evaluate_matches_hand_computed_values(expression: str, expected: float) -> None:
    assert evaluate(expression) == pytest.approx(expected, rel=1e-12)


def test_integer_arithmetic_stays_exact() -> None:
    assert evaluate("6 / 3") == 2 and type(evaluate("6 / 3")) is int
    assert type(evaluate("7 / 2")) is float
    assert evaluate("123456789 * 1000000 + 1") == 123_456_789_000_001
    assert type(evaluate("sqrt(49)")) is int and type(evaluate("round(2.4)")) is int
    assert type(evaluate("round(2.45, 1)")) is float


MALICIOUS = [
    "__import__('os')",
    "__import__('os').system('echo hi')",
    "().__class__.__bases__[0].__subclasses__()",
    "(1).real",
    "math.pi",
    "lambda: 1",
    "(lambda x: x)(1)",
    "[x for x in range(10)]",
    "sum(i for i in range(10 ** 9))",
    "9**9**9**9",
    "10**10**10",
    "10**1000",
    "2 ** 100",
    "(10 ** 8) ** (10 ** 8)",
    "0.5 ** -700",
    "1e999",
    "10.0 ** 300",
    "1e15 * 1e15",
    "9" * 30,
    "1" * 300,
    "1+" * 100 + "1",
    "(" * 150 + "1" + ")" * 150,
    "-" * 150 + "1",
    "-(" * 60 + "1" + ")" * 60,
    "+".join(["1"] * 99),
    "x",
    "pi",
    "'abc'",
    "'a' * 10",
    "b'1'",
    "f'{1}'",
    "True",
    "False + 1",
    "None",
    "1j",
    "...",
    "unknown(3)",
    "open('/etc/passwd')",
    "exec('1')",
    "getattr(1, 'real')",
    "round(2.5, ndigits=1)",
    "max(*[1, 2])",
    "2(3 + 4)",
    "1 if 1 else 2",
    "1 < 2",
    "not 1",
    "1 and 2",
    "~1",
    "1 << 2",
    "2 ^ 3",
    "1, 2",
    "1,000 * 3",
    "[1, 2]",
    "{1: 2}",
    "x = 1",
    "import os",
    "1 +",
    "(1",
    "",
    "   ",
    "\x00",
    "12 × 3",
    "$12 * 3",
    "1/0",
    "1 % 0",
    "1 // 0.0",
    "0 ** -1",
    "(-8) ** 0.5",
    "sqrt(-1)",
    "abs()",
    "sqrt(1, 2)",
    "min(1)",
    "round(1.5, 11)",
    "round(1.5, 2.0)",
    "round(1.5, -1)",
]


@pytest.mark.parametrize("expression", MALICIOUS)
def test_malicious_or_invalid_input_is_rejected(expression: str) -> None:
    with pytest.raises(ExpressionError):
        evaluate(expression)


def test_malicious_inputs_fail_fast() -> None:
    start = time.thread_time()  # this thread's CPU time, which a busy neighbour does not inflate
    for expression in MALICIOUS:
        with pytest.raises(ExpressionError):
            evaluate(expression)
    assert time.thread_time() - start < 1.0  # milliseconds; one of them evaluated would take hours


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("x + 1", "unsupported syntax: Name 'x'"),
        ("1 / (2 - 2)", "division by zero"),
        ("1" * 201, "expression too long (max 200 characters)"),
        ("10 ** 1000", "exponent too large"),
        ("2 ** 60", "result too large"),
        ("99999999 * 99999999", "result too large"),
        ("foo(1)", "unknown function 'foo'"),
        ("2 ^ 3", "use ** for powers"),
        ("True", "unsupported syntax: bool literal"),
        ("'a'", "unsupported character"),
        ("round(2, x=1)", "keyword arguments are not supported"),
        ("1 +", "invalid syntax"),
    ],
)
def test_error_messages_are_readable(expression: str, message: str) -> None:
    with pytest.raises(ExpressionError) as error:
        evaluate(expression)
    assert message in str(error.value)


def test_rejected_input_neither_warns_nor_needs_a_string() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ExpressionError, match="unsupported syntax"):
            evaluate("1if 1 else 2")
    assert caught == []
    with pytest.raises(ExpressionError, match="must be a string"):
        evaluate(42)  # type: ignore[arg-type]


def _assert_number_or_expression_error(text: str) -> None:
    try:
        value = evaluate(text)
    except ExpressionError:
        return
    assert type(value) in (int, float)
    assert math.isfinite(value) and abs(value) <= arithmetic.MAX_MAGNITUDE


@given(st.text(max_size=250))
def test_evaluate_arbitrary_text_returns_a_number_or_raises_expression_error(text: str) -> None:
    _assert_number_or_expression_error(text)


@settings(max_examples=300)
@given(st.text(alphabet="0123456789.e+-*/%() ,_^sqrtabsminmaxround", max_size=60))
def test_evaluate_expression_like_text_returns_a_number_or_raises_expression_error(text: str) -> None:
    _assert_number_or_expression_error(text)


# Small integers, optionally raised to a small power, combined with every operator but ** and functions.
_LEAF = st.builds(
    lambda n, power: f"{n} ** {power}" if power else str(n),
    st.integers(-12, 12).map(lambda n: f"({n})" if n < 0 else str(n)),
    st.sampled_from([None, 0, 1, 2, 3]),
)
_ARITHMETIC = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.builds(lambda a, op, b: f"{a} {op} {b}", inner, st.sampled_from(["+", "-", "*", "/", "//", "%"]), inner),
        inner.map(lambda e: f"({e})"),
        inner.map(lambda e: f"-{e}"),
    ),
    max_leaves=6,
)


def _python_eval(expression: str) -> float:
    return eval(expression, {"__builtins__": {}})  # trusted: built from digits and operators only


@settings(max_examples=300)
@given(_ARITHMETIC)
def test_evaluate_agrees_with_python_arithmetic(expression: str) -> None:
    try:
        expected = _python_eval(expression)
    except ZeroDivisionError:
        with pytest.raises(ExpressionError, match="division by zero"):
            evaluate(expression)
        return
    subexpressions = [node for node in ast.walk(ast.parse(expression)) if isinstance(node, ast.expr)]
    if any(abs(_python_eval(ast.unparse(node))) > arithmetic.MAX_MAGNITUDE for node in subexpressions):
        with pytest.raises(ExpressionError, match="too large"):
            evaluate(expression)
        return
    assert math.isclose(evaluate(expression), expected, rel_tol=1e-9, abs_tol=1e-9)


def _binary_operations(expression: str) -> int:
    return sum(isinstance(node, ast.BinOp) for node in ast.walk(ast.parse(expression, mode="eval")))


@pytest.mark.parametrize(
    ("difficulty", "operations"), [("easy", {1}), ("medium", {2, 3}), ("hard", {4, 5})]
)
def test_generated_problems_are_consistent_and_deterministic(difficulty: str, operations: set[int]) -> None:
    questions = set()
    for seed in range(300):
        problem = generate_problem(np.random.default_rng(seed), difficulty)
        assert problem == generate_problem(np.random.default_rng(seed), difficulty)
        assert isinstance(problem, Problem) and problem.difficulty == difficulty
        assert type(problem.answer) is float and problem.answer > 0
        assert answers_match(evaluate(problem.expression), problem.answer)
        assert answers_match(parse_number(format_number(problem.answer)), problem.answer)
        assert "{" not in problem.question and "}" not in problem.question
        assert problem.question.endswith("?")
        assert _binary_operations(problem.expression) in operations
        if "nearest cent" in problem.question or "decimal places" in problem.question:
            assert problem.expression.startswith("round(") and problem.expression.endswith(", 2)")
            assert round(problem.answer, 2) == problem.answer
        else:
            assert problem.answer.is_integer()
        questions.add(problem.question)
    assert len(questions) > 290


def test_generation_consumes_the_rng_deterministically() -> None:
    first, second = np.random.default_rng(7), np.random.default_rng(7)
    assert [generate_problem(first, d) for d in DIFFICULTIES * 5] == [
        generate_problem(second, d) for d in DIFFICULTIES * 5
    ]


def test_unknown_difficulty_names_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="easy, medium, hard"):
        generate_problem(np.random.default_rng(0), "extreme")


@pytest.mark.parametrize(
    ("given_answer", "expected", "match"),
    [
        (12.34, 12.34, True),
        (12.344, 12.34, True),
        (12.3449, 12.34, True),
        (12.36, 12.34, False),
        (1_000_000_000.5, 1_000_000_000, True),
        (101, 100, False),
        (-5, 5, False),
        (math.nan, 1.0, False),
        (math.inf, 1e15, False),
    ],
)
def test_answers_match(given_answer: float, expected: float, match: bool) -> None:
    assert answers_match(given_answer, expected) is match


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,234.50", 1234.5),
        ("$12.30", 12.3),
        (" 42 ", 42.0),
        ("-3.5", -3.5),
        ("+7", 7.0),
        ("-$7", -7.0),
        ("12%", 12.0),
        (".5", 0.5),
        ("1,234,567", 1234567.0),
        ("$1,250.00", 1250.0),
    ],
)
def test_parse_number_accepts(text: str, expected: float) -> None:
    assert parse_number(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", " ", "abc", "$", "1,23", "12,34.5", "1.2.3", "--1", "$-5", "nan", "inf", "1e5", "12 apples"],
)
def test_parse_number_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_number(text)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (3, "3"),
        (2.0, "2"),
        (3.5, "3.5"),
        (1 / 3, "0.333333"),
        (0.1 + 0.2, "0.3"),
        (-2.5, "-2.5"),
        (-0.0, "0"),
        (1e-7, "0"),
        (1234567.891, "1234567.891"),
        (1e15, "1000000000000000"),
        (10**15, "1000000000000000"),
    ],
)
def test_format_number(value: float, text: str) -> None:
    assert format_number(value) == text
