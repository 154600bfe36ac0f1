"""The ray backend against the local one, on a local Ray that this script starts and stops.

(1) overhead: trajectories/s of the local backend over the ray backend with one env worker, on the long-tail env
    (steps sleep a log-normal time) with a scripted policy, so what differs is only where episodes play;
    ``overhead_ratio`` = local / ray (goal <= 1.15).
(2) CPU-bound scaling: an env whose every step generates and solves Sokoban levels in Python (``SolverEnv``),
    played by its oracle, with 1 and 2 env workers (one CPU each); the local backend is shown for reference: one
    process and one GIL cannot use the second core. ``scaling`` = 2 workers / 1 worker (goal >= 1.6).
(3) the same env played by the tiny model, with an engine replica per env worker (1+1 against 2+2), with the
    engines' busy fraction.

Writes ``benchmarks/results/ray_scaling.json``; the last line printed is that JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ray

import agentgym
from agentgym import OraclePolicy, RandomPolicy, TaskSet
from agentgym.cluster.backend import RayBackend, worker_env
from agentgym.cluster.config import RayConfig
from agentgym.inference import SamplingParams
from agentgym.models import init_model
from agentgym.policies.lm import LMPolicy
from agentgym.rollout import RolloutConfig, RolloutScheduler
from agentgym.rollout.iterate import drain
from agentgym.rollout.runner import Backend, LocalBackend
from benchmarks.perf.report import RESULTS, machine, write_result

LONG_TAIL, SOLVER = "perf/LongTail-v0", "perf/Solver-v0"
GOAL = {"overhead_ratio": 1.15, "scaling": 1.6}


async def throughput(env_id: str, policy: Any, episodes: int, concurrency: int, backend: Backend,
                     env_kwargs: dict[str, Any], engine: Any = None) -> dict[str, Any]:
    """Trajectories/s of ``episodes`` episodes (after a warm-up lap that starts the workers and their envs)."""
    for count, timed in ((concurrency, False), (episodes, True)):
        tasks = TaskSet.generate(env_id, count, split="test" if timed else "train")
        scheduler = RolloutScheduler(env_id, policy, RolloutConfig(concurrency=concurrency), env_kwargs=env_kwargs,
                                     backend=backend, engine=engine)
        busy_before = (await engine.refresh_stats()).busy_seconds if engine is not None else 0.0
        started = time.perf_counter()
        async with asyncio.TaskGroup() as group:
            group.create_task(drain(scheduler))
            metrics = await scheduler.run(tasks)
        wall = time.perf_counter() - started
    figures = {"trajectories": metrics.finished, "errors": metrics.errored, "wall_seconds": round(wall, 3),
               "trajectories_per_second": round(metrics.finished / wall, 3)}
    if engine is not None:  # replicas' busy seconds, averaged over them
        figures["engine_busy"] = round(((await engine.refresh_stats()).busy_seconds - busy_before) / wall, 3)
    return figures


def on_ray(workers: int, cpus: float, replicas: int = 0) -> RayBackend:
    return RayBackend(RayConfig(env_workers=workers, worker_cpus=cpus, engine_replicas=max(replicas, 1),
                                replica_cpus=cpus))


async def arm(name: str, backend: Backend, *args: Any, **kwargs: Any) -> dict[str, Any]:
    try:
        figures = await throughput(*args, backend=backend, **kwargs)
    finally:
        if isinstance(backend, RayBackend):
            backend.close()
    print(f"{name:>28}: {figures['trajectories_per_second']:.2f} trajectories/s"
          + (f", engine busy {figures['engine_busy']:.2f}" if "engine_busy" in figures else ""), file=sys.stderr)
    return figures


async def model_arm(name: str, workers: int, model_dir: Path, episodes: int, concurrency: int,
                    env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The tiny model on the CPU-bound env with ``workers`` env workers and as many engine replicas."""
    backend = on_ray(workers, 0.5, replicas=workers)
    engine = backend.engine("torch", model_dir, threads=1, max_batch_size=concurrency)
    try:
        policy = LMPolicy(engine, SamplingParams(max_tokens=16), max_context=2048)
        return await arm(name, backend, SOLVER, policy, episodes, concurrency, env_kwargs=env_kwargs, engine=engine)
    finally:
        await engine.close()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    tail = {"median": 0.05, "tail": 20.0, "max_turns": 4}
    solver = {"levels": args.levels, "max_turns": 4}
    results: dict[str, Any] = {}
    results["long_tail_local"] = await arm("long tail, local", LocalBackend(), LONG_TAIL, RandomPolicy(),
                                           args.episodes, args.concurrency, env_kwargs=tail)
    results["long_tail_ray_1"] = await arm("long tail, ray 1 worker", on_ray(1, 1.0), LONG_TAIL, RandomPolicy(),
                                           args.episodes, args.concurrency, env_kwargs=tail)
    for name, backend in (("local", LocalBackend()), ("ray_1", on_ray(1, 1.0)), ("ray_2", on_ray(2, 1.0))):
        results[f"solver_{name}"] = await arm(f"cpu-bound, {name.replace('_', ' ')} worker(s)", backend, SOLVER,
                                              OraclePolicy(), args.solver_episodes, args.concurrency, env_kwargs=solver)
    with tempfile.TemporaryDirectory(prefix="agentgym-bench-") as scratch:
        model_dir = init_model(Path(scratch) / "tiny", "tiny", seed=0)
        for workers in (1, 2):
            results[f"model_ray_{workers}"] = await model_arm(f"model, {workers} worker(s) + replica(s)", workers,
                                                              model_dir, args.solver_episodes, args.concurrency, solver)
    overhead = results["long_tail_local"]["trajectories_per_second"] / results["long_tail_ray_1"]["trajectories_per_second"]
    scaling = results["solver_ray_2"]["trajectories_per_second"] / results["solver_ray_1"]["trajectories_per_second"]
    model_scaling = results["model_ray_2"]["trajectories_per_second"] / results["model_ray_1"]["trajectories_per_second"]
    return {
        "benchmark": "ray_scaling",
        "overhead_ratio": round(overhead, 3),
        "scaling": round(scaling, 3),
        "model_scaling": round(model_scaling, 3),
        "goal": GOAL,
        "met": overhead <= GOAL["overhead_ratio"] and scaling >= GOAL["scaling"],
        **results,
        "parameters": {k: v for k, v in vars(args).items() if k != "out"},
        "machine": machine("ray", "agentgym"),
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Fewer episodes (about two minutes).")
    parser.add_argument("--episodes", type=int, default=512, help="Long-tail episodes per arm.")
    parser.add_argument("--solver-episodes", type=int, default=96, help="CPU-bound episodes per arm.")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--levels", type=int, default=3, help="Sokoban levels generated and solved per step.")
    parser.add_argument("--out", type=Path, default=RESULTS / "ray_scaling.json")
    args = parser.parse_args()
    if args.quick:
        args.episodes, args.solver_episodes = 128, 32
    return args


if __name__ == "__main__":
    arguments = parse_args()
    agentgym.register(LONG_TAIL, "benchmarks.perf.long_tail_env:LongTailEnv")
    agentgym.register(SOLVER, "benchmarks.perf.perf_envs:SolverEnv")
    ray.init(include_dashboard=False, logging_level=logging.WARNING, runtime_env={"env_vars": worker_env()})
    try:
        result = asyncio.run(main(arguments))
    finally:
        ray.shutdown()
    print(f"overhead {result['overhead_ratio']:.2f}x (goal <= {GOAL['overhead_ratio']}), CPU-bound scaling "
          f"{result['scaling']:.2f}x at 2 workers (goal >= {GOAL['scaling']}), with engine replicas "
          f"{result['model_scaling']:.2f}x")
    write_result(result, arguments.out)
