"""Task instances in the SWE-bench format, read from and written to JSON lines.

The fields are SWE-bench's (``instance_id``, ``repo``, ``version``, ``base_commit``, ``patch`` (the fix),
``test_patch``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``, ``problem_statement``) plus SWE-smith's ``image_name`` and
four of agentgym's: ``difficulty``, ``split``, ``setup_patch`` (a diff applied to the image's repository when an episode
starts: the bug, for images that hold the fixed project) and ``pytest_args``. Test lists may be JSON strings, as
SWE-bench's data sets store them. Fields of other data sets are kept as they are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentgym.errors import AgentGymError

BUNDLED = Path(__file__).with_name("data") / "instances.jsonl"
"""The instances of the bundled suite ``swe-v0``, made by :mod:`agentgym.envs.swe.make`."""


class InstanceError(AgentGymError, ValueError):
    """A file of instances that cannot be read, or an instance that is not there."""


class Instance(BaseModel):
    """One task: a repository in an image, a bug, its fix, and the tests that tell them apart."""

    model_config = ConfigDict(extra="allow", frozen=True)
    instance_id: str
    repo: str
    """``owner/name`` of the project upstream."""
    version: str = ""
    base_commit: str = ""
    patch: str
    """The fix, a diff against the repository the agent starts from."""
    test_patch: str = ""
    """A diff applied to the tests before grading (SWE-bench's new tests); empty where the tests are there."""
    FAIL_TO_PASS: list[str] = Field(min_length=1)
    """Tests (pytest node ids) that fail with the bug and pass with the fix."""
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    """Tests that pass with both."""
    problem_statement: str
    image_name: str | None = None
    """The image whose ``/testbed`` holds the repository; ``None``: the environment's image pattern names it."""
    difficulty: str | None = None
    split: Literal["train", "test"] | None = None
    """Where instances carry a split, a seed of the train split's range draws among the train instances and one of
    the test split's among the test ones (``None``: either)."""
    setup_patch: str = ""
    """Applied to the image's repository as an episode starts (the bug, where the image holds the fixed project)."""
    pytest_args: list[str] = Field(default_factory=list)
    """Arguments pytest takes before the test files (a project's deselected slow tests, say)."""

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    @property
    def project(self) -> str:
        """The project's name: the last part of :attr:`repo`."""
        return self.repo.rsplit("/", 1)[-1]


def load_instances(path: Path | str = BUNDLED) -> list[Instance]:
    """The instances in the JSON-lines file ``path``; an :class:`InstanceError` names the line of a bad one."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise InstanceError(f"cannot read instances from {path}: {exc}") from exc
    found, seen = [], set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            instance = Instance.model_validate_json(line)
        except ValueError as exc:
            raise InstanceError(f"{path}:{number} is not a SWE-bench instance: {exc}") from exc
        if instance.instance_id in seen:
            raise InstanceError(f"{path}:{number}: instance_id {instance.instance_id} appears twice")
        seen.add(instance.instance_id)
        found.append(instance)
    if not found:
        raise InstanceError(f"{path} holds no instances")
    return found


def write_instances(instances: Iterable[Instance], path: Path | str) -> None:
    """Write ``instances`` to ``path``, one JSON object a line."""
    Path(path).write_text("".join(instance.model_dump_json() + "\n" for instance in instances))
