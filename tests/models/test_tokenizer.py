"""The locally trained tokenizer: complete byte alphabet, unsplit special tokens, compact env text."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym import make
from agentgym.models import CONTROL_TOKENS, EOS_TOKEN, PAD_TOKEN, TOOL_TOKENS

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir, local_files_only=True)


@pytest.fixture(scope="module")
def raw_tokenizer(tiny_model_dir):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json"))


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_round_trips_after_nfc(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == unicodedata.normalize("NFC", text)


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec="utf-8")).map(lambda s: unicodedata.normalize("NFC", s)))
def test_nfc_text_round_trips_exactly(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=20), st.sampled_from(CONTROL_TOKENS + TOOL_TOKENS))).map("".join))
def test_transformers_and_tokenizer_json_give_the_same_ids(tokenizer, raw_tokenizer, text):
    """``transformers`` rebuilds a qwen2 tokenizer's pipeline around the vocabulary; vLLM and the bare
    library read tokenizer.json as it is: both must agree."""
    assert tokenizer.encode(text, add_special_tokens=False) == raw_tokenizer.encode(text, add_special_tokens=False).ids


def test_special_tokens_are_single_ids_and_never_split(tokenizer):
    assert tokenizer.eos_token == EOS_TOKEN and tokenizer.pad_token == PAD_TOKEN and tokenizer.bos_token is None
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in CONTROL_TOKENS + TOOL_TOKENS}
    assert sorted(ids.values()) == list(range(len(ids)))
    for token, token_id in ids.items():
        assert tokenizer.encode(f"a{token}b", add_special_tokens=False)[1] == token_id
    # plain text never forms them, and only the control tokens are skipped when decoding
    assert tokenizer.encode("<tool", add_special_tokens=False)[-1] not in ids.values()
    text = "<|im_start|>assistant\n<tool_call>\n{}\n</tool_call><|im_end|>"
    assert tokenizer.decode(tokenizer.encode(text), skip_special_tokens=True) == "assistant\n<tool_call>\n{}\n</tool_call>"
    assert tokenizer.encode("hello", add_special_tokens=True) == tokenizer.encode("hello", add_special_tokens=False)


@pytest.mark.parametrize("env_id", ["games/FrozenLake-v0", "games/Sokoban-v0", "tools/Calculator-v0"])
def test_env_text_tokenises_compactly(tokenizer, env_id):
    env = make(env_id)
    try:
        observation, _ = env.reset(seed=123)
        tools = [t.to_openai() for t in env.tools]
    finally:
        env.close()
    text = tokenizer.apply_chat_template([m.to_openai() for m in observation], tools=tools, tokenize=False,
                                         add_generation_prompt=True)
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) * 3 < len(text.encode()), f"{len(ids)} tokens for {len(text.encode())} bytes"


def test_vocabulary_stays_within_the_preset(tokenizer, tiny_model_dir):
    from transformers import AutoConfig

    from agentgym.models import PRESETS

    config = AutoConfig.from_pretrained(tiny_model_dir, local_files_only=True)
    assert 512 < len(tokenizer) == config.vocab_size <= PRESETS["tiny"].vocab_size
