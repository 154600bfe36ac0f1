"""What every perf script reports the same way: the machine it ran on, and its result written to
``benchmarks/results/`` and printed as the last line."""

from __future__ import annotations

import json
import os
import platform
from importlib.metadata import version
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results"
"""Where the scripts write their results by default."""


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load averages, to two places."""
    return [round(load, 2) for load in os.getloadavg()]


def machine(*packages: str, **extra: Any) -> dict[str, Any]:
    """A result's ``machine`` block: the CPU count, the Python version, the installed version of each of
    ``packages`` (distribution names, each its own key), then ``extra`` (load averages, threads, a device)."""
    return {"cpus": os.cpu_count(), "python": platform.python_version(),
            **{name: version(name) for name in packages}, **extra}


def write_result(result: dict[str, Any], out: Path) -> None:
    """Write ``result`` to ``out`` as indented JSON (making its folder), then print it on one line."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result), flush=True)
