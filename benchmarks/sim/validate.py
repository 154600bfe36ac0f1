"""The simulator against a real multiplexed run: from jobs' per-step phase times measured solo on a small machine
(the rollout pool one core, the training pool another), predict the wall time of the same jobs multiplexed in
one group, and compare it with the span the real benchmark measured.

The real benchmark's file (``benchmarks/results/mux.json``) holds, per job shape (``"balanced"``,
``"rollout_heavy"``, ...), at its top level or under ``"shapes"`` (entries without ``solo_phases`` are
ignored)::

    {"shapes": {"balanced": {"solo_phases": {"a": [{"rollout": s, "train": s, "rollout_held": s}, ...], "b": [...]},
                             "multiplexed": {"span_seconds": s, "switch_seconds": mean_per_phase}},
                ...}}

``rollout_held`` (optional) is the part of a rollout before early release gave the pool up.
The jobs join the group in the order ``solo_phases`` lists them. ``switch_seconds`` is added to each phase whose
pool last served the other job; where the solo phases were measured with the switches inside them (a solo run
through the scheduler wakes and sleeps its engine too), pass ``switch_seconds=0``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import simpy

from .cluster import GroupRun
from .config import Knobs
from .jobs import Job, Step
from .phases import tail_share

GOAL_ERROR_PCT = 10.0


def predict_span(solo_phases: Mapping[str, Sequence[Mapping[str, float]]], *, switch_seconds: float = 0.0,
                 release: float | None = None, tail_drag: float = 0.2) -> float:
    """Seconds from the first rollout's start to the last training's end of the jobs of ``solo_phases`` (each
    job's solo ``{"rollout", "train"}`` seconds per step) multiplexed round-robin in one group, joined in the
    mapping's order at once, ``switch_seconds`` at each phase whose pool last served another job; with
    ``release``, early release of each rollout's tail (as measured, ``rollout_held`` being the part before the
    pool was given up, or its share from that job's rollout times)."""
    jobs = []
    for name, phases in solo_phases.items():
        share = tail_share([p["rollout"] for p in phases], release) if release is not None else 0.0
        steps = tuple(Step(p["rollout"], p["train"], _tail(p, share, release)) for p in phases)
        jobs.append(Job(name, 0.0, 1, 1, steps))
    env = simpy.Environment()
    group = GroupRun(env, Knobs(switch_seconds=switch_seconds, release=release, tail_drag=tail_drag),
                     lambda job: None)
    for job in jobs:
        group.join(job)
    env.run()
    return env.now


def _tail(phase: Mapping[str, float], share: float, release: float | None) -> float:
    """A step's rollout tail after early release: measured where the run recorded when it gave the pool up
    (``rollout_held``), else ``share`` of the rollout."""
    if release is None:
        return 0.0
    if "rollout_held" in phase:
        return max(0.0, phase["rollout"] - phase["rollout_held"])
    return share * phase["rollout"]


def validate(path: str | Path, *, release: float | None = None,
             switch_seconds: float | None = None) -> dict[str, Any]:
    """Each shape of the real benchmark's file at ``path``: the predicted span (with the file's mean switch per
    phase, or ``switch_seconds`` where given, and without any) and the measured one, the error in percent and
    whether it is within the goal."""
    data = json.loads(Path(path).read_text())
    entries = data.get("shapes", data)
    shapes = {name: entry for name, entry in entries.items()
              if isinstance(entry, dict) and "solo_phases" in entry}
    if not shapes:
        raise ValueError(f"{path} has no shape with 'solo_phases'")
    out: dict[str, Any] = {}
    for name, entry in shapes.items():
        measured = float(entry["multiplexed"]["span_seconds"])
        switch = switch_seconds if switch_seconds is not None else float(entry["multiplexed"].get("switch_seconds", 0))
        predicted = predict_span(entry["solo_phases"], switch_seconds=switch, release=release)
        bare = predict_span(entry["solo_phases"], release=release)
        error = 100.0 * (predicted - measured) / measured
        out[name] = {"jobs": list(entry["solo_phases"]), "switch_seconds": switch,
                     "predicted_span_seconds": round(predicted, 3), "measured_span_seconds": round(measured, 3),
                     "predicted_without_switch_seconds": round(bare, 3),
                     "error_pct": round(error, 2), "within_goal": abs(error) <= GOAL_ERROR_PCT}
    return {"source": str(path), "early_release": release, "goal_error_pct": GOAL_ERROR_PCT, "shapes": out,
            "met": all(shape["within_goal"] for shape in out.values())}
