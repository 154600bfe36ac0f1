"""Write the bundled suites' task lists, cards and READMEs into ``benchmarks/suites/``.

Run once per new suite version; a published suite never changes (its checksum is checked on load):
    .venv/bin/python benchmarks/build_suites.py games-v0 [...]   # refuses to overwrite a published suite
Seeds come from each split's own range (``agentgym.tasks.SPLIT_SEED_BASE``), so train and test never share one.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from agentgym.suites import SUITE_FILE, suites_root, write_suite
from agentgym.tasks import TaskSet

LEVELS = ("easy", "medium", "hard")
WIDGETS = ("ChooseRadio", "ClickButton", "ClickCheckboxes", "ClickLink", "CloseDialog", "ContextMenu", "CopyPaste",
           "CustomDropdown", "DoubleClickItem", "DragToTarget", "EditText", "EnterPassword", "EnterText",
           "ExpandSection", "KeyboardForm", "LoginForm", "NavigateTabs", "NumberSpinner", "PickDate",
           "PressShortcut", "ReorderList", "ScrollToItem", "SetSlider")
DESKTOP = ("AddLines", "CopyParagraph", "CreateFolders", "DeleteFiles", "LookUp", "MoveFiles", "OpenFile",
           "RenameFiles", "ReplaceWords", "RunScript", "SortLines", "WriteFile")


@dataclass(frozen=True)
class Part:
    """Some environments of a suite and how many tasks of each difficulty each split takes per environment."""

    env_ids: tuple[str, ...]
    test: int
    train: int


@dataclass(frozen=True)
class SuiteDef:
    name: str
    description: str
    measures: str
    needs: str
    parts: tuple[Part, ...]


GAMES = Part(("games/FrozenLake-v0", "games/Sokoban-v0"), test=20, train=100)
TOOLS = Part(("tools/Calculator-v0", "tools/PythonSandbox-v0", "tools/Shell-v0"), test=8, train=40)
WEB = Part(("web/Shop-v0", "web/Booking-v0", "web/Mail-v0"), test=4, train=20)
WIDGET_TASKS = Part(tuple(f"gui/{name}-v0" for name in WIDGETS), test=1, train=5)
DESKTOP_TASKS = Part(tuple(f"gui/Desktop{name}-v0" for name in DESKTOP), test=1, train=3)

SUITES = {
    s.name: s
    for s in (
        SuiteDef("games-v0", "Grid games: FrozenLake and Sokoban.",
                 "Planning over a grid from text: reading a map, moving step by step, not undoing progress.",
                 "nothing beyond the core install", (GAMES,)),
        SuiteDef("tools-v0", "Multi-turn tool use: a calculator, Python in a sandbox, a shell in a sandbox.",
                 "Calling tools with well-formed arguments, reading their results and answering or leaving "
                 "files in the state asked for.",
                 "a sandbox backend (Docker, or bubblewrap for `local`)", (TOOLS,)),
        SuiteDef("web-v0", "Web tasks on three sites in Chromium: a shop, a hotel booking site and webmail.",
                 "Navigating real pages through an accessibility tree: search, forms, multi-step flows; "
                 "scored on the site's state, never on page text.",
                 "Chromium and Playwright (`bash scripts/system-deps.sh`)", (WEB,)),
        SuiteDef("gui-v0", "Pixel-level GUI control: 23 widget tasks in Chromium and 12 tasks on an X desktop.",
                 "Acting from screenshots with mouse and keyboard: clicks, drags, typing, shortcuts, and "
                 "whole desktop chores in an editor, a file manager and a terminal.",
                 "Chromium and Playwright; Docker with the `agentgym/desktop` image "
                 "(`agentgym sandbox build desktop`)", (WIDGET_TASKS, DESKTOP_TASKS)),
        SuiteDef("all-v0", "Every bundled family: games-v0, tools-v0, web-v0 and gui-v0 together.",
                 "The whole range at once, from grid games to desktop chores.",
                 "everything the four suites need", (GAMES, TOOLS, WEB, WIDGET_TASKS, DESKTOP_TASKS)),
    )
}


def suite_tasks(definition: SuiteDef) -> TaskSet:
    """Test tasks first, then train; per environment, ``n`` seeds of each difficulty."""
    tasks = []
    for split in ("test", "train"):
        for part in definition.parts:
            for env_id in part.env_ids:
                n = getattr(part, split) * len(LEVELS)
                tasks.extend(TaskSet.generate(env_id, n, split=split, difficulties=LEVELS))
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{definition.name} repeats task ids")
    return TaskSet(tasks)


def readme(definition: SuiteDef, tasks: TaskSet) -> str:
    counts = Counter((t.split, t.env_id.split("/")[0], t.difficulty) for t in tasks)
    families = sorted({family for _, family, _ in counts})
    rows = [f"| {split} | {family} | " + " | ".join(str(counts[split, family, level]) for level in LEVELS)
            + f" | {sum(counts[split, family, level] for level in LEVELS)} |"
            for split in ("test", "train") for family in families]
    env_lines = [f"- `{env_id}`: {part.test} test and {part.train} train tasks per difficulty"
                 for part in definition.parts for env_id in part.env_ids]
    return "\n".join([
        f"# {definition.name}",
        "",
        definition.description,
        "",
        f"**What it measures.** {definition.measures}",
        "",
        f"**Needs:** {definition.needs}.",
        "",
        "| split | family | easy | medium | hard | total |",
        "|---|---|---:|---:|---:|---:|",
        *rows,
        "",
        "```bash",
        f"agentgym eval --suite {definition.name} --policy oracle            # the test split, with a report",
        f"agentgym eval --suite {definition.name} --engine torch --model DIR --samples 4",
        "```",
        "",
        "`tasks.jsonl` is the task list (one task a line: environment, seed, difficulty, split); `suite.yaml`",
        "holds its SHA-256, checked on every load. A changed task list is a new suite version.",
        "",
        "## Reference scores (test split)",
        "",
        "<!-- scores: written by `agentgym leaderboard` -->",
        "<!-- /scores -->",
        "",
        "## Environments",
        "",
        *env_lines,
        "",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="+", choices=sorted(SUITES))
    parser.add_argument("--root", type=Path, default=suites_root(), help="Where suite folders go.")
    args = parser.parse_args()
    for name in args.names:
        folder = args.root / name
        if (folder / SUITE_FILE).exists():
            sys.exit(f"{folder} is published; a changed task list is a new version (add it to SUITES as -vN+1)")
        definition = SUITES[name]
        tasks = suite_tasks(definition)
        suite = write_suite(folder, name, definition.description, tasks)
        (folder / "README.md").write_text(readme(definition, tasks))
        print(f"{name}: {len(tasks)} tasks ({len(suite.split('test'))} test), sha256 {suite.sha256}")


if __name__ == "__main__":
    main()
