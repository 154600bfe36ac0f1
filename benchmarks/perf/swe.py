"""What an SWE episode costs: its start, its grading, episodes per minute, and what the sandboxes take.

- **episode start**: ``reset`` of ``swe/Repos-v0`` with its image's pool warm (a warm sandbox holds the clean
  repository; the start applies the bug and commits the starting point), over every project's instances.
- **grading**: the oracle's fix, then ``submit``, timed: the diff taken, a clean copy from the pool set up, the
  diff applied, ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` run; over every bundled instance (the oracle must resolve
  each one).
- **throughput**: episodes per minute at 8 in flight (``agentgym.evaluate``), the oracle and the random policy; and
  the sandbox layer's overhead: the time the environment waited on it (every command's answer, every sandbox taken
  from a pool), over the commands' own time timed inside the sandbox; and the same without the waits for a sandbox
  (each image's pool starts on its image's first episode, so a short run pays its cold starts).
- **resources**: memory of the running sandboxes sampled during the oracle's run, per episode in flight; each
  image's size and the part of it that is its own (the rest is shared with ``agentgym/swe``).

Goals of the issue: start p50 <= 1.5 s, grading p50 <= 10 s, overhead <= 1.2x. Writes
``benchmarks/results/swe.json`` (the load average beside the figures). Starts the Docker engine if none runs and
builds the images if missing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Self

import agentgym
from agentgym import OraclePolicy, RandomPolicy, Task, TaskSet
from agentgym.envs.swe.instances import load_instances
from agentgym.sandboxes.base import Sandbox
from agentgym.sandboxes.docker_engine import client, ensure_engine
from agentgym.sandboxes.images import build_images, image_names
from agentgym.sandboxes.pool import SandboxPool
from benchmarks.perf.report import RESULTS, load_average, machine, write_result

START_GOAL_S, GRADING_GOAL_S, OVERHEAD_GOAL = 1.5, 10.0, 1.2
ENV_ID = "swe/Repos-v0"


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"p50_s": at(0.5), "p95_s": at(0.95), "max_s": round(ordered[-1], 3), "n": len(ordered)}


class CommandClock:
    """Adds up the wall time the environment waited on the sandbox layer (each command's answer, each sandbox taken
    from a pool) and the commands' own time (``ExecResult.run_seconds``, timed by the server in the container)."""

    def __init__(self) -> None:
        self.wall = self.own = self.acquiring = 0.0
        self.commands = 0
        self._saved: tuple[Any, Any] | None = None

    def __enter__(self) -> Self:
        self._saved = (Sandbox.exec, SandboxPool.acquire)
        real_exec, real_acquire = self._saved
        clock = self

        async def timed_exec(sandbox: Sandbox, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            result = await real_exec(sandbox, *args, **kwargs)
            clock.wall += time.perf_counter() - started
            clock.own += result.run_seconds if result.run_seconds is not None else result.duration
            clock.commands += 1
            return result

        async def timed_acquire(pool: SandboxPool) -> Any:
            started = time.perf_counter()
            sandbox = await real_acquire(pool)
            clock.acquiring += time.perf_counter() - started
            return sandbox

        Sandbox.exec, SandboxPool.acquire = timed_exec, timed_acquire  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._saved is not None
        Sandbox.exec, SandboxPool.acquire = self._saved  # type: ignore[method-assign]

    @property
    def overhead(self) -> float | None:
        """The environment's wait on the sandbox layer over the commands' own time."""
        return round((self.wall + self.acquiring) / self.own, 3) if self.own else None


def starts_and_gradings(instances: list[Any]) -> tuple[list[float], list[float], int]:
    """Each instance played by the oracle: the reset's seconds (its pool warm), the submit's, and how many
    resolved."""
    env = agentgym.make(ENV_ID, pool_size=1)
    starts, gradings, resolved = [], [], 0
    try:
        for instance in instances:
            env.reset(seed=0, options={"instance_id": instance.instance_id})  # warms this image's pool
            _wait_warm(env)
            began = time.perf_counter()
            env.reset(seed=0, options={"instance_id": instance.instance_id})
            starts.append(time.perf_counter() - began)
            while True:
                action = env.oracle_action()
                _wait_warm(env)
                began = time.perf_counter()
                _, _, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    gradings.append(time.perf_counter() - began)
                    resolved += info["success"]
                    break
    finally:
        env.close()
    return starts, gradings, resolved


def _wait_warm(env: Any) -> None:
    """Wait until every pool of ``env`` holds its warm sandboxes again (the start is measured from a warm pool)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(len(p._idle) < p.size for p in env._pools.values()):
        time.sleep(0.05)


def throughput(policy: Any, tasks: TaskSet, concurrency: int, pool_size: int) -> dict[str, Any]:
    """Episodes per minute of ``policy`` on ``tasks``, ``concurrency`` in flight; the sandbox layer's overhead and
    the memory the sandboxes held, sampled as they ran."""
    memory = MemorySampler()
    with CommandClock() as clock, memory:
        began = time.perf_counter()
        results = asyncio.run(agentgym.evaluate(ENV_ID, policy, tasks, concurrency=concurrency,
                                                env_kwargs={"pool_size": pool_size})).trajectories
        seconds = time.perf_counter() - began
    scored = [r for r in results if r.status != "error"]
    return {"episodes": len(results), "errors": len(results) - len(scored),
            "success_rate": round(sum(r.success for r in scored) / max(1, len(scored)), 3),
            "episodes_per_minute": round(60 * len(results) / seconds, 1), "seconds": round(seconds, 1),
            "commands": clock.commands, "command_wall_s": round(clock.wall, 1), "command_own_s": round(clock.own, 1),
            "acquire_wall_s": round(clock.acquiring, 1), "overhead": clock.overhead,
            "overhead_commands_only": round(clock.wall / clock.own, 3) if clock.own else None,
            "memory_mb_per_episode": round(memory.peak_mb / concurrency, 1), "memory_mb_peak": round(memory.peak_mb),
            "sandboxes_peak": memory.peak_count}


class MemorySampler:
    """The memory held by agentgym's running containers, sampled every second in a thread (``docker stats``)."""

    def __init__(self) -> None:
        self.peak_mb, self.peak_count = 0.0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            listing = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}"],
                                     capture_output=True, text=True, check=False).stdout.splitlines()
            used = [_mib(line.split()[1]) for line in listing if line.startswith("agentgym-")]
            if sum(used) > self.peak_mb:
                self.peak_mb, self.peak_count = sum(used), len(used)


def _mib(text: str) -> float:
    units = {"KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0, "B": 1 / 2**20}
    for unit, scale in units.items():
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    return 0.0


def image_sizes(names: list[str]) -> dict[str, dict[str, float]]:
    """Each image's size in MB, and the part of it that its own layers add."""
    docker = client()
    base = docker.images.get("agentgym/swe:latest").attrs["Size"]
    sizes = {}
    for name in names:
        size = docker.images.get(f"{name}:latest").attrs["Size"]
        sizes[name] = {"size_mb": round(size / 1e6, 1), "own_mb": round((size - base) / 1e6, 2)}
    sizes["agentgym/swe"] = {"size_mb": round(base / 1e6, 1), "own_mb": round(base / 1e6, 1)}
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--pool-size", type=int, default=2, help="warm sandboxes per image's pool")
    parser.add_argument("--random-episodes", type=int, default=24)
    parser.add_argument("--quick", action="store_true", help="one instance per project and level, 16 random")
    parser.add_argument("--out", type=Path, default=RESULTS / "swe.json")
    args = parser.parse_args()
    engine = ensure_engine()
    try:
        built = time.perf_counter()
        images = build_images([name for name in image_names() if name.startswith("swe")])
        build_seconds = time.perf_counter() - built
        instances = load_instances()
        if args.quick:
            instances = list({(i.repo, i.difficulty): i for i in instances}.values())
            args.random_episodes = 16
        load_before = load_average()
        starts, gradings, resolved = starts_and_gradings(instances)
        print(f"start p50 {statistics.median(starts):.2f} s, grading p50 {statistics.median(gradings):.2f} s, "
              f"oracle resolved {resolved}/{len(instances)}", file=sys.stderr)
        tasks = TaskSet(Task(env_id=ENV_ID, seed=n, difficulty=i.difficulty, options={"instance_id": i.instance_id})
                        for n, i in enumerate(instances))
        oracle = throughput(OraclePolicy(), tasks, args.concurrency, args.pool_size)
        print(f"oracle: {oracle}", file=sys.stderr)
        random_tasks = TaskSet(list(tasks)[: args.random_episodes])
        random = throughput(RandomPolicy(), random_tasks, args.concurrency, args.pool_size)
        print(f"random: {random}", file=sys.stderr)
        start, grading = percentiles(starts), percentiles(gradings)
        report = {
            "benchmark": "swe",
            "episode_start": start, "grading": grading,
            "oracle_resolved": f"{resolved}/{len(instances)}",
            "throughput": {"oracle": oracle, "random": random, "concurrency": args.concurrency,
                           "pool_size": args.pool_size},
            "images": image_sizes([f"agentgym/{name}" for name in images if name != "swe"]), "image_build_seconds_when_missing": round(build_seconds, 1),
            "goals_met": {"start_p50_le_1.5s": start["p50_s"] <= START_GOAL_S,
                          "grading_p50_le_10s": grading["p50_s"] <= GRADING_GOAL_S,
                          "overhead_le_1.2x": max(oracle["overhead"] or 9, random["overhead"] or 9) <= OVERHEAD_GOAL},
            "machine": machine(load_before=load_before, load_after=load_average()),
        }
        write_result(report, args.out)
    finally:
        engine.stop()



if __name__ == "__main__":
    main()
