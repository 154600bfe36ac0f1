"""The record format of a run's folder, what evaluations and training runs write and the viewer reads.

An evaluation's folder holds what was asked (``manifest.json``), one line per finished episode
(``episodes.jsonl``), one per attempt lost to infrastructure (``infra.jsonl``), and the screens. A training run's
``rollouts.jsonl`` holds one line per episode of every group a step took, whether it trained on it or left it out,
with the step, the group's advantage and the trainer's own logprobs of the tokens, beside the behaviour's the
trajectory holds; its screens go to ``screens/`` as an evaluation's do.

Episodes are appended and flushed as they finish, so a crashed evaluation loses at most the episodes
in flight; :meth:`RunFolder.finished` reads back what is there for ``--resume``. Images leave the
trajectories for ``screens/<sha1>.png`` (the same screen is stored once) and are replaced by a Markdown
image link, so transcripts render them and the episode lines stay small.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentgym.errors import AgentGymError
from agentgym.inference.types import SamplingParams
from agentgym.messages import ImagePart, Message, TextPart
from agentgym.policies.context import ContextPolicy
from agentgym.rollout.config import TreeRollout
from agentgym.tasks import Split, Task
from agentgym.trajectory import Status, Trajectory

RECORD_FORMAT = 1
"""Bumped whenever the fields of a manifest or an episode line change meaning."""
MANIFEST = "manifest.json"
EPISODES = "episodes.jsonl"
INFRA = "infra.jsonl"
SCREENS = "screens"
ROLLOUTS = "rollouts.jsonl"
LOGPROB_DIGITS = 6
"""Decimals kept of a trainer logprob: a float32's noise is below them, and the lines stay half as long."""
Outcome = Literal["trained", "uniform", "dropped", "stale"]
"""What the step did with a group: trained on it; left it out with equal rewards (``algorithm.skip_uniform_groups``
or dynamic sampling's drop); or left it out as older than ``trainer.async_ratio`` versions."""


class RunSpec(BaseModel):
    """What an evaluation plays: the same spec replays the same episodes; ``--resume`` insists on it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format_version: int = RECORD_FORMAT
    agent: str
    """The label of the policy or model in reports and the leaderboard."""
    policy: str | None = None
    """A reference policy (``oracle``, ``random``), or None for a model."""
    engine: str | None = None
    model: str | None = None
    base_url: str | None = None
    tokenizer: str | None = None
    sampling: SamplingParams | None = None
    suite: str | None = None
    suite_sha256: str | None = None
    split: Split = "test"
    tasks_sha256: str
    """Checksum of the task list played (the suite's split, or the tasks generated for named environments)."""
    samples: int = Field(1, ge=1)
    """Episodes per task (K of pass@k)."""
    rollout_sampling: Literal["stochastic", "latr"] = "stochastic"
    """How a task's samples are drawn (``rollout.sampling`` of training): ``stochastic``, each its own episode;
    ``latr``, the task's ``samples`` as one group grown as a tree of episodes (what the tree fell short of refilled
    with stochastic ones). Records from before the field read as ``stochastic``."""
    latr: TreeRollout | None = None
    """LATR's settings of a ``latr`` run (None otherwise)."""
    context: ContextPolicy | None = None
    """A model's context policy (``--context``; None: the default, which truncates a full context)."""
    seed: int = 0
    max_retries: int = 2
    env_args: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Keyword arguments of ``make`` by environment id (``*``: every environment)."""

    @model_validator(mode="after")
    def _latr_settings_with_latr(self) -> RunSpec:
        if (self.latr is not None) != (self.rollout_sampling == "latr"):
            raise ValueError("latr holds LATR's settings exactly when rollout_sampling is latr")
        return self

    def env_kwargs(self, env_id: str) -> dict[str, Any]:
        """The keyword arguments ``env_id`` is made with."""
        return {**self.env_args.get("*", {}), **self.env_args.get(env_id, {})}

    def differences(self, other: RunSpec) -> list[str]:
        """The fields on which two specs differ."""
        mine, theirs = self.model_dump(), other.model_dump()
        return [key for key in mine if mine[key] != theirs[key]]


class EpisodeSummary(BaseModel):
    """What a run's listing shows of one finished episode of one task's sample; ``attempts`` counts the
    infrastructure failures before it. The records that extend it put ``trajectory`` last, so a reader can index
    a line by the JSON before ``"trajectory":`` alone."""

    key: str
    task: Task
    sample: int
    status: Status
    success: bool
    reward: float
    turns: int
    tokens: int
    """Tokens the agent generated (a model's; 0 for text policies)."""
    seconds: float
    error: str | None = None
    error_cause: str | None = None
    attempts: int = 1

    @property
    def scored(self) -> bool:
        """Whether the episode counts in the scores (not an infrastructure error)."""
        return self.status != "error"


class EpisodeRecord(EpisodeSummary):
    """One line of ``episodes.jsonl``: the summary and the episode's whole trajectory."""

    trajectory: Trajectory


class RolloutRecord(EpisodeSummary):
    """One line of ``rollouts.jsonl``: one episode of a group a training step took, and its trajectory."""

    step: int = Field(ge=1)
    """The step that took the group: its trained weights are version ``step``."""
    position: int
    """The group's task position in the run's hand-out order."""
    carried: bool = False
    """A carry-over group (``rollout.carry_over``) of that position's task."""
    outcome: Outcome
    advantage: float | None = None
    """The advantage the loss gave the episode (None where it was not trained)."""
    version_min: int | None = None
    version_max: int | None = None
    """The oldest and newest policy versions that sampled its tokens (None for a policy without tokens)."""
    trainer_logprobs: list[float] = Field(default_factory=list)
    """Per token, aligned with ``trajectory.token_ids``: the trainer's logprob of each agent token under the weights
    the step started from (0 elsewhere); empty where it was not trained."""
    trajectory: Trajectory


class InfraRecord(BaseModel):
    """An attempt lost to infrastructure: retried, or the last attempt when retries ran out."""

    key: str
    task_id: str
    env_id: str
    attempt: int
    cause: str
    error: str
    traceback: str | None = None
    """Where the exception behind it was raised (none for a time limit)."""


def task_key(task: Task, sample: int) -> str:
    return f"{task.id}#{sample}"


def tasks_digest(tasks: list[Task]) -> str:
    """Checksum of a task list, independent of how it was stored."""
    return hashlib.sha256("".join(t.model_dump_json() + "\n" for t in tasks).encode()).hexdigest()


class RunFolder:
    """Writes and reads one evaluation's folder."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def exists(self) -> bool:
        return (self.path / MANIFEST).is_file()

    def spec(self) -> RunSpec:
        if not self.exists:
            raise AgentGymError(f"{self.path} holds no evaluation ({MANIFEST} is missing)")
        return RunSpec.model_validate_json((self.path / MANIFEST).read_text())

    def start(self, spec: RunSpec) -> None:
        """Write the manifest of a new evaluation."""
        (self.path / SCREENS).mkdir(parents=True, exist_ok=True)
        (self.path / MANIFEST).write_text(spec.model_dump_json(indent=2) + "\n")

    def finished(self) -> dict[str, EpisodeRecord]:
        """The latest record of every episode written so far, by key; a torn last line (the process died
        while writing it) is cut off."""
        path = self.path / EPISODES
        if not path.exists():
            return {}
        data = path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) != len(data):
            with path.open("r+b") as f:
                f.truncate(len(complete))
        records = (EpisodeRecord.model_validate_json(line) for line in complete.splitlines() if line.strip())
        return {r.key: r for r in records}

    def infra_errors(self) -> list[InfraRecord]:
        path = self.path / INFRA
        lines = path.read_text().splitlines() if path.exists() else []
        return [InfraRecord.model_validate_json(line) for line in lines if line.strip() and line.endswith("}")]

    def first_traceback(self) -> InfraRecord | None:
        """The first attempt lost to a raised exception: where to start debugging an environment."""
        return next((record for record in self.infra_errors() if record.traceback), None)

    def append(self, task: Task, sample: int, final: Trajectory, failed: list[Trajectory]) -> EpisodeRecord:
        """Record a task sample's final trajectory and the attempts lost before it, durably."""
        key = task_key(task, sample)
        lost = [*failed, final] if final.status == "error" else failed
        for attempt, trajectory in enumerate(lost, start=1):
            cause = str(trajectory.info.get("error_cause", "unknown"))
            self._write(INFRA, InfraRecord(key=key, task_id=task.id, env_id=task.env_id, attempt=attempt,
                                           cause=cause, error=trajectory.error or "",
                                           traceback=trajectory.error_traceback))
        record = EpisodeRecord(
            key=key, task=task, sample=sample, status=final.status, success=final.success and final.status != "error",
            reward=final.reward if final.status != "error" else 0.0, turns=final.num_turns,
            tokens=sum(final.loss_mask) or int(final.info.get("usage", {}).get("completion_tokens", 0)),
            seconds=final.timings.get("total_seconds", 0.0), error=final.error,
            error_cause=final.info.get("error_cause"), attempts=len(failed) + 1,
            trajectory=Screens(self.path).strip(final),
        )
        self._write(EPISODES, record)
        return record

    def _write(self, name: str, record: BaseModel) -> None:
        with (self.path / name).open("a") as f:
            f.write(record.model_dump_json() + "\n")
            f.flush()
            os.fsync(f.fileno())


def rollout_record(trajectory: Trajectory, *, step: int, position: int, carried: bool, member: int,
                   outcome: Outcome, advantage: float | None = None, trainer_logprobs: Sequence[float] = ()
                   ) -> RolloutRecord:
    """The record of one ``member`` of a group, ``trainer_logprobs`` given for its agent tokens in order."""
    if trajectory.task is None:
        raise ValueError(f"a trained episode of {trajectory.env_id} has no task")
    versions = [v for v in trajectory.versions if v >= 0]
    return RolloutRecord(
        key=f"{step}/{position}{'c' if carried else ''}/{member}", task=trajectory.task, sample=member,
        status=trajectory.status, success=trajectory.success, reward=trajectory.reward, turns=trajectory.num_turns,
        tokens=sum(trajectory.loss_mask), seconds=trajectory.timings.get("total_seconds", 0.0),
        error=trajectory.error, error_cause=trajectory.info.get("error_cause"), step=step, position=position,
        carried=carried, outcome=outcome, advantage=advantage,
        version_min=min(versions, default=None), version_max=max(versions, default=None),
        trainer_logprobs=_aligned(trajectory.loss_mask, trainer_logprobs), trajectory=trajectory)


def _aligned(loss_mask: Sequence[int], agent_values: Sequence[float]) -> list[float]:
    if not agent_values:
        return []
    if len(agent_values) != sum(loss_mask):
        raise ValueError(f"{len(agent_values)} trainer logprobs for {sum(loss_mask)} agent tokens")
    values = iter(agent_values)
    return [round(next(values), LOGPROB_DIGITS) if agent else 0.0 for agent in loss_mask]


class RolloutLog:
    """Appends a training run's records to ``run_dir/rollouts.jsonl``, a step's lines in one flushed write."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.screens = Screens(run_dir)

    def append(self, records: Sequence[RolloutRecord]) -> None:
        lines = [r.model_copy(update={"trajectory": self.screens.strip(r.trajectory)}).model_dump_json() + "\n"
                 for r in records]
        with (self.run_dir / ROLLOUTS).open("a") as f:
            f.write("".join(lines))
            f.flush()
            os.fsync(f.fileno())


class Screens:
    """Images moved out of trajectories into ``<folder>/screens/<sha1>.<ext>`` (the same screen stored once), each
    replaced by a Markdown image link relative to ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def strip(self, trajectory: Trajectory) -> Trajectory:
        """``trajectory`` with its images stored and linked."""
        turns = [t.model_copy(update={"observation": [self._links(m) for m in t.observation]})
                 for t in trajectory.turns]
        return trajectory.model_copy(update={"messages": [self._links(m) for m in trajectory.messages],
                                             "turns": turns})

    def _links(self, message: Message) -> Message:
        if not message.images:
            return message
        parts = [self._link(p) if isinstance(p, ImagePart) else p for p in message.content]
        return message.model_copy(update={"content": parts})

    def _link(self, image: ImagePart) -> TextPart:
        data = base64.b64decode(image.data)
        name = f"{hashlib.sha1(data).hexdigest()[:16]}.{image.mime_type.split('/')[-1]}"
        path = self.folder / SCREENS / name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return TextPart(text=f"![screen]({SCREENS}/{name})")
