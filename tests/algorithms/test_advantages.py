"""Advantage estimators against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from agentgym.algorithms import ADVANTAGES, compute_advantages, dr_grpo, grpo, mc_grpo, reinforce_pp, rloo


def t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def close(actual: torch.Tensor, *expected: float) -> None:
    torch.testing.assert_close(actual, t(*expected), atol=1e-5, rtol=0)


def test_grpo_is_the_z_score_within_the_group_with_bessel_std() -> None:
    # [1, 0, 1, 0]: mean 0.5, unbiased var = 4 * 0.25 / 3 = 1/3, std = 0.57735 -> +-0.5 / 0.57735 = +-0.866025
    # [3, 1, 2]: mean 2, var = (1 + 1 + 0) / 2 = 1 -> [1, -1, 0]
    close(
        grpo(t(1, 0, 1, 0, 3, 1, 2), [0, 0, 0, 0, 1, 1, 1]),
        0.866025,
        -0.866025,
        0.866025,
        -0.866025,
        1.0,
        -1.0,
        0.0,
    )


def test_dr_grpo_only_subtracts_the_group_mean() -> None:
    close(dr_grpo(t(1, 0, 1, 0, 3, 1, 2), [0, 0, 0, 0, 1, 1, 1]), 0.5, -0.5, 0.5, -0.5, 1.0, -1.0, 0.0)


def test_rloo_subtracts_the_mean_of_the_others() -> None:
    # 3 - (1 + 2)/2 = 1.5, 1 - (3 + 2)/2 = -1.5, 2 - (3 + 1)/2 = 0
    close(rloo(t(3, 1, 2), [7, 7, 7]), 1.5, -1.5, 0.0)


def test_mc_grpo_centres_on_the_median() -> None:
    # [0, 0, 1]: median 0 (the mean 1/3 would make both zeros negative); unbiased std = sqrt(1/3) = 0.57735
    close(mc_grpo(t(0, 0, 1), [0, 0, 0], scale_by_std=False), 0.0, 0.0, 1.0)
    close(mc_grpo(t(0, 0, 1), [0, 0, 0]), 0.0, 0.0, 1.732051)
    # an even group takes the midpoint of the two middle rewards: median of [0, 1, 3, 10] is 2
    close(mc_grpo(t(0, 1, 3, 10), [0, 0, 0, 0], scale_by_std=False), -2.0, -1.0, 1.0, 8.0)


def test_reinforce_pp_normalises_over_the_whole_batch() -> None:
    # [1, 2, 3, 4]: mean 2.5, unbiased var = (2.25 + 0.25 + 0.25 + 2.25) / 3 = 5/3, std = 1.290994
    close(reinforce_pp(t(1, 2, 3, 4), [0, 0, 1, 1]), -1.161895, -0.387298, 0.387298, 1.161895)
    # with the group baseline: [-0.5, 0.5, -0.5, 0.5], mean 0, std = sqrt(1/3) -> +-0.866025
    close(
        reinforce_pp(t(1, 2, 3, 4), [0, 0, 1, 1], group_baseline=True),
        -0.866025,
        0.866025,
        -0.866025,
        0.866025,
    )


@pytest.mark.parametrize("name", sorted(ADVANTAGES))
def test_errored_trajectories_get_zero_and_stay_out_of_the_statistics(name: str) -> None:
    rewards, groups = t(1, 0, 100, 1, 0), [0, 0, 0, 0, 0]
    valid = torch.tensor([True, True, False, True, True])
    advantages = compute_advantages(name, rewards, groups, valid)
    assert advantages[2] == 0
    torch.testing.assert_close(advantages[valid], compute_advantages(name, t(1, 0, 1, 0), [0, 0, 0, 0]))


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo", "mc_grpo"])
def test_lone_and_all_equal_groups_give_zero(name: str) -> None:
    # group 0: one member; group 1: all equal; group 2: one valid member left once the error is out
    advantages = compute_advantages(
        name, t(5, 1, 1, 1, 0, 9), [0, 1, 1, 1, 2, 2], torch.tensor([True, True, True, True, True, False])
    )
    assert torch.equal(advantages, torch.zeros(6, dtype=torch.float64))


def test_groups_can_be_a_tensor_and_rewards_integers() -> None:
    advantages = dr_grpo(torch.tensor([1, 0, 2, 4]), torch.tensor([3, 3, 5, 5]))
    torch.testing.assert_close(advantages, torch.tensor([0.5, -0.5, -1.0, 1.0]))


def test_bad_inputs_name_what_to_change() -> None:
    with pytest.raises(ValueError, match="unknown advantage estimator 'ppo'; choose one of: grpo, dr_grpo"):
        compute_advantages("ppo", t(1, 0), [0, 0])
    with pytest.raises(ValueError, match=r"groups must give one group id per reward \(2\), got 3"):
        grpo(t(1, 0), [0, 0, 0])
    with pytest.raises(ValueError, match="valid must be one flag per reward"):
        grpo(t(1, 0), [0, 0], torch.tensor([True]))
    with pytest.raises(ValueError, match="rewards must be 1-D"):
        grpo(torch.zeros(2, 2), [0, 0])
