"""The chaos benchmark's invariants with carry-over on: faults injected into episodes whose spares pause and continue
in carry groups still leave nothing lost, doubled or leaked, and every count adds up.

A fault-free episode that runs out of time counts as misclassified, so the limits are far above what fault-free work
takes on a busy machine (a sandboxed command: 50 ms at the median, 0.4 s at most, at load 5): a 1.5 s tool limit was
exceeded by a fault-free command beside a training run and two CPU-bound loops. Injected hangs still hit them.
The benchmark's count of event-loop stalls (a lag over 1 s) is a figure of the machine's speed, which the benchmark
reports against its goal on a quiet machine and this test does not assert: at load 7, spawning the sandboxes'
commands (a fork of the whole process, 0.06 to 0.13 s each) lagged the loop by 1 s once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SPEED = {"loop_stalls"}
"""The benchmark's goals that measure the machine's speed rather than an invariant."""


@pytest.mark.timeout(600)
def test_chaos_invariants_hold_with_carry_over(tmp_path):
    out = tmp_path / "chaos.json"
    subprocess.run([sys.executable, "-m", "benchmarks.perf.chaos", "--episodes", "96", "--sandbox-episodes", "8",
                    "--carry-over", "--turn-timeout", "6", "--tool-timeout", "5", "--episode-timeout", "20",
                    "--deadline", "240", "--out", str(out)], check=True, capture_output=True, timeout=560, cwd=ROOT)
    result = json.loads(out.read_text())
    failed = {name: ok for arm in result["arms"].values() for name, ok in arm["checks"].items() if not ok}
    assert not failed, failed
    invariants = {key: goal for key, goal in result["goal"].items() if key not in SPEED}
    assert {key: result[key] for key in invariants} == invariants
    lake = result["arms"]["lake"]["metrics"]
    assert lake["carried"] > 0 and lake["carry_groups"] > 0  # carry-over acted, so the checks covered it
