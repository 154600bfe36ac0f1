"""SFT warm start: a local causal LM trained with TRL's ``SFTTrainer`` on oracle demonstrations of any
registered environment, on exactly the token layout RL trains on, with the loss on the agent's tokens only.

The demonstrations are pre-tokenised rows ``{"input_ids", "assistant_masks"}`` (the trajectory's ``token_ids``
and ``loss_mask``); TRL turns them into labels that are ``-100`` wherever the mask is 0, so the system prompt,
the tool schemas and the observations are context, never targets.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import torch
import transformers
from rich.console import Console
from transformers import AutoTokenizer, PreTrainedModel, TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from trl import SFTConfig, SFTTrainer

from agentgym.config import dump_config
from agentgym.metrics_log import JSONL_NAME, MetricsLog
from agentgym.policies import get_policy
from agentgym.policies.demonstrations import DemonstrationPolicy
from agentgym.rollout.config import RolloutConfig
from agentgym.rollout.iterate import iterate_rollouts
from agentgym.tasks import Task, TaskSet
from agentgym.tracking import open_trackers
from agentgym.trainers.sft_config import SFTData, SFTRunConfig, TRLSettings

__all__ = [
    "SFTData",
    "SFTResult",
    "SFTRunConfig",
    "TRLSettings",
    "demonstration_rows",
    "run_sft",
    "sft_trainer",
]

Row = dict[str, list[int]]


@dataclass(frozen=True)
class SFTResult:
    """What a warm start did: the data it trained on, its losses and where the model is."""

    model_dir: Path
    """The trained model and its tokenizer (``save_pretrained``)."""
    demonstrations: int
    tokens: int
    """Tokens in all the demonstrations (before ``trl.max_length`` cuts any)."""
    agent_tokens: int
    """Tokens that carried loss (the oracle's actions and their eos tokens)."""
    steps: int
    train_loss: float
    """TRL's mean training loss over the run."""
    first_loss: float
    """The loss of the first optimizer step."""
    last_loss: float
    """The last logged loss (every ``trl.logging_steps`` steps)."""
    seconds: float


def demonstration_rows(
    env_id: str,
    tokenizer: Any,
    tasks: Iterable[Task],
    *,
    env_kwargs: dict[str, Any] | None = None,
    successful_only: bool = True,
    noise: float = 0.0,
    concurrency: int = 16,
) -> list[Row]:
    """Play the oracle on ``tasks`` (a ``noise`` share of turns random, see :class:`DemonstrationPolicy`); one
    ``{"input_ids", "assistant_masks"}`` row per kept episode's token segment (in finishing order): the
    chat-template tokens, and 1 on the agent's tokens to learn. Errored episodes are left out."""
    policy = DemonstrationPolicy(get_policy("oracle"), tokenizer, noise=noise)
    rows = []
    for trajectory in iterate_rollouts(
        env_id, policy, tasks, RolloutConfig(concurrency=concurrency), env_kwargs=env_kwargs
    ):
        if trajectory.status == "ok" and (trajectory.success or not successful_only):
            rows += [{"input_ids": trajectory.token_ids[start:end], "assistant_masks": trajectory.loss_mask[start:end]}
                     for start, end in trajectory.segment_spans()]
    return rows


def _training_arguments(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` under the names this ``transformers`` takes: before 5.20 (as vLLM 0.32 pins it)
    ``activation_checkpointing`` was called ``gradient_checkpointing``."""
    if "activation_checkpointing" not in {f.name for f in dataclasses.fields(SFTConfig)}:
        settings["gradient_checkpointing"] = settings.pop("activation_checkpointing")
    return settings


def sft_trainer(
    model: str | Path | PreTrainedModel,
    tokenizer: Any,
    rows: Sequence[Row],
    settings: TRLSettings,
    output_dir: str | Path,
    *,
    callbacks: Sequence[TrainerCallback] = (),
) -> SFTTrainer:
    """A ``SFTTrainer`` on ``rows`` with ``settings``: float32 on CPU, the first step's loss logged, no
    checkpoints, no hub, no reporting, no printing (pass a callback to see the logs)."""
    args = SFTConfig(
        output_dir=str(output_dir),
        **_training_arguments(settings.model_dump(exclude={"bf16"})),
        bf16=_bf16(settings),
        fp16=False,
        use_cpu=not torch.cuda.is_available(),
        logging_first_step=True,
        save_strategy="no",
        report_to=[],
        push_to_hub=False,
        disable_tqdm=True,
    )
    with _no_progress_bars():
        trainer = SFTTrainer(
            model=model if isinstance(model, PreTrainedModel) else str(model),
            args=args,
            train_dataset=datasets.Dataset.from_list(list(rows)),
            processing_class=tokenizer,
            callbacks=list(callbacks),
        )
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    return trainer


def run_sft(config: SFTRunConfig, *, console: Console | None = None) -> SFTResult:
    """Collect the demonstrations, train, and write ``config.yaml``, ``metrics.jsonl`` and ``model/`` into
    ``config.output_dir``; progress goes to ``console`` (none: silent)."""
    console = console or Console(quiet=True)
    started = time.perf_counter()
    out = config.output_dir
    if (out / JSONL_NAME).is_file() and (out / JSONL_NAME).stat().st_size:
        raise FileExistsError(
            f"{out} already holds a run ({JSONL_NAME}); choose another output_dir or delete it"
        )
    if not (config.model / "config.json").is_file():
        raise ValueError(
            f"model: {config.model} is not a model folder (no config.json); "
            "build one with `agentgym model init --preset tiny DIR`"
        )
    _bf16(config.trl)
    tokenizer = AutoTokenizer.from_pretrained(config.model)
    rows = [row for data in config.sources for row in _collect(data, tokenizer, console)]
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(dump_config(config), encoding="utf-8")
    agent_tokens = sum(sum(row["assistant_masks"]) for row in rows)
    console.print(f"training {config.model} on {len(rows)} demonstrations ({agent_tokens:,} agent tokens)")
    limit = config.trl.max_length
    if limit is not None and (cut := sum(len(row["input_ids"]) > limit for row in rows)):
        console.print(f"[yellow]{cut} demonstrations exceed trl.max_length={limit}; their ends are cut[/]")
    with MetricsLog(out, trackers=open_trackers(config.logging, out, config.model_dump(mode="json"))) as log:
        logger = _LogCallback(log, console)
        trainer = sft_trainer(config.model, tokenizer, rows, config.trl, out, callbacks=[logger])
        output = trainer.train()
    model_dir = out / "model"
    with _no_progress_bars():
        trainer.model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
    return SFTResult(
        model_dir=model_dir,
        demonstrations=len(rows),
        tokens=sum(len(row["input_ids"]) for row in rows),
        agent_tokens=agent_tokens,
        steps=output.global_step,
        train_loss=float(output.training_loss),
        first_loss=logger.losses[0],
        last_loss=logger.losses[-1],
        seconds=time.perf_counter() - started,
    )


def _bf16(settings: TRLSettings) -> bool:
    """``trl.bf16``, or where unset, whether a CUDA GPU supports bfloat16."""
    cuda = torch.cuda.is_available()
    if settings.bf16 and not cuda:
        raise ValueError("trl.bf16=true needs a CUDA GPU; set trl.bf16=false (or null) to train on CPU")
    return settings.bf16 if settings.bf16 is not None else cuda and torch.cuda.is_bf16_supported()


def _collect(data: SFTData, tokenizer: Any, console: Console) -> list[Row]:
    difficulties = data.difficulties or [None]
    tasks = TaskSet.generate(
        data.env, data.episodes, split="train", start=data.seed_start, difficulties=difficulties
    )
    console.print(f"playing {data.episodes} oracle episodes of {data.env}")
    rows = demonstration_rows(
        data.env,
        tokenizer,
        tasks,
        env_kwargs=data.env_kwargs,
        successful_only=data.successful_only,
        noise=data.noise,
        concurrency=data.concurrency,
    )
    if not rows:
        kept = "successful " if data.successful_only else ""
        raise ValueError(
            f"data: none of the {data.episodes} oracle episodes of {data.env} gave a {kept}demonstration; "
            "check data.env, data.env_kwargs and data.difficulties"
        )
    return rows


class _LogCallback(TrainerCallback):
    """Writes each of TRL's log records to the metrics log as ``sft/<key>`` and prints the training losses."""

    def __init__(self, log: MetricsLog, console: Console) -> None:
        self.log = log
        self.console = console
        self.losses: list[float] = []

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        numbers = {
            k: float(v)
            for k, v in (logs or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        if numbers:
            self.log.log(state.global_step, {f"sft/{k}": v for k, v in numbers.items()})
        loss = numbers.get("loss")
        if loss is not None:
            self.losses.append(loss)
            self.console.print(f"step {state.global_step}/{state.max_steps}  loss {loss:.4f}")


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """No ``datasets`` or ``transformers`` progress bars (preparing rows, loading, saving); restored after."""
    datasets_bars = not datasets.are_progress_bars_disabled()
    transformers_bars = transformers.utils.logging.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    try:
        yield
    finally:
        if datasets_bars:
            datasets.enable_progress_bars()
        if transformers_bars:
            transformers.utils.logging.enable_progress_bar()
