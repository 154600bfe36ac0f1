"""The projects the bundled instances are made from: each one's pinned PyPI source distribution and test set-up,
read from its image definition (``sandboxes/images/swe-<name>/project.json``), which its image is built from."""

from __future__ import annotations

import json
from dataclasses import dataclass

from agentgym.sandboxes.base import SandboxSpec
from agentgym.sandboxes.images import DEFINITIONS

PREFIX = "swe-"
REPO_DIR = "/testbed"
"""Where the repository is in every image, as in SWE-bench's."""


@dataclass(frozen=True)
class Project:
    """One pinned project: its name, upstream repository, version, source and tests."""

    name: str
    repo: str
    version: str
    url: str
    sha256: str
    license: str
    src: str
    """The folder of the repository that holds the package (``.`` or ``src``)."""
    tests: tuple[str, ...]
    """The test files and folders the suite runs."""
    pytest_args: tuple[str, ...]

    @property
    def image(self) -> str:
        return f"agentgym/{PREFIX}{self.name}"


def projects() -> list[Project]:
    """Every project with an image definition, by name."""
    found = []
    for path in sorted(DEFINITIONS.glob(f"{PREFIX}*/project.json")):
        data = json.loads(path.read_text())
        found.append(Project(**{**data, "tests": tuple(data["tests"]), "pytest_args": tuple(data["pytest_args"])}))
    return found


def repo_spec(image: str, *, memory_mb: int = 1024) -> SandboxSpec:
    """The sandbox of an episode (or a grading) on ``image``: its work dir is the image's repository."""
    return SandboxSpec(image=image, workdir=REPO_DIR, workdir_from_image=True, memory_mb=memory_mb, pids=256)
