"""RollMux on this machine: two synchronous quickstart-shaped jobs run solo (one after the other) and multiplexed
(one co-execution group), on a loopback Ray cluster whose rollout pool is pinned to core 0 and training pool to
core 1 (each node's processes inherit its core), through ``agentgym mux``'s scheduler and job actors.

Two job shapes: ``rollout_heavy`` (the quickstart as it is: its rollout takes about 2.5 times its training here)
and ``balanced`` (``--epochs`` PPO passes over each batch lengthen the training phase to about the rollout's; each
move of the lake may take ``--move-seconds`` more to even them out). Per shape it reports
``steps_per_core_hour_ratio`` (the solo runs' summed training spans over the multiplexed span: both arms use the
same two cores), each job's slowdown (its multiplexed step time over its solo one), the mean switch cost per
phase (engine wake/sleep and learner onload/offload, warm in host memory) against a cold start (loading the
engine and the learner from disk), and each job's final held-out success against its solo run. Spans run from a
job's first rollout turn to its last training turn (no evaluation runs inside: the final checkpoints are scored
afterwards). Writes ``benchmarks/results/mux.json`` with the solo runs' per-step phase times (a step's rollout
from its turn's start until its batch is whole, the permit itself held until early release; its training), which
the cluster simulator's validation reads (``python -m benchmarks.sim validate``).
Goals: balanced ratio >= 1.6 with per-job slowdown <= 1.25; rollout-heavy ratio >= 1.3.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from report import RESULTS, load_average, machine, write_result
from warm_start import CONFIGS, warm_start

from agentgym.config import load_config
from agentgym.trainers import TrainConfig
from agentgym.trainers.checkpoint import latest_checkpoint

GOAL = {"balanced": {"steps_per_core_hour_ratio": 1.6, "slowdown_max": 1.25},
        "rollout_heavy": {"steps_per_core_hour_ratio": 1.3}}
TIMED_LAKE = "benchmarks.perf.mux_lake:perf/TimedLake-v0"
SEEDS = (0, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="an SFT-warm-started model folder (default: build and SFT one)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=3, help="the balanced shape's passes over each batch")
    parser.add_argument("--move-seconds", type=float, default=0.0, help="the balanced shape's extra seconds per move")
    parser.add_argument("--shapes", nargs="+", default=["balanced", "rollout_heavy"], choices=sorted(GOAL))
    parser.add_argument("--episodes", type=int, default=200, help="held-out tasks scored per final checkpoint")
    parser.add_argument("--set", nargs="*", default=[], help="further overrides of quickstart.yaml (a.b=value)")
    parser.add_argument("--out", type=Path, default=RESULTS / "mux.json")
    args = parser.parse_args()
    load_before = load_average()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="agentgym-mux-") as tmp:
        work = Path(tmp)
        model = args.model or warm_start(work)
        cold = _cold_start(model)
        shapes = {}
        with _pinned_cluster() as affinity:
            for shape in args.shapes:
                shapes[shape] = _shape(shape, model, work, args)
                print(f"{shape}: {json.dumps(shapes[shape]['summary'])}", file=sys.stderr)
        for shape, result in shapes.items():
            result["held_out"] = {arm: {job: _held_out(Path(run), args.episodes, work / "eval" / shape / arm / job)
                                        for job, run in runs.items()} for arm, runs in result.pop("run_dirs").items()}
    report: dict[str, Any] = {"benchmark": "mux", **{s: r["summary"] for s, r in shapes.items()},
                              "shapes": shapes, "cold_start_seconds": cold, "pinned": affinity,
                              "params": {"steps": args.steps, "epochs": args.epochs, "move_seconds": args.move_seconds,
                                         "episodes": args.episodes, "overrides": args.set, "seeds": SEEDS},
                              "goal": GOAL, "wall_seconds": round(time.perf_counter() - started, 1),
                              "machine": machine("torch", "ray", load_before=load_before, load_after=load_average())}
    for shape, result in shapes.items():
        summary, goal = result["summary"], GOAL[shape]
        summary["meets_goal"] = summary["steps_per_core_hour_ratio"] >= goal["steps_per_core_hour_ratio"] and \
            summary["slowdown_max"] <= goal.get("slowdown_max", float("inf"))
        summary["switch_vs_cold"] = round(cold / summary["switch_seconds_mean"], 1) if summary["switch_seconds_mean"] else None
    write_result(report, args.out)


@contextlib.contextmanager
def _pinned_cluster() -> Iterator[dict[str, list[int]]]:
    """A two-node Ray on loopback: the head (``rollout_pool``) on core 0, the other node (``train_pool``) on core 1,
    one logical CPU each, and the mux scheduler on it. Yields the cores a task on each pool runs on."""
    import ray
    from ray.cluster_utils import Cluster

    from agentgym.cluster.backend import worker_env
    from agentgym.trainers.mux.scheduler import NAME, NAMESPACE, MuxScheduler

    everywhere = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {0})  # the node's processes inherit this process's cores as they start
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"rollout_pool": 1},
                                                                "include_dashboard": False})
        os.sched_setaffinity(0, {1})
        cluster.add_node(num_cpus=1, resources={"train_pool": 1})
    finally:
        os.sched_setaffinity(0, everywhere)
    try:
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level=logging.WARNING, runtime_env={"env_vars": worker_env()})
        cores = ray.remote(num_cpus=0)(lambda: sorted(os.sched_getaffinity(0)))
        affinity = {pool: ray.get(cores.options(resources={pool: 0.001}).remote()) for pool in ("rollout_pool",
                                                                                                  "train_pool")}
        scheduler = ray.remote(MuxScheduler).options(name=NAME, namespace=NAMESPACE, lifetime="detached",
                                                     num_cpus=0).remote()
        ray.get(scheduler.status.remote())
        yield affinity
        ray.kill(scheduler)
    finally:
        ray.shutdown()
        cluster.shutdown()


def _shape(shape: str, model: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Both jobs of ``shape`` solo, one after the other, then multiplexed."""
    solo = {f"seed{seed}": _run([_config(shape, "solo", seed, model, work, args)]) for seed in SEEDS}
    profiled = [_config(shape, "mux", seed, model, work, args, profile_from=solo[f"seed{seed}"]["run_dir"])
                for seed in SEEDS]
    muxed = _run(profiled)
    solo_span = sum(run["span_seconds"] for run in solo.values())
    slowdowns = {job: round(muxed["jobs"][job]["step_seconds"] / solo[job]["jobs"][job]["step_seconds"], 3)
                 for job in solo}
    switches = [s for run in (*solo.values(), muxed) for job in run["jobs"].values() for s in job["switch_seconds"]]
    summary = {"steps_per_core_hour_ratio": round(solo_span / muxed["span_seconds"], 3),
               "solo_span_seconds": round(solo_span, 1), "mux_span_seconds": round(muxed["span_seconds"], 1),
               "slowdown": slowdowns, "slowdown_max": max(slowdowns.values()),
               "switch_seconds_mean": round(sum(switches) / len(switches), 4) if switches else 0.0,
               "phase_seconds_solo": {job: run["jobs"][job]["phase_means"] for job, run in solo.items()}}
    return {"summary": summary, "solo": solo, "multiplexed": muxed,
            "solo_phases": {job: run["jobs"][job]["phases"] for job, run in solo.items()},
            "run_dirs": {"solo": {job: run["run_dir"] for job, run in solo.items()},
                         "mux": {job: muxed["jobs"][job]["run_dir"] for job in solo}}}


def _config(shape: str, arm: str, seed: int, model: Path, work: Path, args: argparse.Namespace, *,
            profile_from: str | None = None) -> TrainConfig:
    name = f"{shape}-{arm}-seed{seed}"
    env = [f"algorithm.epochs={args.epochs}", *([f"env.id={TIMED_LAKE}", f"env.kwargs.median={args.move_seconds}"]
                                                 if args.move_seconds else [])] if shape == "balanced" else []
    profile = [f"mux.profile_from={profile_from}"] if profile_from else ["mux.rollout_seconds=1", "mux.train_seconds=1"]
    overrides = [f"model.path={model}", f"output_dir={work / name}", f"trainer.steps={args.steps}",
                 f"trainer.seed={seed}", "trainer.async_ratio=0", "trainer.group_order=handout", "eval.episodes=0",
                 "checkpoint.every=0", "mux.address=auto", f"mux.job={name}", *profile, *env, *args.set]
    return load_config(TrainConfig, CONFIGS / "quickstart.yaml", overrides)


def _run(configs: list[TrainConfig]) -> dict[str, Any]:
    """Submit ``configs`` together and wait for them to end; their spans, per-step phases and switch costs."""
    import ray

    from agentgym.metrics_log import read_metrics
    from agentgym.trainers.mux.client import scheduler_actor
    from agentgym.trainers.mux.submit import submit

    names = {}
    for config in configs:
        name, _, _ = submit(config)
        names[name] = config
    while True:
        status = ray.get(scheduler_actor().status.remote())
        if set(names) <= set(status["left"]) and not set(names) & {j["job"] for j in status["jobs"]}:
            break
        time.sleep(1)
    failed = {name: status["left"][name] for name in names if status["left"][name] != "finished"}
    if failed:
        raise RuntimeError(f"jobs failed: {failed}")
    phases = [p for p in status["phases"] if p["job"] in names]
    jobs = {}
    for name, config in names.items():
        mine = [p for p in phases if p["job"] == name]
        starts = [p["start"] for p in mine if p["pool"] == "rollout"]
        held = [p["end"] - p["start"] for p in mine if p["pool"] == "rollout"]
        trained = [(p["start"], p["end"]) for p in mine if p["pool"] == "train"]
        rollouts = [train_start - start for start, (train_start, _) in zip(starts, trained, strict=True)]
        trains = [end - start for start, end in trained]
        span = max(p["end"] for p in mine) - min(p["start"] for p in mine)
        records = [r for r in read_metrics(config.run_dir) if "mux/switch_seconds" in r]
        jobs[name.rsplit("-", 1)[1]] = {
            "run_dir": str(config.run_dir), "span_seconds": round(span, 2),
            "step_seconds": round(span / len(trains), 3),
            "phases": [{"rollout": round(r, 3), "train": round(t, 3), "rollout_held": round(h, 3)}
                       for r, t, h in zip(rollouts, trains, held, strict=True)],
            "phase_means": {"rollout": round(sum(rollouts) / len(rollouts), 3), "train": round(sum(trains) / len(trains), 3)},
            "switch_seconds": [round(r["mux/switch_seconds"], 4) for r in records],
            "waits": {"rollout": round(sum(r["mux/rollout_wait_seconds"] for r in records), 2),
                      "train": round(sum(r["mux/train_wait_seconds"] for r in records), 2)}}
    span = max(p["end"] for p in phases) - min(p["start"] for p in phases)
    result: dict[str, Any] = {"span_seconds": round(span, 2), "jobs": jobs,
                              "switch_seconds": _mean([s for j in jobs.values() for s in j["switch_seconds"]])}
    if len(configs) == 1:
        result["run_dir"] = str(configs[0].run_dir)
    return result


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _cold_start(model: Path) -> float:
    """Seconds to bring a job's engine and learner up from disk in a fresh process (what a warm switch avoids)."""
    script = ("import time, torch; t = time.perf_counter(); from transformers import AutoModelForCausalLM; "
              f"from agentgym.inference.torch_engine import TorchEngine; e = TorchEngine({str(model)!r}, threads=1); "
              f"m = AutoModelForCausalLM.from_pretrained({str(model)!r}); "
              "torch.optim.AdamW(m.parameters()); print(time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True, cwd=ROOT)
    return round(float(done.stdout.strip().splitlines()[-1]), 3)


def _held_out(run_dir: Path, episodes: int, out: Path) -> float:
    """The final checkpoint's held-out success on the quickstart's test lakes (as the quickstart scores them)."""
    checkpoint = latest_checkpoint(run_dir)
    assert checkpoint is not None, run_dir
    done = subprocess.run([sys.executable, "-m", "agentgym", "eval", "games/FrozenLake-v0", "--engine", "torch",
                           "--model", str(checkpoint / "model"), "--episodes", str(episodes), "--difficulty", "easy",
                           "--env-arg", "parser=pythonic", "--env-arg", "describe=true", "--max-tokens", "12",
                           "--concurrency", "64", "--out", str(out), "--json"],
                          check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])["success_rate"]


if __name__ == "__main__":
    main()
