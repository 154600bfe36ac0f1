"""RollMux on this machine: synchronous quickstart-shaped jobs run solo (one after the other) and multiplexed (one
co-execution group), on a loopback Ray cluster whose rollout pool is pinned to core 0 and training pool to core 1
(each node's processes inherit its core), through ``agentgym mux``'s scheduler and job actors.

The jobs: ``heavy0``/``heavy1`` (the quickstart as it is, seeds 0 and 1: its rollout takes about 2.5 times its
training here), ``even0``/``even1`` (``--epochs`` PPO passes over each batch lengthen the training phase to about
the rollout's; each move of the lake may take ``--move-seconds`` more to even them out). Three shapes multiplex
them: ``balanced`` (the two even jobs), ``rollout_heavy`` (the two heavy ones) and ``trio`` (both heavy jobs and
``even0``); each job runs solo once and serves every shape it is in.

Per shape it reports ``steps_per_core_hour_ratio`` (the solo runs' summed training spans over the multiplexed
span: both arms use the same two cores), each job's slowdown (its multiplexed step time over its solo one) beside
the slowdown admission planned, the mean switch cost per phase (engine wake/sleep and learner onload/offload, warm
in host memory) against a cold start (loading the engine and the learner from disk), and each job's final
held-out success against its solo run. Spans run from a job's first rollout turn to its last training turn (no
evaluation runs inside: the final checkpoints are scored afterwards). Each run also samples how busy each core is
(``/proc/stat``): a solo job's ``cross_pool`` share is the other pool's core busy during its phases (the work of a
phase that lands on the other pool, which a multiplexed partner's phase there then shares).

Then admission on the measured profiles, each job's SLO at ``--tight-slo``: the two heavy jobs (expected refused:
each slows the other's rollout) and ``heavy0`` with ``mirror0``, a job that states ``heavy0``'s measured phases
the other way round (complementary: each one's rollout fits in the other's training; expected admitted).

Shapes not run (``--shapes``) keep their entries in ``--out``, with the load they ran under. Writes
``benchmarks/results/mux.json`` with the solo runs' per-step phase times (a step's rollout from its turn's start
until its batch is whole, the permit itself held until early release; its training), which the cluster
simulator's validation reads (``python -m benchmarks.sim validate``).
Goals: balanced ratio >= 1.6 with per-job slowdown <= 1.25; rollout-heavy ratio >= 1.3; both admission checks.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
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

from agentgym.config import load_config
from agentgym.trainers import TrainConfig
from agentgym.trainers.checkpoint import latest_checkpoint
from benchmarks.perf.report import RESULTS, load_average, machine, write_result
from benchmarks.perf.warm_start import CONFIGS, warm_start

ROOT = Path(__file__).resolve().parents[2]

GOAL = {"balanced": {"steps_per_core_hour_ratio": 1.6, "slowdown_max": 1.25},
        "rollout_heavy": {"steps_per_core_hour_ratio": 1.3}}
TIMED_LAKE = "benchmarks.perf.mux_lake:perf/TimedLake-v0"
SHAPES = {"balanced": ("even0", "even1"), "rollout_heavy": ("heavy0", "heavy1"), "trio": ("heavy0", "heavy1", "even0")}
ADMISSION = {"rollout_heavy_pair": (("heavy0", "heavy1"), False), "complementary_pair": (("heavy0", "mirror0"), True)}
"""Each admission check: the jobs registered in turn, and whether the last should be admitted. A ``mirror`` job
is not run: it gives the phase times of the job of its number measured the other way round."""
SLO = {"trio": 2.5}
"""The jobs' SLO in a shape where the default (2) would refuse the last: three rollouts a turn take about twice a
heavy job's solo step."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="an SFT-warm-started model folder (default: build and SFT one)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=3, help="the even jobs' passes over each batch")
    parser.add_argument("--move-seconds", type=float, default=0.0, help="the even jobs' extra seconds per move")
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES),
                        help="the shapes to measure (the others keep their entries in --out)")
    parser.add_argument("--tight-slo", type=float, default=1.25, help="every job's SLO in the admission checks")
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
        shapes, solo = {}, {}
        with _pinned_cluster() as affinity:
            for shape in args.shapes:
                before = load_average()
                shapes[shape] = _shape(shape, solo, model, work, args)
                shapes[shape]["load"] = {"before": before, "after": load_average()}
                print(f"{shape}: {json.dumps(shapes[shape]['summary'])}", file=sys.stderr)
            admission = _admission(solo, model, work, args)
        for shape, result in shapes.items():
            result["held_out"] = {arm: {job: _held_out(run, args.episodes, str(work / "eval" / Path(run).name))
                                        for job, run in runs.items()} for arm, runs in result.pop("run_dirs").items()}
    for shape, result in shapes.items():
        summary = result["summary"]
        summary["switch_vs_cold"] = round(cold / summary["switch_seconds_mean"], 1) if summary["switch_seconds_mean"] else None
        if shape in GOAL:
            goal = GOAL[shape]
            summary["meets_goal"] = summary["steps_per_core_hour_ratio"] >= goal["steps_per_core_hour_ratio"] and \
                summary["slowdown_max"] <= goal.get("slowdown_max", float("inf"))
    shapes = {**_kept(args.out, set(shapes)), **shapes}
    report: dict[str, Any] = {"benchmark": "mux", **{s: r["summary"] for s, r in shapes.items()},
                              "shapes": shapes, "admission": admission, "cold_start_seconds": cold, "pinned": affinity,
                              "params": {"steps": args.steps, "slo": SLO, "epochs": args.epochs, "move_seconds": args.move_seconds,
                                         "tight_slo": args.tight_slo, "episodes": args.episodes,
                                         "overrides": args.set, "jobs": {job: _job(job, args) for job in solo}},
                              "goal": {**GOAL, "admission": {c: "admitted" if a else "refused"
                                                             for c, (_, a) in ADMISSION.items()}},
                              "wall_seconds": round(time.perf_counter() - started, 1),
                              "machine": machine("torch", "ray", load_before=load_before, load_after=load_average())}
    write_result(report, args.out)


def _kept(out: Path, run: set[str]) -> dict[str, Any]:
    """The shapes of an earlier result at ``out`` that this run did not measure again, each with the load it ran
    under (the file's where the shape does not say)."""
    if not out.exists():
        return {}
    earlier = json.loads(out.read_text())
    load = earlier.get("machine", {})
    return {shape: {"load": {"before": load.get("load_before"), "after": load.get("load_after")}, **entry}
            for shape, entry in earlier.get("shapes", {}).items() if shape in SHAPES and shape not in run}


def _job(job: str, args: argparse.Namespace) -> tuple[int, list[str]]:
    """Job ``job``'s seed and overrides of quickstart.yaml."""
    if job.startswith("heavy"):
        return int(job[-1]), []
    if job.startswith("even"):
        timed = [f"env.id={TIMED_LAKE}", f"env.kwargs.median={args.move_seconds}"] if args.move_seconds else []
        return int(job[-1]), [f"algorithm.epochs={args.epochs}", *timed]
    raise ValueError(f"no job {job!r}")


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


def _shape(shape: str, solo: dict[str, dict[str, Any]], model: Path, work: Path,
           args: argparse.Namespace) -> dict[str, Any]:
    """The jobs of ``shape`` multiplexed, each first run solo where ``solo`` (by job) does not hold it yet."""
    jobs = SHAPES[shape]
    for job in jobs:
        if job not in solo:
            solo[job] = _run([_config(job, "solo", model, work, args)])
    muxed = _run([_config(job, f"mux-{shape}", model, work, args, profile_from=solo[job]["run_dir"],
                          slo=SLO.get(shape)) for job in jobs])
    solo_span = sum(solo[job]["span_seconds"] for job in jobs)
    slowdowns = {job: round(muxed["jobs"][job]["step_seconds"] / solo[job]["jobs"][job]["step_seconds"], 3)
                 for job in jobs}
    switches = [s for run in (*(solo[job] for job in jobs), muxed) for job in run["jobs"].values()
                for s in job["switch_seconds"]]
    summary = {"steps_per_core_hour_ratio": round(solo_span / muxed["span_seconds"], 3),
               "solo_span_seconds": round(solo_span, 1), "mux_span_seconds": round(muxed["span_seconds"], 1),
               "slowdown": slowdowns, "slowdown_max": max(slowdowns.values()),
               "planned_slowdown": {job: muxed["jobs"][job]["planned_slowdown"] for job in jobs},
               "switch_seconds_mean": round(sum(switches) / len(switches), 4) if switches else 0.0,
               "phase_seconds_solo": {job: solo[job]["jobs"][job]["phase_means"] for job in jobs}}
    return {"summary": summary, "solo": {job: solo[job] for job in jobs}, "multiplexed": muxed,
            "solo_phases": {job: solo[job]["jobs"][job]["phases"] for job in jobs},
            "run_dirs": {"solo": {job: solo[job]["run_dir"] for job in jobs},
                         "mux": {job: muxed["jobs"][job]["run_dir"] for job in jobs}}}


def _config(job: str, arm: str, model: Path, work: Path, args: argparse.Namespace, *,
            profile_from: str | None = None, slo: float | None = None) -> TrainConfig:
    name = f"{arm}-{job}"
    seed, extra = _job(job, args)
    profile = [f"mux.profile_from={profile_from}"] if profile_from else ["mux.rollout_seconds=1", "mux.train_seconds=1"]
    overrides = [f"model.path={model}", f"output_dir={work / name}", f"trainer.steps={args.steps}",
                 f"trainer.seed={seed}", "trainer.async_ratio=0", "trainer.group_order=handout", "eval.episodes=0",
                 "checkpoint.every=0", "mux.address=auto", f"mux.job={name}", *profile, *extra, *args.set,
                 *([f"mux.slo={slo}"] if slo is not None else [])]
    return load_config(TrainConfig, CONFIGS / "quickstart.yaml", overrides)


def _admission(solo: dict[str, dict[str, Any]], model: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Each :data:`ADMISSION` check on the scheduler: its jobs, profiled from their solo runs (each first run solo
    where missing) with the tight SLO, registered in turn; whether the last was admitted, the slowdowns admission
    planned for the group, or its reason to refuse. Every job leaves again."""
    import ray

    from agentgym.trainers.mux.client import MuxClient, Refused, scheduler_actor
    from agentgym.trainers.mux.job import job_profile

    checks = {}
    for check, (jobs, expected) in ADMISSION.items():
        profiles = {}
        for job in jobs:
            measured = job.replace("mirror", "heavy")
            if measured not in solo:
                solo[measured] = _run([_config(measured, "solo", model, work, args)])
            config = _config(measured, f"admit-{check}", model, work, args, profile_from=solo[measured]["run_dir"],
                             slo=args.tight_slo)
            profile = job_profile(config)
            profiles[job] = profile if job == measured else dataclasses.replace(
                profile, rollout=profile.train, train=profile.rollout, variability=profile.variability[::-1])
        clients = [MuxClient(f"admit-{check}-{job}", profile, steps=args.steps, run_dir=str(work / check / job))
                   for job, profile in profiles.items()]
        outcome: dict[str, Any] = {"jobs": list(jobs), "slo": args.tight_slo, "expected_admitted": expected,
                                   "profiles": {job: {"rollout": round(c.profile.rollout, 3),
                                                      "train": round(c.profile.train, 3)}
                                                for job, c in zip(jobs, clients, strict=True)}}
        try:
            for client in clients:
                client.register(heartbeat=False)
            status = ray.get(scheduler_actor().status.remote())
            outcome.update(admitted=True, planned_slowdown={
                j["job"].removeprefix(f"admit-{check}-"): round(j["planned_slowdown"], 3)
                for j in status["jobs"] if j["job"].startswith(f"admit-{check}-")})
        except Refused as refused:
            outcome.update(admitted=False, reason=str(refused))
        for client in clients:
            client.close("admission check")
        outcome["as_expected"] = outcome["admitted"] == expected
        checks[check] = outcome
        print(f"admission {check}: {json.dumps(outcome)}", file=sys.stderr)
    return checks


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
    planned: dict[str, float] = {}
    samples = [_cores_busy()]
    while True:
        status = ray.get(scheduler_actor().status.remote())
        running = {j["job"]: j["planned_slowdown"] for j in status["jobs"] if j["job"] in names}
        if len(running) == len(names):  # all in the group: what admission planned for each with the others
            planned = running
        if set(names) <= set(status["left"]) and not set(names) & {j["job"] for j in status["jobs"]}:
            break
        for _ in range(4):
            time.sleep(0.25)
            samples.append(_cores_busy())
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
            "step_seconds": round(span / len(trains), 3), "planned_slowdown": round(planned.get(name, 1.0), 3),
            "phases": [{"rollout": round(r, 3), "train": round(t, 3), "rollout_held": round(h, 3)}
                       for r, t, h in zip(rollouts, trains, held, strict=True)],
            "phase_means": {"rollout": round(sum(rollouts) / len(rollouts), 3), "train": round(sum(trains) / len(trains), 3)},
            "switch_seconds": [round(r["mux/switch_seconds"], 4) for r in records],
            "cross_pool": {"rollout_core_in_train": _busy_share(samples, 1, trained),
                           "train_core_in_rollout": _busy_share(samples, 2, list(zip(starts, (t for t, _ in trained),
                                                                                     strict=True)))},
            "waits": {"rollout": round(sum(r["mux/rollout_wait_seconds"] for r in records), 2),
                      "train": round(sum(r["mux/train_wait_seconds"] for r in records), 2)}}
    span = max(p["end"] for p in phases) - min(p["start"] for p in phases)
    result: dict[str, Any] = {"span_seconds": round(span, 2), "jobs": jobs,
                              "switch_seconds": _mean([s for j in jobs.values() for s in j["switch_seconds"]])}
    if len(configs) == 1:
        result["run_dir"] = str(configs[0].run_dir)
    return result


def _cores_busy() -> tuple[float, float, float]:
    """The time, and the seconds cores 0 (the rollout pool) and 1 (training) have been busy since boot."""
    ticks = os.sysconf("SC_CLK_TCK")
    busy = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name in ("cpu0", "cpu1"):
            counts = [int(f) for f in fields]
            busy[name] = (sum(counts) - counts[3] - counts[4]) / ticks  # all but idle and iowait
    return time.time(), busy["cpu0"], busy["cpu1"]


def _busy_share(samples: list[tuple[float, float, float]], core: int, spans: list[tuple[float, float]]) -> float:
    """The share of ``spans`` (start, end) during which core ``core`` (1: core 0, 2: core 1, the samples'
    columns) was busy, from the samples interpolated at each span's ends."""
    import numpy as np

    at = np.array([s[0] for s in samples])
    busy = np.array([s[core] for s in samples])
    total = sum(end - start for start, end in spans)
    worked = sum(float(np.interp(end, at, busy) - np.interp(start, at, busy)) for start, end in spans)
    return round(worked / total, 3) if total > 0 else 0.0


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _cold_start(model: Path) -> float:
    """Seconds to bring a job's engine and learner up from disk in a fresh process (what a warm switch avoids)."""
    script = ("import time, torch; t = time.perf_counter(); from transformers import AutoModelForCausalLM; "
              f"from agentgym.inference.torch.engine import TorchEngine; e = TorchEngine({str(model)!r}, threads=1); "
              f"m = AutoModelForCausalLM.from_pretrained({str(model)!r}); "
              "torch.optim.AdamW(m.parameters()); print(time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True, cwd=ROOT)
    return round(float(done.stdout.strip().splitlines()[-1]), 3)


@functools.cache
def _held_out(run_dir: str, episodes: int, out: str) -> float:
    """The final checkpoint's held-out success on the quickstart's test lakes (as the quickstart scores them), once
    a run (a solo run serves several shapes)."""
    checkpoint = latest_checkpoint(Path(run_dir))
    assert checkpoint is not None, run_dir
    done = subprocess.run([sys.executable, "-m", "agentgym", "eval", "games/FrozenLake-v0", "--engine", "torch",
                           "--model", str(checkpoint / "model"), "--episodes", str(episodes), "--difficulty", "easy",
                           "--env-arg", "parser=pythonic", "--env-arg", "describe=true", "--max-tokens", "12",
                           "--concurrency", "64", "--out", str(out), "--json"],
                          check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])["success_rate"]


if __name__ == "__main__":
    main()
