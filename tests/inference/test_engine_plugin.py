"""Adding an engine is one registration: ``fake``, an engine that a third-party package registers through the
``agentgym.engines`` entry point and nothing else in agentgym names, trains (colocated: it sleeps while the trainer
steps), evaluates, and replicates on Ray, as the built-in engines do."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
import yaml

from agentgym.inference import GenerationRequest, SamplingParams, engine_spec, spec
from agentgym.metrics_log import read_metrics
from tests.plugin_packages import ROOT, install, make_visible
from tests.trainers.test_train import _config


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    """The example engine's package, installed."""
    return install("example-engine", tmp_path_factory)


@pytest.fixture
def registered(plugin_site, monkeypatch):
    """This process sees the installed package (its entry points are read afresh) and, through ``PYTHONPATH``, so
    do the commands and Ray actors it starts; the registry is restored afterwards."""
    make_visible(plugin_site, monkeypatch)
    monkeypatch.setattr(spec, "ENGINES", dict(spec.ENGINES))
    monkeypatch.setattr(spec._plugins, "loaded", False)
    return plugin_site


def _agentgym(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentgym", *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)


def test_the_entry_point_registers_the_engine_with_its_spec(registered):
    fake = engine_spec("fake")
    assert fake.kind == "local" and fake.replicable and fake.sleeps and fake.trainable and not fake.trees
    assert fake.load().__name__ == "FakeEngine"


def test_a_registered_engine_trains_colocated_with_the_trainer(registered, tiny_model_dir, tmp_path):
    """Two colocated steps on ``engine.name: fake``: the engine sleeps through each step, wakes up with the published
    weights, and samples exactly what the learner scores under them."""
    run_dir, config_file = tmp_path / "run", tmp_path / "train.yaml"
    config = _config(run_dir, tiny_model_dir, engine={"name": "fake"}, trainer={"steps": 2, "colocate": True},
                     eval={"episodes": 0})
    config_file.write_text(yaml.safe_dump(config))
    done = _agentgym("train", str(config_file))
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [r for r in read_metrics(run_dir) if "train/mismatch_k3_fresh" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert max(r["train/mismatch_k3_fresh"] for r in steps) < 1e-6
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 2


def test_a_registered_engine_evaluates(registered, tiny_model_dir, tmp_path):
    done = _agentgym("eval", "games/FrozenLake-v0", "--engine", "fake", "--model", str(tiny_model_dir), "--episodes",
                     "2", "--max-tokens", "8", "--json", "--out", str(tmp_path / "eval"))
    assert done.returncode == 0, done.stderr[-3000:]
    scores = json.loads(done.stdout.strip().splitlines()[-1])
    assert scores["agent"] == f"fake-{tiny_model_dir.name}" and scores["scored"] == 2


def test_an_unregistered_engine_is_refused_naming_the_registered_ones(tiny_model_dir, tmp_path):
    done = _agentgym("eval", "games/FrozenLake-v0", "--engine", "fake", "--model", str(tiny_model_dir))
    assert done.returncode == 2 and "unknown engine 'fake'" in done.stderr and "torch" in done.stderr
    config_file = tmp_path / "train.yaml"
    config_file.write_text(yaml.safe_dump(_config(tmp_path / "run", tiny_model_dir, engine={"name": "fake"})))
    done = _agentgym("train", str(config_file))
    assert done.returncode == 2 and "engine.name" in done.stderr and "unknown engine 'fake'" in done.stderr


@pytest.mark.ray
@pytest.mark.timeout(300)  # a local Ray and two replica processes that load torch
def test_a_registered_engine_replicates_on_ray(registered, tiny_model_dir, monkeypatch):
    """Two replicas of ``fake`` as Ray actors: both serve, and both take the weights published to them."""
    pytest.importorskip("ray", reason="the ray backend needs Ray: pip install 'agentgym[ray]'")
    from transformers import AutoModelForCausalLM

    from agentgym.cluster import RayConfig
    from agentgym.cluster.backend import RayBackend

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    weights = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    backend = RayBackend(RayConfig(engine_replicas=2, replica_cpus=0.5))
    try:
        engine = backend.engine("fake", tiny_model_dir, threads=1)

        async def play() -> None:
            assert await engine.update_weights(weights) == 1
            requests = [GenerationRequest(prompt_ids=[1, 2, 3], sampling=SamplingParams(max_tokens=4, seed=0),
                                          session=f"episode-{index}") for index in range(4)]
            results = await asyncio.gather(*(engine.generate(request) for request in requests))
            assert all(result.versions and set(result.versions) == {1} for result in results)
            assert [await replica.version.remote() for replica in engine.replicas] == [1, 1]
            assert len({(await replica.where.remote())["pid"] for replica in engine.replicas}) == 2
            await engine.close()

        asyncio.run(play())
    finally:
        backend.close()
