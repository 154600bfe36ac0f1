"""The RollMux cluster simulator (``benchmarks/sim``) against hand-computed cases: the round-robin throughput of
two jobs, the dollars of solo and co-located runs, the brute-force optimum of three jobs, SLO violations, the
queue, the metrics loader and the validation of a multiplexed pair."""

from __future__ import annotations

import itertools
import json
import math

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.trainers.mux.plan import Profile, cycle_time
from benchmarks.sim.__main__ import main
from benchmarks.sim.cluster import GroupRun
from benchmarks.sim.config import Fleet, Knobs
from benchmarks.sim.dispatch import simulate
from benchmarks.sim.jobs import Job, Step, TraceSpec, generate_trace
from benchmarks.sim.optimal import optimal_groups
from benchmarks.sim.phases import Shape, load, load_metrics
from benchmarks.sim.policies import Colocated, Partition, RollMux, Solo
from benchmarks.sim.validate import predict_span, validate

PLAIN = Knobs(switch_seconds=0.0, release=None, colocated_switch_seconds=0.0)
"""No switch overhead, no early release: the round-robin arithmetic alone."""


def job(name: str, rollout: float, train: float, steps: int = 10, *, slo: float = 2.0, memory_gb: float = 0.0,
        arrival: float = 0.0, gpus: int = 8) -> Job:
    return Job(name, arrival, gpus, gpus, (Step(rollout, train),) * steps, memory_gb=memory_gb, slo=slo)


def span(jobs: list[Job], knobs: Knobs = PLAIN) -> tuple[float, GroupRun]:
    env = simpy.Environment()
    group = GroupRun(env, knobs, lambda j: None)
    for j in jobs:
        group.join(j)
    env.run()
    return env.now, group


@pytest.mark.parametrize(("rollout", "train"), [(1.0, 1.0), (3.0, 1.0), (1.0, 3.0)],
                         ids=["balanced", "rollout-heavy", "training-heavy"])
def test_two_jobs_round_robin_against_one_after_the_other(rollout: float, train: float) -> None:
    steps = 200
    seconds, _ = span([job("a", rollout, train, steps), job("b", rollout, train, steps)])
    # one pool is busy from the first rollout's end on (or from the start), the other phase closes the span
    assert seconds == pytest.approx(min(rollout, train) + 2 * steps * max(rollout, train))
    ratio = 2 * steps * (rollout + train) / seconds
    bound = 2 * (rollout + train) / max(rollout + train, 2 * rollout, 2 * train)
    assert ratio == pytest.approx(bound, rel=2 / steps)


def test_solo_and_colocated_bill_the_hand_computed_dollars() -> None:
    one = [job("a", 60.0, 40.0, 10)]  # 1,000 s alone on 8 H20 + 8 H800
    fleet = Fleet()
    assert simulate(Solo(), one, fleet, PLAIN).dollars == pytest.approx(1000 * 8 * (1.85 + 5.28) / 3600)
    assert simulate(Colocated(), one, fleet, PLAIN).dollars == pytest.approx(1000 * 8 * 5.28 / 3600)
    switching = Knobs(colocated_switch_seconds=2.0)  # two changes of phase a step
    assert simulate(Colocated(), one, fleet, switching).dollars == pytest.approx((1000 + 10 * 4) * 8 * 5.28 / 3600)
    faster = Knobs(colocated_rollout_speed=2.0, colocated_switch_seconds=0.0)  # rollout 30 s a step
    assert simulate(Colocated(), one, fleet, faster).dollars == pytest.approx(700 * 8 * 5.28 / 3600)


def test_the_brute_force_optimum_of_three_jobs_is_the_hand_enumerated_one() -> None:
    fleet = Fleet(rollout_price=1.0, train_price=1.0, node_memory_gb=1024.0)
    rate = 16 / 3600  # 8 + 8 GPUs at $1
    a, b = job("a", 3, 1, memory_gb=600), job("b", 1, 3, memory_gb=600)
    c = job("c", 2, 2, slo=1.3, memory_gb=100)
    # {a}{b}{c}: 4+4+4; {a,b}{c}: over memory; {a,c}{b} and {b,c}{a}: 5+4 (c slowed 1.25x, within 1.3);
    # {a,b,c}: over memory (and c slowed 1.5x)
    groups, cost = optimal_groups([a, b, c], fleet)
    assert cost == pytest.approx(9 * rate)
    assert sorted(map(sorted, groups)) in ([["a"], ["b", "c"]], [["a", "c"], ["b"]])
    roomy = Fleet(rollout_price=1.0, train_price=1.0)  # {a,b}: cycle 4 for both, the best
    groups, cost = optimal_groups([a, b, c], roomy)
    assert cost == pytest.approx(8 * rate) and sorted(map(sorted, groups)) == [["a", "b"], ["c"]]


def test_a_group_past_a_members_slo_is_counted_as_a_violation() -> None:
    a, c = job("a", 3, 1, 50, slo=2.0), job("c", 2, 2, 50, slo=1.2)  # cycle 5: both 1.25x slower
    outcome = simulate(Partition([["a", "c"]]), [a, c], Fleet(), PLAIN)
    slowdowns = {r.job.id: r.slowdown for r in outcome.records}
    assert slowdowns["c"] == pytest.approx(1.25, rel=0.02) and slowdowns["a"] == pytest.approx(1.25, rel=0.02)
    assert outcome.slo_attainment == 0.5 and not outcome.records[1].slo_met


def test_rollmux_shares_pools_only_within_slo_and_queues_what_does_not_fit() -> None:
    small = Fleet(rollout_gpus=8, train_gpus=8)  # room for one pool pair
    pair = [job("a", 3, 1, 20), job("b", 1, 3, 20)]  # complementary: together as fast as alone
    outcome = simulate(RollMux(), pair, small, PLAIN)
    assert outcome.slo_attainment == 1.0 and [r.waited for r in outcome.records] == [0.0, 0.0]
    assert outcome.dollars == pytest.approx(simulate(Solo(), pair, Fleet(), PLAIN).dollars / 2, rel=0.05)
    strict = [job("a", 3, 1, 20, slo=1.1), job("b", 3, 1, 20, slo=1.1)]  # together 1.5x slower: one at a time
    outcome = simulate(RollMux(), strict, small, PLAIN)
    assert [r.waited for r in outcome.records] == [0.0, 80.0] and outcome.slo_attainment == 1.0


def test_the_metrics_loader_skips_eval_lines_and_takes_learn_as_step_minus_wait_minus_publish(tmp_path) -> None:
    lines = [{"step": 0, "time": 1.0, "eval/success_rate": 0.1},
             {"step": 1, "time": 2.0, "time/step_seconds": 10.0, "time/wait_seconds": 6.0,
              "time/publish_seconds": 0.5, "train/loss": 0.1},
             {"step": 1, "time": 3.0, "eval/success_rate": 0.2},
             {"step": 2, "time": 4.0, "time/step_seconds": 8.0, "time/wait_seconds": 3.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    steps = load_metrics(tmp_path)
    got = [(s.rollout, s.learn, s.publish, s.train) for s in steps]
    assert got == [(6.0, 3.5, 0.5, 4.0), (3.0, 5.0, 0.0, 5.0)]
    assert load(tmp_path / "metrics.jsonl") == steps
    (tmp_path / "phases.json").write_text(json.dumps([{"rollout": 2.0, "train": 1.0}]))
    assert [(s.rollout, s.train) for s in load(tmp_path / "phases.json")] == [(2.0, 1.0)]


def test_a_shape_keeps_the_ratio_and_spread_and_the_trace_is_seeded() -> None:
    shape = Shape.of("run", load_samples_rows([(6, 2), (2, 2), (4, 4)]))
    assert sum(shape.rollout) / 3 + sum(shape.train) / 3 == pytest.approx(1.0)
    assert shape.rollout_share == pytest.approx(12 / 20)
    spec = TraceSpec(jobs=5)
    assert generate_trace(spec, [shape], seed=3) == generate_trace(spec, [shape], seed=3)
    assert generate_trace(spec, [shape], seed=3) != generate_trace(spec, [shape], seed=4)


def load_samples_rows(rows: list[tuple[float, float]]) -> list:
    from agentgym.trainers.mux.profile import StepPhases

    return [StepPhases(rollout=r, learn=t, publish=0.0) for r, t in rows]


def test_validation_of_a_hand_made_pair_reproduces_the_round_robin_bound(tmp_path) -> None:
    k = 6
    shapes = {"balanced": (1.0, 1.0, 2 * k * 1.0 + 1.0), "rollout_heavy": (3.0, 1.0, 2 * k * 3.0 + 1.0)}
    real: dict = {"benchmark": "mux", "balanced": {"steps_per_core_hour_ratio": 1.8}, "shapes": {}}
    for name, (rollout, train, measured) in shapes.items():
        phases = [{"rollout": rollout, "train": train}] * k
        real["shapes"][name] = {"solo_phases": {"a": phases, "b": phases},
                                "multiplexed": {"span_seconds": measured, "switch_seconds": 0.0}}
    path = tmp_path / "mux.json"
    path.write_text(json.dumps(real))
    result = validate(path)
    assert {name: shape["error_pct"] for name, shape in result["shapes"].items()} == {"balanced": 0.0,
                                                                                      "rollout_heavy": 0.0}
    assert result["met"]
    # a switch in each phase whose pool last served the other job: every phase of the pair
    assert predict_span(real["shapes"]["balanced"]["solo_phases"], switch_seconds=0.5) == pytest.approx(
        2 * k * 1.5 + 1.5)
    out = tmp_path / "mux_sim.json"
    out.write_text(json.dumps({"figures": {"kept": 1}}))
    main(["validate", str(path), "--out", str(out)])
    written = json.loads(out.read_text())
    assert written["figures"] == {"kept": 1} and written["validation"]["shapes"]["balanced"]["within_goal"]


def test_early_release_lets_the_next_rollout_start_before_the_tail_ends() -> None:
    tail = Job("a", 0.0, 1, 1, (Step(10.0, 1.0, tail=4.0),))
    other = Job("b", 0.0, 1, 1, (Step(10.0, 1.0),))
    held, _ = span([tail, other])
    released, group = span([tail, other], Knobs(switch_seconds=0.0, release=0.8, tail_drag=0.0))
    assert held == 21.0 and released == 17.0  # b's rollout starts at 6 instead of 10
    assert group.rollout.busy == [("a", 0.0, 6.0), ("b", 6.0, 16.0)]
    dragged, _ = span([tail, other], Knobs(switch_seconds=0.0, release=0.8, tail_drag=0.5))
    assert dragged == 19.0  # b's 10 s overlap a's 4 s tail: 2 s slower


def test_admission_plans_the_cycle_on_the_quantile_and_the_slo_on_the_mean_step() -> None:
    # fast most steps, slow one in ten: its 90th percentile (interpolated) is well above its mean
    noisy = Job("noisy", 0.0, 8, 8, (Step(1.0, 1.0),) * 9 + (Step(3.0, 1.0),), slo=1.2)
    profile = noisy.profile(0.9, switch_seconds=0.5)
    assert (profile.rollout, profile.train) == pytest.approx((1.2 + 0.5, 1.0 + 0.5))
    assert profile.budget == pytest.approx(1.2 * 2.2)  # 1.2x its mean step alone (2.64 s), not its planned 3.2 s
    partner = job("partner", 1.0, 1.0, 10)
    knobs = Knobs(switch_seconds=0.5, release=None)
    # the pair's planned cycle (3.2 s) is past the noisy job's budget: kept apart, both meet their SLOs
    apart = simulate(RollMux(), [noisy, partner], Fleet(), knobs)
    assert apart.slo_attainment == 1.0 and apart.gpu_hours["rollout"] == pytest.approx(2 * 8 * 22 / 3600, rel=0.1)
    together = simulate(Partition([["noisy", "partner"]]), [noisy, partner], Fleet(), knobs)
    assert not together.records[0].slo_met  # what a budget on the planned 3.2 s (3.84 s) would have let in


@settings(max_examples=60, deadline=None)
@given(phases=st.lists(st.tuples(st.floats(0.1, 10.0), st.floats(0.1, 10.0)), min_size=1, max_size=4),
       steps=st.integers(1, 5))
def test_round_robin_never_beats_the_cycle_bound_and_never_shares_a_pool(phases: list[tuple[float, float]],
                                                                         steps: int) -> None:
    jobs = [job(f"j{i}", r, t, steps) for i, (r, t) in enumerate(phases)]
    seconds, group = span(jobs)
    assert seconds >= steps * cycle_time([Profile(r, t) for r, t in phases]) * (1 - 1e-9)
    for pool in (group.rollout, group.train):
        intervals = sorted((start, end) for _, start, end in pool.busy)
        assert all(prev_end <= start + 1e-9 for (_, prev_end), (start, _) in itertools.pairwise(intervals))
        assert len(intervals) == steps * len(jobs)
    assert math.isclose(sum(e - s for _, s, e in group.rollout.busy), steps * sum(r for r, _ in phases))
