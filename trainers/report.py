"""The final evaluation report of a run: ``report.md`` for people and ``summary.json`` for scripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.trainers.config import TrainConfig

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
    rows = "\n".join(f"| {r['step']} | {r['eval/success_rate']:.1%} | {r.get('eval/reward_mean') or 0:.3f} |"
                     for r in evals)
    lines = [
        f"# Training report: {config.env.id}",
        "",
        (f"- model: `{config.model.path}`, {result.steps} steps of {config.batch_size} trajectories "
        f"(async_ratio {config.trainer.async_ratio}), {result.wall_seconds:.0f} s"),
        (f"- held-out success: {_percent(result.success_before)} before, {_percent(result.success_after)} after "
        f"({config.eval.episodes} test-split tasks each)"),
        "- learning curves: `curves.png`; metrics: `metrics.jsonl`, `metrics.csv`, TensorBoard events",
        "- episodes of each evaluation: `eval/step-*/`",
        "",
        "| step | held-out success | mean reward |",
        "|---:|---:|---:|",
        rows,
        "",
    ]
    path = run_dir / "report.md"
    path.write_text("\n".join(lines))
    return path


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"
