"""Screens travel through the rollout unchanged: a GUI episode's screenshots stay image parts of the
trajectory's messages, and every request to the engine carries the conversation's images in the order the
chat template placed them in the prompt (a vision-language model's engine feeds them to the model)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import numpy as np
import pytest

from agentgym import OraclePolicy, Task, run_episode
from agentgym.inference import SamplingParams
from agentgym.inference.torch.engine import TorchEngine
from agentgym.messages import ImagePart
from agentgym.policies.lm import LMPolicy
from agentgym.registration import make
from tests.rollout.recording import RecordingEngine

pytestmark = pytest.mark.browser
PNG = b"\x89PNG\r\n\x1a\n"


def _images(messages: list[Any]) -> list[ImagePart]:
    return [image for message in messages for image in message.images]


def test_each_request_carries_the_conversations_screens_in_the_order_of_their_placeholders(tiny_model_dir):
    async def scenario() -> tuple[RecordingEngine, list[ImagePart]]:
        engine = RecordingEngine(TorchEngine(tiny_model_dir, seed=0))
        env = make("gui/LoginForm-v0")
        try:
            session = LMPolicy(engine, SamplingParams(max_tokens=8)).start(env, np.random.default_rng(0))
            observation, _ = await env.areset(seed=3)
            shown = _images(observation)
            for _ in range(3):
                await session.act(observation)  # the model answers; the oracle plays, so each turn shows a screen
                observation, *_ = await env.astep(env.oracle_action())
                shown += _images(observation)
            await session.act(observation)
            return engine, shown
        finally:
            await env.aclose()
            await engine.engine.close()

    engine, shown = asyncio.run(scenario())
    assert len(shown) == 4 and all(base64.b64decode(image.data).startswith(PNG) for image in shown)
    for turn, request in enumerate(engine.requests):
        assert request.images == shown[: turn + 1]
        prompt = engine.tokenizer.decode(request.prompt_ids, skip_special_tokens=False)
        assert prompt.count("<image>") == len(request.images)


def test_a_gui_trajectory_keeps_every_screen_as_an_image_part():
    async def scenario() -> tuple[Any, bytes]:
        env = make("gui/ClickButton-v0")
        try:
            played = await run_episode(env, OraclePolicy(), Task(env_id="gui/ClickButton-v0", seed=1))
            return played, env.image
        finally:
            await env.aclose()

    trajectory, last_screen = asyncio.run(scenario())
    screens = _images(trajectory.messages)
    assert trajectory.success and len(screens) == trajectory.num_turns  # the opening screen, then each click's
    assert base64.b64decode(screens[-1].data) == last_screen and screens[0].mime_type == "image/png"
    restored = type(trajectory).model_validate_json(trajectory.model_dump_json())
    assert _images(restored.messages) == screens
