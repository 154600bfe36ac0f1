"""The torch engine on the CPU with its grouped-query attention against transformers' ``sdpa`` attention.

The same engine, tiny model and seeded episodes are played twice per round, once with each attention,
alternating over ``--rounds`` (each run's episodes start with a token of their own, so that no run reuses
another's cached prefixes; the fastest run of each attention counts). An episode is shaped like a described
Sokoban episode: a ``--first-prompt``-token start, then ``--turns`` turns of ``--max-tokens`` generated and
``--observation`` tokens more (about 1,500 tokens by the end); ``--concurrency`` episodes in flight. Prints
generated tokens/s of both and ``speedup`` (ours over transformers'), writes
``benchmarks/results/cpu_attention.json``; the last line is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.inference import GenerationRequest, SamplingParams
from agentgym.inference.torch._gqa_attention import NAME
from agentgym.inference.torch.engine import TorchEngine
from agentgym.models import init_model
from benchmarks.perf.report import RESULTS, machine, write_result


async def play_all(engine: TorchEngine, episodes: list[list[list[int]]], args: argparse.Namespace
                   ) -> tuple[float, int]:
    """Seconds to play every episode, ``args.concurrency`` at a time, and the tokens generated. An episode
    is a list of turns: each turn's prompt is the episode so far (its cached prefix) plus that turn's tokens."""
    gate = asyncio.Semaphore(args.concurrency)

    async def one(index: int, turns: list[list[int]]) -> int:
        context: list[int] = []
        generated = 0
        async with gate:
            for turn, observation in enumerate(turns):
                context += observation
                sampling = SamplingParams(temperature=1.0, max_tokens=args.max_tokens, seed=index * 1000 + turn)
                reply = (await engine.generate(GenerationRequest(prompt_ids=context, sampling=sampling))).token_ids
                context += reply
                generated += len(reply)
        return generated

    started = time.perf_counter()
    counts = await asyncio.gather(*(one(i, turns) for i, turns in enumerate(episodes)))
    return time.perf_counter() - started, sum(counts)


def main(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        model_dir = init_model(folder, "tiny", seed=0)
        engine = TorchEngine(model_dir, seed=0, max_batch_size=args.concurrency, threads=args.threads)
        vocab = engine.model.config.vocab_size
        episodes = [[rng.integers(10, vocab - 10, args.first_prompt if turn == 0 else args.observation).tolist()
                     for turn in range(args.turns)] for _ in range(args.episodes)]
        timings: dict[str, list[float]] = {"sdpa": [], NAME: []}
        tokens: dict[str, int] = {}
        for run in range(2 * args.rounds):
            attention = list(timings)[run % 2]
            engine.model.set_attn_implementation(attention)
            fresh = [[[run + 1, *turns[0][1:]], *turns[1:]] for turns in episodes]  # no run reuses another's prefixes
            seconds, tokens[attention] = asyncio.run(play_all(engine, fresh, args))
            timings[attention].append(seconds)
        asyncio.run(engine.close())
    rates = {name: tokens[name] / min(seconds) for name, seconds in timings.items()}
    return {
        "benchmark": "cpu_attention",
        "tokens_per_second": {"transformers_sdpa": round(rates["sdpa"], 1), NAME: round(rates[NAME], 1)},
        "speedup": round(rates[NAME] / rates["sdpa"], 2),
        "seconds": {name: [round(s, 2) for s in seconds] for name, seconds in timings.items()},
        "generated_tokens": tokens,
        "settings": {key: value for key, value in vars(args).items() if key != "out"},
        "machine": machine("torch", "transformers"),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--first-prompt", type=int, default=250)
    parser.add_argument("--observation", type=int, default=110)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the training showcases use 1)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "cpu_attention.json")
    arguments = parser.parse_args()
    result = main(arguments)
    print(f"transformers sdpa: {result['tokens_per_second']['transformers_sdpa']} tok/s   "
          f"{NAME}: {result['tokens_per_second'][NAME]} tok/s   speedup {result['speedup']}x")
    write_result(result, arguments.out)
