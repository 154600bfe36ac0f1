"""Decoupled asynchronous training against its synchronous baseline, on long-tailed environment steps.

The same SFT-warm-started tiny model, env, seed and number of trajectories are trained twice with
``trainers/configs/quickstart.yaml``: ``async_ratio: 0`` (synchronous on-policy: rollout waits for each
update, each update for the batch's slowest episode) and ``async_ratio: 2`` (rollout runs ahead up to two
versions; TIS corrects the off-policy tokens). Every move of the lake takes a log-normal time
(``perf/LongTailLake-v0``, median 0.2 s and p99 = ``--tail`` x median by default), as remote tools,
sandboxes and browsers do. Reports each arm's training wall time (the steps only: evaluations are
excluded), ``speedup`` (sync over async) and the final held-out success of each; writes
``benchmarks/results/train_async_vs_sync.json``, the last line printed. Goal: ``speedup >= 1.5`` with final successes within 5 points.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import agentgym
from agentgym.config import load_config
from agentgym.metrics_log import read_metrics
from agentgym.trainers import TrainConfig, train
from benchmarks.perf.report import RESULTS, load_average, machine, write_result
from benchmarks.perf.warm_start import CONFIGS, warm_start

ENV_ID = "perf/LongTailLake-v0"
GOAL = {"speedup": 1.5, "success_gap_points": 5.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="an SFT-warm-started model folder (default: build and SFT one)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--median", type=float, default=0.2, help="median seconds of an env step")
    parser.add_argument("--tail", type=float, default=20.0, help="p99 / median of an env step's time")
    parser.add_argument("--set", nargs="*", default=[], help="further overrides of quickstart.yaml (a.b=value)")
    parser.add_argument("--quick", action="store_true", help="6 steps and 64 evaluation episodes")
    parser.add_argument("--out", type=Path, default=RESULTS / "train_async_vs_sync.json")
    args = parser.parse_args()
    steps, episodes = (6, 64) if args.quick else (args.steps, 200)
    agentgym.register(ENV_ID, "benchmarks.perf.long_tail_env:LongTailLake")
    with tempfile.TemporaryDirectory(prefix="agentgym-async-vs-sync-") as tmp:
        work = Path(tmp)
        model = args.model or warm_start(work)
        arms = {}
        for ratio in (0, 2):
            overrides = [f"model.path={model}", f"output_dir={work / f'async-{ratio}'}", f"env.id={ENV_ID}",
                         f"env.kwargs.median={args.median}",
                         f"env.kwargs.tail={args.tail}", f"trainer.steps={steps}",
                         f"trainer.async_ratio={ratio}", f"eval.episodes={episodes}", "checkpoint.every=0", *args.set]
            arms[ratio] = _arm(load_config(TrainConfig, CONFIGS / "quickstart.yaml", overrides))
            print(f"async_ratio={ratio}: {arms[ratio]}", file=sys.stderr)
    sync, decoupled = arms[0], arms[2]
    report = {
        "benchmark": "train_async_vs_sync",
        "speedup": round(sync["train_seconds"] / decoupled["train_seconds"], 3),
        "success_sync": sync["success_after"],
        "success_async": decoupled["success_after"],
        "success_gap_points": round(100 * abs(sync["success_after"] - decoupled["success_after"]), 1),
        "arms": {"async_ratio_0": sync, "async_ratio_2": decoupled},
        "params": {"steps": steps, "eval_episodes": episodes, "median": args.median, "tail": args.tail,
                   "overrides": args.set, "env": ENV_ID},
        "goal": GOAL,
        "machine": machine("torch", load_after=load_average()),
    }
    report["meets_goal"] = report["speedup"] >= GOAL["speedup"] and report["success_gap_points"] <= GOAL[
        "success_gap_points"]
    print(f"speedup {report['speedup']:.2f}x; final held-out success sync {sync['success_after']:.1%}, "
          f"async {decoupled['success_after']:.1%}", file=sys.stderr)
    write_result(report, args.out)


def _arm(config: TrainConfig) -> dict[str, float | int | None]:
    started = time.perf_counter()
    result = train(config)
    records = read_metrics(config.run_dir)
    steps = [r for r in records if r.get("time/step_seconds") is not None]
    return {
        "train_seconds": round(sum(r["time/step_seconds"] for r in steps), 1),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "trajectories": len(steps) * config.batch_size,
        "success_before": result.success_before,
        "success_after": result.success_after,
        "reward_last_steps": round(sum(r["rollout/reward_mean"] for r in steps[-5:]) / len(steps[-5:]), 3),
        "wait_fraction": round(sum(r["time/wait_seconds"] for r in steps) / sum(r["time/step_seconds"] for r in steps), 3),
    }


if __name__ == "__main__":
    main()
