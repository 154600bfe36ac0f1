"""``python -m benchmarks.sim [run] [options]``: the cluster simulation, written to
``benchmarks/results/mux_sim.json`` (the last line printed); ``python -m benchmarks.sim validate FILE``: the
prediction of the real multiplexed benchmark's span, written to the same file under ``validation``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agentgym.trainers.mux.plan import Rules
from benchmarks.perf.report import RESULTS, load_average, machine, write_result

from .config import Fleet, Knobs
from .jobs import TraceSpec, generate_trace
from .run import (
    DATA,
    GOAL,
    PAPER_LIKE,
    ablation,
    admission_time,
    cluster,
    figures,
    jsonable,
    optimality,
    risk,
    sensitivity,
    shapes_of,
    trace_summary,
)
from .validate import validate

OUT = RESULTS / "mux_sim.json"


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m benchmarks.sim", description=__doc__.split("\n\n")[0])
    commands = top.add_subparsers(dest="command")
    run = commands.add_parser("run", help="the cluster simulation (the default)")
    run.add_argument("--inputs", type=Path, nargs="+",
                     help="run dirs or metrics.jsonl of synchronous runs, or JSON lists of {rollout, train} per "
                          "step (default: the recorded runs in benchmarks/sim/data)")
    run.add_argument("--jobs", type=int, default=200)
    run.add_argument("--interarrival-minutes", type=float, default=30.0, help="mean of the Poisson arrivals")
    run.add_argument("--rollout-share", type=float, nargs=2, metavar=("LOW", "HIGH"),
                     help="rescale each job to a rollout share drawn from this range (default: the inputs' own)")
    run.add_argument("--rollout-gpus", type=int, default=328, help="H20s")
    run.add_argument("--train-gpus", type=int, default=328, help="H800s")
    run.add_argument("--switch-seconds", type=float, default=2.0, help="RollMux's warm-start switch per phase")
    run.add_argument("--colocated-switch-seconds", type=float, default=2.0, help="co-located, per phase change")
    run.add_argument("--colocated-rollout-speed", type=float, default=1.0,
                     help="rollout speed per H800 over per H20")
    run.add_argument("--release", type=float, default=0.8, help="early release share (0: off)")
    run.add_argument("--tail-drag", type=float, default=0.2)
    run.add_argument("--quantile", type=float, default=0.9,
                     help="the phase-time quantile the quantile and mixed bases plan on")
    run.add_argument("--slo-margin", type=float, default=Rules().slo_margin,
                     help="the risk knob: estimated step times raised by this share must keep every SLO")
    run.add_argument("--seeds", type=int, default=3, help="seeds of the paper-like trace the goals are judged on")
    run.add_argument("--gap-seeds", type=int, default=5)
    run.add_argument("--gap-sizes", type=int, nargs="+", default=[6, 8, 10])
    run.add_argument("--gap-steps", type=int, default=40)
    run.add_argument("--admission-jobs", type=int, default=2000)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--no-sensitivity", dest="sensitivity", action="store_false",
                     help="skip the runs with one assumption changed at a time")
    run.add_argument("--quick", action="store_true",
                     help="40 jobs, 2 seeds of the gap, 500 admissions, no sensitivity runs")
    run.add_argument("--out", type=Path, default=OUT)
    check = commands.add_parser("validate", help="predict the real multiplexed benchmark's span")
    check.add_argument("file", type=Path, help="the real benchmark's results (benchmarks/results/mux.json)")
    check.add_argument("--release", type=float, help="simulate early release at this share (default: off)")
    check.add_argument("--switch-seconds", type=float,
                       help="switch per phase to add (default: the file's multiplexed.switch_seconds)")
    check.add_argument("--out", type=Path, default=OUT)
    return top


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv if argv[:1] in (["run"], ["validate"], ["-h"], ["--help"]) else ["run", *argv])
    if args.command == "validate":
        result = validate(args.file, release=args.release, switch_seconds=args.switch_seconds)
        _table_validation(result)
        report = json.loads(args.out.read_text()) if args.out.exists() else {"benchmark": "mux_sim"}
        report["validation"] = result
        write_result(report, args.out)
        return
    if args.quick:
        args.jobs, args.gap_seeds, args.admission_jobs, args.sensitivity, args.seeds = 40, 2, 500, False, 1
    write_result(simulation(args), args.out)


def simulation(args: argparse.Namespace) -> dict[str, Any]:
    """The cluster runs (the goal's paper-like trace over ``args.seeds`` seeds, and the recorded runs' trace), the
    ablation on both, the optimality gap and the admission time, as the results file holds them."""
    load_before, started = load_average(), time.perf_counter()
    release = args.release or None
    fleet = Fleet(rollout_gpus=args.rollout_gpus, train_gpus=args.train_gpus)
    knobs = Knobs(switch_seconds=args.switch_seconds, release=release, tail_drag=args.tail_drag,
                  colocated_rollout_speed=args.colocated_rollout_speed,
                  colocated_switch_seconds=args.colocated_switch_seconds, quantile=args.quantile,
                  rules=Rules(slo_margin=args.slo_margin))
    spec = TraceSpec(jobs=args.jobs, interarrival_seconds=60 * args.interarrival_minutes,
                     rollout_share=tuple(args.rollout_share) if args.rollout_share else None)
    specs = {"paper-like": dataclasses.replace(PAPER_LIKE, jobs=args.jobs), "recorded": spec}
    inputs = args.inputs or sorted(p for p in DATA.iterdir() if p.is_dir() or p.suffix == ".json")
    shapes = shapes_of(inputs, release)
    traces = {name: generate_trace(s, shapes, args.seed) for name, s in specs.items()}
    runs = [cluster(generate_trace(specs["paper-like"], shapes, args.seed + k), fleet, knobs)
            for k in range(args.seeds)]
    recorded = cluster(traces["recorded"], fleet, knobs)
    gap = optimality(shapes, fleet, knobs, spec, seeds=args.gap_seeds, sizes=args.gap_sizes, steps=args.gap_steps)
    admission = admission_time(shapes, fleet, knobs, spec, jobs=args.admission_jobs, seed=args.seed)
    variants = sensitivity(shapes, fleet, knobs, spec, args.seed) if args.sensitivity else None
    result = {"benchmark": "mux_sim", "goal_trace": "paper-like", **figures(runs, gap, admission), "goal": GOAL,
              "recorded": {k: round(v, 4) for k, v in figures([recorded], gap, admission)["figures"].items()
                           if k in ("efficiency_vs_solo", "efficiency_vs_colocated", "slo_attainment")},
              "policies": {name: {policy: outcome.summary() for policy, outcome in outcomes.items()}
                           for name, outcomes in (("paper-like", runs[0]), ("recorded", recorded))},
              "ablation": ablation(traces, fleet, knobs),
              "risk": risk(specs, shapes, fleet, knobs, seeds=range(args.seed, args.seed + args.seeds)),
              "traces": {name: {"spec": jsonable(specs[name]), **trace_summary(jobs)} for name, jobs in traces.items()},
              "sensitivity": variants, "optimality": gap, "admission": admission,
              "inputs": [{"name": s.name, "steps": len(s.rollout), "rollout_share": round(s.rollout_share, 3),
                          "tail_share": round(s.tail, 3)} for s in shapes],
              "parameters": {"fleet": jsonable(fleet), "knobs": jsonable(knobs), "seed": args.seed,
                             "seeds": args.seeds, "inputs": [_relative(p) for p in inputs]}}
    if args.out.exists() and "validation" in (previous := json.loads(args.out.read_text())):
        result["validation"] = previous["validation"]
    _table(result)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    result["machine"] = machine("simpy", load_before=load_before, load_after=load_average())
    return result


def _relative(path: Path) -> str:
    """``path`` from the repository root where it lies inside it."""
    root = DATA.parents[2]
    return str(path.resolve().relative_to(root)) if path.resolve().is_relative_to(root) else str(path)


def _table(result: dict[str, Any]) -> None:
    console = Console(stderr=True)
    fleet = result["parameters"]["fleet"]
    for trace, policies in result["policies"].items():
        table = Table(title=f"{trace} trace: {result['traces'][trace]['jobs']} jobs on {fleet['rollout_gpus']} H20 + "
                            f"{fleet['train_gpus']} H800 (seed {result['parameters']['seed']})")
        for column in ("policy", "dollars", "work/$", "vs solo", "vs co-located", "SLO met", "slowdown max",
                       "queue h (mean)"):
            table.add_column(column, justify="left" if column == "policy" else "right")
        for name, p in policies.items():
            table.add_row(name, f"{p['dollars']:,.0f}", f"{p['efficiency']:.3f}",
                          f"{p['efficiency'] / policies['solo']['efficiency']:.2f}x",
                          f"{p['efficiency'] / policies['colocated']['efficiency']:.2f}x",
                          f"{100 * p['slo_attainment']:.1f}%", f"{p['slowdown_max']:.2f}",
                          f"{p['queue_wait_hours_mean']:.2f}")
        console.print(table)
    for trace, rows in result["ablation"].items():
        table = Table(title=f"ablation, {trace} trace (RollMux, each mechanism added to those above)")
        for column in ("mechanism", "vs solo", "vs co-located", "SLO met", "jobs a pool", "packed/scaled/new"):
            table.add_column(column)
        for row in rows:
            kinds = row["placements"]
            table.add_row(row["mechanism"], f"{row['efficiency_vs_solo']:.2f}x",
                          f"{row['efficiency_vs_colocated']:.2f}x", f"{100 * row['slo_attainment']:.1f}%",
                          f"{row['jobs_per_pool']:.2f}", f"{kinds['packed']}/{kinds['scaled']}/{kinds['new']}")
        console.print(table)
    goals = Table(title=f"goals ({result['goal_trace']} trace, {result['parameters']['seeds']} seeds)")
    for column in ("figure", "value", "goal", "met"):
        goals.add_column(column)
    for key, goal in GOAL.items():
        sense = "<=" if key in ("optimality_gap", "admission_seconds") else ">="
        goals.add_row(key, f"{result['figures'][key]:.4g}", f"{sense} {goal}", "yes" if result["met"][key] else "NO")
    console.print(goals)
    if result["sensitivity"]:
        variants = Table(title="one assumption changed (RollMux, recorded trace)")
        for column in ("variant", "vs solo", "vs co-located", "SLO met"):
            variants.add_column(column)
        for name, v in result["sensitivity"].items():
            variants.add_row(name, f"{v['efficiency_vs_solo']:.2f}x", f"{v['efficiency_vs_colocated']:.2f}x",
                             f"{100 * v['slo_attainment']:.1f}%")
        console.print(variants)


def _table_validation(result: dict[str, Any]) -> None:
    table = Table(title=f"validation against {result['source']}")
    for column in ("shape", "predicted s", "measured s", "error", "within 10%"):
        table.add_column(column)
    for name, shape in result["shapes"].items():
        table.add_row(name, f"{shape['predicted_span_seconds']:.2f}", f"{shape['measured_span_seconds']:.2f}",
                      f"{shape['error_pct']:+.1f}%", "yes" if shape["within_goal"] else "NO")
    Console(stderr=True).print(table)


if __name__ == "__main__":
    main()
