"""agentgym's ``vllm`` engine against vLLM driven directly, on the same prompts and the same vLLM instance.

(a) Throughput: one wave of ``--requests`` token-id prompts (lengths drawn from ``--prompt-tokens``), each
seeded and sampled to ``--max-tokens`` with its logprobs, sent once through vLLM's own ``AsyncLLM.generate``
(what an RL system built on vLLM calls) and once through ``VLLMEngine.generate`` (which adds versions, the
renderer call and the interruption bookkeeping); the prefix cache is emptied before each, the arms alternate
``--rounds`` times and the medians are kept. ``overhead_ratio`` is agentgym's generated tokens/s over the
direct arm's (goal >= 0.9).
(b) Weight updates: ``VLLMEngine.update_weights(state_dict)`` timed ``--updates`` times (pause, shared-memory
copy, the workers' layer-wise reload, resume) on the tiny model and on a wider random-weight Qwen2
(``--wide-hidden``), reported as seconds per update and per MB.
(c) The engine's busy fraction inside ``rollout.py``'s long-tail workload (env-level async rollout) on vLLM.

Needs vLLM (``bash scripts/setup.sh vllm``). Writes ``benchmarks/results/vllm_engine.json``, the last line printed.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import agentgym
from agentgym import TaskSet
from agentgym.inference import GenerationRequest, SamplingParams
from agentgym.models import init_model
from benchmarks.perf.report import RESULTS, machine, write_result

GOAL = {"overhead_ratio": 0.9}


def prompts(args: argparse.Namespace, vocab: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    low, high = args.prompt_tokens
    return [rng.integers(3, vocab, size=int(rng.integers(low, high + 1))).tolist() for _ in range(args.requests)]


async def direct_arm(llm, wave: list[list[int]], max_tokens: int, tag: str) -> int:
    """vLLM's own API: one streamed request per prompt, token ids and their logprobs read as they come."""
    from vllm import SamplingParams as VLLMSampling
    from vllm import TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    async def one(i: int, prompt: list[int]) -> int:
        params = VLLMSampling(temperature=1.0, max_tokens=max_tokens, seed=i, logprobs=0,
                              output_kind=RequestOutputKind.DELTA)
        tokens: list[int] = []
        logprobs: list[float] = []
        async for output in llm.generate(TokensPrompt(prompt_token_ids=prompt), params, f"{tag}-{i}"):
            completion = output.outputs[0]
            for token, entry in zip(completion.token_ids, completion.logprobs or [], strict=True):
                tokens.append(token)
                logprobs.append(float(entry[token].logprob))
        return len(tokens)

    return sum(await asyncio.gather(*(one(i, p) for i, p in enumerate(wave))))


async def agentgym_arm(engine, wave: list[list[int]], max_tokens: int) -> int:
    requests = [GenerationRequest(prompt_ids=p, sampling=SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=i))
                for i, p in enumerate(wave)]
    return sum(len(r.token_ids) for r in await asyncio.gather(*(engine.generate(r) for r in requests)))


async def timed(arm) -> tuple[int, float]:
    started = time.perf_counter()
    tokens = await arm
    return tokens, time.perf_counter() - started


async def throughput(engine, args: argparse.Namespace) -> dict:
    vocab = len(engine.tokenizer)
    await agentgym_arm(engine, prompts(args, vocab, seed=999)[:8], 8)  # warm-up
    rates: dict[str, list[float]] = {"direct": [], "agentgym": []}
    tokens: dict[str, list[int]] = {"direct": [], "agentgym": []}
    for round_ in range(args.rounds):
        wave = prompts(args, vocab, seed=round_)
        order = ("direct", "agentgym") if round_ % 2 == 0 else ("agentgym", "direct")
        for arm in order:
            await engine.llm.reset_prefix_cache()
            if arm == "direct":
                count, seconds = await timed(direct_arm(engine.llm, wave, args.max_tokens, f"direct-{round_}"))
            else:
                count, seconds = await timed(agentgym_arm(engine, wave, args.max_tokens))
            rates[arm].append(count / seconds)
            tokens[arm].append(count)
            print(f"round {round_} {arm:>8}: {count} tokens, {count / seconds:.0f} tokens/s", file=sys.stderr)
    direct, ours = statistics.median(rates["direct"]), statistics.median(rates["agentgym"])
    return {"direct_tokens_per_second": round(direct, 1), "agentgym_tokens_per_second": round(ours, 1),
            "overhead_ratio": round(ours / direct, 3), "samples": rates, "generated_tokens": tokens}


async def updates(engine, model_dir: Path, count: int) -> dict:
    from safetensors.torch import load_file

    state = {k: v for f in sorted(model_dir.glob("*.safetensors")) for k, v in load_file(f).items()}
    megabytes = sum(t.numel() * t.element_size() for t in state.values()) / 2**20
    seconds = []
    for i in range(count):
        noisy = {k: v + 1e-3 * (i + 1) for k, v in state.items()}
        started = time.perf_counter()
        await engine.update_weights(noisy)
        seconds.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    print(f"update of {megabytes:.1f} MB: {median * 1000:.0f} ms ({median / megabytes * 1000:.2f} ms/MB)", file=sys.stderr)
    return {"megabytes": round(megabytes, 2), "seconds_median": round(median, 4),
            "seconds_per_mb": round(median / megabytes, 5), "mb_per_second": round(megabytes / median, 1),
            "samples": seconds}


def wide_model(tiny: Path, folder: Path, hidden: int, layers: int) -> Path:
    """A random-weight Qwen2 of the tiny model's vocabulary, ``hidden`` wide and ``layers`` deep (float32)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(tiny)
    config.update({"hidden_size": hidden, "num_hidden_layers": layers, "intermediate_size": 4 * hidden,
                   "num_attention_heads": hidden // 64, "num_key_value_heads": hidden // 256,
                   "layer_types": ["full_attention"] * layers})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (tiny / name).exists():
            shutil.copy(tiny / name, folder / name)
    return folder


async def rollout_busy(engine, args: argparse.Namespace) -> dict:
    from benchmarks.perf import rollout

    agentgym.register(rollout.ENV_ID, "benchmarks.perf.long_tail_env:LongTailEnv")
    policy = rollout.VariedLengthPolicy(engine, (8, 96))
    env_kwargs = {"median": 0.1, "tail": 20.0, "max_turns": 3 if args.quick else 4}
    tasks = TaskSet.generate(rollout.ENV_ID, args.rollout_episodes, split="test")
    figures = await rollout.measure("agentgym", engine, rollout.asynchronous, policy, tasks, args.concurrency, env_kwargs)
    return {"engine_busy": round(figures["engine_busy"], 3), **figures}


async def main(args: argparse.Namespace) -> dict:
    from agentgym.inference.vllm.engine import VLLMEngine

    with tempfile.TemporaryDirectory(prefix="agentgym-bench-") as scratch:
        tiny = init_model(Path(scratch) / "tiny", "tiny", seed=0)
        started = time.perf_counter()
        engine = VLLMEngine(tiny, seed=0, max_num_seqs=max(args.requests, args.concurrency))
        startup = time.perf_counter() - started
        print(f"vLLM up in {startup:.1f} s", file=sys.stderr)
        try:
            result = {"throughput": await throughput(engine, args),
                      "update_tiny": await updates(engine, tiny, args.updates),
                      "rollout": await rollout_busy(engine, args)}
        finally:
            await engine.close()
        if not args.quick:
            wide = wide_model(tiny, Path(scratch) / "wide", args.wide_hidden, args.wide_layers)
            engine = VLLMEngine(wide, seed=0)
            try:
                result["update_wide"] = await updates(engine, wide, args.updates)
            finally:
                await engine.close()
    ratio = result["throughput"]["overhead_ratio"]

    return {
        "benchmark": "vllm_engine",
        "overhead_ratio": ratio,
        "update_seconds_per_mb": result.get("update_wide", result["update_tiny"])["seconds_per_mb"],
        "engine_busy": result["rollout"]["engine_busy"],
        "goal": GOAL,
        "met": ratio >= GOAL["overhead_ratio"],
        "startup_seconds": round(startup, 1),
        **result,
        "parameters": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(args).items() if k != "out"},
        "machine": machine("torch", "vllm", "agentgym",
                           device="cpu" if not torch.cuda.is_available() else torch.cuda.get_device_name()),
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="One round, three updates, a short rollout, no wide model.")
    parser.add_argument("--requests", type=int, default=64, help="Prompts in flight in a throughput wave.")
    parser.add_argument("--prompt-tokens", type=int, nargs=2, default=(32, 512), metavar=("MIN", "MAX"))
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5, help="Waves per arm (the arms alternate).")
    parser.add_argument("--updates", type=int, default=5, help="Weight updates timed per model.")
    parser.add_argument("--wide-hidden", type=int, default=1024)
    parser.add_argument("--wide-layers", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=64, help="Episodes in flight in the rollout workload.")
    parser.add_argument("--rollout-episodes", type=int, default=192)
    parser.add_argument("--out", type=Path, default=RESULTS / "vllm_engine.json")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.updates, args.rollout_episodes = 1, 3, 64
    return args


if __name__ == "__main__":
    arguments = parse_args()
    outcome = asyncio.run(main(arguments))
    print(f"overhead ratio {outcome['overhead_ratio']:.3f} (goal >= {GOAL['overhead_ratio']}), "
          f"update {outcome['update_seconds_per_mb'] * 1000:.2f} ms/MB, engine busy {outcome['engine_busy']:.2f}")
    write_result(outcome, arguments.out)
