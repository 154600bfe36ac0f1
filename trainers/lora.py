"""LoRA adapters (peft) on the trained model (``model.lora``).

peft puts its adapter layers into the Hugging Face model in place, so the learner keeps running that model (its
target layers now add ``scale * B @ A``) under every strategy, and only the adapters require a gradient. What
leaves the trainer: the merged weights, under the base model's parameter names, for the engines (which then need
no peft); and the adapter alone, as a peft adapter folder naming its base model, for checkpoints.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
from peft.tuners.lora import Linear as LoraLinear
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel

from agentgym.errors import AgentGymError
from agentgym.models.adapters import ADAPTER_WEIGHTS
from agentgym.trainers.config import LoraSection
from agentgym.trainers.parallel import whole

ADAPTER = "default"
"""The name peft gives the one adapter; it is part of the adapter's parameter names in the model."""


def peft_config(lora: LoraSection, base: str | None = None) -> LoraConfig:
    """peft's settings for ``lora`` (no bias trained), naming ``base`` as the model it adapts."""
    return LoraConfig(r=lora.r, lora_alpha=lora.alpha, target_modules=lora.target_modules, lora_dropout=lora.dropout,
                      bias="none", task_type="CAUSAL_LM", base_model_name_or_path=base)


def add_adapters(model: PreTrainedModel, lora: LoraSection, adapter: Path | None = None) -> PreTrainedModel:
    """``model`` itself with trainable adapters in its target layers and every other weight frozen; the adapters
    start from the weights of the adapter folder ``adapter`` (a checkpoint's), else as peft starts them (``B = 0``:
    the model computes what it did)."""
    with warnings.catch_warnings():  # peft asks the model a question transformers has renamed
        warnings.simplefilter("ignore", FutureWarning)
        peft_model = get_peft_model(model, peft_config(lora))
    _only_linear(model)
    if adapter is not None:
        loaded = set_peft_model_state_dict(peft_model, load_file(adapter / ADAPTER_WEIGHTS))
        if loaded.unexpected_keys:
            raise AgentGymError(f"the adapter in {adapter} does not fit model.lora: unexpected "
                                f"{loaded.unexpected_keys[:3]}")
    return model


def check_targets(folder: Path, lora: LoraSection) -> None:
    """Raise ``ValueError`` naming ``model.lora.target_modules`` where they match no layer of the model in ``folder``
    or a layer that cannot take an adapter here (built on the meta device: no weights are read)."""
    if not (folder / "config.json").is_file():
        return  # not a model folder: loading it says so
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder))
    try:
        add_adapters(model, lora)
    except (ValueError, AgentGymError) as error:
        raise ValueError(f"model.lora.target_modules {lora.target_modules}: {error}") from None


def _only_linear(model: PreTrainedModel) -> None:
    """Adapters only on linear layers, not the output layer (tied to the embeddings in many models, and taken whole
    by the engines): what :func:`merged_weights` merges."""
    output = model.get_output_embeddings()
    for name, module in model.named_modules():
        if hasattr(module, "lora_A") and (not isinstance(module, LoraLinear) or module is output
                                          or getattr(module, "fan_in_fan_out", False)):
            kind = "the output layer" if module is output else type(getattr(module, "base_layer", module)).__name__
            raise ValueError(f"{name} ({kind}) takes no adapter: adapters go on linear layers but the output layer")


def adapter_weights(model: PreTrainedModel) -> dict[str, torch.Tensor]:
    """The adapters' whole weights by parameter name (under fsdp every rank must call it: the shards are gathered)."""
    return {name: whole(p) for name, p in model.named_parameters() if p.requires_grad}


def save_adapter(weights: dict[str, torch.Tensor], lora: LoraSection, base: str, folder: Path) -> None:
    """Write :func:`adapter_weights` as a peft adapter folder (``adapter_config.json`` naming the base model folder,
    ``adapter_model.safetensors``), which ``peft.PeftModel.from_pretrained`` and :func:`add_adapters` load."""
    folder.mkdir(parents=True, exist_ok=True)
    peft_config(lora, str(Path(base).resolve())).save_pretrained(str(folder))
    tensors = {"base_model.model." + name.replace(f".{ADAPTER}.", "."): tensor.cpu().contiguous()
               for name, tensor in weights.items()}
    save_file(tensors, str(folder / ADAPTER_WEIGHTS), metadata={"format": "pt"})


def merged_weights(state: dict[str, torch.Tensor], scale: float) -> dict[str, torch.Tensor]:
    """The base model's state dict from a state dict of the model with adapters: each adapted layer's weight is
    ``W + scale * B @ A`` (summed in float32, then in ``W``'s dtype) under its base name; the adapters left out."""
    merged = {}
    for key, value in state.items():
        if f".lora_A.{ADAPTER}." in key or f".lora_B.{ADAPTER}." in key:
            continue
        module, adapted, tail = key.partition(".base_layer.")
        if not adapted:
            merged[key] = value
            continue
        if tail == "weight":
            a, b = state[f"{module}.lora_A.{ADAPTER}.weight"], state[f"{module}.lora_B.{ADAPTER}.weight"]
            value = (value.float() + scale * (b.float() @ a.float())).to(value.dtype)
        merged[f"{module}.{tail}"] = value
    return merged
