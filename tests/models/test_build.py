"""``init_model``: a seeded model that ``transformers`` loads offline, with the fields vLLM reads."""

from __future__ import annotations

import json

import pytest

from agentgym.models import PRESETS, Preset, get_preset, init_model, model_info

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def loaded(tiny_model_dir):
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir, local_files_only=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model_dir, local_files_only=True)
    return model.eval(), tokenizer


def test_auto_classes_load_it_and_a_forward_pass_works(loaded):
    model, tokenizer = loaded
    assert type(model).__name__ == "Qwen2ForCausalLM" and model.dtype == torch.float32
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Reach 7."}], tokenize=False,
                                           add_generation_prompt=True)
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], len(tokenizer)) and torch.isfinite(logits).all()
    out = model.generate(ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] > ids.shape[1]


def test_config_has_the_standard_fields(tiny_model_dir, loaded):
    model, tokenizer = loaded
    config = json.loads((tiny_model_dir / "config.json").read_text())
    tiny = PRESETS["tiny"]
    assert config["architectures"] == ["Qwen2ForCausalLM"] and config["model_type"] == "qwen2"
    assert config["torch_dtype"] == config["dtype"] == "float32" and config["rope_theta"] == tiny.rope_theta
    assert (config["num_hidden_layers"], config["hidden_size"], config["num_attention_heads"],
            config["num_key_value_heads"], config["intermediate_size"]) == (2, 128, 4, 2, 512)
    assert config["max_position_embeddings"] == 4096 and config["tie_word_embeddings"] is True
    assert config["vocab_size"] == len(tokenizer) and tiny.head_dim % 32 == 0
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    generation = json.loads((tiny_model_dir / "generation_config.json").read_text())
    assert generation["eos_token_id"] == tokenizer.convert_tokens_to_ids("<|im_end|>") == tokenizer.eos_token_id
    assert generation["pad_token_id"] == tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert (tiny_model_dir / "model.safetensors").is_file() and not list(tiny_model_dir.glob("*.bin"))
    # transformers 4.x (older vLLM) knows this class; it reads tokenizer.json as it is
    assert json.loads((tiny_model_dir / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_model_info_counts_tied_weights_once(tiny_model_dir, loaded):
    model, tokenizer = loaded
    info = model_info(tiny_model_dir)
    assert info.parameters == sum(p.numel() for p in model.parameters())
    assert (info.arch, info.vocab_size, info.chat_template) == ("Qwen2ForCausalLM", len(tokenizer), True)


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path, tiny_model_dir):
    state = torch.random.get_rng_state()
    first = init_model(tmp_path / "a", seed=0, corpus_episodes=1)
    again = init_model(tmp_path / "b", seed=0, corpus_episodes=1)
    other = init_model(tmp_path / "c", seed=1, corpus_episodes=1, arch="llama")
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json", "config.json"):
        assert (first / name).read_bytes() == (again / name).read_bytes(), name
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's random stream is left alone
    assert (first / "model.safetensors").read_bytes() != (tiny_model_dir / "model.safetensors").read_bytes()  # corpus size
    model = transformers.AutoModelForCausalLM.from_pretrained(other, local_files_only=True)
    assert type(model).__name__ == "LlamaForCausalLM"
    templates = {transformers.AutoTokenizer.from_pretrained(p).chat_template for p in (first, other)}
    assert len(templates) == 1


def test_bad_presets_and_architectures_name_the_choices(tmp_path):
    with pytest.raises(ValueError, match="tiny, small"):
        get_preset("huge")
    with pytest.raises(ValueError, match="qwen2, llama"):
        init_model(tmp_path, arch="gpt2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="multiple of 32"):
        Preset(num_hidden_layers=1, hidden_size=96, num_attention_heads=2, num_key_value_heads=1,
               intermediate_size=64, vocab_size=1024)


def test_the_qwen2_5_preset_has_qwen2_5_0_5b_s_shape_and_size():
    shape = get_preset("qwen2.5-0.5b")
    config = transformers.Qwen2Config(vocab_size=shape.embedding_rows, **shape.config_kwargs())
    with torch.device("meta"):  # the shape without the weights
        model = transformers.Qwen2ForCausalLM(config)
    assert sum(p.numel() for p in model.parameters()) == 494_032_768  # Qwen2.5-0.5B's, tied embeddings counted once
    assert (shape.head_dim, config.num_key_value_heads, config.vocab_size, config.tie_word_embeddings) == (64, 2, 151_936,
                                                                                                        True)


def test_embedding_rows_pad_the_model_past_the_tokenizer(tmp_path, monkeypatch):
    monkeypatch.setitem(PRESETS, "padded", PRESETS["tiny"].model_copy(update={"embedding_rows": 4096}))
    out = init_model(tmp_path, "padded", corpus_episodes=1)
    tokenizer = transformers.AutoTokenizer.from_pretrained(out, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    assert json.loads((out / "config.json").read_text())["vocab_size"] == 4096 > len(tokenizer)
    assert model.get_input_embeddings().num_embeddings == model.lm_head.out_features == 4096
    assert model_info(out).vocab_size == len(tokenizer)  # the vocabulary is the tokenizer's; the rows are padding
    with pytest.raises(ValueError, match="embedding_rows"):
        Preset(num_hidden_layers=1, hidden_size=64, num_attention_heads=2, num_key_value_heads=1,
               intermediate_size=64, vocab_size=1024, embedding_rows=600)
