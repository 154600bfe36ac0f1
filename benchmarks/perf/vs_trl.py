"""agentgym beside the trainer a user of this size would pick instead: TRL's ``GRPOTrainer``, on the same work.

The same work in every arm: the quickstart's SFT start, FrozenLake (easy) tasks of the train split, groups of 8,
16 groups (128 trajectories) per optimizer step, learning rate 2e-4 constant, PPO clip 0.2 / 0.28, sequence-mean
loss, no KL, gradient norm clipped at 1, the same number of steps; the same held-out evaluation (200 test lakes,
agentgym's evaluator for every arm, every ``--eval-every`` steps, left out of the training time); one process per
arm, on this machine, one after the other. Arms:

- ``trl``: ``GRPOTrainer`` with its own generation: multi-turn through ``rollout_func``, every turn of the live
  episodes generated together by TRL's generation path (``transformers`` ``generate``, left-padded; the fastest
  TRL offers here, see ``docs/benchmarks.md``), the environment stepped between turns, environment tokens masked
  (``env_mask``). TRL generates and learns in turn, so it gets both cores' torch threads;
- ``agentgym_sync``: ``agentgym train quickstart`` at ``trainer.async_ratio=0``;
- ``agentgym_async``: the same at ``async_ratio`` 2 (the quickstart's own setting).

Each arm reports training wall time (steps only), trajectories per second, held-out success before and after and
its curve, steps and seconds to reach TRL's final success, peak memory (the arm's process's largest resident
set), and where its time goes. Writes ``benchmarks/results/vs_trl.json``, the last line printed. Goal: agentgym
async at least 2x TRL's trajectories per second, and reaching TRL's final success in at most half its time, its
own final success no worse than TRL's by more than the noise (two standard errors of the difference).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import itertools
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from agentgym.config import load_config
from agentgym.evaluation.records import RunSpec, tasks_digest
from agentgym.evaluation.run import run_evaluation
from agentgym.inference.torch.engine import TorchEngine
from agentgym.inference.types import SamplingParams
from agentgym.integrations.trl import EnvRollout, env_dataset, episode_reward
from agentgym.metrics_log import read_metrics
from agentgym.policies.lm import LMPolicy
from agentgym.tasks import TaskSet
from agentgym.trainers import TrainConfig, train
from benchmarks.perf.report import RESULTS, load_average, machine, write_result
from benchmarks.perf.warm_start import CONFIGS, warm_start

ARMS = ("trl", "agentgym_sync", "agentgym_async")
GOAL = {"throughput_ratio": 2.0, "time_to_trl_final_ratio": 0.5}
ASYNC_RATIO = {"agentgym_sync": 0, "agentgym_async": 2}
TRL_GENERATION: dict[str, dict[str, Any]] = {
    "transformers": {},
    "continuous": {"use_transformers_continuous_batching": True},  # with the model on transformers' sdpa
    "vllm": {"use_vllm": True, "vllm_mode": "colocate"},
}
"""GRPOConfig's generation settings of each path the TRL arm may take."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--model", type=Path, help="an SFT-warm-started model folder (default: build and SFT one)")
    parser.add_argument("--trl-threads", type=int, default=os.cpu_count() or 1,
                        help="torch threads of the TRL arm, which generates and learns in turn (default: every core)")
    parser.add_argument("--trl-generation", choices=TRL_GENERATION, default="transformers",
                        help="the TRL arm's generation path: transformers generate, transformers' continuous "
                             "batching, or vLLM colocated in its process")
    parser.add_argument("--quick", action="store_true", help="3 steps, 32 evaluation episodes, evaluated at the end")
    parser.add_argument("--out", type=Path, default=RESULTS / "vs_trl.json")
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)  # one arm, in this process (the parent's child)
    parser.add_argument("--part", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.eval_every, args.eval_episodes = 3, 3, 32
    if args.arm:
        torch.set_num_threads(args.trl_threads)  # the agentgym arms set their own (engine.threads)
        part = run_arm(args.arm, args.model, args.steps, args.eval_every, args.eval_episodes, args.part.parent,
                       generation=args.trl_generation)
        args.part.write_text(json.dumps(part) + "\n")
        return
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="agentgym-vs-trl-") as tmp:
        work = Path(tmp)
        model = args.model or warm_start(work)
        arms = {}
        for arm in args.arms:
            part = work / f"{arm}.json"
            subprocess.run([sys.executable, "-m", "benchmarks.perf.vs_trl", "--arm", arm, "--model", str(model),
                            "--part", str(part), "--steps", str(args.steps), "--eval-every", str(args.eval_every),
                            "--eval-episodes", str(args.eval_episodes), "--trl-threads", str(args.trl_threads),
                            "--trl-generation", args.trl_generation],
                           check=True,
                           env={**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"})
            arms[arm] = json.loads(part.read_text())
            print(f"{arm}: {json.dumps(arms[arm])}", file=sys.stderr, flush=True)
    report = _report(arms, args.eval_episodes)
    report["params"] = {"steps": args.steps, "eval_every": args.eval_every, "eval_episodes": args.eval_episodes,
                        "groups_per_step": 16, "group_size": 8, "lr": 2e-4, "env": "games/FrozenLake-v0 easy",
                        "trl_threads": args.trl_threads,
                        "trl_generation": args.trl_generation}
    report["machine"] = machine("torch", "trl", "transformers", load_before=load_before, load_after=load_average())
    write_result(report, args.out)


def run_arm(arm: str, model: Path, steps: int, eval_every: int, episodes: int, work: Path, *,
            generation: str = "transformers") -> dict[str, Any]:
    """Train one arm from ``model`` in this process; its measurements, with this process's peak memory."""
    config = load_config(TrainConfig, CONFIGS / "quickstart.yaml", [
        f"model.path={model}", f"trainer.steps={steps}", f"eval.every={eval_every}", f"eval.episodes={episodes}",
        "checkpoint.every=0", f"output_dir={work / arm}", f"trainer.async_ratio={ASYNC_RATIO.get(arm, 0)}"])
    result = _trl_arm(config, TRL_GENERATION[generation]) if arm == "trl" else _agentgym_arm(config)
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def _agentgym_arm(config: TrainConfig) -> dict[str, Any]:
    result = train(config)
    records = read_metrics(config.run_dir)
    steps = [r for r in records if r.get("time/step_seconds") is not None]
    seconds = [r["time/step_seconds"] for r in steps]
    waited = sum(r["time/wait_seconds"] for r in steps)
    published = sum(r.get("time/publish_seconds", 0.0) for r in steps)
    last = steps[-1]
    return _summary(config, seconds, _curve(records), {
        "learning": round(sum(seconds) - waited - published, 1),
        "weight_publish": round(published, 1),
        "waiting_for_rollout": round(waited, 1),
        "engine_busy_fraction": round(last.get("rollout/engine_busy", 0.0), 3),
        "env_share_of_episode_time": round(last.get("rollout/env_time_fraction", 0.0), 3),
    }, result.success_before, result.success_after)


def _summary(config: TrainConfig, seconds: list[float], curve: list[list[float]], split: dict[str, float],
             before: float | None, after: float | None) -> dict[str, Any]:
    """One arm's figures from its per-step seconds and its held-out curve."""
    elapsed = list(itertools.accumulate(seconds))
    return {
        "train_seconds": round(sum(seconds), 1),
        "trajectories": len(seconds) * config.batch_size,
        "trajectories_per_second": round(len(seconds) * config.batch_size / sum(seconds), 3),
        "success_before": before,
        "success_after": after,
        "curve": curve,
        "train_seconds_at": {str(step): round(elapsed[step - 1], 1) for step, _ in curve if step},
        "time_split_seconds": split,
    }


def _curve(records: list[dict[str, Any]]) -> list[list[float]]:
    return [[r["step"], r["eval/success_rate"]] for r in records if r.get("eval/success_rate") is not None]


def _trl_arm(config: TrainConfig, generation: dict[str, Any]) -> dict[str, Any]:
    """TRL's GRPOTrainer on the same work; evaluated by agentgym's evaluator from a callback (time left out)."""
    torch.manual_seed(config.trainer.seed)
    source = config.sources[0]
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    attention = {"attn_implementation": "sdpa"} if generation.get("use_transformers_continuous_batching") else {}
    model = AutoModelForCausalLM.from_pretrained(config.model.path, **attention)
    dataset = env_dataset(source.id, config.trainer.steps * config.trainer.groups_per_step,
                          difficulties=source.difficulties, tokenizer=tokenizer, env_kwargs=source.kwargs)
    rollout = EnvRollout(dataset, env_kwargs=source.kwargs, max_context=config.engine.max_context, generation="trl")
    clock = StepClock(config)
    args = GRPOConfig(
        output_dir=str(config.run_dir), max_steps=config.trainer.steps, seed=config.trainer.seed, use_cpu=True,
        per_device_train_batch_size=config.trainer.groups_per_step, num_generations=config.trainer.group_size,
        gradient_accumulation_steps=config.trainer.group_size,  # 16 x 8 = one generation batch of 128 per step
        learning_rate=config.optim.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
        adam_beta1=config.optim.betas[0], adam_beta2=config.optim.betas[1], max_grad_norm=config.optim.grad_clip,
        beta=0.0, epsilon=config.algorithm.loss.clip_low, epsilon_high=config.algorithm.loss.clip_high,
        loss_type="grpo", scale_rewards="group", num_iterations=1, temperature=config.sampling.temperature,
        top_p=1.0, max_completion_length=config.sampling.max_tokens, logging_steps=1, save_strategy="no",
        report_to="none", bf16=False, dataloader_num_workers=0, disable_tqdm=True,
        gradient_checkpointing=False,  # TRL's default recomputes activations: slower, and memory is no issue here
        vllm_max_model_length=config.engine.max_context, **generation,
    )
    trainer = GRPOTrainer(model=model, args=args, processing_class=tokenizer, reward_funcs=episode_reward,
                          train_dataset=dataset, rollout_func=rollout, callbacks=[clock])
    clock.evaluate(trainer.model, 0)
    trainer.train()
    errors = [r["episode_reward/error_fraction"] for r in trainer.state.log_history
              if "episode_reward/error_fraction" in r]
    if not errors or max(errors) > 0:
        raise RuntimeError(f"TRL's episodes failed on infrastructure (error fraction by step: {errors}); the warnings "
                           "above say why")
    split = {"generation": round(rollout.generation_seconds, 1),
             "env_and_episode_plumbing": round(rollout.seconds - rollout.generation_seconds, 1),
             "learning": round(sum(clock.seconds) - rollout.seconds, 1)}
    curve = clock.curve
    return _summary(config, clock.seconds, curve, split, curve[0][1], curve[-1][1])


class StepClock(TrainerCallback):
    """A TRL callback: each optimizer step's seconds, and agentgym's held-out evaluation of the live model every
    ``eval.every`` steps and at the end, outside the steps' time."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        self.seconds: list[float] = []
        self.curve: list[list[float]] = []
        self._started = 0.0

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._started = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self.seconds.append(time.perf_counter() - self._started)
        every, step = self.config.eval.every, state.global_step
        if step == self.config.trainer.steps or (every and step % every == 0):
            self.evaluate(model, step)

    def evaluate(self, model: Any, step: int) -> None:
        """Score a copy of ``model``: the torch engine would switch the live one to its own CPU attention."""
        scored = copy.deepcopy(model)
        scored.config.use_cache = True  # TRL turns the cache off for training
        self.curve.append([step, _evaluate(scored, self.config, step)])


def _evaluate(model: Any, config: TrainConfig, step: int) -> float:
    """agentgym's held-out evaluation of ``model`` as the trainer runs it: the test split's first ``eval.episodes``
    lakes, the training sampling, on the torch engine."""
    source = config.sources[0]
    tasks = list(TaskSet.generate(source.id, config.eval.episodes, split="test", difficulties=source.difficulties))
    sampling = SamplingParams(temperature=config.eval.temperature or config.sampling.temperature,
                              top_p=config.sampling.top_p, max_tokens=config.sampling.max_tokens)
    spec = RunSpec(agent=f"trl-step-{step}", engine="torch", model=config.model.path, sampling=sampling,
                   tasks_sha256=tasks_digest(tasks), seed=config.trainer.seed, env_args={source.id: source.kwargs})
    model.eval()

    async def play() -> float:
        engine = TorchEngine(model, tokenizer=AutoTokenizer.from_pretrained(config.model.path),
                             max_batch_size=config.engine.max_batch_size)
        try:
            policy = LMPolicy(engine, sampling, max_context=config.engine.max_context, name="trl")
            scores = await run_evaluation(spec, tasks, policy, config.run_dir / "eval" / f"step-{step:06d}",
                                          concurrency=config.eval.concurrency)
            return scores.success_rate
        finally:
            await engine.close()

    return asyncio.run(play())


def _report(arms: dict[str, dict[str, Any]], episodes: int) -> dict[str, Any]:
    """Each arm beside TRL: the throughput ratio, the steps and seconds to reach TRL's final success, and the
    goal's verdicts (noise: two standard errors of a difference of two success rates over ``episodes`` lakes)."""
    trl = arms.get("trl")
    for name, arm in arms.items():
        if trl is None or name == "trl":
            continue
        arm["throughput_vs_trl"] = round(arm["trajectories_per_second"] / trl["trajectories_per_second"], 3)
        reached = next(((step, success) for step, success in arm["curve"] if step and
                        success >= trl["success_after"]), None)
        arm["reaches_trl_final_at_step"] = reached[0] if reached else None
        arm["reaches_trl_final_seconds"] = arm["train_seconds_at"][str(reached[0])] if reached else None
        arm["time_to_trl_final_ratio"] = (round(arm["reaches_trl_final_seconds"] / trl["train_seconds"], 3)
                                          if reached else None)
    report: dict[str, Any] = {"benchmark": "vs_trl", "arms": arms, "goal": GOAL}
    fast = arms.get("agentgym_async")
    if trl is not None and fast is not None:
        p, q = fast["success_after"], trl["success_after"]
        noise = 2 * math.sqrt((p * (1 - p) + q * (1 - q)) / episodes)
        verdicts = {
            "throughput_2x": fast["throughput_vs_trl"] >= GOAL["throughput_ratio"],
            "half_the_time_to_trl_final": fast["time_to_trl_final_ratio"] is not None
            and fast["time_to_trl_final_ratio"] <= GOAL["time_to_trl_final_ratio"],
            "final_success_within_noise": q - p <= noise,
        }
        report.update({"noise_points": round(100 * noise, 1), "verdicts": verdicts,
                       "meets_goal": all(verdicts.values())})
    return report


if __name__ == "__main__":
    main()
