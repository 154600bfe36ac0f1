"""A tiny vision-language model built locally: Idefics3 (a SigLIP-style vision tower, a pixel-shuffle
connector and a Llama text tower of a preset's shape) with agentgym's tokenizer and chat template.

Idefics3 is one that vLLM serves without torchvision (vLLM's Qwen2-VL and LLaVA modules import it, and
``transformers``' Qwen2-VL processor needs its torchvision-only video processor). The chat template writes
``<image>`` for an image part, which is Idefics3's image token: vLLM expands each one into the image's tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentgym.models.build import save_model, seeded_model, special_token_ids
from agentgym.models.corpus import corpus
from agentgym.models.presets import get_preset
from agentgym.models.tokenizer import train_tokenizer

IMAGE_TOKEN = "<image>"
"""What the chat template writes for an image part: one token, which the model's processor expands."""
VISION_TOKENS = ("<fake_token_around_image>", IMAGE_TOKEN, "<end_of_utterance>", "<global-img>")
"""Idefics3's special tokens that frame an image; added to the trained vocabulary."""
VISION_TOWER: dict[str, Any] = {
    "hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2
}
"""The vision encoder's shape: two layers of heads 32 wide."""
SCALE_FACTOR = 2
"""The connector merges ``SCALE_FACTOR``² neighbouring patches into one token."""


def init_vision_model(
    out_dir: str | Path,
    preset: str = "tiny",
    *,
    image_size: int = 224,
    patch_size: int = 14,
    seed: int = 0,
    corpus_episodes: int | None = None,
) -> Path:
    """Build an Idefics3 model whose text tower has the shape of ``preset`` and save it (safetensors, float32)
    with its tokenizer and processor into ``out_dir``.

    Every image is resized to ``image_size`` pixels square (no tiling) and becomes
    ``(image_size // patch_size)² / SCALE_FACTOR²`` image tokens (64 here) framed by three more;
    ``corpus_episodes`` is as in :func:`agentgym.models.init_model`. Same arguments, same files."""
    import transformers
    from tokenizers import AddedToken
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    shape = get_preset(preset)
    if image_size % (patch_size * SCALE_FACTOR):
        raise ValueError(f"image_size must be a whole number of {patch_size * SCALE_FACTOR}-pixel blocks")
    episodes = shape.corpus_episodes if corpus_episodes is None else corpus_episodes
    if episodes < 1:
        raise ValueError(f"corpus_episodes must be at least 1, got {episodes}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    tokenizer = train_tokenizer(corpus(episodes, seed=seed), shape.vocab_size)
    vision_tokens = [AddedToken(t, special=True, normalized=False) for t in VISION_TOKENS]
    tokenizer.add_tokens(vision_tokens, special_tokens=True)
    special_ids = special_token_ids(tokenizer)
    text = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        rope_parameters={"rope_type": "default", "rope_theta": shape.rope_theta},
        **shape.config_kwargs(),
        **special_ids,
    )
    vision = transformers.Idefics3VisionConfig(image_size=image_size, patch_size=patch_size, **VISION_TOWER)
    # the eos and bos ids are common config fields, which Idefics3Config's typed signature leaves out
    config = transformers.Idefics3Config(  # type: ignore[misc]
        text_config=text,
        vision_config=vision,
        image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        scale_factor=SCALE_FACTOR,
        tie_word_embeddings=shape.tie_word_embeddings,
        architectures=["Idefics3ForConditionalGeneration"],
        **special_ids,
    )
    model = seeded_model(transformers.Idefics3ForConditionalGeneration, config, seed)

    square = {"longest_edge": image_size}
    image_processor = Idefics3ImageProcessorPil(do_image_splitting=False, size=square, max_image_size=square)
    processor = transformers.Idefics3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        image_seq_len=(image_size // patch_size) ** 2 // SCALE_FACTOR**2,
        chat_template=tokenizer.chat_template,
    )
    save_model(model, out)
    processor.save_pretrained(out)  # the tokenizer with it
    return out
