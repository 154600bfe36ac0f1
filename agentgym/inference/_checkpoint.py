"""New weights from a checkpoint folder, read the same way by every engine that holds a model."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file


def read_checkpoint(folder: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of the ``*.safetensors`` files in ``folder``."""
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(
            f"no *.safetensors files in {str(folder)!r}; save the checkpoint with save_pretrained"
        )
    state: dict[str, torch.Tensor] = {}
    for file in files:
        state.update(load_file(file))
    return state
