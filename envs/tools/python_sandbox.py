"""PythonSandbox: answer questions with verifiable answers by writing and running Python in a sandbox."""

from __future__ import annotations

import csv
import io
import json
import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentgym.envs.sandbox_io import describe, encode, write_tree
from agentgym.envs.sandboxed import SandboxEnv
from agentgym.messages import Message
from agentgym.sandboxes.base import SandboxSpec
from agentgym.seeding import pick
from agentgym.tools import tool

PROGRAM = "main.py"
"""Where ``run_python`` saves the agent's code, relative to the work dir."""
EXACT = 1e-6
"""The tolerance of integer answers."""
CENTS = 0.01
"""The tolerance of answers rounded to two decimals."""

SYSTEM_PROMPT = """You work in a sandbox: a Linux machine with Python 3 (standard library only) and no
network. The working directory is /work; every file a task mentions is there.
Tools:
- run_python(code): saves the code as /work/{program}, runs it with python3 in /work (time limit {limit:g} s)
  and returns its exit status, stdout and stderr (long output is cut). Print what you want to see.
- answer(value): your final answer, once; the episode ends. Give just the number or the text asked for.
Numbers are accepted within a small tolerance; text must match exactly."""


@dataclass(frozen=True)
class Task:
    """A question, its answer (computed on the host), and a program that finds the answer in the sandbox."""

    question: str
    answer: str
    program: str
    files: dict[str, str] = field(default_factory=dict)
    tolerance: float | None = EXACT
    """How far a numeric answer may be off; ``None``: the answer is text, compared exactly."""


class PythonSandboxEnv(SandboxEnv):
    """Numeric puzzles (easy), questions about one CSV or JSON file (medium), and two files to join or a web
    server log to parse (hard), solved by running Python in a sandbox and answering once.

    Reward 1 for a correct answer: numbers within a small tolerance, text exactly after stripping.
    """

    difficulties = ("easy", "medium", "hard")
    execution = "inline"
    default_max_turns = 10
    sandbox_spec = SandboxSpec(image="agentgym/python", memory_mb=256, pids=64)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task: Task | None = None
        self.last_output: str | None = None
        """The stdout of the last program run this episode."""

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.task = generate_task(self.np_random, difficulty)
        self.last_output = None
        sandbox = await self.start_sandbox()
        if self.task.files:
            await write_tree(sandbox, self.task.files)
        system = SYSTEM_PROMPT.format(program=PROGRAM, limit=self.time_limit)
        return [Message(role="system", content=system), Message(role="user", content=self.task.question)]

    @tool
    async def run_python(self, code: str) -> str:
        """Run a Python 3 program in the sandbox's /work and return its exit status, stdout and stderr.

        Args:
            code: The program's source, e.g. "import csv\\nprint(sum(range(10)))"; print the results you need.
        """
        result = await self.sandbox.exec(["sh", "-c", f"cat > {PROGRAM} && exec python3 {PROGRAM}"],
                                         timeout=self.time_limit, stdin=encode(code))
        self.last_output = result.stdout
        return describe(result, self.time_limit)

    @tool
    def answer(self, value: str) -> str:
        """Give your final answer; the episode ends.

        Args:
            value: Just the number or text asked for, e.g. "1234" or "north".
        """
        assert self.task is not None
        correct = answers_match(value, self.task)
        self.finish(success=correct)
        return "Correct!" if correct else f"Incorrect: the answer was {self.task.answer}."

    def oracle_action(self) -> str:
        assert self.task is not None
        if self.last_output is None:
            return self.format_call("run_python", code=self.task.program)
        return self.format_call("answer", value=self.last_output.strip())

    def render_text(self) -> str:
        return self.task.question if self.task is not None else ""


def answers_match(given: str, task: Task) -> bool:
    """Whether ``given`` answers ``task``: a number within its tolerance, or the exact text."""
    if task.tolerance is None:
        return given.strip() == task.answer
    try:
        number = float(given.strip().replace(",", ""))
    except ValueError:
        return False
    return math.isfinite(number) and abs(number - float(task.answer)) <= task.tolerance + 1e-9


# -- task generation --------------------------------------------------------------------------------------

def generate_task(rng: np.random.Generator, difficulty: str) -> Task:
    """A task of ``difficulty`` drawn from ``rng``."""
    makers = GENERATORS[difficulty]
    return pick(rng, makers)(rng)


def program(body: str, **params: Any) -> str:
    """A program: ``params`` as assignments, then ``body``."""
    return "".join(f"{name} = {value!r}\n" for name, value in params.items()) + textwrap.dedent(body).lstrip()


def money(value: float) -> str:
    """A number rounded to two decimals, as text."""
    return f"{value:.2f}"


def _first_best(scores: dict[str, float]) -> str:
    """The key with the highest score; the alphabetically first among equals."""
    return min(scores, key=lambda key: (-scores[key], key))


def _csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


# easy: numeric puzzles

_PRIMES = """
sieve = bytearray([1]) * N
sieve[:2] = b"\\0\\0"
for i in range(2, int(N ** 0.5) + 1):
    if sieve[i]:
        sieve[i * i::i] = bytearray(len(range(i * i, N, i)))
print(sum(i for i in range(N) if sieve[i]))
"""


def _primes_task(rng: np.random.Generator) -> Task:
    n = int(rng.integers(2_000, 50_001))
    composite = set()
    for i in range(2, math.isqrt(n) + 1):
        composite.update(range(i * i, n, i))
    total = sum(i for i in range(2, n) if i not in composite)
    return Task(f"What is the sum of all prime numbers below {n}?", str(total), program(_PRIMES, N=n))


_DIGIT_SUM = "print(sum(1 for i in range(1, N + 1) if sum(map(int, str(i))) % K == 0))\n"
_DIGIT_TWICE = "print(sum(1 for i in range(1, N + 1) if str(i).count(D) >= 2))\n"
_PALINDROMES = "print(sum(1 for i in range(A, B + 1) if str(i) == str(i)[::-1]))\n"


def _digits_task(rng: np.random.Generator) -> Task:
    kind = int(rng.integers(3))
    if kind == 0:
        n, k = int(rng.integers(1_000, 50_001)), int(rng.integers(3, 10))
        count = sum(1 for i in range(1, n + 1) if sum(map(int, str(i))) % k == 0)
        return Task(f"How many integers from 1 to {n} (inclusive) have a digit sum divisible by {k}?",
                    str(count), program(_DIGIT_SUM, N=n, K=k))
    if kind == 1:
        n, d = int(rng.integers(1_000, 50_001)), str(int(rng.integers(10)))
        count = sum(1 for i in range(1, n + 1) if str(i).count(d) >= 2)
        return Task(f"How many integers from 1 to {n} (inclusive) contain the digit {d} at least twice?",
                    str(count), program(_DIGIT_TWICE, N=n, D=d))
    a = int(rng.integers(10, 5_000))
    b = a + int(rng.integers(1_000, 40_001))
    count = sum(1 for i in range(a, b + 1) if str(i) == str(i)[::-1])
    return Task(f"How many palindromic integers (reading the same backwards, like 12321) are there from {a} "
                f"to {b} (inclusive)?", str(count), program(_PALINDROMES, A=a, B=b))


_COLLATZ_RULE = ("Collatz rule: an even number x becomes x / 2, an odd number x > 1 becomes 3x + 1; "
                 "a step is one such change.")
_COLLATZ_STEPS = """
steps = 0
while N != 1:
    N = N // 2 if N % 2 == 0 else 3 * N + 1
    steps += 1
print(steps)
"""
_COLLATZ_LONGEST = """
known = {1: 0}
def steps(x):
    path = []
    while x not in known:
        path.append(x)
        x = x // 2 if x % 2 == 0 else 3 * x + 1
    count = known[x]
    for y in reversed(path):
        count += 1
        known[y] = count
    return count
print(max(range(1, N), key=lambda x: (steps(x), -x)))
"""


def _collatz_steps(x: int, known: dict[int, int]) -> int:
    path = []
    while x not in known:
        path.append(x)
        x = x // 2 if x % 2 == 0 else 3 * x + 1
    count = known[x]
    for y in reversed(path):
        count += 1
        known[y] = count
    return count


def _collatz_task(rng: np.random.Generator) -> Task:
    known = {1: 0}
    if rng.integers(2) == 0:
        n = int(rng.integers(1_000, 1_000_001))
        return Task(f"{_COLLATZ_RULE} How many steps does it take to get from {n} to 1?",
                    str(_collatz_steps(n, known)), program(_COLLATZ_STEPS, N=n))
    n = int(rng.integers(1_000, 10_001))
    best = max(range(1, n), key=lambda x: (_collatz_steps(x, known), -x))
    return Task(f"{_COLLATZ_RULE} Which starting number below {n} takes the most steps to reach 1? If "
                "several do, give the smallest.", str(best), program(_COLLATZ_LONGEST, N=n))


_FIBONACCI = """
a, b = 0, 1
for _ in range(N):
    a, b = b, (a + b) % M
print(a)
"""
_POWER_DIGITS = "print(sum(map(int, str(B ** E))))\n"


def _fibonacci_task(rng: np.random.Generator) -> Task:
    n, m = int(rng.integers(100, 10_001)), int(rng.integers(1_000, 1_000_001))
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % m
    return Task(f"The Fibonacci numbers are F(1) = F(2) = 1 and F(k) = F(k-1) + F(k-2). What is F({n}) "
                f"modulo {m}?", str(a), program(_FIBONACCI, N=n, M=m))


def _power_digits_task(rng: np.random.Generator) -> Task:
    base, exponent = int(rng.integers(2, 10)), int(rng.integers(100, 1_501))
    return Task(f"What is the sum of the decimal digits of {base}**{exponent}?",
                str(sum(map(int, str(base**exponent)))), program(_POWER_DIGITS, B=base, E=exponent))


# medium: one data file

REGIONS = ("central", "east", "north", "south", "west")
PRODUCTS = ("anvil", "bucket", "candle", "drill", "easel", "funnel")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
FIRST_NAMES = ("Ada", "Ben", "Cleo", "Dev", "Ema", "Finn", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea", "Milo",
               "Nia", "Omar", "Pia", "Quin", "Rosa", "Sami", "Teo")
LAST_NAMES = ("Abe", "Berg", "Cruz", "Diaz", "Eko", "Fox", "Gray", "Holm", "Ito", "Jones", "Kim", "Lund",
              "Moss", "Nash", "Ortiz", "Park", "Quist", "Roy", "Sato", "Tran")
DEPARTMENTS = ("design", "finance", "legal", "research", "sales", "support")
CITIES = ("Avon", "Bree", "Cork", "Dover", "Elgin", "Fife")
PATHS = ("/", "/api/items", "/api/login", "/api/orders", "/cart", "/help", "/search")
SALES_COLUMNS = "columns date (YYYY-MM-DD), region, product, units, unit_price"
EMPLOYEES_FIELDS = "a JSON list of employees with the keys name, department, age, salary and remote (boolean)"

_SALES_READ = """
import csv
with open("sales.csv", newline="") as f:
    rows = list(csv.DictReader(f))
"""
_SALES_PROGRAMS = (
    _SALES_READ + """
total = sum(int(r["units"]) * float(r["unit_price"]) for r in rows if r["region"] == REGION)
print(f"{total:.2f}")
""",
    _SALES_READ + """
totals = {}
for r in rows:
    totals[r["region"]] = totals.get(r["region"], 0) + int(r["units"])
print(min(totals, key=lambda k: (-totals[k], k)))
""",
    _SALES_READ + """
print(sum(1 for r in rows if int(r["date"][5:7]) == MONTH and int(r["units"]) >= UNITS))
""",
    _SALES_READ + """
prices = [float(r["unit_price"]) for r in rows if r["product"] == PRODUCT]
print(f"{sum(prices) / len(prices):.2f}")
""",
)


def _sales_task(rng: np.random.Generator) -> Task:
    rows = []
    for _ in range(int(rng.integers(40, 121))):
        cents = int(rng.integers(200, 20_001))
        date = f"2024-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 29)):02d}"
        rows.append((date, pick(rng, REGIONS), pick(rng, PRODUCTS), int(rng.integers(1, 51)),
                     f"{cents // 100}.{cents % 100:02d}"))
    rows.sort()
    files = {"sales.csv": _csv(("date", "region", "product", "units", "unit_price"), rows)}
    intro = f"/work/sales.csv lists sales ({SALES_COLUMNS})."
    kind = int(rng.integers(4))
    if kind == 0:
        region = pick(rng, sorted({r[1] for r in rows}))
        total = sum(units * float(price) for _, reg, _, units, price in rows if reg == region)
        return Task(f"{intro} What is the total revenue (units * unit_price) of the {region} region? Round "
                    "to two decimals.", money(total), program(_SALES_PROGRAMS[0], REGION=region), files,
                    CENTS)
    if kind == 1:
        totals: dict[str, float] = {}
        for _, region, _, units, _ in rows:
            totals[region] = totals.get(region, 0) + units
        return Task(f"{intro} Which region sold the most units in total? If several tie, give the "
                    "alphabetically first.", _first_best(totals), program(_SALES_PROGRAMS[1]), files, None)
    if kind == 2:
        month, threshold = int(rng.integers(1, 13)), int(rng.integers(10, 41))
        count = sum(1 for date, _, _, units, _ in rows if int(date[5:7]) == month and units >= threshold)
        return Task(f"{intro} How many rows are from {MONTHS[month - 1]} 2024 and have at least {threshold} "
                    "units?", str(count), program(_SALES_PROGRAMS[2], MONTH=month, UNITS=threshold), files)
    product = pick(rng, sorted({r[2] for r in rows}))
    prices = [float(price) for _, _, prod, _, price in rows if prod == product]
    return Task(f"{intro} What is the average unit_price of the rows for the product {product}? Round to two "
                "decimals.", money(sum(prices) / len(prices)), program(_SALES_PROGRAMS[3], PRODUCT=product),
                files, CENTS)


_EMPLOYEES_READ = """
import json
with open("employees.json") as f:
    staff = json.load(f)
"""
_EMPLOYEES_PROGRAMS = (
    _EMPLOYEES_READ + """
salaries = [e["salary"] for e in staff if e["department"] == DEPARTMENT]
print(f"{sum(salaries) / len(salaries):.2f}")
""",
    _EMPLOYEES_READ + """
remote = {e["department"]: 0 for e in staff}
for e in staff:
    remote[e["department"]] += e["remote"]
print(min(remote, key=lambda k: (-remote[k], k)))
""",
    _EMPLOYEES_READ + """
print(sum(1 for e in staff if e["age"] > AGE and e["salary"] > SALARY))
""",
    _EMPLOYEES_READ + """
print(min((-e["salary"], e["name"]) for e in staff if e["department"] == DEPARTMENT)[1])
""",
)


def _employees_task(rng: np.random.Generator) -> Task:
    names = [f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES]
    chosen = rng.permutation(len(names))[: int(rng.integers(20, 61))]
    staff = [{"name": names[int(i)], "department": pick(rng, DEPARTMENTS), "age": int(rng.integers(22, 65)),
              "salary": int(rng.integers(80, 361)) * 500, "remote": bool(rng.integers(2))} for i in chosen]
    files = {"employees.json": json.dumps(staff, indent=2)}
    intro = f"/work/employees.json holds {EMPLOYEES_FIELDS}."
    kind = int(rng.integers(4))
    department = pick(rng, sorted({e["department"] for e in staff}))
    in_department = [e for e in staff if e["department"] == department]
    if kind == 0:
        mean = sum(e["salary"] for e in in_department) / len(in_department)
        return Task(f"{intro} What is the average salary in the {department} department? Round to two "
                    "decimals.", money(mean), program(_EMPLOYEES_PROGRAMS[0], DEPARTMENT=department), files,
                    CENTS)
    if kind == 1:
        remote = {e["department"]: 0.0 for e in staff}
        for e in staff:
            remote[e["department"]] += e["remote"]
        return Task(f"{intro} Which department has the most remote employees? If several tie, give the "
                    "alphabetically first.", _first_best(remote), program(_EMPLOYEES_PROGRAMS[1]), files,
                    None)
    if kind == 2:
        age, salary = int(rng.integers(25, 56)), int(rng.integers(90, 301)) * 500
        count = sum(1 for e in staff if e["age"] > age and e["salary"] > salary)
        return Task(f"{intro} How many employees are older than {age} and earn a salary above {salary}?",
                    str(count), program(_EMPLOYEES_PROGRAMS[2], AGE=age, SALARY=salary), files)
    best = min((-e["salary"], e["name"]) for e in in_department)[1]
    return Task(f"{intro} Who is the highest-paid employee of the {department} department? Give the name; if "
                "several tie, the alphabetically first.", best,
                program(_EMPLOYEES_PROGRAMS[3], DEPARTMENT=department), files, None)


# hard: two files to join, or a log to parse

_ORDERS_READ = """
import csv, json
with open("customers.csv", newline="") as f:
    customers = {r["customer_id"]: r for r in csv.DictReader(f)}
with open("orders.json") as f:
    orders = json.load(f)
"""
_ORDERS_PROGRAMS = (
    _ORDERS_READ + """
total = sum(o["amount"] for o in orders
            if o["status"] == "shipped" and customers[o["customer_id"]]["city"] == CITY)
print(f"{total:.2f}")
""",
    _ORDERS_READ + """
totals = {}
for o in orders:
    if o["status"] == "shipped":
        name = customers[o["customer_id"]]["name"]
        totals[name] = totals.get(name, 0) + o["amount"]
print(min(totals, key=lambda k: (-totals[k], k)))
""",
    _ORDERS_READ + """
print(len({o["customer_id"] for o in orders
           if o["status"] == "cancelled" and customers[o["customer_id"]]["city"] == CITY}))
""",
)


def _orders_task(rng: np.random.Generator) -> Task:
    names = [f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES]
    chosen = rng.permutation(len(names))[: int(rng.integers(10, 26))]
    customers = [(f"C{k + 1:03d}", names[int(i)], pick(rng, CITIES)) for k, i in enumerate(chosen)]
    orders = [{"order_id": 1000 + k, "customer_id": pick(rng, customers)[0],
               "amount": int(rng.integers(500, 50_001)) / 100,
               "status": "shipped" if k == 0 else pick(rng, ("shipped", "shipped", "pending", "cancelled"))}
              for k in range(int(rng.integers(30, 81)))]
    files = {"customers.csv": _csv(("customer_id", "name", "city"), customers),
             "orders.json": json.dumps(orders, indent=2)}
    intro = ("/work/customers.csv has the columns customer_id, name and city; /work/orders.json is a JSON "
             "list of orders with the keys order_id, customer_id, amount and status (shipped, pending or "
             "cancelled).")
    by_id = {c[0]: c for c in customers}
    city = pick(rng, sorted({by_id[o["customer_id"]][2] for o in orders}))
    kind = int(rng.integers(3))
    if kind == 0:
        total = sum(o["amount"] for o in orders
                    if o["status"] == "shipped" and by_id[o["customer_id"]][2] == city)
        return Task(f"{intro} What is the total amount of the shipped orders of customers in {city}? Round "
                    "to two decimals.", money(total), program(_ORDERS_PROGRAMS[0], CITY=city), files,
                    CENTS)
    if kind == 1:
        totals: dict[str, float] = {}
        for o in orders:
            if o["status"] == "shipped":
                name = by_id[o["customer_id"]][1]
                totals[name] = totals.get(name, 0) + o["amount"]
        return Task(f"{intro} Which customer has the largest total amount of shipped orders? Give the name; "
                    "if several tie, the alphabetically first.", _first_best(totals),
                    program(_ORDERS_PROGRAMS[1]), files, None)
    count = len({o["customer_id"] for o in orders
                 if o["status"] == "cancelled" and by_id[o["customer_id"]][2] == city})
    return Task(f"{intro} How many different customers in {city} have at least one cancelled order?",
                str(count), program(_ORDERS_PROGRAMS[2], CITY=city), files)


_LOG_READ = r"""
import re
LINE = re.compile(r'^(\S+) - - \[(\d+)/(\w+)/(\d+):(\d+):(\d+):(\d+) [^\]]*\] '
                  r'"(\S+) (\S+) [^"]*" (\d+) (\d+) (\d+)ms$')
hits = []
with open("access.log") as f:
    for line in f:
        m = LINE.match(line.strip())
        ip, day, _, _, hour, _, _, method, path, status, size, ms = m.groups()
        hits.append((ip, int(day), int(hour), path, int(status), int(size), int(ms)))
"""
_LOG_PROGRAMS = (
    _LOG_READ + """
print(len({ip for ip, _, _, _, status, _, _ in hits if status >= 500}))
""",
    _LOG_READ + """
times = {}
for _, _, _, path, _, _, ms in hits:
    times.setdefault(path, []).append(ms)
means = {p: sum(t) / len(t) for p, t in times.items()}
print(min(means, key=lambda k: (-means[k], k)))
""",
    _LOG_READ + """
print(sum(size for _, _, _, path, status, size, _ in hits if path == PATH and status == 200))
""",
    _LOG_READ + """
print(sum(1 for _, day, hour, _, _, _, _ in hits if day == DAY and hour == HOUR))
""",
)
_STATUSES = (200,) * 10 + (201, 301, 404, 404, 500, 502, 503)


def _log_task(rng: np.random.Generator) -> Task:
    ips = [f"10.0.{int(rng.integers(256))}.{int(rng.integers(1, 255))}"
           for _ in range(int(rng.integers(6, 16)))]
    day, second = int(rng.integers(1, 29)), int(rng.integers(0, 14 * 3600))
    hits = []
    for _ in range(int(rng.integers(80, 201))):
        second += int(rng.integers(1, 121))
        status = pick(rng, _STATUSES)
        method = pick(rng, ("GET", "GET", "GET", "POST"))
        size = 0 if status == 301 else int(rng.integers(100, 50_001))
        hits.append((pick(rng, ips), day, second, method, pick(rng, PATHS), status, size,
                     int(rng.integers(1, 2_001))))
    lines = [f'{ip} - - [{d:02d}/May/2024:{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d} +0000] '
             f'"{method} {path} HTTP/1.1" {status} {size} {ms}ms'
             for ip, d, s, method, path, status, size, ms in hits]
    files = {"access.log": "\n".join(lines) + "\n"}
    intro = ("/work/access.log is a web server log; each line reads like 10.0.3.7 - - "
             '[05/May/2024:13:04:22 +0000] "GET /api/items HTTP/1.1" 200 5120 87ms, with the status, the '
             "response size in bytes and the response time.")
    kind = int(rng.integers(4))
    if kind == 0:
        count = len({h[0] for h in hits if h[5] >= 500})
        return Task(f"{intro} How many different IP addresses got at least one response with a 5xx status?",
                    str(count), program(_LOG_PROGRAMS[0]), files)
    if kind == 1:
        times: dict[str, list[int]] = {}
        for h in hits:
            times.setdefault(h[4], []).append(h[7])
        means = {path: sum(t) / len(t) for path, t in times.items()}
        return Task(f"{intro} Which path has the highest mean response time? If several tie, give the "
                    "alphabetically first.", _first_best(means), program(_LOG_PROGRAMS[1]), files, None)
    if kind == 2:
        path = pick(rng, sorted({h[4] for h in hits}))
        total = sum(h[6] for h in hits if h[4] == path and h[5] == 200)
        return Task(f"{intro} How many bytes in total did the responses with status 200 to the path {path} "
                    "send?", str(total), program(_LOG_PROGRAMS[2], PATH=path), files)
    hour = pick(rng, sorted({h[2] // 3600 for h in hits}))
    count = sum(1 for h in hits if h[2] // 3600 == hour)
    return Task(f"{intro} How many requests were made from {hour:02d}:00:00 to {hour:02d}:59:59 on {day:02d} "
                "May 2024?", str(count), program(_LOG_PROGRAMS[3], DAY=day, HOUR=hour), files)


GENERATORS: dict[str, tuple[Callable[[np.random.Generator], Task], ...]] = {
    "easy": (_primes_task, _digits_task, _collatz_task, _fibonacci_task, _power_digits_task),
    "medium": (_sales_task, _employees_task),
    "hard": (_orders_task, _log_task),
}
"""The task makers of each difficulty; one is drawn per episode."""
