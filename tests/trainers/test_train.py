"""Whole runs of the decoupled trainer on the Vowels env: what a run writes, that it learns, kill and resume,
and the command line's refusals."""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from agentgym.cli import main
from agentgym.config import load_config
from agentgym.evaluation.records import ROLLOUTS, RolloutRecord
from agentgym.metrics_log import read_metrics
from agentgym.suites import write_suite
from agentgym.tasks import TaskSet
from agentgym.trainers import TrainConfig, TrainResult, resume, train
from agentgym.trainers.checkpoint import DataPosition, latest_checkpoint, load_trainer_state
from tests.trainers.envs import VOWELS_ID

ROOT = Path(__file__).parents[2]
STEPS = 8


def _config(output_dir: Path, model_dir: Path, **sections: dict[str, Any]) -> dict[str, Any]:
    """A Vowels run that learns in a few CPU seconds (checked over seeds 0-9: held-out reward rises in each)."""
    data: dict[str, Any] = {
        "output_dir": str(output_dir),
        "model": {"path": str(model_dir)},
        "env": {"id": VOWELS_ID},
        "sampling": {"max_tokens": 12},
        "optim": {"lr": 3e-3},
        "trainer": {
            "steps": STEPS,
            "groups_per_step": 4,
            "group_size": 4,
            "concurrency": 16,
            "async_ratio": 1,
        },
        "eval": {"episodes": 32},
        "checkpoint": {"every": 0},
    }
    for name, section in sections.items():
        data[name] = {**data.get(name, {}), **section}
    return data


def _train(data: dict[str, Any]) -> tuple[TrainConfig, TrainResult]:
    config = TrainConfig.model_validate(data)
    return config, train(config, console=Console(file=io.StringIO()))


def _train_records(run_dir: Path) -> list[dict[str, Any]]:
    return [r for r in read_metrics(run_dir) if "rollout/reward_mean" in r]


def _eval_records(run_dir: Path) -> list[dict[str, Any]]:
    return [r for r in read_metrics(run_dir) if "eval/reward_mean" in r]


@pytest.fixture(scope="module")
def vowels_run(tiny_model_dir, tmp_path_factory):
    """A run held out on a suite's test split, evaluated halfway too. Four episodes at a time, in the rollout and
    in evaluations: a weight update lets 16 more episodes start, so 12 of them must wait for a slot that frees
    during the halfway evaluation's eight rounds (with 16 slots they could all start before it, and none during)."""
    root = tmp_path_factory.mktemp("train")
    tasks = TaskSet([*TaskSet.generate(VOWELS_ID, 32, split="test"), *TaskSet.generate(VOWELS_ID, 8)])
    suite = write_suite(root / "vowels-v0", "vowels-v0", "Vowels", tasks)
    return _train(_config(root / "run", tiny_model_dir, trainer={"concurrency": 4},
                          eval={"suite": str(suite.folder), "every": STEPS // 2, "concurrency": 4}))


def test_a_run_writes_its_record(vowels_run):
    config, result = vowels_run
    run_dir = config.run_dir
    assert result.run_dir == run_dir and result.steps == STEPS
    assert load_config(TrainConfig, run_dir / "config.yaml") == config

    train_records = _train_records(run_dir)
    assert [r["step"] for r in train_records] == list(range(1, STEPS + 1))
    assert all(math.isfinite(r["train/loss"]) for r in train_records)
    evals = _eval_records(run_dir)
    assert [r["step"] for r in evals] == [0, STEPS // 2, STEPS]
    assert sorted(p.name for p in (run_dir / "eval").iterdir()) == [f"step-{s:06d}" for s in (0, STEPS // 2, STEPS)]
    assert all((run_dir / "eval" / f"step-{r['step']:06d}" / "report.md").is_file() for r in evals)
    assert json.loads((run_dir / "eval" / "step-000000" / "summary.json").read_text())["scored"] == 32
    assert evals[1]["eval/rollout_started_meanwhile"] > 0  # the rollout went on while the weights were scored

    csv_lines = (run_dir / "metrics.csv").read_text().splitlines()
    assert "train/loss" in csv_lines[0].split(",") and len(csv_lines) == 1 + len(read_metrics(run_dir))
    assert list(run_dir.glob("events.out.tfevents.*"))
    png = (run_dir / "curves.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == STEPS and summary["env"] == VOWELS_ID
    assert summary["success_before"] == result.success_before is not None
    assert summary["success_after"] == result.success_after is not None
    assert [e["step"] for e in summary["evaluations"]] == [0, STEPS // 2, STEPS]
    assert all(isinstance(e["reward_mean"], float) for e in summary["evaluations"])
    report = (run_dir / "report.md").read_text()
    assert f"# Training report: {VOWELS_ID}" in report and f"{STEPS} steps of 16 trajectories" in report
    assert "![held-out success by step](eval_curve.png)" in report and "suite `" in report
    assert f"[report](eval/step-{STEPS // 2:06d}/report.md)" in report
    assert (run_dir / "eval_curve.png").read_bytes().startswith(b"\x89PNG")
    assert latest_checkpoint(run_dir) == run_dir / "checkpoints" / f"step-{STEPS:06d}"


def test_a_run_records_every_episode_it_took_with_the_trainers_logprobs(vowels_run):
    """``rollouts.jsonl``: each step's groups, trained episodes with their advantage and the trainer's logprob of each
    agent token, which on tokens the step's own starting weights sampled is the behaviour's (same weights)."""
    config, _ = vowels_run
    records = [RolloutRecord.model_validate_json(line)
               for line in (config.run_dir / ROLLOUTS).read_text().splitlines()]
    assert sorted({r.step for r in records}) == list(range(1, STEPS + 1))
    for step in range(1, STEPS + 1):
        taken = [r for r in records if r.step == step and r.outcome in ("trained", "uniform")]
        assert len({r.position for r in taken}) == 4 and len(taken) == 16
        assert {r.key for r in taken} == {f"{step}/{r.position}/{r.sample}" for r in taken}
    fresh = []
    for r in records:
        t = r.trajectory
        assert r.version_max is not None and r.version_max < r.step
        if r.outcome != "trained":
            assert r.advantage is None and r.trainer_logprobs == []
            continue
        assert r.advantage is not None and len(r.trainer_logprobs) == len(t.token_ids)
        assert all(agent or value == 0 for value, agent in zip(r.trainer_logprobs, t.loss_mask, strict=True))
        fresh += [abs(mine - behaviour) for mine, behaviour, version in
                  zip(r.trainer_logprobs, t.logprobs, t.versions, strict=True) if version == r.step - 1]
    assert len(fresh) > 100 and sum(fresh) / len(fresh) < 1e-3
    assert any(r.outcome == "trained" and r.advantage != 0 for r in records)


def test_the_policy_learns_on_held_out_tasks(vowels_run):
    config, _ = vowels_run
    evals = _eval_records(config.run_dir)
    before, after = evals[0]["eval/reward_mean"], evals[-1]["eval/reward_mean"]
    assert after > before + 0.005, (before, after)


def test_a_colocated_run_hands_the_device_back_and_forth_and_learns(tiny_model_dir, tmp_path):
    """``trainer.colocate``: the engine sleeps through each step and the trainer's state waits on the CPU while
    the engine generates (on this CPU both are moves in place); the run still learns as the plain one does."""
    config, result = _train(_config(tmp_path / "run", tiny_model_dir, trainer={"colocate": True}))
    evals = _eval_records(config.run_dir)
    assert [r["step"] for r in _train_records(config.run_dir)] == list(range(1, STEPS + 1))
    assert evals[-1]["eval/reward_mean"] > evals[0]["eval/reward_mean"] + 0.005
    assert result.steps == STEPS


def test_the_synchronous_baseline_trains_on_fresh_tokens_only(tiny_model_dir, tmp_path):
    config, result = _train(
        _config(tmp_path / "run", tiny_model_dir, trainer={"async_ratio": 0}, eval={"episodes": 0})
    )
    records = _train_records(config.run_dir)
    assert result.steps == STEPS and len(records) == STEPS
    assert all(r["train/stale_token_fraction"] == 0.0 for r in records)
    assert all(r["train/staleness_mean"] == 0.0 and r["rollout/staleness_max"] == 0.0 for r in records)
    assert result.success_before is None and not (config.run_dir / "eval").exists()


def test_a_forced_lag_trains_every_token_exactly_that_many_versions_late(tiny_model_dir, tmp_path):
    """``trainer.forced_lag`` 2: the step that trains at version ``t`` takes tokens all sampled by version ``max(0,
    t - 2)``, whatever the machine's speed, while held-out evaluation scores the current weights."""
    lag, steps = 2, 5
    config, result = _train(_config(tmp_path / "run", tiny_model_dir,
                                     trainer={"async_ratio": 0, "forced_lag": lag, "steps": steps},
                                     eval={"episodes": 8, "every": 2}))
    records = [RolloutRecord.model_validate_json(line) for line in (config.run_dir / ROLLOUTS).read_text().splitlines()]
    trained = [r for r in records if r.outcome in ("trained", "uniform")]
    assert {r.step for r in trained} == set(range(1, steps + 1))
    for r in trained:
        assert r.version_min == r.version_max == max(0, r.step - 1 - lag), (r.step, r.version_min, r.version_max)
    assert [r["train/staleness_mean"] for r in _train_records(config.run_dir)] == [0, 1, 2, 2, 2]
    for step in (0, 2, 4, 5):
        episodes = (config.run_dir / "eval" / f"step-{step:06d}" / "episodes.jsonl").read_text().splitlines()
        versions = {v for line in episodes for v in json.loads(line)["trajectory"]["versions"] if v >= 0}
        assert versions == {step}, (step, versions)
    assert result.steps == steps
    assert "trained 2 versions after it was sampled" in (config.run_dir / "report.md").read_text()


def _latest_step(run_dir: Path) -> int:
    pointer = run_dir / "checkpoints" / "latest"
    return int(pointer.read_text().strip().removeprefix("step-")) if pointer.is_file() else 0


def _logged_steps(run_dir: Path) -> list[int]:
    path = run_dir / "batches.jsonl"
    return [json.loads(line)["step"] for line in path.read_text().splitlines()] if path.is_file() else []


@pytest.mark.parametrize("carry_over", [False, True])
def test_a_killed_run_resumes_from_its_checkpoint(tiny_model_dir, tmp_path, agentgym_process, carry_over):
    """Nothing lost or doubled across ``kill -9`` and ``--resume``; with carry-over (two spares a group, paused and
    carried into carry groups) too, what the buffer held at the checkpoint is discarded and counted."""
    steps, run_dir, config_file = 12, tmp_path / "run", tmp_path / "train.yaml"
    carry = {"redundancy": 2} if carry_over else {}
    config_file.write_text(
        yaml.safe_dump(
            _config(
                run_dir,
                tiny_model_dir,
                trainer={"steps": steps, **carry},
                eval={"episodes": 8},
                checkpoint={"every": 2, "keep": 2},
                **({"rollout": {"carry_over": True}} if carry_over else {}),
            )
        )
    )
    first = agentgym_process("train", str(config_file), log="first.log")
    deadline = time.monotonic() + 90
    while (
        first.poll() is None and time.monotonic() < deadline
    ):  # kill it once it has logged past a checkpoint
        if _latest_step(run_dir) >= 3 and max(_logged_steps(run_dir)) > _latest_step(run_dir):
            break
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    killed_at = time.time()
    assert first.returncode == -signal.SIGKILL, (tmp_path / "first.log").read_text()[-2000:]
    checkpoint, kept = latest_checkpoint(run_dir), _latest_step(run_dir)
    assert 3 <= kept < max(_logged_steps(run_dir)) < steps
    data_at_checkpoint, buffered = load_trainer_state(checkpoint).data, load_trainer_state(checkpoint).carried

    second = agentgym_process("train", "--resume", str(run_dir), log="second.log")
    assert second.wait(timeout=120) == 0, (tmp_path / "second.log").read_text()[-2000:]
    assert f"after {steps} steps" in (tmp_path / "second.log").read_text()

    assert json.loads((run_dir / "summary.json").read_text())["steps"] == steps
    batches = [json.loads(line) for line in (run_dir / "batches.jsonl").read_text().splitlines()]
    assert [b["step"] for b in batches] == list(range(1, steps + 1))
    positions = [p for b in batches for p in b["tasks"]]
    assert all(len(b["tasks"]) + len(b["carried"]) == 4 for b in batches)  # a carry group is one of the four
    assert len(set(positions)) == len(positions)  # none twice
    replayed = DataPosition()
    for b in batches[:kept]:
        for position in [*b["tasks"], *b["dropped"], *b["failed"], *b["stale"]]:
            replayed.consume(position)
    assert replayed == data_at_checkpoint  # the checkpoint's position is what its steps trained on
    after = {p for b in batches[kept:] for p in b["tasks"]}
    assert set(data_at_checkpoint.pending()) <= after  # handed out, never trained before the kill: replayed
    assert all(p in data_at_checkpoint.pending() or p >= data_at_checkpoint.next for p in after)

    records = _train_records(run_dir)
    assert [r["step"] for r in records] == list(
        range(1, steps + 1)
    )  # what was logged after the checkpoint is gone
    assert [r["step"] for r in _eval_records(run_dir)] == [0, steps]
    assert all(r["time"] < killed_at for r in records[:kept])  # the resumed run went on from its checkpoint
    assert all(r["time"] > killed_at for r in records[kept:])
    assert all(r["rollout/staleness_max"] <= 1 for r in records)  # async_ratio 1 bounds every trained trajectory
    rollouts = [json.loads(line) for line in (run_dir / ROLLOUTS).read_text().splitlines()]
    assert sorted({r["step"] for r in rollouts}) == list(range(1, steps + 1))  # the discarded timeline's are gone
    assert len({r["key"] for r in rollouts}) == len(rollouts)
    seeds = [tuple(seed) for b in batches for seed in b["seeds"]]
    assert len(set(seeds)) == len(seeds)  # no episode trained twice, carried or not
    if carry_over:
        carried = [p for b in batches for p in b["carried"]]
        assert carried, "no carry group was trained: the test would not show carry-over"
        trained_by = {p: b["step"] for b in batches for p in b["tasks"]}
        assert all(trained_by[p] <= b["step"] for b in batches for p in b["carried"])  # an extra of a trained task
        logged = [r.get("rollout/carry_discarded_on_resume", 0) for r in records[kept:]]
        assert sum(logged) == buffered
        assert (f"the {buffered} carried-over episodes" in (tmp_path / "second.log").read_text()) == (buffered > 0)


def _batches(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "batches.jsonl").read_text().splitlines()]


def test_a_resumed_run_trains_on_the_episodes_of_an_uninterrupted_one(tiny_model_dir, tmp_path):
    """Resumed from step 3's checkpoint, taken while later episodes were in flight, a run taking groups in
    hand-out order trains at every later step on the tasks, in the order and with the episode seeds of the
    run that went on."""
    steps, kept = 7, 3
    data = _config(tmp_path / "run", tiny_model_dir, trainer={"steps": steps, "group_order": "handout"},
                   eval={"episodes": 0}, checkpoint={"every": kept, "keep": 3})
    data["trainer"]["save_rollouts"] = False
    config, _ = _train(data)
    assert not (config.run_dir / ROLLOUTS).exists()
    uninterrupted = _batches(config.run_dir)
    groups = config.trainer.groups_per_step
    assert [b["tasks"] for b in uninterrupted] == [list(range(s * groups, (s + 1) * groups)) for s in range(steps)]
    # an episode's seeds: the run's, its task's position, its attempt, its task's
    assert [b["seeds"][0] for b in uninterrupted[:2]] == [[0, 0, 1, 0], [0, groups, 1, groups]]
    resumed_dir = tmp_path / "resumed"
    shutil.copytree(config.run_dir, resumed_dir)
    (resumed_dir / "checkpoints" / "latest").write_text(f"step-{kept:06d}\n")
    resume(resumed_dir, console=Console(file=io.StringIO()))
    assert _batches(resumed_dir) == uninterrupted


def _agentgym(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """Run the ``agentgym`` console script in this process: its exit status and stderr."""
    monkeypatch.setattr(sys, "argv", ["agentgym", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("override", "key"),
    [("trainer.stepz=3", "trainer.stepz"), ("optim.lr=-1", "optim.lr"), ("eval.suite=games-v9", "eval.suite"),
     ("rollout.backend=rai", "rollout.backend"), ("rollout.ray.env_workers=0", "rollout.ray.env_workers"),
     ("trainer.strategy=zero3", "trainer.strategy"), ("trainer.world_size=0", "trainer.world_size"),
     ("trainer.world_size=2 trainer.strategy=single", "trainer.strategy"),
     ("rollout.sampling=tree", "rollout.sampling"), ("rollout.latr.tau_abs=2", "rollout.latr.tau_abs"),
     ("rollout.latr.width_schedule={10:0.5}", "rollout.latr.width_schedule"),
     ("trainer.forced_lag=2", "trainer.forced_lag")],
)
def test_a_bad_override_exits_2_naming_the_key(tiny_model_dir, tmp_path, monkeypatch, capsys, override, key):
    config_file = tmp_path / "train.yaml"
    config_file.write_text(yaml.safe_dump(_config(tmp_path / "run", tiny_model_dir)))
    code, err = _agentgym(monkeypatch, capsys, "train", str(config_file), *override.split())
    assert code == 2 and key in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("config", sorted(p.name for p in (ROOT / "trainers" / "configs").glob("*.yaml")
                                           if not p.name.startswith("sft")))
def test_every_bundled_train_config_is_valid(config):
    load_config(TrainConfig, ROOT / "trainers" / "configs" / config)


def test_a_run_dir_holding_a_run_is_not_overwritten(vowels_run, tmp_path, monkeypatch, capsys):
    config, _ = vowels_run
    before = {p: p.read_bytes() for p in config.run_dir.rglob("*") if p.is_file()}
    config_file = tmp_path / "train.yaml"
    config_file.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    code, err = _agentgym(monkeypatch, capsys, "train", str(config_file), "optim.lr=1e-2")
    assert code == 1 and "already holds a run" in err and "--resume" in err
    assert {p: p.read_bytes() for p in config.run_dir.rglob("*") if p.is_file()} == before


def test_resume_needs_a_run(tmp_path, monkeypatch, capsys):
    code, err = _agentgym(monkeypatch, capsys, "train", "--resume", str(tmp_path))
    assert code == 1 and f"{tmp_path} holds no run" in err
    code, err = _agentgym(monkeypatch, capsys, "train", "--resume", str(tmp_path / "missing"))
    assert code == 2 and "missing" in err


def test_a_bad_env_id_fails_before_any_episode(tiny_model_dir, tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    config_file = tmp_path / "train.yaml"
    config_file.write_text(yaml.safe_dump(_config(run_dir, tiny_model_dir, env={"id": "test/Vowelz-v0"})))
    code, err = _agentgym(monkeypatch, capsys, "train", str(config_file))
    assert code == 1 and "test/Vowelz-v0" in err
    assert not run_dir.exists()  # nothing started, and the output dir stays free for the corrected config


def test_a_run_with_vcpo_and_carry_over_shows_its_off_policy_state(tiny_model_dir, tmp_path):
    """ESS, effective rate, baseline and the carry-over buffer reach the metrics, the progress line and report.md."""
    console = Console(file=io.StringIO(), width=400)
    config = TrainConfig.model_validate(_config(
        tmp_path / "run", tiny_model_dir, trainer={"steps": 4, "redundancy": 2},
        algorithm={"vcpo": {"lr_scaling": "sqrt", "baseline": "min_variance", "collapse_ess_ratio": 1.0}},
        rollout={"carry_over": True}))
    train(config, console=console)
    records = _train_records(config.run_dir)
    assert all(0 < r["train/ess_ratio"] <= 1 + 1e-9 for r in records)
    assert all(r["train/effective_lr"] == pytest.approx(3e-3 * math.sqrt(r["train/ess_ratio"])) for r in records)
    assert all("train/baseline_shift" in r for r in records if "train/skipped" not in r)
    assert records[-1]["rollout/carried"] > 0 and "rollout/carry_buffer" in records[-1]
    assert records[-1]["rollout/engine_tokens"] >= records[-1]["rollout/generated_tokens"] > 0  # and in flight
    shown = console.file.getvalue()
    assert "ESS " in shown and "ESS COLLAPSED" in shown  # a threshold of 1.0 flags every off-policy step
    report = (config.run_dir / "report.md").read_text()
    assert "## Off-policy steps" in report and "ESS ratio, lowest step" in report
    summary = json.loads((config.run_dir / "summary.json").read_text())
    assert summary["off_policy"]["ESS ratio, lowest step"] == pytest.approx(min(r["train/ess_ratio"] for r in records),
                                                                          abs=1e-6)
