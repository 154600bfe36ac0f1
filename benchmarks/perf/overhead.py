"""The framework's own cost per environment step: agentgym's workers against Gymnasium's vector envs.

``--episodes`` concurrent episodes of a no-op environment (one tool that answers a constant string,
``--turns`` turns, always truncated) played by a constant policy, in four arms on the same env class:

(a) agentgym: the RolloutScheduler with ``concurrency = --episodes``; the policy never waits, so
    each episode runs to its end once started (timed from the first env construction to the last trajectory);
(b) agentgym, interleaved: the same, but the policy yields to the event loop every turn, so all
    episodes are in flight at once (their histories alive together, as with a real model);
(c) ``gymnasium.vector.SyncVectorEnv`` of ``--episodes`` copies;
(d) ``gymnasium.vector.AsyncVectorEnv`` with each of ``--workers`` processes (one env each; best kept).

Vector envs run in their fastest setting (``copy=False``, same-step autoreset) and are timed from
``reset`` on (construction and process start are not counted); every arm steps ``episodes x turns``
times (an AsyncVectorEnv rounds up to whole vector steps). Each arm runs ``--repeats`` times,
interleaved, and its best run counts. Prints steps/s of each arm, ``ratio_vs_sync_vector`` and
``ratio_vs_async_vector`` (a over c, a over best d), writes ``benchmarks/results/overhead.json``;
the last line is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

import agentgym
from agentgym import Env, Message, TaskSet
from agentgym.policies import TextPolicy
from agentgym.rollout import RolloutConfig, RolloutScheduler
from benchmarks.perf.report import RESULTS, load_average, machine, write_result

ENV_ID = "perf/Noop-v0"
GOAL = {"ratio_vs_async_vector": 3}


class ConstantPolicy(TextPolicy):
    """Always sends the same text; with ``interleave`` it yields to the event loop first."""

    name = "constant"

    def __init__(self, text: str, *, interleave: bool = False) -> None:
        self.text, self.interleave = text, interleave

    async def act(self, env: Env, messages: Sequence[Message], rng: np.random.Generator) -> str:
        if self.interleave:
            await asyncio.sleep(0)
        return self.text


def agentgym_arm(args: argparse.Namespace, action: str, *, interleave: bool) -> tuple[int, float]:
    """Env steps played and seconds taken by the rollout scheduler."""

    async def run() -> tuple[int, float]:
        policy = ConstantPolicy(action, interleave=interleave)
        scheduler = RolloutScheduler(ENV_ID, policy, RolloutConfig(concurrency=args.episodes), env_kwargs={"max_turns": args.turns})
        steps = 0

        async def read() -> None:
            nonlocal steps
            async for trajectory in scheduler.stream:
                if trajectory.status != "truncated" or trajectory.num_turns != args.turns:
                    raise RuntimeError(f"a no-op episode ended {trajectory.status} after {trajectory.num_turns} turns: {trajectory.error}")
                steps += trajectory.num_turns

        started = time.perf_counter()
        async with asyncio.TaskGroup() as group:
            group.create_task(read())
            await scheduler.run(TaskSet.generate(ENV_ID, args.episodes))
        return steps, time.perf_counter() - started

    return asyncio.run(run())


def vector_arm(make_vector: Callable[..., Any], num_envs: int, vector_steps: int, action: str, turns: int) -> tuple[int, float]:
    """Env steps played and seconds taken by a Gymnasium vector env of ``num_envs`` no-op envs."""
    envs = make_vector(
        [partial(agentgym.make, ENV_ID, max_turns=turns) for _ in range(num_envs)],
        copy=False,
        autoreset_mode=AutoresetMode.SAME_STEP,
    )
    try:
        actions = (action,) * num_envs
        started = time.perf_counter()
        envs.reset(seed=list(range(num_envs)))
        for _ in range(vector_steps):
            envs.step(actions)
        return num_envs * vector_steps, time.perf_counter() - started
    finally:
        envs.close()


def measure(name: str, run: Callable[[], tuple[int, float]], samples: dict[str, list[float]]) -> None:
    gc.collect()
    steps, seconds = run()
    samples.setdefault(name, []).append(steps / seconds)
    print(f"  {name}: {steps} steps in {seconds:.2f} s = {steps / seconds:,.0f} steps/s", file=sys.stderr, flush=True)


def main(args: argparse.Namespace) -> dict[str, Any]:
    action = agentgym.make(ENV_ID).format_call("noop")
    total = args.episodes * args.turns
    arms: dict[str, Callable[[], tuple[int, float]]] = {
        "agentgym": partial(agentgym_arm, args, action, interleave=False),
        "agentgym_interleaved": partial(agentgym_arm, args, action, interleave=True),
        "sync_vector": partial(vector_arm, SyncVectorEnv, args.episodes, args.turns, action, args.turns),
    }
    for workers in args.workers:
        async_vector = partial(AsyncVectorEnv, shared_memory=False, context="fork")
        arms[f"async_vector_{workers}"] = partial(vector_arm, async_vector, workers, math.ceil(total / workers), action, args.turns)
    samples: dict[str, list[float]] = {}
    load_before = load_average()
    for repeat in range(args.repeats):
        print(f"round {repeat + 1}/{args.repeats}", file=sys.stderr, flush=True)
        for name, run in arms.items():
            measure(name, run, samples)
    best = {name: max(values) for name, values in samples.items()}
    best_workers = max(args.workers, key=lambda w: best[f"async_vector_{w}"])
    async_best = best[f"async_vector_{best_workers}"]
    ratios = {
        "ratio_vs_sync_vector": round(best["agentgym"] / best["sync_vector"], 3),
        "ratio_vs_async_vector": round(best["agentgym"] / async_best, 3),
        "interleaved_ratio_vs_async_vector": round(best["agentgym_interleaved"] / async_best, 3),
    }
    return {
        "benchmark": "overhead",
        **ratios,
        "goal": GOAL,
        "met": ratios["ratio_vs_async_vector"] >= GOAL["ratio_vs_async_vector"],
        "steps_per_second": {name: round(value) for name, value in best.items()},
        "async_vector_best_workers": best_workers,
        "samples": {name: [round(v) for v in values] for name, values in samples.items()},
        "parameters": {"episodes": args.episodes, "turns": args.turns, "workers": args.workers,
                       "repeats": args.repeats, "quick": args.quick, "steps_per_arm": total},
        "machine": machine("torch", "gymnasium", "agentgym", load_average_before=load_before,
                           load_average_after=load_average()),
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 rounds, 4 and 8 workers only (under 2 minutes).")
    parser.add_argument("--episodes", type=int, default=1000, help="Concurrent episodes (and SyncVectorEnv copies).")
    parser.add_argument("--turns", type=int, default=32, help="Turns per episode.")
    parser.add_argument("--workers", type=lambda s: [int(w) for w in s.split(",")], default=[4, 8, 32, 64],
                        help="AsyncVectorEnv process counts to try, comma-separated.")
    parser.add_argument("--repeats", type=int, default=3, help="Rounds of all arms; each arm's best run counts.")
    parser.add_argument("--out", type=Path, default=RESULTS / "overhead.json")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.workers = 2, [4, 8]
    return args


if __name__ == "__main__":
    arguments = parse_args()
    agentgym.register(ENV_ID, "benchmarks.perf.perf_envs:NoopEnv")
    result = main(arguments)
    steps = result["steps_per_second"]
    print(f"agentgym {steps['agentgym']:,} steps/s (interleaved {steps['agentgym_interleaved']:,}); "
          f"SyncVectorEnv {steps['sync_vector']:,}; best AsyncVectorEnv ({result['async_vector_best_workers']} workers) "
          f"{steps['async_vector_' + str(result['async_vector_best_workers'])]:,}")
    print(f"ratio_vs_sync_vector {result['ratio_vs_sync_vector']:.2f}, ratio_vs_async_vector "
          f"{result['ratio_vs_async_vector']:.2f} (goal {GOAL['ratio_vs_async_vector']}), interleaved "
          f"{result['interleaved_ratio_vs_async_vector']:.2f}")
    write_result(result, arguments.out)
