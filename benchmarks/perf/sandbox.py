"""What a sandbox costs an episode, per backend: a cold start against a pooled acquire, and a command's round trip.

For each backend usable here:

- **cold start**: ``open_sandbox`` until the sandbox has answered its first command (``true``), then close;
  ``--episodes`` times, one after another.
- **pooled acquire**: ``SandboxPool.acquire()`` from a pool kept ``--warm`` sandboxes warm, ``--episodes``
  times, each episode holding its sandbox for ``--work`` seconds (its own work, while the pool refills).
- **exec round trip**: ``exec(["true"])`` on one open sandbox, ``--execs`` times; on docker, the same
  command through ``docker exec`` (the Engine API's exec create, start, inspect) is the baseline.

Reports p50 and p99 of each, ``acquire_speedup`` (cold p50 over pooled p50) and the goals of the issue:
pooled acquire p50 <= 20 ms and >= 20x faster than a cold start, exec round trip p50 <= 30 ms on docker.
Writes ``benchmarks/results/sandbox.json``, the last line printed. The Docker engine is started if none
runs (and stopped afterwards), and the images are built if missing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from agentgym.sandboxes import SandboxUnavailable, backend_module, open_sandbox
from agentgym.sandboxes.base import SandboxSpec
from agentgym.sandboxes.pool import SandboxPool
from benchmarks.perf.report import RESULTS, load_average, machine, write_result

ACQUIRE_GOAL_S, ACQUIRE_SPEEDUP_GOAL, EXEC_GOAL_S = 0.020, 20.0, 0.030


async def _cold(backend: str, spec: SandboxSpec, episodes: int) -> list[float]:
    waits = []
    for _ in range(episodes):
        started = time.perf_counter()
        sandbox = await open_sandbox(backend, spec)
        await sandbox.exec(["true"], timeout=30)
        waits.append(time.perf_counter() - started)
        await sandbox.close()
    return waits


async def _pooled(backend: str, spec: SandboxSpec, episodes: int, work: float, warm: int) -> list[float]:
    waits = []
    async with SandboxPool(backend, spec, size=warm) as pool:
        await pool.release(await pool.acquire())  # the pool starts warming up
        while len(pool._idle) < warm:
            await asyncio.sleep(0.05)
        for _ in range(episodes):
            started = time.perf_counter()
            sandbox = await pool.acquire()
            waits.append(time.perf_counter() - started)
            assert (await sandbox.exec(["true"], timeout=30)).ok
            await asyncio.sleep(work)
            await pool.release(sandbox)
    return waits


async def _round_trips(backend: str, spec: SandboxSpec, execs: int) -> tuple[list[float], list[float]]:
    """Round trips of ``exec``, and (docker only) of ``docker exec`` into the same container."""
    async with await open_sandbox(backend, spec) as sandbox:
        await sandbox.exec(["true"], timeout=30)
        ours = []
        for _ in range(execs):
            started = time.perf_counter()
            await sandbox.exec(["true"], timeout=30)
            ours.append(time.perf_counter() - started)
        baseline = await asyncio.to_thread(_docker_exec, sandbox.id, execs // 3) if backend == "docker" else []
    return ours, baseline


def _docker_exec(container: str, execs: int) -> list[float]:
    from agentgym.sandboxes.docker_engine import client

    api, times = client().api, []
    for _ in range(execs):
        started = time.perf_counter()
        exec_id = api.exec_create(container, ["true"])["Id"]
        api.exec_start(exec_id)
        assert api.exec_inspect(exec_id)["ExitCode"] == 0
        times.append(time.perf_counter() - started)
    return times


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {"p50_ms": at(0.5), "p99_ms": at(0.99), "n": len(ordered)}


def _measure(backend: str, spec: SandboxSpec, args: argparse.Namespace) -> dict[str, object]:
    cold = _percentiles(asyncio.run(_cold(backend, spec, args.episodes)))
    pooled = _percentiles(asyncio.run(_pooled(backend, spec, args.episodes, args.work, args.warm)))
    ours, baseline = asyncio.run(_round_trips(backend, spec, args.execs))
    round_trip = _percentiles(ours)
    speedup = round(cold["p50_ms"] / pooled["p50_ms"], 1)
    goals = {"pooled_acquire_p50_le_20ms": pooled["p50_ms"] <= ACQUIRE_GOAL_S * 1000,
             "acquire_speedup_ge_20x": speedup >= ACQUIRE_SPEEDUP_GOAL}
    if backend == "docker":
        goals["exec_p50_le_30ms"] = round_trip["p50_ms"] <= EXEC_GOAL_S * 1000
    print(f"{backend}: cold start p50 {cold['p50_ms']} ms, pooled acquire p50 {pooled['p50_ms']} ms "
          f"({speedup}x), exec round trip p50 {round_trip['p50_ms']} ms p99 {round_trip['p99_ms']} ms", file=sys.stderr)
    result = {"cold_start": cold, "pooled_acquire": pooled, "exec_round_trip": round_trip,
              "acquire_speedup": speedup, "goals_met": goals}
    if baseline:
        result["docker_exec_round_trip"] = _percentiles(baseline)
        result["exec_speedup_over_docker_exec"] = round(result["docker_exec_round_trip"]["p50_ms"]
                                                        / round_trip["p50_ms"], 1)
        print(f"{backend}: docker exec round trip p50 {result['docker_exec_round_trip']['p50_ms']} ms "
              f"({result['exec_speedup_over_docker_exec']}x slower)", file=sys.stderr)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--execs", type=int, default=300)
    parser.add_argument("--work", type=float, default=0.5, help="seconds an episode holds its sandbox")
    parser.add_argument("--warm", type=int, default=2, help="sandboxes the pool keeps warm")
    parser.add_argument("--quick", action="store_true", help="15 episodes and 60 round trips")
    parser.add_argument("--out", type=Path, default=RESULTS / "sandbox.json")
    args = parser.parse_args()
    if args.quick:
        args.episodes, args.execs = 15, 60
    results: dict[str, object] = {}
    engine = None
    spec = SandboxSpec()
    try:
        for backend in ("local", "docker"):
            try:
                if backend == "docker":
                    from agentgym.sandboxes.docker_engine import ensure_engine
                    from agentgym.sandboxes.images import build_images

                    engine = ensure_engine()
                    build_images(["python"])
                backend_module(backend).check(spec)
            except SandboxUnavailable as exc:
                results[backend] = {"skipped": str(exc)}
                print(f"{backend}: skipped ({exc})", file=sys.stderr)
                continue
            results[backend] = _measure(backend, spec, args)
    finally:
        if engine is not None:
            engine.stop()
    report = {"benchmark": "sandbox", "backends": results,
              "params": {"episodes": args.episodes, "execs": args.execs, "work_s": args.work, "warm": args.warm},
              "machine": machine(load_after=load_average())}
    write_result(report, args.out)


if __name__ == "__main__":
    main()
