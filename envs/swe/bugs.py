"""Bugs made the way SWE-smith makes its procedural ones: one small transform of one function's syntax tree.

Each transform names a site in a function and the text that replaces it, so that only that text changes: the
rest of the file keeps its formatting and comments, and the fix is a one- or two-line diff. A candidate is
tried only if the file still parses and its tree changed; whether it is a bug at all is for the tests to say
(:mod:`agentgym.envs.swe.make`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

KINDS = ("flip_comparison", "off_by_one", "swap_arguments", "drop_branch", "wrong_constant", "invert_condition",
         "remove_statement")
"""The transforms: a flipped comparison, a bound off by one in a ``range`` or a slice, two arguments of a call
swapped, an ``else``/``elif`` branch dropped, a number or truth value changed, a condition inverted (one that is not a
comparison, which the first flips), a statement removed."""

FLIPS = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">", ast.Eq: "!=", ast.NotEq: "==", ast.Is: "is not",
         ast.IsNot: "is", ast.In: "not in", ast.NotIn: "in"}
_OPERATOR = re.compile(r"<=|>=|==|!=|<|>|\bnot\s+in\b|\bis\s+not\b|\bin\b|\bis\b")
_SIMPLE = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.BinOp)


@dataclass(frozen=True)
class Edit:
    """Replace the source from byte ``start`` to byte ``end`` (offsets into the UTF-8 file) with ``text``."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Bug:
    """One transform of one function of one file: ``source`` is the file as it was, ``buggy`` as it becomes."""

    path: str
    function: str
    kind: str
    line: int
    edit: Edit
    source: str

    @property
    def buggy(self) -> str:
        return apply_edits(self.source, [self.edit])

    def changes_code(self) -> bool:
        """Whether the buggy file parses and its syntax tree differs from the original's."""
        try:
            return ast.dump(ast.parse(self.buggy)) != ast.dump(ast.parse(self.source))
        except SyntaxError:
            return False


def apply_edits(source: str, edits: list[Edit]) -> str:
    """``source`` with ``edits`` (which must not overlap) made."""
    data = source.encode()
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        data = data[: edit.start] + edit.text.encode() + data[edit.end:]
    return data.decode()


def candidates(path: str, source: str, covered: Callable[[int], bool] = lambda line: True) -> list[Bug]:
    """Every bug the transforms make in the functions of ``source`` whose first line (``def`` or its first
    decorator) ``covered`` accepts, in file order (:meth:`Bug.changes_code` tells the ones that change nothing)."""
    tree = ast.parse(source)
    offsets = _Offsets(source)
    found = []
    for name, function in _functions(tree):
        first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
        if not covered(first):
            continue
        for kind in KINDS:
            found += [Bug(path, name, kind, line, edit, source) for line, edit in _SITES[kind](function, offsets)]
    return found


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Each function and method with its qualified name (``Class.method``; nested ones ``outer.inner``)."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{prefix}{child.name}", child
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


class _Offsets:
    """Byte offsets of (line, column) positions, and the text between them."""

    def __init__(self, source: str) -> None:
        self.data = source.encode()
        self.starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def at(self, line: int, column: int) -> int:
        return self.starts[line - 1] + column

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.at(node.lineno, node.col_offset), self.at(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined,arg-type]

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode()

    def line_span(self, first: int, last: int) -> tuple[int, int]:
        """The bytes of lines ``first`` to ``last`` (1-based, inclusive), line ends included."""
        return self.starts[first - 1], self.starts[last]

    def alone(self, node: ast.stmt) -> bool:
        """Whether ``node`` has its lines to itself (nothing before it on its first line, nothing but a comment
        after it on its last)."""
        start, end = self.span(node)
        line_start, line_end = self.line_span(node.lineno, node.end_lineno)  # type: ignore[arg-type]
        after = self.text(end, line_end).strip()
        return not self.text(line_start, start).strip() and (not after or after.startswith("#"))


Sites = Iterator[tuple[int, Edit]]


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """The nodes of ``function``'s body, not those of functions or classes defined inside it."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop(0)
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node)
                     if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda))


def _flip_comparison(function: ast.FunctionDef | ast.AsyncFunctionDef, offsets: _Offsets) -> Sites:
    for node in _own_nodes(function):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in FLIPS:
            start, end = offsets.span(node.left)[1], offsets.span(node.comparators[0])[0]
            gap = offsets.text(start, end)
            match = _OPERATOR.search(gap)
            if match:
                text = gap[: match.start()] + FLIPS[type(node.ops[0])] + gap[match.end():]
                yield node.lineno, Edit(start, end, text)


def _off_by_one(function: ast.FunctionDef | ast.AsyncFunctionDef, offsets: _Offsets) -> Sites:
    for node in _own_nodes(function):
        bounds: list[ast.expr] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" \
                and 1 <= len(node.args) <= 3 and not node.keywords:
            bounds.append(node.args[0] if len(node.args) == 1 else node.args[1])
        elif isinstance(node, ast.Slice):
            bounds += [bound for bound in (node.lower, node.upper) if bound is not None]
        for bound in bounds:
            start, end = offsets.span(bound)
            if isinstance(bound, ast.Constant) and type(bound.value) is int:
                for value in (bound.value + 1, bound.value - 1):
                    yield bound.lineno, Edit(start, end, repr(value))
                continue
            text = offsets.text(start, end)
            if not isinstance(bound, _SIMPLE) or "\n" in text:
                text = f"({text})"
            for change in (" + 1", " - 1"):
                yield bound.lineno, Edit(start, end, text + change)


def _swap_arguments(function: ast.FunctionDef | ast.AsyncFunctionDef, offsets: _Offsets) -> Sites:
    for node in _own_nodes(function):
        if isinstance(node, ast.Call) and not any(isinstance(a, ast.Starred) for a in node.args):
            for first, second in zip(node.args, node.args[1:], strict=False):
                (a_start, a_end), (b_start, b_end) = offsets.span(first), offsets.span(second)
                a, b = offsets.text(a_start, a_end), offsets.text(b_start, b_end)
                if a != b:
                    yield node.lineno, Edit(a_start, b_end, b + offsets.text(a_end, b_start) + a)


def _drop_branch(function: ast.FunctionDef | ast.AsyncFunctionDef, offsets: _Offsets) -> Sites:
    for node in _own_nodes(function):
        if isinstance(node, ast.If) and node.orelse and node.body[-1].end_lineno < node.orelse[0].lineno:  # type: ignore[operator]
            start, _ = offsets.line_span(node.body[-1].end_lineno + 1, node.body[-1].end_lineno + 1)  # type: ignore[operator]
            _, end = offsets.line_span(node.orelse[-1].end_lineno, node.orelse[-1].end_lineno)  # type: ignore[arg-type]
            if offsets.alone(node.orelse[-1]) or isinstance(node.orelse[-1], ast.If):
                yield node.orelse[0].lineno, Edit(start, end, "")


def _wrong_constant(function: ast.FunctionDef | ast.AsyncFunctionDef, offsets: _Offsets) -> Sites:
    docstring = ast.get_docstring(function, clean=False) is not None
    for node in _own_nodes(function):
        if docstring and node is function.body[0]:
            continue
        if isinstance(node, ast.Constant) and type(node.value) in (int, bool):
            value = node.value
            new = repr(not value) if isinstance(value, bool) else repr(value + 1)
            start, end = offsets.span(node)
            yield node.lineno, Edit(start, end, new)


def _invert_condition(function: ast.FunctionDef | ast.AsyncFunctionDef, offsets: _Offsets) -> Sites:
    for node in _own_nodes(function):
        if isinstance(node, ast.If | ast.While | ast.IfExp) and not isinstance(node.test, ast.Compare):
            test = node.test
            start, end = offsets.span(test)
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                inner = offsets.span(test.operand)
                text = offsets.text(*inner)
                if isinstance(test.operand, ast.BoolOp | ast.Compare | ast.IfExp | ast.NamedExpr):
                    text = f"({text})"
            else:
                text = f"not {offsets.text(start, end)}" if isinstance(test, _SIMPLE[:4]) \
                    else f"not ({offsets.text(start, end)})"
            yield test.lineno, Edit(start, end, text)


def _remove_statement(function: ast.FunctionDef | ast.AsyncFunctionDef, offsets: _Offsets) -> Sites:
    blocks = [function.body] + [getattr(node, field) for node in _own_nodes(function)
                                for field in ("body", "orelse", "finalbody")
                                if isinstance(node, ast.stmt | ast.excepthandler) and isinstance(getattr(node, field, None), list)]
    docstring = function.body[0] if ast.get_docstring(function, clean=False) is not None else None
    for block in blocks:
        kept = [s for s in block if s is not docstring]
        if len(kept) < 2:
            continue
        for statement in kept:
            if isinstance(statement, ast.Pass | ast.Global | ast.Nonlocal | ast.FunctionDef | ast.AsyncFunctionDef
                          | ast.ClassDef | ast.Import | ast.ImportFrom) or not offsets.alone(statement):
                continue
            yield statement.lineno, Edit(*offsets.line_span(statement.lineno, statement.end_lineno), "")  # type: ignore[arg-type]


_SITES: dict[str, Callable[[ast.FunctionDef | ast.AsyncFunctionDef, _Offsets], Sites]] = {
    "flip_comparison": _flip_comparison, "off_by_one": _off_by_one, "swap_arguments": _swap_arguments,
    "drop_branch": _drop_branch, "wrong_constant": _wrong_constant, "invert_condition": _invert_condition,
    "remove_statement": _remove_statement,
}
