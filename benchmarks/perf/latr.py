"""LATR's tree rollouts against stochastic sampling: the same SFT start trained both ways, over several seeds.

Each arm trains ``trainers/configs/quickstart.yaml`` from one SFT warm start (built here unless ``--model`` names
one) with ``rollout.sampling`` set to ``stochastic`` or ``latr`` (LATR's defaults), the same groups and group
size, and scores the held-out test lakes every ``--every`` steps. Reports, against the issue's goals:

- ``mixed_group_fraction``: the share of training groups whose rewards are not all equal (each arm, mean over
  steps and seeds), and LATR's lead in points;
- ``steps_to_target_speedup``: the steps stochastic sampling needs to reach its final held-out success, over the
  steps LATR needs to reach it (on the seeds' mean curves; each seed's ratio as the spread);
- ``final_success_delta``: LATR's final held-out success minus stochastic's, in points (mean and worst seed);
- ``token_cost_ratio``: tokens the engine decoded per step, LATR over stochastic (a tree's shared prefix once,
  its pruned branches and lookaheads included).

Before training, ``sweep`` measures where trees add diversity at all: the start model plays the same train tasks
in groups of 8 both ways, at each ``--temperatures`` value, without learning (mixed groups, distinct action
sequences, success, decoded tokens per group).

Writes ``benchmarks/results/latr.json`` (the last line printed) and the curves to ``latr.png`` beside it.
``--quick``: one seed, 6 steps, 64 held-out lakes, about 6 minutes on 2 cores; the full run about 60.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from report import RESULTS, load_average, machine, write_result
from warm_start import CONFIGS, warm_start

from agentgym import TaskSet
from agentgym.config import load_config
from agentgym.evaluation.play import play_groups
from agentgym.inference.torch_engine import TorchEngine
from agentgym.inference.types import SamplingParams
from agentgym.metrics_log import read_metrics
from agentgym.policies.lm import LMPolicy
from agentgym.rollout.config import RolloutConfig
from agentgym.trainers import TrainConfig, train
from agentgym.trajectory import Trajectory, distinct_actions, has_signal

ARMS = ("stochastic", "latr")
GOAL = {"mixed_group_lead_points": 10.0, "steps_to_target_speedup": 1.3, "final_success_delta_points": 2.0,
        "worst_seed_delta_points": -2.0, "token_cost_ratio": 1.1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="an SFT-warm-started model folder (default: build and SFT one)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--every", type=int, default=5, help="held-out evaluation every this many steps")
    parser.add_argument("--episodes", type=int, default=200, help="held-out lakes per evaluation")
    parser.add_argument("--temperatures", type=float, nargs="*", default=[0.3, 0.6, 1.0],
                        help="rollout temperatures of the sweep before training")
    parser.add_argument("--sweep-groups", type=int, default=48, help="groups per arm and temperature in the sweep")
    parser.add_argument("--set", nargs="*", default=[], help="further overrides of quickstart.yaml (a.b=value)")
    parser.add_argument("--quick", action="store_true", help="1 seed, 6 steps, 64 held-out lakes every 3 steps")
    parser.add_argument("--out", type=Path, default=RESULTS / "latr.json")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.steps, args.every, args.episodes, args.sweep_groups = 1, 6, 3, 64, 16
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="agentgym-latr-") as tmp:
        work = Path(tmp)
        model = args.model or warm_start(work)
        base = load_config(TrainConfig, CONFIGS / "quickstart.yaml", [f"model.path={model}", *args.set])
        sweep = {str(t): asyncio.run(_sweep(base, t, args.sweep_groups)) for t in args.temperatures}
        print(f"sweep: {sweep}", file=sys.stderr)
        runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
        for seed in range(args.seeds):
            for arm in ARMS:
                overrides = [f"model.path={model}", f"output_dir={work / f'{arm}-{seed}'}", f"trainer.seed={seed}",
                             f"trainer.steps={args.steps}", f"eval.every={args.every}", f"eval.episodes={args.episodes}",
                             "checkpoint.every=0", f"rollout.sampling={arm}", *args.set]
                runs[arm].append(_run(load_config(TrainConfig, CONFIGS / "quickstart.yaml", overrides)))
                print(f"{arm} seed {seed}: {runs[arm][-1]['curve']}", file=sys.stderr)
    report = {"benchmark": "latr", **_figures(runs), "sweep": sweep, "runs": runs,
              "params": {"seeds": args.seeds, "steps": args.steps, "every": args.every, "episodes": args.episodes,
                         "overrides": args.set, "env": "games/FrozenLake-v0 (easy)", "config": "quickstart.yaml"},
              "goal": GOAL, "machine": machine("torch", load_before=load_before, load_after=load_average())}
    _plot(runs, args.out.with_suffix(".png"))
    write_result(report, args.out)


async def _sweep(config: TrainConfig, temperature: float, groups: int) -> dict[str, dict[str, float]]:
    """The start model's groups on ``groups`` train tasks at ``temperature``, each arm, without learning."""
    engine = TorchEngine(config.model.path, seed=0, threads=config.engine.threads)
    policy = LMPolicy(engine, SamplingParams(temperature=temperature, max_tokens=config.sampling.max_tokens))
    tasks = TaskSet.generate(config.env.id, groups, difficulties=config.env.difficulties)
    out = {}
    try:
        for arm in ARMS:
            closed: list[list[Trajectory]] = []
            rollout = RolloutConfig(group_size=config.trainer.group_size, concurrency=config.trainer.concurrency,
                                    seed=config.trainer.seed, sampling=arm, latr=config.rollout.latr)
            metrics = await play_groups(config.env.id, policy, tasks, rollout, lambda g, closed=closed: closed.append(g.kept),
                                        env_kwargs=config.env.kwargs)
            out[arm] = {"mixed_group_fraction": statistics.fmean(map(has_signal, closed)),
                        "distinct_action_sequences": statistics.fmean(map(distinct_actions, closed)),
                        "success": statistics.fmean(t.success for g in closed for t in g),
                        "decoded_tokens_per_group": metrics.decoded_tokens / len(closed)}
    finally:
        await engine.close()
    return out


def _run(config: TrainConfig) -> dict[str, Any]:
    """Train one arm; its held-out curve and its rollouts' figures."""
    train(config)
    records = read_metrics(config.run_dir)
    steps = [r for r in records if "train/loss" in r]
    curve = [[r["step"], r["eval/success_rate"]] for r in records if r.get("eval/success_rate") is not None]
    return {"curve": curve,
            "mixed_group_fraction": statistics.fmean(r["rollout/mixed_group_fraction"] for r in steps),
            "distinct_action_sequences": statistics.fmean(r["rollout/distinct_action_sequences"] for r in steps),
            "decoded_tokens_per_step": steps[-1]["rollout/decoded_tokens"] / len(steps),
            "tree_branches": steps[-1].get("rollout/tree_branches", 0),
            "tree_pruned": steps[-1].get("rollout/tree_pruned", 0),
            "tree_refilled": steps[-1].get("rollout/tree_refilled", 0),
            "tree_token_fraction": steps[-1].get("rollout/tree_token_fraction", 0.0),
            "train_seconds": round(sum(r["time/step_seconds"] for r in steps), 1)}


def _figures(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The four figures, each with its goal met or not."""
    stochastic, latr = runs["stochastic"], runs["latr"]
    mixed = {arm: statistics.fmean(run["mixed_group_fraction"] for run in runs[arm]) for arm in ARMS}
    deltas = [100 * (b["curve"][-1][1] - a["curve"][-1][1]) for a, b in zip(stochastic, latr, strict=True)]
    speedups = [_speedup(a["curve"], b["curve"]) for a, b in zip(stochastic, latr, strict=True)]
    cost = (statistics.fmean(run["decoded_tokens_per_step"] for run in latr)
            / statistics.fmean(run["decoded_tokens_per_step"] for run in stochastic))
    headline = _speedup(_mean_curve(stochastic), _mean_curve(latr))
    figures = {
        "mixed_group_fraction": {"stochastic": round(mixed["stochastic"], 3), "latr": round(mixed["latr"], 3),
                                 "lead_points": round(100 * (mixed["latr"] - mixed["stochastic"]), 1)},
        "steps_to_target_speedup": {"mean_curves": headline, "by_seed": speedups},
        "final_success_delta": {"mean_points": round(statistics.fmean(deltas), 1),
                                "by_seed_points": [round(d, 1) for d in deltas]},
        "token_cost_ratio": round(cost, 3),
    }
    figures["meets_goal"] = {
        "mixed_group_fraction": figures["mixed_group_fraction"]["lead_points"] >= GOAL["mixed_group_lead_points"],
        "steps_to_target_speedup": (headline["ratio"] or 0) >= GOAL["steps_to_target_speedup"],
        "final_success_delta": (figures["final_success_delta"]["mean_points"] >= GOAL["final_success_delta_points"]
                                and min(deltas) >= GOAL["worst_seed_delta_points"]),
        "token_cost_ratio": cost <= GOAL["token_cost_ratio"],
    }
    return figures


def _speedup(baseline: list[list[float]], treated: list[list[float]]) -> dict[str, Any]:
    """Steps ``baseline`` takes to first reach its final success, over the steps ``treated`` takes to reach it
    (``None`` where ``treated`` never does within the run)."""
    target = baseline[-1][1]
    reached = [step for step, success in treated if success >= target]
    mine = next(step for step, success in baseline if success >= target)
    ratio = round(mine / reached[0], 3) if reached and reached[0] > 0 else None
    return {"target": round(target, 3), "baseline_steps": mine, "treated_steps": reached[0] if reached else None,
            "ratio": ratio}


def _mean_curve(runs: list[dict[str, Any]]) -> list[list[float]]:
    """The seeds' curves averaged point by point (they share their evaluation steps)."""
    return [[points[0][0], statistics.fmean(p[1] for p in points)] for points in zip(*(r["curve"] for r in runs))]


def _plot(runs: dict[str, list[dict[str, Any]]], out: Path) -> None:
    """Each seed's held-out curve, thin, and each arm's mean, thick."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for arm, color in zip(ARMS, ("tab:gray", "tab:green"), strict=True):
        for run in runs[arm]:
            ax.plot(*zip(*run["curve"]), color=color, alpha=0.35, linewidth=1)
        ax.plot(*zip(*_mean_curve(runs[arm])), color=color, linewidth=2.5, marker="o", label=arm)
    ax.set(xlabel="training step", ylabel="held-out success", title="LATR vs stochastic sampling (FrozenLake easy)")
    ax.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
