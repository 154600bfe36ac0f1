"""Write the bundled suites' task lists, cards and READMEs into ``benchmarks/suites/``.

Run once per new suite version; a published suite never changes (its checksum is checked on load):
    .venv/bin/python benchmarks/build_suites.py games-v0 [...]   # refuses to overwrite a published suite
Seeds come from each split's own range (``agentgym.tasks.SPLIT_SEED_BASE``), so train and test never share one.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import agentgym
from agentgym.suites import SUITE_FILE, suites_root, write_suite
from agentgym.tasks import SPLIT_SEED_BASE, Task, TaskSet

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
    levels: tuple[str, ...] = LEVELS


@dataclass(frozen=True)
class SuiteDef:
    name: str
    description: str
    measures: str
    needs: str
    parts: tuple[Part, ...]
    source: str = ""
    """Where a suite of another project's tasks comes from (named in its README)."""
    make: Callable[[], TaskSet] | None = None
    """The task list, for a suite whose tasks are fixed instances rather than seeds of its parts."""

    @property
    def levels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(level for part in self.parts for level in part.levels))


GAMES = Part(("games/FrozenLake-v0", "games/Sokoban-v0"), test=20, train=100)
TOOLS = Part(("tools/Calculator-v0", "tools/PythonSandbox-v0", "tools/Shell-v0"), test=8, train=40)
WEB = Part(("web/Shop-v0", "web/Booking-v0", "web/Mail-v0"), test=4, train=20)
WIDGET_TASKS = Part(tuple(f"gui/{name}-v0" for name in WIDGETS), test=1, train=5)
DESKTOP_TASKS = Part(tuple(f"gui/Desktop{name}-v0" for name in DESKTOP), test=1, train=3)
MINIWOB_SUBSET = ("book-flight", "choose-date", "choose-date-easy", "choose-date-medium", "choose-list",
                  "click-button", "click-button-sequence", "click-checkboxes", "click-checkboxes-large",
                  "click-checkboxes-soft", "click-checkboxes-transfer", "click-collapsible", "click-collapsible-2",
                  "click-color", "click-dialog", "click-dialog-2", "click-link", "click-menu", "click-option",
                  "click-pie", "click-scroll-list", "click-shades", "click-shape", "click-tab", "click-tab-2",
                  "click-tab-2-hard", "click-test", "click-test-2", "click-widget", "count-shape", "email-inbox",
                  "email-inbox-forward-nl", "email-inbox-forward-nl-turk", "email-inbox-nl-turk", "enter-date",
                  "enter-password", "enter-text", "enter-text-dynamic", "enter-time", "focus-text", "focus-text-2",
                  "grid-coordinate", "guess-number", "identify-shape", "login-user", "login-user-popup",
                  "multi-layouts", "multi-orderings", "navigate-tree", "search-engine", "social-media",
                  "social-media-all", "social-media-some", "tic-tac-toe", "use-autocomplete", "use-spinner")
"""The 56 MiniWoB++ tasks of WebGUM's evaluation (Furuta et al., 2023), the subset LLM web agents are most often
compared on; BrowserGym's MiniWoB task metadata marks the same tasks ``webgum_subset``."""
MINIWOB = Part(tuple(f"miniwob/{task}-v0" for task in MINIWOB_SUBSET), test=4, train=20, levels=("default",))
SWE = Part(("swe/Repos-v0",), test=0, train=0)
"""The environment of swe-v0, whose tasks are its bundled instances (:func:`swe_tasks`)."""
TEXTARENA = Part(tuple(s.id for s in agentgym.list_envs(family="textarena")), test=4, train=20, levels=("default",))
"""Every TextArena game agentgym registers."""

def swe_tasks() -> TaskSet:
    """A task per bundled SWE instance, named by its id, grouped by its project, in its instance's split, in the
    file's order (which takes the projects in turn, so that the episodes an evaluation runs at once use different
    images)."""
    from agentgym.envs.swe.instances import load_instances

    instances = load_instances()
    tasks = []
    for split in ("test", "train"):
        chosen = [i for i in instances if i.split == split]
        tasks += [Task(env_id="swe/Repos-v0", seed=SPLIT_SEED_BASE[split] + n, difficulty=i.difficulty, split=split,
                       options={"instance_id": i.instance_id}, group=i.project) for n, i in enumerate(chosen)]
    return TaskSet(tasks)


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
        SuiteDef("miniwob-v0", "MiniWoB++'s commonly reported subset: the 56 tasks of WebGUM's evaluation.",
                 "Web interaction on MiniWoB++'s own pages (agentgym's element actions by default, or pixels): "
                 "forms, menus, dialogs, dates, mail and search, scored by each page's own reward.",
                 "`pip install 'agentgym[miniwob]'`, Chromium and Playwright", (MINIWOB,),
                 source="The task list is the subset of MiniWoB++ (Liu et al., ICLR 2018) on which WebGUM "
                        "(Furuta et al., *Multimodal Web Navigation with Instruction-Finetuned Foundation Models*, "
                        "2023) and the agents it compares with are evaluated; BrowserGym's MiniWoB task metadata "
                        "(`task_metadata/miniwob.csv`, column `webgum_subset`) lists the same 56 tasks. Each task "
                        "runs from the `miniwob` package's own HTML (1.1.0), and a seed is the page's "
                        "`Math.seedrandom` seed."),
        SuiteDef("textarena-v0", "TextArena's games that run offline: 18 puzzles and 17 two-player games.",
                 "Playing text games by their own rules: single-player puzzles, and two-player games as player 0 "
                 "against a fixed random opponent, judged and paid by TextArena.",
                 "`pip install 'agentgym[textarena]'`", (TEXTARENA,),
                 source="The games are TextArena 0.7.4's (Guertler et al., 2025) that run offline here (see "
                        "`envs/textarena/env.py` for those left out and why)."),
        SuiteDef("swe-v0", "Bugs injected into nine real Python projects, fixed in docker sandboxes and graded by the "
                 "projects' own tests (SWE-bench format).",
                 "Software engineering on a real repository: reading a failure, finding the code at fault with "
                 "bash and the file tools, fixing it without breaking any other test.",
                 "Docker with the `agentgym/swe-*` images (`agentgym sandbox build`)", (SWE,), make=swe_tasks,
                 source="The projects are PyPI source distributions pinned by version and SHA-256 (more-itertools, "
                        "toolz, cachetools, boltons, inflection, isodate, parse, semantic-version, tabulate; "
                        "MIT, BSD or similar licences). Each bug is one SWE-smith-style transform of a function "
                        "the tests run, kept only where its failing tests fail and the rest pass, twice "
                        "(`python -m agentgym.envs.swe.make`). The train split's instances come from bugs of "
                        "their own: no test instance's bug is trained on."),
        SuiteDef("all-v0", "Every bundled family: games-v0, tools-v0, web-v0 and gui-v0 together.",
                 "The whole range at once, from grid games to desktop chores.",
                 "everything the four suites need", (GAMES, TOOLS, WEB, WIDGET_TASKS, DESKTOP_TASKS)),
    )
}


def suite_tasks(definition: SuiteDef) -> TaskSet:
    """Test tasks first, then train; per environment, ``n`` seeds of each difficulty (or the suite's own list)."""
    if definition.make is not None:
        return definition.make()
    tasks = []
    for split in ("test", "train"):
        for part in definition.parts:
            for env_id in part.env_ids:
                n = getattr(part, split) * len(part.levels)
                tasks.extend(TaskSet.generate(env_id, n, split=split, difficulties=part.levels))
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{definition.name} repeats task ids")
    return TaskSet(tasks)


def readme(definition: SuiteDef, tasks: TaskSet) -> str:
    levels = definition.levels
    counts = Counter((t.split, t.env_id.split("/")[0], t.difficulty) for t in tasks)
    families = sorted({family for _, family, _ in counts})
    rows = [f"| {split} | {family} | " + " | ".join(str(counts[split, family, level]) for level in levels)
            + f" | {sum(counts[split, family, level] for level in levels)} |"
            for split in ("test", "train") for family in families]
    oracles = {env_id: has_oracle(env_id) for part in definition.parts for env_id in part.env_ids}
    per = "per difficulty" if levels != ("default",) else "each"
    if definition.make is not None:
        per = "in all"
        sizes = Counter((t.env_id, t.split) for t in tasks)
        env_lines = [f"- `{env_id}`: {sizes[env_id, 'test']} test and {sizes[env_id, 'train']} train tasks {per}"
                     + ("" if oracles[env_id] else " (no oracle)") for env_id in oracles]
    else:
        env_lines = [f"- `{env_id}`: {part.test} test and {part.train} train tasks {per}"
                     + ("" if oracles[env_id] else " (no oracle)") for part in definition.parts
                     for env_id in part.env_ids]
    with_oracle = sum(oracles.values())
    oracle_line = ("Every environment has an oracle." if with_oracle == len(oracles) else
                   "No environment here has an oracle: `--policy oracle` cannot play them." if not with_oracle else
                   f"{with_oracle} of {len(oracles)} environments have an oracle; `--policy oracle` cannot play "
                   "those marked below.")
    return "\n".join([
        f"# {definition.name}",
        "",
        definition.description,
        "",
        f"**What it measures.** {definition.measures}",
        "",
        *([f"**Source.** {definition.source}", ""] if definition.source else []),
        f"**Needs:** {definition.needs}.",
        "",
        "| split | family | " + " | ".join(levels) + " | total |",
        "|---|---|" + "---:|" * (len(levels) + 1),
        *rows,
        "",
        "```bash",
        (f"agentgym eval --suite {definition.name} --policy {'oracle' if with_oracle else 'random'}"
         "            # the test split, with a report"),
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
        oracle_line,
        "",
        *env_lines,
        "",
    ])


def has_oracle(env_id: str) -> bool:
    """Whether the environment's class plays an oracle (adapted tasks often have none)."""
    return agentgym.spec(env_id).load().oracle_action is not agentgym.Env.oracle_action


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
