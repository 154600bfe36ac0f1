"""The final evaluation report of a run: ``report.md`` for people and ``summary.json`` for scripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.trainers.config import TrainConfig

EVAL_CURVE = "eval_curve.png"

if TYPE_CHECKING:
    from agentgym.trainers.loop import TrainResult


def write_report(run_dir: Path, config: TrainConfig, result: TrainResult, evals: list[dict[str, Any]]) -> Path:
    """Write the run's summary and its held-out evaluations (records of ``metrics.jsonl``); return the report."""
    summary = {
        "env": config.env.id,
        "model": config.model.path,
        "steps": result.steps,
        "async_ratio": config.trainer.async_ratio,
        "success_before": result.success_before,
        "success_after": result.success_after,
        "wall_seconds": round(result.wall_seconds, 1),
        "evaluations": [{"step": r["step"], "success_rate": r["eval/success_rate"],
                         "reward_mean": r.get("eval/reward_mean")} for r in evals],
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    rows = "\n".join(f"| {r['step']} | {r['eval/success_rate']:.1%} | {r.get('eval/reward_mean') or 0:.3f} "
                     f"| [report](eval/step-{r['step']:06d}/report.md) |" for r in evals)
    _plot_evals(evals, run_dir / EVAL_CURVE)
    lines = [
        f"# Training report: {config.env.id}",
        "",
        (f"- model: `{config.model.path}`, {result.steps} steps of {config.batch_size} trajectories "
        f"(async_ratio {config.trainer.async_ratio}), {result.wall_seconds:.0f} s"),
        (f"- held-out success: {_percent(result.success_before)} before, {_percent(result.success_after)} after "
        f"({config.eval.episodes} test-split tasks each)"),
        "- learning curves: `curves.png`; metrics: `metrics.jsonl`, `metrics.csv`, TensorBoard events",
        "- each evaluation's episodes and report: `eval/step-*/`"
        + (f" (the test split of suite `{config.eval.suite}`)" if config.eval.suite else ""),
        "",
        f"![held-out success by step]({EVAL_CURVE})",
        "",
        "| step | held-out success | mean reward | evaluation |",
        "|---:|---:|---:|---|",
        rows,
        "",
    ]
    path = run_dir / "report.md"
    path.write_text("\n".join(lines))
    return path


def _plot_evals(evals: list[dict[str, Any]], path: Path) -> None:
    """Held-out success by step, overall and per difficulty, taken while the rollout went on."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    steps = [r["step"] for r in evals]
    ax.plot(steps, [r["eval/success_rate"] for r in evals], marker="o", color="black", label="all")
    levels = sorted({k for r in evals for k in r if k.startswith("eval/success_") and k != "eval/success_rate"})
    for key in levels:
        points = [(r["step"], r[key]) for r in evals if r.get(key) is not None]
        ax.plot(*zip(*points, strict=True), marker=".", linestyle="--", label=key.removeprefix("eval/success_"))
    ax.set_ylim(0, 1)
    ax.set_xlabel("step")
    ax.set_ylabel("held-out success")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"
