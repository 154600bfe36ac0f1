"""Run folders as they are found in the middle of their life: an evaluation just started, a training run before its
first step, one whose groups grew as trees, one whose tokenizer is gone, one that lost attempts to infrastructure."""

from __future__ import annotations

import re

import pytest
import yaml
from fastapi.testclient import TestClient

from agentgym.evaluation.records import EPISODES, INFRA, MANIFEST, ROLLOUTS, InfraRecord, RunSpec
from agentgym.view import NotARun, create_app, open_run
from tests.view.records import append, copy_run, episode, line, rollout


def client(*paths) -> TestClient:
    return TestClient(create_app(list(paths), refresh_seconds=0))


def started_evaluation(folder):
    folder.mkdir(parents=True)
    (folder / MANIFEST).write_text(RunSpec(agent="oracle", policy="oracle", tasks_sha256="0").model_dump_json())
    return folder


def training_run(folder, model_path="/nowhere/model"):
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump({"model": {"path": model_path}}))
    (folder / "metrics.jsonl").write_text("")
    return folder


def test_an_evaluation_just_started_shows_its_episodes_as_they_come(tmp_path):
    folder = started_evaluation(tmp_path / "eval")
    web = client(folder)
    assert web.get("/run/a").status_code == 200
    assert "0 episodes" in web.get("/run/a/episodes").text
    append(folder, line(episode(1, reward=1.0, success=True)) + line(episode(2)))
    assert "2 episodes" in web.get("/run/a/episodes").text
    page = web.get("/run/a").text
    assert "success <b>50.0%</b>" in page


def test_a_training_run_before_its_first_step_and_its_held_out_evaluations_as_they_appear(tmp_path):
    folder = training_run(tmp_path / "train")
    web = client(folder)
    page = web.get("/run/a")
    assert page.status_code == 200 and "no values yet" in page.text
    assert "0 episodes" in web.get("/run/a/episodes").text
    (folder / "metrics.jsonl").write_text('{"step": 1, "time": 0, "rollout/reward_mean": 0.5}\n{"step": 2, "ti')
    step = started_evaluation(folder / "eval" / "step-000002")
    append(step, line(episode(7, reward=1.0, success=True)))
    page = web.get("/run/a").text
    assert "held-out evaluation, step 2" in page and "rollout/reward_mean at step 1: 0.5" in page
    assert "eval-000002" in web.get("/run/a/episodes?source=eval-000002").text


def test_a_tree_grown_group_and_ids_for_a_missing_tokenizer(tmp_path):
    folder = training_run(tmp_path / "latr")
    tree = {"made": 3, "pruned": 1, "turns": 2, "decoded": 40}
    members = [rollout(1, 0, 0, reward=1.0, info={"branch": 0, "parent": None, "fork_turn": 0, "tree": tree}),
               rollout(1, 0, 1, reward=0.0, info={"branch": 1, "parent": 0, "fork_turn": 1, "tree": tree}),
               rollout(1, 0, 2, reward=0.0, info={"branch": 2, "parent": 1, "fork_turn": 1, "tree": tree}),
               rollout(1, 0, 3, reward=0.5)]  # a refill, outside the tree
    append(folder, b"".join(line(r) for r in members), ROLLOUTS)
    web = client(folder)
    group = web.get("/run/a/group/1/0").text
    assert group.count('<div class="member') == 4 and "made 3, pruned 1" in group
    tree_html = group[group.index('<ul class="tree">'):]
    assert re.search(r"branch 0, sample 0</a>.*?<ul>.*?branch 1, sample 1</a>.*?<ul>.*?branch 2, sample 2</a>",
                     tree_html, re.DOTALL)
    assert "1 episode refilled the group outside the tree" in group
    tokens = web.get("/run/a/episode/rollouts/1?tab=tokens&colour=ratio").text
    assert "no tokenizer found for this run (token ids shown)" in tokens
    assert re.search(r'<span class="tok b\d t\d r\d" title="id 3 ', tokens) and ">[3]</span>" in tokens


def test_attempts_lost_to_infrastructure_show_their_tracebacks(gui_run, tmp_path):
    folder = copy_run(gui_run, tmp_path / "infra")
    lost = InfraRecord(key="gui/ClickButton-v0:easy:1000000000#0", task_id="gui/ClickButton-v0:easy:1000000000",
                       env_id="gui/ClickButton-v0", attempt=1, cause="browser", error="Target closed",
                       traceback='Traceback (most recent call last):\n  File "desktop.py", line 3\nTargetClosed')
    append(folder, (lost.model_dump_json() + "\n").encode() + b"{torn", INFRA)
    append(folder, line(episode(9, status="error")))
    page = client(folder).get("/run/a").text
    assert "1 attempt lost" in page and "Target closed" in page and "TargetClosed" in page
    assert "Episodes that ended in an infrastructure error: 1" in page and "sandbox died" in page
    assert "boom" in page  # the error episode's traceback


def test_what_is_not_a_run(tmp_path):
    with pytest.raises(NotARun, match="no such folder"):
        open_run(tmp_path / "nowhere")
    with pytest.raises(NotARun, match="holds no run"):
        open_run(tmp_path)
    (tmp_path / EPISODES).write_text("")  # episodes without a manifest are not an evaluation's folder
    with pytest.raises(NotARun, match="holds no run"):
        open_run(tmp_path)
