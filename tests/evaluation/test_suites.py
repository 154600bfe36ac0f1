"""Bundled suites: fixed, checksummed task lists with disjoint splits; a changed list is refused."""

from __future__ import annotations

import shutil

import pytest

from agentgym.registration import spec
from agentgym.suites import SuiteError, load_suite, suite_names

SUITES = ["all-v0", "games-v0", "gui-v0", "tools-v0", "web-v0"]


def test_the_bundled_suites_load_and_match_their_checksums():
    assert suite_names() == SUITES
    for name in SUITES:
        suite = load_suite(name)
        ids = [t.id for t in suite.tasks]
        assert len(ids) == len(set(ids)), name
        test, train = suite.split("test"), suite.split("train")
        assert len(test) + len(train) == len(suite.tasks) and test and train
        assert not {t.seed for t in test} & {t.seed for t in train}
        for env_id in suite.env_ids:
            levels = {t.difficulty for t in test if t.env_id == env_id}
            assert levels == {"easy", "medium", "hard"}, (name, env_id)
            assert spec(env_id).id == env_id


def test_all_v0_is_the_union_of_the_family_suites():
    union = [t for name in ("games-v0", "tools-v0", "web-v0", "gui-v0") for t in load_suite(name).split("test")]
    assert {t.id for t in load_suite("all-v0").split("test")} == {t.id for t in union}
    assert len(load_suite("all-v0").split("test")) == len(union) == 333


def test_a_changed_task_list_is_refused(tmp_path):
    folder = tmp_path / "games-v0"
    shutil.copytree(load_suite("games-v0").folder, folder)
    assert load_suite(folder).sha256 == load_suite("games-v0").sha256
    tasks = folder / "tasks.jsonl"
    tasks.write_text(tasks.read_text().replace('"seed":1000000000,', '"seed":1000000999,', 1))
    with pytest.raises(SuiteError, match="changed: its SHA-256 is .* a changed task list is a new suite version"):
        load_suite(folder)


def test_an_unknown_suite_names_the_bundled_ones():
    with pytest.raises(SuiteError, match="no suite 'games-v9'; bundled suites: all-v0, games-v0"):
        load_suite("games-v9")
