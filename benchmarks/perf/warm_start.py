"""The quickstart's SFT warm start, built afresh for a benchmark that trains from it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentgym.config import load_config
from agentgym.models import init_model
from agentgym.trainers.sft import SFTRunConfig, run_sft

CONFIGS = Path(__file__).resolve().parents[2] / "trainers" / "configs"


def warm_start(work: Path, sft_config: Path = CONFIGS / "sft-quickstart.yaml", overrides: Sequence[str] = ()) -> Path:
    """Build the tiny model in ``work`` and SFT it on oracle demonstrations as ``sft_config`` says (the quickstart's
    by default), with ``overrides``; the model's folder."""
    init_model(work / "tiny-model", preset="tiny", seed=0)
    sft = run_sft(load_config(SFTRunConfig, sft_config,
                              [f"model={work / 'tiny-model'}", f"output_dir={work / 'sft'}", *overrides]))
    return sft.model_dir
