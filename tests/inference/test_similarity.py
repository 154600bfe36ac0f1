"""LATR's closeness measures against hand-computed values and their properties: edit distance, suffix match,
ROUGE-L, and the rule that prunes when any measure given a threshold says close."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentgym.inference.similarity import edit_distance, look_alike, rouge_l, suffix_match

spans = st.lists(st.integers(0, 4), max_size=12)


def test_edit_distance_against_hand_computed_values():
    assert edit_distance([1, 2, 3], [1, 2, 3]) == 0
    assert edit_distance([1, 2, 3], [1, 9, 3]) == 1  # one substitution
    assert edit_distance([1, 2, 3, 4], [2, 3, 4, 5]) == 2  # one deletion, one insertion
    assert edit_distance([], [4, 5]) == 2
    assert edit_distance([5, 6, 7], [7, 6, 5]) == 2


@given(spans, spans)
def test_edit_distance_is_symmetric_and_bounded(a, b):
    distance = edit_distance(a, b)
    assert distance == edit_distance(b, a)
    assert abs(len(a) - len(b)) <= distance <= max(len(a), len(b))
    assert (distance == 0) == (a == b)


def test_suffix_match_against_hand_computed_values():
    assert suffix_match([1, 2, 3, 4], [9, 9, 3, 4]) == 0.5  # both end in 3 4
    assert suffix_match([1, 2, 3, 4], [3, 4, 9, 9]) == 0.5  # a's suffix 3 4 occurs early in b
    assert suffix_match([1, 2, 3, 4], [9, 9, 9, 1]) == 0.25  # b's suffix 1 occurs in a
    assert suffix_match([1, 2, 3, 4], [5, 6, 7, 8]) == 0.0
    assert suffix_match([1, 2], [1, 2]) == 1.0


def test_rouge_l_against_hand_computed_values():
    assert rouge_l([1, 2, 3, 4], [1, 3, 4, 9]) == 0.75  # LCS 1 3 4: precision = recall = 3/4
    assert rouge_l([1, 2], [1, 2, 3, 4]) == 2 * 1.0 * 0.5 / 1.5  # LCS 2: precision 1, recall 1/2
    assert rouge_l([1, 2], [3, 4]) == 0.0 and rouge_l([], [1]) == 0.0


@given(spans, spans)
def test_the_similarities_lie_in_0_1_and_are_1_for_equal_spans(a, b):
    assert 0.0 <= rouge_l(a, b) == rouge_l(b, a) <= 1.0
    if len(a) == len(b):
        assert 0.0 <= suffix_match(a, b) == suffix_match(b, a) <= 1.0
    if a:
        assert rouge_l(a, a) == 1.0 and suffix_match(a, a) == 1.0


def test_a_span_looks_alike_when_any_measure_with_a_threshold_says_so():
    mine, theirs = [1, 2, 3, 4], [9, 9, 3, 4]  # edits 2/4 = 0.5, suffix 0.5, ROUGE-L 0.5
    assert not look_alike(mine, theirs, edit=0.4, suffix=None, rouge=None)
    assert look_alike(mine, theirs, edit=0.6, suffix=None, rouge=None)
    assert look_alike(mine, theirs, edit=0.4, suffix=0.2, rouge=None)  # LATR's math setting: suffix 0.2 ...
    assert not look_alike(mine, theirs, edit=None, suffix=None, rouge=0.5)  # ... ROUGE-L 0.5 is strict
    assert not look_alike(mine, theirs, edit=None, suffix=None, rouge=None)  # no measure: never pruned
