"""The final evaluation report of a run: ``report.md`` for people and ``summary.json`` for scripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.trainers.config import TrainConfig

EVAL_CURVE = "eval_curve.png"

if TYPE_CHECKING:
    from agentgym.trainers.loop import TrainResult


def write_report(run_dir: Path, config: TrainConfig, result: TrainResult, records: list[dict[str, Any]]) -> Path:
    """Write the run's summary, its held-out evaluations and how far off-policy its steps were (from the records
    of ``metrics.jsonl``); return the report."""
    evals = [r for r in records if r.get("eval/success_rate") is not None]
    off_policy = _off_policy([r for r in records if r.get("train/ess_ratio") is not None])
    envs = [source.id for source in config.sources]
    by_env = {env: {"before": _at(evals, f"eval/{env}/success_rate", 0),
                    "after": _at(evals, f"eval/{env}/success_rate", result.steps)} for env in envs if len(envs) > 1}
    summary = {
        "env": ", ".join(envs),
        "model": config.model.path,
        "steps": result.steps,
        "async_ratio": config.trainer.async_ratio,
        "forced_lag": config.trainer.forced_lag,
        "success_before": result.success_before,
        "success_after": result.success_after,
        "success_by_env": by_env,
        "wall_seconds": round(result.wall_seconds, 1),
        "off_policy": off_policy,
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
        f"(async_ratio {config.trainer.async_ratio}{_forced(config)}), {result.wall_seconds:.0f} s"),
        (f"- held-out success: {_percent(result.success_before)} before, {_percent(result.success_after)} after "
        f"(up to {config.eval.episodes} test-split tasks per environment each time)"),
        "- learning curves: `curves.png`; metrics: `metrics.jsonl`, `metrics.csv`, TensorBoard events",
        "- every episode the steps took, with its advantage and the trainer's logprobs: `rollouts.jsonl`",
        "- each evaluation's episodes and report: `eval/step-*/`"
        + (f" (the test split of suite `{config.eval.suite}`)" if config.eval.suite else ""),
        "- per environment and level: `rollout/<env>/...`, `eval/<env>/...` and `curriculum/<env>/...` in the metrics",
        "",
        f"![held-out success by step]({EVAL_CURVE})",
        "",
        *(["| environment | held-out success before | after |", "|---|---:|---:|", *per_env, ""] if per_env else []),
        *(["## Off-policy steps", "", "| measure | value |", "|---|---:|",
           *(f"| {name} | {value:g} |" for name, value in off_policy.items()), ""] if off_policy else []),
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


_OFF_POLICY = {
    "ESS ratio, mean over steps": ("train/ess_ratio", "mean"),
    "ESS ratio, lowest step": ("train/ess_ratio", "min"),
    "effective learning rate, mean": ("train/effective_lr", "mean"),
    "staleness, mean (versions)": ("train/staleness_mean", "mean"),
    "baseline shift from the group mean, mean": ("train/baseline_shift", "mean"),
    "carry-over buffer, largest": ("rollout/carry_buffer_peak", "max"),
    "carry-over pauses, env-seconds held idle": ("rollout/carry_paused_seconds", "last"),
    "carried tokens kept": ("rollout/carried_tokens", "last"),
    "carried episodes discarded": ("rollout/carry_discarded", "last"),
    "trajectories dropped as too stale": ("rollout/dropped_stale", "last"),
}
"""The report's off-policy measures: each a metric and how its per-step values reduce to one number."""


def _off_policy(steps: list[dict[str, Any]]) -> dict[str, float]:
    """The off-policy measures of :data:`_OFF_POLICY` over the trained steps' records (those a run logged)."""
    reduce = {"mean": lambda v: sum(v) / len(v), "min": min, "max": max, "last": lambda v: v[-1]}
    out = {}
    for name, (key, how) in _OFF_POLICY.items():
        values = [r[key] for r in steps if r.get(key) is not None]
        if values:
            out[name] = round(float(reduce[how](values)), 6)
    return out


def _at(evals: list[dict[str, Any]], key: str, step: int) -> float | None:
    """``key`` of the evaluation at ``step``, if there was one."""
    return next((r.get(key) for r in evals if r["step"] == step), None)


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _forced(config: TrainConfig) -> str:
    lag = config.trainer.forced_lag
    return "" if lag is None else f", every trajectory trained {lag} versions after it was sampled"
