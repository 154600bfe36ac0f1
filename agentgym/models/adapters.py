"""LoRA adapter folders (peft's ``save_pretrained`` layout, as a LoRA run's checkpoints hold them): recognised by
their ``adapter_config.json``, and loaded as their base model with the adapter merged in, so that an engine serves
one as a plain model and needs no peft of its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel

ADAPTER_CONFIG = "adapter_config.json"
"""peft's name for an adapter's settings (``peft.utils.CONFIG_NAME``)."""
ADAPTER_WEIGHTS = "adapter_model.safetensors"
"""peft's name for an adapter's weights (``peft.utils.SAFETENSORS_WEIGHTS_NAME``)."""


def adapter_base(folder: str | Path) -> Path | None:
    """The base model folder the adapter in ``folder`` was trained on; ``None`` where ``folder`` holds no adapter."""
    config = Path(folder) / ADAPTER_CONFIG
    if not config.is_file():
        return None
    base = json.loads(config.read_text()).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{config} names no base model (base_model_name_or_path)")
    return Path(base)


def load_merged(folder: str | Path, dtype: Any = None) -> PreTrainedModel:
    """The base model of the adapter in ``folder`` (from local files, in ``dtype``) with the adapter merged into its
    weights: a plain ``PreTrainedModel`` with the base model's parameter names."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from agentgym.progress import quiet_progress_bars

    base = adapter_base(folder)
    if base is None:
        raise ValueError(f"{folder} holds no LoRA adapter ({ADAPTER_CONFIG})")
    if not base.is_dir():
        raise FileNotFoundError(f"the adapter in {folder} was trained on {base}, which is not a local model folder")
    with quiet_progress_bars():
        model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype, local_files_only=True)
    merged: PreTrainedModel = PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
    return merged


def write_merged(folder: str | Path, out: Path) -> Path:
    """Write the adapter in ``folder`` merged into its base model, and the adapter folder's tokenizer, as a model
    folder at ``out`` (for an engine that loads only whole models from disk); returns ``out``."""
    from transformers import AutoTokenizer

    model = load_merged(folder, dtype="auto")
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(folder).save_pretrained(out)
    return out
