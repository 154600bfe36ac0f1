"""collate: trajectories as padded rows whose per-token arrays describe the predicted token."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.trainers.batch import collate, shares
from agentgym.trajectory import Trajectory

PAD = 0


def _trajectory(token_ids: list[int], agent_from: int, version: int = 3) -> Trajectory:
    """Prompt tokens before ``agent_from``, agent tokens after it with distinct logprobs and ``version``."""
    agent = [int(i >= agent_from) for i in range(len(token_ids))]
    return Trajectory(
        env_id="test/Batch-v0",
        token_ids=token_ids,
        loss_mask=agent,
        logprobs=[-(t / 100) if a else 0.0 for t, a in zip(token_ids, agent, strict=True)],
        versions=[version if a else -1 for a in agent],
    )


def test_per_token_arrays_describe_the_predicted_token():
    short = _trajectory([11, 12, 13, 14, 15], agent_from=3, version=1)
    long = _trajectory([21, 22, 23, 24, 25, 26, 27], agent_from=2, version=2)
    batch = collate([short, long], torch.tensor([0.5, -0.5]), PAD)

    assert batch.input_ids.shape == (2, 7) and batch.loss_mask.shape == (2, 6)
    for row, t in ((0, long), (1, short)):
        n = len(t.token_ids)
        assert batch.input_ids[row, :n].tolist() == t.token_ids
        assert batch.input_ids[row, n:].tolist() == [PAD] * (7 - n)
        assert batch.attention_mask[row].tolist() == [1] * n + [0] * (7 - n)
        # position t predicts token t+1: its mask, logprob and version are token t+1's
        assert batch.loss_mask[row, : n - 1].tolist() == t.loss_mask[1:]
        assert batch.behaviour_logprobs[row, : n - 1].tolist() == pytest.approx(t.logprobs[1:])
        assert batch.versions[row, : n - 1].tolist() == t.versions[1:]
        assert batch.loss_mask[row, n - 1 :].sum() == 0 and (batch.versions[row, n - 1 :] == -1).all()
    assert batch.agent_tokens == sum(short.loss_mask) + sum(long.loss_mask)


def test_rows_are_sorted_longest_first_with_their_advantages():
    lengths = [3, 7, 5, 2]
    trajectories = [_trajectory(list(range(100 * n, 100 * n + n)), agent_from=1) for n in lengths]
    advantages = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    batch = collate(trajectories, advantages, PAD)

    assert batch.attention_mask.sum(-1).tolist() == [7, 5, 3, 2]
    assert batch.input_ids[:, 0].tolist() == [700, 500, 300, 200]  # each row is its own trajectory...
    assert batch.advantages.tolist() == pytest.approx([0.2, 0.3, 0.1, 0.4])  # ...with its own advantage
    assert batch.advantages.dtype == torch.float32


def test_micro_batches_are_cut_to_their_longest_row():
    lengths = [9, 2, 6, 7, 3]
    trajectories = [_trajectory(list(range(1, n + 1)), agent_from=1) for n in lengths]
    batch = collate(trajectories, torch.arange(5, dtype=torch.float32), PAD)

    micros = list(batch.micro_batches(2))
    assert [m.input_ids.shape for m in micros] == [(2, 9), (2, 6), (1, 2)]
    assert [m.loss_mask.shape for m in micros] == [(2, 8), (2, 5), (1, 1)]
    start = 0
    for micro in micros:
        rows, length = micro.rows, micro.input_ids.shape[1]
        assert torch.equal(micro.input_ids, batch.input_ids[start : start + rows, :length])
        assert torch.equal(micro.versions, batch.versions[start : start + rows, : length - 1])
        assert torch.equal(
            micro.behaviour_logprobs, batch.behaviour_logprobs[start : start + rows, : length - 1]
        )
        assert torch.equal(micro.advantages, batch.advantages[start : start + rows])
        start += rows
    assert sum(m.agent_tokens for m in micros) == batch.agent_tokens  # the cut drops padding only
    (whole,) = batch.micro_batches(8)
    assert torch.equal(whole.input_ids, batch.input_ids) and torch.equal(whole.loss_mask, batch.loss_mask)


def test_a_token_budget_puts_long_rows_few_to_a_pass_and_short_ones_many():
    batch = collate([_trajectory(list(range(1, n + 1)), agent_from=1) for n in [9, 2, 6, 7, 3]],
                    torch.zeros(5), PAD)
    assert [m.input_ids.shape for m in batch.micro_batches(8, max_tokens=14)] == [(1, 9), (2, 7), (2, 3)]
    assert [m.input_ids.shape for m in batch.micro_batches(8, max_tokens=5)] == [(1, 9), (1, 7), (1, 6), (1, 3),
                                                                                  (1, 2)]
    assert [m.rows for m in batch.micro_batches(1, max_tokens=100)] == [1] * 5  # the row cap still holds


def test_a_packed_budget_counts_the_rows_own_tokens():
    batch = collate([_trajectory(list(range(1, n + 1)), agent_from=1) for n in [9, 2, 6, 7, 3]],
                    torch.zeros(5), PAD)
    assert [m.rows for m in batch.micro_batches(8, max_tokens=14, packed=True)] == [1, 2, 2]  # 9 | 7+6 | 3+2
    assert [m.cost(packed=True) for m in batch.micro_batches(8, max_tokens=14, packed=True)] == [9, 13, 5]
    assert batch.cost() == 5 * 9 and batch.cost(packed=True) == 27


@given(lengths=st.lists(st.integers(2, 40), min_size=1, max_size=30), size=st.integers(1, 12),
       budget=st.integers(1, 200), world=st.integers(1, 4), packed=st.booleans())
@settings(max_examples=200, deadline=None)
def test_token_budget_micro_batches_split_the_rows_in_order_within_both_caps(lengths, size, budget, world, packed):
    batch = collate([_trajectory(list(range(1, n + 1)), agent_from=1) for n in lengths],
                    torch.zeros(len(lengths)), PAD)
    micros = list(batch.micro_batches(size, max_tokens=budget, packed=packed))
    assert torch.equal(torch.cat([m.index for m in micros]), batch.index)
    assert all(m.rows <= size and (m.rows == 1 or m.cost(packed=packed) <= budget) for m in micros)
    assert sum(m.agent_tokens for m in micros) == batch.agent_tokens
    dealt = shares(batch, size, world, max_tokens=budget, packed=packed)
    assert len({len(s.micro_batches) for s in dealt}) == 1
    own = [s.micro_batches[: len(s.micro_batches) - s.padding] for s in dealt]
    assert sorted(i for mine in own for micro in mine for i in micro.index.tolist()) == sorted(batch.index.tolist())
    loads = [sum(m.cost(packed=packed) for m in mine) for mine in own]
    most = max(m.cost(packed=packed) for m in micros)
    assert max(loads) - min(loads) <= most  # dealt largest first to the least loaded


def test_bad_input_is_refused_with_a_reason():
    good = _trajectory([1, 2, 3], agent_from=1)
    with pytest.raises(ValueError, match="empty list"):
        collate([], torch.tensor([]), PAD)
    with pytest.raises(ValueError, match="test/Text-v0 has no tokens to train on"):
        collate([good, Trajectory(env_id="test/Text-v0")], torch.tensor([1.0, -1.0]), PAD)
    with pytest.raises(ValueError, match="no tokens to train on"):
        collate([_trajectory([7], agent_from=0)], torch.tensor([1.0]), PAD)
    with pytest.raises(ValueError, match="2 trajectories but 3 advantages"):
        collate([good, good], torch.tensor([1.0, 0.0, -1.0]), PAD)
