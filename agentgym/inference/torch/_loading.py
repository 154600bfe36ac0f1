"""Loading for the torch engine, from local files only: the model and tokenizer, the end-of-turn
tokens, and new weights checked before they are copied."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from agentgym.inference.torch._gqa_attention import use_on_cpu
from agentgym.models.adapters import adapter_base, load_merged
from agentgym.progress import quiet_progress_bars


def load_model(
    model: str | Path | PreTrainedModel,
    tokenizer: Any,
    device: str | torch.device,
    dtype: str | torch.dtype | None,
) -> tuple[PreTrainedModel, Any]:
    """The model on its device and dtype, and its tokenizer, from local files only (a LoRA adapter folder: its base
    model with the adapter merged in). On the CPU, grouped-query attention is left to torch's kernel
    (:mod:`agentgym.inference.torch._gqa_attention`)."""
    if isinstance(dtype, str):
        named = getattr(torch, dtype, None)
        if not isinstance(named, torch.dtype):
            raise ValueError(  # noqa: TRY004 - a str is the right type; its value names no torch dtype
                f"dtype {dtype!r} is not a torch dtype; use e.g. 'float32' or 'bfloat16'")
        dtype = named
    if isinstance(model, PreTrainedModel):
        target = next(model.parameters()).device if device == "auto" else torch.device(device)
        move(model, target, dtype)
        source = Path(model.name_or_path) if model.name_or_path else None
    else:
        source = Path(model)
        if not source.is_dir():
            raise FileNotFoundError(
                f"model {str(model)!r} is not a local folder; the torch engine loads only local checkpoints "
                "(write one with save_pretrained or agentgym.models.init_model)"
            )
        target = torch.device(
            ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        )
        if dtype is None:
            dtype = torch.float32 if target.type == "cpu" else torch.bfloat16
        if adapter_base(source) is not None:
            model = load_merged(source, dtype)
        else:
            with quiet_progress_bars():
                model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, local_files_only=True)
        move(model, target)
    use_on_cpu(model)
    if tokenizer is None or isinstance(tokenizer, str | Path):
        folder = Path(tokenizer) if tokenizer is not None else source
        if folder is None or not folder.is_dir():
            raise ValueError(
                "pass tokenizer= (a tokenizer or a local folder) when the model has no local folder"
            )
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return model, tokenizer


def move(model: PreTrainedModel, device: str | torch.device, dtype: torch.dtype | None = None) -> None:
    """``model.to(device)``, and to ``dtype`` if given (in place, as a module's ``to`` is): the type checker
    reads transformers' ``PreTrainedModel.to`` (made with ``functools.wraps``) as taking ``self`` first."""
    if dtype is None:
        model.to(device)  # type: ignore[arg-type]
    else:
        model.to(device=device, dtype=dtype)  # type: ignore[call-arg]


def eos_token_ids(tokenizer: Any, model: PreTrainedModel) -> frozenset[int]:
    """The tokens that end a response: the tokenizer's and generation config's eos, and ``<|im_end|>``."""
    ids: set[int] = set()
    generation_config = getattr(model, "generation_config", None)
    for value in (tokenizer.eos_token_id, getattr(generation_config, "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif value is not None:
            ids.update(value)
    end_of_turn = tokenizer.get_vocab().get("<|im_end|>")
    if end_of_turn is not None:
        ids.add(end_of_turn)
    return frozenset(ids)


def load_state(model: PreTrainedModel, state: Mapping[str, Any]) -> None:
    """Copy ``state`` into ``model`` after checking every key and shape (tied weights may be omitted)."""
    own = model.state_dict()
    unexpected = sorted(set(state) - set(own))
    by_storage: dict[int, set[str]] = {}
    for key, tensor in own.items():
        by_storage.setdefault(tensor.data_ptr(), set()).add(key)
    missing = sorted(
        key for key in set(own) - set(state) if not by_storage[own[key].data_ptr()] & state.keys()
    )
    if unexpected or missing:
        raise ValueError(
            f"weights do not match the served model: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    wrong = [key for key in state if tuple(state[key].shape) != tuple(own[key].shape)]
    if wrong:
        raise ValueError(
            f"weights have the wrong shape for {wrong[:5]}, e.g. {wrong[0]}: "
            f"{tuple(state[wrong[0]].shape)} instead of {tuple(own[wrong[0]].shape)}"
        )
    model.load_state_dict(dict(state), strict=False)
