"""Tasks and task sets: seeds, splits, storage."""

from __future__ import annotations

import pytest

from agentgym import Task, TaskSet


def test_generate_cycles_difficulties_and_keeps_splits_apart():
    train = TaskSet.generate("games/FrozenLake-v0", 6, split="train", difficulties=["easy", "hard"])
    test = TaskSet.generate("games/FrozenLake-v0", 6, split="test", difficulties=["easy", "hard"])
    assert [t.difficulty for t in train] == ["easy", "hard"] * 3
    assert {t.seed for t in train}.isdisjoint({t.seed for t in test})
    assert train[0].id == "games/FrozenLake-v0:easy:0" and test[1].reset_kwargs() == {
        "seed": 1_000_000_001, "options": {"difficulty": "hard"},
    }
    assert len(train.filter(difficulty="hard")) == 3 and len(train[2:4]) == 2


def test_save_and_load_round_trip(tmp_path):
    tasks = TaskSet([Task(env_id="tools/Calculator-v0", seed=5, options={"x": [1, 2]}), Task(env_id="a/B-v0", seed=1)])
    tasks.save(tmp_path / "tasks.jsonl")
    assert TaskSet.load(tmp_path / "tasks.jsonl") == tasks


def test_bad_generation_arguments():
    with pytest.raises(ValueError):
        TaskSet.generate("a/B-v0", -1)
    with pytest.raises(ValueError):
        TaskSet.generate("a/B-v0", 3, difficulties=[])
