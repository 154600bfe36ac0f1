"""The task sampler over a mixture of environments, and the success-window curriculum: weights honoured,
positions reproducible, state restored, levels moved toward the target band."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym import ConfigError
from agentgym.config import load_config
from agentgym.trainers import TrainConfig
from agentgym.trainers.bundled_configs import configs_folder
from agentgym.trainers.curriculum import CurriculumConfig, SuccessWindow
from agentgym.trainers.mixture import EnvEntry, Source, SuiteMixture, sources
from agentgym.trainers.sampler import TaskSampler

WEIGHTS = {"games/FrozenLake-v0": 1.0, "games/Sokoban-v0": 2.0, "tools/Calculator-v0": 5.0}


def _sources(levels: tuple[str | None, ...] = ("easy", "medium")) -> list[Source]:
    return sources([EnvEntry(id=env, weight=w, difficulties=list(levels)) for env, w in WEIGHTS.items()])


def test_sampling_weights_are_honoured_over_many_steps():
    """200 steps of 16 groups: each environment's count passes a chi-square test against its weight (1:2:5),
    and so does every quarter of the run."""
    sampler = TaskSampler(_sources(), seed=0)
    steps, groups = 200, 16
    envs = [sampler.task(p).env_id for p in range(steps * groups)]
    total = sum(WEIGHTS.values())
    for part in (envs, *(envs[i::4] for i in range(4))):
        counts = Counter(part)
        expected = {env: len(part) * w / total for env, w in WEIGHTS.items()}
        chi2 = sum((counts[env] - e) ** 2 / e for env, e in expected.items())
        assert chi2 < 13.82, (counts, expected)  # p = 0.001 with 2 degrees of freedom


def test_a_positions_environment_depends_on_seed_and_position_only():
    first, second = TaskSampler(_sources(), seed=3), TaskSampler(_sources(), seed=3)
    forward = [first.task(p) for p in range(64)]
    assert [second.environment(p) for p in reversed(range(64))][::-1] == [t.env_id for t in forward]
    assert [TaskSampler(_sources(), seed=4).environment(p) for p in range(64)] != [t.env_id for t in forward]


def test_each_environment_cycles_its_levels_and_tasks_are_never_repeated():
    sampler = TaskSampler(_sources(), seed=0)
    tasks = [sampler.task(p) for p in range(300)]
    assert len({t.id for t in tasks}) == len(tasks)
    for env in WEIGHTS:
        levels = [t.difficulty for t in tasks if t.env_id == env]
        assert levels[:4] == ["easy", "medium", "easy", "medium"]


def test_a_suite_mixture_takes_the_suites_train_tasks_in_turn():
    mixture = sources(SuiteMixture(suite="games-v0", weights={"games/Sokoban-v0": 3.0}))
    assert [(s.id, s.weight, s.difficulties) for s in mixture] == [
        ("games/FrozenLake-v0", 1.0, ("easy", "medium", "hard")), ("games/Sokoban-v0", 3.0, ("easy", "medium", "hard"))]
    sampler = TaskSampler(mixture, seed=0)
    tasks = [sampler.task(p) for p in range(600)]
    assert all(t.split == "train" for t in tasks)
    assert Counter(t.env_id for t in tasks)["games/Sokoban-v0"] > 400
    easy_lakes = [t for t in tasks if t.env_id == "games/FrozenLake-v0" and t.difficulty == "easy"]
    assert easy_lakes == list(mixture[0].pool["easy"][: len(easy_lakes)])  # in file order, none twice


@settings(max_examples=25, deadline=None)
@given(consumed=st.sets(st.integers(0, 47)), checkpoint_at=st.integers(0, 48))
def test_a_restored_sampler_hands_out_what_the_first_would_have(consumed, checkpoint_at):
    """Hand out 48 positions, consume some, save; a sampler restored from that state gives every
    unconsumed position the task the first gave it, and later positions the tasks the first goes on to."""
    curriculum = SuccessWindow(CurriculumConfig(), {s.id: s.difficulties for s in _sources()})
    first = TaskSampler(_sources(), seed=1, curriculum=curriculum)
    handed = [first.task(p) for p in range(48)]
    for p in consumed:
        first.consume(p)
    restored = TaskSampler(_sources(), seed=1,
                           curriculum=SuccessWindow(CurriculumConfig(), {s.id: s.difficulties for s in _sources()}))
    restored.load_state(first.state())
    assert all(restored.task(p) == handed[p] for p in range(48) if p not in consumed)
    assert [restored.task(p) for p in range(48, 80)] == [first.task(p) for p in range(48, 80)]


def _window(**settings: float) -> SuccessWindow:
    return SuccessWindow(CurriculumConfig(**settings), {"env": ["easy", "medium", "hard"]})


def test_the_curriculum_moves_toward_the_level_in_the_band():
    curriculum = _window(rate=0.5, floor=0.05, min_episodes=4)
    for _ in range(12):
        curriculum.observe("env", "easy", [True] * 8)  # too easy
        curriculum.observe("env", "medium", [True, False] * 4)  # 50%: in the band
        curriculum.observe("env", "hard", [False] * 8)  # too hard
        curriculum.update()
    easy, medium, hard = curriculum.mix["env"]
    assert medium > 0.85 and easy == pytest.approx(hard) and easy >= 0.05 * 0.95
    assert sum(curriculum.mix["env"]) == pytest.approx(1.0)
    metrics = curriculum.metrics()
    assert metrics["curriculum/env/share_medium"] == medium and metrics["curriculum/env/success_easy"] == 1.0
    assert metrics["curriculum/env/episodes_seen"] == 12 * 24
    draws = Counter(curriculum.draw("env", np.random.default_rng(i)) for i in range(400))
    assert draws["medium"] > 300


def test_with_no_level_in_the_band_the_nearest_one_is_the_target():
    curriculum = _window(rate=1.0, floor=0.0, min_episodes=4)
    curriculum.observe("env", "easy", [True] * 8)
    curriculum.observe("env", "medium", [True] * 7 + [False])  # 87.5%: nearest the band's top
    curriculum.observe("env", "hard", [False] * 8)
    curriculum.update()
    assert curriculum.mix["env"] == [0.0, 1.0, 0.0]


def test_unmeasured_levels_stay_targets_until_measured():
    curriculum = _window(rate=1.0, floor=0.0, min_episodes=8)
    curriculum.observe("env", "easy", [True] * 8)
    curriculum.observe("env", "hard", [False] * 3)
    curriculum.update()
    assert curriculum.mix["env"] == [0.0, 0.5, 0.5]


def test_curriculum_state_round_trips():
    curriculum = _window(window=4)
    curriculum.observe("env", "medium", [True, False, True, True, False])
    curriculum.update()
    restored = _window(window=4)
    restored.load_state(curriculum.state())
    assert restored.state() == curriculum.state() and list(restored.recent["env"][1]) == [False, True, True, False]


def test_a_training_config_with_parser_auto_takes_the_models_format_or_names_the_key(tmp_path):
    (tmp_path / "chat_template.jinja").write_text("<function=x><parameter=y>")
    overrides = [f"model.path={tmp_path}", "env.kwargs.parser=auto", f"output_dir={tmp_path / 'run'}"]
    config = load_config(TrainConfig, configs_folder() / "quickstart.yaml", overrides)
    assert config.env.kwargs["parser"] == "qwen3_coder"
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")
    with pytest.raises(ConfigError, match="env.kwargs.parser: auto takes the tool-call format"):
        load_config(TrainConfig, configs_folder() / "quickstart.yaml", overrides)
