"""Arithmetic for the Calculator environment: a safe expression evaluator and a word-problem generator.

``evaluate`` never calls ``eval``: it parses the text with ``ast`` and walks a whitelist of numeric nodes,
under limits on length, size, nesting and magnitude, so a hostile expression fails fast with an
``ExpressionError`` whose message a model can read. ``generate_problem`` draws a multi-step word problem
from a numpy ``Generator``, together with the expression an oracle would type into the calculator.
"""

from __future__ import annotations

import ast
import math
import operator
import re
import string
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

import numpy as np

from agentgym.seeding import pick

Number = int | float

MAX_LENGTH = 200
"""Longest expression accepted, in characters (after stripping surrounding whitespace)."""
MAX_NODES = 200
"""Most AST nodes an expression may parse into, operator nodes included."""
MAX_DEPTH = 40
"""Deepest nesting of operations and calls."""
MAX_EXPONENT = 100
"""Largest exponent magnitude allowed in ``**``."""
MAX_MAGNITUDE = 1e15
"""Largest magnitude allowed for any literal or intermediate result."""
MAX_ROUND_DIGITS = 10
"""Most decimal places ``round`` may keep."""

DIFFICULTIES = ("easy", "medium", "hard")
"""Difficulty levels understood by ``generate_problem``."""

_ALLOWED_CHARACTERS = frozenset(string.ascii_letters + string.digits + string.whitespace + "+-*/%().,_^=")


class ExpressionError(ValueError):
    """A malformed expression, unsupported syntax or a broken limit; the message is meant for the model."""


def evaluate(expression: str) -> Number:
    """Evaluate an arithmetic expression safely and return an ``int`` or a finite ``float``.

    Supports number literals, unary ``+``/``-``, ``+ - * / // % **``, parentheses and the functions
    ``sqrt(x)``, ``abs(x)``, ``round(x)``, ``round(x, digits)``, ``min(a, b, ...)`` and ``max(a, b, ...)``.
    Integers stay exact: ``/`` between integers gives an ``int`` when the division is exact (``6/3`` -> 2)
    and a ``float`` otherwise (``7/2`` -> 3.5), ``sqrt`` of a perfect square gives an ``int``, and
    ``round(x)``/``round(x, 0)`` give an ``int``. ``round`` rounds halves away from zero on the number as
    written (``round(2.675, 2)`` -> 2.68, ``round(2.5)`` -> 3), unlike Python's built-in. Anything else
    raises ``ExpressionError``.
    """
    if not isinstance(expression, str):
        raise ExpressionError("expression must be a string")
    text = expression.strip()
    if not text:
        raise ExpressionError("empty expression")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"expression too long (max {MAX_LENGTH} characters)")
    unsupported = next((char for char in text if char not in _ALLOWED_CHARACTERS), None)
    if unsupported is not None:
        raise ExpressionError(f"unsupported character {unsupported!r}")
    try:
        # Text like "1if 1 else 2" makes the tokenizer warn; the node whitelist rejects it anyway.
        with warnings.catch_warnings(action="ignore", category=SyntaxWarning):
            tree = ast.parse(text, mode="eval")
    except SyntaxError as error:
        raise ExpressionError(f"invalid syntax: {error.msg}") from None
    except (ValueError, RecursionError, MemoryError):
        raise ExpressionError("invalid syntax") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise ExpressionError(f"expression too complex (max {MAX_NODES} syntax nodes)")
    try:
        return _eval(tree.body, depth=1)
    except ZeroDivisionError:
        raise ExpressionError("division by zero") from None
    except OverflowError:
        raise ExpressionError(f"result too large (max magnitude {MAX_MAGNITUDE:g})") from None


def _eval(node: ast.expr, depth: int) -> Number:
    """Value of one whitelisted node; every value passes the magnitude check."""
    if depth > MAX_DEPTH:
        raise ExpressionError(f"expression too deeply nested (max {MAX_DEPTH} levels)")
    match node:
        case ast.Constant(value=value):
            if type(value) not in (int, float):
                raise ExpressionError(f"unsupported syntax: {type(value).__name__} literal")
            result = value
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            result = -_eval(operand, depth + 1)
        case ast.UnaryOp(op=ast.UAdd(), operand=operand):
            result = +_eval(operand, depth + 1)
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY_OPERATORS:
            result = _BINARY_OPERATORS[type(op)](_eval(left, depth + 1), _eval(right, depth + 1))
        case ast.BinOp(op=ast.BitXor()):
            raise ExpressionError("unsupported operator: ^ (use ** for powers)")
        case ast.BinOp(op=op) | ast.UnaryOp(op=op):
            raise ExpressionError(f"unsupported operator: {type(op).__name__}")
        case ast.Call():
            result = _call(node, depth)
        case ast.Name(id=name):
            raise ExpressionError(f"unsupported syntax: Name {name!r}")
        case ast.Tuple():
            raise ExpressionError("unsupported syntax: Tuple (write numbers without thousands separators)")
        case _:
            raise ExpressionError(f"unsupported syntax: {type(node).__name__}")
    if abs(result) > MAX_MAGNITUDE or not math.isfinite(result):
        raise ExpressionError(f"result too large (max magnitude {MAX_MAGNITUDE:g})")
    return result


def _call(node: ast.Call, depth: int) -> Number:
    """Value of a call to one of the whitelisted functions."""
    if not isinstance(node.func, ast.Name):
        allowed = ", ".join(_FUNCTIONS)
        raise ExpressionError(f"unsupported syntax: only {allowed} can be called (use * to multiply)")
    if node.func.id not in _FUNCTIONS:
        raise ExpressionError(f"unknown function {node.func.id!r} (allowed: {', '.join(_FUNCTIONS)})")
    if node.keywords:
        raise ExpressionError("keyword arguments are not supported")
    function, min_args, max_args, usage = _FUNCTIONS[node.func.id]
    if not min_args <= len(node.args) <= max_args:
        raise ExpressionError(f"wrong number of arguments: use {usage}")
    return function(*(_eval(arg, depth + 1) for arg in node.args))


def _divide(a: Number, b: Number) -> Number:
    """True division that stays an ``int`` when both operands are ints and the division is exact."""
    if isinstance(a, int) and isinstance(b, int) and b != 0 and a % b == 0:
        return a // b
    return a / b


def _power(base: Number, exponent: Number) -> Number:
    """``base ** exponent`` with the exponent and the result's size checked before computing."""
    if abs(exponent) > MAX_EXPONENT:
        raise ExpressionError(f"exponent too large (max {MAX_EXPONENT})")
    if base < 0 and exponent != int(exponent):
        raise ExpressionError("a negative number cannot be raised to a fractional power")
    if base != 0 and exponent * math.log10(abs(base)) > math.log10(MAX_MAGNITUDE):
        raise ExpressionError(f"result too large (max magnitude {MAX_MAGNITUDE:g})")
    return base**exponent


def _sqrt(x: Number) -> Number:
    """Square root; an ``int`` for perfect squares."""
    if x < 0:
        raise ExpressionError("square root of a negative number")
    if isinstance(x, int) and math.isqrt(x) ** 2 == x:
        return math.isqrt(x)
    return math.sqrt(x)


def _round(x: Number, digits: Number = 0) -> Number:
    """Round halves away from zero on the shortest decimal form of ``x``; an ``int`` when ``digits`` is 0."""
    if not isinstance(digits, int) or not 0 <= digits <= MAX_ROUND_DIGITS:
        raise ExpressionError(f"round's digits must be a whole number from 0 to {MAX_ROUND_DIGITS}")
    if isinstance(x, int):
        return x
    rounded = Decimal(repr(x)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return int(rounded) if digits == 0 else float(rounded)


_BINARY_OPERATORS: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: _divide,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}

# name -> (function, fewest arguments, most arguments, usage shown when the count is wrong)
_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int, str]] = {
    "sqrt": (_sqrt, 1, 1, "sqrt(x)"),
    "abs": (abs, 1, 1, "abs(x)"),
    "round": (_round, 1, 2, "round(x) or round(x, digits)"),
    "min": (min, 2, MAX_NODES, "min(a, b, ...)"),
    "max": (max, 2, MAX_NODES, "max(a, b, ...)"),
}


def format_number(x: Number) -> str:
    """Render a result cleanly: ints as they are, floats to at most 6 decimals without trailing zeros."""
    if isinstance(x, int):
        return str(x)
    text = f"{x:.6f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def answers_match(given: float, expected: float) -> bool:
    """Whether an answer is right: equal within 1e-6 relative or 0.005 absolute (half a cent)."""
    return math.isfinite(given) and math.isclose(given, expected, rel_tol=1e-6, abs_tol=0.005)


_NUMBER = re.compile(r"(?P<sign>[+-]?)\$?(?P<digits>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)%?")


def parse_number(text: str) -> float:
    """Read a number as a model may write it: ``" 42 "``, ``"-3.5"``, ``"$12.30"``, ``"1,234.50"``.

    Surrounding whitespace, one leading ``$`` (after any sign) and correctly grouped thousands separators
    are allowed. A trailing ``%`` is dropped and the number kept as written (``"12%"`` -> 12.0), since a
    question asking for a percentage expects that figure. Anything else (words, exponents, ``nan``,
    ``"1,23"``) raises ``ValueError``.
    """
    match = _NUMBER.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a number: {text!r}")
    return float(match["sign"] + match["digits"].replace(",", ""))


@dataclass(frozen=True)
class Problem:
    """A word problem, its answer, the calculator expression that yields that answer, and its difficulty."""

    question: str
    answer: float
    expression: str
    difficulty: str


def generate_problem(rng: np.random.Generator, difficulty: str) -> Problem:
    """Draw a word problem of the given difficulty; the same ``rng`` state always gives the same problem.

    "easy" is one operation on two- or three-digit integers, "medium" two or three operations (shopping,
    change, bills, distances, recipes, savings), "hard" four or five with decimals and percentages
    (discounts and tax, tips, fuel, fencing, unit conversion, compound interest). Money and other decimal
    answers are rounded to 2 places, in the question's wording and by ``round(..., 2)`` in the expression;
    draws whose exact value lies on a half-cent are redrawn so the rounding is never ambiguous.
    """
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"unknown difficulty {difficulty!r}; expected one of: {', '.join(DIFFICULTIES)}")
    template = pick(rng, _TEMPLATES[difficulty])
    while True:
        question, expression, decimals = template(rng)
        if decimals is not None:
            scaled = evaluate(expression) * 10**decimals
            if abs(scaled - math.floor(scaled) - 0.5) < 1e-6:
                continue
            expression = f"round({expression}, {decimals})"
        return Problem(question, float(evaluate(expression)), expression, difficulty)


# Word-problem templates. Each draws its numbers from the rng and returns the question, the expression
# computing the answer, and the decimal places to round that answer to (None for whole-number answers).
# Numbers appear in the question exactly as in the expression, apart from thousands separators.
_Draft = tuple[str, str, int | None]

_NAMES = (
    "Amara", "Ben", "Chen", "Diego", "Elif", "Farah", "Gustav", "Hana", "Ivan", "Jamal",
    "Keiko", "Lena", "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq",
)  # fmt: skip
# plural item, lowest and highest unit price in dollars
_SHOP_ITEMS = (
    ("notebooks", 1.5, 6.0), ("pens", 0.8, 3.5), ("mugs", 4.0, 15.0), ("T-shirts", 8.0, 25.0),
    ("batteries", 0.9, 4.0), ("plants", 3.5, 19.0), ("towels", 5.0, 18.0), ("candles", 2.5, 9.0),
)  # fmt: skip



def _between(rng: np.random.Generator, low: int, high: int) -> int:
    """A uniform integer from ``low`` to ``high`` inclusive."""
    return int(rng.integers(low, high + 1))


def _decimal(rng: np.random.Generator, low: float, high: float, places: int = 1) -> str:
    """A uniform number from ``low`` to ``high`` with at most ``places`` decimals, no trailing zeros."""
    scale = 10**places
    return format_number(_between(rng, round(low * scale), round(high * scale)) / scale)


def _price(rng: np.random.Generator, low: float, high: float) -> str:
    """A price in dollars from ``low`` to ``high``, written with exactly two decimals."""
    return f"{_between(rng, round(low * 100), round(high * 100)) / 100:.2f}"


def _crates(rng: np.random.Generator) -> _Draft:
    container, item = pick(
        rng, [("crate", "apples"), ("carton", "juice boxes"), ("pallet", "bricks"), ("case", "bottles")]
    )
    count, each = _between(rng, 23, 480), _between(rng, 12, 96)
    question = (
        f"A warehouse holds {count} {container}s of {item}, with {each} {item} in each {container}. "
        f"How many {item} are there altogether?"
    )
    return question, f"{count} * {each}", None


def _equal_shares(rng: np.random.Generator) -> _Draft:
    name, item = pick(rng, _NAMES), pick(rng, ["stickers", "seeds", "coins", "beads", "stamps"])
    groups = _between(rng, 12, 29)
    total = groups * _between(rng, 12, 999 // groups)
    question = (
        f"{name} has {total} {item} and shares them equally among {groups} friends. "
        f"How many {item} does each friend get?"
    )
    return question, f"{total} / {groups}", None


def _difference(rng: np.random.Generator) -> _Draft:
    name = pick(rng, _NAMES)
    total = _between(rng, 400, 999)
    done = _between(rng, 101, total - 100)
    question = pick(
        rng,
        [
            f"{name} is reading a {total}-page book and has read {done} pages. How many pages are left?",
            f"A theatre has {total} seats and {done} tickets have been sold. How many seats are still free?",
            f"{name} needs {total} points for a prize and has {done}. How many more points are needed?",
        ],
    )
    return question, f"{total} - {done}", None


def _shopping_total(rng: np.random.Generator) -> _Draft:
    name = pick(rng, _NAMES)
    first, second = (_SHOP_ITEMS[i] for i in rng.choice(len(_SHOP_ITEMS), size=2, replace=False))
    count1, price1 = _between(rng, 3, 18), _price(rng, first[1], first[2])
    count2, price2 = _between(rng, 3, 18), _price(rng, second[1], second[2])
    question = (
        f"{name} buys {count1} {first[0]} at ${price1} each and {count2} {second[0]} at ${price2} each. "
        f"How much does {name} spend in total, in dollars to the nearest cent?"
    )
    return question, f"{count1} * {price1} + {count2} * {price2}", 2


def _change_left(rng: np.random.Generator) -> _Draft:
    name, (item, low, high) = pick(rng, _NAMES), pick(rng, _SHOP_ITEMS)
    count, price = _between(rng, 3, 12), _price(rng, low, high)
    budget = 10 * (math.ceil(count * float(price) / 10) + _between(rng, 1, 9))
    question = (
        f"{name} has ${budget} and buys {count} {item} at ${price} each. "
        "How much money is left, in dollars to the nearest cent?"
    )
    return question, f"{budget} - {count} * {price}", 2


def _split_bill(rng: np.random.Generator) -> _Draft:
    dish = pick(rng, ["pizzas", "curries", "burgers", "salads"])
    people, count = _between(rng, 3, 8), _between(rng, 2, 6)
    price, drinks = _price(rng, 9.5, 24.0), _price(rng, 12.0, 60.0)
    question = (
        f"{people} friends order {count} {dish} at ${price} each and drinks costing ${drinks} in total. "
        "They split the bill equally. How much does each friend pay, in dollars to the nearest cent?"
    )
    return question, f"({count} * {price} + {drinks}) / {people}", 2


def _trip_distance(rng: np.random.Generator) -> _Draft:
    vehicle = pick(rng, ["bus", "truck", "train", "van"])
    speed1, hours1 = _between(rng, 48, 120), _between(rng, 2, 9)
    speed2, hours2 = _between(rng, 48, 120), _between(rng, 2, 9)
    question = (
        f"A {vehicle} travels at {speed1} km/h for {hours1} hours, then at {speed2} km/h for {hours2} hours. "
        "How many kilometres does it travel in total?"
    )
    return question, f"{speed1} * {hours1} + {speed2} * {hours2}", None


def _recipe_scaling(rng: np.random.Generator) -> _Draft:
    ingredient = pick(rng, ["flour", "sugar", "rice", "butter", "oats", "cheese"])
    servings, target = _between(rng, 3, 8), _between(rng, 11, 60)
    amount = servings * _between(rng, 35, 160)
    question = (
        f"A recipe for {servings} people uses {amount:,} g of {ingredient}. "
        f"How many grams of {ingredient} are needed for {target} people?"
    )
    return question, f"{amount} / {servings} * {target}", None


def _weekly_savings(rng: np.random.Generator) -> _Draft:
    name, thing = pick(rng, _NAMES), pick(rng, ["bike", "laptop", "guitar", "camera", "phone"])
    weekly, weeks = _between(rng, 15, 89), _between(rng, 12, 52)
    cost = _between(rng, weekly * weeks // 3, weekly * weeks - 1)
    question = (
        f"{name} saves ${weekly} every week for {weeks} weeks, then spends ${cost:,} on a {thing}. "
        f"How many dollars does {name} have left?"
    )
    return question, f"{weekly} * {weeks} - {cost}", None


def _discount_and_tax(rng: np.random.Generator) -> _Draft:
    name = pick(rng, _NAMES)
    item = pick(rng, ["jacket", "pair of boots", "backpack", "lamp", "rug"])
    plural, low, high = pick(rng, _SHOP_ITEMS)
    price, count, unit_price = _price(rng, 40.0, 250.0), _between(rng, 2, 6), _price(rng, low, high)
    discount, tax_basis_points = _between(rng, 5, 40), _between(rng, 400, 1000)
    question = (
        f"{name} buys a {item} for ${price} and {count} {plural} at ${unit_price} each. The shop takes "
        f"{discount}% off the whole purchase and then adds {format_number(tax_basis_points / 100)}% tax. "
        "What is the final bill, in dollars to the nearest cent?"
    )
    discount_factor = format_number((100 - discount) / 100)
    tax_factor = format_number(1 + tax_basis_points / 10_000)
    return question, f"({price} + {count} * {unit_price}) * {discount_factor} * {tax_factor}", 2


def _tip_split(rng: np.random.Generator) -> _Draft:
    main, dessert = pick(rng, ["pasta dishes", "steaks", "curries"]), pick(rng, ["cheesecakes", "brownies"])
    people, tip = _between(rng, 3, 9), _between(rng, 10, 25)
    mains, main_price = _between(rng, 3, 9), _price(rng, 14.0, 39.0)
    desserts, dessert_price = _between(rng, 2, 9), _price(rng, 5.0, 12.0)
    question = (
        f"{people} colleagues order {mains} {main} at ${main_price} each and {desserts} {dessert} at "
        f"${dessert_price} each. They add a {tip}% tip to the bill and split it equally. "
        "How much does each person pay, in dollars to the nearest cent?"
    )
    tip_factor = format_number(1 + tip / 100)
    return question, f"({mains} * {main_price} + {desserts} * {dessert_price}) * {tip_factor} / {people}", 2


def _fuel_cost(rng: np.random.Generator) -> _Draft:
    name = pick(rng, _NAMES)
    distance, usage, price = _between(rng, 120, 950), _decimal(rng, 4.5, 11.9), _price(rng, 1.2, 2.4)
    riders = _between(rng, 2, 5)
    question = (
        f"{name} drives {distance} km in a car that uses {usage} litres of fuel per 100 km. Fuel costs "
        f"${price} per litre, and the cost is shared equally by {riders} people. "
        "How much does each person pay, in dollars to the nearest cent?"
    )
    return question, f"{distance} / 100 * {usage} * {price} / {riders}", 2


def _fence_cost(rng: np.random.Generator) -> _Draft:
    length, width, gate = _decimal(rng, 8.0, 40.0), _decimal(rng, 6.0, 30.0), _decimal(rng, 0.8, 2.5)
    price = _price(rng, 9.0, 45.0)
    question = (
        f"A rectangular garden is {length} m long and {width} m wide. A fence will run around its whole edge "
        f"except for a {gate} m gate, and fencing costs ${price} per metre. "
        "How much will the fencing cost, in dollars to the nearest cent?"
    )
    return question, f"(2 * ({length} + {width}) - {gate}) * {price}", 2


def _running_speed(rng: np.random.Generator) -> _Draft:
    name = pick(rng, _NAMES)
    runs = [_decimal(rng, 3.0, 15.0, places=2) for _ in range(3)]
    minutes = round(sum(float(run) for run in runs) * _between(rng, 75, 125) / 10)
    question = (
        f"{name} runs {runs[0]} miles on Monday, {runs[1]} miles on Wednesday and {runs[2]} miles on "
        f"Saturday, taking {minutes} minutes in all. Using 1 mile = 1.609 km, what was {name}'s average "
        "speed in kilometres per hour, to two decimal places?"
    )
    return question, f"({runs[0]} + {runs[1]} + {runs[2]}) * 1.609 / ({minutes} / 60)", 2


def _compound_interest(rng: np.random.Generator) -> _Draft:
    name = pick(rng, _NAMES)
    principal, rate, years = 100 * _between(rng, 15, 89), _decimal(rng, 1.5, 6.5), _between(rng, 3, 8)
    withdrawal = 50 * _between(rng, 4, principal // 50)
    question = (
        f"{name} puts ${principal:,} into a savings account that pays {rate}% interest per year, compounded "
        f"yearly. After {years} years {name} withdraws ${withdrawal:,}. "
        "How much is left in the account, in dollars to the nearest cent?"
    )
    return question, f"{principal} * (1 + {rate} / 100) ** {years} - {withdrawal}", 2


_TEMPLATES: dict[str, tuple[Callable[[np.random.Generator], _Draft], ...]] = {
    "easy": (_crates, _equal_shares, _difference),
    "medium": (_shopping_total, _change_left, _split_bill, _trip_distance, _recipe_scaling, _weekly_savings),
    "hard": (_discount_and_tax, _tip_split, _fuel_cost, _fence_cost, _running_speed, _compound_interest),
}
