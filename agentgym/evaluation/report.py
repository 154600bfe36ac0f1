"""An evaluation's report, ``report.md`` and ``report.html``: the summary, breakdowns, a plot of success
per environment, infrastructure errors, and the best and worst episodes as transcripts (screens inline)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentgym.evaluation.document import (
    Block,
    Bullets,
    Code,
    Fold,
    Heading,
    Image,
    Label,
    Node,
    Paragraph,
    Table,
    Tree,
    to_html,
    to_markdown,
)
from agentgym.evaluation.records import EpisodeRecord, InfraRecord, RunFolder, RunSpec
from agentgym.evaluation.scores import LEVELS, Breakdown, RunScores
from agentgym.trajectory import distinct_actions

PLOT = "scores.png"
TRANSCRIPTS = 3
"""Best and worst episodes shown (split between the families when there are several, at least one each)."""
MAX_TEXT = 1500
"""Characters of one message shown in a transcript."""
MAX_TURNS = 12
"""Turns of an episode shown: the first and the last, the middle elided."""
_SCREEN = re.compile(r"!\[screen\]\(([^)]+)\)")
TREES_DRAWN = 8
"""Task groups of a ``latr`` run whose tree is drawn, the first in task order; each group has a line in a table."""
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
    if spec.latr is not None:
        changed = spec.latr.model_dump(exclude_defaults=True)
        setup.append(f"tree sampling (LATR): each task's {spec.samples} samples one group, "
                     f"{spec.latr.width(spec.samples, 0)} of them grown as a tree, the rest stochastic; settings: "
                     + (", ".join(f"`{k}={v}`" for k, v in changed.items()) or "the defaults"))
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
    if s.by_group:
        blocks += [Heading("By group (what the tasks are drawn from)"), _table(s.by_group)]
    blocks += _infra(s, records, first)
    if spec.rollout_sampling == "latr":
        blocks += _trees(spec, records)
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


def _trees(spec: RunSpec, records: list[EpisodeRecord]) -> list[Block]:
    """A ``latr`` run's trees: a line of counts per task group, and the first groups drawn (episodes as nodes,
    forks as edges, the stochastic episodes that filled the group apart)."""
    groups: dict[str, list[EpisodeRecord]] = {}
    for r in sorted(records, key=lambda r: r.sample):
        groups.setdefault(r.task.id, []).append(r)
    ordered = sorted(groups.values(), key=lambda rs: (rs[0].task.env_id, LEVELS.get(rs[0].task.difficulty or "", 9),
                                                       rs[0].task.difficulty or "", rs[0].task.seed))
    stats = [_GroupStats.of(rs) for rs in ordered]
    blocks: list[Block] = [Heading("Trees")]
    if not stats:
        return [*blocks, Paragraph("No task group was played.")]

    def mean_of(count: Callable[[_GroupStats], int]) -> float:
        return sum(map(count, stats)) / len(stats)

    blocks.append(Paragraph(
        f"Each task's {spec.samples} samples were played as one group grown as a tree of episodes that fork where "
        f"the model is unsure; what the tree fell short of (branches pruned, never made, or lost) was refilled with "
        f"stochastic episodes. In a drawing, an edge names the turn (counted from 1) from which a branch went "
        f"its own way. Per group, on average: {mean_of(lambda g: g.made):.1f} branches made, "
        f"{mean_of(lambda g: g.pruned):.1f} pruned, {mean_of(lambda g: g.grown):.1f} of {spec.samples} samples from "
        f"the tree, {mean_of(lambda g: g.distinct):.1f} distinct action sequences."))
    blocks.append(Table(["task", "made", "pruned", "tree turns", "from the tree", "refilled", "distinct actions",
                         "solved"],
                        [[g.task, str(g.made), str(g.pruned), str(g.turns), str(g.grown), str(g.refilled),
                          str(g.distinct), f"{g.solved} of {g.samples}"] for g in stats], numeric={1, 2, 3, 4, 5, 6}))
    for g, rs in list(zip(stats, ordered, strict=True))[:TREES_DRAWN]:
        grown = [r for r in rs if "branch" in r.trajectory.info]
        refills = [r for r in rs if "branch" not in r.trajectory.info]
        drawn: list[Block] = [Tree(_tree_nodes(grown))] if grown else [Paragraph("The tree kept no episode.")]
        if refills:
            drawn += [Paragraph("Refilled with stochastic episodes (not grown in the tree):"),
                      Tree([_node(r) for r in refills], css="refills")]
        blocks.append(Fold(f"{g.task}: {g.grown} from the tree ({g.made} branches made, {g.pruned} pruned), "
                           f"{g.refilled} refilled, {g.solved} of {g.samples} solved", drawn))
    if len(ordered) > TREES_DRAWN:
        blocks.append(Paragraph(f"The trees of the other {len(ordered) - TREES_DRAWN} groups are not drawn."))
    return blocks


@dataclass(frozen=True)
class _GroupStats:
    """A task group's counts under ``latr``."""

    task: str
    samples: int
    made: int
    """Forks the tree made (``info["tree"]``), ..."""
    pruned: int
    """... pruned with their descendants, ..."""
    turns: int
    """... and the turns its tree phase lasted."""
    grown: int
    """Samples grown in the tree."""
    refilled: int
    """Samples played on their own (the tree fell short)."""
    distinct: int
    """Distinct action sequences over the samples."""
    solved: int

    @classmethod
    def of(cls, rs: list[EpisodeRecord]) -> _GroupStats:
        tree: dict[str, int] = next((r.trajectory.info["tree"] for r in rs if "tree" in r.trajectory.info), {})
        grown = sum("branch" in r.trajectory.info for r in rs)
        return cls(task=rs[0].task.id, samples=len(rs), made=int(tree.get("made", 0)),
                   pruned=int(tree.get("pruned", 0)), turns=int(tree.get("turns", 0)), grown=grown,
                   refilled=len(rs) - grown, distinct=distinct_actions([r.trajectory for r in rs]),
                   solved=sum(r.success for r in rs))


def _tree_nodes(grown: list[EpisodeRecord]) -> list[Node]:
    """The tree's episodes as nodes under their parents; one whose parent was not kept (lost to infrastructure)
    hangs from nothing, its edge naming the parent."""
    nodes = {int(r.trajectory.info["branch"]): _node(r) for r in grown}
    roots = []
    for r in sorted(grown, key=lambda r: int(r.trajectory.info["branch"])):
        info = r.trajectory.info
        node, parent = nodes[int(info["branch"])], info.get("parent")
        if parent is None:
            roots.append(node)
        elif int(parent) in nodes:
            nodes[int(parent)].children.append(node)
        else:
            node.edge = f"from branch {parent} (not kept), {_fork(r)}"
            roots.append(node)
    return roots


def _node(r: EpisodeRecord) -> Node:
    """An episode as a node: branch (or refill) and sample, outcome, reward, turns and status."""
    info = r.trajectory.info
    outcome = "lost to infrastructure" if not r.scored else "solved" if r.success else "not solved"
    tree = "branch" in info
    name = f"branch {info['branch']}, sample {r.sample}" if tree else f"sample {r.sample}"
    data = {"key": r.key, "sample": str(r.sample), "status": r.status, "success": str(r.success).lower()}
    if tree:
        data |= {"branch": str(info["branch"]), "parent": "" if info.get("parent") is None else str(info["parent"]),
                 "fork-turn": str(info.get("fork_turn", 0))}
    css = ["solved" if r.success else "" if r.scored else "error", "" if tree else "refill"]
    return Node(f"{name}: {outcome}, reward {r.reward:.3f}, {r.turns} turns, {r.status}",
                edge=_fork(r) if tree and info.get("parent") is not None else "", css=" ".join(c for c in css if c),
                data=data)


def _fork(r: EpisodeRecord) -> str:
    """Where a branch forked from its parent: the turn (from 1) that it answered on its own first."""
    return f"fork at turn {int(r.trajectory.info.get('fork_turn') or 0) + 1}"


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
