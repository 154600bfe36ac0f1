"""The two CPU showcases, measured: build the tiny model, warm-start it with SFT on oracle demonstrations,
train it with async RL, and compare held-out success before and after RL, per environment.

``quickstart`` (the README's first command) trains on FrozenLake (``sft-quickstart.yaml``, then
``quickstart.yaml``); ``mixture`` on FrozenLake, Sokoban and Calculator at once (``sft-games.yaml``, then
``sft-calculator.yaml`` and ``sft-mixture.yaml``, each from the one before, then ``mixture.yaml``). The bundled configs run in a temporary folder, with
``a.b=value`` overrides for every SFT stage (``--sft-set``) or the RL stage (``--train-set``).
Writes ``benchmarks/results/<showcase>.json``: ``success_before`` (the SFT start), ``success_after``,
``gain_points``, ``wall_s`` (the whole pipeline, model build included), and per environment its held-out
success before and after with 95% Wilson intervals (the evaluation's noise) and its curves (held-out success
at each evaluation, rollout success at each step); the last line printed is that JSON.
Goals: quickstart ``gain_points >= 20`` within ``wall_s <= 900``; mixture, a gain on every environment within
``wall_s <= 1800`` on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentgym.config import load_config
from agentgym.evaluation.scores import wilson_interval
from agentgym.metrics_log import read_metrics
from agentgym.models import init_model
from agentgym.trainers import TrainConfig, train
from agentgym.trainers.sft import SFTRunConfig, run_sft
from benchmarks.perf.report import RESULTS, load_average, machine, write_result

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "trainers" / "configs"
SHOWCASES = {
    "quickstart": (["sft-quickstart.yaml"], "quickstart.yaml", {"gain_points": 20.0, "wall_s": 900.0}),
    "mixture": (
        ["sft-games.yaml", "sft-calculator.yaml", "sft-mixture.yaml"],
        "mixture.yaml",
        {"gain_points_each": 0.0, "wall_s": 1800.0},
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("showcase", nargs="?", choices=sorted(SHOWCASES), default="quickstart")
    parser.add_argument("--sft-set", nargs="*", default=[], help="overrides of each SFT stage (a.b=value)")
    parser.add_argument("--train-set", nargs="*", default=[], help="overrides of the RL config (a.b=value)")
    parser.add_argument("--keep", type=Path, help="keep the run here instead of a temporary folder")
    parser.add_argument(
        "--out", type=Path, help="the JSON written (default benchmarks/results/SHOWCASE.json)"
    )
    args = parser.parse_args()
    sft_stages, train_config, goal = SHOWCASES[args.showcase]
    out = args.out or RESULTS / f"{args.showcase}.json"
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix=f"agentgym-{args.showcase}-") as tmp:
        work = args.keep or Path(tmp)
        started = time.perf_counter()
        init_model(work / "tiny-model", preset="tiny", seed=0)
        model = work / "tiny-model"
        for stage in sft_stages:
            model = run_sft(
                load_config(
                    SFTRunConfig,
                    CONFIGS / stage,
                    [f"model={model}", f"output_dir={work / Path(stage).stem}", *args.sft_set],
                )
            ).model_dir
        sft_seconds = time.perf_counter() - started
        config = load_config(
            TrainConfig,
            CONFIGS / train_config,
            [f"model.path={model}", f"output_dir={work / 'train'}", *args.train_set],
        )
        result = train(config)
        wall = time.perf_counter() - started
        figures = {
            "success_before": result.success_before,
            "success_after": result.success_after,
            "gain_points": round(100 * (result.success_after - result.success_before), 1),
            "wall_s": round(wall, 1),
            "sft_s": round(sft_seconds, 1),
            "rl_s": round(result.wall_seconds, 1),
            "rl_steps": result.steps,
            "eval_episodes_per_env": config.eval.episodes,
            "by_env": _by_env(config, work / "train"),
            "curve": str(work / "train" / "curves.png") if args.keep else None,
        }
    gains = [env["gain_points"] for env in figures["by_env"].values()]
    meets = figures["wall_s"] <= goal["wall_s"] and (
        figures["gain_points"] >= goal["gain_points"]
        if "gain_points" in goal
        else min(gains) > goal["gain_points_each"]
    )
    report = {
        "benchmark": args.showcase,
        **figures,
        "goal": goal,
        "meets_goal": meets,
        "overrides": {"sft": args.sft_set, "train": args.train_set},
        "machine": machine("torch", load_before=load_before, load_after=load_average()),
    }
    for env, scores in figures["by_env"].items():
        print(
            f"{env}: {scores['before']:.1%} -> {scores['after']:.1%} ({scores['gain_points']:+.1f} points)",
            file=sys.stderr,
        )
    print(
        f"held-out success {figures['success_before']:.1%} -> {figures['success_after']:.1%} "
        f"({figures['gain_points']:+.1f} points) in {figures['wall_s']:.0f} s",
        file=sys.stderr,
    )
    write_result(report, out)


def _by_env(config: TrainConfig, run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per environment: held-out success before and after with Wilson intervals, and its curves."""
    records = read_metrics(run_dir)
    n = config.eval.episodes
    several = len(config.sources) > 1
    figures = {}
    for source in config.sources:
        held_out = f"eval/{source.id}/success_rate" if several else "eval/success_rate"
        rollout = f"rollout/{source.id}/success_rate" if several else "rollout/success_rate"
        evals = [(r["step"], r[held_out]) for r in records if r.get(held_out) is not None]
        before, after = evals[0][1], evals[-1][1]
        figures[source.id] = {
            "before": before,
            "after": after,
            "gain_points": round(100 * (after - before), 1),
            "before_interval": [round(x, 3) for x in wilson_interval(round(before * n), n)],
            "after_interval": [round(x, 3) for x in wilson_interval(round(after * n), n)],
            "held_out_curve": evals,
            "rollout_curve": [
                (r["step"], round(r[rollout], 3)) for r in records if r.get(rollout) is not None
            ],
        }
    return figures


if __name__ == "__main__":
    main()
