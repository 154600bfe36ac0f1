"""The trainer on one and two ranks: learner tokens/s, and the time to gather and publish the weights per step.

The same batch of multi-turn-sized rows (``--rows`` trajectories of ``--length`` tokens, half of them agent
tokens) trains for ``--steps`` timed steps after a warm-up step, on the ``small`` model preset:

- ``single-1t``: one process, one torch thread (the one-rank baseline);
- ``single-2t``: one process, two torch threads (what one process gets out of this machine's two cores);
- ``ddp-2``, ``fsdp-2``: two ranks of one thread each, Ray actors in a gloo process group.

After each step the whole weights are gathered (rank 0) and loaded into a torch engine in this process, as a
run publishes them: ``publish_fraction`` is that time over the step's. ``scaling`` = tokens/s of two ranks over
one rank of one thread. Writes ``benchmarks/results/trainer_scaling.json``; the last line printed is that JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM

from agentgym.cluster.backend import connect
from agentgym.inference.torch.engine import TorchEngine
from agentgym.models import init_model
from agentgym.trainers.batch import TrainBatch, collate
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.learner import Learner
from agentgym.trainers.rank_group import RankGroup
from agentgym.trajectory import Trajectory
from benchmarks.perf.report import RESULTS, machine, write_result


def batch_of(rows: int, length: int, vocab: int) -> TrainBatch:
    """``rows`` trajectories of ``length`` tokens: a prompt of a quarter, then turns alternating observation and
    agent tokens; behaviour logprobs near the model's (small, so the correction stays in range)."""
    generator = torch.Generator().manual_seed(0)
    trajectories = []
    for row in range(rows):
        n = length - (row % 4) * 8  # lengths vary a little, as real batches do
        ids = torch.randint(0, vocab, (n,), generator=generator).tolist()
        agent = [int(i >= n // 4 and (i // 32) % 2 == 1) for i in range(n)]
        trajectories.append(Trajectory(env_id="bench", token_ids=ids, loss_mask=agent,
                                       logprobs=[-5.0 * a for a in agent], versions=[0 if a else -1 for a in agent]))
    advantages = torch.linspace(-1, 1, rows)
    return collate(trajectories, advantages, pad_id=0)


def config_for(model_dir: Path, threads: int, world_size: int = 1, strategy: str | None = None,
               micro: int = 8) -> TrainConfig:
    return TrainConfig.model_validate({
        "output_dir": "unused", "model": {"path": str(model_dir)}, "env": {"id": "games/FrozenLake-v0"},
        "engine": {"threads": threads}, "algorithm": {"old_logprobs": "recompute"},
        "trainer": {"micro_batch_size": micro, "world_size": world_size, "strategy": strategy},
    })


def measure(learner: Any, batch: TrainBatch, engine: TorchEngine, steps: int) -> dict[str, Any]:
    """Warm-up step, then ``steps`` timed steps each followed by gathering and publishing the weights."""
    learner.step(batch)
    asyncio.run(engine.update_weights(learner.weights()))
    train_seconds = publish_seconds = 0.0
    for _ in range(steps):
        started = time.perf_counter()
        learner.step(batch)
        trained = time.perf_counter()
        asyncio.run(engine.update_weights(learner.weights()))
        train_seconds += trained - started
        publish_seconds += time.perf_counter() - trained
    tokens = int(batch.attention_mask.sum()) * steps
    return {
        "tokens_per_second": round(tokens / train_seconds, 1),
        "agent_tokens_per_second": round(batch.agent_tokens * steps / train_seconds, 1),
        "step_seconds": round(train_seconds / steps, 3),
        "publish_seconds": round(publish_seconds / steps, 4),
        "publish_fraction": round(publish_seconds / (train_seconds + publish_seconds), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--length", type=int, default=384)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--preset", default="small")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = init_model(Path(tmp) / "model", args.preset)
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        batch = batch_of(args.rows, args.length, model.config.vocab_size)
        parameters = sum(p.numel() for p in model.parameters())
        engine = TorchEngine(model_dir, device="cpu")
        arms: dict[str, dict[str, Any]] = {}
        try:
            for name, threads in (("single-1t", 1), ("single-2t", 2)):
                torch.set_num_threads(threads)
                config = config_for(model_dir, threads)
                arms[name] = measure(Learner(AutoModelForCausalLM.from_pretrained(model_dir), config), batch,
                                     engine, args.steps)
                print(f"{name:>10}: {arms[name]}", flush=True)
            torch.set_num_threads(1)
            started = connect(None)
            try:
                for strategy in ("ddp", "fsdp"):
                    group = RankGroup(config_for(model_dir, 1, 2, strategy), model_dir)
                    try:
                        arms[f"{strategy}-2"] = measure(group, batch, engine, args.steps)
                    finally:
                        group.close()
                    print(f"{strategy + '-2':>10}: {arms[strategy + '-2']}", flush=True)
            finally:
                if started:
                    import ray

                    ray.shutdown()
        finally:
            asyncio.run(engine.close())

    base = arms["single-1t"]["tokens_per_second"]
    result = {
        "benchmark": "trainer_scaling",
        "machine": machine("torch"),
        "model": {"preset": args.preset, "parameters": parameters},
        "batch": {"rows": args.rows, "tokens": int(batch.attention_mask.sum()), "agent_tokens": batch.agent_tokens,
                  "micro_batch_size": 8},
        "steps": args.steps,
        "arms": arms,
        "scaling": {name: round(arm["tokens_per_second"] / base, 3) for name, arm in arms.items()},
    }
    write_result(result, RESULTS / "trainer_scaling.json")


if __name__ == "__main__":
    main()
