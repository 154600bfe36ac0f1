"""The RollMux cluster simulator (``benchmarks/sim``) against hand-computed cases: the round-robin throughput of
two jobs, the dollars of solo and co-located runs, the brute-force optimum of three jobs, SLO violations, the
queue, the metrics loader and the validation of a multiplexed pair."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.trainers.mux.estimate import Member, Profile, step_times
from agentgym.trainers.mux.plan import Admission, Rules
from benchmarks.sim.__main__ import main
from benchmarks.sim.cluster import GroupRun
from benchmarks.sim.config import Fleet, Knobs
from benchmarks.sim.dispatch import simulate
from benchmarks.sim.jobs import Job, Step, TraceSpec, generate_trace
from benchmarks.sim.optimal import optimal_groups
from benchmarks.sim.phases import Shape, load, load_metrics
from benchmarks.sim.policies import Colocated, Partition, RollMux, Solo
from benchmarks.sim.run import admitted_groups
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
    node = 8 / 3600  # dollars a second of a node of 8 GPUs at $1
    a, b = job("a", 3, 1, memory_gb=600), job("b", 1, 3, memory_gb=600)
    c = job("c", 2, 2, slo=1.3, memory_gb=100)
    # alone: 2 nodes x 4 s each. {a,b}: over memory. {a,c} on one rollout node: 5 s a step for both (the rollout
    # node's 3 + 2; c slowed 1.25x, within 1.3 and a 3% margin): 2 x 5; on two rollout nodes, sharing training:
    # 4 s, but 3 nodes x 4 = 12 > 10. {b,c} alike (the training node's 3 + 2). {a,b,c}: over memory.
    knobs = dataclasses.replace(PLAIN, rules=Rules(slo_margin=0.03))
    groups, cost = optimal_groups([a, b, c], fleet, knobs)
    assert cost == pytest.approx((2 * 5 + 2 * 4) * node)
    assert sorted(groups) in ([[["a"]], [["b", "c"]]], [[["a", "c"]], [["b"]]])
    careful = dataclasses.replace(PLAIN, rules=Rules(slo_margin=0.1))  # 1.25 x 1.1 > 1.3: c shares training only
    assert optimal_groups([a, b, c], fleet, careful)[1] == pytest.approx((3 * 4 + 2 * 4) * node)
    roomy = Fleet(rollout_price=1.0, train_price=1.0)  # {a,b} alternate on one node each: 4 s for both, the best
    groups, cost = optimal_groups([a, b, c], roomy, knobs)
    assert cost == pytest.approx((2 * 4 + 2 * 4) * node) and sorted(groups) == [[["a", "b"]], [["c"]]]
    single = dataclasses.replace(PLAIN, rules=Rules(rollout_scaling=False, slo_margin=0.03))
    assert all(len(group) == 1 for group in optimal_groups([a, b, c], roomy, single)[0])


def test_a_group_past_a_members_slo_is_counted_as_a_violation() -> None:
    a, c = job("a", 3, 1, 50, slo=2.0), job("c", 2, 2, 50, slo=1.2)  # cycle 5: both 1.25x slower
    outcome = simulate(Partition([[["a", "c"]]]), [a, c], Fleet(), PLAIN)
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
    assert group.rollout[0].busy == [("a", 0.0, 6.0), ("b", 6.0, 16.0)]
    dragged, _ = span([tail, other], Knobs(switch_seconds=0.0, release=0.8, tail_drag=0.5))
    assert dragged == 19.0  # b's 10 s overlap a's 4 s tail: 2 s slower


def test_admission_checks_each_slo_like_for_like() -> None:
    # fast most steps, slow two in ten: its 90th percentile is far above its mean
    noisy = Job("noisy", 0.0, 8, 8, (Step(1.0, 1.0),) * 8 + (Step(5.0, 1.0),) * 2, slo=1.2)
    partner = job("partner", 1.0, 0.5, 10)
    switching = Knobs(switch_seconds=0.5, release=None)
    mean = noisy.profile(switching, Fleet())
    assert (mean.rollout, mean.train, mean.budget) == pytest.approx((1.8 + 0.5, 1.0 + 0.5, 1.2 * 2.8))
    mixed = dataclasses.replace(PLAIN, basis="mixed")
    planned = noisy.profile(mixed, Fleet())  # p90 phases against 1.2x the mean step
    assert (planned.rollout, planned.budget) == pytest.approx((5.0, 1.2 * 2.8))
    # alone, the noisy job's planned step (6 s) is past that budget (3.36 s): it could share with nobody. Like
    # for like, the partner fits its bubble (the meta-iteration stays the noisy job's 2.8 s): both keep their SLOs
    assert admitted_groups([noisy, partner], Fleet(), mixed) == [[["noisy"]], [["partner"]]]
    assert len(admitted_groups([noisy, partner], Fleet(), PLAIN)) == 1
    together = simulate(RollMux(), [noisy, partner], Fleet(), PLAIN)
    assert together.slo_attainment == 1.0 and together.jobs_per_pool > 1.5
    quantile = noisy.profile(dataclasses.replace(PLAIN, basis="quantile"), Fleet())
    assert quantile.budget == pytest.approx(1.2 * 6.0)  # Weave's like for like: both sides on p90 phases


def test_each_members_step_time_on_shared_nodes_against_hand_computed_cases() -> None:
    balanced = [Member(Profile(1.0, 1.0), (0,), (0,)), Member(Profile(1.0, 1.0), (0,), (0,))]
    assert step_times(balanced) == [2.0, 2.0]  # they alternate on both nodes, never waiting
    # a long job and a short one, each on a rollout node of its own, sharing training: the short one runs at its
    # own pace but for the training it finds running: the long one's share (100 / 400) times half its phase, over
    # the time the node is free of it (1 - 0.25): 16.7 s; the long one waits 50 / 200 x 25 / 0.75 = 8.3 s, which
    # its lockstep meta-iteration (400 s: its own step) caps
    long, short = Member(Profile(300.0, 100.0), (0,), (0,)), Member(Profile(150.0, 50.0), (1,), (0,))
    assert step_times([long, short]) == pytest.approx([400.0, 200.0 + 100 / 400 * 50 / 0.75])
    assert step_times([long, short], "lockstep") == [400.0, 400.0]
    # training asked for 1.11x the time it has: neither runs at its own pace, the two fall into step (300 s)
    heavy = [Member(Profile(131.0, 169.0), (0,), (0,)), Member(Profile(98.0, 119.0), (1,), (0,))]
    assert step_times(heavy) == pytest.approx([300.0, 300.0])
    # three on one rollout node: it is asked for 3 x 3 / 4 of its time; round robin gives each the same rate
    crowded = [Member(Profile(3.0, 1.0), (0,), (n,)) for n in range(3)]
    assert step_times(crowded) == pytest.approx([9.0] * 3)


def test_a_complementary_pair_shares_one_rollout_and_one_training_node_at_its_own_pace() -> None:
    # each one's rollout fills the other's training: lockstep, each keeps its 75 s step. Its spread (a training
    # that varies, 1.3) puts the M/G/1 wait past the first job's slack under the 10% margin (1.25 x 75 / 1.1 - 75
    # = 10.2 s against 50 / 85.2 x 50 x 1.3 / 2 = 19.1 s): the screen must not rule the group out on the wait alone
    first = Profile(50.0, 25.0, slo=1.25, variability=(1.3, 1.1))
    mirror = Profile(25.0, 50.0, slo=1.25, variability=(1.1, 1.3))
    assert step_times([Member(first, (0,), (0,)), Member(mirror, (0,), (0,))]) == pytest.approx([75.0, 75.0])
    admission = Admission(Fleet().machines(), Rules(rollout_scaling=False))
    admission.place("first", first)
    decision = admission.place("mirror", mirror)
    assert (decision.group, decision.kind) == (0, "packed")
    heavy = Profile(50.0, 25.0, slo=1.25, variability=(1.3, 1.1))  # two rollout-heavy: 100 s a step, 1.33x
    assert admission.place("heavy", heavy).new


def test_rollout_scaling_puts_a_rollout_heavy_job_on_a_node_of_its_own_beside_the_others_training() -> None:
    heavy = [job(f"j{i}", 3.0, 1.0, 20, slo=1.2) for i in range(3)]
    scaling = admitted_groups(heavy, Fleet(), PLAIN)
    assert scaling == [[["j0"], ["j1"], ["j2"]]]  # one group: a rollout node each, one training node
    without = dataclasses.replace(PLAIN, rules=Rules(rollout_scaling=False))
    assert admitted_groups(heavy, Fleet(), without) == [[["j0"]], [["j1"]], [["j2"]]]  # sharing one: 1.5x or more
    outcome, alone = (simulate(policy, heavy, Fleet(), PLAIN) for policy in (RollMux(), Solo()))
    assert outcome.slo_attainment == 1.0
    # 3 rollout nodes and 1 training node where alone each took one of each: 4 nodes' bill against 6
    assert outcome.dollars == pytest.approx(alone.dollars * (3 * 1.85 + 5.28) / (3 * (1.85 + 5.28)), rel=0.02)


def test_admission_keeps_each_nodes_residency_and_weighs_mixed_sizes_only_when_asked() -> None:
    small = [job(f"s{i}", 1.0, 0.1, 10, slo=2.0) for i in range(4)]
    crowded = admitted_groups(small, Fleet(max_resident=2), PLAIN)
    assert all(len(bin) <= 2 for group in crowded for bin in group) and all(
        sum(map(len, group)) <= 2 for group in crowded)  # no node keeps more than two jobs
    big = job("big", 2.0, 1.0, 10, slo=2.0, gpus=16)
    one_size = admitted_groups([big, *small[:1]], Fleet(), PLAIN)
    assert len(one_size) == 2
    mixed = dataclasses.replace(PLAIN, rules=Rules(mixed_sizes=True))
    admission = Admission(Fleet().machines(), mixed.rules)
    for j in (big, small[0]):
        admission.place(j.id, j.profile(mixed, Fleet()))
    (group,) = admission.groups.values()
    assert len(group.members["s0"].train) == 1 and set(group.members["s0"].train) <= set(group.members["big"].train)


@settings(max_examples=60, deadline=None)
@given(phases=st.lists(st.tuples(st.floats(0.1, 10.0), st.floats(0.1, 10.0)), min_size=1, max_size=4),
       steps=st.integers(1, 5))
def test_round_robin_never_beats_the_cycle_bound_and_never_shares_a_pool(phases: list[tuple[float, float]],
                                                                         steps: int) -> None:
    jobs = [job(f"j{i}", r, t, steps) for i, (r, t) in enumerate(phases)]
    seconds, group = span(jobs)
    lockstep = step_times([Member(Profile(r, t), (0,), (0,)) for r, t in phases], "lockstep")
    assert seconds >= steps * lockstep[0] * (1 - 1e-9)
    for pool in (group.rollout[0], group.train[0]):
        intervals = sorted((start, end) for _, start, end in pool.busy)
        assert all(prev_end <= start + 1e-9 for (_, prev_end), (start, _) in itertools.pairwise(intervals))
        assert len(intervals) == steps * len(jobs)
    assert math.isclose(sum(e - s for _, s, e in group.rollout[0].busy), steps * sum(r for r, _ in phases))
