"""Bundled suites: fixed, checksummed task lists with disjoint splits; a changed list is refused."""

from __future__ import annotations

import shutil

import pytest

from agentgym.registration import spec
from agentgym.suites import SuiteError, load_suite, suite_names

SUITES = ["all-v0", "games-v0", "gui-v0", "miniwob-v0", "swe-v0", "textarena-v0", "tools-v0", "web-v0"]
ADAPTED = {"miniwob-v0": 56, "textarena-v0": 35}
"""The suites of other projects' tasks, which have one difficulty, and how many environments each holds."""


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
            assert levels == ({"default"} if name in ADAPTED else {"easy", "medium", "hard"}), (name, env_id)
            assert spec(env_id).id == env_id
        assert name not in ADAPTED or len(suite.env_ids) == ADAPTED[name]


def test_the_miniwob_suite_is_the_commonly_reported_subset_and_says_where_it_comes_from():
    suite = load_suite("miniwob-v0")
    assert {"miniwob/click-button-v0", "miniwob/book-flight-v0", "miniwob/social-media-some-v0"} <= set(suite.env_ids)
    assert "miniwob/drag-box-v0" not in suite.env_ids  # outside the subset
    readme = (suite.folder / "README.md").read_text()
    assert "WebGUM" in readme and "webgum_subset" in readme
    assert "No environment here has an oracle" in readme and readme.count("(no oracle)") == 56


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
