"""The command line, run as a user runs it: a subprocess of the installed ``agentgym`` script."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

AGENTGYM = str(Path(sys.executable).with_name("agentgym"))


def agentgym(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENTGYM, *args], input=stdin, capture_output=True, text=True, timeout=300,
                          env=None if env is None else {**os.environ, **env})


def test_list_json_and_family_filter():
    listed = json.loads(agentgym("list", "--json", "--family", "games").stdout)
    assert {s["id"] for s in listed} == {"games/FrozenLake-v0", "games/Sokoban-v0"}


def test_info_json_names_tools_and_difficulties():
    details = json.loads(agentgym("info", "games/FrozenLake-v0", "--json").stdout)
    assert details["tools"][0]["name"] == "move"
    assert details["difficulties"] == {"easy": {"max_turns": 12}, "medium": {"max_turns": 24}, "hard": {"max_turns": 40}}


def test_eval_json_last_line_and_result_file(tmp_path):
    done = agentgym("eval", "games/FrozenLake-v0", "--policy", "oracle", "--episodes", "10", "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["success_rate"] == 1.0 and summary["episodes"] == 10 and summary["mean_reward"] == 1.0
    assert summary["mean_turns"] > 1 and summary["report"] == str(tmp_path / "report.md")
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["episodes"] == 10 and len((tmp_path / "episodes.jsonl").read_text().splitlines()) == 10
    assert "success" in done.stdout and "FrozenLake" in done.stdout  # the table


def test_eval_that_scored_nothing_says_so_shows_the_first_traceback_and_exits_3(tmp_path):
    root = str(Path(__file__).parents[2])
    done = agentgym("eval", "tests.fixtures_registering:test/ToolCrashes-v0", "--policy", "oracle", "--episodes", "3",
                    "--out", str(tmp_path), "--json", env={"PYTHONPATH": root})
    assert done.returncode == 3, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert (summary["scored"], summary["infra_errors"]) == (0, 3)
    assert summary["success_rate"] is None and summary["mean_reward"] is None
    assert "oracle: success n/a — no episode was scored" in done.stdout
    assert re.search(r"test/ToolCrashes-v0\s+│ 0\s+│ n/a\s+│ n/a\s+│ 3", done.stdout), done.stdout
    assert 'in boom\n    raise RuntimeError("container died")\nRuntimeError: container died\n' in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("agentgym: no episode was scored: all 3 were lost")
    report = (tmp_path / "report.md").read_text()
    assert "| success | n/a — no episode was scored |" in report and 'raise RuntimeError("container died")' in report


def test_check_a_family_passes():
    done = agentgym("check", "--family", "games", "--episodes", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout and done.stdout.count("pass") == 2 and "Sokoban" in done.stdout


@pytest.mark.parametrize(
    "args, reason",
    [
        (["eval", "games/FrozenLake-v0", "--policy", "genius"], "'genius' is not one of"),
        (["eval", "games/FrozenLak-v0", "--policy", "oracle"], "Did you mean: games/FrozenLake-v0"),
        (["eval", "games/FrozenLake-v0", "--policy", "oracle", "--episodes", "0"], "--episodes"),
        (["eval", "games/FrozenLake-v0", "--policy", "oracle", "--difficulty", "brutal"], "no difficulty 'brutal'"),
        (["eval", "--policy", "oracle"], "name environment ids, or pass --all or --family"),
        (["check", "--all", "--family", "games"], "name environment ids, or pass --all or --family"),
        (["check", "--family", "nope"], "no environments in family 'nope'; families: games"),
        (["check", "games/FrozenLake-v0", "--concurrency", "0"], "Invalid value for '--concurrency': 0 is not in the range x>=1"),
        (["check", "games/FrozenLake-v0", "--only", "gym"], "Invalid value for '--only': 'gym' is not one of 'gymnasium'"),
        (["info", "nonsense"], "malformed environment id"),
        (["play", "games/Sokoban-v0", "--difficulty", "brutal"], "unknown difficulty"),
        (["frobnicate"], "No such command"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args, reason):
    done = agentgym(*args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentgym: error:") and reason in lines[0], done.stderr


def test_play_solves_frozen_lake_from_typed_moves():
    import agentgym as ag

    env = ag.make("games/FrozenLake-v0", parser="pythonic")
    env.reset(seed=5)
    moves, done = [], False
    while not done:
        moves.append(env.oracle_action())
        done = any(env.step(moves[-1])[2:4])
    env.close()
    played = agentgym("play", "games/FrozenLake-v0", "--seed", "5", stdin="hello\n" + "\n".join(moves) + "\n")
    assert played.returncode == 0
    assert "no tool call found" in played.stdout and "Episode over: solved" in played.stdout


def test_play_stops_cleanly_at_end_of_input():
    played = agentgym("play", "tools/Calculator-v0", "--seed", "1", stdin="")
    assert played.returncode == 0 and "(stopped)" in played.stdout


@pytest.mark.browser
def test_play_on_a_web_environment_saves_the_screen_each_turn(tmp_path):
    from PIL import Image

    played = agentgym("play", "web/Shop-v0", "--seed", "2", "--screens", str(tmp_path),
                      stdin='goto(url="/cart")\ngoto(url="https://example.com/")\n')
    assert played.returncode == 0, played.stderr
    shots = sorted(tmp_path.glob("turn-*.png"))
    assert [p.name for p in shots] == ["turn-000.png", "turn-001.png", "turn-002.png"]
    assert f"screen: {shots[1]}" in played.stdout and "goto is limited to this site" in played.stdout
    cart = Image.open(shots[1])
    assert cart.size == (1280, 800) and len(cart.convert("L").getcolors(maxcolors=256 * 256)) > 10


def test_check_reports_an_environment_it_cannot_run_and_goes_on_to_the_next():
    root = str(Path(__file__).parents[2])  # so that the command can import the tests' environments
    done = agentgym("check", "tests.fixtures_registering:test/NeedsAnEngine-v0", "games/FrozenLake-v0",
                    env={"PYTHONPATH": root})
    assert done.returncode == 1 and "1 of 2 environments failed" in done.stderr
    assert "SandboxUnavailable: no Docker engine answers" in done.stdout
    assert re.search(r"games/FrozenLake-v0\s+│ pass", done.stdout)


def test_check_runs_only_the_checks_named():
    done = agentgym("check", "tests.fixtures_registering:test/ToolCrashes-v0", "--only", "gymnasium", "--only",
                    "tool_schemas", env={"PYTHONPATH": str(Path(__file__).parents[2])})
    assert done.returncode == 0, done.stdout + done.stderr  # its tool crashes only in the checks left out
    assert re.search(r"test/ToolCrashes-v0\s+│ pass\s+│ [\d.]+\s+│ gymnasium, tool_schemas\s", done.stdout), done.stdout


def test_check_names_the_check_an_environment_crashed_in_and_goes_on_to_the_next():
    root = str(Path(__file__).parents[2])
    done = agentgym("check", "tests.fixtures_registering:test/ToolCrashes-v0", "test/CannotStart-v0",
                    "games/FrozenLake-v0", env={"PYTHONPATH": root})
    assert done.returncode == 1 and "2 of 3 environments failed" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert re.search(r"test/ToolCrashes-v0\s+│ FAIL\s+│ [\d.]+\s+│ \[determinism, oracle\] the environment raised "
                     r"RuntimeError: container died", done.stdout), done.stdout
    assert re.search(r"test/CannotStart-v0\s+│ FAIL\s+│ [\d.]+\s+│ OSError: no display", done.stdout), done.stdout
    assert re.search(r"games/FrozenLake-v0\s+│ pass", done.stdout)


ROOT = str(Path(__file__).parents[2])
"""On the commands' PYTHONPATH, so that they (and their workers) can import the tests' environments."""


def test_check_off_a_terminal_prints_a_line_per_environment_as_it_finishes(tmp_path):
    # the second environment's check cannot end before the test says go, which it does on the first's line
    check = subprocess.Popen([AGENTGYM, "check", "games/FrozenLake-v0", "tests.fixtures_checking:test/WaitsForTheTest-v0"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, "PYTHONPATH": ROOT, "AGENTGYM_TEST_RENDEZVOUS": str(tmp_path)})
    printed: list[str] = []
    reader = threading.Thread(target=lambda: printed.extend(check.stdout or ()), daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while not any("games/FrozenLake-v0" in line for line in printed) and time.monotonic() < deadline:
        time.sleep(0.05)
    running, before_go = check.poll() is None, list(printed)
    (tmp_path / "go.started").touch()
    check.wait(timeout=120)
    reader.join(timeout=10)
    assert running and re.fullmatch(r"check 1/2 \d+:\d\d:\d\d  games/FrozenLake-v0 \d+\.\d s pass\n", before_go[-1]), printed
    assert before_go[0] == "check 0/2 0:00:00\n" and len(before_go) == 2
    assert re.fullmatch(r"check 2/2 \d+:\d\d:\d\d  test/WaitsForTheTest-v0 \d+\.\d s pass\n", printed[2]), printed
    assert check.returncode == 0 and re.search(r"test/WaitsForTheTest-v0\s+│ pass", "".join(printed))


def test_check_with_concurrency_2_checks_two_environments_at_once(tmp_path):
    # each of the two is made only once the other has started (or after a minute on its own)
    done = agentgym("check", "tests.fixtures_checking:test/MeetsA-v0", "test/MeetsB-v0", "--concurrency", "2",
                    env={"PYTHONPATH": ROOT, "AGENTGYM_TEST_RENDEZVOUS": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    spans = [[float(t) for t in (tmp_path / f"{name}.span").read_text().split()] for name in "ab"]
    assert max(start for start, _ in spans) < min(end for _, end in spans), spans
    assert sorted(line.split()[3] for line in done.stderr.splitlines()[1:]) == ["test/MeetsA-v0", "test/MeetsB-v0"]


def test_checks_at_once_give_the_results_of_checks_one_at_a_time():
    ids = ["tests.fixtures_registering:test/ToolCrashes-v0", "test/CannotStart-v0", "games/Sokoban-v0",
           "games/FrozenLake-v0", "gymnasium/CliffWalking-v1"]
    if importlib.util.find_spec("textarena") is not None:  # its games seed Python's global random
        ids += ["textarena/TicTacToe-v0", "textarena/Nim-v0", "textarena/Mastermind-v0"]
    results = []
    for concurrency in ("1", "3"):
        done = agentgym("check", *ids, "--concurrency", concurrency, env={"PYTHONPATH": ROOT})
        table = re.sub(r"│ \d+\.\d\d +│", "│ seconds │", done.stdout)
        results.append((done.returncode, table, done.stderr.splitlines()[-1]))
    assert results[0] == results[1]
    assert results[0][0] == 1 and results[0][2] == f"2 of {len(ids)} environments failed their checks", results[0]
    rows = [line.split("│")[1].strip() for line in results[0][1].splitlines() if line.startswith("│ ") and "/" in line]
    assert rows == [i.split(":")[-1] for i in ids]  # in the order named


def test_check_reports_an_environment_that_kills_its_worker_and_checks_the_others():
    done = agentgym("check", "tests.fixtures_checking:test/KillsItsWorker-v0", "games/FrozenLake-v0", "games/Sokoban-v0",
                    "--concurrency", "2", env={"PYTHONPATH": ROOT})
    assert done.returncode == 1 and "1 of 3 environments failed" in done.stderr, done.stdout + done.stderr
    assert re.search(r"test/KillsItsWorker-v0\s+│ FAIL\s+│ [\d.]+\s+│ its worker process died", done.stdout), done.stdout
    assert re.search(r"games/FrozenLake-v0\s+│ pass", done.stdout) and re.search(r"games/Sokoban-v0\s+│ pass", done.stdout)
