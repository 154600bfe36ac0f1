"""Micro-batches by rows against micro-batches by a token budget, on a batch with agent episodes' long length tail.

One batch of ``--rows`` trajectories whose lengths are log-normal (median ``--median`` tokens, ``--sigma``; a few
episodes run many times the median, as multi-turn agent episodes do), clipped to ``--max-length``, trains for
``--steps`` timed steps after a warm-up step on the ``small`` model preset, one torch thread, each arm in a process
of its own (so its peak memory is its own):

- ``rows``: ``trainer.micro_batch_size`` ``--micro`` rows a pass (rows collated longest first, each pass cut to its
  longest row: what agentgym did before token budgets);
- ``tokens``: ``trainer.max_tokens_per_micro_batch`` of ``--micro`` times the batch's median length (a pass holds
  about as many tokens as ``--micro`` typical episodes: long episodes go alone, short ones many together), rows
  uncapped;
- ``tokens_largest``: the budget set to the padded tokens of the ``rows`` arm's largest pass, so no pass is larger
  than the largest one there;
- ``packed``: the ``tokens`` arm's budget with ``trainer.sequence_packing``: each pass's rows run as one sequence
  (position ids restarting per row, transformers' block-diagonal attention mask), the budget counting real tokens.

Each arm reports trained tokens per second (real tokens, padding left out), the padded share of the computed
tokens, passes per step and peak resident memory. Writes ``benchmarks/results/batching.json``, the last line
printed. Goal: the ``tokens`` arm at least 1.3x the rows arm's tokens per second at no more peak memory (the
``packed`` arm's ratios are reported beside it).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM

from agentgym.models import init_model
from agentgym.trainers.batch import TrainBatch, collate
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.learner import Learner
from agentgym.trajectory import Trajectory
from benchmarks.perf.report import RESULTS, load_average, machine, write_result

GOAL = {"tokens_per_second_ratio": 1.3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--median", type=int, default=160, help="median tokens of a trajectory")
    parser.add_argument("--sigma", type=float, default=1.0, help="log-normal sigma of the lengths")
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--micro", type=int, default=16, help="rows per pass of the rows arm")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="16 rows, 1 step")
    parser.add_argument("--arm", help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--max-tokens", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS / "batching.json")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.steps = 16, 1
    if args.arm:
        print(json.dumps(_arm(args)))
        return
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="agentgym-batching-") as tmp:
        model = Path(tmp) / "model"
        init_model(model, "small")
        batch = long_tailed_batch(args.rows, args.median, args.sigma, args.max_length, vocab=_vocab(model))
        budget = args.micro * _lengths(batch)["median"]
        budgets = {"rows": None, "tokens": budget,
                   "tokens_largest": max(m.cost() for m in batch.micro_batches(args.micro)), "packed": budget}
        arms = {arm: _spawn(args, model, arm, budget) for arm, budget in budgets.items()}
    ratio = arms["tokens"]["tokens_per_second"] / arms["rows"]["tokens_per_second"]
    memory = arms["tokens"]["peak_rss_mib"] / arms["rows"]["peak_rss_mib"]
    result = {
        "benchmark": "batching", "arms": arms, "budgets": budgets,
        "tokens_per_second_ratio": round(ratio, 3), "peak_memory_ratio": round(memory, 3),
        "packed_tokens_per_second_ratio": round(arms["packed"]["tokens_per_second"] / arms["rows"]["tokens_per_second"], 3),
        "packed_over_tokens": round(arms["packed"]["tokens_per_second"] / arms["tokens"]["tokens_per_second"], 3),
        "packed_peak_memory_ratio": round(arms["packed"]["peak_rss_mib"] / arms["rows"]["peak_rss_mib"], 3),
        "goal": GOAL,
        "meets_goal": ratio >= GOAL["tokens_per_second_ratio"] and memory <= 1.0,
        "params": {"rows": args.rows, "median": args.median, "sigma": args.sigma, "max_length": args.max_length,
                   "micro": args.micro, "steps": args.steps, "preset": "small", "threads": 1,
                   "lengths": _lengths(batch)},
        "machine": machine("torch", load_before=load_before, load_after=load_average()),
    }
    write_result(result, args.out)


def long_tailed_batch(rows: int, median: int, sigma: float, max_length: int, vocab: int, seed: int = 0
                      ) -> TrainBatch:
    """``rows`` trajectories of log-normal lengths: a prompt of a quarter, then observation and agent turns of 32
    tokens in turn; behaviour logprobs near the model's (small, so the correction stays in range)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.exp(torch.randn(rows, generator=generator) * sigma) * median
    trajectories = []
    for length in lengths.clamp(32, max_length).int().tolist():
        ids = torch.randint(0, vocab, (length,), generator=generator).tolist()
        agent = [int(i >= length // 4 and (i // 32) % 2 == 1) for i in range(length)]
        trajectories.append(Trajectory(env_id="bench", token_ids=ids, loss_mask=agent,
                                       logprobs=[-5.0 * a for a in agent], versions=[0 if a else -1 for a in agent]))
    return collate(trajectories, torch.linspace(-1, 1, rows), pad_id=0)


def _spawn(args: argparse.Namespace, model: Path, arm: str, budget: int | None) -> dict[str, Any]:
    """One arm in a process of its own; its figures."""
    command = [sys.executable, "-m", "benchmarks.perf.batching", "--arm", arm, "--model", str(model),
               "--rows", str(args.rows), "--median", str(args.median), "--sigma", str(args.sigma),
               "--max-length", str(args.max_length), "--micro", str(args.micro), "--steps", str(args.steps)]
    if budget is not None:
        command += ["--max-tokens", str(budget)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{arm}: {figures}", file=sys.stderr, flush=True)
    return figures


def _arm(args: argparse.Namespace) -> dict[str, Any]:
    """Train the batch ``--steps`` times after a warm-up step under this arm's micro-batches."""
    torch.set_num_threads(1)
    batch = long_tailed_batch(args.rows, args.median, args.sigma, args.max_length, vocab=_vocab(args.model))
    micro = args.micro if args.max_tokens is None else args.rows
    packed = args.arm == "packed"
    config = TrainConfig.model_validate({
        "output_dir": "unused", "model": {"path": str(args.model)}, "env": {"id": "games/FrozenLake-v0"},
        "algorithm": {"old_logprobs": "recompute"},
        "trainer": {"micro_batch_size": micro, "max_tokens_per_micro_batch": args.max_tokens,
                    "sequence_packing": packed},
    })
    learner = Learner(AutoModelForCausalLM.from_pretrained(args.model), config)
    passes = list(batch.micro_batches(micro, args.max_tokens, packed=packed))
    learner.step(batch)
    seconds = []
    for _ in range(args.steps):
        started = time.perf_counter()
        learner.step(batch)
        seconds.append(time.perf_counter() - started)
    real = int(batch.attention_mask.sum().item())
    computed = sum(m.cost(packed=packed) for m in passes)
    return {
        "step_seconds": round(statistics.median(seconds), 3),
        "tokens_per_second": round(real / statistics.median(seconds), 1),
        "passes": len(passes),
        "largest_pass_tokens": max(m.cost(packed=packed) for m in passes),
        "padding_fraction": round(1 - real / computed, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def _vocab(model: Path) -> int:
    return int(json.loads((model / "config.json").read_text())["vocab_size"])


def _lengths(batch: TrainBatch) -> dict[str, int]:
    lengths = sorted(int(n) for n in batch.attention_mask.sum(-1).tolist())
    return {"min": lengths[0], "median": lengths[len(lengths) // 2], "p90": lengths[int(0.9 * (len(lengths) - 1))],
            "max": lengths[-1]}


if __name__ == "__main__":
    main()
