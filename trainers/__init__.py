"""Trainers: the asynchronous decoupled trainer with off-policy corrections (``async_ratio: 0`` is its
synchronous baseline) in one process or on several ranks (DDP or FSDP2, launched by Ray), SFT warm start
through TRL, checkpoints and weight sync.

``train``, ``resume``, ``TrainConfig`` and ``TrainResult`` are imported on first use, so the CLI can read
a config before torch loads.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "TrainConfig": "agentgym.trainers.config",
    "TrainResult": "agentgym.trainers.loop",
    "resume": "agentgym.trainers.loop",
    "train": "agentgym.trainers.loop",
}
__all__ = ["TrainConfig", "TrainResult", "resume", "train"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agentgym.trainers' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
