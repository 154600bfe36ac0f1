"""Atomic checkpoints of a run: weights, optimizer, schedule, RNG states and the data position.

The weights are a Hugging Face model folder (``model/``) and the optimizer state is written by every rank with
torch.distributed.checkpoint (``optimizer/``), keyed by parameter name: a run resumes under any strategy and
world size (on several nodes, the run dir must be on storage they share).

A checkpoint is written into a hidden temporary folder, fsynced, and renamed into place
(``checkpoints/step-000010``); only then does ``checkpoints/latest`` (a one-line file, itself replaced
atomically) point at it. A ``kill -9`` at any moment leaves the previous checkpoint intact and current.
"""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentgym.errors import AgentGymError

STATE_FILE = "trainer_state.pt"
LATEST = "latest"


@dataclass
class DataPosition:
    """Which train tasks (by position) have been consumed (trained on, or skipped as failed): every
    position below ``low`` and those in ``done`` above it; the holes between them are :meth:`pending`."""

    low: int = 0
    done: set[int] = field(default_factory=set)

    def consume(self, position: int) -> None:
        self.done.add(position)
        while self.low in self.done:
            self.done.remove(self.low)
            self.low += 1

    def pending(self) -> list[int]:
        """Positions below the highest consumed one that are not consumed yet (to be played first)."""
        high = max(self.done, default=self.low - 1) + 1
        return [p for p in range(self.low, high) if p not in self.done]

    @property
    def next(self) -> int:
        """The first position never handed out before the pending ones."""
        return max(self.done, default=self.low - 1) + 1

    def state(self) -> dict[str, Any]:
        return {"low": self.low, "done": sorted(self.done)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> DataPosition:
        return cls(low=int(state["low"]), done=set(state["done"]))


@dataclass
class TrainerState:
    """Everything besides the weights that a resumed run needs to go on as if never stopped."""

    step: int
    scheduler: dict[str, Any]
    data: DataPosition
    rng: dict[str, Any]
    sampler: dict[str, Any] | None = None
    """The task sampler's state: tasks handed out and not consumed, counts, the curriculum."""
    carried: int = 0
    """Episodes the carry-over buffer held (``rollout.carry_over``): a paused episode cannot be saved, so a resumed
    run discards them, and says how many."""


def rng_state() -> dict[str, Any]:
    """The RNG states of Python, NumPy and torch."""
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(run_dir: Path, learner: Any, tokenizer: Any, state: TrainerState, *, keep: int) -> Path:
    """Write step ``state.step``'s checkpoint atomically (``learner``, a :class:`Learner` or its ranks, writes the
    model and optimizer), point ``latest`` at it, keep the newest ``keep``."""
    root = run_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{state.step:06d}"
    tmp = root / f".tmp-{final.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    learner.save(tmp)
    tokenizer.save_pretrained(tmp / "model")
    torch.save({"step": state.step, "scheduler": state.scheduler,
                "data": state.data.state(), "rng": state.rng, "sampler": state.sampler,
                "carried": state.carried}, tmp / STATE_FILE)
    _fsync_tree(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _write_atomically(root / LATEST, final.name + "\n")
    for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-keep]:
        shutil.rmtree(old)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint ``latest`` points at, or ``None`` when the run has none."""
    pointer = run_dir / "checkpoints" / LATEST
    if not pointer.is_file():
        return None
    path = pointer.parent / pointer.read_text().strip()
    if not (path / STATE_FILE).is_file():
        raise AgentGymError(f"{pointer} names {path.name}, which is incomplete; the run dir was changed by hand")
    return path


def load_trainer_state(checkpoint: Path) -> TrainerState:
    raw = torch.load(checkpoint / STATE_FILE, weights_only=False)
    return TrainerState(step=raw["step"], scheduler=raw["scheduler"],
                        data=DataPosition.from_state(raw["data"]), rng=raw["rng"], sampler=raw.get("sampler"),
                        carried=raw.get("carried", 0))


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with path.open("rb") as f:
                os.fsync(f.fileno())
