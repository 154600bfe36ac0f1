"""The ``vllm`` engine on the tiny model: token ids in, ids with logprobs and versions out, seeded
determinism and weight updates in place. Needs a CUDA GPU and vLLM; skipped without either."""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import io

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from agentgym.inference import GenerationRequest, InferenceEngine, SamplingParams
from agentgym.inference.sampling import token_logprobs
from agentgym.messages import ImagePart

pytestmark = pytest.mark.gpu


def _missing() -> str | None:
    if not torch.cuda.is_available():
        return "needs a CUDA GPU (torch.cuda.is_available() is False)"
    if importlib.util.find_spec("vllm") is None:
        return "needs vLLM (pip install 'agentgym[vllm]')"
    return None


@pytest.fixture(scope="module")
def loop():
    """One event loop for the module: vLLM's output handler lives on the loop that started it."""
    if (reason := _missing()) is not None:
        pytest.skip(reason)
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def engine(loop, tiny_model_dir):
    from agentgym.inference.vllm_engine import VLLMEngine

    async def build():
        return VLLMEngine(
            tiny_model_dir,
            seed=0,
            gpu_memory_utilization=0.2,
            max_model_len=1024,
            dtype="bfloat16",
            enforce_eager=True,
        )

    engine = loop.run_until_complete(build())
    yield engine
    loop.run_until_complete(engine.close())
    loop.run_until_complete(engine.close())  # safe twice


@pytest.fixture(scope="module")
def prompt(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    messages = [{"role": "user", "content": "Move to the goal."}]
    return list(
        tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"]
    )


def generate(loop, engine, prompt, **sampling):
    request = GenerationRequest(prompt_ids=prompt, sampling=SamplingParams(**sampling))
    return loop.run_until_complete(engine.generate(request))


def test_generate_returns_ids_with_the_sampling_distributions_logprobs(loop, engine, prompt, tiny_model_dir):
    assert isinstance(engine, InferenceEngine) and engine.version == 0
    result = generate(loop, engine, prompt, temperature=0.7, top_p=1.0, max_tokens=16, seed=3)
    assert len(result.token_ids) == len(result.logprobs) == len(result.versions) >= 1
    assert result.versions == [0] * len(result.token_ids) and result.prompt_tokens == len(prompt)
    assert result.finish_reason in ("stop", "length")
    # The behaviour logprobs are those of softmax(logits / 0.7), as the trainer scores them.
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ids = torch.tensor([prompt + result.token_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
    scored = token_logprobs(logits, torch.tensor(result.token_ids), 0.7, 1.0)
    assert torch.allclose(torch.tensor(result.logprobs), scored, atol=0.1)


def test_seeded_requests_repeat(loop, engine, prompt):
    first = generate(loop, engine, prompt, temperature=1.0, max_tokens=24, seed=5)
    again = generate(loop, engine, prompt, temperature=1.0, max_tokens=24, seed=5)
    other = generate(loop, engine, prompt, temperature=1.0, max_tokens=24, seed=6)
    assert first.token_ids == again.token_ids and first.logprobs == pytest.approx(again.logprobs, abs=1e-3)
    assert other.token_ids != first.token_ids


def test_a_text_model_leaves_a_requests_images_out(loop, engine, prompt):
    from PIL import Image

    png = io.BytesIO()
    Image.new("RGB", (32, 24), "white").save(png, "PNG")
    screen = ImagePart(data=base64.b64encode(png.getvalue()).decode())
    assert engine.multimodal is False
    plain = generate(loop, engine, prompt, temperature=0, max_tokens=12)
    request = GenerationRequest(prompt_ids=prompt, images=[screen], sampling=SamplingParams(temperature=0, max_tokens=12))
    assert loop.run_until_complete(engine.generate(request)).token_ids == plain.token_ids


def test_update_weights_changes_outputs_and_versions(loop, engine, prompt, tiny_model_dir):
    before = generate(loop, engine, prompt, temperature=0, max_tokens=16)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    torch.manual_seed(0)
    noisy = {name: tensor + 0.5 * torch.randn_like(tensor) for name, tensor in model.state_dict().items()}

    async def update_while_generating():
        long = asyncio.create_task(
            engine.generate(
                GenerationRequest(
                    prompt_ids=prompt, sampling=SamplingParams(temperature=1.0, max_tokens=400, seed=1)
                )
            )
        )
        await asyncio.sleep(0.05)
        version = await engine.update_weights(noisy)
        return version, await long

    version, interrupted = loop.run_until_complete(update_while_generating())
    assert version == engine.version == 1
    assert engine.stats().weight_updates == 1 and engine.stats().interrupted == 1
    assert interrupted.versions[0] == 0 and interrupted.versions[-1] == 1
    assert interrupted.versions == sorted(interrupted.versions) and len(interrupted.token_ids) <= 400
    after = generate(loop, engine, prompt, temperature=0, max_tokens=16)
    assert after.token_ids != before.token_ids and set(after.versions) == {1}
    # Back to the saved checkpoint (a folder), with an explicit version: the first outputs return.
    assert loop.run_until_complete(engine.update_weights(tiny_model_dir, version=7)) == 7
    restored = generate(loop, engine, prompt, temperature=0, max_tokens=16)
    assert restored.token_ids == before.token_ids and set(restored.versions) == {7}
