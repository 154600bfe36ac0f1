"""A step's groups made into what the learner trains on: advantages per group, the rows that carry signal, the
batch, the rollout's metrics, and the record of every episode the step took."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agentgym.algorithms import compute_advantages
from agentgym.evaluation.records import RolloutLog, rollout_record
from agentgym.trainers.batch import TrainBatch, collate
from agentgym.trainers.config import AlgorithmSection
from agentgym.trainers.draw import StepGroups, staleness
from agentgym.trainers.learner import by_trajectory
from agentgym.trainers.metrics import by_environment
from agentgym.trainers.mixture import Source
from agentgym.trajectory import Trajectory, distinct_actions, has_signal


@dataclass(frozen=True)
class StepBatch:
    """The trained groups' members in order, their advantages, the places of those trained (``keep``: all but
    the members of groups without signal under ``skip_uniform_groups``), their batch (``None``: nothing to train)
    and the rollout's metrics of every episode the step took."""

    trajectories: list[Trajectory]
    advantages: torch.Tensor
    keep: list[int]
    batch: TrainBatch | None
    metrics: dict[str, float]


def step_batch(drawn: StepGroups, algorithm: AlgorithmSection, pad_id: int, version: int,
               sources: list[Source]) -> StepBatch:
    """Advantages per group and the batch of the rows that carry signal, from the groups a step drew while the
    learner was at ``version``."""
    groups = [group.members for group in drawn.trained]
    trajectories = [t for group in groups for t in group]
    rewards = torch.tensor([t.reward for t in trajectories], dtype=torch.float32)
    group_of = [i for i, group in enumerate(groups) for _ in group]
    advantages = compute_advantages(algorithm.advantage, rewards, group_of)
    mixed = [has_signal(group) for group in groups]
    keep = [i for i, g in enumerate(group_of) if mixed[g] or not algorithm.skip_uniform_groups]
    played = trajectories + [t for group in drawn.dropped for t in group.members]
    metrics = _rollout_metrics(played, version)
    metrics.update(by_environment("rollout", played, sources))
    metrics["rollout/mixed_group_fraction"] = sum(mixed) / len(groups)
    metrics["rollout/distinct_action_sequences"] = sum(map(distinct_actions, groups)) / len(groups)
    metrics["rollout/stale_groups_left_out"] = len(drawn.stale)
    if algorithm.dynamic_sampling:
        metrics["dynamic/dropped_groups"] = len(drawn.dropped)
        metrics["dynamic/drawn_groups"] = drawn.closed
    batch = collate([trajectories[i] for i in keep], advantages[keep], pad_id, [group_of[i] for i in keep]) \
        if keep else None
    return StepBatch(trajectories, advantages, keep, batch, metrics)


def record_rollouts(log: RolloutLog, drawn: StepGroups, prepared: StepBatch,
                    trainer_logprobs: dict[tuple[int, int], list[float]], step: int) -> None:
    """Append every episode of the step's groups to ``rollouts.jsonl``: what was trained with its advantage and
    the trainer's logprobs (keyed as :attr:`Learner.trainer_logprobs`), and what was left out, saying why."""
    places = {index: place for place, index in enumerate(prepared.keep)}  # a trained episode's row in the batch
    joined = by_trajectory(trainer_logprobs)
    advantages = prepared.advantages.tolist()
    played = [(group, outcome) for groups, outcome in ((drawn.trained, "trained"), (drawn.dropped, "dropped"),
                                                       (drawn.stale, "stale")) for group in groups]
    members = [(group, member, trajectory, outcome) for group, outcome in played
               for member, trajectory in enumerate(group.members)]
    records = []
    for index, (group, member, trajectory, outcome) in enumerate(members):
        place = places.get(index)
        records.append(rollout_record(
            trajectory, step=step, position=group.id.index, carried=group.id.carried, member=member,
            outcome="uniform" if outcome == "trained" and place is None else outcome,
            advantage=None if place is None else advantages[index],
            trainer_logprobs=() if place is None else joined.get(place, ())))
    log.append(records)


def _rollout_metrics(trajectories: list[Trajectory], version: int) -> dict[str, float]:
    n = len(trajectories)
    return {
        "rollout/reward_mean": sum(t.reward for t in trajectories) / n,
        "rollout/success_rate": sum(t.success for t in trajectories) / n,
        "rollout/turns_mean": sum(t.num_turns for t in trajectories) / n,
        "rollout/truncated_fraction": sum(t.status == "truncated" for t in trajectories) / n,
        "rollout/agent_tokens_mean": sum(sum(t.loss_mask) for t in trajectories) / n,
        "rollout/staleness_max": float(staleness(trajectories, version)),
    }
