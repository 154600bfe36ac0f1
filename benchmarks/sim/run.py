"""The whole simulation: a cluster trace under solo disaggregation, co-located training and RollMux; RollMux
against the brute-force optimum on small instances; and the time admission takes for 2,000 jobs."""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agentgym.trainers.mux.estimate import Profile
from agentgym.trainers.mux.plan import Admission, Group, Rules

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


PAPER_LIKE = TraceSpec(jobs=200, interarrival_seconds=100 * 60.0, hours_median=24.0, hours_sigma=0.5,
                       hours_range=(4.0, 96.0), step_seconds=(240.0, 480.0),
                       sizes=(Size(8, 3.0, 0.25), Size(8, 7.0, 0.35), Size(16, 14.0, 0.25), Size(16, 32.0, 0.15)),
                       rollout_share=(0.75, 0.8), spread=0.5)
"""A trace shaped like the paper's (Weave §6.4: 200 Qwen jobs of 3B to 32B over two weeks, 27.9 h mean, mostly
rollout-heavy): 3B and 7B jobs on 8 GPUs a pool, 14B and 32B on 16; about 28 h each (log-normal, median 24 h);
one arrival every 100 minutes; steps of 240 to 480 s whatever the size; rollout 3 to 4 times training (a share of
0.75 to 0.8); the recorded steps' spread halved (they were measured on a shared 2-core machine)."""

ABLATION: tuple[tuple[str, dict[str, Any]], ...] = (
    ("before", {"basis": "mixed", "model": "lockstep", "rollout_scaling": False, "mixed_sizes": False,
                "max_resident": None}),
    ("+ like-for-like SLO", {"basis": "quantile"}),
    ("+ shared step times", {"basis": "mean", "model": "shared"}),
    ("+ rollout scaling", {"rollout_scaling": True}),
    ("+ residency <= 5", {"max_resident": 5}),
    ("+ mixed sizes", {"mixed_sizes": True}),
)
"""Each mechanism added to those before it, as changes to the knobs (``basis``, ``quantile``), admission's rules
(``model``, ``rollout_scaling``, ``mixed_sizes``, ``slo_margin``) and the fleet (``max_resident``):

- before: this project's design before: a lockstep cycle on p90 phases against the mean step, one rollout node
  and one size a group, no residency limit;
- like-for-like SLO: both sides of the check on p90 phases (as Weave plans both on worst-case phases);
- shared step times: both sides on mean phases, each member's step estimated on work-conserving shared nodes
  (:func:`~agentgym.trainers.mux.estimate.step_times`) instead of every member at the group's lockstep cycle;
- rollout scaling: a job may take new rollout nodes of its own and share a group's training nodes;
- residency <= 5: no node keeps more than five jobs resident;
- mixed sizes: jobs of different sizes in one group, pinned to node subsets (off in the default design).
"""


MARGINS = (0.0, 0.03, 0.06, 0.1)


def risk(specs: dict[str, TraceSpec], shapes: Sequence[Shape], fleet: Fleet, knobs: Knobs, *,
         seeds: Iterable[int]) -> dict[str, list[dict[str, Any]]]:
    """RollMux at each SLO margin of :data:`MARGINS` on each trace and seed: efficiency against solo and
    co-located, SLO attainment and the worst member's slowdown over its SLO."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, spec in specs.items():
        for seed in seeds:
            jobs = generate_trace(spec, shapes, seed)
            baselines = {policy.name: simulate(policy, jobs, fleet, knobs) for policy in (Solo(), Colocated())}
            for margin in MARGINS:
                mux = simulate(RollMux(), jobs, fleet, configured(fleet, knobs, {"slo_margin": margin})[1])
                out.setdefault(name, []).append({
                    "seed": seed, "slo_margin": margin,
                    "efficiency_vs_solo": round(mux.efficiency / baselines["solo"].efficiency, 4),
                    "efficiency_vs_colocated": round(mux.efficiency / baselines["colocated"].efficiency, 4),
                    "slo_attainment": round(mux.slo_attainment, 4),
                    "worst_slowdown_over_slo": round(max(r.slowdown / r.job.slo for r in mux.records), 4)})
    return out


def configured(fleet: Fleet, knobs: Knobs, changes: dict[str, Any]) -> tuple[Fleet, Knobs]:
    """``fleet`` and ``knobs`` with ``changes`` applied to whichever of them, or of the knobs' rules, holds each."""
    rules = {k: v for k, v in changes.items() if k in Rules.__dataclass_fields__}
    own = {k: v for k, v in changes.items() if k in Knobs.__dataclass_fields__}
    on_fleet = {k: v for k, v in changes.items() if k in Fleet.__dataclass_fields__}
    unknown = set(changes) - set(rules) - set(own) - set(on_fleet)
    if unknown:
        raise ValueError(f"no knob, rule or fleet field named {sorted(unknown)}")
    knobs = dataclasses.replace(knobs, **own, rules=dataclasses.replace(knobs.rules, **rules))
    return dataclasses.replace(fleet, **on_fleet), knobs


def ablation(traces: dict[str, Sequence[Job]], fleet: Fleet, knobs: Knobs) -> dict[str, list[dict[str, Any]]]:
    """RollMux on each trace with :data:`ABLATION`'s mechanisms added one at a time."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, jobs in traces.items():
        changes: dict[str, Any] = {}
        rows = out[name] = []
        baselines = {policy.name: simulate(policy, jobs, fleet, knobs) for policy in (Solo(), Colocated())}
        for label, change in ABLATION:
            changes |= change
            row_fleet, row_knobs = configured(fleet, knobs, changes)
            policy = RollMux()
            mux = simulate(policy, jobs, row_fleet, row_knobs)
            rows.append({"mechanism": label, "efficiency_vs_solo": round(mux.efficiency / baselines["solo"].efficiency, 4),
                         "efficiency_vs_colocated": round(mux.efficiency / baselines["colocated"].efficiency, 4),
                         "slo_attainment": round(mux.slo_attainment, 4), "jobs_per_pool": round(mux.jobs_per_pool, 3),
                         "placements": dict(policy.kinds), "changes": jsonable(dict(changes))})
    return out


def admitted_groups(jobs: Sequence[Job], fleet: Fleet, knobs: Knobs) -> list[list[list[str]]]:
    """The groups admission forms placing ``jobs`` (one size) in order with no job leaving, as lists of rollout
    nodes' members."""
    admission = Admission(fleet.machines(), knobs.rules)
    for job in jobs:
        admission.place(job.id, job.profile(knobs, fleet))
    out = []
    for group in admission.groups.values():
        bins: dict[tuple[int, ...], list[str]] = {}
        for name, member in group.members.items():
            bins.setdefault(member.rollout, []).append(name)
        out.append(list(bins.values()))
    return out


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
    shared = [i for i in every if any(sum(map(len, group)) > 1 for group in i["optimal_groups"])]
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
            best, best_planned = optimal_groups(jobs, fleet, knobs)
            greedy = admitted_groups(jobs, fleet, knobs)
            profile = {job.id: job.profile(knobs, fleet) for job in jobs}
            greedy_planned = sum(group_cost([[profile[j] for j in bin] for bin in group], fleet.machines(),
                                            knobs.rules.model) for group in greedy)
            mux = simulate(RollMux(), jobs, fleet, knobs)
            opt = simulate(Partition(best, "optimal"), jobs, fleet, knobs)
            found.append({"seed": seed, "jobs": count, "rollmux_groups": greedy, "optimal_groups": best,
                          "rollmux_dollars": round(mux.dollars, 4), "optimal_dollars": round(opt.dollars, 4),
                          "gap": round(mux.dollars / opt.dollars, 4),
                          "planned_gap": round(greedy_planned / best_planned, 4),
                          "slo_attainment": {"rollmux": mux.slo_attainment, "optimal": opt.slo_attainment}})
    return found


class _Counted:
    """New nodes from a fixed stock of each pool (no group ever closes: admission's timing runs no job out)."""

    def __init__(self, rollout_nodes: float, train_nodes: float) -> None:
        self.free = {"rollout": rollout_nodes, "train": train_nodes}
        self.next = 0

    def open(self, profile: Profile) -> int | None:
        if profile.rollout_nodes > self.free["rollout"] or profile.train_nodes > self.free["train"]:
            return None
        self.free["rollout"] -= profile.rollout_nodes
        self.free["train"] -= profile.train_nodes
        self.next += 1
        return self.next - 1

    def can_grow(self, group: Group, rollout_nodes: int) -> bool:
        return rollout_nodes <= self.free["rollout"]

    def claim(self, group: int) -> None:
        """Not used: no group is rebuilt."""

    def close(self, group: int) -> None:
        """Not used: no group closes."""


def admission_time(shapes: Sequence[Shape], fleet: Fleet, knobs: Knobs, spec: TraceSpec, *, jobs: int,
                   seed: int) -> dict[str, Any]:
    """Seconds ``Admission.place`` takes for ``jobs`` generated profiles in a row, no job leaving: with no bound on
    nodes (every job placed, the most groups to weigh), and with the fleet's nodes as the bound (most jobs
    refused, each refusal with its reasons)."""
    trace = generate_trace(dataclasses.replace(spec, jobs=jobs), shapes, seed)
    profiles = [(job, job.profile(knobs, fleet)) for job in trace]
    out: dict[str, Any] = {"jobs": jobs}
    for bounded in (False, True):
        stock = (fleet.nodes(fleet.rollout_gpus), fleet.nodes(fleet.train_gpus)) if bounded else (math.inf, math.inf)
        capacity = _Counted(*stock)
        admission = Admission(fleet.machines(), knobs.rules, capacity)
        placed = 0
        started = time.perf_counter()
        for job, profile in profiles:
            decision = admission.place(job.id, profile)
            placed += decision.group is not None
            capacity.free["rollout"] -= len(decision.added)
        seconds = time.perf_counter() - started
        out["bounded" if bounded else "unbounded"] = {
            "seconds": round(seconds, 4), "per_job_us": round(1e6 * seconds / jobs, 1), "placed": placed,
            "groups": len(admission.groups)}
    out["seconds"] = max(out["unbounded"]["seconds"], out["bounded"]["seconds"])
    return out


ONE_SIZE = (Size(8, 7.0, 1.0, 240.0),)
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "no early release": ({}, {"release": None}),
    "no switch cost": ({}, {"switch_seconds": 0.0, "colocated_switch_seconds": 0.0}),
    "no SLO margin": ({}, {"slo_margin": 0.0}),
    "planning on p90 both sides (Weave's like for like)": ({}, {"basis": "quantile"}),
    "rollout share U(0.3, 0.8)": ({"rollout_share": (0.3, 0.8)}, {}),
    "step times apart from size, 120-900 s": ({"step_seconds": (120.0, 900.0)}, {}),
    "steps 240-480 s": ({"step_seconds": (240.0, 480.0)}, {}),
    "SLO U(1.5, 2)": ({"slo": (1.5, 2.0)}, {}),
    "one size (8+8)": ({"sizes": ONE_SIZE}, {}),
    "one size, steps 240-480 s, SLO U(1.5, 2)": ({"sizes": ONE_SIZE, "step_seconds": (240.0, 480.0),
                                                  "slo": (1.5, 2.0)}, {}),
}
"""What each sensitivity run changes from the main one: the trace's spec, then the knobs, rules or fleet
(:func:`configured`)."""


def sensitivity(shapes: Sequence[Shape], fleet: Fleet, knobs: Knobs, spec: TraceSpec, seed: int) -> dict[str, Any]:
    """The main figures with one assumption changed at a time (:data:`VARIANTS`)."""
    out = {}
    for name, (trace_changes, knob_changes) in VARIANTS.items():
        changed_fleet, changed = configured(fleet, knobs, knob_changes)
        outcomes = cluster(generate_trace(dataclasses.replace(spec, **trace_changes), shapes, seed), changed_fleet,
                           changed)
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


def figures(runs: Sequence[dict[str, Outcome]], gap: dict[str, Any], admission: dict[str, Any]) -> dict[str, Any]:
    """The headline figures over the seeds' ``runs`` of the goal's trace (efficiencies: their mean, and each
    seed's; SLO attainment: the least) and whether each goal is met."""
    def ratio(a: str, b: str) -> list[float]:
        return [run[a].efficiency / run[b].efficiency for run in runs]

    seeds = {"efficiency_vs_solo": ratio("rollmux", "solo"), "efficiency_vs_colocated": ratio("rollmux", "colocated"),
             "colocated_vs_solo": ratio("colocated", "solo")}
    got = {**{k: statistics.fmean(v) for k, v in seeds.items()},
           "slo_attainment": min(run["rollmux"].slo_attainment for run in runs), "optimality_gap": gap["gap_max"],
           "optimality_gap_mean": gap["gap_mean"], "admission_seconds": admission["seconds"]}
    met = {key: (got[key] <= goal if key in ("optimality_gap", "admission_seconds") else got[key] >= goal)
           for key, goal in GOAL.items()}
    return {"figures": {k: round(v, 4) for k, v in got.items()}, "met": met,
            "per_seed": {k: [round(x, 4) for x in v] for k, v in seeds.items()}}


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
