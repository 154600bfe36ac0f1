"""What a desktop task generates: the files laid down, the applications started, the instruction, the checks on
the files afterwards and the oracle's plan; and the two trips into the sandbox around it (laying the files
down, reading them back)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentgym.envs.gui.env import TYPE_LIMIT
from agentgym.envs.sandbox_io import FILE_TIME, read_back, write_tree
from agentgym.sandboxes.base import Sandbox
from agentgym.sandboxes.errors import SandboxError

READ_LIMIT = 256 * 1024
"""The largest file whose text is read back; a bigger one reads as ``None``."""
ENTRY_LIMIT = 10_000
"""The most files and folders of /work read back; past them (or past a quarter of the sandbox's
``output_limit`` in names) the read-back is incomplete, and an incomplete one scores 0."""
DAMAGE_COST = 0.25
"""What each file the task did not name costs when it is changed, moved or deleted."""
EDITOR = "mousepad"
FILE_MANAGER = ("pcmanfm", "/work")
TERMINAL = ("xterm", "-T", "Terminal", "-fa", "DejaVu Sans Mono", "-fs", "11", "-e", "bash", "--rcfile",
            "/etc/desktop/bashrc", "-i")
START_KEYS: dict[str, tuple[str, ...]] = {"pcmanfm": ("ctrl+Home",)}
"""Keys pressed in an application (by its program's name) once it has started, to bring it to one starting
state. PCManFM gives its file list the keyboard focus in idle time while a thread reads the folder: when the
list gets the focus after its rows it puts its cursor on the first row (a dotted frame), when it gets it before
(a slow read: files whose type is guessed from their content, such as ``.tmp``, or a busy machine) there is no
cursor, so the first screen, and what the arrow keys do, depended on which thread came first. ctrl+Home puts
the cursor on the first row without selecting it, as the first order does."""
Step = tuple[str, dict[str, Any]]
"""One oracle action: a tool's name and its arguments."""


@dataclass(frozen=True)
class State:
    """What the checks see at the end, as the agent left it: every entry of the work dir that is not hidden and
    not a folder, with its text (``None`` for anything but a regular file of UTF-8 text up to
    :data:`READ_LIMIT` that fits the read-back's output: a symbolic link, a fifo, a socket, a binary or too
    large file, one that could not be read) and its permission bits, and every folder, paths relative to /work (a name that is not UTF-8 has
    U+FFFD in its place); what is in a folder the probe cannot enter counts as missing. ``complete`` is
    ``False`` when there was more than the probe reads back (:data:`ENTRY_LIMIT`), which scores 0. And the
    applications' state as the screen shows it, the titles of the open windows (top first)."""

    files: dict[str, str | None]
    modes: dict[str, int]
    dirs: frozenset[str]
    windows: tuple[str, ...] = ()
    complete: bool = True


@dataclass(frozen=True)
class Episode:
    """One generated task: ``files`` and empty ``dirs`` to lay down in /work, the ``apps`` to start (each an
    argv, started in order, the last on top), what the agent is told, ``check`` giving each part's score (0
    to 1) on the :class:`State` afterwards, the ``plan`` the oracle follows, and the files that must stay as
    they are (by default every file the task did not name as changing)."""

    instruction: str
    files: dict[str, str]
    apps: tuple[tuple[str, ...], ...]
    check: Callable[[State], list[float]]
    plan: tuple[Step, ...]
    changes: frozenset[str] = frozenset()
    """Paths of ``files`` the task changes, moves or deletes."""
    dirs: tuple[str, ...] = ()
    keep: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keep", {path: text for path, text in self.files.items()
                                          if path not in self.changes})

    def score(self, state: State) -> tuple[float, bool, list[float], list[str]]:
        """The reward, whether the task is done, each part's score and the files damaged: the mean of the
        parts less :data:`DAMAGE_COST` per damaged file; 0 and not done for an incomplete state, in which
        what is missing cannot be told from what was not read."""
        parts = self.check(state)
        damaged = sorted(path for path, text in self.keep.items() if state.files.get(path) != text)
        if not state.complete:
            return 0.0, False, parts, damaged
        reward = max(0.0, sum(parts) / len(parts) - DAMAGE_COST * len(damaged))
        return reward, all(part == 1.0 for part in parts) and not damaged, parts, damaged


# -- the oracle's steps -------------------------------------------------------------------------------------

def key(combo: str) -> Step:
    """Press ``combo``."""
    return ("key", {"combo": combo})


def click(point: tuple[int, int]) -> Step:
    """Left-click at ``point``."""
    return ("click", {"x": point[0], "y": point[1]})


def double_click(point: tuple[int, int]) -> Step:
    """Double-click at ``point``."""
    return ("double_click", {"x": point[0], "y": point[1]})


def drag(start: tuple[int, int], end: tuple[int, int]) -> Step:
    """Drag from ``start`` to ``end``."""
    return ("drag", {"x1": start[0], "y1": start[1], "x2": end[0], "y2": end[1]})


def typed(text: str) -> list[Step]:
    """Type ``text``, in as many calls as the tool's limit needs."""
    return [("type", {"text": text[i:i + TYPE_LIMIT]}) for i in range(0, len(text), TYPE_LIMIT)]


def save_as(path: str, *, new: bool) -> list[Step]:
    """Save the editor's document under ``path`` (``new``: it has no name yet, so ctrl+s asks for one)."""
    return [key("ctrl+s" if new else "ctrl+shift+s"), *typed(path), key("Enter")]


def retype(text: str) -> list[Step]:
    """Replace the editor's whole text with ``text`` and save it."""
    return [key("ctrl+a"), *typed(text), key("ctrl+s")]


# -- checks ---------------------------------------------------------------------------------------------------

def lines(text: str | None) -> list[str] | None:
    """The lines of ``text`` without trailing spaces, trailing blank lines dropped; ``None`` for ``None``."""
    if text is None:
        return None
    found = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while found and not found[-1]:
        found.pop()
    return found


def line_match(got: str | None, want: str) -> float:
    """The share of the lines of ``want`` found at the same place in ``got`` (of the longer of the two)."""
    have, need = lines(got), lines(want)
    if have is None or not need:
        return 0.0
    return sum(a == b for a, b in zip(have, need, strict=False)) / max(len(have), len(need))


def changed_lines(before: str, after: str) -> list[int]:
    """The indices of the lines of ``after`` that differ from ``before`` (the two have as many lines)."""
    old, new = lines(before) or [], lines(after) or []
    return [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]


def edit_score(got: str | None, want: str, targets: list[int]) -> float:
    """How much of an edit was made: the share of the ``targets`` lines of ``want`` (those to change or add)
    that ``got`` has at their places, less a quarter for each other line that is not as ``want`` has it."""
    have, need = lines(got), lines(want) or []
    if have is None:
        return 0.0
    have = have + [""] * (len(need) - len(have))
    made = sum(have[i] == need[i] for i in targets) / len(targets)
    aimed = set(targets)
    broken = sum(have[i] != need[i] for i in range(len(need)) if i not in aimed) + len(have) - len(need)
    return max(0.0, made - 0.25 * broken)


# -- the sandbox ----------------------------------------------------------------------------------------------

_PREPARE = 'if [ $# -gt 0 ]; then mkdir -p -- "$@"; fi && find . -mindepth 1 -exec touch -h -d @{time} {{}} +'
_PROBE = """
import json, os, stat, sys
want = json.load(sys.stdin)
names_left, texts_left = want["names"], want["texts"]
entries, dirs, folders, seen, complete = [], [], [b"."], 0, True
while folders and complete:
    try:
        with os.scandir(folders.pop()) as listing:
            for entry in listing:
                if entry.name.startswith(b"."):
                    continue
                seen += 1
                name = entry.path[2:].decode("utf-8", "replace")
                names_left -= len(json.dumps(name)) + 16
                if seen > want["count"] or names_left < 0:
                    complete = False
                    break
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    dirs.append(name)
                    folders.append(entry.path)
                else:
                    size = info.st_size if stat.S_ISREG(info.st_mode) else -1
                    entries.append((size, name, entry.path, info.st_mode & 0o7777))
    except OSError:
        pass
texts = {}
for size, name, path, _ in sorted(e for e in entries if 0 <= e[0] <= want["limit"]):
    if size > texts_left:
        break
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
            data = f.read(want["limit"] + 1) if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else None
    except OSError:
        continue
    if data is None or len(data) > want["limit"]:
        continue
    try:
        text = data.decode()
    except UnicodeDecodeError:
        text = None
    texts_left -= len(data) if text is None else len(json.dumps(text))
    if texts_left < 0:
        break
    texts[name] = text
files = [[name, mode, texts.get(name)] for _, name, _, mode in entries]
print(json.dumps({"files": files, "dirs": dirs, "complete": complete}))
"""


async def lay_down(sandbox: Sandbox, episode: Episode) -> None:
    """Write the episode's files and folders into /work, all dated :data:`FILE_TIME` (a file dialog shows
    dates, and they must not change from run to run)."""
    if episode.files:
        await write_tree(sandbox, episode.files)
    result = await sandbox.exec(["sh", "-c", _PREPARE.format(time=FILE_TIME), "sh", *episode.dirs], timeout=60)
    if not result.ok:
        raise SandboxError(f"could not lay down the task's folders in sandbox {sandbox.id}: {result.stderr[-300:]}")


async def read_state(sandbox: Sandbox, windows: tuple[str, ...] = ()) -> State:
    """Read back the files and folders under /work in one command, in bounded time and output; ``windows``:
    the window titles on screen. The probe runs as the agent's user, so what the agent closed to itself is
    missing; texts go smallest first into half the sandbox's ``output_limit``, the rest read as ``None``.
    Raises :class:`~agentgym.envs.sandbox_io.ReadBackError` when the probe could not run (the work dir closed
    to the agent, its processes using up the pids limit)."""
    limits = {"limit": READ_LIMIT, "count": ENTRY_LIMIT, "names": sandbox.spec.output_limit // 4,
              "texts": sandbox.spec.output_limit // 2}
    found = await read_back(sandbox, _PROBE, limits)
    return State(files={name: text for name, _, text in found["files"]},
                 modes={name: mode for name, mode, _ in found["files"]}, dirs=frozenset(found["dirs"]),
                 windows=windows, complete=found["complete"])
