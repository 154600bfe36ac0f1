"""``agentgym eval --sampling latr``: a task's samples played as one tree group (with stochastic refills), pass@k
over them, the trees drawn in the report, whole groups replayed on ``--resume``, and the refusals."""

from __future__ import annotations

import html.parser
import json
from pathlib import Path

import pytest

from agentgym.evaluation.play import group_samples
from agentgym.evaluation.records import EPISODES, MANIFEST, RunFolder, RunSpec, tasks_digest
from agentgym.evaluation.report import write_report
from agentgym.evaluation.scores import score
from agentgym.rollout.config import TreeRollout
from agentgym.rollout.scheduler import GroupResult
from agentgym.tasks import Task
from agentgym.trajectory import Status, Trajectory
from tests.evaluation.test_cli import agentgym, last_json

BRANCHING = ["--latr", "tau_abs=1e-4", "--latr", "tau_rel=1.0", "--latr", "turn_window=1", "--latr", "forced_turn=3",
             "--latr", "prune_same_observation=false", "--latr", "prune_threshold=null",
             "--latr", "width_schedule={0: 0.75}"]
"""The untrained tiny model branches at every turn (its distributions are flat), no branch is pruned, and 3 of
the 4 samples grow as the tree: the fourth is a stochastic episode beside it."""


def latr_eval(model: Path, out: Path, *extra: str) -> dict:
    return last_json(agentgym("eval", "games/FrozenLake-v0", "--engine", "torch", "--model", str(model),
                              "--sampling", "latr", "--samples", "4", "--episodes", "3", "--max-tokens", "12",
                              "--concurrency", "4", "--env-arg", "parser=pythonic", "--env-arg", "max_turns=3",
                              *BRANCHING, "--out", str(out), "--json", *extra))


class _Items(html.parser.HTMLParser):
    """The ``<li>`` elements of a page with their ``data-*`` attributes, and the class of the list each is in."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[dict[str, str]] = []
        self._lists: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "ul":  # a nested list is part of its outer list
            self._lists.append(self._lists[-1] if self._lists else dict(attrs).get("class") or "")
        elif tag == "li" and any(k.startswith("data-") for k, _ in attrs):
            self.items.append({"list": self._lists[-1], **{k[5:]: v or "" for k, v in attrs if k.startswith("data-")}})

    def handle_endtag(self, tag: str) -> None:
        if tag == "ul":
            self._lists.pop()


def tree_items(page: str) -> list[dict[str, str]]:
    parser = _Items()
    parser.feed(page)
    return parser.items


@pytest.fixture(scope="module")
def latr_run(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("latr") / "run"
    return out, latr_eval(tiny_model_dir, out)


@pytest.mark.timeout(300)  # loads torch in a subprocess: 25 s on 2 idle cores, far more under load
def test_a_latr_eval_scores_pass_at_k_over_each_tasks_tree_group_and_draws_the_trees(latr_run):
    out, summary = latr_run
    assert summary["scored"] == 12 and summary["tasks"] == 3 and set(summary["pass_at_k"]) == {"1", "2", "4"}
    spec = RunFolder(out).spec()
    assert spec.rollout_sampling == "latr" and spec.latr is not None and spec.latr.width_schedule == {0: 0.75}
    records = RunFolder(out).finished()
    for task_id in {r.task.id for r in records.values()}:
        group = [records[f"{task_id}#{s}"] for s in range(4)]
        assert [r.trajectory.info.get("branch") for r in group] == [0, 1, 2, None]  # root first, the refill last
        assert group[3].trajectory.info["seed"][2] >= 1  # played on its own, by the scheduler's seed
        assert {r.trajectory.info["tree"]["made"] for r in group[:3]} == {2}

    items = tree_items((out / "report.html").read_text())
    branches = [i for i in items if "branch" in i]
    assert len(branches) == 9 and all(i["list"] == "tree" for i in branches)
    for item in branches:
        info = records[item["key"]].trajectory.info
        assert item["branch"] == str(info["branch"]) and item["sample"] == item["key"].rsplit("#", 1)[1]
        assert item["parent"] == ("" if info["parent"] is None else str(info["parent"]))
        assert item["fork-turn"] == str(info["fork_turn"])
    refills = [i for i in items if "branch" not in i]
    assert [i["key"].rsplit("#", 1)[1] for i in refills] == ["3", "3", "3"] and {i["list"] for i in refills} == {"refills"}
    markdown = (out / "report.md").read_text()
    assert "## Trees" in markdown and "| task | made | pruned |" in markdown and "tree sampling (LATR)" in markdown


@pytest.mark.timeout(300)
def test_a_resumed_latr_eval_replays_the_whole_group_of_a_task_with_a_record_missing(latr_run, tiny_model_dir,
                                                                                     tmp_path):
    out, summary = latr_run
    copy = tmp_path / "resumed"
    copy.mkdir()
    for name in (MANIFEST, EPISODES):
        (copy / name).write_bytes((out / name).read_bytes())
    lines = (copy / EPISODES).read_text().splitlines(keepends=True)
    gone = json.loads(lines[5])["task"]
    (copy / EPISODES).write_text("".join(lines[:5] + lines[6:]))

    resumed = latr_eval(tiny_model_dir, copy, "--resume")
    added = [json.loads(line) for line in (copy / EPISODES).read_text().splitlines()[len(lines) - 1:]]
    assert sorted(r["sample"] for r in added) == [0, 1, 2, 3] and all(r["task"] == gone for r in added)
    assert resumed["scored"] == 12 and resumed["pass_at_k"] == summary["pass_at_k"]
    before, after = RunFolder(out).finished(), RunFolder(copy).finished()
    assert {k: [t.action for t in r.trajectory.turns] for k, r in after.items()} == {  # the same seeds, the same tree
        k: [t.action for t in r.trajectory.turns] for k, r in before.items()}


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--policy", "oracle", "--sampling", "latr"], "not a reference --policy"),
        (["--engine", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--sampling", "latr"],
         "the openai engine does not"),
        (["--policy", "oracle", "--latr", "tau_abs=0.1"], "it needs --sampling latr"),
        (["--engine", "torch", "--model", "{model}", "--sampling", "latr", "--latr", "breadth=3"],
         "--latr breadth: not one of its settings"),
        (["--engine", "torch", "--model", "{model}", "--sampling", "latr", "--latr", "tau_abs=2"], "--latr tau_abs:"),
        (["--engine", "torch", "--model", "{model}", "--sampling", "latr", "--latr", "tau_abs"], "is not KEY=VALUE"),
    ],
)
def test_bad_latr_arguments_exit_2_naming_them(args, reason, tiny_model_dir):
    args = [a.replace("{model}", str(tiny_model_dir)) for a in args]
    done = agentgym("eval", "games/FrozenLake-v0", "--episodes", "1", *args)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and reason in lines[0], done.stderr


def test_a_manifest_from_before_tree_sampling_reads_as_stochastic():
    old = {"agent": "oracle", "policy": "oracle", "tasks_sha256": "0" * 64, "samples": 2}
    spec = RunSpec.model_validate_json(json.dumps(old))
    assert spec.rollout_sampling == "stochastic" and spec.latr is None
    assert spec.differences(RunSpec(**old, rollout_sampling="latr", latr=TreeRollout())) == ["rollout_sampling", "latr"]
    with pytest.raises(ValueError, match="exactly when rollout_sampling is latr"):
        RunSpec(**old, rollout_sampling="latr")


def _episode(task: Task, *, branch: int | None = None, parent: int | None = None, fork_turn: int = 0,
             seed: int = 0, status: Status = "ok", success: bool = False) -> Trajectory:
    trajectory = Trajectory(env_id=task.env_id, task=task, status=status, success=success, reward=float(success),
                            error="boom" if status == "error" else None)
    trajectory.info["seed"] = [0, 0, seed, task.seed]
    if branch is not None:
        trajectory.info.update(branch=branch, parent=parent, fork_turn=fork_turn,
                               tree={"made": 4, "pruned": 1, "turns": 3})
    return trajectory


def test_a_groups_episodes_become_samples_root_first_then_branches_then_refills_by_seed():
    task = Task(env_id="games/FrozenLake-v0", seed=5, difficulty="easy", split="test")
    refill_b, refill_a = _episode(task, seed=3), _episode(task, seed=2)
    branch_3, root = _episode(task, branch=3, parent=0), _episode(task, branch=0)
    lost = _episode(task, branch=1, parent=0, status="error")
    group = GroupResult(0, task, kept=[refill_b, branch_3, refill_a, root], errors=[lost])
    samples = group_samples(group, 4)
    assert [final for final, _ in samples] == [root, branch_3, refill_a, refill_b]
    assert [failed for _, failed in samples] == [[], [], [lost], []]  # with the first episode played in its stead
    short = group_samples(GroupResult(0, task, kept=[root], errors=[lost, _episode(task, seed=1, status="error")]), 3)
    assert [final.info.get("branch") for final, _ in short] == [0, 1, None]  # the lost attempts fill the rest


def test_the_report_hangs_each_branch_from_its_parent_and_shows_refills_apart(tmp_path):
    task = Task(env_id="games/FrozenLake-v0", seed=5, difficulty="easy", split="test")
    spec = RunSpec(agent="torch-tiny", engine="torch", model="m", tasks_sha256=tasks_digest([task]), samples=4,
                   rollout_sampling="latr", latr=TreeRollout(forced_turn=3))
    run = RunFolder(tmp_path)
    run.start(spec)
    episodes = [_episode(task, branch=0, success=True), _episode(task, branch=2, parent=0, fork_turn=1),
                _episode(task, branch=4, parent=2, fork_turn=2), _episode(task, seed=1)]
    for sample, trajectory in enumerate(episodes):
        run.append(task, sample, trajectory, [])
    write_report(run, score(spec, run.finished().values(), [], 1.0))
    page = (tmp_path / "report.html").read_text()
    items = {i["key"].rsplit("#", 1)[1]: i for i in tree_items(page)}
    assert [(items[s].get("branch"), items[s].get("parent"), items[s]["list"]) for s in "0123"] == [
        ("0", "", "tree"), ("2", "0", "tree"), ("4", "2", "tree"), (None, None, "refills")]
    assert "<ul class='tree'><li data-key='games/FrozenLake-v0:easy:5#0'" in page
    assert page.index("data-branch='4'") < page.index("</li></ul></li></ul></li></ul>")  # nested under 2 under 0
    assert "fork at turn 3" in page and "`forced_turn=3`" in (tmp_path / "report.md").read_text()
    assert "1 of 4 solved" in page and "<script" not in page
