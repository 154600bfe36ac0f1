"""LATR's tree rollouts against stochastic sampling: the same SFT start trained both ways, over several seeds.

Two tasks (``--task``): ``countdown``, a small Countdown (``countdown.py``: three numbers from 1-9, a target,
+ - *; one turn) where a warm start on one canonical solution per task makes the tiny model's samples collapse
onto one path, the regime LATR is for; and ``lake``, FrozenLake (easy) from the quickstart, where stochastic
sampling already walks apart. Each arm trains the task's config (``countdown.yaml``, or the quickstart's) from
one SFT warm start (built here unless ``--model`` names one) with ``rollout.sampling`` set to ``stochastic`` or
``latr`` (LATR's defaults), the same groups and group size, and scores held-out tasks every few steps.

``sweep`` first measures, without learning, whether the regime is right: the start model plays the same train
tasks in groups of 8 at each ``--temperatures`` value in three arms: stochastic, LATR, and a control that never
branches (``tau_abs`` 0.99: a greedy root plus stochastic samples), which separates the value of branching from
that of a greedy root. Per arm: distinct final answers per group (the last turn's calls), distinct action
sequences, mixed groups, pass@1, forks and prunes per tree (within turns, and episodes across them), decoded
tokens per group. The regime is right when stochastic gives at most about 3 distinct answers per group of 8;
LATR works when it makes at least 2 forks per tree and adds at least 1.5 distinct answers and 10 points of
mixed groups over the control. ``--sweep-only`` stops there.

Training reports, against the task's goals: the mixed-group fraction (all steps, and the η=1 phase apart) and
LATR's lead; ``steps_to_target_speedup`` (the steps stochastic needs to reach its final held-out pass@1, over
the steps LATR needs, on the seeds' mean curves, each seed's as the spread); ``final_success_delta`` (points,
mean and worst seed); ``token_cost_ratio`` (tokens decoded per step, LATR over stochastic); the minutes taken.

Writes ``benchmarks/results/latr_countdown.json`` or ``latr.json`` (the last line printed) and the curves as a
PNG beside it. ``--quick``: one seed, 6 steps, 64 held-out tasks, 16 sweep groups.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym import TaskSet
from agentgym.config import load_config
from agentgym.evaluation.play import play_groups
from agentgym.inference.torch.engine import TorchEngine
from agentgym.inference.types import SamplingParams
from agentgym.metrics_log import read_metrics
from agentgym.policies.lm import LMPolicy
from agentgym.rollout.config import RolloutConfig, TreeRollout
from agentgym.rollout.tree_group import turn_calls
from agentgym.trainers import TrainConfig, train
from agentgym.trajectory import Trajectory, distinct_actions, has_signal
from benchmarks.perf import countdown
from benchmarks.perf.curves import mean_curve, plot_curves
from benchmarks.perf.report import RESULTS, load_average, machine, write_result
from benchmarks.perf.warm_start import CONFIGS, warm_start

HERE = Path(__file__).resolve().parent

ARMS = ("stochastic", "latr")
SWEEP_ARMS: dict[str, dict[str, Any] | None] = {
    "stochastic": None, "latr": {}, "latr_batch_exit": {"exit_scope": "batch"}, "control": {"tau_abs": 0.99}}
"""The sweep's arms and their changes to the config's LATR settings (``None``: no tree). ``latr_batch_exit``:
upstream's exit, decided once for the trees grown together. ``control``: no candidate is ever that likely beside
the top one, so the tree never branches: its root is decoded greedily and the rest of the group is sampled."""
SWEEP_GOAL = {"stochastic_distinct_answers_at_most": 3.0, "forks_per_tree": 2.0, "distinct_answers_over_control": 1.5,
              "mixed_points_over_control": 10.0}


def _countdown_start(work: Path, overrides: list[str]) -> Path:
    """The tiny model, SFT-warm-started on one canonical Countdown solution per task (``sft-countdown.yaml`` with
    ``overrides``); its folder."""
    return warm_start(work, HERE / "sft-countdown.yaml", overrides)


def _lake_start(work: Path, overrides: list[str]) -> Path:
    """The quickstart's warm start (``sft-quickstart.yaml``; ``overrides`` are not taken)."""
    if overrides:
        raise SystemExit("--sft-set: the lake task uses the quickstart's warm start as it is")
    return warm_start(work)


@dataclass(frozen=True)
class Task:
    """One task the benchmark trains: its config, its warm start, its results file and goals."""

    config: Path
    start: Callable[[Path, list[str]], Path]
    out: str
    title: str
    goal: dict[str, float]
    overrides: tuple[str, ...] = ()
    """What the benchmark changes in the config (before the command line's)."""


TASKS = {
    "countdown": Task(HERE / "countdown.yaml", _countdown_start, "latr_countdown.json", "small Countdown",
                      {"mixed_group_lead_points_eta1": 8.0, "steps_to_target_speedup": 1.3,
                       "final_success_delta_points": 2.0, "worst_seed_delta_points": -2.0, "token_cost_ratio": 1.1,
                       "minutes": 45.0}),
    "lake": Task(CONFIGS / "quickstart.yaml", _lake_start, "latr.json", "FrozenLake easy",
                 {"mixed_group_lead_points": 10.0, "steps_to_target_speedup": 1.3, "final_success_delta_points": 2.0,
                  "worst_seed_delta_points": -2.0, "token_cost_ratio": 1.1},
                 ("trainer.steps=30", "eval.every=5", "checkpoint.every=0")),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="countdown")
    parser.add_argument("--model", type=Path, help="an SFT-warm-started model folder (default: build and SFT one)")
    parser.add_argument("--keep-model", type=Path, help="copy the warm start built here to this folder (for --model)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, help="training steps (default: the task config's)")
    parser.add_argument("--every", type=int, help="held-out evaluation every this many steps (default: the config's)")
    parser.add_argument("--episodes", type=int, help="held-out tasks per evaluation (default: the config's)")
    parser.add_argument("--temperatures", type=float, nargs="*", default=[1.0, 0.6],
                        help="rollout temperatures of the sweep before training")
    parser.add_argument("--sweep-groups", type=int, default=64, help="groups per arm and temperature in the sweep")
    parser.add_argument("--sweep-only", action="store_true", help="stop after the sweep (the go/no-go check)")
    parser.add_argument("--set", nargs="*", default=[], help="further overrides of the task's config (a.b=value)")
    parser.add_argument("--sft-set", nargs="*", default=[], help="overrides of the countdown warm start's SFT config")
    parser.add_argument("--quick", action="store_true", help="1 seed, 6 steps, 64 held-out tasks every 3 steps")
    parser.add_argument("--out", type=Path, help="the results file (default: the task's in benchmarks/results)")
    args = parser.parse_args()
    task = TASKS[args.task]
    countdown.register()
    if args.quick:
        args.seeds, args.steps, args.every, args.episodes, args.sweep_groups = 1, 6, 3, 64, 16
    out = args.out or RESULTS / task.out
    load_before, started = load_average(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="agentgym-latr-") as tmp:
        work = Path(tmp)
        model = args.model or task.start(work, args.sft_set)
        if args.keep_model and not args.model:
            shutil.copytree(model, args.keep_model, dirs_exist_ok=True)
        start_minutes = (time.perf_counter() - started) / 60
        base = load_config(TrainConfig, task.config,
                           [f"model.path={model}", f"output_dir={work / 'unused'}", *task.overrides, *args.set])
        sweep = {str(t): asyncio.run(_sweep(base, t, args.sweep_groups)) for t in args.temperatures}
        print(f"sweep: {sweep}", file=sys.stderr)
        report: dict[str, Any] = {"benchmark": "latr", "task": args.task, "sweep": sweep}
        runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
        if not args.sweep_only:
            trained = time.perf_counter()
            for seed in range(args.seeds):
                for arm in ARMS:
                    overrides = [f"model.path={model}", f"output_dir={work / f'{arm}-{seed}'}", f"trainer.seed={seed}",
                                 f"rollout.sampling={arm}", *task.overrides, *_given(args), *args.set]
                    runs[arm].append(_run(load_config(TrainConfig, task.config, overrides)))
                    print(f"{arm} seed {seed}: {runs[arm][-1]['curve']}", file=sys.stderr)
            minutes = (time.perf_counter() - trained) / 60
            report.update(_figures(runs, task.goal, minutes), runs=runs)
            plot_curves({task.title: {arm: [r["curve"] for r in runs[arm]] for arm in ARMS}},
                        out.with_suffix(".png"), ylabel="held-out pass@1", title="LATR vs stochastic sampling")
    report.update(params={"seeds": args.seeds, "steps": args.steps, "every": args.every, "episodes": args.episodes,
                          "sweep_groups": args.sweep_groups, "overrides": args.set, "sft_overrides": args.sft_set,
                          "config": task.config.name,
                          "warm_start_minutes": round(start_minutes, 1)},
                  sweep_goal=SWEEP_GOAL, goal=task.goal,
                  machine=machine("torch", load_before=load_before, load_after=load_average()))
    write_result(report, out)


def _given(args: argparse.Namespace) -> list[str]:
    """The overrides the command line gives of the config's steps and evaluation."""
    given = {"trainer.steps": args.steps, "eval.every": args.every, "eval.episodes": args.episodes}
    return [f"{key}={value}" for key, value in given.items() if value is not None]


async def _sweep(config: TrainConfig, temperature: float, groups: int) -> dict[str, Any]:
    """The start model's groups on ``groups`` train tasks at ``temperature``, each sweep arm, without learning;
    the verdict against :data:`SWEEP_GOAL`."""
    engine = TorchEngine(config.model.path, seed=0, threads=config.engine.threads)
    policy = LMPolicy(engine, SamplingParams(temperature=temperature, max_tokens=config.sampling.max_tokens))
    source = config.sources[0]
    tasks = TaskSet.generate(source.id, groups, difficulties=source.difficulties)
    out: dict[str, Any] = {}
    try:
        for arm, changes in SWEEP_ARMS.items():
            closed: list[list[Trajectory]] = []
            latr = TreeRollout(**{**config.rollout.latr.model_dump(), **(changes or {})})
            rollout = RolloutConfig(group_size=config.trainer.group_size, concurrency=config.trainer.concurrency,
                                    seed=config.trainer.seed, sampling="stochastic" if changes is None else "latr",
                                    latr=latr)
            metrics = await play_groups(source.id, policy, tasks, rollout,
                                        lambda g, closed=closed: closed.append(g.kept), env_kwargs=source.kwargs)
            out[arm] = _sweep_figures(closed, metrics.decoded_tokens)
    finally:
        await engine.close()
    out["verdict"] = {
        "regime_right": out["stochastic"]["distinct_answers"] <= SWEEP_GOAL["stochastic_distinct_answers_at_most"],
        "latr_working": (out["latr"]["token_forks_per_tree"] >= SWEEP_GOAL["forks_per_tree"]
                         and out["latr"]["distinct_answers"] - out["control"]["distinct_answers"]
                         >= SWEEP_GOAL["distinct_answers_over_control"]
                         and 100 * (out["latr"]["mixed_group_fraction"] - out["control"]["mixed_group_fraction"])
                         >= SWEEP_GOAL["mixed_points_over_control"]),
    }
    return out


def _sweep_figures(groups: list[list[Trajectory]], decoded: int) -> dict[str, float]:
    """One sweep arm's figures over its groups."""
    trees = [t.info["tree"] for g in groups for t in g if "tree" in t.info and t.info.get("branch") == 0]

    def per_tree(key: str) -> float:
        return statistics.fmean(tree[key] for tree in trees) if trees else 0.0

    return {"distinct_answers": statistics.fmean(len({turn_calls(t.turns[-1]) if t.turns else () for t in g})
                                                 for g in groups),
            "distinct_action_sequences": statistics.fmean(map(distinct_actions, groups)),
            "mixed_group_fraction": statistics.fmean(map(has_signal, groups)),
            "pass_at_1": statistics.fmean(t.success for g in groups for t in g),
            "token_forks_per_tree": per_tree("token_forks"), "token_pruned_per_tree": per_tree("token_pruned"),
            "episodes_forked_per_tree": per_tree("made"), "episodes_pruned_per_tree": per_tree("pruned"),
            "decoded_tokens_per_group": decoded / len(groups)}


def _run(config: TrainConfig) -> dict[str, Any]:
    """Train one arm; its held-out curve and its rollouts' figures."""
    train(config)
    records = read_metrics(config.run_dir)
    steps = [r for r in records if "train/loss" in r]
    curve = [[r["step"], r["eval/success_rate"]] for r in records if r.get("eval/success_rate") is not None]
    whole_tree = [r for r in steps if config.rollout.latr.eta(r["step"]) == 1.0] or steps
    return {"curve": curve,
            "mixed_group_fraction": statistics.fmean(r["rollout/mixed_group_fraction"] for r in steps),
            "mixed_group_fraction_eta1": statistics.fmean(r["rollout/mixed_group_fraction"] for r in whole_tree),
            "eta1_steps": [whole_tree[0]["step"], whole_tree[-1]["step"]],
            "distinct_action_sequences": statistics.fmean(r["rollout/distinct_action_sequences"] for r in steps),
            "decoded_tokens_per_step": steps[-1]["rollout/decoded_tokens"] / len(steps),
            "tree_branches": steps[-1].get("rollout/tree_branches", 0),
            "tree_pruned": steps[-1].get("rollout/tree_pruned", 0),
            "tree_refilled": steps[-1].get("rollout/tree_refilled", 0),
            "tree_token_fraction": steps[-1].get("rollout/tree_token_fraction", 0.0),
            "train_seconds": round(sum(r["time/step_seconds"] for r in steps), 1)}


def _figures(runs: dict[str, list[dict[str, Any]]], goal: dict[str, float], minutes: float) -> dict[str, Any]:
    """The training figures, each with its goal (of those ``goal`` sets) met or not."""
    stochastic, trees = runs["stochastic"], runs["latr"]

    def mixed(key: str) -> dict[str, float]:
        means = {arm: statistics.fmean(run[key] for run in runs[arm]) for arm in ARMS}
        return {"stochastic": round(means["stochastic"], 3), "latr": round(means["latr"], 3),
                "lead_points": round(100 * (means["latr"] - means["stochastic"]), 1)}

    deltas = [100 * (b["curve"][-1][1] - a["curve"][-1][1]) for a, b in zip(stochastic, trees, strict=True)]
    speedups = [_speedup(a["curve"], b["curve"]) for a, b in zip(stochastic, trees, strict=True)]
    cost = (statistics.fmean(run["decoded_tokens_per_step"] for run in trees)
            / statistics.fmean(run["decoded_tokens_per_step"] for run in stochastic))
    headline = _speedup(mean_curve([r["curve"] for r in stochastic]), mean_curve([r["curve"] for r in trees]))
    figures: dict[str, Any] = {
        "mixed_group_fraction": mixed("mixed_group_fraction"),
        "mixed_group_fraction_eta1": {**mixed("mixed_group_fraction_eta1"), "steps": trees[0]["eta1_steps"]},
        "steps_to_target_speedup": {"mean_curves": headline, "by_seed": speedups},
        "final_success_delta": {"mean_points": round(statistics.fmean(deltas), 1),
                                "by_seed_points": [round(d, 1) for d in deltas]},
        "token_cost_ratio": round(cost, 3),
        "minutes": round(minutes, 1),
    }
    checks = {
        "mixed_group_lead_points": figures["mixed_group_fraction"]["lead_points"],
        "mixed_group_lead_points_eta1": figures["mixed_group_fraction_eta1"]["lead_points"],
        "steps_to_target_speedup": headline["ratio"] or 0.0,
        "final_success_delta_points": figures["final_success_delta"]["mean_points"],
        "worst_seed_delta_points": min(deltas),
    }
    met = {key: checks[key] >= target for key, target in goal.items() if key in checks}
    met.update({key: figures[key] <= goal[key] for key in ("token_cost_ratio", "minutes") if key in goal})
    figures["meets_goal"] = met
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


if __name__ == "__main__":
    main()
