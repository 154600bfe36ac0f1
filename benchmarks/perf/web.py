"""Browser episodes per second and memory per episode, with 1, 8 and 32 episodes in flight.

The oracle plays ``web/Shop-v0`` (medium) through the rollout engine's episode runner: ``--episodes``
episodes at each level of parallelism (one Chromium, a context per episode), after one warm-up episode that
launches the browser and the site. Memory is the proportional set size (PSS: shared pages split between
their sharers, so nothing is counted twice) of Chromium's processes (the browser, its GPU and network
services and one renderer per page), sampled while the episodes run; ``per_episode_mb`` is the
peak divided by the episodes in flight (the browser's own share included). Reports episodes/s per level and ``scaling_32_vs_1`` (episodes/s at 32
over episodes/s at 1); writes ``benchmarks/results/web.json``, the last line printed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import psutil

from agentgym.envs.web.shop import ShopEnv
from agentgym.episode import run_episode
from agentgym.policies import OraclePolicy
from agentgym.tasks import Task
from benchmarks.perf.report import RESULTS, load_average, machine, write_result


def _chromium_pss() -> int:
    total = 0
    for process in psutil.Process().children(recursive=True):
        try:
            if "chrom" in process.name():
                total += process.memory_full_info().pss
        except psutil.NoSuchProcess:
            continue
    return total


async def _level(parallel: int, episodes: int, seed: int) -> dict[str, float]:
    envs = [ShopEnv() for _ in range(parallel)]
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(episodes):
        queue.put_nowait(seed + index)
    rewards: list[float] = []
    peak = 0

    async def worker(env: ShopEnv) -> None:
        while not queue.empty():
            task = Task(env_id="web/Shop-v0", seed=queue.get_nowait(), difficulty="medium")
            trajectory = await run_episode(env, OraclePolicy(), task)
            if trajectory.status != "ok":
                raise RuntimeError(f"episode {task.id} ended with {trajectory.status}: {trajectory.error}")
            rewards.append(trajectory.reward)

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, await asyncio.to_thread(_chromium_pss))
            await asyncio.sleep(0.25)

    try:
        await run_episode(envs[0], OraclePolicy(), Task(env_id="web/Shop-v0", seed=seed - 1, difficulty="medium"))
        baseline = _chromium_pss()
        sampler = asyncio.create_task(sample())
        started = time.perf_counter()
        await asyncio.gather(*(worker(env) for env in envs))
        wall = time.perf_counter() - started
        sampler.cancel()
    finally:
        await asyncio.gather(*(env.aclose() for env in envs))
    return {"parallel": parallel, "episodes": episodes, "wall_s": round(wall, 2),
            "episodes_per_s": round(episodes / wall, 3), "mean_reward": sum(rewards) / len(rewards),
            "chromium_peak_mb": round(peak / 2**20, 1), "chromium_idle_mb": round(baseline / 2**20, 1),
            "per_episode_mb": round(peak / 2**20 / parallel, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--episodes", type=int, default=32, help="episodes per level")
    parser.add_argument("--quick", action="store_true", help="8 episodes per level")
    parser.add_argument("--out", type=Path, default=RESULTS / "web.json")
    args = parser.parse_args()
    episodes = 8 if args.quick else args.episodes
    levels = []
    for parallel in args.levels:
        result = asyncio.run(_level(parallel, max(episodes, parallel), seed=1000 * parallel))
        levels.append(result)
        print(f"{parallel:>3} in flight: {result['episodes_per_s']} episodes/s, peak Chromium "
              f"{result['chromium_peak_mb']} MB ({result['per_episode_mb']} MB per episode)", file=sys.stderr)
    by_level = {level["parallel"]: level for level in levels}
    report = {"benchmark": "web", "levels": levels,
              "scaling_32_vs_1": round(by_level[32]["episodes_per_s"] / by_level[1]["episodes_per_s"], 2)
              if 1 in by_level and 32 in by_level else None,
              "params": {"episodes": episodes, "env": "web/Shop-v0", "difficulty": "medium", "policy": "oracle"},
              "machine": machine(load_after=load_average())}
    write_result(report, args.out)


if __name__ == "__main__":
    main()
