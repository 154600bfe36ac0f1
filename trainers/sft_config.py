"""The settings of an SFT warm start (``agentgym sft CONFIG.yaml``), validated before torch is imported."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from agentgym.config import Config
from agentgym.tracking.config import TrackingConfig

SchedulerName = Literal[
    "linear",
    "cosine",
    "cosine_with_restarts",
    "polynomial",
    "constant",
    "constant_with_warmup",
    "inverse_sqrt",
]


class SFTData(Config):
    """Where the demonstrations come from: the oracle of one registered environment on train-split tasks."""

    env: str = "games/FrozenLake-v0"
    """The registered environment id whose oracle is demonstrated."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments passed to ``make`` for every episode."""
    episodes: int = Field(32, ge=1)
    """Oracle episodes played (train split); failed or errored ones are left out."""
    difficulties: list[str] | None = None
    """Difficulty levels cycled through over the episodes (none: the environment's default)."""
    seed_start: int = Field(0, ge=0)
    """The first train-split seed; episodes use consecutive seeds from here."""
    successful_only: bool = True
    """Keep only the episodes the oracle solved."""
    noise: float = Field(0.0, ge=0, lt=1)
    """Share of turns that play a random action instead of the oracle's, left out of the loss: the
    demonstrations then show recoveries from mistakes (DART)."""
    concurrency: int = Field(16, ge=1)
    """Episodes played at once while collecting."""


class TRLSettings(Config):
    """The part of TRL's ``SFTConfig`` a warm start sets: TRL's names, and its defaults except where noted."""

    learning_rate: float = Field(2.0e-5, gt=0)
    """Peak learning rate of AdamW."""
    num_train_epochs: float = Field(3.0, gt=0)
    """Passes over the demonstrations (ignored when ``max_steps`` is positive)."""
    max_steps: int = Field(-1, ge=-1)
    """Optimizer steps in all; -1 trains for ``num_train_epochs``."""
    per_device_train_batch_size: int = Field(8, ge=1)
    """Demonstrations per forward pass."""
    gradient_accumulation_steps: int = Field(1, ge=1)
    """Forward passes summed into one optimizer step."""
    lr_scheduler_type: SchedulerName = "linear"
    """Learning-rate schedule after warmup."""
    warmup_steps: float = Field(0.0, ge=0)
    """Linear warmup: a whole number of steps, or a fraction (below 1) of all steps."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW weight decay."""
    max_grad_norm: float = Field(1.0, ge=0)
    """Gradient clipping norm (0: no clipping)."""
    max_length: int | None = Field(1024, ge=1)
    """Tokens kept per demonstration (the end is cut off); null keeps whole demonstrations."""
    logging_steps: int = Field(10, ge=1)
    """Optimizer steps between logged losses."""
    seed: int = 42
    """Seeds the model's training randomness and the data order."""
    activation_checkpointing: bool = False
    """Recompute activations in the backward pass to save memory (formerly ``gradient_checkpointing``; on by
    default in TRL, off here for small models)."""
    bf16: bool | None = None
    """bfloat16 mixed precision; null: on where a CUDA GPU supports it, off on CPU (TRL's default is true)."""


class SFTRunConfig(Config):
    """An SFT warm start: a local causal LM trained on oracle demonstrations, loss on agent tokens only."""

    model: Path
    """A local Hugging Face model folder (weights, tokenizer with a chat template)."""
    output_dir: Path = Path("runs/sft")
    """Where the run writes ``config.yaml``, ``metrics.jsonl`` and the trained ``model/``."""
    data: SFTData | list[SFTData] = SFTData()
    """One environment's demonstrations, or a list of several environments' (a mixture), trained on together."""
    trl: TRLSettings = TRLSettings()
    logging: TrackingConfig = TrackingConfig()
    """Experiment trackers the run's losses and config go to (``logging.trackers: [tensorboard, wandb, mlflow, trackio]``)."""

    @property
    def sources(self) -> list[SFTData]:
        """The environments demonstrated, as a list."""
        return self.data if isinstance(self.data, list) else [self.data]
