"""Build a small model from a preset and a locally trained tokenizer; nothing is fetched from a hub."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypedDict

from pydantic import BaseModel

from agentgym.models.corpus import corpus
from agentgym.models.presets import Arch, check_arch, get_preset
from agentgym.models.tokenizer import EOS_TOKEN, PAD_TOKEN, train_tokenizer


class ModelInfo(BaseModel):
    """What a model folder holds, as ``agentgym model info`` shows it."""

    path: str
    arch: str
    """The ``transformers`` class, e.g. ``Qwen2ForCausalLM``."""
    parameters: int
    """Distinct parameters (tied embeddings counted once)."""
    vocab_size: int
    num_hidden_layers: int
    hidden_size: int
    chat_template: bool
    """Whether the tokenizer carries a chat template."""


def init_model(
    out_dir: str | Path,
    preset: str = "tiny",
    *,
    arch: Arch = "qwen2",
    seed: int = 0,
    corpus_episodes: int | None = None,
) -> Path:
    """Train the tokenizer, build the model of ``preset`` with weights seeded by ``seed`` and save both
    (safetensors, float32) into ``out_dir``; the same arguments give byte-identical files.

    ``corpus_episodes`` is the number of episodes played per environment, difficulty, policy and
    tool-call format for the tokenizer's corpus (default: the preset's)."""
    import transformers

    shape = get_preset(preset)
    class_name = check_arch(arch)
    episodes = shape.corpus_episodes if corpus_episodes is None else corpus_episodes
    if episodes < 1:
        raise ValueError(f"corpus_episodes must be at least 1, got {episodes}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    tokenizer = train_tokenizer(corpus(episodes, seed=seed), shape.vocab_size)
    special_ids = special_token_ids(tokenizer)
    config_class = transformers.Qwen2Config if arch == "qwen2" else transformers.LlamaConfig
    config = config_class(
        vocab_size=max(len(tokenizer), shape.embedding_rows or 0),
        rope_parameters={"rope_type": "default", "rope_theta": shape.rope_theta},
        architectures=[class_name],
        **shape.config_kwargs(),
        **special_ids,
    )
    save_model(seeded_model(getattr(transformers, class_name), config, seed), out)
    tokenizer.save_pretrained(out)
    _write_for_older_readers(out, shape.rope_theta)
    return out


class SpecialTokenIds(TypedDict):
    """The special-token ids a model config takes from agentgym's tokenizer."""

    eos_token_id: int
    pad_token_id: int
    bos_token_id: None


def special_token_ids(tokenizer: Any) -> SpecialTokenIds:
    """The end-of-turn and padding ids of agentgym's trained tokenizer (no beginning-of-sequence token)."""
    return {
        "eos_token_id": tokenizer.convert_tokens_to_ids(EOS_TOKEN),
        "pad_token_id": tokenizer.convert_tokens_to_ids(PAD_TOKEN),
        "bos_token_id": None,
    }


def seeded_model(model_class: Any, config: Any, seed: int) -> Any:
    """``model_class(config)`` in float32 with weights drawn from ``seed`` (the global RNG left as it was)."""
    import torch
    import transformers

    config.dtype = torch.float32
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(config).to(torch.float32).eval()
    ids = {k: getattr(config, k, None) for k in ("eos_token_id", "pad_token_id", "bos_token_id")}
    model.generation_config = transformers.GenerationConfig(**ids)  # type: ignore[no-untyped-call]
    return model


def save_model(model: Any, out: Path) -> None:
    """Save ``model``'s config and safetensors weights into ``out``, without a progress bar."""
    from agentgym.progress import quiet_progress_bars

    with quiet_progress_bars():
        model.save_pretrained(out, safe_serialization=True)


def _write_for_older_readers(out: Path, rope_theta: float) -> None:
    """Make the folder readable by ``transformers`` 4.x too (older vLLM releases among them): ``rope_theta``
    and ``torch_dtype`` at the top of ``config.json``, and a tokenizer class that 4.x knows."""
    _update_json(out / "config.json", {"rope_theta": rope_theta, "torch_dtype": "float32"})
    _update_json(out / "tokenizer_config.json", {"tokenizer_class": "PreTrainedTokenizerFast"})


def _update_json(path: Path, fields: dict[str, Any]) -> None:
    data: dict[str, Any] = json.loads(path.read_text())
    data.update(fields)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def model_info(path: str | Path) -> ModelInfo:
    """Read a saved model folder's config and tokenizer (no weights are loaded)."""
    import transformers
    from safetensors import safe_open

    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise ValueError(f"{folder} has no config.json; build a model there with `agentgym model init`")
    config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    parameters = 0
    for weights in sorted(folder.glob("*.safetensors")):
        with safe_open(weights, framework="pt") as f:
            parameters += sum(math.prod(f.get_slice(key).get_shape()) for key in f.keys())  # noqa: SIM118 - safe_open is not iterable
    return ModelInfo(
        path=str(folder),
        arch=(config.architectures or [type(config).__name__])[0],
        parameters=parameters,
        vocab_size=len(tokenizer),
        num_hidden_layers=config.num_hidden_layers,
        hidden_size=config.hidden_size,
        chat_template=bool(tokenizer.chat_template),
    )
