"""Software-engineering tasks on real repositories: fix a bug so that the project's tests pass, in a docker
sandbox, with the tools of SWE-agent's and OpenHands' interface, graded the way SWE-bench grades."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentgym.core import StepResult
from agentgym.envs.sandbox_io import run_bash
from agentgym.envs.sandboxed import SandboxEnv
from agentgym.envs.swe import editor
from agentgym.envs.swe.grading import Grade, grade, prepare
from agentgym.envs.swe.instances import BUNDLED, Instance, InstanceError, load_instances
from agentgym.envs.swe.patches import hunks
from agentgym.envs.swe.projects import REPO_DIR, repo_spec
from agentgym.messages import Message
from agentgym.sandboxes.base import SandboxSpec
from agentgym.seeding import pick
from agentgym.tasks import SPLIT_SEED_BASE
from agentgym.tools import tool

SYSTEM_PROMPT = """You are fixing a bug in the Python project in {repo}, a git repository, on a Linux machine with
no network. Tools:
- bash(command): runs `bash -c command` in {repo} (time limit {limit:g} s); returns exit status, stdout, stderr.
  Run the tests with `python3 -m pytest <file or test id>`.
- view(path, view_range): a file with line numbers (or lines view_range=[first, last]), or a folder's contents.
- str_replace(path, old_str, new_str): replace old_str, which must occur exactly once in the file, by new_str.
- insert(path, insert_line, new_str): insert new_str after line insert_line (0: at the top).
- create(path, file_text): a new file.
- submit(): you are done; your changes are graded by the project's tests.
Paths may be absolute or relative to {repo}. Change the code, not the tests: test files and pytest's
configuration are restored before grading."""


class SweEnv(SandboxEnv):
    """A repository with a bug, the failing tests it shows and the tests that must keep passing (a SWE-bench
    instance). The agent edits the repository with bash and the file tools, then submits; its diff is applied to a
    clean copy, the tests and pytest's configuration restored, and ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` run.

    Reward: the share of ``FAIL_TO_PASS`` tests that pass, while every ``PASS_TO_PASS`` test still passes (0
    otherwise); success when all of them pass. The episode is graded the same way at the turn limit.

    ``instances``: a JSON-lines file of SWE-bench-format instances (default: the bundled ones); ``image``: the image
    of an instance without ``image_name``, a pattern with ``{instance_id}``, ``{repo}`` or ``{project}``;
    ``python``: the interpreter that runs the tests; ``test_time_limit``: seconds the grading's test run may take.
    Seeds go through the instances of the episode's difficulty (all of them, where none has a difficulty) in file
    order, seed modulo their number; where instances carry a ``split``, a seed of the train split's range draws
    among the train instances and one of the test split's among the test ones. The reset option ``instance_id``
    names one."""

    difficulties = ("easy", "medium", "hard")
    execution = "inline"
    default_max_turns = 30
    reset_options = frozenset({"instance_id"})
    sandbox_spec = SandboxSpec(image="agentgym/swe", workdir=REPO_DIR)

    def __init__(self, *, instances: str | Path | None = None, image: str | None = None, python: str = "python3",
                 test_time_limit: float = 120.0, pool_size: int = 1, time_limit: float = 30.0,
                 **kwargs: Any) -> None:
        super().__init__(backend="docker", pool_size=pool_size, time_limit=time_limit, **kwargs)
        self.instances = {i.instance_id: i for i in load_instances(BUNDLED if instances is None else instances)}
        self.image_pattern, self.python, self.test_time_limit = image, python, test_time_limit
        for instance in self.instances.values():
            self.image_of(instance)
        self.instance: Instance | None = None
        self.base = ""
        """The commit the episode's repository starts at: the diff graded is taken against it."""
        self.graded: Grade | None = None
        self.edits = 0
        """How many of the oracle's edits have been made."""
        self._seed: int | None = None

    def image_of(self, instance: Instance) -> str:
        """The image whose repository ``instance`` starts from."""
        if instance.image_name:
            return instance.image_name
        if self.image_pattern is None:
            raise InstanceError(f"instance {instance.instance_id} names no image_name: pass image= (a name or a "
                                "pattern such as 'sweb.eval.x86_64.{instance_id}')")
        return self.image_pattern.format(instance_id=instance.instance_id, repo=instance.repo,
                                         project=instance.project)

    def spec_of(self, instance: Instance) -> SandboxSpec:
        return repo_spec(self.image_of(instance))

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.instance = self._choose(difficulty, options.get("instance_id"))
        self.graded, self.edits = None, 0
        sandbox = await self.start_sandbox(self.spec_of(self.instance))
        self.base = await prepare(sandbox, self.instance)
        return [Message(role="system", content=SYSTEM_PROMPT.format(repo=REPO_DIR, limit=self.time_limit)),
                Message(role="user", content=self.instance.problem_statement)]

    async def areset(self, *, seed: int | None = None,
                     options: dict[str, Any] | None = None) -> tuple[list[Message], dict[str, Any]]:
        self._seed = seed
        return await super().areset(seed=seed, options=options)

    def _choose(self, difficulty: str, instance_id: str | None) -> Instance:
        if instance_id is not None:
            if instance_id not in self.instances:
                raise InstanceError(f"no instance {instance_id!r}; there are {len(self.instances)}, such as "
                                    f"{next(iter(self.instances))}")
            return self.instances[instance_id]
        pool = list(self.instances.values())
        if self._seed is not None and any(i.split for i in pool):
            split = "test" if self._seed >= SPLIT_SEED_BASE["test"] else "train"
            pool = [i for i in pool if i.split in (split, None)]
        tagged = [i for i in pool if i.difficulty is not None]
        choices = [i for i in tagged if i.difficulty == difficulty] if tagged else pool
        if not choices:
            raise InstanceError(f"no instance is {difficulty}; the instances are "
                                f"{sorted({i.difficulty for i in tagged})}")
        return choices[self._seed % len(choices)] if self._seed is not None else pick(self.np_random, choices)

    @tool
    async def bash(self, command: str) -> str:
        """Run a bash command in the repository and return its exit status, stdout and stderr.

        Args:
            command: Run with `bash -c`, e.g. "grep -rn 'def parse' src" or "python3 -m pytest tests/test_x.py".
        """
        return await run_bash(self.sandbox, command, self.time_limit)

    @tool
    async def view(self, path: str, view_range: list[int] | None = None) -> str:
        """Show a file with line numbers, or the files of a folder two levels deep.

        Args:
            path: A file or folder, absolute or relative to the repository.
            view_range: Only these lines of a file: [first, last], last -1 for the end.
        """
        return await editor.edit(self.sandbox, "view", path, view_range=view_range)

    @tool
    async def str_replace(self, path: str, old_str: str, new_str: str = "") -> str:
        """Replace old_str, which must occur exactly once in the file, by new_str.

        Args:
            path: The file to edit.
            old_str: The exact text to replace, whitespace included; enough lines to be unique.
            new_str: The text to put in its place (empty: delete it).
        """
        answer = await editor.edit(self.sandbox, "str_replace", path, old=old_str, new=new_str)
        self.edits += 1
        return answer

    @tool
    async def insert(self, path: str, insert_line: int, new_str: str) -> str:
        """Insert text after a line of a file.

        Args:
            path: The file to edit.
            insert_line: The line after which new_str goes; 0 puts it at the top.
            new_str: The lines to insert.
        """
        return await editor.edit(self.sandbox, "insert", path, line=insert_line, new=new_str)

    @tool
    async def create(self, path: str, file_text: str) -> str:
        """Create a new file (an existing one is not overwritten).

        Args:
            path: Where the file goes; missing folders are made.
            file_text: Its content.
        """
        return await editor.edit(self.sandbox, "create", path, text=file_text)

    @tool
    async def submit(self) -> str:
        """Say you are done: your changes are applied to a clean copy of the repository and the tests run."""
        return (await self._grade()).summary()

    async def astep(self, action: str) -> StepResult:
        messages, reward, terminated, truncated, info = await super().astep(action)
        if truncated and self.graded is None:
            verdict = await self._grade()
            reward += self._take_reward()
            messages = [*messages, Message(role="user", content="Turn limit reached. " + verdict.summary())]
            info["success"] = verdict.resolved
        if self.graded is not None:
            info["report"] = self.graded.report()
        return messages, reward, terminated, truncated, info

    async def _grade(self) -> Grade:
        assert self.instance is not None
        self.graded = await grade(self, self.instance, self.base)
        self.finish(success=self.graded.resolved, reward=self.graded.reward)
        return self.graded

    def _take_reward(self) -> float:
        reward, self._pending_reward = self._pending_reward, 0.0
        return reward

    def oracle_action(self) -> str:
        """The fix, one hunk per ``str_replace`` (its lines with their context), then ``submit``."""
        assert self.instance is not None
        steps = hunks(self.instance.patch)
        if self.edits < len(steps):
            step = steps[self.edits]
            return self.format_call("str_replace", path=step.path, old_str=step.old, new_str=step.new)
        return self.format_call("submit")

    def render_text(self) -> str:
        return self.instance.problem_statement if self.instance is not None else ""


