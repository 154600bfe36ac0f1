"""The ``vllm`` engine for real (vLLM's CPU build here, ``bash scripts/setup.sh vllm``): token ids in, ids with
behaviour logprobs and versions out, parity with the trainer's forward, weight updates through the shared-memory
transport, interrupted requests, clean shutdown and clear refusals. One engine serves the module (vLLM takes
about 45 s to start on two cores); the module's last test closes it."""

from __future__ import annotations

import asyncio
import base64
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import torch
from transformers import AutoModelForCausalLM

from agentgym import Task
from agentgym.algorithms import k3_kl
from agentgym.episode import run_episode
from agentgym.inference import GenerationRequest, GenerationResult, InferenceEngine, SamplingParams
from agentgym.messages import ImagePart
from agentgym.policies.lm import LMPolicy
from agentgym.registration import make
from agentgym.rollout.background import BackgroundLoop
from agentgym.trainers import TrainConfig
from agentgym.trainers.batch import collate
from agentgym.trainers.learner import Learner
from agentgym.trajectory import Trajectory
from tests.processes import children_named

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(300)]  # vLLM starts in ~45 s, longer on a busy machine

SYNTHETIC_PROMPT = [5, 6, 7, 8] * 10
"""A prompt the untrained tiny model continues with near-uniform tokens (rarely its end of turn)."""
PARITY_MAX_ABS = 1e-3
PARITY_K3 = 1e-6
"""Bounds on vLLM's behaviour logprobs against the trainer's forward under the same float32 weights. Both sides
compute in float32 with different kernels (vLLM's oneDNN/packed GEMMs and its own attention against PyTorch's),
so they agree to float32 rounding, about 1e-6 per logprob here; bfloat16 on either side would differ by ~1e-2.
The bounds leave two to three orders of magnitude for other CPUs, and are far below what the off-policy
corrections act on (truncated importance weights move at a mismatch of ~1e-2)."""


@pytest.fixture(scope="module")
def engine(background, tiny_model_dir):
    from agentgym.inference.vllm.engine import VLLMEngine

    async def build() -> VLLMEngine:  # built on the loop that serves it: vLLM answers on the loop that started it
        return VLLMEngine(tiny_model_dir, seed=0, max_model_len=2048)

    engine = background.run(build())
    yield engine
    background.run(engine.close())


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    """The trainer's copy of the weights the engine starts with."""
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)


def _generate(background: BackgroundLoop, engine, prompt: list[int], **sampling) -> GenerationResult:
    request = GenerationRequest(prompt_ids=prompt, sampling=SamplingParams(**sampling))
    return background.run(engine.generate(request))


def _play(background: BackgroundLoop, engine, sampling: SamplingParams, episodes: int = 6) -> list[Trajectory]:
    """Multi-turn FrozenLake episodes through the engine, token in, token out, all at once."""
    policy = LMPolicy(engine, sampling)

    async def play(seed: int) -> Trajectory:
        env = make("games/FrozenLake-v0", max_turns=3, parser="pythonic")
        try:
            return await run_episode(env, policy, Task(env_id="games/FrozenLake-v0", seed=seed))
        finally:
            env.close()

    async def play_all() -> list[Trajectory]:
        return list(await asyncio.gather(*(play(seed) for seed in range(episodes))))

    return background.run(play_all())


def _parity(model, trajectories: list[Trajectory], sampling: SamplingParams, tmp_path: Path) -> tuple[float, float]:
    """Max abs difference and k3 mismatch between the behaviour logprobs and the Learner's under ``model``."""
    config = TrainConfig.model_validate({
        "output_dir": str(tmp_path), "model": {"path": str(tmp_path)}, "env": {"id": "games/FrozenLake-v0"},
        "sampling": {"temperature": sampling.temperature, "top_p": sampling.top_p},
    })
    batch = collate(trajectories, torch.zeros(len(trajectories)), pad_id=0)
    with torch.no_grad():
        learner, _ = Learner(model, config).logprobs(model, batch)
    agent = batch.loss_mask.bool()
    assert agent.sum() > 20, "the episodes generated too few tokens to compare"
    log_ratio = learner - batch.behaviour_logprobs
    return float(log_ratio[agent].abs().max()), float(k3_kl(log_ratio, agent))


def test_generate_returns_ids_with_logprobs_and_versions(background, engine, tiny_model_dir):
    assert isinstance(engine, InferenceEngine) and engine.version == 0
    assert engine.weight_transport == "agentgym_shm"

    async def eight() -> list[GenerationResult]:
        requests = [GenerationRequest(prompt_ids=SYNTHETIC_PROMPT, sampling=SamplingParams(max_tokens=16, seed=i))
                    for i in range(8)]
        return list(await asyncio.gather(*(engine.generate(r) for r in requests)))

    before = engine.stats()
    results = background.run(eight())
    for result in results:
        assert 1 <= len(result.token_ids) == len(result.logprobs) == len(result.versions) <= 16
        assert result.versions == [0] * len(result.token_ids) and result.prompt_tokens == len(SYNTHETIC_PROMPT)
        assert all(lp <= 0 for lp in result.logprobs) and result.finish_reason in ("stop", "length")
    stats = engine.stats()
    assert stats.requests - before.requests == 8
    assert stats.generated_tokens - before.generated_tokens == sum(len(r.token_ids) for r in results)


def test_a_seeded_request_samples_the_same_tokens_again(background, engine):
    first = _generate(background, engine, SYNTHETIC_PROMPT, max_tokens=24, seed=5)
    again = _generate(background, engine, SYNTHETIC_PROMPT, max_tokens=24, seed=5)
    other = _generate(background, engine, SYNTHETIC_PROMPT, max_tokens=24, seed=6)
    assert first.token_ids == again.token_ids and first.logprobs == pytest.approx(again.logprobs, abs=1e-6)
    assert other.token_ids != first.token_ids

    async def batched() -> GenerationResult:  # the same seed among other requests samples the same tokens
        crowd = [engine.generate(GenerationRequest(prompt_ids=SYNTHETIC_PROMPT[i:], sampling=SamplingParams(
            max_tokens=24, seed=100 + i))) for i in range(1, 6)]
        mine = engine.generate(GenerationRequest(prompt_ids=SYNTHETIC_PROMPT, sampling=SamplingParams(max_tokens=24, seed=5)))
        return (await asyncio.gather(mine, *crowd))[0]

    assert background.run(batched()).token_ids == first.token_ids

    async def crowded() -> list[GenerationResult]:  # more prompt tokens at once than one step takes
        requests = [GenerationRequest(prompt_ids=SYNTHETIC_PROMPT * 15, sampling=SamplingParams(max_tokens=4, seed=i))
                    for i in range(16)]
        return list(await asyncio.gather(*(engine.generate(r) for r in requests)))

    assert all(len(r.token_ids) >= 1 for r in background.run(crowded()))


@pytest.mark.parametrize("sampling", [SamplingParams(temperature=1.0, max_tokens=12),
                                      SamplingParams(temperature=0.7, top_p=0.9, max_tokens=12)],
                         ids=["t1", "t0.7-top_p0.9"])
def test_behaviour_logprobs_match_the_learners_forward(background, engine, model, sampling, tmp_path, capsys):
    trajectories = _play(background, engine, sampling)
    assert all(t.status != "error" for t in trajectories) and max(t.num_turns for t in trajectories) >= 2
    max_abs, k3 = _parity(model, trajectories, sampling, tmp_path)
    with capsys.disabled():
        print(f"\nvLLM vs Learner ({sampling.temperature=}, {sampling.top_p=}): max |diff| {max_abs:.2e}, k3 {k3:.2e}")
    assert max_abs < PARITY_MAX_ABS and k3 < PARITY_K3


def test_a_text_model_leaves_a_requests_images_out(background, engine):
    from PIL import Image

    png = io.BytesIO()
    Image.new("RGB", (32, 24), "white").save(png, "PNG")
    screen = ImagePart(data=base64.b64encode(png.getvalue()).decode())
    assert engine.multimodal is False
    plain = _generate(background, engine, SYNTHETIC_PROMPT, temperature=0, max_tokens=12)
    request = GenerationRequest(prompt_ids=SYNTHETIC_PROMPT, images=[screen],
                                sampling=SamplingParams(temperature=0, max_tokens=12))
    assert background.run(engine.generate(request)).token_ids == plain.token_ids


def test_updated_weights_are_the_ones_that_sample(background, engine, model, tiny_model_dir, tmp_path):
    sampling = SamplingParams(temperature=1.0, max_tokens=12)
    changed = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in changed.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    start = engine.version
    updates = engine.stats().weight_updates
    assert background.run(engine.update_weights(changed.state_dict())) == engine.version == start + 1
    trajectories = _play(background, engine, sampling)
    assert {v for t in trajectories for v in t.versions if v >= 0} == {start + 1}
    max_abs, k3 = _parity(changed, trajectories, sampling, tmp_path)
    assert max_abs < PARITY_MAX_ABS and k3 < PARITY_K3  # the new weights, not a mix of old and new
    assert _parity(model, trajectories, sampling, tmp_path)[0] > 100 * PARITY_MAX_ABS  # and not the old ones

    # A checkpoint folder (whose tied output layer is saved once, as the input embedding) brings the start back.
    assert background.run(engine.update_weights(tiny_model_dir, version=start + 7)) == start + 7
    trajectories = _play(background, engine, sampling)
    assert {v for t in trajectories for v in t.versions if v >= 0} == {start + 7}
    max_abs, k3 = _parity(model, trajectories, sampling, tmp_path)
    assert max_abs < PARITY_MAX_ABS and k3 < PARITY_K3
    assert engine.stats().weight_updates == updates + 2
    assert not list(Path("/dev/shm").glob("agentgym-weights-*"))  # unlinked once the workers mapped it


def test_a_request_interrupted_by_an_update_keeps_its_versions_and_continues(background, engine, model):
    async def update_while_generating() -> tuple[int, list[GenerationResult]]:
        requests = [GenerationRequest(prompt_ids=SYNTHETIC_PROMPT, sampling=SamplingParams(max_tokens=200, seed=i))
                    for i in range(8)]
        running = [asyncio.create_task(engine.generate(r)) for r in requests]
        # a short request batched with them paces the update: when its 20 tokens are out, the others are about 20
        # into their 200, on any machine (a fixed sleep let a fast one finish them all before the update)
        pacer = SamplingParams(max_tokens=20, seed=8)
        await engine.generate(GenerationRequest(prompt_ids=SYNTHETIC_PROMPT, sampling=pacer))
        version = await engine.update_weights(model.state_dict())
        return version, list(await asyncio.gather(*running))

    before, interrupted_before = engine.version, engine.stats().interrupted
    version, results = background.run(update_while_generating())
    assert version == before + 1
    assert engine.stats().interrupted - interrupted_before >= 1
    for result in results:
        assert result.versions == sorted(result.versions) and set(result.versions) <= {before, version}
        assert len(result.token_ids) <= 200 and result.finish_reason in ("stop", "length")
    spanning = [r for r in results if set(r.versions) == {before, version}]
    assert spanning, "no request was in flight across the update"
    assert any(r.finish_reason == "length" and len(r.token_ids) == 200 for r in spanning)  # it went on to the end


def _vllm_processes() -> set[int]:
    """This process's vLLM children (engine core and workers), by pid."""
    return {p.pid for p in children_named("VLLM")}


def test_bad_model_folders_and_arguments_are_refused_before_vllm_starts(tiny_model_dir, tmp_path):
    from agentgym.inference.vllm.engine import VLLMEngine

    running = _vllm_processes()

    with pytest.raises(FileNotFoundError, match="no model folder"):
        VLLMEngine(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no config.json"):
        VLLMEngine(tmp_path / "empty")
    (tmp_path / "empty" / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        VLLMEngine(tmp_path / "empty")
    (tmp_path / "empty" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="holds no weights"):
        VLLMEngine(tmp_path / "empty")
    with pytest.raises(ValueError, match=r"unknown vLLM engine argument\(s\): max_modle_len"):
        VLLMEngine(tiny_model_dir, max_modle_len=512)
    with pytest.raises(ValueError, match="vLLM refused the engine arguments: dtype: Input should be"):
        VLLMEngine(tiny_model_dir, dtype="float64")
    with pytest.raises(ValueError, match="sets logprobs_mode itself"):
        VLLMEngine(tiny_model_dir, logprobs_mode="raw_logprobs")
    with pytest.raises(ValueError, match="unknown weight transport 'pigeon'; choose one of: agentgym_shm, ipc, nccl"):
        VLLMEngine(tiny_model_dir, weight_transport="pigeon")
    with pytest.raises(ValueError, match="its options are: directory"):
        VLLMEngine(tiny_model_dir, transport_options={"buffer": 1})
    assert _vllm_processes() == running


def test_a_hub_id_is_served_from_the_local_cache_only(tiny_model_dir, tmp_path):
    def resolve(name: str) -> subprocess.CompletedProcess:  # the hub library reads its cache folder at import
        code = f"from agentgym.inference.vllm.engine import _model_folder; print(_model_folder({name!r}))"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")}
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)

    missing = resolve("agentgym-tests/tiny")
    assert missing.returncode != 0 and "nor a model of that name in the local Hugging Face cache" in missing.stderr
    cached = tmp_path / "hub" / "models--agentgym-tests--tiny"
    shutil.copytree(tiny_model_dir, cached / "snapshots" / ("0" * 40))
    (cached / "refs").mkdir()
    (cached / "refs" / "main").write_text("0" * 40)
    found = resolve("agentgym-tests/tiny")
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()) == cached / "snapshots" / ("0" * 40)


def test_the_ipc_transport_lets_vllm_carry_cuda_ipc_handles_to_its_engine_process(monkeypatch):
    """An ipc update is a utility call whose payload holds CUDA IPC handles: what ``reduce_tensor`` gives for a CUDA
    tensor, written out here (a CPU tensor's differ). vLLM's msgpack encoder refuses their torch classes and dtype
    unless pickles are allowed, which the engine sets up for ipc before vLLM starts."""
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    from agentgym.inference.vllm.weights import prepare_environment

    handle = (torch.Tensor, torch.Size([2, 3]), (3, 1), 0, torch.UntypedStorage, torch.bfloat16, 0, b"handle", 12, 0,
              False, b"counter", 0, b"event", True)
    call = ("update_weights", {"update_info": {"names": ["w"], "ipc_handles": [{"GPU-0": handle}]}})
    monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "0")  # recorded, so the test leaves it as it found it
    monkeypatch.delenv("VLLM_ALLOW_INSECURE_SERIALIZATION")
    with pytest.raises(TypeError, match="VLLM_ALLOW_INSECURE_SERIALIZATION"):
        MsgpackEncoder().encode(call)
    prepare_environment("agentgym_shm")
    assert "VLLM_ALLOW_INSECURE_SERIALIZATION" not in os.environ  # only ipc needs it
    prepare_environment("ipc")
    received = MsgpackDecoder().decode(MsgpackEncoder().encode(call))[1]["update_info"]["ipc_handles"][0]["GPU-0"]
    assert received[0] is torch.Tensor and received[4] is torch.UntypedStorage and received[5] is torch.bfloat16
    assert list(received[1]) == [2, 3] and received[7] == b"handle"
    monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "0")
    prepare_environment("ipc")
    assert os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] == "0"  # the caller's choice stands


def test_close_leaves_no_vllm_process_behind(background, engine):
    """Last in the module: it closes the shared engine."""
    children = [psutil.Process(pid) for pid in _vllm_processes()]
    assert len(children) >= 2, "vLLM's engine core and worker run as child processes"
    background.run(engine.close())
    background.run(engine.close())  # safe twice
    _, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, [p.name() for p in alive]
    with pytest.raises(RuntimeError, match="closed"):
        _generate(background, engine, SYNTHETIC_PROMPT, max_tokens=4)
