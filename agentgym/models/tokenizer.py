"""A byte-level BPE tokenizer trained locally with Hugging Face ``tokenizers``, carrying the chat template.

Its pipeline is exactly Qwen2's (NFC, Qwen2's split pattern, byte-level BPE), because ``transformers``
rebuilds that pipeline around the saved vocabulary whenever it loads the tokenizer of a ``qwen2``
model; with the same pipeline in ``tokenizer.json`` every loader (``transformers`` 4 or 5, vLLM, the
bare ``tokenizers`` library) produces the same ids. Any NFC text round-trips through encode and decode.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
"""End of a turn: generation stops here."""
CONTROL_TOKENS = (PAD_TOKEN, IM_START, EOS_TOKEN)
"""Special tokens: skipped by ``decode(..., skip_special_tokens=True)``."""
SPLIT_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
"""Qwen2's pre-tokenizer pattern: words with their leading space, single digits, punctuation runs, newlines."""
TOOL_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
"""Added as whole tokens but not special, so decoded text keeps them (as Qwen2.5 does) for tool-call parsers."""


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Any:
    """Train byte-level BPE on ``texts`` and wrap it as a ``PreTrainedTokenizerFast`` with the chat template.

    Every byte is in the alphabet, so any NFC text round-trips; the same texts give the same tokenizer."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    from agentgym.models.chat_template import CHAT_TEMPLATE

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    added = [AddedToken(t, special=True, normalized=False) for t in CONTROL_TOKENS]
    added += [AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=added,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    # the trainer marks every token it was given as special; the tool tokens are not
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tokenizer,
        chat_template=CHAT_TEMPLATE,
        bos_token=None,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=None,
        model_max_length=4096,
        clean_up_tokenization_spaces=False,
    )
