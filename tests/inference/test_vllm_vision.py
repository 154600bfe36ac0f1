"""A tiny vision-language model (:func:`agentgym.models.vision.init_vision_model`, Idefics3) served by the
``vllm`` engine for real: vLLM takes it as multimodal and expands each image placeholder into the image's
tokens, the image changes what the model says, and a GUI episode in Chromium sends its screenshots with every
request. One engine serves the module (vLLM takes about a minute to start on two cores)."""

from __future__ import annotations

import base64
import io
import json

import pytest

from agentgym import Task
from agentgym.episode import run_episode
from agentgym.inference import GenerationRequest, GenerationResult, SamplingParams
from agentgym.messages import ImagePart, Message, TextPart
from agentgym.policies.lm import LMPolicy
from agentgym.policies.render import ChatRenderer
from agentgym.registration import make
from agentgym.rollout.background import BackgroundLoop
from tests.rollout.recording import RecordingEngine

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(300)]  # vLLM starts in ~1 min, longer on a busy machine

MAX_MODEL_LEN = 4096


def _png(colour: str) -> ImagePart:
    """A screenshot-sized PNG of one colour."""
    from PIL import Image

    data = io.BytesIO()
    Image.new("RGB", (480, 360), colour).save(data, "PNG")
    return ImagePart(data=base64.b64encode(data.getvalue()).decode())


@pytest.fixture(scope="module")
def vision_model_dir(tmp_path_factory):
    from agentgym.models.vision import init_vision_model

    return init_vision_model(tmp_path_factory.mktemp("tiny-vlm"), corpus_episodes=2)


@pytest.fixture(scope="module")
def engine(background, vision_model_dir):
    from agentgym.inference.vllm.engine import VLLMEngine

    async def build() -> VLLMEngine:  # built on the loop that serves it: vLLM answers on its starting loop
        return VLLMEngine(vision_model_dir, seed=0, max_model_len=MAX_MODEL_LEN)

    engine = background.run(build())
    yield engine
    background.run(engine.close())


def _look(engine, images: list[ImagePart]) -> list[int]:
    """The prompt of a user turn of text and ``images``, rendered with the model's chat template."""
    content = [TextPart(text="What is on the screen?"), *images]
    return ChatRenderer(engine.tokenizer).prompt_ids([Message(role="user", content=content).to_openai()])


def _greedy(background: BackgroundLoop, engine, prompt: list[int], images: list[ImagePart]
            ) -> GenerationResult:
    """Six greedy tokens after ``prompt`` with ``images``."""
    sampling = SamplingParams(temperature=0, max_tokens=6)
    request = GenerationRequest(prompt_ids=prompt, images=images, sampling=sampling)
    return background.run(engine.generate(request))


def test_each_image_is_one_placeholder_that_vllm_expands(background, engine, vision_model_dir):
    from vllm.exceptions import VLLMValidationError

    from agentgym.models.vision import IMAGE_TOKEN

    assert engine.multimodal is True
    placeholder = engine.tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    prompt = _look(engine, [_png("white")])
    assert prompt.count(placeholder) == 1
    # The placeholder becomes the image's tokens between three framing tokens; a prompt that fits the context
    # as ids no longer fits once vLLM has expanded it.
    image_tokens = json.loads((vision_model_dir / "processor_config.json").read_text())["image_seq_len"]
    long_prompt = [5, 6, 7, 8] * ((MAX_MODEL_LEN - 20) // 4) + prompt
    assert len(long_prompt) < MAX_MODEL_LEN
    expanded = len(long_prompt) - 1 + 3 + image_tokens
    with pytest.raises(VLLMValidationError, match=rf"prompt \(length {expanded}\)"):
        _greedy(background, engine, long_prompt, [_png("red")])
    # vLLM's multimodal cache counted the refused image as sent and asks for the next request with it again:
    # the engine sends it again rather than answering with nothing
    assert len(_greedy(background, engine, prompt, [_png("red")]).token_ids) >= 1


def test_the_image_reaches_the_model_and_changes_what_it_says(background, engine):
    prompt = _look(engine, [_png("white")])
    white = _greedy(background, engine, prompt, [_png("white")])
    assert 1 <= len(white.token_ids) == len(white.logprobs) == len(white.versions) <= 6
    assert all(lp <= 0 for lp in white.logprobs) and white.versions == [0] * len(white.token_ids)
    again = _greedy(background, engine, prompt, [_png("white")])
    assert again.token_ids == white.token_ids and again.logprobs == pytest.approx(white.logprobs, abs=1e-6)
    black = _greedy(background, engine, prompt, [_png("black")])
    assert black.logprobs != pytest.approx(white.logprobs, abs=1e-4)

    # Two images go in the order of their placeholders.
    both = _look(engine, [_png("white"), _png("black")])
    one_way = _greedy(background, engine, both, [_png("white"), _png("black")])
    other_way = _greedy(background, engine, both, [_png("black"), _png("white")])
    assert one_way.logprobs != pytest.approx(other_way.logprobs, abs=1e-4)


@pytest.mark.browser
def test_a_gui_episode_sends_its_screenshots_to_vllm(background, engine):
    from agentgym.models.vision import IMAGE_TOKEN

    recording = RecordingEngine(engine)
    policy = LMPolicy(recording, SamplingParams(max_tokens=16), max_context=MAX_MODEL_LEN)

    async def play():
        env = make("gui/ClickButton-v0", max_turns=2, accessibility=False)
        try:
            return await run_episode(env, policy, Task(env_id="gui/ClickButton-v0", seed=0))
        finally:
            await env.aclose()

    trajectory = background.run(play())
    assert trajectory.status != "error", trajectory.error
    assert trajectory.num_turns >= 1 and len(recording.requests) == trajectory.num_turns
    assert sum(trajectory.loss_mask) >= 1 and all(lp <= 0 for lp in trajectory.logprobs)
    placeholder = engine.tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    opening = [image for message in trajectory.messages[:2] for image in message.images]
    assert len(opening) == 1 and recording.requests[0].images == opening  # the first screenshot
    for request in recording.requests:
        assert len(request.images) == request.prompt_ids.count(placeholder) >= 1
