"""Env-level asynchronous rollout against synchronous batch rollout, on the same engine, model and envs.

(a) synchronous: batches of ``--concurrency`` episodes in lockstep, every turn waiting for the batch's
slowest generation and slowest environment step (how synchronous trainers roll out);
(b) agentgym: the RolloutScheduler, ``--concurrency`` in flight, each at its own pace, fed without
pause the way a trainer feeds it; the clock stops once as many trajectories as (a) played have been
streamed (stragglers never hold the consumer back, which is the point of queue scheduling). Environment steps take a log-normal time (p99 = ``--tail`` x median), response lengths are
drawn uniformly per turn. Prints trajectories/s of both, ``speedup`` (b over a) and ``engine_busy``
(the engine's busy fraction under b), writes ``benchmarks/results/rollout.json``; the last line is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import agentgym
from agentgym import TaskSet
from agentgym.inference import InferenceEngine, SamplingParams
from agentgym.inference.torch.engine import TorchEngine
from agentgym.models import init_model
from agentgym.policies.lm import LMPolicy
from agentgym.rollout import RolloutConfig, RolloutScheduler
from agentgym.rollout.synchronous import run_lockstep
from benchmarks.perf.report import RESULTS, machine, write_result

ENV_ID = "perf/LongTail-v0"
GOAL = {"speedup": 2.7, "engine_busy": 0.9}


class VariedLengthPolicy(LMPolicy):
    """Draws each turn's response length uniformly from ``lengths``."""

    def __init__(self, engine: InferenceEngine, lengths: tuple[int, int]) -> None:
        super().__init__(engine, SamplingParams(temperature=1.0))
        self.lengths = lengths

    def turn_sampling(self, rng: np.random.Generator) -> SamplingParams:
        return self.sampling.model_copy(update={"max_tokens": int(rng.integers(*self.lengths, endpoint=True))})


async def synchronous(policy: LMPolicy, tasks: TaskSet, batch: int, env_kwargs: dict, done) -> list:
    """Lockstep batches until every task has been played."""
    trajectories = []
    for start in range(0, len(tasks), batch):
        trajectories += await run_lockstep(ENV_ID, policy, list(tasks[start : start + batch]), env_kwargs=env_kwargs)
    done()
    return trajectories


async def asynchronous(policy: LMPolicy, tasks: TaskSet, concurrency: int, env_kwargs: dict, done) -> list:
    """The scheduler fed without pause (as a trainer feeds it) until as many trajectories as there are
    tasks have been streamed; the clock stops there and the episodes still running are cancelled."""
    supply = (task.model_copy(update={"seed": task.seed + lap * len(tasks)}) for lap in range(1_000) for task in tasks)
    scheduler = RolloutScheduler(ENV_ID, policy, RolloutConfig(concurrency=concurrency), env_kwargs=env_kwargs)
    seen = []

    async def read() -> None:
        async for trajectory in scheduler.stream:
            if len(seen) < len(tasks):
                seen.append(trajectory)
                if len(seen) == len(tasks):
                    done()
                    scheduler.stop()

    async with asyncio.TaskGroup() as group:
        group.create_task(read())
        await scheduler.run(supply)
    return seen


async def measure(name: str, engine: InferenceEngine, arm, *args) -> dict:
    """Run one arm; its figures are taken when it calls ``done`` (all trajectories delivered)."""
    before, started, end = engine.stats(), time.perf_counter(), {}

    def done() -> None:
        end.update(wall=time.perf_counter() - started, stats=engine.stats())

    trajectories = await arm(*args, done)
    wall, stats = end["wall"], end["stats"]
    ok = [t for t in trajectories if t.status != "error"]
    figures = {
        "trajectories": len(ok),
        "errors": len(trajectories) - len(ok),
        "wall_seconds": round(wall, 3),
        "trajectories_per_second": len(ok) / wall,
        "tokens_per_second": (stats.generated_tokens - before.generated_tokens) / wall,
        "engine_busy": (stats.busy_seconds - before.busy_seconds) / wall,
        "prompt_tokens": stats.prompt_tokens - before.prompt_tokens,
        "cached_prompt_tokens": stats.cached_prompt_tokens - before.cached_prompt_tokens,
        "mean_env_seconds_per_episode": float(np.mean([t.timings["env_seconds"] for t in ok])),
    }
    print(f"{name:>12}: {figures['trajectories_per_second']:.2f} trajectories/s, "
          f"{figures['tokens_per_second']:.0f} tokens/s, engine busy {figures['engine_busy']:.2f}, "
          f"{wall:.1f} s", file=sys.stderr)
    return figures


async def main(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="agentgym-bench-") as scratch:
        model_dir = Path(args.model) if args.model else init_model(Path(scratch) / "tiny", "tiny", seed=0)
        engine = start_engine(args.engine, model_dir, args.concurrency, args.threads)
        policy = VariedLengthPolicy(engine, (args.min_tokens, args.max_tokens))
        env_kwargs = {"median": args.median, "tail": args.tail, "max_turns": args.turns}
        tasks = TaskSet.generate(ENV_ID, args.episodes, split="test")
        try:
            warm_up = TaskSet.generate(ENV_ID, args.concurrency, split="train")
            await asynchronous(policy, warm_up, args.concurrency, env_kwargs, lambda: None)
            sync = await measure("synchronous", engine, synchronous, policy, tasks, args.concurrency, env_kwargs)
            agentgym_async = await measure("agentgym", engine, asynchronous, policy, tasks, args.concurrency, env_kwargs)
        finally:
            await engine.close()
    speedup = agentgym_async["trajectories_per_second"] / sync["trajectories_per_second"]
    return {
        "benchmark": "rollout",
        "speedup": round(speedup, 3),
        "engine_busy": round(agentgym_async["engine_busy"], 3),
        "goal": GOAL,
        "met": speedup >= GOAL["speedup"] and agentgym_async["engine_busy"] >= GOAL["engine_busy"],
        "synchronous": sync,
        "agentgym": agentgym_async,
        "parameters": {k: v for k, v in vars(args).items() if k not in ("model", "out")} | {"model": args.model or "tiny"},
        "machine": machine("torch", "agentgym", torch_threads=torch.get_num_threads()),
    }


def start_engine(name: str, model_dir: Path, concurrency: int, threads: int) -> InferenceEngine:
    """The engine under test: the in-process torch engine, or vLLM (its CPU build here)."""
    if name == "vllm":
        from agentgym.inference.vllm.engine import VLLMEngine

        return VLLMEngine(model_dir, seed=0, max_num_seqs=concurrency)
    return TorchEngine(model_dir, seed=0, max_batch_size=concurrency, threads=threads)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="One batch of episodes, three turns (under 2 minutes).")
    parser.add_argument("--model", help="A model folder (default: a fresh `agentgym model init --preset tiny`).")
    parser.add_argument("--concurrency", type=int, default=64, help="Episodes in flight (and the synchronous batch).")
    parser.add_argument("--episodes", type=int, default=320)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--median", type=float, default=0.1, help="Median env step latency in seconds.")
    parser.add_argument("--tail", type=float, default=20.0, help="p99 / median of the env step latency.")
    parser.add_argument("--min-tokens", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--engine", choices=("torch", "vllm"), default="torch",
                        help="The engine both arms share (vllm: `bash scripts/setup.sh vllm` first).")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for the engine (1 leaves a core to the event loop on small machines).")
    parser.add_argument("--out", type=Path, help="Default: results/rollout.json (rollout-vllm.json with --engine vllm).")
    args = parser.parse_args()
    args.out = args.out or RESULTS / ("rollout.json" if args.engine == "torch" else "rollout-vllm.json")
    if args.quick:
        args.episodes, args.turns = 2 * args.concurrency, 3
    return args


if __name__ == "__main__":
    arguments = parse_args()
    agentgym.register(ENV_ID, "benchmarks.perf.long_tail_env:LongTailEnv")
    result = asyncio.run(main(arguments))
    print(f"speedup {result['speedup']:.2f}x (goal {GOAL['speedup']}), engine busy {result['engine_busy']:.2f} "
          f"(goal {GOAL['engine_busy']})")
    write_result(result, arguments.out)
