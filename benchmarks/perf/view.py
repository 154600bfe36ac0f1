"""``agentgym view`` on a large evaluation: how long it takes to open and to page through, and what it holds.

Writes a synthetic evaluation folder of ``--episodes`` episodes (100,000 by default): ``EpisodeRecord`` lines as
``agentgym eval`` writes them, of four environments and three difficulties, each episode 3 to 9 turns of a model's
text, tool calls and observations with a screen link, a few KB a line. Then, in this process (the app through
Starlette's test client) and timed one after the other:

- ``open_s``: the app made and the first page of the episode list rendered, the goal under 2 s (a large file is
  indexed by a thread while the pages show what is indexed so far); ``index_s``: the whole file indexed;
- ``run_page_s``: the run page (breakdowns and charts over every episode);
- ``filtered_page_s``: an environment and a result chosen; ``sorted_deep_page_s``: sorted by reward, page 1,000;
  ``deep_page_s``: the last page in file order;
- ``search_s``: a text search over every line (read a block at a time; cut short after 2 s or 1 GiB), with the
  megabytes and episodes it read and whether it was cut short;
- ``episode_page_s``: one episode's page; ``refresh_s``: 1,000 lines appended and picked up by the next request;
- ``cli_ready_s``: ``agentgym view DIR --port 0`` started in a subprocess until its first page answered (Python's
  imports included).

Also the file's size, the process's resident memory after indexing, and the load average. Writes
``benchmarks/results/view.json``, the last line printed.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

from agentgym.evaluation.records import EPISODES, EpisodeRecord, RunFolder, RunSpec, tasks_digest
from agentgym.messages import Message, TextPart, ToolCall
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory, Turn
from benchmarks.perf.report import RESULTS, load_average, machine, write_result

ENVS = ("web/Shop-v0", "gui/ClickButton-v0", "games/FrozenLake-v0", "tools/Calculator-v0")
LEVELS = ("easy", "medium", "hard")
WORDS = ("add to cart", "search", "checkout", "button", "the red one", "scroll down", "open the menu", "price",
         "coffee maker", "submit", "next page", "quantity", "filter by colour", "sort by price", "go back")
GOAL = {"open_s": 2.0}


def _trajectory(rng: random.Random, env_id: str, task: Task, turns: int) -> Trajectory:
    """A model's episode: each turn a thought and a tool call, answered by an accessibility tree and a screen."""
    played = []
    for turn in range(turns):
        thought = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20)))
        element = f"e{rng.randint(1, 60)}"
        action = (f"I should {thought}.\n<tool_call>\n{{\"name\": \"click\", \"arguments\": "
                  f"{{\"element\": \"{element}\"}}}}\n</tool_call>")
        tree = "\n".join(f"{'  ' * (i % 4)}- {rng.choice(('link', 'button', 'text', 'heading'))} "
                         f"\"{rng.choice(WORDS)}\" [ref=e{i}]" for i in range(rng.randint(6, 14)))
        screen = f"![screen](screens/{rng.getrandbits(64):016x}.png)"
        observation = Message(role="tool", name="click", tool_call_id=f"call_{turn}",
                              content=[TextPart(text=f"URL: /page/{turn}\nTitle: Shop\n{tree}"), TextPart(text=screen)])
        played.append(Turn(action=action, tool_calls=[ToolCall(id=f"call_{turn}", name="click",
                                                               arguments={"element": element})],
                           observation=[observation], reward=0.0, policy_seconds=rng.random(), env_seconds=rng.random()))
    return Trajectory(env_id=env_id, task=task, messages=[Message(role="user", content="Buy the coffee maker.")],
                      turns=played, info={"seed": [0, task.seed]})


def write_run(folder: Path, episodes: int, *, seed: int = 0, start: int = 0) -> None:
    """An evaluation folder of ``episodes`` synthetic episodes (appended after ``start`` ones where it exists)."""
    rng = random.Random(seed + start)
    tasks = [Task(env_id=ENVS[i % len(ENVS)], seed=1_000_000_000 + i, difficulty=LEVELS[i % 3], split="test")
             for i in range(start, start + episodes)]
    run = RunFolder(folder)
    if not run.exists:
        run.start(RunSpec(agent="synthetic", engine="openai", model="synthetic", tasks_sha256=tasks_digest(tasks)))
    templates = [_trajectory(rng, ENVS[0], tasks[0], turns) for turns in range(3, 10) for _ in range(6)]
    with (folder / EPISODES).open("a") as f:
        for task in tasks:
            base = rng.choice(templates)
            roll = rng.random()
            status = "error" if roll < 0.005 else "truncated" if roll < 0.15 else "ok"
            success = status == "ok" and rng.random() < 0.45
            reward = 1.0 if success else round(rng.random() * 0.5, 3)
            trajectory = base.model_copy(update={
                "env_id": task.env_id, "task": task, "reward": reward, "success": success, "status": status,
                "error": "browser crashed" if status == "error" else None})
            record = EpisodeRecord(key=f"{task.id}#0", task=task, sample=0, status=status, success=success,
                                   reward=reward if status != "error" else 0.0, turns=len(trajectory.turns),
                                   tokens=rng.randint(200, 2000), seconds=rng.random() * 30,
                                   error=trajectory.error, error_cause="browser" if status == "error" else None,
                                   trajectory=trajectory)
            f.write(record.model_dump_json() + "\n")


def _timed(client, url: str) -> tuple[float, str]:
    started = time.perf_counter()
    response = client.get(url)
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise RuntimeError(f"{url} answered {response.status_code}: {response.text[:500]}")
    return elapsed, response.text


def _cli_ready(folder: Path) -> float:
    """Seconds from starting ``agentgym view`` until its episode list answered."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "agentgym", "view", str(folder), "--port", "0"],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        match = re.search(r"http://\S+/", process.stdout.readline())
        if match is None:
            raise RuntimeError("agentgym view printed no URL")
        with urllib.request.urlopen(match[0] + "run/a/episodes", timeout=60) as response:
            response.read()
        return time.perf_counter() - started
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="10,000 episodes")
    parser.add_argument("--keep", type=Path, help="write the run folder here and keep it (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=RESULTS / "view.json")
    args = parser.parse_args()
    episodes = 10_000 if args.quick else args.episodes
    load_before = load_average()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="agentgym-view-")) / "run"
    try:
        started = time.perf_counter()
        if not (folder / EPISODES).exists():
            write_run(folder, episodes)
        written = time.perf_counter() - started
        size_mb = (folder / EPISODES).stat().st_size / 2**20
        print(f"{episodes} episodes, {size_mb:.0f} MB, written in {written:.1f} s", file=sys.stderr)

        from fastapi.testclient import TestClient

        from agentgym.view.app import create_app

        started = time.perf_counter()
        app = create_app([folder])
        client = TestClient(app)
        first_page_s, _ = _timed(client, "/run/a/episodes")
        open_s = time.perf_counter() - started
        app.state.runs[0].sources()["episodes"].index.wait()
        index_s = time.perf_counter() - started
        result: dict = {"benchmark": "view", "episodes": episodes, "file_mb": round(size_mb, 1),
                        "open_s": round(open_s, 3), "first_page_s": round(first_page_s, 3),
                        "index_s": round(index_s, 3)}
        result["rss_mb"] = round(psutil.Process().memory_info().rss / 2**20, 1)
        pages = {"run_page_s": "/run/a",
                 "filtered_page_s": "/run/a/episodes?env=gui/ClickButton-v0&outcome=success",
                 "sorted_deep_page_s": "/run/a/episodes?sort=-reward&page=1000",
                 "deep_page_s": f"/run/a/episodes?page={-(-episodes // 50)}",
                 "episode_page_s": f"/run/a/episode/episodes/{episodes * 7 // 9}"}
        for name, url in pages.items():
            result[name] = round(_timed(client, url)[0], 3)
        search_s, text = _timed(client, "/run/a/episodes?q=nothing+says+this")
        note = re.search(r"in ([\d,]+) of ([\d,]+) episodes \(([\d.]+) MB", text)
        result["search_s"] = round(search_s, 3)
        result["search"] = {"episodes_read": int(note[1]) if note else None, "megabytes_read": float(note[3])
                            if note else None, "cut_short": "cut short" in text}
        before = client.get("/run/a/status.json").json()["episodes"]
        write_run(folder, 1000, start=before)
        time.sleep(1.0)  # the index looks again at most once a second
        refresh_s, text = _timed(client, "/run/a/episodes")
        if f"{before + 1000:,} episodes".replace(",", "") not in text.replace(",", ""):
            raise RuntimeError("the appended episodes were not picked up")
        result["refresh_s"] = round(refresh_s, 3)
        result["cli_ready_s"] = round(_cli_ready(folder), 3)
        for key, value in result.items():
            if key.endswith("_s"):
                print(f"{key:>20}: {value:.3f} s", file=sys.stderr)
        result["met"] = all(result[key] <= limit for key, limit in GOAL.items())
        result["goal"] = GOAL
        result["machine"] = machine("fastapi", "jinja2", load_before=load_before, load_after=load_average())
        write_result(result, args.out)
    finally:
        if args.keep is None:
            shutil.rmtree(folder.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
