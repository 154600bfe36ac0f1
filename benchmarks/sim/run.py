"""The whole simulation: a cluster trace under solo disaggregation, co-located training and RollMux; RollMux
against the brute-force optimum on small instances; and the time admission takes for 2,000 jobs."""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym.trainers.mux.plan import Admission

from .config import Fleet, Knobs
from .dispatch import simulate
from .jobs import Job, Size, TraceSpec, generate_trace, small_instance
from .optimal import group_cost, optimal_groups
from .outcome import Outcome
from .phases import Shape, load
from .policies import Colocated, Partition, RollMux, Solo

DATA = Path(__file__).resolve().parent / "data"
"""Phase times of real synchronous agentgym runs (their ``metrics.jsonl``), the default inputs."""
GOAL = {"efficiency_vs_solo": 1.6, "efficiency_vs_colocated": 1.25, "slo_attainment": 1.0,
        "optimality_gap": 1.12, "admission_seconds": 1.0}


def shapes_of(paths: Sequence[Path], release: float | None) -> list[Shape]:
    """The shape of each input (a run dir, its ``metrics.jsonl``, or a JSON list of phases)."""
    return [Shape.of(p.parent.name if p.name == "metrics.jsonl" else p.stem, load(p), release=release or 0.8)
            for p in paths]


def cluster(jobs: Sequence[Job], fleet: Fleet, knobs: Knobs) -> dict[str, Outcome]:
    """The trace under each of the three cluster policies."""
    return {policy.name: simulate(policy, jobs, fleet, knobs) for policy in (Solo(), Colocated(), RollMux())}


def admitted_groups(jobs: Sequence[Job], fleet: Fleet, knobs: Knobs) -> list[list[str]]:
    """The groups admission forms placing ``jobs`` (one size) in order with no job leaving."""
    admission = Admission(fleet.pools(jobs[0].rollout_gpus, jobs[0].train_gpus))
    for job in jobs:
        admission.place(job.id, job.profile(knobs.quantile, knobs.switch_seconds))
    return [list(group.members) for group in admission.groups.values()]


GAP_SETS: dict[str, dict[str, Any]] = {"trace": {}, "dense": {"step_seconds": (240.0, 480.0), "slo": (1.5, 2.0)}}
"""The small instances' specs, as changes to the trace's: its own, and one where more jobs may share a group
(closer step times, looser SLOs), so that placement has choices to get wrong."""


def optimality(shapes: Sequence[Shape], fleet: Fleet, knobs: Knobs, spec: TraceSpec, *, seeds: int,
               sizes: Sequence[int], steps: int) -> dict[str, Any]:
    """RollMux's cost over the brute-force optimum's on small all-at-once instances of each of
    :data:`GAP_SETS`, both simulated (and as planned: each partition's cost per meta-iteration on the planning
    profiles)."""
    sets = {name: instances(shapes, fleet, knobs, dataclasses.replace(spec, **changes), seeds=seeds, sizes=sizes,
                            steps=steps) for name, changes in GAP_SETS.items()}
    every = [i for found in sets.values() for i in found]
    shared = [i for i in every if any(len(group) > 1 for group in i["optimal_groups"])]
    gaps = [i["gap"] for i in every]
    return {"steps_per_job": steps, "gap_mean": round(statistics.fmean(gaps), 4), "gap_max": max(gaps),
            "planned_gap_max": max(i["planned_gap"] for i in every), "instances_sharing": len(shared),
            "instances_total": len(every), **{name: {"changes": jsonable(GAP_SETS[name]), "instances": found}
                                              for name, found in sets.items()}}


def instances(shapes: Sequence[Shape], fleet: Fleet, knobs: Knobs, spec: TraceSpec, *, seeds: int,
              sizes: Sequence[int], steps: int) -> list[dict[str, Any]]:
    """RollMux against the optimum on ``seeds`` instances of each of ``sizes`` jobs."""
    found: list[dict[str, Any]] = []
    for seed in range(seeds):
        for count in sizes:
            jobs = small_instance(shapes, count, steps, seed * 1000 + count, spec=spec)
            best, best_planned = optimal_groups(jobs, fleet, knobs.quantile, knobs.switch_seconds)
            greedy = admitted_groups(jobs, fleet, knobs)
            by_id = {job.id: job for job in jobs}
            pools = fleet.pools(jobs[0].rollout_gpus, jobs[0].train_gpus)
            greedy_planned = sum(
                group_cost([by_id[j].profile(knobs.quantile, knobs.switch_seconds) for j in group], pools)
                for group in greedy)
            mux = simulate(RollMux(), jobs, fleet, knobs)
            opt = simulate(Partition(best, "optimal"), jobs, fleet, knobs)
            found.append({"seed": seed, "jobs": count, "rollmux_groups": greedy, "optimal_groups": best,
                          "rollmux_dollars": round(mux.dollars, 4), "optimal_dollars": round(opt.dollars, 4),
                          "gap": round(mux.dollars / opt.dollars, 4),
                          "planned_gap": round(greedy_planned / best_planned, 4),
                          "slo_attainment": {"rollmux": mux.slo_attainment, "optimal": opt.slo_attainment}})
    return found


def admission_time(shapes: Sequence[Shape], fleet: Fleet, knobs: Knobs, spec: TraceSpec, *, jobs: int,
                   seed: int) -> dict[str, Any]:
    """Seconds ``Admission.place`` takes for ``jobs`` generated profiles in a row (one admission per pool size,
    no job leaving): with no bound on groups (every job placed, the most groups to weigh), and with the fleet's
    GPUs bounding each size's groups (most jobs refused, each refusal with its reasons)."""
    trace = generate_trace(dataclasses.replace(spec, jobs=jobs), shapes, seed)
    profiles = [(job, job.profile(knobs.quantile, knobs.switch_seconds)) for job in trace]
    out: dict[str, Any] = {"jobs": jobs}
    for bounded in (False, True):
        admissions: dict[int, Admission] = {}
        placed = 0
        started = time.perf_counter()
        for job, profile in profiles:
            admission = admissions.get(job.train_gpus) or admissions.setdefault(job.train_gpus, Admission(
                fleet.pools(job.rollout_gpus, job.train_gpus),
                max_groups=fleet.train_gpus // job.train_gpus if bounded else None))
            placed += admission.place(job.id, profile).group is not None
        seconds = time.perf_counter() - started
        out["bounded" if bounded else "unbounded"] = {
            "seconds": round(seconds, 4), "per_job_us": round(1e6 * seconds / jobs, 1), "placed": placed,
            "groups": sum(len(a.groups) for a in admissions.values())}
    out["seconds"] = max(out["unbounded"]["seconds"], out["bounded"]["seconds"])
    return out


ONE_SIZE = (Size(8, 7.0, 1.0, 240.0),)
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "no early release": ({}, {"release": None}),
    "no switch cost": ({}, {"switch_seconds": 0.0, "colocated_switch_seconds": 0.0}),
    "planning on p75": ({}, {"quantile": 0.75}),
    "planning on p50": ({}, {"quantile": 0.5}),
    "rollout share U(0.3, 0.8)": ({"rollout_share": (0.3, 0.8)}, {}),
    "step times apart from size, 120-900 s": ({"step_seconds": (120.0, 900.0)}, {}),
    "steps 240-480 s": ({"step_seconds": (240.0, 480.0)}, {}),
    "SLO U(1.5, 2)": ({"slo": (1.5, 2.0)}, {}),
    "one size (8+8)": ({"sizes": ONE_SIZE}, {}),
    "one size, steps 240-480 s, SLO U(1.5, 2), p50": (
        {"sizes": ONE_SIZE, "step_seconds": (240.0, 480.0), "slo": (1.5, 2.0)}, {"quantile": 0.5}),
}
"""What each sensitivity run changes from the main one: the trace's spec, then the knobs."""


def sensitivity(shapes: Sequence[Shape], fleet: Fleet, knobs: Knobs, spec: TraceSpec, seed: int) -> dict[str, Any]:
    """The main figures with one assumption changed at a time (:data:`VARIANTS`)."""
    out = {}
    for name, (trace_changes, knob_changes) in VARIANTS.items():
        changed = dataclasses.replace(knobs, **knob_changes)
        outcomes = cluster(generate_trace(dataclasses.replace(spec, **trace_changes), shapes, seed), fleet, changed)
        mux = outcomes["rollmux"]
        out[name] = {"efficiency_vs_solo": round(mux.efficiency / outcomes["solo"].efficiency, 4),
                     "efficiency_vs_colocated": round(mux.efficiency / outcomes["colocated"].efficiency, 4),
                     "slo_attainment": round(mux.slo_attainment, 4), "jobs_per_pool": round(mux.jobs_per_pool, 3),
                     "changes": jsonable({**trace_changes, **knob_changes})}
    return out


def jsonable(value: Any) -> Any:
    """``value`` with dataclasses as dicts and tuples as lists, for the results file."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(vars(value))
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def figures(outcomes: dict[str, Outcome], gap: dict[str, Any], admission: dict[str, Any]) -> dict[str, Any]:
    """The headline figures and whether each goal is met."""
    mux = outcomes["rollmux"]
    got = {"efficiency_vs_solo": mux.efficiency / outcomes["solo"].efficiency,
           "efficiency_vs_colocated": mux.efficiency / outcomes["colocated"].efficiency,
           "colocated_vs_solo": outcomes["colocated"].efficiency / outcomes["solo"].efficiency,
           "slo_attainment": mux.slo_attainment, "optimality_gap": gap["gap_max"],
           "optimality_gap_mean": gap["gap_mean"], "admission_seconds": admission["seconds"]}
    met = {key: (got[key] <= goal if key in ("optimality_gap", "admission_seconds") else got[key] >= goal)
           for key, goal in GOAL.items()}
    return {"figures": {k: round(v, 4) for k, v in got.items()}, "met": met}


def trace_summary(jobs: Sequence[Job]) -> dict[str, Any]:
    """What the trace holds: its jobs' sizes, hours alone, steps, rollout shares and SLOs."""
    hours = [job.solo_seconds / 3600 for job in jobs]
    shares = [sum(s.rollout for s in job.steps) / job.solo_seconds for job in jobs]
    sizes: dict[str, int] = {}
    for job in jobs:
        sizes[f"{job.rollout_gpus}+{job.train_gpus}"] = sizes.get(f"{job.rollout_gpus}+{job.train_gpus}", 0) + 1
    return {"jobs": len(jobs), "sizes": sizes, "arrivals_span_hours": round(jobs[-1].arrival / 3600, 2),
            "solo_hours": {"mean": round(statistics.fmean(hours), 2), "min": round(min(hours), 2),
                           "max": round(max(hours), 2)},
            "steps_mean": round(statistics.fmean(len(job.steps) for job in jobs), 1),
            "rollout_share": {"mean": round(statistics.fmean(shares), 3), "min": round(min(shares), 3),
                              "max": round(max(shares), 3)},
            "slo_mean": round(statistics.fmean(job.slo for job in jobs), 3)}
