"""How close a LATR child stayed to its parent: the three measures of LATR's rollout filter, over any sequences.

Within a turn they compare token ids; across turns, the agent's decisions (one element per turn). Each is
written from LATR's ``model/metrics.py`` and ``model/sample_filter.py`` (``RolloutFilter``): the edit distance is
normalised by the span's length and prunes *below* its threshold; suffix match and ROUGE-L are similarities in
[0, 1] and prune *above* theirs. A child is pruned when any measure that has a threshold says so.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def edit_distance(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Levenshtein distance between two sequences (insertions, deletions and substitutions cost 1)."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def suffix_match(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """The longest suffix of either sequence that occurs anywhere in the other, over the length of ``a``
    (LATR's ``suffix_match_score``: two spans that end alike have converged); 0 for empty ``a``."""
    if not a:
        return 0.0
    return max(_longest_suffix_within(a, b), _longest_suffix_within(b, a)) / len(a)


def rouge_l(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """ROUGE-L F1: the longest common subsequence's harmonic mean of precision and recall; 0 if either is empty."""
    if not a or not b:
        return 0.0
    common = _lcs_length(a, b)
    precision, recall = common / len(a), common / len(b)
    return 0.0 if common == 0 else 2 * precision * recall / (precision + recall)


def look_alike(mine: Sequence[Hashable], theirs: Sequence[Hashable], *, edit: float | None,
               suffix: float | None, rouge: float | None) -> bool:
    """Whether a child's span ``mine`` stayed close to its parent's ``theirs`` (the same length: the steps since
    the fork) by any measure given a threshold: edit distance per step below ``edit``, suffix match above
    ``suffix``, ROUGE-L above ``rouge``."""
    steps = max(len(mine), len(theirs), 1)
    return ((edit is not None and edit_distance(mine, theirs) / steps < edit)
            or (suffix is not None and suffix_match(mine, theirs) > suffix)
            or (rouge is not None and rouge_l(mine, theirs) > rouge))


def _longest_suffix_within(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """The length of the longest suffix of ``a`` that is a contiguous run somewhere in ``b``."""
    longest = 0
    for length in range(1, len(a) + 1):
        suffix = list(a[len(a) - length:])
        if not any(list(b[start:start + length]) == suffix for start in range(len(b) - length + 1)):
            break
        longest = length
    return longest


def _lcs_length(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, 1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]
