"""Colocation on a GPU (``trainer.colocate``): the learner's offload and the engines' sleep free device memory
and give it back, and both go on working after. On the CPU the same calls are moves in place, which the
colocated run in ``test_train.py`` exercises."""

from __future__ import annotations

import asyncio

import pytest
import torch
from transformers import AutoModelForCausalLM

from agentgym.inference import GenerationRequest, SamplingParams
from agentgym.rollout.background import BackgroundLoop
from agentgym.trainers.batch import collate
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.learner import Learner
from agentgym.trajectory import Trajectory
from tests.trainers.envs import VOWELS_ID

pytestmark = pytest.mark.gpu

REQUEST = GenerationRequest(prompt_ids=[5, 17, 42, 99], sampling=SamplingParams(max_tokens=16, temperature=0.0))


@pytest.fixture(autouse=True)
def cuda() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


def test_an_offloaded_learner_frees_the_gpu_and_trains_after_onload(tiny_model_dir):
    config = TrainConfig.model_validate({"output_dir": "unused", "model": {"path": str(tiny_model_dir)},
                                         "env": {"id": VOWELS_ID}, "trainer": {"colocate": True}})
    learner = Learner(AutoModelForCausalLM.from_pretrained(tiny_model_dir).cuda(), config)
    batch = collate([Trajectory(env_id=VOWELS_ID, token_ids=[5, 17, 42, 99], loss_mask=[0, 0, 1, 1],
                                logprobs=[0.0, 0.0, -1.0, -1.0], versions=[-1, -1, 0, 0])], torch.tensor([1.0]), 0)
    learner.step(batch)  # the optimizer state now exists
    held = torch.cuda.memory_allocated()
    learner.offload()
    weights = sum(p.numel() * p.element_size() for p in learner.model.parameters())
    assert held - torch.cuda.memory_allocated() >= 3 * weights  # weights, Adam's two moments, snapshots
    learner.onload()
    assert next(learner.model.parameters()).is_cuda
    assert learner.step(batch)["train/grad_norm"] > 0


@pytest.mark.vllm
def test_a_sleeping_vllm_engine_frees_the_gpu_and_serves_updated_weights_on_waking(tiny_model_dir):
    from agentgym.inference.vllm.engine import VLLMEngine

    with BackgroundLoop() as background:
        async def build() -> VLLMEngine:
            return VLLMEngine(tiny_model_dir, enable_sleep_mode=True, gpu_memory_utilization=0.3)

        engine = background.run(build())
        try:
            before = background.run(engine.generate(REQUEST))
            free = torch.cuda.mem_get_info()[0]
            background.run(engine.sleep())
            assert torch.cuda.mem_get_info()[0] > free  # its KV cache and weights are off the GPU
            background.run(engine.wake_up())
            model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
            assert background.run(engine.update_weights(model.state_dict(), version=1)) == 1
            after = background.run(asyncio.wait_for(engine.generate(REQUEST), 60))
            assert after.token_ids == before.token_ids and set(after.versions) == {1}
        finally:
            background.run(engine.close())
