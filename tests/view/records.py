"""Episode lines for the viewer's tests, written the way evaluations and training write them (the records'
own ``model_dump_json``), and copies of real run folders to change."""

from __future__ import annotations

import shutil
from pathlib import Path

from agentgym.evaluation.records import EPISODES, EpisodeRecord, RolloutRecord, rollout_record
from agentgym.messages import Message, TextPart, ToolCall
from agentgym.tasks import Task
from agentgym.trajectory import Trajectory, Turn

HOSTILE = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
"""Markup that runs script wherever a page lets it through."""


def episode(seed: int, *, reward: float = 0.0, success: bool = False, status: str = "ok", turns: int = 2,
            env_id: str = "games/Guess-v0", text: str = "guess", options: dict | None = None) -> EpisodeRecord:
    """An evaluation's record of a text policy's episode with ``turns`` turns saying ``text``."""
    task = Task(env_id=env_id, seed=seed, difficulty="easy", split="test", options=options or {})
    trajectory = Trajectory(
        env_id=env_id, task=task, messages=[Message(role="user", content="Guess my number.")],
        turns=[Turn(action=f"{text} {i}", tool_calls=[ToolCall(id=f"c{i}", name="guess", arguments={"n": i})],
                    observation=[Message(role="tool", content=[TextPart(text=f"Higher than {i}.")], name="guess")])
               for i in range(turns)],
        reward=reward, success=success, status=status, error="sandbox died" if status == "error" else None,
        error_traceback="Traceback (most recent call last):\n  boom" if status == "error" else None)
    return EpisodeRecord(key=f"{task.id}#0", task=task, sample=0, status=trajectory.status,
                         success=success, reward=reward, turns=turns, tokens=0, seconds=0.1,
                         error=trajectory.error, trajectory=trajectory)


def rollout(step: int, position: int, member: int, *, reward: float, versions: tuple[int, int] = (0, 0),
            outcome: str = "trained", info: dict | None = None) -> RolloutRecord:
    """A training run's record of a model's episode: two prompt tokens, then four sampled ones of the versions."""
    task = Task(env_id="games/Guess-v0", seed=position)
    trajectory = Trajectory(
        env_id=task.env_id, task=task, turns=[Turn(action="say aeiou")], token_ids=[1, 2, 3, 4, 5, 6],
        loss_mask=[0, 0, 1, 1, 1, 1], logprobs=[0.0, 0.0, -0.1, -0.5, -2.0, -0.05],
        versions=[-1, -1, versions[0], versions[0], versions[1], versions[1]], reward=reward, info=info or {})
    return rollout_record(trajectory, step=step, position=position, carried=False, member=member,
                          outcome=outcome,  # type: ignore[arg-type]
                          advantage=reward - 0.5 if outcome == "trained" else None,
                          trainer_logprobs=[-0.1, -0.9, -1.0, -0.05] if outcome == "trained" else ())


def line(record: EpisodeRecord | RolloutRecord) -> bytes:
    return (record.model_dump_json() + "\n").encode()


def copy_run(run: Path, to: Path) -> Path:
    """A copy of the run folder ``run`` at ``to``, to append to or damage."""
    shutil.copytree(run, to)
    return to


def append(folder: Path, data: bytes, name: str = EPISODES) -> None:
    with (folder / name).open("ab") as f:
        f.write(data)


def hostile_copy(run: Path, to: Path) -> Path:
    """A copy of the evaluation ``run`` with one more episode whose every field a page shows holds :data:`HOSTILE`:
    key, environment id, error, the model's text, the parse error, the observation (inside Markdown too) and info."""
    folder = copy_run(run, to)
    record = EpisodeRecord.model_validate_json((folder / EPISODES).read_bytes().split(b"\n")[0])
    trajectory = record.trajectory
    turn = trajectory.turns[0].model_copy(update={"action": HOSTILE, "action_error": HOSTILE})
    observation = turn.observation[0].model_copy(update={"content": f"# {HOSTILE}\n**{HOSTILE}** `{HOSTILE}` "
                                                                    f"![x](javascript:alert(1)) [a](javascript:x)"})
    turn = turn.model_copy(update={"observation": [observation]})
    task = record.task.model_copy(update={"env_id": f"evil/{HOSTILE}"})
    hostile = record.model_copy(update={
        "key": HOSTILE, "task": task, "error": HOSTILE,
        "trajectory": trajectory.model_copy(update={"turns": [turn], "info": {HOSTILE: HOSTILE}, "task": task})})
    append(folder, line(hostile))
    return folder
