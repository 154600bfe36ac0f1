"""The statistics of evaluation: pass@k, the Wilson interval and the paired sign-flip test, against hand values."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgym.evaluation.compare import sign_flip_p_value
from agentgym.evaluation.scores import ks_for, pass_at_k, wilson_interval


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),          # c / n
        (5, 2, 2, 0.7),          # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (10, 1, 5, 0.5),         # 1 - C(9,5)/C(10,5) = 1 - 126/252
        (4, 0, 2, 0.0),
        (4, 4, 3, 1.0),
        (6, 3, 4, 1.0),          # only 3 failures: any 4 samples hold a success
        (20, 5, 10, 1 - 3003 / 184756),  # 1 - C(15,10)/C(20,10)
    ],
)
def test_pass_at_k_matches_hand_computed_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@given(st.integers(1, 8).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_is_the_share_of_k_subsets_holding_a_success(args):
    n, c, k = args
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets), abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, 1, 4), (3, 1, 0), (0, 0, 1)])
def test_pass_at_k_refuses_impossible_counts(n, c, k):
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(n, c, k)


def test_reported_ks_are_powers_of_two_and_the_sample_count():
    assert ks_for(1) == [1] and ks_for(5) == [1, 2, 4, 5] and ks_for(8) == [1, 2, 4, 8]


def test_wilson_interval_matches_reference_values():
    low, high = wilson_interval(8, 10)  # the textbook example: (0.4902, 0.9433)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(10, 10)[1] == 1.0


def test_sign_flip_test_matches_exact_hand_values():
    assert sign_flip_p_value([1, 1, 1]) == pytest.approx(2 / 8)
    assert sign_flip_p_value([1, 1, 1, 1, 1, 0, 0]) == pytest.approx(2 / 32)  # zeros carry no sign
    assert sign_flip_p_value([0.0, 0.0]) == 1.0
    # one sample per task: McNemar's exact test; 7 tasks better, 1 worse: 2 * (1 + 8) / 256
    assert sign_flip_p_value([1] * 7 + [-1]) == pytest.approx(2 * 9 / 256)
    assert sign_flip_p_value([0.5, 0.25]) == pytest.approx(0.5)  # |sums| .75, .25, .25, .75: two reach .75


def test_sign_flip_test_on_many_tasks_agrees_with_the_binomial_tail():
    diffs = [1.0] * 30 + [-1.0] * 10  # 40 discordant tasks: beyond exact enumeration, sampled
    exact = 2 * sum(math.comb(40, i) for i in range(11)) / 2**40
    assert sign_flip_p_value(diffs) == pytest.approx(exact, abs=0.002)
