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
    envs = [source.id for source in config.sources]
    by_env = {env: {"before": _at(evals, f"eval/{env}/success_rate", 0),
                    "after": _at(evals, f"eval/{env}/success_rate", result.steps)} for env in envs if len(envs) > 1}
    summary = {
        "env": ", ".join(envs),
        "model": config.model.path,
        "steps": result.steps,
        "async_ratio": config.trainer.async_ratio,
        "success_before": result.success_before,
        "success_after": result.success_after,
        "success_by_env": by_env,
        "wall_seconds": round(result.wall_seconds, 1),
        "evaluations": [{"step": r["step"], "success_rate": r["eval/success_rate"],
                         "reward_mean": r.get("eval/reward_mean")} for r in evals],
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    rows = "\n".join(f"| {r['step']} | {r['eval/success_rate']:.1%} | {r.get('eval/reward_mean') or 0:.3f} "
                     f"| [report](eval/step-{r['step']:06d}/report.md) |" for r in evals)
    _plot_evals(evals, envs, run_dir / EVAL_CURVE)
    per_env = [f"| {env} | {_percent(scores['before'])} | {_percent(scores['after'])} |" for env, scores in by_env.items()]
    lines = [
        f"# Training report: {', '.join(envs)}",
        "",
        (f"- model: `{config.model.path}`, {result.steps} steps of {config.batch_size} trajectories "
        f"(async_ratio {config.trainer.async_ratio}), {result.wall_seconds:.0f} s"),
        (f"- held-out success: {_percent(result.success_before)} before, {_percent(result.success_after)} after "
        f"(up to {config.eval.episodes} test-split tasks per environment each time)"),
        "- learning curves: `curves.png`; metrics: `metrics.jsonl`, `metrics.csv`, TensorBoard events",
        "- each evaluation's episodes and report: `eval/step-*/`"
        + (f" (the test split of suite `{config.eval.suite}`)" if config.eval.suite else ""),
        "- per environment and level: `rollout/<env>/...`, `eval/<env>/...` and `curriculum/<env>/...` in the metrics",
        "",
        f"![held-out success by step]({EVAL_CURVE})",
        "",
        *(["| environment | held-out success before | after |", "|---|---:|---:|", *per_env, ""] if per_env else []),
        "| step | held-out success | mean reward | evaluation |",
        "|---:|---:|---:|---|",
        rows,
        "",
    ]
    path = run_dir / "report.md"
    path.write_text("\n".join(lines))
    return path


def _plot_evals(evals: list[dict[str, Any]], envs: list[str], path: Path) -> None:
    """Held-out success by step: overall, and per environment on a mixture, else per difficulty."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    steps = [r["step"] for r in evals]
    ax.plot(steps, [r["eval/success_rate"] for r in evals], marker="o", color="black", label="all")
    if len(envs) > 1:
        lines = {env: f"eval/{env}/success_rate" for env in envs}
    else:
        lines = {k.removeprefix("eval/success_"): k for r in evals for k in r
                 if k.startswith("eval/success_") and k != "eval/success_rate"}
    for label, key in sorted(lines.items()):
        points = [(r["step"], r[key]) for r in evals if r.get(key) is not None]
        if points:
            ax.plot(*zip(*points, strict=True), marker=".", linestyle="--", label=label)
    ax.set_ylim(0, 1)
    ax.set_xlabel("step")
    ax.set_ylabel("held-out success")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _at(evals: list[dict[str, Any]], key: str, step: int) -> float | None:
    """``key`` of the evaluation at ``step``, if there was one."""
    return next((r.get(key) for r in evals if r["step"] == step), None)


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"
