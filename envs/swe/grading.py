"""Starting an instance's repository, and grading an episode the way SWE-bench does, in a way the agent cannot
game: its diff (taken against the commit the episode started at) is applied to a clean copy of the repository in a
fresh sandbox, with its changes to the tests, pytest's configuration and Python's start-up files left out
(:func:`agentgym.envs.swe.patches.protected`); the instance's test patch goes on top; then ``FAIL_TO_PASS`` and
``PASS_TO_PASS`` run under a time limit through :mod:`agentgym.envs.swe.harness`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentgym.envs.sandbox_io import FILE_TIME
from agentgym.envs.swe.harness import TestRun, files_of, run_tests
from agentgym.envs.swe.instances import Instance
from agentgym.envs.swe.patches import without_protected
from agentgym.sandboxes.base import Sandbox
from agentgym.sandboxes.errors import SandboxError

if TYPE_CHECKING:
    from agentgym.envs.swe.env import SweEnv

DIFF_CHARS = 1_000_000
"""The largest diff graded; a bigger one (a huge file written into the repository) counts as no fix."""
GIT = ["git", "-c", "core.quotepath=off", "-c", "diff.noprefix=false"]
_COMMIT_TIME = f"@{FILE_TIME} +0000"
_PREPARE = """set -e
patch=$(mktemp)
cat > "$patch"
if [ -s "$patch" ]; then git apply --whitespace=nowarn "$patch"; fi
rm -f "$patch"
if [ ! -d .git ]; then git init -q && git add -A && git commit -q --no-verify -m "the repository"
elif ! git diff --quiet HEAD; then git commit -q --no-verify -am "the task"; fi
git rev-parse HEAD"""


async def prepare(sandbox: Sandbox, instance: Instance) -> str:
    """Make the sandbox's repository the instance's starting point (its setup patch applied, committed) and return
    that commit. A failure is the instance's or the image's: a :class:`SandboxError`."""
    result = await sandbox.exec(["bash", "-c", _PREPARE], timeout=120, stdin=instance.setup_patch,
                                env={"GIT_AUTHOR_DATE": _COMMIT_TIME, "GIT_COMMITTER_DATE": _COMMIT_TIME})
    if not result.ok:
        raise SandboxError(f"instance {instance.instance_id}: its repository could not be set up in "
                           f"{sandbox.spec.image}: {result.stderr[-500:]}")
    return result.stdout.strip().splitlines()[-1]


@dataclass(frozen=True)
class Grade:
    """What grading found: the diff taken, the files left out of it, each graded test's outcome, and the verdict."""

    diff: str
    restored: list[str] = field(default_factory=list)
    fail_to_pass: dict[str, str] = field(default_factory=dict)
    pass_to_pass: dict[str, str] = field(default_factory=dict)
    problem: str | None = None
    """Why nothing counts (the diff did not apply, the tests timed out, pytest was patched), if so."""

    @property
    def resolved(self) -> bool:
        return self.problem is None and all(o == "passed" for o in (*self.fail_to_pass.values(),
                                                                     *self.pass_to_pass.values()))

    @property
    def reward(self) -> float:
        """The share of ``FAIL_TO_PASS`` tests passing, while every ``PASS_TO_PASS`` test passes; else 0."""
        if self.problem is not None or any(o != "passed" for o in self.pass_to_pass.values()):
            return 0.0
        return sum(o == "passed" for o in self.fail_to_pass.values()) / max(1, len(self.fail_to_pass))

    def summary(self) -> str:
        """The verdict as the agent reads it."""
        lines = []
        if self.restored:
            lines.append(f"Left out of grading (restored to the original): {', '.join(self.restored)}.")
        if self.problem is not None:
            lines.append(f"Not resolved: {self.problem}.")
            return "\n".join(lines)
        fixed = sum(o == "passed" for o in self.fail_to_pass.values())
        broken = [t for t, o in self.pass_to_pass.items() if o != "passed"]
        lines.append(f"{'Resolved' if self.resolved else 'Not resolved'}: {fixed} of {len(self.fail_to_pass)} "
                     f"failing tests now pass; {len(self.pass_to_pass) - len(broken)} of {len(self.pass_to_pass)} "
                     "tests that passed still pass.")
        still = [t for t, o in self.fail_to_pass.items() if o != "passed"]
        for title, tests in (("Still failing", still), ("Broken by the change", broken)):
            if tests:
                lines.append(f"{title}: {', '.join(tests[:10])}{' ...' if len(tests) > 10 else ''}")
        lines.append(f"Reward: {self.reward:.2f}.")
        return "\n".join(lines)

    def report(self) -> dict[str, Any]:
        """Everything grading found, for the trajectory and the viewer."""
        return {"diff": self.diff, "restored": self.restored, "FAIL_TO_PASS": self.fail_to_pass,
                "PASS_TO_PASS": self.pass_to_pass, "problem": self.problem, "resolved": self.resolved,
                "reward": self.reward}


async def take_diff(sandbox: Sandbox, base: str) -> tuple[str | None, str]:
    """The agent's changes to the repository since ``base`` (new files included), or ``None`` and why not."""
    command = (f"{' '.join(GIT)} add -A && {' '.join(GIT)} diff --cached --binary --no-ext-diff --no-textconv "
               f"--no-color {base}")
    result = await sandbox.exec(["bash", "-c", command], timeout=120)
    if not result.ok:
        return None, f"your changes could not be read with git: {result.stderr.strip()[-300:]}"
    if result.truncated or len(result.stdout) > DIFF_CHARS:
        return None, f"your changes are larger than {DIFF_CHARS} characters"
    return result.stdout, ""


async def grade(env: SweEnv, instance: Instance, base: str) -> Grade:
    """Grade the episode of ``env`` on ``instance``, whose repository started at commit ``base``."""
    diff, why = await take_diff(env.sandbox, base)
    if diff is None:
        return Grade(diff="", problem=why)
    kept, restored = without_protected(diff)
    async with env.another_sandbox(env.spec_of(instance)) as clean:
        await prepare(clean, instance)
        if kept:
            applied = await clean.exec([*GIT, "apply", "--binary", "--whitespace=nowarn", "-"], timeout=120,
                                       stdin=kept)
            if not applied.ok:
                return Grade(diff, restored, problem=f"your diff does not apply to a clean copy of the repository: "
                                                     f"{applied.stderr.strip()[-300:]}")
        if instance.test_patch:
            patched = await clean.exec([*GIT, "apply", "--binary", "-"], timeout=120, stdin=instance.test_patch)
            if not patched.ok:
                raise SandboxError(f"instance {instance.instance_id}: its test_patch does not apply: "
                                   f"{patched.stderr[-300:]}")
        tests = [*instance.FAIL_TO_PASS, *instance.PASS_TO_PASS]
        run = await run_tests(clean, files_of(tests), repo=clean.spec.workdir, python=env.python,
                              pytest_args=tuple(instance.pytest_args), time_limit=env.test_time_limit)
    return Grade(diff, restored, _outcomes(run, instance.FAIL_TO_PASS), _outcomes(run, instance.PASS_TO_PASS),
                 run.problem)


def _outcomes(run: TestRun, tests: list[str]) -> dict[str, str]:
    return {test: run.outcomes.get(test, "not run") for test in tests}
