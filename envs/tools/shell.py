"""Shell: find, fix and transform files in a sandbox's generated file tree with bash, then submit."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.envs.sandbox_io import ReadBackError, read_back, run_bash, write_tree
from agentgym.envs.sandboxed import SandboxEnv
from agentgym.errors import ToolError
from agentgym.messages import Message
from agentgym.sandboxes.base import Sandbox, SandboxSpec
from agentgym.seeding import pick
from agentgym.tools import tool

READ_LIMIT = 256 * 1024
"""The largest file read back for checking; a bigger one counts as wrong."""
LIST_LIMIT = 2000
"""The most file names listed back per folder."""

SYSTEM_PROMPT = """You work in a sandbox: a Linux machine with bash, the usual command-line tools and python3,
and no network. The working directory is /work and holds the files of the task.
Tools:
- bash(command): runs the command with `bash -c` in /work (time limit {limit:g} s) and returns its exit
  status, stdout and stderr (long output is cut).
- submit(): say you are done; your files are checked and the episode ends."""


@dataclass(frozen=True)
class Snapshot:
    """What the checks see of the sandbox: file texts (``None``: missing, not a regular file or too large)
    and, per folder, the paths of the files under it (``None``: not a folder)."""

    files: dict[str, str | None]
    dirs: dict[str, list[str] | None]


@dataclass(frozen=True)
class Part:
    """One thing to do: what the agent is told, a bash command that does it, and the score (0 to 1) of a
    :class:`Snapshot` holding the files in ``reads`` and the folders in ``lists``."""

    instruction: str
    command: str
    score: Callable[[Snapshot], float]
    reads: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()


@dataclass(frozen=True)
class Task:
    """The files written into the work dir, and the parts to do (each scored on its own)."""

    files: dict[str, str]
    parts: tuple[Part, ...]

    @property
    def command(self) -> str:
        """A bash command that does every part."""
        return "\n".join(part.command for part in self.parts)


class ShellEnv(SandboxEnv):
    """A small generated file tree and a task done with bash: find a file (easy, medium), fix a wrong value
    in a config file, or transform files (sort and dedupe a list, rename ``*.txt`` to ``*.md``, convert CSV
    to TSV). Hard episodes hold two harder parts at once.

    ``submit`` reads the files back: reward is the mean score of the parts (partial credit for each setting
    fixed, file renamed or line converted), success when every part is fully done.
    """

    difficulties = ("easy", "medium", "hard")
    execution = "inline"
    default_max_turns = 15
    sandbox_spec = SandboxSpec(image="agentgym/shell", memory_mb=256, pids=64)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task: Task | None = None
        self.commands = 0
        """How many commands ran this episode."""

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.task = generate_task(self.np_random, difficulty)
        self.commands = 0
        sandbox = await self.start_sandbox()
        await write_tree(sandbox, self.task.files)
        return [Message(role="system", content=SYSTEM_PROMPT.format(limit=self.time_limit)),
                Message(role="user", content=instructions(self.task))]

    @tool
    async def bash(self, command: str) -> str:
        """Run a bash command in /work and return its exit status, stdout and stderr.

        Args:
            command: Run with `bash -c`, e.g. "ls -R" or "sed -i 's/old/new/' notes.txt".
        """
        answer = await run_bash(self.sandbox, command, self.time_limit)
        self.commands += 1
        return answer

    @tool
    async def submit(self) -> str:
        """Say you are done: your files are checked and the episode ends."""
        assert self.task is not None
        try:
            snapshot = await take_snapshot(self.sandbox, self.task)
        except ToolError:  # what the agent did to its sandbox keeps its files from being read: nothing counts
            self.finish(success=False, reward=0.0)
            raise
        scores = [part.score(snapshot) for part in self.task.parts]
        done = all(score == 1.0 for score in scores)
        self.finish(success=done, reward=sum(scores) / len(scores))
        summary = "Everything is done." if done else "Not everything is done."
        if len(scores) == 1:
            return f"{summary} Score: {scores[0]:.0%}."
        return "\n".join([summary, *(f"Part {i}: {score:.0%} done" for i, score in enumerate(scores, 1))])

    def oracle_action(self) -> str:
        assert self.task is not None
        if not self.commands:
            return self.format_call("bash", command=self.task.command)
        return self.format_call("submit")

    def render_text(self) -> str:
        return instructions(self.task) if self.task is not None else ""


def instructions(task: Task) -> str:
    """The task as the agent reads it."""
    if len(task.parts) == 1:
        return task.parts[0].instruction
    steps = (f"{i}. {part.instruction}" for i, part in enumerate(task.parts, 1))
    return "\n".join(["Do all of these:", *steps])


_PROBE = """
import json, os, sys
want = json.load(sys.stdin)
files, dirs = {}, {}
for path in want["files"]:
    try:
        if os.path.isfile(path) and os.path.getsize(path) <= want["limit"]:
            with open(path, "rb") as f:
                files[path] = f.read().decode("utf-8", "replace")
    except OSError:
        pass
for top in want["dirs"]:
    if os.path.isdir(top):
        found = []
        for root, _, names in os.walk(top):
            found += [os.path.relpath(os.path.join(root, n), top) for n in names]
        dirs[top] = sorted(found)[: want["count"]]
print(json.dumps({"files": files, "dirs": dirs}))
"""


async def take_snapshot(sandbox: Sandbox, task: Task) -> Snapshot:
    """Read back the files and folders the task's parts check, in one command. Raises :class:`ToolError` when
    that command ran and failed: the sandbox is as the agent left it (its work dir closed to it, its processes
    using up the pids limit), so that is the agent's doing, not the infrastructure's."""
    reads = sorted({path for part in task.parts for path in part.reads})
    lists = sorted({path for part in task.parts for path in part.lists})
    request = {"files": reads, "dirs": lists, "limit": READ_LIMIT, "count": LIST_LIMIT}
    try:
        found = await read_back(sandbox, _PROBE, request)
    except ReadBackError as exc:
        raise ToolError(f"your files could not be read back, so none of them counts: {exc.stderr}") from None
    return Snapshot(files={path: found["files"].get(path) for path in reads},
                    dirs={path: found["dirs"].get(path) for path in lists})


# -- task generation --------------------------------------------------------------------------------------

WORDS = ("apple", "bridge", "cloud", "delta", "ember", "forest", "garden", "harbor", "island", "jungle",
         "kettle", "lemon", "meadow", "night", "ocean", "pepper", "quartz", "river", "stone", "timber",
         "umbrella", "valley", "willow", "yellow", "zephyr")
FILLER = {"docs": ("intro", "guide", "faq", "changelog"), "src": ("main", "util", "parser", "config"),
          "misc": ("todo", "ideas", "draft", "scratch")}
FILLER_EXTENSIONS = {"docs": ".md", "src": ".py", "misc": ".txt"}
TOKEN_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
Maker = Callable[[np.random.Generator, dict[str, str], bool], Part]


def generate_task(rng: np.random.Generator, difficulty: str) -> Task:
    """A task of ``difficulty`` drawn from ``rng``: easy and medium one part, hard two harder ones."""
    files = _filler(rng)
    if difficulty == "hard":
        first, second = rng.choice(len(MEDIUM), size=2, replace=False)
        parts = (MEDIUM[int(first)](rng, files, True), MEDIUM[int(second)](rng, files, True))
    else:
        makers = EASY if difficulty == "easy" else MEDIUM
        parts = (pick(rng, makers)(rng, files, False),)
    return Task(files, parts)


def _lines(rng: np.random.Generator, count: int) -> list[str]:
    return [" ".join(pick(rng, WORDS) for _ in range(int(rng.integers(3, 10)))) for _ in range(count)]


def _filler(rng: np.random.Generator) -> dict[str, str]:
    files = {}
    for folder, names in FILLER.items():
        for index in rng.permutation(len(names))[: int(rng.integers(2, len(names) + 1))]:
            path = f"{folder}/{names[int(index)]}{FILLER_EXTENSIONS[folder]}"
            files[path] = "\n".join(_lines(rng, int(rng.integers(3, 12)))) + "\n"
    return files


def _text_lines(text: str | None) -> list[str] | None:
    return None if text is None else [line.rstrip("\r") for line in text.splitlines()]


def _given_path(text: str | None) -> str | None:
    """A path written by the agent, relative to /work."""
    if text is None:
        return None
    path = text.strip()
    for prefix in ("/work/", "./"):
        path = path.removeprefix(prefix)
    return path


# find

def _find_token(rng: np.random.Generator, files: dict[str, str], hard: bool) -> Part:
    target = pick(rng, sorted(files))
    token = "".join(pick(rng, TOKEN_CHARS) for _ in range(8))
    lines = files[target].splitlines()
    lines.insert(int(rng.integers(len(lines) + 1)), f"ticket {token}")
    files[target] = "\n".join(lines) + "\n"
    return Part(
        f"Exactly one file under /work contains the text {token}. Write the path of that file, relative to "
        "/work (like docs/intro.md), into /work/answer.txt.",
        f"grep -rl --exclude=answer.txt {token} . | sed 's|^\\./||' > answer.txt",
        lambda snap: float(_given_path(snap.files["answer.txt"]) == target),
        reads=("answer.txt",),
    )


def _find_largest(rng: np.random.Generator, files: dict[str, str], hard: bool) -> Part:
    folders = ("reports", "reports/2023", "reports/2024/q1", "reports/2024/q2") if hard else ("reports",)
    count = int(rng.integers(5, 9))
    sizes = 200 + rng.permutation(4000)[:count]
    paths = []
    for index, size in enumerate(sizes):
        path = f"{pick(rng, folders)}/report-{index + 1:02d}.txt"
        files[path] = ("\n".join(_lines(rng, 1 + int(size) // 10)) + "\n")[: int(size) - 1] + "\n"
        paths.append(path)
    target = paths[int(np.argmax(sizes))]
    where = "anywhere under /work/reports (subfolders included)" if hard else "in /work/reports"
    return Part(
        f"Find the largest file (in bytes) {where} and write its path, relative to /work (like "
        "reports/report-01.txt), into /work/answer.txt.",
        "find reports -type f -printf '%s %p\\n' | sort -n | tail -n 1 | cut -d' ' -f2 > answer.txt",
        lambda snap: float(_given_path(snap.files["answer.txt"]) == target),
        reads=("answer.txt",),
    )


def _count_errors(rng: np.random.Generator, files: dict[str, str], hard: bool) -> Part:
    lines, errors = [], 0
    for second in sorted(int(s) for s in rng.permutation(86_400)[: int(rng.integers(20, 60))]):
        level = "ERROR" if not lines else pick(rng, ("INFO", "INFO", "DEBUG", "WARN", "ERROR"))
        errors += level == "ERROR"
        stamp = f"{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
        lines.append(f"2024-05-03 {stamp} {level} {pick(rng, WORDS)}: {_lines(rng, 1)[0]}")
    files["logs/app.log"] = "\n".join(lines) + "\n"
    return Part(
        "Count the lines of /work/logs/app.log that contain ERROR and write the number into /work/count.txt.",
        "grep -c ERROR logs/app.log > count.txt",
        lambda snap: float((snap.files["count.txt"] or "").strip() == str(errors)),
        reads=("count.txt",),
    )


# fix

INI: dict[str, dict[str, tuple[str, ...]]] = {
    "server": {"host": ("0.0.0.0", "127.0.0.1", "localhost"),
               "port": ("8000", "8008", "8080", "8443", "9000"), "workers": ("1", "2", "4", "8", "16")},
    "logging": {"level": ("debug", "info", "warning", "error"), "format": ("json", "text", "logfmt"),
                "rotate_days": ("1", "7", "14", "30")},
    "storage": {"backend": ("disk", "s3", "memory"), "max_size_mb": ("64", "128", "512", "1024"),
                "compress": ("true", "false")},
}
SERVICE: dict[str, dict[str, tuple[Any, ...]]] = {
    "database": {"address": ("db.internal", "10.0.0.5", "postgres.local"), "port": (5432, 5433, 6432),
                 "timeout": (5, 10, 30, 60), "pool_size": (4, 8, 16, 32)},
    "cache": {"enabled": (True, False), "ttl": (60, 300, 600, 3600),
              "engine": ("redis", "memcached", "memory")},
    "api": {"version": ("v1", "v2", "v3"), "rate_limit": (100, 500, 1000), "debug": (True, False)},
}


def _right_and_wrong(rng: np.random.Generator, options: tuple[Any, ...]) -> tuple[Any, Any]:
    right, wrong = rng.choice(len(options), size=2, replace=False)
    return options[int(right)], options[int(wrong)]


def _fix_ini(rng: np.random.Generator, files: dict[str, str], hard: bool) -> Part:
    keys = [(section, key) for section, entries in INI.items() for key in entries]
    section, key = pick(rng, keys)
    right, wrong = _right_and_wrong(rng, INI[section][key])
    blocks, wanted = [], []
    for name, entries in INI.items():
        block, want = [f"[{name}]"], [f"[{name}]"]
        for entry, options in entries.items():
            value = wrong if entry == key else pick(rng, options)
            block.append(f"{entry} = {value}")
            want.append(f"{entry} = {right if entry == key else value}")
        blocks.append("\n".join(block))
        wanted.append("\n".join(want))
    files["config/app.ini"] = "\n\n".join(blocks) + "\n"
    expected = "\n\n".join(wanted).splitlines()
    target = re.compile(rf"{key}\s*=\s*{re.escape(right)}")

    def score(snap: Snapshot) -> float:
        got = _text_lines(snap.files["config/app.ini"])
        if got is None or len(got) != len(expected):
            return 0.0
        fixed = False
        for have, want in zip(got, expected, strict=True):
            if want.startswith(f"{key} ="):
                fixed = bool(target.fullmatch(have.strip()))
            elif have.rstrip() != want:
                return 0.0
        return float(fixed)

    return Part(
        f"In /work/config/app.ini, the setting {key} in section [{section}] is wrong: it must be {right}. "
        "Fix it and change nothing else in the file.",
        f"sed -i 's|^{key} = .*|{key} = {right}|' config/app.ini",
        score,
        reads=("config/app.ini",),
    )


def _fix_json(rng: np.random.Generator, files: dict[str, str], hard: bool) -> Part:
    keys = [(section, key) for section, entries in SERVICE.items() for key in entries]
    targets = [keys[int(i)] for i in rng.choice(len(keys), size=3 if hard else 2, replace=False)]
    original: dict[str, dict[str, Any]] = {}
    expected: dict[str, dict[str, Any]] = {}
    for section, entries in SERVICE.items():
        original[section], expected[section] = {}, {}
        for key, options in entries.items():
            right, wrong = _right_and_wrong(rng, options)
            fixing = (section, key) in targets
            original[section][key] = wrong if fixing else right
            expected[section][key] = right
    files["config/service.json"] = json.dumps(original, indent=2) + "\n"

    def score(snap: Snapshot) -> float:
        try:
            got = json.loads(snap.files["config/service.json"] or "")
        except ValueError:
            return 0.0
        if not isinstance(got, dict) or _without(got, targets) != _without(expected, targets):
            return 0.0
        return sum(_same(got[s][k], expected[s][k]) for s, k in targets) / len(targets)

    wanted = ", ".join(f"{s}.{k} must be {json.dumps(expected[s][k])}" for s, k in targets)
    commands = [f"sed -i -E 's/^( *\"{k}\": )[^,]*/\\1{json.dumps(expected[s][k])}/' config/service.json"
                for s, k in targets]
    return Part(
        f"In /work/config/service.json some values are wrong: {wanted}. Fix them and change nothing else "
        "(the file must stay valid JSON).",
        "\n".join(commands),
        score,
        reads=("config/service.json",),
    )


def _without(config: dict[str, Any], targets: list[tuple[str, str]]) -> Any:
    """``config`` without the target keys (which must be there), or ``None`` where its shape is wrong."""
    try:
        rest = {section: dict(entries) for section, entries in config.items()}
        for section, key in targets:
            del rest[section][key]
    except (KeyError, TypeError, ValueError):
        return None
    return rest


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


# transform

def _sort_unique(rng: np.random.Generator, files: dict[str, str], hard: bool) -> Part:
    pool = [pick(rng, WORDS) for _ in range(int(rng.integers(5, 12)))]
    words = [pick(rng, pool) for _ in range(int(rng.integers(15, 41)))]
    files["data/words.txt"] = "\n".join(words) + "\n"
    expected = sorted(set(words))
    return Part(
        "Write the distinct lines of /work/data/words.txt, sorted alphabetically and one per line, into "
        "/work/data/words_sorted.txt.",
        "LC_ALL=C sort -u data/words.txt > data/words_sorted.txt",
        lambda snap: float(_text_lines(snap.files["data/words_sorted.txt"]) == expected),
        reads=("data/words_sorted.txt",),
    )


def _rename(rng: np.random.Generator, files: dict[str, str], hard: bool) -> Part:
    folders = ("notes", "notes/archive", "notes/2024/spring") if hard else ("notes",)
    names = rng.permutation(len(WORDS))
    renamed, kept = {}, {}
    for index, word_index in enumerate(names[: int(rng.integers(4, 10))]):
        folder, word = pick(rng, folders), WORDS[int(word_index)]
        text = "\n".join(_lines(rng, int(rng.integers(1, 5)))) + "\n"
        if index < 3 or rng.integers(4):
            files[f"{folder}/{word}.txt"] = text
            renamed[f"{folder}/{word}"] = text
        else:
            path = f"{folder}/{word}{pick(rng, ('.csv', '.log', '.json'))}"
            files[path] = kept[path] = text

    def score(snap: Snapshot) -> float:
        listing = set(snap.dirs["notes"] or ())
        if any(snap.files[path] != text for path, text in kept.items()):
            return 0.0
        done = [snap.files[f"{stem}.md"] == text and f"{stem.removeprefix('notes/')}.txt" not in listing
                for stem, text in renamed.items()]
        return sum(done) / len(done)

    where = "under /work/notes, subfolders included," if hard else "in /work/notes"
    return Part(
        f"Rename every .txt file {where} to .md: notes/x.txt becomes notes/x.md with the same content. Leave "
        "the other files alone.",
        "find notes -type f -name '*.txt' -exec sh -c 'mv -- \"$1\" \"${1%.txt}.md\"' _ {} \\;",
        score,
        reads=(*(f"{stem}.md" for stem in renamed), *kept),
        lists=("notes",),
    )


def _csv_to_tsv(rng: np.random.Generator, files: dict[str, str], hard: bool) -> Part:
    header = ("id", "name", "city", "status")
    rows = [(str(100 + i), pick(rng, WORDS), pick(rng, ("avon", "bree", "cork", "dover")),
             "active" if i == 0 else pick(rng, ("active", "inactive")))
            for i in range(int(rng.integers(8, 26)))]
    files["data/records.csv"] = "\n".join(",".join(row) for row in (header, *rows)) + "\n"
    expected = ["\t".join(row) for row in (header, *rows) if not hard or row[3] != "inactive"]

    def score(snap: Snapshot) -> float:
        got = _text_lines(snap.files["data/records.tsv"])
        if not got:
            return 0.0
        return sum(a == b for a, b in zip(got, expected, strict=False)) / max(len(got), len(expected))

    if hard:
        return Part(
            "Write /work/data/records.tsv: the header and only the rows of /work/data/records.csv whose "
            "status is active, as tab-separated values (tabs instead of commas).",
            "{ head -n 1 data/records.csv; grep ',active$' data/records.csv; } | tr ',' '\\t' "
            "> data/records.tsv",
            score,
            reads=("data/records.tsv",),
        )
    return Part(
        "Convert /work/data/records.csv to tab-separated values: write /work/data/records.tsv with the same "
        "rows and columns, tabs instead of commas.",
        "tr ',' '\\t' < data/records.csv > data/records.tsv",
        score,
        reads=("data/records.tsv",),
    )


EASY: tuple[Maker, ...] = (_find_token, _count_errors, _fix_ini, _sort_unique)
MEDIUM: tuple[Maker, ...] = (_find_largest, _fix_json, _rename, _csv_to_tsv)
"""The part makers of each level; hard episodes take two different medium ones, in their harder form."""
