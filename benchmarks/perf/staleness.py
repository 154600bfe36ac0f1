"""How far off-policy training can go: a staleness sweep with plain TIS and with VCPO, and APRIL's carry-over.

The SFT-warm-started tiny model trains on FrozenLake whose moves take a log-normal time (``perf/LongTailLake-v0``,
the env of ``train_async_vs_sync.py``), every arm on the same number of trajectories from the same start:

- ``async_ratio`` in {0, 2, 8, 32}, each with plain TIS (``trainers/configs/quickstart.yaml``) and with TIS plus VCPO
  (``algorithm.vcpo``: the sqrt ESS-scaled rate and the minimum-variance baseline, gradient norms over the logits);
- at ``async_ratio`` 2, ``redundancy`` 2 spares per group cancelled once the group is whole (today's
  cancel-and-discard) against ``rollout.carry_over`` (the spares pause and continue in a carry group of their task).

Each arm reports its training wall time (steps only, evaluations left out), trajectories per second of training,
the rollout's own trajectories per second, the final held-out success, the ESS ratio over the run, and what was
dropped as too stale or carried over. ``speedup_vs_sync`` divides the synchronous TIS arm's training time by each
arm's. Writes ``benchmarks/results/staleness.json``, the last line printed. Goals: VCPO at ``async_ratio`` 8 at
least 2.5x faster than synchronous, its final success within 2 points; VCPO's lead over TIS growing with
staleness; carry-over at least 1.15x cancel-and-discard's rollout trajectories per second.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from report import RESULTS, load_average, machine, write_result
from warm_start import CONFIGS, warm_start

import agentgym
from agentgym.config import load_config
from agentgym.metrics_log import read_metrics
from agentgym.trainers import TrainConfig, train

ENV_ID = "perf/LongTailLake-v0"
GOAL = {"speedup_vs_sync_vcpo_8": 2.5, "success_gap_points": 2.0, "carry_over_rollout_speedup": 1.15}
VCPO = ["algorithm.vcpo.lr_scaling=sqrt", "algorithm.vcpo.baseline=min_variance", "algorithm.vcpo.grad_norm=logits"]
CORRECTIONS = {"tis": [], "vcpo": VCPO}
CARRY = {"cancel": ["trainer.redundancy=2"], "carry_over": ["trainer.redundancy=2", "rollout.carry_over=true"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="an SFT-warm-started model folder (default: build and SFT one)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--ratios", type=int, nargs="+", default=[0, 2, 8, 32])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="trainer.seed of each repetition")
    parser.add_argument("--median", type=float, default=0.2, help="median seconds of an env step")
    parser.add_argument("--tail", type=float, default=20.0, help="p99 / median of an env step's time")
    parser.add_argument("--set", nargs="*", default=[], help="further overrides of every arm (a.b=value)")
    parser.add_argument("--arms", nargs="*", help="run only these arms (e.g. carry_over_ratio_2); default: all")
    parser.add_argument("--merge", type=Path, help="a result file whose arms' runs join this run's (arms run again "
                                                   "here replace theirs)")
    parser.add_argument("--quick", action="store_true", help="3 steps, 32 evaluation episodes, ratios 0 and 2")
    parser.add_argument("--out", type=Path, default=RESULTS / "staleness.json")
    args = parser.parse_args()
    steps, episodes, ratios = (3, 32, [0, 2]) if args.quick else (args.steps, 200, args.ratios)
    agentgym.register(ENV_ID, "long_tail_env:LongTailLake")
    with tempfile.TemporaryDirectory(prefix="agentgym-staleness-") as tmp:
        work = Path(tmp)
        model = args.model or warm_start(work)
        common = [f"model.path={model}", f"env.id={ENV_ID}", f"env.kwargs.median={args.median}",
                  f"env.kwargs.tail={args.tail}", f"trainer.steps={steps}", f"eval.episodes={episodes}",
                  "checkpoint.every=0", *args.set]
        merged = json.loads(args.merge.read_text())["runs"] if args.merge else {}
        plan = [(f"{name}_ratio_{ratio}", [f"trainer.async_ratio={ratio}", *overrides])
                for ratio in ratios for name, overrides in CORRECTIONS.items()]
        plan += [(f"{name}_ratio_2", ["trainer.async_ratio=2", *overrides]) for name, overrides in CARRY.items()]
        plan = [(name, overrides) for name, overrides in plan if args.arms is None or name in args.arms]
        arms = {name: runs for name, runs in merged.items() if name not in dict(plan)}
        for seed in args.seeds:
            for name, overrides in plan:
                config = load_config(TrainConfig, CONFIGS / "quickstart.yaml",
                                     [*common, f"trainer.seed={seed}", f"output_dir={work / f'{name}-{seed}'}",
                                      *overrides])
                arms.setdefault(name, []).append(_arm(config))
                print(f"{name} seed {seed}: {arms[name][-1]}", file=sys.stderr, flush=True)
    report = _report(arms, sorted({int(name.rsplit("_", 1)[1]) for name in arms if name.startswith("tis_")}))
    report["params"] = {"steps": steps, "eval_episodes": episodes, "seeds": args.seeds, "median": args.median,
                        "tail": args.tail, "overrides": args.set, "env": ENV_ID, "vcpo": VCPO, "carry": CARRY}
    report["machine"] = machine("torch", load_after=load_average())
    write_result(report, args.out)


def _arm(config: TrainConfig) -> dict[str, Any]:
    started = time.perf_counter()
    result = train(config)
    steps = [r for r in read_metrics(config.run_dir) if r.get("time/step_seconds") is not None]
    train_seconds = sum(r["time/step_seconds"] for r in steps)
    ess = [r["train/ess_ratio"] for r in steps if r.get("train/ess_ratio") is not None]
    last = steps[-1]
    return {
        "train_seconds": round(train_seconds, 1),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "trajectories": len(steps) * config.batch_size,
        "trajectories_per_second": round(len(steps) * config.batch_size / train_seconds, 3),
        "rollout_trajectories_per_second": round(last["rollout/trajectories_per_second"], 3),
        "success_before": result.success_before,
        "success_after": result.success_after,
        "ess_ratio_mean": round(sum(ess) / len(ess), 4) if ess else None,
        "ess_ratio_min": round(min(ess), 4) if ess else None,
        "staleness_mean": round(sum(r["train/staleness_mean"] for r in steps) / len(steps), 3),
        "dropped_stale": last.get("rollout/dropped_stale", last.get("rollout/dropped", 0)),
        "cancelled": last.get("rollout/cancelled", 0),
        "carried": last.get("rollout/carried", 0),
        "carried_tokens": last.get("rollout/carried_tokens", 0),
        "carry_buffer_max": last.get("rollout/carry_buffer_peak", 0),
        "carry_paused_seconds": last.get("rollout/carry_paused_seconds", 0.0),
        "wait_fraction": round(sum(r["time/wait_seconds"] for r in steps) / train_seconds, 3),
    }


def _mean(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [run[key] for run in runs if run.get(key) is not None]
    return round(sum(values) / len(values), 4) if values else None


def _report(arms: dict[str, list[dict[str, Any]]], ratios: list[int]) -> dict[str, Any]:
    """Each arm's runs and means, the speedups against the synchronous TIS arm, and the goals' verdicts."""
    keys = ("train_seconds", "trajectories_per_second", "rollout_trajectories_per_second", "success_after",
            "ess_ratio_mean", "ess_ratio_min", "staleness_mean", "dropped_stale", "carried_tokens",
            "carry_buffer_max", "carry_paused_seconds")
    means = {name: {key: _mean(runs, key) for key in keys} for name, runs in arms.items()}
    sync = means["tis_ratio_0"]
    for values in means.values():
        values["speedup_vs_sync"] = round(sync["train_seconds"] / values["train_seconds"], 3)
        values["success_gap_points"] = round(100 * abs(values["success_after"] - sync["success_after"]), 1)
    lead = {ratio: round(100 * (means[f"vcpo_ratio_{ratio}"]["success_after"]
                                - means[f"tis_ratio_{ratio}"]["success_after"]), 1) for ratio in ratios}
    carry = round(means["carry_over_ratio_2"]["rollout_trajectories_per_second"]
                  / means["cancel_ratio_2"]["rollout_trajectories_per_second"], 3)
    stale = means.get("vcpo_ratio_8")
    verdicts = {
        "vcpo_8_fast_and_as_good": stale is not None and stale["speedup_vs_sync"] >= GOAL["speedup_vs_sync_vcpo_8"]
        and stale["success_gap_points"] <= GOAL["success_gap_points"],
        "vcpo_lead_grows_with_staleness": all(lead[a] <= lead[b] for a, b in itertools.pairwise(ratios)),
        "carry_over_faster": carry >= GOAL["carry_over_rollout_speedup"],
    }
    return {"benchmark": "staleness", "arms": means, "runs": arms, "vcpo_lead_points": lead,
            "carry_over_rollout_speedup": carry, "goal": GOAL, "verdicts": verdicts,
            "meets_goal": all(verdicts.values())}


if __name__ == "__main__":
    main()
