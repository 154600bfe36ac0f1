"""Evaluation runs: streamed to disk, resumed episode for episode after a crash, infrastructure errors
retried and reported apart, and a report a person can read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import agentgym
from agentgym import OraclePolicy, RandomPolicy
from agentgym.evaluation.leaderboard import Recorded, write_leaderboard
from agentgym.evaluation.records import RunFolder, RunSpec, tasks_digest
from agentgym.evaluation.run import ResumeMismatch, run_evaluation
from agentgym.suites import load_suite, write_suite
from agentgym.tasks import TaskSet
from tests.conftest import CounterEnv

ATTEMPTS: dict[int, int] = {}
FLAKY, BROKEN = {2, 7}, 5
"""Seeds (offsets in the test split) whose first attempt dies, and one whose every attempt does."""


class FlakyCounter(CounterEnv):
    """CounterEnv whose sandbox dies on the first reset of the FLAKY seeds and on every reset of BROKEN."""

    def setup(self, difficulty, options):
        offset = self.np_random_seed - 1_000_000_000
        ATTEMPTS[offset] = ATTEMPTS.get(offset, 0) + 1
        if offset == BROKEN or (offset in FLAKY and ATTEMPTS[offset] == 1):
            raise RuntimeError(f"sandbox died (attempt {ATTEMPTS[offset]})")
        return super().setup(difficulty, options)


@pytest.fixture
def flaky_env():
    ATTEMPTS.clear()
    spec = agentgym.register("test/Flaky-v0", "tests.evaluation.test_runs:FlakyCounter")
    yield spec.id
    from agentgym import registration

    registration._registry.pop(spec.id, None)


class NeverStarts(CounterEnv):
    """CounterEnv whose every reset fails."""

    def setup(self, difficulty, options):
        raise RuntimeError("sandbox image missing")


@pytest.fixture
def never_starts():
    spec = agentgym.register("test/NeverStarts-v0", "tests.evaluation.test_runs:NeverStarts")
    yield spec.id
    from agentgym import registration

    registration._registry.pop(spec.id, None)


def _spec(tasks, agent="random", **fields) -> RunSpec:
    return RunSpec(agent=agent, policy=agent, tasks_sha256=tasks_digest(tasks), **fields)


def _episodes(folder: Path) -> dict[str, tuple]:
    return {key: (r.status, r.reward, r.success, [t.action for t in r.trajectory.turns])
            for key, r in RunFolder(folder).finished().items()}


class Crash(Exception):
    """Stands in for the process dying."""


def test_a_resumed_evaluation_equals_an_uninterrupted_one(tmp_path):
    tasks = list(load_suite("games-v0").split("test"))[::4]  # 30 tasks of both games and every level
    spec = _spec(tasks, samples=3, seed=11)
    whole = asyncio.run(run_evaluation(spec, tasks, RandomPolicy(), tmp_path / "whole", concurrency=4))

    def crash_after_40(progress):
        if progress.done >= 40:
            raise Crash

    with pytest.raises(ExceptionGroup) as crashed:
        asyncio.run(run_evaluation(spec, tasks, RandomPolicy(), tmp_path / "resumed", concurrency=4,
                                   on_progress=crash_after_40))
    assert crashed.group_contains(Crash)
    assert 40 <= len(RunFolder(tmp_path / "resumed").finished()) < 90
    played = []
    resumed = asyncio.run(run_evaluation(spec, tasks, RandomPolicy(), tmp_path / "resumed", resume=True,
                                         concurrency=2, on_progress=played.append))
    assert played[0].done >= 40 and played[-1].done == 90  # only the missing samples were played
    assert _episodes(tmp_path / "resumed") == _episodes(tmp_path / "whole")
    assert len(_episodes(tmp_path / "whole")) == 90
    strip = {"wall_seconds", "mean_episode_seconds"}
    assert resumed.model_dump(exclude=strip) == whole.model_dump(exclude=strip)
    assert set(whole.pass_at_k) == {"1", "2", "3"} and whole.pass_at_k["1"] <= whole.pass_at_k["3"]


def test_resume_refuses_other_settings_and_a_new_run_refuses_a_used_folder(tmp_path):
    tasks = list(load_suite("games-v0").split("test"))[:4]
    asyncio.run(run_evaluation(_spec(tasks), tasks, RandomPolicy(), tmp_path))
    with pytest.raises(ValueError, match="already holds an evaluation; continue it with --resume"):
        asyncio.run(run_evaluation(_spec(tasks), tasks, RandomPolicy(), tmp_path))
    with pytest.raises(ResumeMismatch, match=r"other settings \(samples, seed\)"):
        asyncio.run(run_evaluation(_spec(tasks, samples=2, seed=1), tasks, RandomPolicy(), tmp_path, resume=True))
    with pytest.raises(ValueError, match="holds no evaluation to continue"):
        asyncio.run(run_evaluation(_spec(tasks), tasks, RandomPolicy(), tmp_path / "new", resume=True))


def test_a_torn_last_line_is_cut_off_and_that_episode_played_again(tmp_path):
    tasks = list(load_suite("games-v0").split("test"))[:6]
    spec = _spec(tasks, agent="oracle")
    asyncio.run(run_evaluation(spec, tasks, OraclePolicy(), tmp_path))
    episodes = tmp_path / "episodes.jsonl"
    lines = episodes.read_bytes().splitlines(keepends=True)
    episodes.write_bytes(b"".join(lines[:4]) + lines[4][:50])  # killed while writing the fifth line
    scores = asyncio.run(run_evaluation(spec, tasks, OraclePolicy(), tmp_path, resume=True))
    assert scores.scored == 6 and scores.success_rate == 1.0
    assert len(episodes.read_text().splitlines()) == 6


def test_infrastructure_errors_are_retried_and_reported_apart(flaky_env, tmp_path):
    tasks = list(TaskSet.generate(flaky_env, 10, split="test", difficulties=("easy", "hard")))
    spec = _spec(tasks, agent="oracle", max_retries=2)
    scores = asyncio.run(run_evaluation(spec, tasks, OraclePolicy(), tmp_path, concurrency=3))
    assert ATTEMPTS[2] == ATTEMPTS[7] == 2 and ATTEMPTS[BROKEN] == 3 and ATTEMPTS[0] == 1
    records = RunFolder(tmp_path).finished()
    flaky = records[f"{tasks[2].id}#0"]
    assert flaky.status == "ok" and flaky.success and flaky.attempts == 2  # retried, then scored
    broken = records[f"{tasks[BROKEN].id}#0"]
    assert broken.status == "error" and "sandbox died (attempt 3)" in broken.error and broken.attempts == 3
    # the lost episode is not a failure: nine scored, all solved
    assert (scores.scored, scores.success_rate, scores.infra_errors, scores.infra_retried) == (9, 1.0, 1, 4)
    assert scores.error_causes == {"reset:RuntimeError": 5}
    infra = [json.loads(line) for line in (tmp_path / "infra.jsonl").read_text().splitlines()]
    assert sorted((r["task_id"], r["attempt"]) for r in infra) == sorted(
        [(tasks[2].id, 1), (tasks[7].id, 1), *((tasks[BROKEN].id, a) for a in (1, 2, 3))])
    report = (tmp_path / "report.md").read_text()
    section = report[report.index("## Infrastructure errors"):report.index("## Best episodes")]
    assert "| reset:RuntimeError | 5 |" in section and f"{tasks[BROKEN].id}#0" in section
    assert "9 of 10" in report and "1 episodes unscored, 4 attempts retried" in report
    # resuming plays the lost episode again (it is not a result), and nothing else
    ATTEMPTS[BROKEN] = -10  # still broken
    again = asyncio.run(run_evaluation(spec, tasks, OraclePolicy(), tmp_path, resume=True))
    assert ATTEMPTS[BROKEN] == -7 and ATTEMPTS[0] == 1 and again.infra_errors == 1


def test_the_report_holds_summary_breakdowns_plot_and_transcripts(tmp_path):
    tasks = list(load_suite("games-v0").split("test"))[::10]
    spec = _spec(tasks, samples=2)
    asyncio.run(run_evaluation(spec, tasks, RandomPolicy(), tmp_path))
    report = (tmp_path / "report.md").read_text()
    for heading in ("## Summary", "## By family", "## By difficulty", "## By environment", "## Best episodes",
                    "## Worst episodes", "![success rate per environment](scores.png)", "pass@2"):
        assert heading in report
    assert report.count("#### games/") == 6 and "**assistant**" in report and '"name": "move"' in report
    assert (tmp_path / "scores.png").read_bytes().startswith(b"\x89PNG")
    page = (tmp_path / "report.html").read_text()
    assert page.startswith("<!doctype html>") and "<details><summary>games/" in page and "<img src='scores.png'" in page
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["episodes"] == 24 and len(summary["per_task"]) == 12
    assert summary["by_group"] == [] and "## By group" not in report  # no task names a group


def test_tasks_with_a_group_are_broken_down_by_it(tmp_path):
    """A suite's tasks may say what they are drawn from (a repository, say): the report has a row per group."""
    tasks = [t.model_copy(update={"group": "odd" if t.seed % 2 else "even"})
             for t in list(load_suite("games-v0").split("test"))[:6]]
    scores = asyncio.run(run_evaluation(_spec(tasks, agent="oracle"), tasks, OraclePolicy(), tmp_path))
    assert [(b.name, b.episodes, b.success_rate) for b in scores.by_group] == [("even", 3, 1.0), ("odd", 3, 1.0)]
    assert "## By group (what the tasks are drawn from)" in (tmp_path / "report.md").read_text()


def test_an_evaluation_that_scored_nothing_has_no_success_rate_and_shows_the_first_traceback(never_starts, tmp_path):
    tasks = list(TaskSet.generate(never_starts, 4, split="test", difficulties=("easy", "hard")))
    suite = write_suite(tmp_path / "suites" / "never-v0", "never-v0", "Episodes that never start.", TaskSet(tasks))
    (suite.folder / "README.md").write_text("<!-- scores: test split -->\n<!-- /scores -->\n")
    run = tmp_path / "runs" / "oracle"
    spec = _spec(tasks, agent="oracle", max_retries=1, suite=suite.name, suite_sha256=suite.sha256)
    scores = asyncio.run(run_evaluation(spec, tasks, OraclePolicy(), run))
    assert (scores.scored, scores.infra_errors, scores.infra_retried) == (0, 4, 4)
    assert scores.success_rate is None and scores.mean_reward is None and scores.mean_turns is None
    assert [(b.name, b.success_rate) for b in scores.by_difficulty] == [("easy", None), ("hard", None)]
    assert all(t.samples == 0 and t.mean_reward is None for t in scores.per_task)
    assert json.loads((run / "summary.json").read_text())["success_rate"] is None
    first = RunFolder(run).first_traceback()
    assert first.key == f"{tasks[0].id}#0" and first.attempt == 1
    assert first.traceback.endswith('in setup\n    raise RuntimeError("sandbox image missing")\nRuntimeError: sandbox image missing\n')
    report = (run / "report.md").read_text()
    assert "| success | n/a — no episode was scored |" in report and "| easy | 0 | n/a | n/a | 2 |" in report
    assert f"The first traceback: {first.key}, attempt 1 (reset:RuntimeError)" in report
    assert 'raise RuntimeError("sandbox image missing")' in report
    # the leaderboard leaves the run out of the suite it played rather than failing on its missing rate
    write_leaderboard(tmp_path / "runs", tmp_path / "leaderboard.md", tmp_path / "suites")
    board = (tmp_path / "leaderboard.md").read_text()
    assert "| oracle | – |" in board and "0 episodes scored, 4 lost to infrastructure" in board
    assert "No recorded run covers this suite yet." in (suite.folder / "README.md").read_text()


def test_a_recorded_model_run_names_each_env_argument_as_eval_takes_it():
    spec = RunSpec(agent="torch-model", engine="torch", model="runs/m", tasks_sha256="0",
                   env_args={"*": {"parser": "pythonic"}, "games/Sokoban-v0": {"describe": True}})
    assert Recorded("m", spec, scores=None).description == (
        "`torch` engine, model `runs/m`, parser=pythonic; games/Sokoban-v0:describe=True")


def test_an_agents_runs_on_several_suites_fill_one_leaderboard_row(tmp_path):
    graded = list(TaskSet.generate("games/FrozenLake-v0", 3, split="test", difficulties=("easy", "medium", "hard")))
    flat = list(TaskSet.generate("gymnasium/CliffWalking-v1", 2, split="test"))
    suites = {}
    for name, tasks in (("graded-v0", graded), ("flat-v0", flat)):
        suites[name] = write_suite(tmp_path / "suites" / name, name, f"{name} tasks.", TaskSet(tasks))
        (suites[name].folder / "README.md").write_text("<!-- scores: test split -->\n<!-- /scores -->\n")
    runs = tmp_path / "runs"
    for folder, name, tasks, policy in ((runs / "oracle", "graded-v0", graded, OraclePolicy()),
                                        (runs / "random", "graded-v0", graded, RandomPolicy()),
                                        (runs / "random" / "flat-v0", "flat-v0", flat, RandomPolicy())):
        spec = _spec(tasks, agent=policy.name, suite=name, suite_sha256=suites[name].sha256)
        asyncio.run(run_evaluation(spec, tasks, policy, folder))
    write_leaderboard(runs, tmp_path / "leaderboard.md", tmp_path / "suites")
    board = (tmp_path / "leaderboard.md").read_text()
    assert "| agent | flat-v0 | graded-v0 |" in board
    assert "| oracle | – | 100.0% (1.00) |" in board and board.count("| random | ") == 1
    assert "- **random** on flat-v0: reference policy `random`" in board
    graded_table = (suites["graded-v0"].folder / "README.md").read_text()
    assert "| agent | success | mean reward | easy | medium | hard |" in graded_table
    assert "| oracle | 100.0% | 1.000 | 100.0% | 100.0% | 100.0% |" in graded_table
    flat_table = (suites["flat-v0"].folder / "README.md").read_text()
    assert "| agent | success | mean reward |\n" in flat_table and "| random |" in flat_table
    assert "| oracle |" not in flat_table
