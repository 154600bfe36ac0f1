"""The CPU attention of the torch engine against transformers' own ``sdpa``: the same logits for a left-padded
batch, through a prefill and decode steps on a KV cache, with grouped and with plain heads."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM, DynamicCache, Qwen2Config, Qwen2ForCausalLM

from agentgym.inference.torch._gqa_attention import NAME, use_on_cpu
from agentgym.inference.torch.engine import TorchEngine


def _twins(model: Qwen2ForCausalLM) -> tuple[Qwen2ForCausalLM, Qwen2ForCausalLM]:
    """``model`` on transformers' sdpa, and a copy of it switched by :func:`use_on_cpu`."""
    twin = Qwen2ForCausalLM(copy.deepcopy(model.config)).eval()
    twin.load_state_dict(model.state_dict())
    use_on_cpu(twin)
    return model.eval(), twin


def _decode(model: Qwen2ForCausalLM, prompts: list[list[int]], steps: int) -> list[torch.Tensor]:
    """Logits of a left-padded prefill of ``prompts`` and of ``steps`` greedy decode steps after it."""
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    cache, logits = DynamicCache(), []
    with torch.no_grad():
        for _ in range(steps + 1):
            positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, -ids.shape[1]:]
            out = model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache)
            logits.append(out.logits[:, -1])
            ids = out.logits[:, -1].argmax(-1, keepdim=True)
            mask = torch.cat([mask, torch.ones_like(ids)], dim=1)
    return logits


@pytest.mark.parametrize("kv_heads", [2, 4])
def test_matches_transformers_sdpa_on_a_padded_batch(kv_heads):
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=256, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=kv_heads, intermediate_size=256, attn_implementation="sdpa")
    reference, model = _twins(Qwen2ForCausalLM(config))
    assert (reference.config._attn_implementation, model.config._attn_implementation) == ("sdpa", NAME)
    prompts = [list(range(5, 40)), list(range(60, 70)), [3, 1, 4, 1, 5, 9, 2, 6]]
    for ours, theirs in zip(_decode(model, prompts, 4), _decode(reference, prompts, 4), strict=True):
        torch.testing.assert_close(ours, theirs, atol=2e-5, rtol=1e-4)


def test_a_full_sequence_without_a_mask_stays_causal():
    torch.manual_seed(1)
    config = Qwen2Config(vocab_size=256, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=256, attn_implementation="sdpa")
    reference, model = _twins(Qwen2ForCausalLM(config))
    ids = torch.arange(10, 50).unsqueeze(0)
    with torch.no_grad():
        ours, theirs = model(input_ids=ids).logits, reference(input_ids=ids).logits
        prefix = model(input_ids=ids[:, :20]).logits
    torch.testing.assert_close(ours, theirs, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(ours[:, :20], prefix, atol=2e-5, rtol=1e-4)  # later tokens change nothing earlier


def test_the_torch_engine_on_the_cpu_uses_it(tiny_model_dir):
    engine = TorchEngine(tiny_model_dir, device="cpu")
    assert engine.model.config._attn_implementation == NAME
    loaded = AutoModelForCausalLM.from_pretrained(tiny_model_dir, local_files_only=True)
    assert loaded.config._attn_implementation == "sdpa"  # nothing outside the engine is switched
