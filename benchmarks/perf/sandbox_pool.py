"""What the sandbox pool saves an episode: the time from asking for a sandbox to its first command's answer.

For each backend that is usable here, ``--episodes`` episodes run one after another, each needing a
sandbox and one command, twice: cold (open a sandbox, run the command, close it) and through a
``SandboxPool`` kept ``--warm`` sandboxes warm (acquire, run, release; the pool starts replacements while
the episode's own work would run, here a ``--work`` second pause). Reports the median and p95 wait of
each arm and ``speedup`` (cold median over pooled median); writes ``benchmarks/results/sandbox_pool.json``,
the last line printed. The Docker engine is started if none runs, and stopped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from agentgym.sandboxes import SandboxUnavailable, backend_module, open_sandbox
from agentgym.sandboxes.base import SandboxSpec
from agentgym.sandboxes.pool import SandboxPool

ROOT = Path(__file__).resolve().parents[2]


async def _cold(backend: str, spec: SandboxSpec, episodes: int, work: float) -> list[float]:
    waits = []
    for _ in range(episodes):
        started = time.perf_counter()
        sandbox = await open_sandbox(backend, spec)
        await sandbox.exec(["true"], timeout=30)
        waits.append(time.perf_counter() - started)
        await asyncio.sleep(work)
        await sandbox.close()
    return waits


async def _pooled(backend: str, spec: SandboxSpec, episodes: int, work: float, warm: int) -> list[float]:
    waits = []
    async with SandboxPool(backend, spec, size=warm) as pool:
        await pool.release(await pool.acquire())  # the pool starts warming up
        await asyncio.sleep(2.0)
        for _ in range(episodes):
            started = time.perf_counter()
            sandbox = await pool.acquire()
            await sandbox.exec(["true"], timeout=30)
            waits.append(time.perf_counter() - started)
            await asyncio.sleep(work)
            await pool.release(sandbox)
    return waits


def _summary(waits: list[float]) -> dict[str, float]:
    ordered = sorted(waits)
    return {"median_s": round(statistics.median(ordered), 4),
            "p95_s": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--work", type=float, default=0.5, help="seconds of an episode's own work")
    parser.add_argument("--warm", type=int, default=2, help="sandboxes the pool keeps warm")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sandbox_pool.json")
    args = parser.parse_args()
    results: dict[str, object] = {}
    engine = None
    for backend in ("local", "docker"):
        try:
            if backend == "docker":
                from agentgym.sandboxes.docker_engine import ensure_engine
                from agentgym.sandboxes.images import build_images

                engine = ensure_engine()
                build_images(["python"])
            spec = SandboxSpec()
            backend_module(backend).check(spec)
        except SandboxUnavailable as exc:
            results[backend] = {"skipped": str(exc)}
            print(f"{backend}: skipped ({exc})", file=sys.stderr)
            continue
        cold = _summary(asyncio.run(_cold(backend, spec, args.episodes, args.work)))
        pooled = _summary(asyncio.run(_pooled(backend, spec, args.episodes, args.work, args.warm)))
        results[backend] = {"cold": cold, "pooled": pooled,
                            "speedup": round(cold["median_s"] / pooled["median_s"], 2)}
        print(f"{backend}: cold median {cold['median_s'] * 1000:.0f} ms, pooled median "
              f"{pooled['median_s'] * 1000:.0f} ms ({results[backend]['speedup']}x)", file=sys.stderr)
    if engine is not None:
        engine.stop()
    report = {"benchmark": "sandbox_pool", "backends": results,
              "params": {"episodes": args.episodes, "work_s": args.work, "warm": args.warm},
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "load_after": os.getloadavg()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
