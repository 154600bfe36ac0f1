"""Unified diffs: made from two versions of files, split by file, and cut down to what grading lets through.

Grading takes the agent's diff but not its changes to what decides the grade: the tests, pytest's configuration
and the files Python or pytest load on their own (:func:`protected`). Those are restored to the clean copy's.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

TEST_FOLDERS = frozenset({"test", "tests", "testing"})
CONFIG_FILES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml",
                          "sitecustomize.py", "usercustomize.py", "pytest.py", "py.py", ".coveragerc"})
SHADOWED = frozenset({"_pytest", "pytest", "pluggy"})
"""Packages that a folder of this name in the repository would stand in for."""
_HEADER = re.compile(r"^diff --git a/(.*?) b/(.*?)$", re.MULTILINE)


def protected(path: str) -> bool:
    """Whether a change to ``path`` (relative to the repository) is kept out of grading: a test file or one in a
    test folder, pytest's configuration, ``conftest.py``, a ``.pth`` file, or anything that would be imported in
    place of pytest or Python's own start-up hooks."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    test_file = name.startswith("test_") and name.endswith(".py") or name.endswith("_test.py")
    return (name in CONFIG_FILES or name.endswith(".pth") or test_file
            or any(part in TEST_FOLDERS | SHADOWED for part in parts[:-1]))


def make_diff(before: dict[str, str], after: dict[str, str]) -> str:
    """A ``git apply``-able diff that turns the files ``before`` into ``after`` (path -> text; each text must end
    with a newline)."""
    chunks = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path, ""), after.get(path, "")
        if old == new:
            continue
        lines = list(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                          f"a/{path}" if path in before else "/dev/null",
                                          f"b/{path}" if path in after else "/dev/null"))
        chunks.append(f"diff --git a/{path} b/{path}\n" + "".join(lines))
    return "".join(chunks)


@dataclass(frozen=True)
class FileDiff:
    """The part of a diff that changes one file (``old`` and ``new`` are its paths before and after)."""

    old: str
    new: str
    text: str


def split_diff(diff: str) -> list[FileDiff]:
    """``diff`` (``git diff`` output) cut into its files."""
    starts = [match.start() for match in _HEADER.finditer(diff)]
    parts = []
    for start, end in zip(starts, [*starts[1:], len(diff)], strict=False):
        header = _HEADER.match(diff, start)
        assert header is not None
        parts.append(FileDiff(header.group(1), header.group(2), diff[start:end]))
    return parts


def without_protected(diff: str) -> tuple[str, list[str]]:
    """``diff`` without the files grading restores; and those files' paths."""
    kept, dropped = [], []
    for part in split_diff(diff):
        if protected(part.old) or protected(part.new):
            dropped.append(part.new if part.new == part.old else f"{part.old} -> {part.new}")
        else:
            kept.append(part.text)
    return "".join(kept), dropped


@dataclass(frozen=True)
class Hunk:
    """One hunk of a diff: the lines it replaces and the lines it puts there (context included in both)."""

    path: str
    old: str
    new: str


def hunks(diff: str) -> list[Hunk]:
    """The hunks of ``diff``, as old and new text."""
    found = []
    for part in split_diff(diff):
        old: list[str] | None = None
        new: list[str] = []
        for line in part.text.splitlines(keepends=True):
            if line.startswith("@@"):
                if old is not None:
                    found.append(Hunk(part.new, "".join(old), "".join(new)))
                old, new = [], []
            elif old is None or line.startswith("\\"):
                continue  # the file's header, or "\ No newline at end of file"
            elif line[:1] in (" ", "-"):
                old.append(line[1:])
                if line[0] == " ":
                    new.append(line[1:])
            elif line[:1] == "+":
                new.append(line[1:])
        if old is not None:
            found.append(Hunk(part.new, "".join(old), "".join(new)))
    return found
