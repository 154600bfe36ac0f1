"""An evaluation's report, ``report.md`` and ``report.html``: the summary, breakdowns, a plot of success
per environment, infrastructure errors, and the best and worst episodes as transcripts (screens inline)."""

from __future__ import annotations

import math
import re
from pathlib import Path

from agentgym.evaluation.document import (
    Block,
    Bullets,
    Code,
    Fold,
    Heading,
    Image,
    Label,
    Paragraph,
    Table,
    to_html,
    to_markdown,
)
from agentgym.evaluation.records import EpisodeRecord, InfraRecord, RunFolder, RunSpec
from agentgym.evaluation.scores import Breakdown, RunScores

PLOT = "scores.png"
TRANSCRIPTS = 3
"""Best and worst episodes shown (split between the families when there are several, at least one each)."""
MAX_TEXT = 1500
"""Characters of one message shown in a transcript."""
MAX_TURNS = 12
"""Turns of an episode shown: the first and the last, the middle elided."""
_SCREEN = re.compile(r"!\[screen\]\(([^)]+)\)")
NOTHING_SCORED = "n/a — no episode was scored"
"""What a success rate over no scored episode reads as (it is undefined, not 0%)."""


def percent(rate: float | None) -> str:
    """A rate as a percentage, or ``n/a`` when undefined."""
    return "n/a" if rate is None else f"{rate:.1%}"


def number(value: float | None, digits: int) -> str:
    """A mean to ``digits`` decimals, or ``n/a`` when undefined."""
    return "n/a" if value is None else f"{value:.{digits}f}"


def write_report(run: RunFolder, scores: RunScores) -> None:
    """Write ``report.md``, ``report.html`` and the plot into the run's folder."""
    spec = run.spec()
    records = list(run.finished().values())
    _plot(scores, run.path / PLOT)
    title = f"Evaluation of {spec.agent} on {spec.suite or ', '.join(sorted({r.task.env_id for r in records}))}"
    blocks = _blocks(spec, scores, records, run.first_traceback())
    (run.path / "report.md").write_text(f"# {title}\n\n" + to_markdown(blocks))
    (run.path / "report.html").write_text(to_html(title, [Heading(title, 1), *blocks]))


def _blocks(spec: RunSpec, s: RunScores, records: list[EpisodeRecord], first: InfraRecord | None) -> list[Block]:
    low, high = s.success_interval
    passes = ", ".join(f"pass@{k} {v:.1%}" for k, v in s.pass_at_k.items())
    rows = [
        ["success", NOTHING_SCORED if s.success_rate is None else f"{s.success_rate:.1%} (95% CI {low:.1%} to {high:.1%})"],
        ["pass@k", passes or "n/a"],
        ["mean reward", number(s.mean_reward, 3)],
        ["mean turns", number(s.mean_turns, 1)],
        ["mean tokens generated", number(s.mean_tokens, 0)],
        ["episodes scored", f"{s.scored} of {s.episodes} ({s.tasks} tasks x {s.samples} samples)"],
        ["infrastructure errors", f"{s.infra_errors} episodes unscored, {s.infra_retried} attempts retried"],
        ["time", f"{s.wall_seconds:.1f} s wall, {number(s.mean_episode_seconds, 2)} s per episode"],
    ]
    setup = [f"agent: `{spec.agent}`" + (f" (engine `{spec.engine}`, model `{spec.model}`)" if spec.engine else ""),
             f"suite: `{spec.suite}` (sha256 `{spec.suite_sha256[:12]}`)" if spec.suite and spec.suite_sha256
             else f"tasks: sha256 `{spec.tasks_sha256[:12]}`",
             f"split: {spec.split}, samples per task: {spec.samples}, seed: {spec.seed}, retries: {spec.max_retries}"]
    if spec.sampling is not None:
        setup.append(f"sampling: temperature {spec.sampling.temperature}, top_p {spec.sampling.top_p}, "
                     f"{spec.sampling.max_tokens} tokens per turn")
    if spec.env_args:
        setup.append("environment arguments: " + "; ".join(f"`{env}`: `{args}`" for env, args in spec.env_args.items()))
    blocks: list[Block] = [
        Bullets(setup),
        Heading("Summary"),
        Table(["", "value"], rows),
        Image(PLOT, "success rate per environment"),
        Heading("By family"), _table(s.by_family),
        Heading("By difficulty"), _table(s.by_difficulty),
        Heading("By environment"), _table(s.by_env),
    ]
    blocks += _infra(s, records, first)
    by_family: dict[str, list[EpisodeRecord]] = {}
    for r in records:
        if r.scored:
            by_family.setdefault(r.task.env_id.split("/")[0], []).append(r)
    shown = max(1, TRANSCRIPTS // max(1, len(by_family)))
    best = [r for rs in by_family.values() for r in sorted(rs, key=_best_first)[:shown]]
    worst = [r for rs in by_family.values() for r in sorted(rs, key=_worst_first)[:shown]]
    for heading, chosen in (("Best episodes", best), ("Worst episodes", worst)):
        blocks.append(Heading(heading))
        blocks += [Fold(_episode_title(r), _transcript(r)) for r in chosen] or [Paragraph("None scored.")]
    return blocks


def _best_first(r: EpisodeRecord) -> tuple[bool, float, int, str]:
    return (not r.success, -r.reward, r.turns, r.key)


def _worst_first(r: EpisodeRecord) -> tuple[bool, float, int, str]:
    return (r.success, r.reward, -r.turns, r.key)


def _table(rows: list[Breakdown]) -> Table:
    return Table(["", "episodes", "success", "mean reward", "infra errors"],
                 [[b.name, str(b.episodes), percent(b.success_rate), number(b.mean_reward, 3), str(b.infra_errors)]
                  for b in rows], numeric={1, 2, 3, 4})


def _infra(s: RunScores, records: list[EpisodeRecord], first: InfraRecord | None) -> list[Block]:
    blocks: list[Block] = [Heading("Infrastructure errors")]
    if not s.error_causes:
        return [*blocks, Paragraph("None: every attempt ran to the end.")]
    blocks.append(Paragraph("Attempts lost to infrastructure are played again and never scored; an episode "
                            "whose every attempt failed is left out of all the scores above."))
    blocks.append(Table(["cause", "attempts"], [[c, str(n)] for c, n in sorted(s.error_causes.items())], numeric={1}))
    unscored = [r for r in records if not r.scored]
    if unscored:
        blocks.append(Table(["unscored episode", "cause", "error"],
                            [[r.key, r.error_cause or "", (r.error or "").splitlines()[0][:160]] for r in unscored]))
    if first is not None and first.traceback:
        blocks.append(Fold(f"The first traceback: {first.key}, attempt {first.attempt} ({first.cause})",
                           [Code(first.traceback.rstrip())]))
    return blocks


def _episode_title(r: EpisodeRecord) -> str:
    outcome = "solved" if r.success else "truncated" if r.status == "truncated" else "failed"
    return f"{r.key}: {outcome}, reward {r.reward:.3f}, {r.turns} turns"


def _transcript(r: EpisodeRecord) -> list[Block]:
    messages = r.trajectory.messages
    assistant = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if len(assistant) > MAX_TURNS:
        head, tail = assistant[MAX_TURNS // 2], assistant[-(MAX_TURNS // 2)]
        kept = [*range(head), *range(tail - 1, len(messages))]
        elided = len(assistant) - MAX_TURNS
    else:
        kept, elided = list(range(len(messages))), 0
    blocks: list[Block] = []
    for position, i in enumerate(kept):
        if elided and position and kept[position - 1] != i - 1:
            blocks.append(Paragraph(f"... {elided} turns left out ..."))
        m = messages[i]
        blocks.append(Label(m.role + (f" ({m.name})" if m.name else "")))
        blocks += _content(m.text)
    if r.trajectory.error:
        blocks.append(Paragraph(f"error: {r.trajectory.error}"))
    return blocks


def _content(text: str) -> list[Block]:
    """A message's text as code blocks, with its screens as images."""
    blocks: list[Block] = []
    for i, piece in enumerate(_SCREEN.split(text)):
        if i % 2:
            blocks.append(Image(piece, "screen"))
        elif piece.strip():
            shown = piece.strip()
            if len(shown) > MAX_TEXT:
                shown = shown[:MAX_TEXT] + f"\n... ({len(shown) - MAX_TEXT} more characters)"
            blocks.append(Code(shown))
    return blocks


def _plot(s: RunScores, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = s.by_env
    families = sorted({b.name.split("/")[0] for b in envs})
    colours = {f: plt.get_cmap("tab10")(i) for i, f in enumerate(families)}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, max(3.0, 0.28 * len(envs) + 1.2)),
                                 gridspec_kw={"width_ratios": [3, 1]})
    names = [b.name for b in envs][::-1]
    ax.barh(names, [_height(b) for b in envs][::-1], color=[colours[n.split("/")[0]] for n in names])
    ax.set_xlim(0, 1)
    ax.set_xlabel("success rate")
    ax.set_title(f"{s.agent}: {percent(s.success_rate)} over {s.scored} episodes")
    ax.tick_params(axis="y", labelsize=8)
    levels = s.by_difficulty
    bx.bar([b.name for b in levels], [_height(b) for b in levels], color="#888")
    bx.set_ylim(0, 1)
    bx.set_title("by difficulty")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _height(b: Breakdown) -> float:
    """A slice's bar: none at all (NaN) when nothing in it was scored, rather than a bar at 0."""
    return math.nan if b.success_rate is None else b.success_rate
