"""What each page shows, gathered from a run: plain data for the templates, no HTML but the already-escaped
Markdown and SVG that :mod:`~agentgym.view.markdown` and :mod:`~agentgym.view.charts` make."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from agentgym.evaluation.records import RolloutRecord
from agentgym.evaluation.scores import mean, wilson_interval
from agentgym.messages import ImagePart, Message, TextPart
from agentgym.trajectory import Trajectory
from agentgym.view import charts, markdown
from agentgym.view.index import BadRecord, Entry
from agentgym.view.listing import Listing
from agentgym.view.runs import Run, Source

CURVES = (("success rate", ("eval/success_rate", "rollout/success_rate"), True),
          ("reward", ("eval/reward_mean", "rollout/reward_mean"), False))
"""The training run's charts: title, the metrics drawn, whether the axis is [0, 1]."""
ERRORS_SHOWN = 20
"""Episodes lost to infrastructure shown with their tracebacks on a run page."""
INFRA_SHOWN = 50
STEPS_SHOWN = 100
"""Training steps in the run page's table of rollouts (the latest)."""
ACTION_PREVIEW = 400
"""Characters of each action a group page shows."""


@dataclass
class Headline:
    """The numbers at the top of an evaluation's part of the run page."""

    episodes: int
    scored: int
    success_rate: float | None
    interval: tuple[float, float]
    mean_reward: float | None
    mean_turns: float | None


def headline(entries: Sequence[Entry]) -> Headline:
    scored = [e for e in entries if e.scored]
    successes = sum(e.success for e in scored)
    return Headline(len(entries), len(scored), mean(e.success for e in scored), wilson_interval(successes, len(scored)),
                    mean(e.reward for e in scored), mean(e.turns for e in scored))


@dataclass
class StepRow:
    """One training step's rollouts."""

    step: int
    episodes: int
    success_rate: float | None
    mean_reward: float | None
    outcomes: dict[str, int]
    versions: str


def step_rows(entries: Sequence[Entry]) -> list[StepRow]:
    steps: dict[int, list[Entry]] = {}
    for e in entries:
        if e.step is not None:
            steps.setdefault(e.step, []).append(e)
    rows = []
    for step in sorted(steps)[-STEPS_SHOWN:]:
        group = steps[step]
        scored = [e for e in group if e.scored]
        outcomes: dict[str, int] = {}
        for e in group:
            outcomes[e.outcome or "?"] = outcomes.get(e.outcome or "?", 0) + 1
        low = min((e.version_min for e in group if e.version_min is not None), default=None)
        high = max((e.version_max for e in group if e.version_max is not None), default=None)
        rows.append(StepRow(step, len(group), mean(e.success for e in scored), mean(e.reward for e in scored), outcomes,
                            "" if low is None else str(low) if low == high else f"{low}–{high}"))
    return rows


def training_charts(run: Run) -> tuple[list[Markup], str | None]:
    """The training run's curves from ``metrics.jsonl``, and why they could not be read."""
    records, problem = run.metrics()
    drawn = []
    for title, keys, unit in CURVES:
        series = {key: [(float(r["step"]), float(r[key])) for r in records
                        if isinstance(r.get(key), (int, float)) and isinstance(r.get("step"), (int, float))
                        and math.isfinite(float(r[key]))]
                  for key in keys}
        drawn.append(charts.line_chart(title, series, unit_range=unit))
    return drawn, problem


@dataclass
class ErrorEpisode:
    """An episode lost to infrastructure, with its cause and traceback."""

    source: Source
    entry: Entry
    error: str
    traceback: str | None


def error_episodes(run: Run) -> tuple[list[ErrorEpisode], int]:
    """The first episodes whose trajectory ended in an infrastructure error (with their tracebacks), and how many
    there are in all."""
    found: list[ErrorEpisode] = []
    total = 0
    for source in run.sources().values():
        for entry in source.index.entries:
            if entry.status != "error":
                continue
            total += 1
            if len(found) >= ERRORS_SHOWN:
                continue
            try:
                trajectory = source.index.record(entry).trajectory
                found.append(ErrorEpisode(source, entry, trajectory.error or "", trajectory.error_traceback))
            except BadRecord as exc:
                found.append(ErrorEpisode(source, entry, entry.error or str(exc), None))
    return found, total


@dataclass
class Shown:
    """A message as the episode page shows it: its text as safe Markdown and its screens beside it."""

    role: str
    name: str | None
    html: Markup
    screens: list[str]
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    """(name, arguments as JSON) of each call an assistant message made."""
    images_not_stored: int = 0


def shown_message(message: Message, screen_url: Callable[[str], str]) -> Shown:
    parts = [TextPart(text=message.content)] if isinstance(message.content, str) else message.content
    texts, screens, inline = [], [], 0
    for part in parts:
        if isinstance(part, ImagePart):
            inline += 1
            continue
        link = markdown.screen_link(part.text)
        if link is not None:
            screens.append(screen_url(link))
        else:
            texts.append(part.text)
    return Shown(message.role, message.name, markdown.render("\n".join(texts), screen_url), screens,
                 [(c.name, json.dumps(c.arguments, ensure_ascii=False)) for c in message.tool_calls], inline)


@dataclass
class TurnShown:
    number: int
    action: str
    tool_calls: list[tuple[str, str]]
    action_error: str | None
    observation: list[Shown]
    reward: float
    policy_seconds: float
    env_seconds: float


@dataclass
class EpisodeShown:
    """The episode page's content."""

    prompt: list[Shown]
    turns: list[TurnShown]
    info: list[tuple[str, str]]
    timings: list[tuple[str, float]]
    trajectory: Trajectory
    advantage: float | None = None
    outcome: str | None = None
    report: ReportShown | None = None


@dataclass
class ReportShown:
    """How the environment graded the episode (``info["report"]`` of its last step): the diff it took, each line
    with its kind (``add``, ``del``, ``hunk``, ``file`` or ``""``), the files it left out, and its tests' outcomes."""

    diff: list[tuple[str, str]]
    restored: list[str]
    tests: list[tuple[str, str, str]]
    """(set, test, outcome) of every test that did not pass, then of those of the first set that did."""
    counts: list[tuple[str, int, int]]
    """(set, passed, of how many) for each set of tests."""
    problem: str | None
    resolved: bool


def episode_shown(record: Any, screen_url: Callable[[str], str]) -> EpisodeShown:
    trajectory: Trajectory = record.trajectory
    first_agent = next((i for i, m in enumerate(trajectory.messages) if m.role == "assistant"),
                       len(trajectory.messages))
    prompt = [shown_message(m, screen_url) for m in trajectory.messages[:first_agent]]
    turns = [TurnShown(i, t.action, [(c.name, json.dumps(c.arguments, ensure_ascii=False)) for c in t.tool_calls],
                       t.action_error, [shown_message(m, screen_url) for m in t.observation], t.reward,
                       t.policy_seconds, t.env_seconds)
             for i, t in enumerate(trajectory.turns, 1)]
    info = [(str(key), _json(value)) for key, value in trajectory.info.items() if key != "report"]
    report = trajectory.info.get("report")
    shown = EpisodeShown(prompt, turns, info, sorted(trajectory.timings.items()), trajectory,
                         report=report_shown(report) if isinstance(report, dict) else None)
    if isinstance(record, RolloutRecord):
        shown.advantage, shown.outcome = record.advantage, record.outcome
    return shown


TEST_SETS = ("FAIL_TO_PASS", "PASS_TO_PASS")


def report_shown(report: dict[str, Any]) -> ReportShown:
    """The grading report of an episode as the page shows it."""
    diff = [(_diff_kind(line), line) for line in str(report.get("diff", "")).splitlines()]
    tests: list[tuple[str, str, str]] = []
    counts = []
    for name in TEST_SETS:
        outcomes = report.get(name) or {}
        passed = [test for test, outcome in outcomes.items() if outcome == "passed"]
        counts.append((name, len(passed), len(outcomes)))
        tests += [(name, test, outcome) for test, outcome in outcomes.items() if outcome != "passed"]
    tests += [(TEST_SETS[0], test, "passed") for test, outcome in (report.get(TEST_SETS[0]) or {}).items()
              if outcome == "passed"]
    return ReportShown(diff, list(report.get("restored") or []), tests, counts, report.get("problem"),
                       bool(report.get("resolved")))


def _diff_kind(line: str) -> str:
    if line.startswith(("diff --git", "+++", "---", "index ")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "")


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, indent=1 if isinstance(value, (dict, list)) and len(
            json.dumps(value, default=str)) > 80 else None, default=str)
    except ValueError:
        return repr(value)


@dataclass
class Member:
    """One episode of a group, as the group page shows it."""

    entry: Entry
    actions: list[tuple[str, float]]
    """Each turn's action (its start) and reward."""
    branch: int | None = None
    parent: int | None = None
    fork_turn: int | None = None
    problem: str | None = None
    children: list[Member] = field(default_factory=list)


def group_members(source: Source, entries: Sequence[Entry]) -> tuple[list[Member], list[Member], dict[str, int]]:
    """The group's episodes (each with its actions), the roots of its tree where a tree rollout grew it (episodes as
    nodes under the branch they forked from), and the tree's counts."""
    members = []
    tree: dict[str, int] = {}
    for entry in entries:
        try:
            trajectory = source.index.record(entry).trajectory
        except BadRecord as exc:
            members.append(Member(entry, [], problem=str(exc)))
            continue
        actions = [(t.action if len(t.action) <= ACTION_PREVIEW else t.action[:ACTION_PREVIEW] + "…", t.reward)
                   for t in trajectory.turns]
        info = trajectory.info
        member = Member(entry, actions)
        if "branch" in info:
            member.branch = int(info["branch"])
            member.parent = None if info.get("parent") is None else int(info["parent"])
            member.fork_turn = int(info.get("fork_turn") or 0) + 1
        if isinstance(info.get("tree"), dict) and not tree:
            tree = {str(k): int(v) for k, v in info["tree"].items() if isinstance(v, (int, float))}
        members.append(member)
    by_branch = {m.branch: m for m in members if m.branch is not None}
    roots: list[Member] = []
    for m in sorted(by_branch.values(), key=lambda m: m.branch or 0):
        if m.parent is not None and m.parent in by_branch:
            by_branch[m.parent].children.append(m)
        else:
            roots.append(m)
    return members, roots, tree


def neighbours(listing: Listing, source: Source, group: tuple[int, int, bool]) -> tuple[Any, Any]:
    """The groups before and after ``group`` in (step, position) order."""
    keys = sorted(listing.groups(source.index))
    at = keys.index(group) if group in keys else -1
    before = keys[at - 1] if at > 0 else None
    after = keys[at + 1] if 0 <= at < len(keys) - 1 else None
    return before, after
