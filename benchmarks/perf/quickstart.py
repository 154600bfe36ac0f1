"""The CPU quickstart, measured: build the tiny model, warm-start it with SFT on oracle demonstrations,
train it with async RL and TIS on FrozenLake, and compare held-out success before and after RL.

Runs the bundled configs (``trainers/configs/sft-quickstart.yaml`` and ``quickstart.yaml``) in a
temporary folder, with ``a.b=value`` overrides for either stage (``--sft-set``, ``--train-set``).
Writes ``benchmarks/results/quickstart.json`` with ``success_before`` (the SFT start), ``success_after``,
``gain_points`` and ``wall_s`` (the whole pipeline, model build included); the last line printed is
that JSON. Goal: ``gain_points >= 20`` within ``wall_s <= 900`` on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

from agentgym.config import load_config
from agentgym.models import init_model
from agentgym.trainers import TrainConfig, train
from agentgym.trainers.sft import SFTRunConfig, run_sft

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "trainers" / "configs"
GOAL = {"gain_points": 20.0, "wall_s": 900.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sft-set", nargs="*", default=[], help="overrides of sft-quickstart.yaml (a.b=value)")
    parser.add_argument("--train-set", nargs="*", default=[], help="overrides of quickstart.yaml (a.b=value)")
    parser.add_argument("--keep", type=Path, help="keep the run here instead of a temporary folder")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "quickstart.json")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="agentgym-quickstart-") as tmp:
        work = args.keep or Path(tmp)
        started = time.perf_counter()
        init_model(work / "tiny-model", preset="tiny", seed=0)
        sft = run_sft(load_config(SFTRunConfig, CONFIGS / "sft-quickstart.yaml",
                                  [f"model={work / 'tiny-model'}", f"output_dir={work / 'sft'}", *args.sft_set]))
        sft_seconds = time.perf_counter() - started
        result = train(load_config(TrainConfig, CONFIGS / "quickstart.yaml",
                                   [f"model.path={sft.model_dir}", f"output_dir={work / 'train'}", *args.train_set]))
        wall = time.perf_counter() - started
        curve = work / "train" / "curves.png"
        figures = {
            "success_before": result.success_before,
            "success_after": result.success_after,
            "gain_points": round(100 * (result.success_after - result.success_before), 1),
            "wall_s": round(wall, 1),
            "sft_s": round(sft_seconds, 1),
            "rl_s": round(result.wall_seconds, 1),
            "rl_steps": result.steps,
            "curve": str(curve) if args.keep else None,
        }
    report = {
        "benchmark": "quickstart",
        **figures,
        "goal": GOAL,
        "meets_goal": figures["gain_points"] >= GOAL["gain_points"] and figures["wall_s"] <= GOAL["wall_s"],
        "overrides": {"sft": args.sft_set, "train": args.train_set},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
                    "load_before": load_before, "load_after": os.getloadavg()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"held-out success {figures['success_before']:.1%} -> {figures['success_after']:.1%} "
          f"({figures['gain_points']:+.1f} points) in {figures['wall_s']:.0f} s", file=sys.stderr)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
