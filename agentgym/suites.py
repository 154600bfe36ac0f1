"""Benchmark suites: versioned, checksummed task lists with train and test splits.

A suite is a folder holding ``suite.yaml`` (name, description, the SHA-256 of its task list) and
``tasks.jsonl`` (one :class:`~agentgym.tasks.Task` a line). The bundled suites live in
``benchmarks/suites/``; a folder anywhere else is loaded by its path. A task list whose checksum no
longer matches is refused: changing a task makes a new suite version.
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from agentgym.errors import AgentGymError
from agentgym.tasks import Split, TaskSet

SUITE_FILE = "suite.yaml"
TASKS_FILE = "tasks.jsonl"


class SuiteError(AgentGymError, ValueError):
    """A suite that does not exist, or whose task list is not the one it was published with."""


class SuiteCard(BaseModel):
    """The contents of ``suite.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    """``name-vN``, the folder's name."""
    description: str
    sha256: str
    """Checksum of ``tasks.jsonl``, byte for byte."""


class Suite:
    """A loaded suite: its card and its tasks, checked against the checksum."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        card_path = folder / SUITE_FILE
        if not card_path.is_file():
            raise SuiteError(f"{folder} is not a suite (no {SUITE_FILE}); bundled suites: {', '.join(suite_names())}")
        self.card = SuiteCard.model_validate(yaml.safe_load(card_path.read_text()))
        data = (folder / TASKS_FILE).read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest != self.card.sha256:
            raise SuiteError(
                f"{folder / TASKS_FILE} changed: its SHA-256 is {digest}, {self.card.name} was published with "
                f"{self.card.sha256}; a changed task list is a new suite version (copy it to a new -vN folder)"
            )
        self.tasks = TaskSet.load(folder / TASKS_FILE)

    @property
    def name(self) -> str:
        return self.card.name

    @property
    def sha256(self) -> str:
        return self.card.sha256

    def split(self, split: Split) -> TaskSet:
        """The tasks of one split, in file order."""
        return self.tasks.filter(split=split)

    @cached_property
    def env_ids(self) -> list[str]:
        """The environments the suite uses, in order of first appearance."""
        return list(dict.fromkeys(t.env_id for t in self.tasks))

    def __repr__(self) -> str:
        return f"Suite({self.name}, {len(self.tasks)} tasks)"


def suites_root() -> Path:
    """The folder of the bundled suites (``benchmarks/suites`` in the source tree)."""
    return Path(str(resources.files("agentgym.benchmark_suites")))


def suite_names() -> list[str]:
    """The bundled suites' names."""
    return sorted(p.name for p in suites_root().iterdir() if (p / SUITE_FILE).is_file())


def load_suite(name_or_path: str | Path) -> Suite:
    """A bundled suite by name (``games-v0``) or a suite folder by path."""
    bundled = suites_root() / str(name_or_path)
    if isinstance(name_or_path, str) and "/" not in name_or_path and (bundled / SUITE_FILE).is_file():
        return Suite(bundled)
    folder = Path(name_or_path)
    if not folder.is_dir():
        raise SuiteError(f"no suite {str(name_or_path)!r}; bundled suites: {', '.join(suite_names())}")
    return Suite(folder)


def write_suite(folder: Path, name: str, description: str, tasks: TaskSet) -> Suite:
    """Write a suite's task list and card (with the list's checksum) to ``folder`` and load it back."""
    folder.mkdir(parents=True, exist_ok=True)
    tasks.save(folder / TASKS_FILE)
    digest = hashlib.sha256((folder / TASKS_FILE).read_bytes()).hexdigest()
    card = SuiteCard(name=name, description=description, sha256=digest)
    (folder / SUITE_FILE).write_text(yaml.safe_dump(card.model_dump(), sort_keys=False, width=100))
    return Suite(folder)
