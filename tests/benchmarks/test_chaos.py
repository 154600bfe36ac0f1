"""The chaos benchmark's invariants with carry-over on: faults injected into episodes whose spares pause and continue
in carry groups still leave nothing lost, doubled or leaked, and every count adds up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CHAOS = Path(__file__).parents[2] / "benchmarks" / "perf" / "chaos.py"


@pytest.mark.timeout(600)
def test_chaos_invariants_hold_with_carry_over(tmp_path):
    out = tmp_path / "chaos.json"
    subprocess.run([sys.executable, str(CHAOS), "--episodes", "96", "--sandbox-episodes", "8", "--carry-over",
                    "--turn-timeout", "2", "--tool-timeout", "1.5", "--episode-timeout", "12", "--deadline", "240",
                    "--out", str(out)], check=True, capture_output=True, timeout=560)
    result = json.loads(out.read_text())
    failed = {name: ok for arm in result["arms"].values() for name, ok in arm["checks"].items() if not ok}
    assert not failed, failed
    assert result["met"], {key: result[key] for key in result["goal"]}
    lake = result["arms"]["lake"]["metrics"]
    assert lake["carried"] > 0 and lake["carry_groups"] > 0  # carry-over acted, so the checks covered it
