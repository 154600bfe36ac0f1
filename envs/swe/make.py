"""Make task instances the way SWE-smith does: inject bugs into the functions a project's tests run, and keep a bug
only if the tests tell it apart from the fix, the same way twice.

For each project: its tests run twice on the clean repository (the tests passing both times are the ones that
count; the first run notes which functions ran). Then, for candidate bugs of every kind in turn, at most one per
function: the buggy file is written, the tests run twice, and the bug is kept when some counted tests fail both
times (``FAIL_TO_PASS``), the rest pass both times (``PASS_TO_PASS``), and no counted test changes its outcome
between the runs. Hard instances join two kept bugs of different functions, validated again the same way. Each split
(test, then train) takes bugs of its own, so training never sees a test instance's bug.

    python -m agentgym.envs.swe.make --out envs/swe/data/instances.jsonl      # needs the swe-* images
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from agentgym.envs.sandbox_io import read_back
from agentgym.envs.swe import statements
from agentgym.envs.swe.bugs import KINDS, Bug, apply_edits, candidates
from agentgym.envs.swe.harness import TestRun, run_tests
from agentgym.envs.swe.instances import BUNDLED, Instance, write_instances
from agentgym.envs.swe.patches import make_diff, protected
from agentgym.envs.swe.projects import REPO_DIR, Project, projects, repo_spec
from agentgym.sandboxes import open_sandbox
from agentgym.sandboxes.base import Sandbox

MAX_FAILING = 40
"""A bug that fails more tests than this is dropped: it breaks the project rather than one behaviour."""
DETAILS = 4000
"""Characters kept of each failing test's output, for the problem statements."""
MIN_TIME_LIMIT = 20.0
"""The least time limit of a run of the tests under a bug."""
SPLITS = {"test": {"easy": 3, "medium": 3, "hard": 2}, "train": {"easy": 2, "medium": 2, "hard": 1}}
"""Instances of each split and difficulty made per project, each from bugs of its own."""

_READ = """
import json, sys
print(json.dumps({path: open(path, encoding="utf-8").read() for path in json.load(sys.stdin)}))
"""
_WRITE = """
import json, os, shutil, sys
for path, text in json.load(sys.stdin).items():
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
for root, folders, _ in os.walk("."):
    for folder in [f for f in folders if f == "__pycache__"]:
        shutil.rmtree(os.path.join(root, folder))
"""


@dataclass(frozen=True)
class Kept:
    """Bugs that the tests tell apart from the fix: which tests fail, which pass, and what the failures print."""

    bugs: tuple[Bug, ...]
    failing: tuple[str, ...]
    passing: tuple[str, ...]
    outputs: dict[str, str]
    symptoms: tuple[str, ...] = ()
    """Of bugs joined: the output of a failing test of each one's own."""


class Workbench:
    """One project's repository in a sandbox, and its tests' baseline."""

    def __init__(self, project: Project, sandbox: Sandbox) -> None:
        self.project, self.sandbox = project, sandbox
        self.counted: list[str] = []
        self.covered: frozenset[str] = frozenset()
        self.sources: dict[str, str] = {}
        self.time_limit = 120.0
        """Seconds a run of the tests may take: five times the clean run's (a bug may loop forever)."""

    async def baseline(self) -> None:
        """Run the tests twice on the clean repository; read the files whose functions they ran."""
        first, second = await self.run(coverage=True), await self.run()
        self.time_limit = max(MIN_TIME_LIMIT, 5 * second.seconds)
        if first.problem or second.problem:
            raise RuntimeError(f"{self.project.name}: the clean tests do not run: {first.problem or second.problem}")
        self.counted = sorted(t for t, outcome in first.outcomes.items()
                              if outcome == "passed" and second.outcomes.get(t) == "passed")
        self.covered = first.covered
        files = sorted({entry.rsplit(":", 1)[0] for entry in first.covered})
        files = [f for f in files if f.endswith(".py") and not protected(f) and f != "setup.py"]
        self.sources = await read_back(self.sandbox, _READ, files)

    async def run(self, *, coverage: bool = False, details: int = 0) -> TestRun:
        return await run_tests(self.sandbox, list(self.project.tests), repo=REPO_DIR,
                               pytest_args=self.project.pytest_args, time_limit=self.time_limit,
                               coverage=coverage, details=details)

    def candidates(self) -> list[Bug]:
        found = []
        for path, source in self.sources.items():
            found += candidates(path, source, lambda line, path=path: f"{path}:{line}" in self.covered)
        return found

    async def check(self, bugs: tuple[Bug, ...], most: int = MAX_FAILING) -> Kept | None:
        """Write ``bugs`` into the repository, run the tests twice, put the clean files back; the bugs with their
        tests when they are kept (at most ``most`` failing)."""
        await self.write(buggy_files(bugs))
        try:
            first, second = await self.run(details=DETAILS), await self.run()
        finally:
            await self.write({bug.path: bug.source for bug in bugs})
        if first.problem or second.problem:
            return None
        failing, passing = [], []
        for test in self.counted:
            outcomes = (first.passed(test), second.passed(test))
            if outcomes == (True, True):
                passing.append(test)
            elif outcomes == (False, False):
                failing.append(test)
            else:
                return None  # flaky under the bug
        if not 0 < len(failing) <= most:
            return None
        return Kept(bugs, tuple(failing), tuple(passing), {t: first.details.get(t, "") for t in failing})

    async def write(self, files: dict[str, str]) -> None:
        result = await self.sandbox.exec(["python3", "-I", "-c", _WRITE], timeout=60, stdin=json.dumps(files))
        if not result.ok:
            raise RuntimeError(f"cannot write {', '.join(files)}: {result.stderr[-300:]}")


def buggy_files(bugs: tuple[Bug, ...]) -> dict[str, str]:
    """Each file the bugs touch, with all of their edits made."""
    edits = defaultdict(list)
    for bug in bugs:
        edits[bug.path].append(bug)
    return {path: apply_edits(group[0].source, [bug.edit for bug in group]) for path, group in edits.items()}


def in_turn(bugs: list[Bug], rng: np.random.Generator) -> Iterator[Bug]:
    """``bugs`` shuffled, then taken one kind at a time in turn, so that every kind gets its chance."""
    by_kind: dict[str, list[Bug]] = defaultdict(list)
    for index in rng.permutation(len(bugs)):
        by_kind[bugs[int(index)].kind].append(bugs[int(index)])
    queues = [iter(by_kind[kind]) for kind in KINDS if by_kind[kind]]
    for bug in itertools.chain.from_iterable(itertools.zip_longest(*queues)):
        if bug is not None:
            yield bug


async def make_project(project: Project, seed: int, log: Callable[[str], object] = print) -> list[Instance]:
    """The instances of one project: :data:`SPLITS`' number of each split and difficulty, in that order."""
    sandbox = await open_sandbox("docker", repo_spec(project.image))
    try:
        bench = Workbench(project, sandbox)
        await bench.baseline()
        log(f"{project.name}: {len(bench.counted)} tests count, {len(bench.sources)} files ran")
        wanted = sum(levels["easy"] + levels["medium"] + 2 * levels["hard"] for levels in SPLITS.values())
        kept: list[Kept] = []
        used: set[tuple[str, str]] = set()
        tried = 0
        for bug in in_turn(bench.candidates(), np.random.default_rng(seed)):
            if len(kept) == wanted:
                break
            if (bug.path, bug.function) in used or not bug.changes_code():
                continue
            tried += 1
            found = await bench.check((bug,))
            if found is not None:
                kept.append(found)
                used.add((bug.path, bug.function))
                log(f"{project.name}: kept {bug.kind} in {bug.path}:{bug.function} ({len(found.failing)} failing)")
        log(f"{project.name}: {len(kept)} bugs kept of {tried} tried")
        made: list[Instance] = []
        for split, levels in SPLITS.items():
            singles, kept = kept[: levels["easy"] + levels["medium"]], kept[levels["easy"] + levels["medium"]:]
            joined, kept = kept[: 2 * levels["hard"]], kept[2 * levels["hard"]:]
            made += [instance(project, k, "easy" if i % 2 == 0 else "medium", split) for i, k in enumerate(singles)]
            made += [instance(project, k, "hard", split) for k in await _pairs(bench, joined, levels["hard"])]
        return made
    finally:
        await sandbox.close()


async def _pairs(bench: Workbench, kept: list[Kept], most: int) -> list[Kept]:
    """Join the kept bugs two by two, each bug in one pair at most, up to ``most`` pairs; a pair counts when each
    bug still fails a test of its own."""
    pairs: list[Kept] = []
    joined: set[int] = set()
    for a, b in itertools.combinations(range(len(kept)), 2):
        if len(pairs) == most:
            break
        if joined & {a, b}:
            continue
        joint = await bench.check(kept[a].bugs + kept[b].bugs, most=2 * MAX_FAILING)
        if joint is None:
            continue
        own = [next((t for t in kept[i].failing if t in joint.failing), None) for i in (a, b)]
        if None not in own:
            pairs.append(replace(joint, symptoms=tuple(joint.outputs[t] for t in own if t is not None)))
            joined |= {a, b}
    return pairs


def instance(project: Project, kept: Kept, difficulty: str, split: str) -> Instance:
    """The SWE-bench instance of ``kept`` bugs at ``difficulty``, in ``split``."""
    clean = {bug.path: bug.source for bug in kept.bugs}
    buggy = buggy_files(kept.bugs)
    setup, fix = make_diff(clean, buggy), make_diff(buggy, clean)
    kind = kept.bugs[0].kind if len(kept.bugs) == 1 else "combo"
    test = kept.failing[0]
    if difficulty == "easy":
        statement = statements.easy(test, kept.outputs[test], kept.bugs[0].path)
    elif difficulty == "medium":
        statement = statements.medium(kept.outputs[test])
    else:
        statement = statements.hard(list(kept.symptoms))
    digest = hashlib.sha256(setup.encode()).hexdigest()[:8]
    return Instance(instance_id=f"{project.name}-{project.version}.{kind}__{digest}", repo=project.repo,
                    version=project.version, base_commit=f"sdist:{project.sha256[:12]}", patch=fix,
                    FAIL_TO_PASS=list(kept.failing), PASS_TO_PASS=list(kept.passing), problem_statement=statement,
                    image_name=project.image, difficulty=difficulty, split=split, setup_patch=setup,
                    pytest_args=list(project.pytest_args))


async def make(names: list[str] | None, seed: int, concurrency: int) -> list[Instance]:
    chosen = [p for p in projects() if names is None or p.name in names]
    gate = asyncio.Semaphore(concurrency)

    async def one(project: Project, index: int) -> list[Instance]:
        async with gate:
            return await make_project(project, seed + index)

    made = await asyncio.gather(*(one(p, i) for i, p in enumerate(chosen)))
    return [i for split in SPLITS for i in interleaved([[i for i in group if i.split == split] for group in made])]


def interleaved(groups: list[list[Instance]]) -> list[Instance]:
    """The projects' instances taken in turn, so that neighbours in the file (and consecutive seeds, and the episodes
    an evaluation runs at once) come from different projects, and so from different images' pools."""
    return [i for row in itertools.zip_longest(*groups) for i in row if i is not None]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=BUNDLED)
    parser.add_argument("--projects", nargs="*", help="project names (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args(argv)
    instances = asyncio.run(make(args.projects, args.seed, args.concurrency))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_instances(instances, args.out)
    print(f"{len(instances)} instances written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
