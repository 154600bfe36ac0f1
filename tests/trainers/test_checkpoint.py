"""Checkpoints: the data position, atomic saves with ``latest``, and the trainer state's round trip."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from transformers import AutoModelForCausalLM, AutoTokenizer

from agentgym.errors import AgentGymError
from agentgym.trainers import checkpoint
from agentgym.trainers.batch import collate
from agentgym.trainers.checkpoint import (
    DataPosition,
    TrainerState,
    latest_checkpoint,
    load_trainer_state,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.learner import Learner
from agentgym.trajectory import Trajectory
from tests.trainers.envs import VOWELS_ID


def test_data_position_tracks_groups_finished_out_of_order():
    data = DataPosition()
    assert (data.low, data.next, data.pending()) == (0, 0, [])
    for position in (2, 0, 5):
        data.consume(position)
    assert data.low == 1 and data.done == {2, 5}
    assert data.pending() == [1, 3, 4] and data.next == 6
    data.consume(1)
    assert data.low == 3 and data.done == {5} and data.pending() == [3, 4]
    data.consume(3)
    data.consume(4)
    assert (data.low, data.done, data.pending(), data.next) == (6, set(), [], 6)


@given(st.permutations(range(12)), st.integers(0, 12))
def test_data_position_covers_what_was_consumed_and_its_holes(order, prefix):
    consumed = order[:prefix]
    data = DataPosition()
    for position in consumed:
        data.consume(position)
    high = max(consumed, default=-1)
    holes = set(range(high + 1)) - set(consumed)
    assert set(range(data.low)) | data.done == set(consumed)
    assert not set(range(data.low)) & data.done and all(p > data.low for p in data.done)
    assert data.pending() == sorted(holes)
    assert data.next == high + 1
    assert data.low == min(set(range(13)) - set(consumed))
    state = json.loads(json.dumps(data.state()))  # plain data, fit for any serialiser
    assert DataPosition.from_state(state) == data


def _learner(model_dir) -> Learner:
    config = TrainConfig.model_validate({"output_dir": "unused", "model": {"path": str(model_dir)},
                                         "env": {"id": VOWELS_ID}, "optim": {"lr": 1e-3}})
    return Learner(AutoModelForCausalLM.from_pretrained(model_dir), config)


@pytest.fixture(scope="module")
def model_and_tokenizer(tiny_model_dir):
    return _learner(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir)


def _state(step: int, **fields) -> TrainerState:
    return TrainerState(
        **{
            "step": step,
            "scheduler": {},
            "data": DataPosition(),
            "rng": rng_state(),
            **fields,
        }
    )


def test_save_writes_the_checkpoint_points_latest_at_it_and_keeps_the_newest(tmp_path, model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    assert latest_checkpoint(tmp_path) is None
    first = save_checkpoint(tmp_path, model, tokenizer, _state(1), keep=2)
    assert first == tmp_path / "checkpoints" / "step-000001"
    assert latest_checkpoint(tmp_path) == first
    assert (tmp_path / "checkpoints" / "latest").read_text() == "step-000001\n"
    reloaded = AutoModelForCausalLM.from_pretrained(first / "model")
    assert all(
        torch.equal(a, b)
        for a, b in zip(reloaded.state_dict().values(), model.model.state_dict().values(), strict=True)
    )
    AutoTokenizer.from_pretrained(first / "model")

    for step in (2, 3):
        save_checkpoint(tmp_path, model, tokenizer, _state(step), keep=2)
    folders = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert folders == ["latest", "step-000002", "step-000003"]
    assert latest_checkpoint(tmp_path).name == "step-000003"


def test_a_save_killed_mid_write_leaves_the_previous_checkpoint_current(
    tmp_path, model_and_tokenizer, monkeypatch
):
    model, tokenizer = model_and_tokenizer
    save_checkpoint(tmp_path, model, tokenizer, _state(4, data=DataPosition(low=9)), keep=2)

    def killed(folder):
        raise KeyboardInterrupt("killed while writing")

    monkeypatch.setattr(checkpoint, "_fsync_tree", killed)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, model, tokenizer, _state(5), keep=2)
    monkeypatch.undo()
    root = tmp_path / "checkpoints"
    assert (root / ".tmp-step-000005" / "model").is_dir()  # the half-written folder is left behind...
    assert not (root / "step-000005").exists()
    assert latest_checkpoint(tmp_path) == root / "step-000004"  # ...and ignored
    assert load_trainer_state(root / "step-000004").data.low == 9

    save_checkpoint(tmp_path, model, tokenizer, _state(5), keep=1)  # the next save replaces it
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step-000005"]


def test_latest_naming_an_incomplete_checkpoint_is_an_error(tmp_path, model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    save_checkpoint(tmp_path, model, tokenizer, _state(1), keep=2)
    (tmp_path / "checkpoints" / "latest").write_text("step-000007\n")
    with pytest.raises(AgentGymError, match="step-000007, which is incomplete"):
        latest_checkpoint(tmp_path)


def test_trainer_state_round_trips(tmp_path, tiny_model_dir, model_and_tokenizer):
    _, tokenizer = model_and_tokenizer
    learner = _learner(tiny_model_dir)
    batch = collate([Trajectory(env_id=VOWELS_ID, token_ids=[5, 17, 42, 99], loss_mask=[0, 0, 1, 1],
                                logprobs=[0.0, 0.0, -1.0, -1.0], versions=[-1, -1, 0, 0])], torch.tensor([1.0]), 0)
    learner.step(batch)
    data = DataPosition(low=3, done={5, 8})
    state = TrainerState(step=7, scheduler=learner.scheduler_state(), data=data, rng=rng_state())
    path = save_checkpoint(tmp_path, learner, tokenizer, state, keep=1)

    loaded = load_trainer_state(path)
    assert loaded.step == 7 and loaded.data == data and loaded.scheduler == learner.scheduler_state()
    assert torch.equal(loaded.rng["torch"], state.rng["torch"])
    fresh = Learner(AutoModelForCausalLM.from_pretrained(path / "model"), learner.config)
    fresh.restore(path, loaded.scheduler, loaded.step)  # a new optimizer of the saved model takes the state
    saved, restored = learner.optimizer.state_dict(), fresh.optimizer.state_dict()
    assert restored["param_groups"] == saved["param_groups"] and fresh.version == 7
    assert saved["state"] and saved["state"].keys() == restored["state"].keys()
    for index, tensors in saved["state"].items():
        assert all(torch.equal(tensors[k], restored["state"][index][k]) for k in tensors)
    assert all(torch.equal(a, b) for a, b in zip(fresh.model.state_dict().values(),
                                                 learner.model.state_dict().values(), strict=True))


def test_rng_state_restores_every_generator():
    state = rng_state()
    first = (random.random(), np.random.rand(), torch.rand(3).tolist())
    set_rng_state(state)
    assert (random.random(), np.random.rand(), torch.rand(3).tolist()) == first
