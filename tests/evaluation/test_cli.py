"""``agentgym eval`` on suites (JSON, report, kill -9 and --resume, refusals), ``compare``, ``leaderboard``,
and the openai engine against ``agentgym serve`` scoring exactly as the torch engine does."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentgym.evaluation.records import RunFolder
from agentgym.suites import load_suite, write_suite
from agentgym.tasks import TaskSet
from tests.inference.serving import cli_server

AGENTGYM = str(Path(sys.executable).with_name("agentgym"))


def agentgym(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([AGENTGYM, *args], capture_output=True, text=True, timeout=timeout)


def last_json(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def games_runs(tmp_path_factory):
    """The oracle and the random policy on games-v0's test split, through the command line."""
    root = tmp_path_factory.mktemp("games")
    runs = {}
    for policy in ("oracle", "random"):
        runs[policy] = root / policy
        runs[policy, "json"] = last_json(agentgym("eval", "--suite", "games-v0", "--policy", policy, "--out",
                                                  str(root / policy), "--json"))
    return runs


def test_eval_on_a_suite_prints_scores_and_writes_a_report(games_runs):
    oracle, random = games_runs["oracle", "json"], games_runs["random", "json"]
    assert oracle["success_rate"] == 1.0 and oracle["pass_at_k"] == {"1": 1.0} and oracle["mean_reward"] == 1.0
    assert oracle["infra_errors"] == 0 and oracle["scored"] == 120 and oracle["suite"] == "games-v0"
    assert random["success_rate"] < 0.2
    report = Path(oracle["report"])
    assert report == games_runs["oracle"] / "report.md" and "# Evaluation of oracle on games-v0" in report.read_text()
    assert {t.id for t in RunFolder(games_runs["oracle"]).finished().values() for t in [t.task]} == {
        t.id for t in load_suite("games-v0").split("test")}


def test_compare_finds_the_oracle_better_with_a_paired_test(games_runs):
    done = agentgym("compare", str(games_runs["random"]), str(games_runs["oracle"]), "--json")
    result = json.loads(done.stdout)
    assert result["agent_a"] == "random" and result["agent_b"] == "oracle" and result["tasks"] == 120
    assert result["success_b"] == 1.0 and result["b_better"] > 100 and result["a_better"] == 0
    assert result["p_success"] < 1e-3 and result["p_reward"] < 1e-3
    table = agentgym("compare", str(games_runs["random"]), str(games_runs["oracle"])).stdout
    assert "# oracle (B) vs random (A) on 120 shared tasks" in table and "significant at 5%" in table


def test_leaderboard_is_regenerated_from_recorded_runs(games_runs, tmp_path):
    runs = tmp_path / "runs"
    for policy in ("oracle", "random"):
        (runs / policy).mkdir(parents=True)
        for name in ("manifest.json", "summary.json"):
            shutil.copy(games_runs[policy] / name, runs / policy / name)
    suites = tmp_path / "suites"
    shutil.copytree(load_suite("games-v0").folder, suites / "games-v0")
    shutil.copytree(load_suite("web-v0").folder, suites / "web-v0")
    done = agentgym("leaderboard", "--runs", str(runs), "--out", str(tmp_path / "leaderboard.md"), "--suites", str(suites))
    assert done.returncode == 0, done.stderr
    board = (tmp_path / "leaderboard.md").read_text()
    assert "| agent | games-v0 | web-v0 |" in board and "| oracle | 100.0% (1.00) | – |" in board
    assert "reference policy `random`" in board
    readme = (suites / "games-v0" / "README.md").read_text()
    assert "| oracle | 100.0% | 1.000 | 100.0% | 100.0% | 100.0% |" in readme
    assert "No recorded run covers this suite yet." in (suites / "web-v0" / "README.md").read_text()
    assert load_suite(suites / "games-v0").sha256 == load_suite("games-v0").sha256  # the README is not the task list


def test_a_killed_evaluation_resumes_to_the_same_scores(games_runs, tmp_path):
    args = ["eval", "--suite", "games-v0", "--policy", "random", "--samples", "4", "--seed", "3", "--concurrency", "2"]
    process = subprocess.Popen([AGENTGYM, *args, "--out", str(tmp_path / "killed")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    episodes = tmp_path / "killed" / "episodes.jsonl"
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        if episodes.exists() and episodes.read_bytes().count(b"\n") >= 50:
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    process.wait()
    done_before = len(RunFolder(tmp_path / "killed").finished())
    resumed = last_json(agentgym(*args, "--out", str(tmp_path / "killed"), "--resume", "--json"))
    whole = last_json(agentgym(*args, "--out", str(tmp_path / "whole"), "--json"))
    assert done_before >= 50 and resumed["scored"] == whole["scored"] == 480
    for key in ("success_rate", "pass_at_k", "mean_reward", "mean_turns", "by_difficulty"):
        assert resumed[key] == whole[key], key
    killed = {k: [t.action for t in r.trajectory.turns] for k, r in RunFolder(tmp_path / "killed").finished().items()}
    assert killed == {k: [t.action for t in r.trajectory.turns] for k, r in RunFolder(tmp_path / "whole").finished().items()}


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--suite", "games-v9", "--policy", "oracle"], "no suite 'games-v9'; bundled suites: all-v0"),
        (["--suite", "games-v0", "games/Sokoban-v0", "--policy", "oracle"], "--suite chooses the tasks"),
        (["--suite", "games-v0", "--policy", "oracle", "--resume"], "--resume needs --out"),
        (["--suite", "games-v0", "--policy", "oracle", "--env-arg", "describe"], "is not [ENV_ID:]KEY=VALUE"),
        (["--suite", "games-v0", "--policy", "oracle", "--env-arg", "web/Shop-v0:x=1"], "does not play"),
        (["--suite", "games-v0", "--policy", "oracle", "--samples", "0"], "--samples"),
        (["games/FrozenLake-v0", "--policy", "oracle", "--engine", "torch", "--model", "x"], "choose --policy"),
        (["games/FrozenLake-v0", "--policy", "oracle", "--context", "strategy=drop"], "it needs --engine"),
    ],
)
def test_bad_eval_arguments_exit_2_with_one_line(args, reason):
    done = agentgym("eval", *args)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and reason in lines[0], done.stderr


def test_parser_auto_on_a_model_whose_template_names_no_format_exits_2(tmp_path):
    (tmp_path / "chat_template.jinja").write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    done = agentgym("eval", "games/FrozenLake-v0", "--engine", "torch", "--model", str(tmp_path),
                    "--env-arg", "parser=auto")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "--env-arg parser: auto takes" in lines[0], done.stderr


def test_off_a_terminal_eval_prints_progress_lines(tmp_path):
    done = agentgym("eval", "games/FrozenLake-v0", "--policy", "oracle", "--episodes", "3", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if re.fullmatch(r".*oracle \d/3 \d+:\d\d:\d\d", line)]
    assert progress[0] == "oracle 0/3 0:00:00", done.stderr
    assert progress[-1].startswith("games/FrozenLake-v0 · oracle 3/3 "), done.stderr


def test_resume_with_other_settings_exits_2_naming_them(games_runs):
    done = agentgym("eval", "--suite", "games-v0", "--policy", "oracle", "--samples", "2", "--out",
                    str(games_runs["oracle"]), "--resume")
    assert done.returncode == 2 and "other settings (samples)" in done.stderr
    done = agentgym("eval", "--suite", "games-v0", "--policy", "oracle", "--out", str(games_runs["oracle"]))
    assert done.returncode == 2 and "already holds an evaluation" in done.stderr


@pytest.mark.timeout(600)  # three processes that each load torch: 45 s on 2 idle cores, past 120 s under load
def test_the_openai_engine_on_agentgym_serve_scores_as_the_torch_engine(tiny_model_dir, tmp_path):
    tasks = [*TaskSet.generate("games/FrozenLake-v0", 4, split="test", difficulties=("easy", "medium")),
             *TaskSet.generate("tools/Calculator-v0", 2, split="test")]
    suite = write_suite(tmp_path / "mini-v0", "mini-v0", "FrozenLake and Calculator", TaskSet(tasks)).folder
    common = ["--suite", str(suite), "--temperature", "0", "--max-tokens", "24", "--samples", "2", "--json",
              "--env-arg", "parser=pythonic"]
    torch = last_json(agentgym("eval", *common, "--engine", "torch", "--model", str(tiny_model_dir),
                               "--out", str(tmp_path / "torch")))
    with cli_server(tiny_model_dir) as base_url:
        served = last_json(agentgym("eval", *common, "--engine", "openai", "--model", tiny_model_dir.name,
                                    "--base-url", base_url, "--tokenizer", str(tiny_model_dir),
                                    "--out", str(tmp_path / "openai")))
    assert served["scored"] == torch["scored"] == 12 and served["infra_errors"] == 0
    for key in ("success_rate", "pass_at_k", "mean_reward", "mean_turns", "mean_tokens", "by_difficulty"):
        assert served[key] == torch[key], key
    episodes = [{k: ([t.action for t in r.trajectory.turns], r.trajectory.token_ids, r.reward)
                 for k, r in RunFolder(tmp_path / name).finished().items()} for name in ("torch", "openai")]
    assert episodes[0] == episodes[1]
    assert all(actions for actions, _, _ in episodes[0].values())


@pytest.mark.parametrize(("arg", "reason"), [("strategy=fold", "--context strategy:"), ("budget", "is not KEY=VALUE"),
                                             ("room=3", "--context room: not one of its settings")])
def test_bad_context_arguments_exit_2_naming_them(arg, reason, tiny_model_dir):
    done = agentgym("eval", "games/FrozenLake-v0", "--engine", "torch", "--model", str(tiny_model_dir), "--context", arg)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and reason in lines[0], done.stderr


def test_a_models_context_policy_decides_how_an_overflowing_episode_ends(tiny_model_dir, tmp_path):
    out = tmp_path / "eval"
    done = agentgym("eval", "games/FrozenLake-v0", "--engine", "torch", "--model", str(tiny_model_dir), "--episodes",
                    "2", "--max-tokens", "48", "--max-context", "420", "--env-arg", "max_turns=30", "--context",
                    "overflow=penalty", "--context", "penalty=-2.5", "--out", str(out))
    assert done.returncode == 0, done.stderr
    records = list(RunFolder(out).finished().values())
    assert len(records) == 2 and RunFolder(out).spec().context.overflow == "penalty"
    assert all(r.trajectory.info["overflow"]["outcome"] == "penalty" and r.reward == -2.5 for r in records)
