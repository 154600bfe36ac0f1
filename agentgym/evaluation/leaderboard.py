"""The leaderboard: every bundled suite against every recorded run, regenerated from the records.

A recorded run is a folder under ``benchmarks/results/recorded/`` holding an evaluation's ``manifest.json``
and ``summary.json`` (``agentgym eval ... --out`` writes both; ``benchmarks/reference_runs.sh`` records
the reference agents). An agent's folder holds its run, and may hold more in subfolders (one per further
suite, e.g. ``random/miniwob-v0/``). A run counts for a suite when it scored the suite's whole test split,
so one run of ``all-v0`` fills the row of every suite it contains. ``agentgym leaderboard`` writes
``benchmarks/results/leaderboard.md`` and the score table of each suite's README.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from agentgym.evaluation.records import MANIFEST, RunSpec
from agentgym.evaluation.scores import RunScores, TaskScore
from agentgym.suites import Suite, load_suite, suite_names

RECORDED_RUNS = Path("benchmarks/results/recorded")
LEVELS = ("easy", "medium", "hard")
_SCORES = re.compile(r"(<!-- scores: .*? -->\n).*?(<!-- /scores -->)", re.DOTALL)


@dataclass(frozen=True)
class Recorded:
    name: str
    spec: RunSpec
    scores: RunScores

    @property
    def description(self) -> str:
        spec = self.spec
        if spec.policy:
            return f"reference policy `{spec.policy}`"
        args = "; ".join(
            f"{'' if env == '*' else env + ':'}{k}={v}"  # as --env-arg takes them
            for env, env_args in spec.env_args.items()
            for k, v in env_args.items()
        )
        sampling = spec.sampling
        temperature = f", temperature {sampling.temperature:g}" if sampling else ""
        return f"`{spec.engine}` engine, model `{spec.model}`{temperature}" + (f", {args}" if args else "")


@dataclass(frozen=True)
class Row:
    """One recorded run on one suite's test split."""

    run: Recorded
    success: float
    reward: float
    by_level: dict[str, float]


def load_recorded(runs_dir: Path) -> list[Recorded]:
    """The recorded runs, named by their agent's folder: its own run first, then those in its subfolders."""
    found = []
    for agent in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        for folder in (agent, *sorted(p for p in agent.iterdir() if p.is_dir())):
            if (folder / MANIFEST).is_file():
                spec = RunSpec.model_validate_json((folder / MANIFEST).read_text())
                scores = RunScores.model_validate_json((folder / "summary.json").read_text())
                found.append(Recorded(agent.name, spec, scores))
    return found


def suite_row(suite: Suite, run: Recorded) -> Row | None:
    """The run's scores on the suite's test split, or None if it did not score every task of it."""
    if run.scores.split != "test":
        return None
    by_id = {t.id: t for t in run.scores.per_task}
    tasks = [by_id.get(t.id) for t in suite.split("test")]
    if not tasks or any(t is None or t.samples == 0 for t in tasks):
        return None
    played: list[TaskScore] = [t for t in tasks if t is not None]
    levels = {level: [t for t in played if t.difficulty == level] for level in suite_levels(suite)}
    return Row(run, _success(played), sum(t.scored_reward for t in played) / len(played),
               {level: _success(ts) for level, ts in levels.items() if ts})


def _between_markers(table: str, markers: re.Match[str]) -> str:
    """The table put between the score markers that ``markers`` matched."""
    return markers.group(1) + table + markers.group(2)


def suite_levels(suite: Suite) -> tuple[str, ...]:
    """The difficulties of the suite's test tasks: easy, medium and hard in that order, then any others."""
    present = {t.difficulty for t in suite.split("test") if t.difficulty is not None}
    return (*(level for level in LEVELS if level in present), *sorted(present - set(LEVELS)))


def write_leaderboard(runs_dir: Path, out_file: Path, suites_dir: Path | None = None) -> list[Path]:
    """Write the leaderboard and the README tables of the suites (the bundled ones, or those in
    ``suites_dir``); return the files written."""
    if not runs_dir.is_dir():
        raise ValueError(f"no recorded runs in {runs_dir}")
    runs = load_recorded(runs_dir)
    folders = sorted(p for p in suites_dir.iterdir() if p.is_dir()) if suites_dir else suite_names()
    suites = [load_suite(folder) for folder in folders]
    rows = {s.name: _first_per_agent(suite_row(s, run) for run in runs) for s in suites}
    written = []
    for suite in suites:
        readme = suite.folder / "README.md"
        text = readme.read_text()
        table = _suite_table(rows[suite.name], suite_levels(suite))
        updated = _SCORES.sub(partial(_between_markers, table), text)
        if updated != text:
            readme.write_text(updated)
            written.append(readme)
    out_file.write_text(_leaderboard(suites, runs, rows))
    written.append(out_file)
    return written


def _success(tasks: list[TaskScore]) -> float:
    return sum(t.successes for t in tasks) / sum(t.samples for t in tasks)


def _first_per_agent(rows: Iterable[Row | None]) -> list[Row]:
    """The first row of each agent (an agent's later runs may cover the same suite again)."""
    kept: dict[str, Row] = {}
    for row in rows:
        if row is not None:
            kept.setdefault(row.run.name, row)
    return list(kept.values())


def _suite_table(rows: list[Row], levels: tuple[str, ...]) -> str:
    if not rows:
        return "No recorded run covers this suite yet.\n"
    shown = levels if len(levels) > 1 else ()  # one level is the success column itself
    lines = ["| agent | success | mean reward |" + "".join(f" {lv} |" for lv in shown),
             "|---|---:|---:|" + "---:|" * len(shown)]
    for r in sorted(rows, key=lambda r: -r.success):
        cells = "".join(f" {r.by_level[lv]:.1%} |" if lv in r.by_level else " |" for lv in shown)
        lines.append(f"| {r.run.name} | {r.success:.1%} | {r.reward:.3f} |{cells}")
    return "\n".join(lines) + "\n"


def _leaderboard(suites: list[Suite], runs: list[Recorded], rows: dict[str, list[Row]]) -> str:
    names = [s.name for s in suites]
    cell = {(s, r.run.name): r for s in names for r in rows[s]}
    lines = [
        "# Leaderboard",
        "",
        "Success rate on each suite's test split (mean reward in brackets), from the runs recorded in",
        "`benchmarks/results/recorded/`. Regenerate with `agentgym leaderboard`; record the reference agents",
        "again with `bash benchmarks/reference_runs.sh`.",
        "",
        "| agent | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for agent in dict.fromkeys(run.name for run in runs):
        cells = [f"{cell[s, agent].success:.1%} ({cell[s, agent].reward:.2f})" if (s, agent) in cell else "–"
                 for s in names]
        lines.append(f"| {agent} | " + " | ".join(cells) + " |")
    lines += ["", "## Agents", ""]
    lines += [f"- **{run.name}**" + (f" on {run.spec.suite}" if run.spec.suite else "")
              + f": {run.description}; {run.scores.scored} episodes scored, "
              f"{run.scores.infra_errors} lost to infrastructure, {run.scores.wall_seconds:.0f} s" for run in runs]
    return "\n".join(lines) + "\n"
